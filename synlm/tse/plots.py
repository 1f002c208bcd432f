"""Per-circuit (SyntaxGym) or per-phenomenon (BLiMP) accuracy as grouped horizontal bars
(``plot_units``): a colour a model, bootstrap error bars, untrained marks. SyntaxGym's region
figure (``plot_regions``), as its site draws a suite: the mean surprisal of each region under
each condition, a line a condition, a panel a model, with t intervals over items
(``region_means``). Figures are made without pyplot (``matplotlib.figure.Figure``), rendered
by Agg (PNG) and matplotlib's SVG backend; nothing opens a display."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from synlm.errors import InputError
from synlm.tse.measures import (
    PAIR_BENCHMARKS,
    Measure,
    Runs,
    as_runs,
    benchmark_results,
    benchmark_units,
    column_cells,
    grouped_units,
    named_columns,
)
from synlm.tse.statistics import RESAMPLES, check_resamples


def plot_units(models: Mapping[str, Runs], benchmark: str, out: Path,
               kind: Literal["circuits", "phenomena"] = "circuits", intervals: bool = True,
               baselines: Mapping[str, Runs] | None = None, field: str = "correct",
               in_vocabulary: bool = False, resamples: int = RESAMPLES,
               confidence: float = 0.95, seed: int = 0) -> list[Path]:
    """Grouped horizontal bars of the share of items with ``field`` (``correct``: accuracy)
    in each group of ``benchmark``'s units: SyntaxGym's circuits (``kind="circuits"``, over
    the suites the paper scores) or the phenomena of BLiMP or one's own ``pairs``
    (``"phenomena"``). A bar a model, a colour a model, error bars from the item bootstrap
    (as ``synlm.tse.compare.comparison_table``), a black mark across each bar at the model's
    untrained baseline where ``baselines`` are given, and for the two-way choices of pairs a
    dotted line at 50%. Written as ``out`` with the suffixes ``.png`` and ``.svg`` (any suffix of
    ``out`` replaced), each whole or not at all; their paths."""
    wanted = {"circuits": ("syntaxgym",), "phenomena": PAIR_BENCHMARKS}.get(kind)
    if wanted is None:
        raise InputError(f"kind must be 'circuits' or 'phenomena', got {kind!r}")
    if benchmark not in wanted:
        raise InputError(f"{kind} are groups of {' or '.join(wanted)}, not of {benchmark!r}")
    if intervals:
        check_resamples(resamples)
    columns = named_columns(models, baselines)
    results = benchmark_results([runs for _, runs in columns], benchmark)
    groups, _ = grouped_units(benchmark, benchmark_units(results, benchmark))
    if not groups:
        raise InputError(f"no model has {benchmark} results to plot by {kind}")
    measures = [Measure(label, benchmark, frozenset(members), field, in_vocabulary)
                for label, _, members in groups]
    values = {name: column_cells(as_runs(runs, name), measures, resamples if intervals else 0,
                                 confidence, seed) for name, runs in models.items()}
    untrained = {name: column_cells(as_runs(runs, name), measures, 0, confidence, seed)
                 for name, runs in (baselines or {}).items()}

    fig = Figure(figsize=(7, 1.2 + 0.2 * len(groups) * (len(models) + 1)),
                 layout="constrained")
    ax = fig.add_subplot()
    height = 0.8 / len(models)  # a bar's thickness: a group's bars span 0.8
    offsets = [(m - (len(models) - 1) / 2) * height for m in range(len(models))]
    for m, (name, cells) in enumerate(values.items()):
        bars = [(g + offsets[m], c) for g, c in enumerate(cells) if c.value is not None]
        if bars:
            errors = (np.array([[c.value - c.low, c.high - c.value] for _, c in bars]).T
                      if intervals else None)  # (2, bars): below, above
            ax.barh([y for y, _ in bars], [c.value for _, c in bars], height=height,
                    color=f"C{m}", label=name, xerr=errors, capsize=2,
                    error_kw={"elinewidth": 0.8})
    marks = [(g + offsets[m], c.value) for m, name in enumerate(values)
             for g, c in enumerate(untrained.get(name, [])) if c.value is not None]
    if marks:
        ys = np.array([y for y, _ in marks])
        ax.vlines([x for _, x in marks], ys - height / 2, ys + height / 2, colors="black",
                  linewidth=2, label="untrained")
    if benchmark in PAIR_BENCHMARKS:
        ax.axvline(0.5, color="grey", linestyle=":", linewidth=1, label="50%")
    ax.set_yticks(range(len(groups)), [label.split("/", 1)[1] for label, _, _ in groups])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    what = "accuracy" if field == "correct" else f"share of items with {field}"
    scope = " (in vocabulary)" if in_vocabulary else ""
    ax.set_xlabel(f"{what}{scope}" + (f"; bars: {confidence:.0%} item-bootstrap intervals"
                                      if intervals else ""))
    ax.set_title("SyntaxGym circuits" if kind == "circuits" else
                 f"{'BLiMP' if benchmark == 'blimp' else benchmark} phenomena")
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i] not in values)  # models first
    fig.legend([handles[i] for i in order], [labels[i] for i in order], fontsize="small",
               loc="outside right upper")
    return save_figure(fig, out)


def save_figure(fig: Figure, out: Path) -> list[Path]:
    """``fig`` as ``out`` with the suffixes ``.png`` and ``.svg`` (any suffix of ``out``
    replaced), each written whole or not at all; their paths."""
    paths = []
    for suffix in (".png", ".svg"):
        path = Path(out).with_suffix(suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        fig.savefig(partial, format=suffix[1:], dpi=150)
        os.replace(partial, path)
        paths.append(path)
    return paths


#: What a suite's name may not bring into a file name (its own name may hold anything).
UNSAFE = re.compile(r"[^\w.-]")


@dataclass(frozen=True)
class RegionMean:
    """A region's surprisal under one condition of a suite, over its items: the ``mean`` in
    bits, the bounds of its t interval (``low``, ``high``; None with a single item) and
    ``n``, the items it rests on."""

    mean: float
    low: float | None
    high: float | None
    n: int


def region_means(records: Iterable[Mapping[str, Any]], confidence: float = 0.95
                 ) -> dict[str, dict[str, dict[int, RegionMean]]]:
    """suite -> condition -> region number -> ``RegionMean`` of SyntaxGym item ``records``
    (a SyntaxGym ``BenchmarkResult``'s: ``suite``, ``surprisals`` {condition: {region: nats}};
    an item without a parse has none and is left out), in bits. The interval is Student's t
    over the items: mean ± t(1 - (1 - confidence) / 2, n - 1) · s / sqrt(n), s the sample
    standard deviation (n - 1 in its denominator). Suites, conditions and regions in the
    order the records first give them, regions by number."""
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be between 0 and 1, got {confidence}")
    values: dict[str, dict[str, dict[int, list[float]]]] = {}
    for record in records:
        for condition, regions in record.get("surprisals", {}).items():
            by_region = values.setdefault(record["suite"], {}).setdefault(condition, {})
            for region, nats in sorted(regions.items(), key=lambda kv: int(kv[0])):
                by_region.setdefault(int(region), []).append(nats / math.log(2))
    return {suite: {condition: {region: _mean_and_interval(bits, confidence)
                                for region, bits in regions.items()}
                    for condition, regions in conditions.items()}
            for suite, conditions in values.items()}


def _mean_and_interval(values: Sequence[float], confidence: float) -> RegionMean:
    from scipy import stats

    mean = float(np.mean(values))
    if len(values) < 2:
        return RegionMean(mean, None, None, len(values))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)
                 * np.std(values, ddof=1) / math.sqrt(len(values)))
    return RegionMean(mean, mean - half, mean + half, len(values))


def region_figure(suite: str, models: Mapping[str, Mapping[str, Mapping[int, RegionMean]]],
                  region_names: Mapping[int, str] | None = None,
                  confidence: float = 0.95) -> Figure:
    """SyntaxGym's figure of ``suite``: a panel a model (``models``: name -> condition ->
    region -> ``RegionMean``, as ``region_means`` gives a suite), sharing the y axis; in
    each a line a condition (one colour a condition in every panel) through the regions'
    mean surprisals, the regions in number order on the x axis under their names
    (``region_names``), each condition's points a little aside from the others' so that
    their error bars (the t intervals; none for a region of one item) do not hide
    each other."""
    numbers = sorted({r for conditions in models.values() for regions in conditions.values()
                      for r in regions})
    at = {number: x for x, number in enumerate(numbers)}
    order = list(dict.fromkeys(c for conditions in models.values() for c in conditions))
    colours = {c: f"C{i}" for i, c in enumerate(order)}
    dodge = {c: (i - (len(order) - 1) / 2) * 0.05 for i, c in enumerate(order)}  # bars apart
    fig = Figure(figsize=(1.5 + (1 + 0.7 * len(numbers)) * len(models), 3.6),
                 layout="constrained")
    axes = fig.subplots(1, len(models), sharey=True, squeeze=False)[0]
    for ax, (model, conditions) in zip(axes, models.items()):
        for condition, regions in conditions.items():
            shown = [(at[r] + dodge[condition], regions[r]) for r in sorted(regions)]
            ax.plot([x for x, _ in shown], [m.mean for _, m in shown], marker="o",
                    color=colours[condition], label=condition)
            bounded = [(x, m) for x, m in shown if m.low is not None and m.high is not None]
            if bounded:
                ax.errorbar([x for x, _ in bounded], [m.mean for _, m in bounded],
                            yerr=np.array([[m.mean - m.low, m.high - m.mean]
                                           for _, m in bounded]).T,  # (2, points)
                            fmt="none", ecolor=colours[condition], capsize=3, elinewidth=0.8)
        ax.set_xticks(range(len(numbers)), [(region_names or {}).get(n, str(n))
                                            for n in numbers], rotation=30, ha="right")
        ax.set_title(model, fontsize="medium")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean surprisal (bits)")
    fig.suptitle(suite)
    fig.supxlabel(f"region; bars: {confidence:.0%} t intervals over items", fontsize="small")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="small", loc="outside right center", title="condition")
    return fig


def plot_regions(models: Mapping[str, Runs], folder: Path,
                 confidence: float = 0.95) -> list[Path]:
    """SyntaxGym's region figure (``region_figure``) of each suite that the ``models``
    (name -> results: benchmark -> ``BenchmarkResult``, or a list of them, its seeds, whose
    items are pooled) were scored on, as ``folder/<suite>.png`` and ``.svg``; the paths (none
    without SyntaxGym results)."""
    results = {name: [r["syntaxgym"] for r in as_runs(runs, name) if "syntaxgym" in r]
               for name, runs in models.items()}
    results = {name: scored for name, scored in results.items() if scored}
    means = {name: region_means([record for result in scored for record in result.records],
                                confidence) for name, scored in results.items()}
    names = {suite: {int(k): v for k, v in regions.items()} for scored in results.values()
             for result in scored
             for suite, regions in result.summary.get("region_names", {}).items()}
    paths: list[Path] = []
    for suite in dict.fromkeys(s for by_suite in means.values() for s in by_suite):
        fig = region_figure(suite, {name: m[suite] for name, m in means.items() if suite in m},
                            names.get(suite), confidence)
        paths += save_figure(fig, folder / (UNSAFE.sub("_", suite) + ".png"))
    return paths
