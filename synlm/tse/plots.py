"""Per-circuit (SyntaxGym) or per-phenomenon (BLiMP) accuracy as grouped horizontal bars
(``plot_units``): a colour a model, bootstrap error bars, untrained marks. Figures are made
without pyplot (``matplotlib.figure.Figure``), rendered by Agg (PNG) and matplotlib's SVG
backend; nothing opens a display."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

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
from synlm.tse.statistics import check_resamples


def plot_units(models: Mapping[str, Runs], benchmark: str, out: Path,
               kind: Literal["circuits", "phenomena"] = "circuits", intervals: bool = True,
               baselines: Mapping[str, Runs] | None = None, field: str = "correct",
               in_vocabulary: bool = False, resamples: int = 1000, confidence: float = 0.95,
               seed: int = 0) -> list[Path]:
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
    paths = []
    for suffix in (".png", ".svg"):
        path = Path(out).with_suffix(suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        fig.savefig(partial, format=suffix[1:], dpi=150)
        os.replace(partial, path)
        paths.append(path)
    return paths
