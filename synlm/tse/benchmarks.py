"""The three benchmarks behind one call: ``evaluate_benchmarks(scorer, ["blimp", ...])``.

Each benchmark gives its full summary (as its module computes it), one JSON-ready record per
pair or item, and a few headline numbers (``BenchmarkResult.headline``): the figure the field
quotes, the same over the in-vocabulary pairs or items only, and the share with an unknown
word where it matters. The headlines:

- ``blimp``: the paper's overall accuracy (the mean over the 67 paradigms);
- ``syntaxgym``: the SG score (the mean accuracy over the paper's 31 suites);
- ``marvin_linzen``: one number per section of the paper's Table 1 (agreement, reflexives,
  NPIs), the unweighted mean of its rows' pooled accuracies. The paper reports the rows only;
  the section means are synlm's summary, and the rows are in the full summary.

``synlm evaluate-syntax`` (``synlm.evaluate_syntax``) is the command over this function.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import Any

from synlm.errors import InputError
from synlm.tse.blimp import read_blimp, summarize_blimp
from synlm.tse.marvin_linzen import read_marvin_linzen, summarize_marvin_linzen
from synlm.tse.minimal_pairs import DIGITS, MinimalPair, evaluate_pairs
from synlm.tse.scores import Scorer
from synlm.tse.syntaxgym import (
    SUITES,
    Suite,
    evaluate_suites,
    is_excluded,
    load_suites,
    sg_score,
)

#: The benchmarks by the names the command takes.
BENCHMARKS = ("blimp", "syntaxgym", "marvin_linzen")

#: Marvin & Linzen's Table 1 sections under their headline names.
ML_SECTIONS = {"agreement": "Subject-verb agreement", "reflexives": "Reflexive anaphora",
               "npi": "Negative polarity items"}


@dataclass(frozen=True)
class BenchmarkResult:
    """One benchmark evaluated: its ``summary``, a record per pair or item (each with its
    ``benchmark``) and the ``headline`` numbers (name -> fraction, None where undefined)."""

    name: str
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    headline: dict[str, float | None]

    @property
    def unknown_share(self) -> float | None:
        """The headline share of pairs or items with an unknown word (Marvin & Linzen: the
        largest over its sections)."""
        shares = [v for k, v in self.headline.items() if k.endswith("unknown_share")
                  and v is not None]
        return max(shares) if shares else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def _tagged(name: str, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"benchmark": name, **record} for record in records]


def _blimp(pairs: Sequence[MinimalPair], scorer: Scorer, eos: bool) -> BenchmarkResult:
    records = evaluate_pairs(pairs, scorer, eos)
    summary = summarize_blimp(records)
    overall = summary["overall"]
    return BenchmarkResult("blimp", summary, _tagged("blimp", records), {
        "blimp/accuracy": overall["accuracy"],
        "blimp/in_vocabulary_accuracy": overall["in_vocabulary_accuracy"],
        "blimp/unknown_share": overall["unknown_share"]})


def _syntaxgym(suites: Sequence[Suite], scorer: Scorer, eos: bool) -> BenchmarkResult:
    """``eos`` does not apply: a region's surprisal never includes the end of the sentence.
    The in-vocabulary SG score averages each suite's accuracy over its items without an
    unknown word in a critical region (suites with none left out)."""
    results = evaluate_suites(suites, scorer)
    score = sg_score({r.suite: r.accuracy for r in results})
    known = {r.suite: r.in_vocab_accuracy for r in results
             if r.in_vocab_accuracy is not None and not is_excluded(r.suite)}
    known_score = sg_score(known) if known else None
    included = [r for r in results if not is_excluded(r.suite)]
    summary = {
        "sg_score": _rounded(score.score),
        "in_vocabulary_sg_score": _rounded(known_score.score if known_score else None),
        "unknown_share": _rounded(fmean(r.unknown_share for r in included)),
        "circuits": {c: _rounded(v) for c, v in score.circuits.items()},
        "in_vocabulary_circuits": {c: _rounded(v) for c, v in
                                   (known_score.circuits if known_score else {}).items()},
        "suites": {r.suite: {k: _rounded(v) if isinstance(v, float) else v
                             for k, v in r.summary().items() if k != "suite"}
                   for r in results},
        "scored_suites": len(included),
        "items": sum(len(r.items) for r in included),
    }
    records = [record for r in results for record in r.records()]
    return BenchmarkResult("syntaxgym", summary, _tagged("syntaxgym", records), {
        "syntaxgym/sg_score": summary["sg_score"],
        "syntaxgym/in_vocabulary_sg_score": summary["in_vocabulary_sg_score"],
        "syntaxgym/unknown_share": summary["unknown_share"]})


def _marvin_linzen(pairs: Sequence[MinimalPair], scorer: Scorer,
                   eos: bool) -> BenchmarkResult:
    records = evaluate_pairs(pairs, scorer, eos)
    summary = summarize_marvin_linzen(records)
    headline: dict[str, float | None] = {}
    for short, section in ML_SECTIONS.items():
        rows = list(summary["table1"].get(section, {}).values())
        for measure in ("accuracy", "in_vocabulary_accuracy", "unknown_share"):
            values = [row[measure] for row in rows if row[measure] is not None]
            headline[f"marvin_linzen/{short}/{measure}"] = (
                _rounded(fmean(values)) if values else None)
    return BenchmarkResult("marvin_linzen", summary, _tagged("marvin_linzen", records),
                           headline)


_SCORE: dict[str, Callable[[Any, Scorer, bool], BenchmarkResult]] = {
    "blimp": _blimp, "syntaxgym": _syntaxgym, "marvin_linzen": _marvin_linzen}


def load_benchmarks(benchmarks: Sequence[str] = BENCHMARKS,
                    data_dir: str | Path | None = None, subset: int | None = None,
                    download: bool = False, suites: Sequence[str] | None = None
                    ) -> dict[str, list[Any]]:
    """Read ``benchmarks`` (names of ``BENCHMARKS``): BLiMP's and Marvin & Linzen's pairs,
    SyntaxGym's suites; every file is read before anything is scored, so a missing one
    stops a run at once.

    Args:
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).
        subset: the first ``subset`` pairs of each BLiMP paradigm and Marvin & Linzen case,
            items of each SyntaxGym suite (a quick run).
        download: fetch a benchmark's missing files (checked against their checksums).
        suites: SyntaxGym suites to read (default ``SUITES``, the paper's 34).
    """
    unknown = [name for name in benchmarks if name not in _SCORE]
    if unknown:
        raise InputError(f"unknown benchmark {unknown[0]!r}; expected one of {BENCHMARKS}")
    bad_suites = [name for name in suites or () if name not in SUITES]
    if bad_suites:
        close = difflib.get_close_matches(bad_suites[0], SUITES, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise InputError(f"unknown SyntaxGym suite {bad_suites[0]!r}{hint} (the paper's 34: "
                         f"{', '.join(SUITES)})")
    loaded: dict[str, list[Any]] = {}
    for name in benchmarks:
        if name == "blimp":
            loaded[name] = read_blimp(data_dir=data_dir, subset=subset, download=download)
        elif name == "marvin_linzen":
            loaded[name] = read_marvin_linzen(data_dir=data_dir, subset=subset,
                                              download=download)
        else:
            loaded[name] = [replace(suite, items=suite.items[:subset])
                            for suite in load_suites(suites, data_dir, download)]
    return loaded


def score_benchmarks(loaded: Mapping[str, Sequence[Any]], scorer: Scorer,
                     eos: bool = True) -> dict[str, BenchmarkResult]:
    """Score what ``load_benchmarks`` read, benchmark by benchmark; ``eos``: count the end
    of the sentence in BLiMP's and Marvin & Linzen's sentence log-probabilities."""
    return {name: _SCORE[name](data, scorer, eos) for name, data in loaded.items()}


def evaluate_benchmarks(scorer: Scorer, benchmarks: Sequence[str] = BENCHMARKS,
                        data_dir: str | Path | None = None, subset: int | None = None,
                        download: bool = False, eos: bool = True,
                        suites: Sequence[str] | None = None) -> dict[str, BenchmarkResult]:
    """``load_benchmarks`` then ``score_benchmarks`` with one scorer, e.g.
    ``synlm.tse.scoring.ModelScorer(model)``."""
    return score_benchmarks(load_benchmarks(benchmarks, data_dir, subset, download, suites),
                            scorer, eos)
