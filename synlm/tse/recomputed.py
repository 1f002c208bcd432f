"""A benchmark's summary and headline recomputed from its records, as scoring computes them
(``synlm.tse.benchmarks``: ``pair_summary``, ``syntaxgym_summary``,
``marvin_linzen_summary``), so that what ``synlm evaluate-syntax --results`` prints rests on
the records its tables are made from, never on the figures a file stored beside them.

A SyntaxGym record is read back as the item it was written from
(``synlm.tse.syntaxgym.SuiteResult.records``); its ``correct`` must be the conjunction of its
``predictions``, as scoring wrote it, since the tables read the one and the summary the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synlm.errors import InputError
from synlm.tse.benchmarks import (
    BenchmarkResult,
    marvin_linzen_summary,
    pair_summary,
    syntaxgym_summary,
)
from synlm.tse.syntaxgym import ItemResult, SuiteResult


def _item(record: Mapping[str, Any], where: str) -> ItemResult:
    """The SyntaxGym item a record was written from; a one-line error where its
    ``correct`` is not all its ``predictions``."""
    parsed = not record.get("no_parse")
    predictions = tuple(record.get("predictions", ()))
    if parsed and bool(record.get("correct")) != all(predictions):
        raise InputError(f"{where}: syntaxgym item {record.get('suite')} "
                         f"{record.get('item')}: 'correct' is {record.get('correct')} but its "
                         f"predictions are {list(predictions)}; the records were edited")
    return ItemResult(
        record["item"],
        {c: {int(r): v for r, v in regions.items()}
         for c, regions in record.get("surprisals", {}).items()},
        predictions, tuple(record.get("unknown_words", ())),
        {c: tuple(r) for c, r in record.get("empty_regions", {}).items()}, parsed)


def suite_results(records: Sequence[Mapping[str, Any]], where: str) -> list[SuiteResult]:
    """The SyntaxGym suites of ``records`` (read from ``where``), in record order."""
    suites: dict[str, list[ItemResult]] = {}
    for record in records:
        suites.setdefault(record["suite"], []).append(_item(record, where))
    return [SuiteResult(suite, tuple(items)) for suite, items in suites.items()]


def recomputed(name: str, records: list[dict[str, Any]], stored: Mapping[str, Any],
               convention: dict[str, Any], where: str) -> BenchmarkResult:
    """Benchmark ``name``'s result from its ``records`` (read from ``where``) alone: its
    summary and headline recomputed; of the ``stored`` summary only SyntaxGym's
    ``region_names``, which describe the suites, not the model."""
    if name == "syntaxgym":
        summary, headline = syntaxgym_summary(suite_results(records, where),
                                              stored.get("region_names", {}))
    elif name == "marvin_linzen":
        summary, headline = marvin_linzen_summary(records)
    else:
        summary, headline = pair_summary(name, records)
    return BenchmarkResult(name, summary, records, headline, convention)
