"""What a paper reports from evaluated models, from ``BenchmarkResult``s alone (no model is
needed: results read back from their records will do):

- ``comparison_table``: a row per headline measure (or per phenomenon and paradigm, circuit
  and suite, section and Table 1 row), a column per model and one per model's untrained
  baseline; every value with its interval and the number of pairs or items it rests on.
  Written by ``synlm.tse.tables`` (``to_markdown``, ``to_csv``, ``to_latex``,
  ``write_tables``).
- ``paired_tests``: ``synlm.tse.statistics.paired_test`` of two models for every headline
  measure they share.

What each row measures and how its items are read from the records: ``synlm.tse.measures``;
the item bootstrap and the paired randomisation test: ``synlm.tse.statistics``; the plots:
``synlm.tse.plots``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from synlm.errors import InputError
from synlm.tse.measures import (
    Results,
    Runs,
    benchmark_units,
    benchmarks_in,
    collect_outcomes,
    column_cells,
    headline_units,
    named_columns,
    record_field,
    table_measures,
)
from synlm.tse.statistics import check_resamples, paired_test
from synlm.tse.tables import Table


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
        check_resamples(resamples)
    columns = named_columns(models, baselines)
    measures = table_measures([runs for _, runs in columns], level)
    cells = [column_cells(runs, measures, resamples if intervals else 0, confidence, seed)
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


def paired_tests(a: Results, b: Results, resamples: int = 1000, level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, float | int]]:
    """``paired_test`` of model A against model B (their results on the same data) for every
    headline measure both have, unknown shares aside: headline name -> the test. An
    in-vocabulary measure is compared on the items in vocabulary for both models."""
    tests: dict[str, dict[str, float | int]] = {}
    for benchmark in benchmarks_in([[a], [b]]):
        if benchmark not in a or benchmark not in b:
            continue
        shared = [key for key in a[benchmark].headline if key in b[benchmark].headline]
        units = list(benchmark_units([a[benchmark]], benchmark))
        for key in shared:
            prefix, name = key.rsplit("/", 1)
            if name == "unknown_share":
                continue
            members = set(headline_units(benchmark, prefix, units))
            field_name, in_vocabulary = record_field(name)
            pair = [{u: v for u, v in outcomes.items() if u in members} for outcomes in
                    collect_outcomes(benchmark, [a[benchmark].records, b[benchmark].records],
                                     field_name, in_vocabulary)]
            if pair[0]:
                tests[key] = paired_test(*pair, resamples=resamples, level=level, seed=seed)
    return tests
