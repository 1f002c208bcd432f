"""What a paper reports from evaluated models, from ``BenchmarkResult``s alone (no model is
needed: results read back from their records will do):

- ``comparison_table``: a row per headline measure (or per unit chosen: phenomenon and
  paradigm, circuit and suite, section and Table 1 row), a column per model and one per
  model's untrained baseline, then a column per comparison (each model against the first:
  the difference, its paired interval, its p-value and the Holm-adjusted one over the
  table's comparisons); every value with its interval and the number of pairs or items it
  rests on; an in-vocabulary row only where it differs from its plain row. Written by
  ``synlm.tse.tables`` (``to_markdown``, ``to_csv``, ``to_latex``, ``write_tables``).
- ``paired_tests``: ``synlm.tse.statistics.paired_difference`` of two models for every
  headline measure they share.

What each row measures and how its items are read from the records: ``synlm.tse.measures``;
the bootstraps, the p-value and Holm's adjustment: ``synlm.tse.statistics``; the plots:
``synlm.tse.plots``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from synlm.errors import InputError
from synlm.tse.measures import (
    Measure,
    Results,
    Runs,
    as_runs,
    benchmark_units,
    benchmarks_in,
    collect_outcomes,
    column_cells,
    comparison_cells,
    headline_units,
    named_columns,
    record_field,
    table_measures,
)
from synlm.tse.statistics import (
    EXACT_BELOW,
    RESAMPLES,
    check_resamples,
    holm_bounds,
    paired_difference,
    resolution,
)
from synlm.tse.syntaxgym import is_excluded
from synlm.tse.tables import Cell, Table, p_digits
from synlm.tse.units import UNITS

#: Each benchmark's name in a table's notes.
BENCHMARK_NAMES = {"blimp": "BLiMP", "pairs": "pairs (--pairs)", "syntaxgym": "SyntaxGym",
                   "marvin_linzen": "Marvin & Linzen"}
#: How each benchmark's headline aggregates its units, as a table's notes say it.
AGGREGATES = {
    "blimp": "BLiMP, the unweighted mean over paradigms",
    "pairs": "pairs (--pairs), the unweighted mean over paradigms, as BLiMP's",
    "syntaxgym": "SyntaxGym, the mean over the suites scored but those the paper leaves out "
                 "(in vocabulary, those with an in-vocabulary item)",
    "marvin_linzen": "Marvin & Linzen, a row pools its items and a section is the unweighted "
                     "mean of its rows (synlm's summary: the paper reports the rows)"}


def comparison_table(models: Mapping[str, Runs], baselines: Mapping[str, Runs] | None = None,
                     level: Literal["headline", "unit"] = "headline", intervals: bool = True,
                     resamples: int = RESAMPLES, confidence: float = 0.95, seed: int = 0,
                     units: Sequence[str] = UNITS, comparisons: bool = True) -> Table:
    """The models side by side: a column per model (name -> its results, or a list of
    results, one a seed, averaged), each followed by its untrained baseline
    (``baselines[name]``, likewise) where given, named ``<name> untrained`` (``(k seeds)``
    added for several); then, with ``comparisons`` and intervals, a column per model after
    the first, ``<model> - <first>``: the paired difference, its interval, its p-value
    (``synlm.tse.statistics.paired_p``: the exact sign test where fewer than ``EXACT_BELOW``
    items differ, else the p that inverts the interval, p < 1 - confidence exactly when it
    excludes 0) and Holm's adjustment of it over every comparison in the table.

    Rows, benchmark by benchmark: at ``level="headline"`` the results' headline measures
    (``BenchmarkResult.headline``'s names); at ``level="unit"`` the ``units`` chosen
    (``synlm.tse.units.UNITS``): each BLiMP phenomenon then its paradigms
    (``blimp/<phenomenon>/<UID>/...``), each SyntaxGym circuit then its suites
    (``syntaxgym/<circuit>/<suite>/...``; the paper's excluded suites under
    ``syntaxgym/excluded``), each Marvin & Linzen section then its Table 1 rows
    (``marvin_linzen/<section>/<row>/...``), under the headline's measures of the benchmark or
    section (unknown shares aside; ``sg_score`` is a suite's ``accuracy``). An in-vocabulary
    row is left out where every column's value and count equal its plain row's (no item of
    it has an unknown word where it matters: a subword model). Every cell has its interval
    (``intervals``: ``resamples`` bootstrap resamples at ``confidence``, two-level over
    several seeds; none for unknown shares, a property of the vocabulary and the data) and
    its number of pairs or items. Every column resamples the items from
    ``default_rng(seed)``, so every column and comparison is resampled on the same items.
    """
    if level not in ("headline", "unit"):
        raise InputError(f"level must be 'headline' or 'unit', got {level!r}")
    if intervals:
        check_resamples(resamples)
    columns = named_columns(models, baselines)
    measures = table_measures([runs for _, runs in columns], level, units)
    draws = resamples if intervals else 0
    cells = [column_cells(runs, measures, draws, confidence, seed) for _, runs in columns]
    kept = [i for i, m in enumerate(measures) if not _repeats_plain(m, measures, cells, i)]
    measures = [measures[i] for i in kept]
    cells = [[column[i] for i in kept] for column in cells]
    names = list(models)
    tested = comparisons and intervals and len(names) > 1
    if tested:
        first = as_runs(models[names[0]], names[0])
        for name in names[1:]:
            columns.append((f"{name} - {names[0]}", []))
            cells.append(comparison_cells(first, as_runs(models[name], name), measures,
                                          resamples, confidence, seed))
        cells = _with_holm(cells)
    rows = [(m.label, [column[i] for column in cells]) for i, m in enumerate(measures)]
    notes = _notes(columns, baselines, level, intervals, resamples, confidence, seed)
    if tested:
        notes.append(_comparison_note(names[0], confidence, resamples, _count_tests(cells)))
    title = ("Targeted syntactic evaluation: headline measures" if level == "headline" else
             "Targeted syntactic evaluation by " + ", ".join(
                 u for u in UNITS if u in units))
    conventions, mixed = convention_notes({name: as_runs(runs, name)
                                           for name, runs in models.items()})
    if mixed:
        title += " (" + "; ".join(f"mixed {kind} conventions" for kind in mixed) + ")"
    notes = [scored_note(columns), *conventions, *notes]
    return Table([name for name, _ in columns], rows, title, notes,
                 resamples if tested else 0)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _scored_units(benchmark: str, result: Results) -> str:
    """What one evaluation of ``benchmark`` scored: its units (and their groups) and items."""
    name = BENCHMARK_NAMES.get(benchmark, benchmark)
    units = benchmark_units([result[benchmark]], benchmark)
    items = _count(len(result[benchmark].records),
                   "pair" if benchmark in ("blimp", "pairs") else "item")
    if benchmark == "syntaxgym":
        left_out = sum(map(is_excluded, units))
        return f"{name}, {_count(len(units), 'suite')} ({items}" + (
            f"; {left_out} of the suites left out of the SG score, as the paper does"
            if left_out else "") + ")"
    if benchmark == "marvin_linzen":
        sections = {unit.split("/", 1)[0] for unit in units}
        return (f"{name}, {_count(len(units), 'Table 1 row')} of "
                f"{_count(len(sections), 'section')} ({items})")
    phenomena = {p for p in units.values() if p is not None}
    return (f"{name}, {_count(len(units), 'paradigm')} of "
            f"{_count(len(phenomena), 'phenomenon', 'phenomena')} ({items})")


def scored_note(columns: Sequence[tuple[str, Sequence[Results]]]) -> str:
    """The note on what was scored: each benchmark's units and items, counted in the
    results (a column's first run; each column's where the columns differ)."""
    scored = {name: "; ".join(_scored_units(b, runs[0]) for b in benchmarks_in([runs[:1]]))
              for name, runs in columns if runs}
    if len(set(scored.values())) == 1:
        return f"Scored: {next(iter(scored.values()))}."
    return "Scored: " + "; ".join(f"{name}: {what}" for name, what in scored.items()) + "."


def _surprisal(convention: Mapping[str, Any]) -> str:
    """What a model's surprisal is, from its results' ``convention``: log p(x_i | x_<i) (an
    ``all_actions`` search's beam approximates it: the same quantity), a search's
    log p(x_i | x_<i, n) renormalised given the length, or a masked LM's
    pseudo-log-likelihood; with ``eos_term``, the end term is 0 by construction."""
    if "pll" in convention:
        return f"a {convention['pll_text']}"
    end = ", the end term 0 by construction" if "eos_term" in convention else ""
    if convention.get("search_convention") == "renormalised_given_length":
        return ("log p(x_i | x_<i, n), renormalised over the legal actions given the length"
                + end)
    return "log p(x_i | x_<i)" + end


def convention_notes(models: Mapping[str, Sequence[Results]]) -> tuple[list[str], list[str]]:
    """The notes on how the ``models`` (label -> its runs) were scored, from their results'
    conventions (``BenchmarkResult.convention``, the first run's), and the kinds of
    convention that differ between them (``surprisal``, ``end-of-sentence``). The surprisal:
    where the models' differ (``_surprisal``), which model scores which. Each benchmark's end
    of the sentence: where the models did not all treat it alike, which counted the
    end-of-sentence term (``<eos>``) and which did not; where they did, its convention's
    text."""
    first = {name: runs[0] for name, runs in models.items()}
    by_surprisal: dict[str, list[str]] = {}
    for name, results in first.items():
        convention = next(iter(results.values())).convention if results else {}
        by_surprisal.setdefault(_surprisal(convention), []).append(name)
    notes, mixed = [], []
    if len(by_surprisal) > 1:
        mixed.append("surprisal")
        notes.append("Mixed surprisal conventions: " + "; ".join(
            f"{', '.join(names)} score {what}" for what, names in by_surprisal.items()) + ".")
    differ, alike = [], []
    for benchmark in benchmarks_in([[r] for r in first.values()]):
        name = BENCHMARK_NAMES.get(benchmark, benchmark)
        used = [(label, r[benchmark].convention) for label, r in first.items()
                if benchmark in r]
        by_eos: dict[bool, list[str]] = {}
        for label, convention in used:
            by_eos.setdefault(bool(convention.get("eos")), []).append(label)
        if len(by_eos) > 1:
            differ.append(f"{name}: " + "; ".join(
                f"{', '.join(labels)} {'with' if eos else 'without'} the end-of-sentence term"
                + (" (<eos>)" if eos else "") for eos, labels in by_eos.items()))
        elif "text" in used[0][1]:
            alike.append(f"{name}: {used[0][1]['text']}")
    if differ:
        mixed.append("end-of-sentence")
        notes.append("Mixed end-of-sentence conventions: " + "; ".join(differ) + ".")
    if alike:
        notes.append("End of sentence: " + "; ".join(alike) + ".")
    return notes, mixed


def _repeats_plain(m: Measure, measures: Sequence[Measure], cells: Sequence[Sequence[Cell]],
                   i: int) -> bool:
    """Whether row ``i`` is an in-vocabulary row whose every cell has the value and count
    of its plain row's (the row of the same name without ``in_vocabulary_``)."""
    prefix, name = m.label.rsplit("/", 1)
    if not name.startswith("in_vocabulary_"):
        return False
    plain = f"{prefix}/{name.removeprefix('in_vocabulary_')}"
    j = next((j for j, other in enumerate(measures) if other.label == plain), None)
    return j is not None and all(
        (column[i].value, column[i].n) == (column[j].value, column[j].n) for column in cells)


def _with_holm(cells: list[list[Cell]]) -> list[list[Cell]]:
    """The cells with every comparison's Holm-adjusted p over all the table's comparisons
    (``holm_bounds``: a bound p sets a bound; a NaN p is left out)."""
    tests = [(k, i) for k, column in enumerate(cells) for i, cell in enumerate(column)
             if cell.p is not None]
    adjusted, bounds = holm_bounds([cells[k][i].p for k, i in tests],  # type: ignore[misc]
                                   [cells[k][i].p_bound for k, i in tests])
    out = [list(column) for column in cells]
    for (k, i), p, bound in zip(tests, adjusted, bounds):
        out[k][i] = replace(out[k][i], holm=p, holm_bound=bound)
    return out


def _count_tests(cells: Sequence[Sequence[Cell]]) -> int:
    """How many comparisons Holm's adjustment is over: those with a p that is a number."""
    return sum(cell.p is not None and not math.isnan(cell.p) for column in cells
               for cell in column)


def _comparison_note(first: str, confidence: float, resamples: int, tests: int) -> str:
    """The note on the comparison columns: which test gives each p, and Holm's over the
    ``tests`` comparisons."""
    alpha = f"{1 - confidence:.2g}"
    bound = resolution(resamples)
    return (f"<model> - {first}: the difference of the model and {first} on the same items "
            f"(in vocabulary: those in vocabulary for both), its {confidence:.0%} "
            "paired-bootstrap percentile interval (the items drawn alike for both models) and "
            "a two-sided p. Where at least "
            f"{EXACT_BELOW} items differ between the two, p inverts that interval: "
            "p = 2 min(#{d* <= 0}, #{d* >= 0}) / R over the R resampled differences d*, so "
            f"p < {alpha} exactly when the interval excludes 0 (one bootstrap gives both); a p "
            f"of 0 (every resample on one side) says only p < {p_digits(bound)} and is shown "
            "so. Where fewer differ, the resamples fall on one side however little the "
            "evidence, so p is the exact two-sided sign test over the items' paired "
            "differences (ties dropped), marked (sign test); its interval is the bootstrap's "
            f"still, and the two may disagree. Holm p: adjusted by Holm's step-down method over "
            f"the {tests} comparisons of this table (family-wise error rate {alpha}); a bound "
            "p sets a bound (shown <), a comparison without a p (n/a) is left out, and the "
            "least a bootstrap p of this table can be adjusted to is "
            f"{p_digits(min(1.0, tests * bound))}.")


def _notes(columns: Sequence[tuple[str, Sequence[Results]]], baselines: Mapping[str, Runs] | None,
           level: str, intervals: bool, resamples: int, confidence: float,
           seed: int) -> list[str]:
    """The notes under a table: what each value is, how it aggregates, the seeds."""
    interval = (f" [its {confidence:.0%} percentile interval from {resamples} item-bootstrap "
                f"resamples, items resampled within each paradigm, suite or Table 1 row "
                f"(Efron & Tibshirani 1993), seed {seed}]" if intervals else "")
    notes = [f"Each value: the measure{interval} (n: the pairs or items it rests on; "
             "in_vocabulary: those without an unknown word where it matters; an "
             "in_vocabulary row only where it differs from its plain row).",
             "Aggregates as each paper's: " + "; ".join(
                 AGGREGATES[b] for b in benchmarks_in([runs for _, runs in columns])) + "."]
    if baselines:
        notes.append("untrained: the model's configuration before training.")
    if any(len(runs) > 1 for _, runs in columns):
        notes.append("Several seeds: their mean"
                     + (", and the interval of that mean from a two-level bootstrap: each "
                        "resample draws the seeds with replacement, then the items within "
                        "each unit, the same items for every drawn seed (the seeds were "
                        "scored on the same items)" if intervals else "") + ".")
    if level == "headline":
        notes.append("unknown_share: no interval (a property of the vocabulary and the data).")
    return notes


def paired_tests(a: Runs, b: Runs, resamples: int = RESAMPLES, level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, float | int | str]]:
    """``paired_difference`` of model A against model B (their results on the same data; one
    evaluation each, or several seeds) for every headline measure both have, unknown shares
    aside: headline name -> the test, with ``holm``, its p adjusted over these tests
    (``holm_bound``: whether that is an upper bound, set by a bound p). An
    in-vocabulary measure is compared on the items in vocabulary for every run of both."""
    runs_a, runs_b = as_runs(a, "a"), as_runs(b, "b")
    tests: dict[str, dict[str, float | int | str]] = {}
    for benchmark in benchmarks_in([runs_a, runs_b]):
        if any(benchmark not in results for results in (*runs_a, *runs_b)):
            continue
        results = [results[benchmark] for results in (*runs_a, *runs_b)]
        shared = [key for key in results[0].headline
                  if all(key in r.headline for r in results)]
        units = list(benchmark_units(results[:1], benchmark))
        for key in shared:
            prefix, name = key.rsplit("/", 1)
            if name == "unknown_share":
                continue
            members = set(headline_units(benchmark, prefix, units))
            field_name, in_vocabulary = record_field(name)
            sets = [{u: v for u, v in outcomes.items() if u in members} for outcomes in
                    collect_outcomes(benchmark, [r.records for r in results], field_name,
                                     in_vocabulary)]
            if sets[0]:
                tests[key] = paired_difference(sets[:len(runs_a)], sets[len(runs_a):],
                                               resamples=resamples, level=level, seed=seed)
    adjusted, bounds = holm_bounds([float(t["p_value"]) for t in tests.values()],
                                   [bool(t["p_bound"]) for t in tests.values()])
    for test, p, bound in zip(tests.values(), adjusted, bounds):
        test["holm"], test["holm_bound"] = p, bound
    return tests
