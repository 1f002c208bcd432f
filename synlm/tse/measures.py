"""What the comparison measures, read from ``BenchmarkResult``s alone (no model is needed:
results read back from their records will do): the units of each benchmark, their per-item
outcomes, the rows of a table and a column's cells.

- ``item_outcomes``: each unit's per-item outcomes in record order (a BLiMP paradigm, a
  SyntaxGym suite, a Marvin & Linzen Table 1 row ``"Section/Row"``), so two models evaluated
  on the same data align item by item.
- ``table_measures``: the rows, a ``Measure`` each: the results' headline measures, or each
  group (phenomenon, circuit, section) then its units; ``column_cells``: a model's value of
  each, with its item-bootstrap interval (``synlm.tse.statistics``).

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
its interval that of the seed mean under the two-level bootstrap (seeds, then items:
``synlm.tse.statistics``). ``comparison_cells``: one model against another, the difference
with its paired interval and p-value.

A per-unit table shows the units chosen (``synlm.tse.units.UNITS``): each benchmark's groups
(BLiMP phenomena, SyntaxGym circuits, Marvin & Linzen sections) and its units (paradigms,
suites, Table 1 rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from synlm.errors import InputError
from synlm.tse.benchmarks import BENCHMARKS, ML_SECTIONS, BenchmarkResult
from synlm.tse.marvin_linzen import TABLE1
from synlm.tse.statistics import (
    item_differences,
    mean_of_units,
    outcome_arrays,
    paired_p,
    percentile_interval,
    seed_draws,
    two_level,
    unit_accuracies,
)
from synlm.tse.syntaxgym import CIRCUITS, is_excluded, suite_circuit
from synlm.tse.tables import Cell
from synlm.tse.units import UNIT_LEVELS, UNITS

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
#: Unit-level names of headline measures named after their benchmark's aggregate.
_UNIT_NAMES = {"sg_score": "accuracy", "in_vocabulary_sg_score": "in_vocabulary_accuracy"}


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


def collect_outcomes(benchmark: str, record_sets: Sequence[Sequence[Mapping[str, Any]]],
                     field: str, in_vocabulary: bool) -> list[dict[str, list[bool]]]:
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
    unknown: ``synlm.tse.compare.paired_tests`` keeps the items in vocabulary for both."""
    return collect_outcomes(result.name, [result.records], field, in_vocabulary)[0]


@dataclass(frozen=True)
class Measure:
    """A row: the mean of the unit accuracies of ``field`` over ``units`` of ``benchmark``
    (``mean_of_units``), over in-vocabulary items only when ``in_vocabulary``."""

    label: str
    benchmark: str
    units: frozenset[str]
    field: str = "correct"
    in_vocabulary: bool = False
    interval: bool = True


def record_field(name: str) -> tuple[str, bool]:
    """The record field and the in-vocabulary filter of a headline measure's last name."""
    if name == "unknown_share":
        return "unknown", False
    known = name.startswith("in_vocabulary_")
    base = name.removeprefix("in_vocabulary_")
    return ("correct" if base in ("accuracy", "sg_score") else base), known


def headline_units(benchmark: str, prefix: str, units: Sequence[str]) -> list[str]:
    """The units a headline measure under ``prefix`` averages: every paradigm; the suites
    the paper scores; a Marvin & Linzen section's rows (``marvin_linzen/<short name>``)."""
    if benchmark == "syntaxgym":
        return [u for u in units if not is_excluded(u)]
    if benchmark == "marvin_linzen":
        section = ML_SECTIONS.get(prefix.rsplit("/", 1)[-1])
        return [u for u in units if u.split("/", 1)[0] == section]
    return list(units)


def benchmark_results(columns: Sequence[Sequence[Results]], benchmark: str
                      ) -> list[BenchmarkResult]:
    """The results of ``benchmark`` in the columns, column by column, seed by seed."""
    return [results[benchmark] for runs in columns for results in runs if benchmark in results]


def benchmarks_in(columns: Sequence[Sequence[Results]]) -> list[str]:
    """The benchmarks in the columns' results: ``BENCHMARKS`` first, then others."""
    found = dict.fromkeys(name for runs in columns for results in runs for name in results)
    return [b for b in BENCHMARKS if b in found] + [b for b in found if b not in BENCHMARKS]


def benchmark_units(results: Sequence[BenchmarkResult], benchmark: str
                    ) -> dict[str, str | None]:
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


def grouped_units(benchmark: str, units: Mapping[str, str | None]
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


def table_measures(columns: Sequence[Sequence[Results]], level: str,
                   units: Sequence[str] = UNITS) -> list[Measure]:
    """The rows: at ``headline`` each headline measure of the results; at ``unit`` each
    group and then each of its units, under its benchmark's headline measures (unknown shares
    aside), the units in no group last; of these, the groups and units named in ``units``
    (``UNIT_LEVELS``: ``circuit`` for SyntaxGym's circuits, ``suite`` for its suites, ...)."""
    measures: list[Measure] = []
    for benchmark in benchmarks_in(columns):
        results = benchmark_results(columns, benchmark)
        found = benchmark_units(results, benchmark)
        names = _headline_names(results)
        if level == "headline":
            for prefix, last in names.items():
                members = frozenset(headline_units(benchmark, prefix, list(found)))
                measures += [Measure(f"{prefix}/{name}", benchmark, members,
                                     *record_field(name), interval=name != "unknown_share")
                             for name in last if members]
            continue
        groups, ungrouped = grouped_units(benchmark, found)
        group_level, unit_level = UNIT_LEVELS.get(benchmark, ("phenomenon", "paradigm"))
        rows: list[tuple[str, str, frozenset[str]]] = []
        for label, prefix, members in groups:
            if group_level in units:
                rows.append((label, prefix, frozenset(members)))
            if unit_level in units:
                rows += [(f"{label}/{u.split('/')[-1]}", prefix, frozenset({u}))
                         for u in members]
        if unit_level in units:
            rows += [(_ungrouped_label(benchmark, u), benchmark, frozenset({u}))
                     for u in ungrouped]
        measures += [Measure(f"{label}/{_UNIT_NAMES.get(name, name)}", benchmark, members,
                             *record_field(name))
                     for label, prefix, members in rows for name in names.get(prefix, [])
                     if name != "unknown_share"]
    return measures


def as_runs(runs: Runs, name: str) -> list[Results]:
    """A model's runs as a list: one evaluation, or several (seeds); ``name`` for the
    error when there is none."""
    listed = [runs] if isinstance(runs, Mapping) else list(runs)
    if not listed:
        raise InputError(f"{name}: no results given")
    return listed


class _Draws:
    """The unit accuracies of sets of runs (seeds of one model, or of two models together),
    observed and under the item bootstrap, computed once a benchmark, field and filter:
    every column and comparison resamples the items from ``default_rng(seed)``, so all of
    them are resampled on the same items."""

    def __init__(self, runs: Sequence[Results], resamples: int, seed: int) -> None:
        self.runs, self.resamples, self.seed = runs, resamples, seed
        self.computed: dict[tuple[str, str, bool, int],
                            tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = {}
        self.outcomes: dict[tuple[str, str, bool, int], list[dict[str, np.ndarray]]] = {}

    def units(self, m: Measure, draws: int
              ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray] | None:
        """The chosen units' positions, the accuracies (S, U), their resamples (S, R, U) and
        the units' items (U,) of ``m``; None where no unit is left."""
        key = (m.benchmark, m.field, m.in_vocabulary, draws)
        if key not in self.computed:
            sets = collect_outcomes(m.benchmark,
                                    [results[m.benchmark].records for results in self.runs],
                                    m.field, m.in_vocabulary)
            self.outcomes[key] = [outcome_arrays(s) if s else {} for s in sets]
            self.computed[key] = (list(sets[0]), *unit_accuracies(
                self.outcomes[key], draws, np.random.default_rng(self.seed)))
        units, point, resampled, items = self.computed[key]
        chosen = [k for k, unit in enumerate(units) if unit in m.units]
        return (chosen, point, resampled, items) if chosen else None

    def differences(self, m: Measure, draws: int, split: int) -> np.ndarray:
        """Each item's paired difference over ``m``'s units (after ``units``): the mean
        outcome over the runs from ``split`` on less that over those before it."""
        sets = self.outcomes[(m.benchmark, m.field, m.in_vocabulary, draws)]
        return item_differences(sets[split:], sets[:split], [u for u in sets[0]
                                                            if u in m.units])


def column_cells(runs: Sequence[Results], measures: Sequence[Measure], resamples: int,
                 confidence: float, seed: int) -> list[Cell]:
    """A column's cells: each measure over the runs (seeds), averaged, with the interval of
    that mean (``resamples`` 0: none) under the two-level bootstrap (seeds, then items:
    ``synlm.tse.statistics.two_level``; one run: the item bootstrap). Seeds are compared
    item by item: in vocabulary, over the items in vocabulary for every seed."""
    found = _Draws(runs, resamples, seed)
    seeds = seed_draws(len(runs), resamples, np.random.default_rng((seed, 1)))
    cells = []
    for m in measures:
        draws = resamples if m.interval else 0
        drawn = found.units(m, draws) if all(m.benchmark in r for r in runs) else None
        if drawn is None:
            cells.append(Cell(None))
            continue
        chosen, point, resampled, items = drawn
        value = float(mean_of_units(point[:, chosen], items[chosen]).mean())
        n = int(items[chosen].sum())
        if not draws:
            cells.append(Cell(value, n=n))
            continue
        per_seed = mean_of_units(resampled[:, :, chosen], items[chosen])  # (S, R)
        cells.append(Cell(value, *percentile_interval(two_level(per_seed, seeds), confidence),
                          n))
    return cells


def comparison_cells(a: Sequence[Results], b: Sequence[Results], measures: Sequence[Measure],
                     resamples: int, confidence: float, seed: int) -> list[Cell]:
    """Model B against model A, each given as its runs (seeds): for each measure the
    difference of the seed means (B - A), its paired percentile interval (items drawn alike
    for both models, each model's seeds drawn on its own) and its p
    (``synlm.tse.statistics.paired_p``: the exact sign test where few items differ, else the
    p that inverts the interval), over the items both models have (in vocabulary: for every
    run of both). No interval, no test: ``Cell(None)``."""
    found = _Draws([*a, *b], resamples, seed)
    seed_rng = np.random.default_rng((seed, 1))
    seeds = [seed_draws(len(a), resamples, seed_rng), seed_draws(len(b), resamples, seed_rng)]
    cells = []
    for m in measures:
        present = all(m.benchmark in r for r in (*a, *b))
        drawn = found.units(m, resamples) if present and m.interval else None
        if drawn is None:
            cells.append(Cell(None))
            continue
        chosen, point, resampled, items = drawn
        values = mean_of_units(point[:, chosen], items[chosen])  # (S_a + S_b,)
        per_seed = mean_of_units(resampled[:, :, chosen], items[chosen])  # (S_a + S_b, R)
        differences = two_level(per_seed[len(a):], seeds[1]) - \
            two_level(per_seed[:len(a)], seeds[0])
        p, bound, test = paired_p(found.differences(m, resamples, len(a)), differences)
        cells.append(Cell(float(values[len(a):].mean() - values[:len(a)].mean()),
                          *percentile_interval(differences, confidence),
                          int(items[chosen].sum()), p=p, p_bound=bound, test=test))
    return cells


def named_columns(models: Mapping[str, Runs], baselines: Mapping[str, Runs] | None
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
        listed = as_runs(runs, name)
        columns.append((_seeds(name, listed), listed))
        if baselines and name in baselines:
            untrained = as_runs(baselines[name], f"{name} untrained")
            columns.append((_seeds(f"{name} untrained", untrained), untrained))
    return columns


def _seeds(name: str, runs: Sequence[Results]) -> str:
    return f"{name} ({len(runs)} seeds)" if len(runs) > 1 else name
