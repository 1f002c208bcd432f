"""What a paper reports from evaluated models: per-item outcomes, bootstrap intervals, paired
tests between models, and the side-by-side tables and plots, from ``BenchmarkResult``s alone
(no model is needed: results read back from their records will do).

- ``item_outcomes``: each unit's per-item outcomes in record order (a BLiMP paradigm, a
  SyntaxGym suite, a Marvin & Linzen Table 1 row ``"Section/Row"``), so two models evaluated
  on the same data align item by item.
- ``bootstrap_interval``: the item bootstrap (Efron & Tibshirani 1993, *An Introduction to
  the Bootstrap*, ch. 6 and 13): the items of each unit are resampled with replacement within
  the unit, the aggregate of the unit accuracies (``mean_of_units``, the headline of BLiMP
  and SyntaxGym; ``pooled``) is recomputed on every resample, and the interval is the
  percentile interval of those. Only the items vary: the units are fixed by the benchmark.
- ``paired_test``: two models on the same items. The difference of their aggregates, a
  paired bootstrap interval of it (the same resampled items for both models) and a
  two-sided p-value from a paired approximate randomisation test (Noreen 1989; Riezler &
  Maxwell 2005, "On Some Pitfalls in Automatic Evaluation and Significance Testing for MT";
  Dror et al. 2018, "The Hitchhiker's Guide to Testing Statistical Significance in NLP"):
  under the null hypothesis the two models are exchangeable on each item, so each item's two
  outcomes are swapped with probability 1/2, and p = (1 + #{|d*| >= |d|}) / (1 + R) over R
  shuffles (the +1 counts the observed assignment: p is never 0, at least 1 / (1 + R)).
  ``paired_tests`` runs it for every headline measure two models share.
- ``comparison_table``: a row per headline measure (or per phenomenon and paradigm, circuit
  and suite, section and Table 1 row), a column per model and one per model's untrained
  baseline; every value with its interval and the number of pairs or items it rests on.
  Written by ``to_markdown``, ``to_csv``, ``to_latex`` and ``write_tables``.
- ``plot_units``: per-circuit (SyntaxGym) or per-phenomenon (BLiMP) accuracy as grouped
  horizontal bars, a colour a model, bootstrap error bars, untrained marks.

The measures are the results' headline measures (``BenchmarkResult.headline``), recomputed
from the records with the aggregates of each paper (``synlm.tse.benchmarks``): BLiMP's
accuracy and a phenomenon's are unweighted means over paradigms; the SG score and a circuit's
are means over suites, after the paper's exclusions; a Marvin & Linzen row pools its items and
a section is the unweighted mean of its rows (synlm's summary), for whatever each section
reports (the NPI rows: each pairwise comparison its records carry). A measure's record field
follows from its name: ``accuracy`` and ``sg_score`` read ``correct``, ``unknown_share``
reads ``unknown``, any other name the field of that name; ``in_vocabulary_<name>`` is
``<name>`` over the pairs or items without an unknown word where it matters, units with none
left out, as the headline does. A model given as several results (seeds) is their mean, and
its interval that of the seed mean, every seed resampled on the same items.

Every resampling draws from ``numpy.random.default_rng(seed)``, unit by unit in the units'
order, one ``integers`` draw of shape (resamples, items) per unit, so a result is the same on
every run. Figures are made without pyplot (``matplotlib.figure.Figure``), rendered by Agg
(PNG) and matplotlib's SVG backend; nothing opens a display.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from synlm.data.vocab import atomic_write_text
from synlm.errors import InputError
from synlm.tse.benchmarks import BENCHMARKS, ML_SECTIONS, BenchmarkResult
from synlm.tse.marvin_linzen import TABLE1
from synlm.tse.syntaxgym import CIRCUITS, is_excluded, suite_circuit

#: An aggregate of unit accuracies: ``(accuracy (..., U), items (U,)) -> (...)``, the
#: units' accuracies (under each resample: leading axes) and their numbers of items.
Aggregate = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Outcomes by unit (``item_outcomes``), or one unit's as a plain sequence.
Outcomes = Mapping[str, Sequence[bool]] | Sequence[bool]
#: One evaluation of a model: benchmark name -> its result.
Results = Mapping[str, BenchmarkResult]
#: A model in a table: one evaluation, or several (seeds) to average.
Runs = Results | Sequence[Results]

#: Benchmarks of BLiMP's kind: pairs under a paradigm ``UID`` and its ``phenomenon``
#: (``pairs``: a researcher's own, summarised as BLiMP is).
PAIR_BENCHMARKS = ("blimp", "pairs")
#: The Marvin & Linzen unit of each template: its Table 1 row, ``"Section/Row"``.
ML_ROW = {template: f"{section}/{row}" for section, row, templates in TABLE1
          for template in templates}
_ML_ORDER = {f"{section}/{row}": k for k, (section, row, _) in enumerate(TABLE1)}
_ML_SHORT = {section: short for short, section in ML_SECTIONS.items()}
#: Unit-level names of headline measures named after their benchmark's aggregate.
_UNIT_NAMES = {"sg_score": "accuracy", "in_vocabulary_sg_score": "in_vocabulary_accuracy"}
#: Differences of aggregates closer than this count as equal in the randomisation test
#: (a shuffle that reproduces the observed difference up to rounding is as extreme).
_TIE = 1e-12


def mean_of_units(accuracy: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The unweighted mean of the unit accuracies: BLiMP's accuracy (over paradigms), the
    SG score (over suites), a Marvin & Linzen section (over rows). (..., U) -> (...)."""
    return accuracy.mean(axis=-1)


def pooled(accuracy: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The accuracy over all the units' items together: correct items over items.
    (..., U), (U,) -> (...)."""
    return accuracy @ items / items.sum()


def unit_of(benchmark: str, record: Mapping[str, Any]) -> str:
    """The unit of a record: its paradigm (``UID``: BLiMP, ``pairs``), SyntaxGym suite, or
    Marvin & Linzen Table 1 row (``"Section/Row"``, ``ML_ROW``)."""
    if benchmark in PAIR_BENCHMARKS:
        return record["UID"]
    if benchmark == "syntaxgym":
        return record["suite"]
    if benchmark == "marvin_linzen":
        return ML_ROW[record["template"]]
    raise InputError(f"unknown benchmark {benchmark!r}; expected one of "
                     f"{(*BENCHMARKS, 'pairs')}")


def _ordered(benchmark: str, units: dict[str, Any]) -> dict[str, Any]:
    """Units in record order; Marvin & Linzen's in Table 1's."""
    if benchmark == "marvin_linzen":
        return dict(sorted(units.items(), key=lambda unit: _ML_ORDER[unit[0]]))
    return units


def _collect(benchmark: str, record_sets: Sequence[Sequence[Mapping[str, Any]]], field: str,
             in_vocabulary: bool) -> list[dict[str, list[bool]]]:
    """``field`` of each set of records (evaluations of the same items), unit by unit in
    lockstep: an item is kept when every set's record has the field and, ``in_vocabulary``,
    no set read an unknown word where it matters."""
    if len({len(records) for records in record_sets}) > 1:
        raise InputError(f"{benchmark}: results of {[len(r) for r in record_sets]} records "
                         "cannot be compared item by item")
    found: list[dict[str, list[bool]]] = [{} for _ in record_sets]
    seen = False
    for number, records in enumerate(zip(*record_sets)):
        units = {unit_of(benchmark, record) for record in records}
        if len(units) > 1:
            raise InputError(f"{benchmark}: record {number} is of {sorted(units)}: the results "
                             "were not evaluated on the same items in the same order")
        if not all(field in record for record in records):
            continue
        seen = True
        if in_vocabulary and any(record["unknown"] for record in records):
            continue
        (unit,) = units
        for outcomes, record in zip(found, records):
            outcomes.setdefault(unit, []).append(bool(record[field]))
    if record_sets and record_sets[0] and not seen:
        raise InputError(f"{benchmark}: no record has the field {field!r}; the first has "
                         f"{', '.join(record_sets[0][0])}")
    return [_ordered(benchmark, outcomes) for outcomes in found]


def item_outcomes(result: BenchmarkResult, field: str = "correct",
                  in_vocabulary: bool = False) -> dict[str, list[bool]]:
    """Each unit's per-item ``field`` (``correct``, ``unknown``, or another boolean of the
    records, e.g. a Marvin & Linzen NPI comparison such as ``grammatical_gt_intrusive``), in
    record order; units in record order (Marvin & Linzen: Table 1's). Records without the
    field are left out (agreement items for an NPI comparison), and so, with
    ``in_vocabulary``, are those with an unknown word where it matters; a unit left with none
    is left out. In vocabulary, two models' lists align only when they read the same words as
    unknown: ``paired_tests`` keeps the items in vocabulary for both."""
    return _collect(result.name, [result.records], field, in_vocabulary)[0]


def _arrays(outcomes: Outcomes) -> dict[str, np.ndarray]:
    """Outcomes as boolean arrays by unit; a plain sequence is one unit."""
    by_unit = outcomes if isinstance(outcomes, Mapping) else {"": outcomes}
    arrays = {unit: np.asarray(values, dtype=bool) for unit, values in by_unit.items()}
    if not arrays:
        raise InputError("no unit to aggregate")
    empty = [unit for unit, values in arrays.items() if values.size == 0]
    if empty:
        raise InputError(f"unit {empty[0]!r} has no items")
    return arrays


def _unit_accuracies(sets: Sequence[Mapping[str, np.ndarray]], resamples: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The accuracy of each unit of each outcome set (models, or seeds), as observed and
    under ``resamples`` item resamples, the same resampled items for every set: point
    (S, U), resampled (S, R, U), and the units' numbers of items (U,)."""
    units = list(sets[0])
    for other in sets[1:]:
        if list(other) != units:
            raise InputError(f"outcomes on different units cannot be resampled together: "
                             f"{units} and {list(other)}")
        for unit in units:
            if other[unit].size != sets[0][unit].size:
                raise InputError(f"outcomes on different items cannot be resampled together: "
                                 f"unit {unit!r} has {sets[0][unit].size} items in one and "
                                 f"{other[unit].size} in another")
    items = np.array([sets[0][unit].size for unit in units], dtype=np.int64)  # (U,)
    point = np.empty((len(sets), len(units)))  # (S, U)
    resampled = np.empty((len(sets), resamples, len(units)))  # (S, R, U)
    for k, unit in enumerate(units):
        stacked = np.stack([outcomes[unit] for outcomes in sets])  # (S, n)
        point[:, k] = stacked.mean(axis=1)
        drawn = rng.integers(0, items[k], size=(resamples, items[k]))  # (R, n) item indices
        resampled[:, :, k] = stacked[:, drawn].mean(axis=2)  # (S, R, n) -> (S, R)
    return point, resampled, items


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values`` (R,)."""
    if not 0 < level < 1:
        raise InputError(f"the interval's level must be in (0, 1), got {level}")
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise InputError(f"resamples must be at least 1, got {resamples}")


def bootstrap_interval(outcomes_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                       resamples: int = 1000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile interval of ``aggregate`` under the item bootstrap: each unit's items
    resampled with replacement within the unit, ``resamples`` times (one unit: its outcomes
    as a plain sequence, or a mapping of one)."""
    _check_resamples(resamples)
    _, resampled, items = _unit_accuracies([_arrays(outcomes_by_unit)], resamples,
                                           np.random.default_rng(seed))
    return _percentiles(aggregate(resampled[0], items), level)


def paired_test(a_by_unit: Outcomes, b_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                resamples: int = 1000, level: float = 0.95, seed: int = 0
                ) -> dict[str, float | int]:
    """Model A against model B on the same items (the same units, item i of a unit the same
    item for both): ``a``, ``b``, their ``difference`` (a - b), its paired bootstrap interval
    (``low``, ``high``: both models' outcomes resampled on the same items), the two-sided
    ``p_value`` of the paired approximate randomisation test (each item's outcomes swapped
    between the models with probability 1/2, ``resamples`` times), and the ``units``,
    ``items`` and ``resamples`` behind them. The bootstrap draws come first, then the swaps,
    from one ``default_rng(seed)``."""
    _check_resamples(resamples)
    a, b = _arrays(a_by_unit), _arrays(b_by_unit)
    rng = np.random.default_rng(seed)
    point, resampled, items = _unit_accuracies([a, b], resamples, rng)
    value_a, value_b = (float(aggregate(point[s], items)) for s in (0, 1))
    difference = value_a - value_b
    low, high = _percentiles(aggregate(resampled[0], items) - aggregate(resampled[1], items),
                             level)
    shuffled = np.empty((2, resamples, len(items)))  # (2, R, U): both models' accuracies
    for k, unit in enumerate(a):
        swap = rng.integers(0, 2, size=(resamples, items[k]), dtype=bool)  # (R, n)
        shuffled[0, :, k] = np.where(swap, b[unit], a[unit]).mean(axis=1)
        shuffled[1, :, k] = np.where(swap, a[unit], b[unit]).mean(axis=1)
    null = aggregate(shuffled[0], items) - aggregate(shuffled[1], items)  # (R,)
    extreme = int(np.count_nonzero(np.abs(null) >= abs(difference) - _TIE))
    return {"a": value_a, "b": value_b, "difference": difference, "low": low, "high": high,
            "p_value": (1 + extreme) / (1 + resamples), "units": len(items),
            "items": int(items.sum()), "resamples": resamples}


# -------------------------------------------------------------------------------- measures


@dataclass(frozen=True)
class _Measure:
    """A row: the mean of the unit accuracies of ``field`` over ``units`` of ``benchmark``
    (``mean_of_units``), over in-vocabulary items only when ``in_vocabulary``."""

    label: str
    benchmark: str
    units: frozenset[str]
    field: str = "correct"
    in_vocabulary: bool = False
    interval: bool = True


def _spec(name: str) -> tuple[str, bool]:
    """The record field and the in-vocabulary filter of a headline measure's last name."""
    if name == "unknown_share":
        return "unknown", False
    known = name.startswith("in_vocabulary_")
    base = name.removeprefix("in_vocabulary_")
    return ("correct" if base in ("accuracy", "sg_score") else base), known


def _scope(benchmark: str, prefix: str, units: Sequence[str]) -> list[str]:
    """The units a headline measure under ``prefix`` averages: every paradigm; the suites
    the paper scores; a Marvin & Linzen section's rows (``marvin_linzen/<short name>``)."""
    if benchmark == "syntaxgym":
        return [u for u in units if not is_excluded(u)]
    if benchmark == "marvin_linzen":
        section = ML_SECTIONS.get(prefix.rsplit("/", 1)[-1])
        return [u for u in units if u.split("/", 1)[0] == section]
    return list(units)


def _results(columns: Sequence[Sequence[Results]], benchmark: str) -> list[BenchmarkResult]:
    return [results[benchmark] for runs in columns for results in runs if benchmark in results]


def _benchmarks(columns: Sequence[Sequence[Results]]) -> list[str]:
    """The benchmarks in the columns' results: ``BENCHMARKS`` first, then others."""
    found = dict.fromkeys(name for runs in columns for results in runs for name in results)
    return [b for b in BENCHMARKS if b in found] + [b for b in found if b not in BENCHMARKS]


def _units(results: Sequence[BenchmarkResult], benchmark: str) -> dict[str, str | None]:
    """Every unit of ``benchmark`` in ``results``, in record order (Marvin & Linzen: Table
    1's), each with its phenomenon (None for benchmarks without)."""
    found: dict[str, str | None] = {}
    for result in results:
        for record in result.records:
            found.setdefault(unit_of(benchmark, record), record.get("phenomenon"))
    return _ordered(benchmark, found)


def _headline_names(results: Sequence[BenchmarkResult]) -> dict[str, list[str]]:
    """The results' headline measures by prefix (``blimp``, ``marvin_linzen/npi``, ...):
    their last names, in first-seen order."""
    names: dict[str, list[str]] = {}
    for result in results:
        for key in result.headline:
            prefix, name = key.rsplit("/", 1)
            if name not in names.setdefault(prefix, []):
                names[prefix].append(name)
    return names


def _grouped(benchmark: str, units: Mapping[str, str | None]
             ) -> tuple[list[tuple[str, str, list[str]]], list[str]]:
    """The groups of ``units`` (phenomena, SyntaxGym circuits over the suites the paper
    scores, Marvin & Linzen sections; the empty ones left out), each as its label, the prefix
    of its benchmark's headline measures and its units; and the units in none (SyntaxGym:
    the excluded suites, or one in no circuit)."""
    if benchmark == "syntaxgym":
        groups = [(f"syntaxgym/{c}", "syntaxgym",
                   [u for u in units if not is_excluded(u) and suite_circuit(u) == c])
                  for c in CIRCUITS]
    elif benchmark == "marvin_linzen":
        groups = [(f"marvin_linzen/{section}", f"marvin_linzen/{short}",
                   [u for u in units if u.split("/", 1)[0] == section])
                  for short, section in ML_SECTIONS.items()]
    else:
        groups = [(f"{benchmark}/{p}", benchmark, [u for u, of in units.items() if of == p])
                  for p in sorted({p for p in units.values() if p is not None})]
    groups = [group for group in groups if group[2]]
    grouped = {u for _, _, members in groups for u in members}
    return groups, [u for u in units if u not in grouped]


def _ungrouped_label(benchmark: str, unit: str) -> str:
    if benchmark == "syntaxgym":
        return f"syntaxgym/{'excluded' if is_excluded(unit) else 'no circuit'}/{unit}"
    return f"{benchmark}/no phenomenon/{unit}"


def _measures(columns: Sequence[Sequence[Results]], level: str) -> list[_Measure]:
    """The rows: at ``headline`` each headline measure of the results; at ``unit`` each
    group and then each of its units, under its benchmark's headline measures (unknown shares
    aside), the units in no group last."""
    measures: list[_Measure] = []
    for benchmark in _benchmarks(columns):
        results = _results(columns, benchmark)
        units = _units(results, benchmark)
        names = _headline_names(results)
        if level == "headline":
            for prefix, last in names.items():
                members = frozenset(_scope(benchmark, prefix, list(units)))
                measures += [_Measure(f"{prefix}/{name}", benchmark, members, *_spec(name),
                                      interval=name != "unknown_share")
                             for name in last if members]
            continue
        groups, ungrouped = _grouped(benchmark, units)
        rows: list[tuple[str, str, frozenset[str]]] = []
        for label, prefix, members in groups:
            rows.append((label, prefix, frozenset(members)))
            rows += [(f"{label}/{u.split('/')[-1]}", prefix, frozenset({u})) for u in members]
        rows += [(_ungrouped_label(benchmark, u), benchmark, frozenset({u})) for u in ungrouped]
        measures += [_Measure(f"{label}/{_UNIT_NAMES.get(name, name)}", benchmark, members,
                              *_spec(name))
                     for label, prefix, members in rows for name in names.get(prefix, [])
                     if name != "unknown_share"]
    return measures


def paired_tests(a: Results, b: Results, resamples: int = 1000, level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, float | int]]:
    """``paired_test`` of model A against model B (their results on the same data) for every
    headline measure both have, unknown shares aside: headline name -> the test. An
    in-vocabulary measure is compared on the items in vocabulary for both models."""
    tests: dict[str, dict[str, float | int]] = {}
    for benchmark in _benchmarks([[a], [b]]):
        if benchmark not in a or benchmark not in b:
            continue
        shared = [key for key in a[benchmark].headline if key in b[benchmark].headline]
        units = list(_units([a[benchmark]], benchmark))
        for key in shared:
            prefix, name = key.rsplit("/", 1)
            if name == "unknown_share":
                continue
            members = set(_scope(benchmark, prefix, units))
            field_name, in_vocabulary = _spec(name)
            pair = [{u: v for u, v in outcomes.items() if u in members} for outcomes in
                    _collect(benchmark, [a[benchmark].records, b[benchmark].records],
                             field_name, in_vocabulary)]
            if pair[0]:
                tests[key] = paired_test(*pair, resamples=resamples, level=level, seed=seed)
    return tests


# ---------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Cell:
    """One figure of a table: the ``value`` (None where there is nothing to measure: no such
    benchmark, or no pair or item left), its interval (``low``, ``high``; None without one)
    and ``n``, the number of pairs or items it rests on (in vocabulary: those without an
    unknown word where it matters)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0


@dataclass(frozen=True)
class Table:
    """Side-by-side numbers: ``columns`` names the value columns (the row labels come
    first, under ``measure``); each row is a label and a ``Cell`` a column."""

    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    title: str = ""
    notes: list[str] = field(default_factory=list)


def _as_runs(runs: Runs, name: str) -> list[Results]:
    listed = [runs] if isinstance(runs, Mapping) else list(runs)
    if not listed:
        raise InputError(f"{name}: no results given")
    return listed


def _column(runs: Sequence[Results], measures: Sequence[_Measure], resamples: int,
            confidence: float, seed: int) -> list[Cell]:
    """A column's cells: each measure over the runs (seeds), averaged, with the interval of
    that mean under the item bootstrap (``resamples`` 0: none). Seeds are compared item by
    item: in vocabulary, over the items in vocabulary for every seed."""
    computed: dict[tuple[str, str, bool, int],
                   tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = {}
    cells = []
    for m in measures:
        if any(m.benchmark not in results for results in runs):
            cells.append(Cell(None))
            continue
        draws = resamples if m.interval else 0
        key = (m.benchmark, m.field, m.in_vocabulary, draws)
        if key not in computed:
            sets = _collect(m.benchmark, [results[m.benchmark].records for results in runs],
                            m.field, m.in_vocabulary)
            computed[key] = (list(sets[0]), *_unit_accuracies(
                [_arrays(s) if s else {} for s in sets], draws, np.random.default_rng(seed)))
        units, point, resampled, items = computed[key]
        chosen = [k for k, unit in enumerate(units) if unit in m.units]
        if not chosen:
            cells.append(Cell(None))
            continue
        value = float(mean_of_units(point[:, chosen], items[chosen]).mean())
        n = int(items[chosen].sum())
        if not draws:
            cells.append(Cell(value, n=n))
            continue
        low, high = _percentiles(mean_of_units(resampled[:, :, chosen], items[chosen])
                                 .mean(axis=0), confidence)  # (S, R) -> (R,)
        cells.append(Cell(value, low, high, n))
    return cells


def _columns(models: Mapping[str, Runs], baselines: Mapping[str, Runs] | None
             ) -> list[tuple[str, list[Results]]]:
    """The named columns: each model, then its untrained baseline where given."""
    if not models:
        raise InputError("no model to compare")
    unknown = sorted(set(baselines or {}) - set(models))
    if unknown:
        raise InputError(f"baseline {unknown[0]!r} names no model; models: "
                         f"{', '.join(models)}")
    columns = []
    for name, runs in models.items():
        listed = _as_runs(runs, name)
        columns.append((_seeds(name, listed), listed))
        if baselines and name in baselines:
            untrained = _as_runs(baselines[name], f"{name} untrained")
            columns.append((_seeds(f"{name} untrained", untrained), untrained))
    return columns


def _seeds(name: str, runs: Sequence[Results]) -> str:
    return f"{name} ({len(runs)} seeds)" if len(runs) > 1 else name


def comparison_table(models: Mapping[str, Runs], baselines: Mapping[str, Runs] | None = None,
                     level: Literal["headline", "unit"] = "headline", intervals: bool = True,
                     resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> Table:
    """The models side by side: a column per model (name -> its results, or a list of
    results, one a seed, averaged), each followed by its untrained baseline
    (``baselines[name]``, likewise) where given, named ``<name> untrained`` (``(k seeds)``
    added for several).

    Rows, benchmark by benchmark: at ``level="headline"`` the results' headline measures
    (``BenchmarkResult.headline``'s names); at ``level="unit"`` each BLiMP phenomenon then its
    paradigms (``blimp/<phenomenon>/<UID>/...``), each SyntaxGym circuit then its suites
    (``syntaxgym/<circuit>/<suite>/...``; the paper's excluded suites under
    ``syntaxgym/excluded``), each Marvin & Linzen section then its Table 1 rows
    (``marvin_linzen/<section>/<row>/...``), under the headline's measures of the benchmark or
    section (unknown shares aside; ``sg_score`` is a suite's ``accuracy``). Every cell has its
    interval (``intervals``: ``resamples`` item-bootstrap resamples at ``confidence``; none
    for unknown shares, a property of the vocabulary and the data) and its number of pairs
    or items. Every column resamples from ``default_rng(seed)``, so a model and its baseline
    are resampled on the same items.
    """
    if level not in ("headline", "unit"):
        raise InputError(f"level must be 'headline' or 'unit', got {level!r}")
    if intervals:
        _check_resamples(resamples)
    columns = _columns(models, baselines)
    measures = _measures([runs for _, runs in columns], level)
    cells = [_column(runs, measures, resamples if intervals else 0, confidence, seed)
             for _, runs in columns]
    rows = [(m.label, [column[i] for column in cells]) for i, m in enumerate(measures)]
    interval = (f" [its {confidence:.0%} percentile interval from {resamples} item-bootstrap "
                f"resamples, items resampled within each paradigm, suite or Table 1 row "
                f"(Efron & Tibshirani 1993), seed {seed}]" if intervals else "")
    notes = [f"Each value: the measure{interval} (n: the pairs or items it rests on; "
             "in_vocabulary: those without an unknown word where it matters).",
             "Aggregates as each paper's: BLiMP, the unweighted mean over paradigms; SyntaxGym, "
             "over suites (the paper's 31; in vocabulary, those with an in-vocabulary item); "
             "Marvin & Linzen, a row pools its items and a section is the unweighted mean of "
             "its rows (synlm's summary: the paper reports the rows)."]
    if baselines:
        notes.append("untrained: the model's configuration before training.")
    if any(len(runs) > 1 for _, runs in columns):
        notes.append("Several seeds: their mean, and the interval of that mean (every seed "
                     "resampled on the same items).")
    if level == "headline":
        notes.append("unknown_share: no interval (a property of the vocabulary and the data).")
    title = ("Targeted syntactic evaluation: headline measures" if level == "headline" else
             "Targeted syntactic evaluation by phenomenon and paradigm, circuit and suite, "
             "section and Table 1 row")
    # a transition LM's search renormalised given the length scores another quantity
    given_length = {name for name, runs in columns for results in runs for r in results.values()
                    if r.convention.get("search_convention") == "renormalised_given_length"}
    if given_length and len(given_length) < len(columns):
        title += " (mixed surprisal conventions: not one quantity)"
        notes.insert(0, f"Mixed surprisal conventions: {', '.join(sorted(given_length))} "
                     "score log p(x_i | x_<i, n), renormalised over the legal actions given "
                     "the length; the other columns log p(x_i | x_<i).")
    return Table([name for name, _ in columns], rows, title, notes)


def _cell_text(cell: Cell, digits: int, missing: str) -> str:
    if cell.value is None:
        return missing
    text = f"{cell.value:.{digits}f}"
    if cell.low is not None and cell.high is not None:
        text += f" [{cell.low:.{digits}f}, {cell.high:.{digits}f}]"
    return f"{text} (n={cell.n})"


def to_markdown(table: Table, digits: int = 3) -> str:
    """The table in Markdown: the title, the table (``value [low, high] (n=...)``, ``—``
    where there is nothing to measure), the notes as a list."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", r"\|") for c in cells) + " |"

    lines = [table.title, ""] if table.title else []
    lines += [line(["measure", *table.columns]),
              "|" + "|".join(["---", *["---:"] * len(table.columns)]) + "|"]
    lines += [line([label, *(_cell_text(c, digits, "—") for c in cells)])
              for label, cells in table.rows]
    if table.notes:
        lines += ["", *(f"- {note}" for note in table.notes)]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """The table's numbers as CSV (``csv`` module): ``measure``, then for each column its
    value and ``<column> low``, ``<column> high``, ``<column> n``; fractions to 6 places,
    empty where there is none. The title and notes are the Markdown and LaTeX files'."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["measure", *(f"{c}{part}" for c in table.columns
                                  for part in ("", " low", " high", " n"))])
    for label, cells in table.rows:
        writer.writerow([label, *(part for cell in cells for part in (
            *(("" if v is None else f"{v:.6f}") for v in (cell.value, cell.low, cell.high)),
            cell.n))])
    return out.getvalue()


_LATEX_SPECIAL = re.compile(r"[\\&%$#_{}~^]")
_LATEX = {"\\": r"\textbackslash{}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``_`` as ``\\_``, ...)."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX.get(m.group(), "\\" + m.group()), text)


def to_latex(table: Table, digits: int = 3) -> str:
    """The table as a booktabs ``tabular`` (``\\usepackage{booktabs}``), labels and headers
    escaped, ``--`` where there is nothing to measure; the title and notes as ``%`` comments
    (the caption is the paper's to write)."""
    lines = [f"% {table.title}"] if table.title else []
    lines += [r"\begin{tabular}{l" + "r" * len(table.columns) + "}", r"\toprule",
              " & ".join(latex_escape(c) for c in ["measure", *table.columns]) + r" \\",
              r"\midrule"]
    lines += [" & ".join([latex_escape(label),
                          *(latex_escape(_cell_text(c, digits, "--")) for c in cells)]) + r" \\"
              for label, cells in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}", *(f"% {note}" for note in table.notes)]
    return "\n".join(lines) + "\n"


def write_tables(table: Table, out_stem: Path) -> list[Path]:
    """``<out_stem>.md``, ``.csv`` and ``.tex`` side by side, each written whole or not at
    all (a temporary file, then a rename); their paths."""
    out_stem = Path(out_stem)
    paths = []
    for suffix, text in ((".md", to_markdown(table)), (".csv", to_csv(table)),
                         (".tex", to_latex(table))):
        path = out_stem.with_name(out_stem.name + suffix)
        atomic_write_text(path, text)
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------- plots


def plot_units(models: Mapping[str, Runs], benchmark: str, out: Path,
               kind: Literal["circuits", "phenomena"] = "circuits", intervals: bool = True,
               baselines: Mapping[str, Runs] | None = None, field: str = "correct",
               in_vocabulary: bool = False, resamples: int = 1000, confidence: float = 0.95,
               seed: int = 0) -> list[Path]:
    """Grouped horizontal bars of the share of items with ``field`` (``correct``: accuracy)
    in each group of ``benchmark``'s units: SyntaxGym's circuits (``kind="circuits"``, over
    the suites the paper scores) or the phenomena of BLiMP or one's own ``pairs``
    (``"phenomena"``). A bar a model, a colour a model, error bars from the item bootstrap
    (as ``comparison_table``), a black mark across each bar at the model's untrained
    baseline where ``baselines`` are given, and for the two-way choices of pairs a dotted
    line at 50%. Written as ``out`` with the suffixes ``.png`` and ``.svg`` (any suffix of
    ``out`` replaced), each whole or not at all; their paths."""
    wanted = {"circuits": ("syntaxgym",), "phenomena": PAIR_BENCHMARKS}.get(kind)
    if wanted is None:
        raise InputError(f"kind must be 'circuits' or 'phenomena', got {kind!r}")
    if benchmark not in wanted:
        raise InputError(f"{kind} are groups of {' or '.join(wanted)}, not of {benchmark!r}")
    if intervals:
        _check_resamples(resamples)
    columns = _columns(models, baselines)
    results = _results([runs for _, runs in columns], benchmark)
    groups, _ = _grouped(benchmark, _units(results, benchmark))
    if not groups:
        raise InputError(f"no model has {benchmark} results to plot by {kind}")
    measures = [_Measure(label, benchmark, frozenset(members), field, in_vocabulary)
                for label, _, members in groups]
    values = {name: _column(_as_runs(runs, name), measures, resamples if intervals else 0,
                            confidence, seed) for name, runs in models.items()}
    untrained = {name: _column(_as_runs(runs, name), measures, 0, confidence, seed)
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
