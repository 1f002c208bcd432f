"""The three benchmarks behind one call: ``evaluate_benchmarks(scorer, ["blimp", ...])``.

Each benchmark gives its full summary (as its module computes it), one JSON-ready record per
pair or item, and a few headline numbers (``BenchmarkResult.headline``): the figure the field
quotes, the same over the in-vocabulary pairs or items only, and the share with an unknown
word where it matters. The headlines:

- ``blimp``: the paper's overall accuracy (the mean over the 67 paradigms);
- ``syntaxgym``: the SG score (the mean accuracy over the paper's 31 suites);
- ``marvin_linzen``: for agreement and reflexives, the unweighted mean of the section's
  Table 1 rows' pooled accuracies; for the NPIs, the same mean of each of the three pairwise
  accuracies the released analysis reports (``NPI_COMPARISONS``). The paper reports the rows
  only; the section means are synlm's summary, and the rows are in the full summary;
- ``pairs``: a researcher's own BLiMP-style pairs (``read_pairs``), summarised as BLiMP is.

Each benchmark's default is its reference scorer's convention for the end of the sentence
(``CONVENTIONS``); ``eos`` forces it in or out, and every result names the convention it used.

``synlm evaluate-syntax`` (``synlm.commands.evaluate_syntax``) is the command over this function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import fmean
from typing import Any

from synlm.errors import InputError
from synlm.runtime.usage import did_you_mean
from synlm.tse.blimp import read_blimp, read_pairs, summarize_blimp
from synlm.tse.marvin_linzen import (
    NPI_COMPARISONS,
    read_marvin_linzen,
    summarize_marvin_linzen,
    with_npi_comparisons,
)
from synlm.tse.minimal_pairs import DIGITS, MinimalPair, evaluate_pairs
from synlm.tse.scores import Scorer
from synlm.tse.syntaxgym import (
    SUITES,
    Suite,
    SuiteResult,
    evaluate_suites,
    is_excluded,
    load_suites,
    maps_by_heuristic,
    read_suite,
    sg_score,
)

#: The benchmarks by the names the command takes (``pairs``: a researcher's own pair files,
#: scored only when given).
BENCHMARKS = ("blimp", "syntaxgym", "marvin_linzen")

#: Each benchmark's reference convention for the end of the sentence, the default.
CONVENTIONS = {
    "blimp": "the words' log-probabilities, no end-of-sentence term (the BLiMP paper, "
             "lm-evaluation-harness's blimp tasks, minicons)",
    "pairs": "the words' log-probabilities, no end-of-sentence term (as BLiMP)",
    "marvin_linzen": "the words' log-probabilities, no end-of-sentence term (the released "
                     "scorer)",
    "syntaxgym": "the end-of-sentence token in the region syntaxgym-core's mapping puts it "
                 "(none for a Hugging Face model, as its Hugging Face path)",
}

#: Marvin & Linzen's Table 1 sections under their headline names.
ML_SECTIONS = {"agreement": "Subject-verb agreement", "reflexives": "Reflexive anaphora",
               "npi": "Negative polarity items"}


@dataclass(frozen=True)
class BenchmarkResult:
    """One benchmark evaluated: its ``summary``, a record per pair or item (each with its
    ``benchmark``), the ``headline`` numbers (name -> fraction, None where undefined) and the
    ``convention`` it was scored under (``eos``: whether the end of the sentence counted;
    ``reference``: whether that is the reference scorer's choice; ``text``)."""

    name: str
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    headline: dict[str, float | None]
    convention: dict[str, Any] = field(default_factory=dict)

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


def _convention(name: str, eos: bool, reference: bool) -> dict[str, Any]:
    text = CONVENTIONS[name] if eos == reference else (
        "synlm's: with the end-of-sentence term" if eos else "synlm's: no end-of-sentence term")
    return {"eos": eos, "reference": eos == reference, "text": text}


def _pair_benchmark(name: str) -> Callable[[Sequence[MinimalPair], Scorer, bool | None],
                                           BenchmarkResult]:
    """BLiMP's scoring and summary under ``name`` (``blimp``, or ``pairs`` for one's own)."""

    def score(pairs: Sequence[MinimalPair], scorer: Scorer,
              eos: bool | None) -> BenchmarkResult:
        used = bool(eos)
        records = evaluate_pairs(pairs, scorer, used)
        summary, headline = pair_summary(name, records)
        return BenchmarkResult(name, summary, _tagged(name, records), headline,
                               _convention(name, used, reference=False))

    return score


def pair_summary(name: str, records: Sequence[Mapping[str, Any]]
                 ) -> tuple[dict[str, Any], dict[str, float | None]]:
    """The summary and headline of BLiMP-style pair records (``blimp``, ``pairs``)."""
    summary = summarize_blimp(records)
    overall = summary["overall"]
    return summary, {f"{name}/{key}": overall[key] for key in
                     ("accuracy", "in_vocabulary_accuracy", "unknown_share")}


def _syntaxgym(suites: Sequence[Suite], scorer: Scorer, eos: bool | None) -> BenchmarkResult:
    """Region surprisals as syntaxgym-core's runner gives them (``evaluate_suites``), each
    suite's region names in the summary (``region_names``: suite -> number -> name). The
    in-vocabulary SG score averages each suite's accuracy over its items without an unknown
    word in a critical region (suites with none left out); items without a parse (a
    transition LM's) are left out of both and counted (``no_parse_items``)."""
    reference = maps_by_heuristic(scorer)
    used = reference if eos is None else eos
    results = evaluate_suites(suites, scorer, used)
    region_names = {suite.name: {str(number): name for number, name in
                                 suite.region_names.items()} for suite in suites}
    summary, headline = syntaxgym_summary(results, region_names)
    records = [record for r in results for record in r.records()]
    return BenchmarkResult("syntaxgym", summary, _tagged("syntaxgym", records), headline,
                           _convention("syntaxgym", used, reference))


def syntaxgym_summary(results: Sequence[SuiteResult], region_names: Mapping[str, Any]
                      ) -> tuple[dict[str, Any], dict[str, float | None]]:
    """The summary (``region_names``: suite -> number -> name, as given) and headline of
    evaluated SyntaxGym suites."""
    score = sg_score({r.suite: r.accuracy for r in results if r.accuracy is not None})
    known = {r.suite: r.in_vocabulary_accuracy for r in results
             if r.in_vocabulary_accuracy is not None and not is_excluded(r.suite)}
    known_score = sg_score(known) if known else None
    included = [r for r in results if not is_excluded(r.suite)]
    summary = {
        "sg_score": _rounded(score.score),
        "in_vocabulary_sg_score": _rounded(known_score.score if known_score else None),
        "unknown_share": _rounded(fmean(r.unknown_share for r in included
                                        if r.unknown_share is not None)),
        "circuits": {c: _rounded(v) for c, v in score.circuits.items()},
        "in_vocabulary_circuits": {c: _rounded(v) for c, v in
                                   (known_score.circuits if known_score else {}).items()},
        "suites": {r.suite: {k: _rounded(v) if isinstance(v, float) else v
                             for k, v in r.summary().items() if k != "suite"}
                   for r in results},
        "scored_suites": len(included),
        "items": sum(len(r.items) for r in included),
        "in_vocabulary_items": sum(r.in_vocabulary_items for r in included),
        "empty_region_items": sum(r.empty_region_items for r in included),
        "no_parse_items": sum(r.no_parse_items for r in included),
        "region_names": dict(region_names),
    }
    return summary, {f"syntaxgym/{key}": summary[key] for key in
                     ("sg_score", "in_vocabulary_sg_score", "unknown_share")}


def _marvin_linzen(pairs: Sequence[MinimalPair], scorer: Scorer,
                   eos: bool | None) -> BenchmarkResult:
    used = bool(eos)
    records = with_npi_comparisons(evaluate_pairs(pairs, scorer, used))
    summary, headline = marvin_linzen_summary(records)
    return BenchmarkResult("marvin_linzen", summary, _tagged("marvin_linzen", records),
                           headline, _convention("marvin_linzen", used, reference=False))


def marvin_linzen_summary(records: Sequence[Mapping[str, Any]]
                          ) -> tuple[dict[str, Any], dict[str, float | None]]:
    """The summary and headline (each section's mean of its Table 1 rows) of Marvin &
    Linzen records with their NPI comparisons."""
    summary = summarize_marvin_linzen(records)
    headline: dict[str, float | None] = {}
    for short, section in ML_SECTIONS.items():
        rows = list(summary["table1"].get(section, {}).values())
        measures = (*NPI_COMPARISONS, "unknown_share") if short == "npi" else (
            "accuracy", "in_vocabulary_accuracy", "unknown_share")
        for measure in measures:
            values = [row[measure] for row in rows if row[measure] is not None]
            headline[f"marvin_linzen/{short}/{measure}"] = (
                _rounded(fmean(values)) if values else None)
    return summary, headline


_SCORE: dict[str, Callable[[Any, Scorer, bool | None], BenchmarkResult]] = {
    "blimp": _pair_benchmark("blimp"), "syntaxgym": _syntaxgym,
    "marvin_linzen": _marvin_linzen, "pairs": _pair_benchmark("pairs")}


def is_suite_file(name: str) -> bool:
    """Whether a ``suites`` entry names a suite file (a path ending in ``.json``) rather than
    one of the paper's suites."""
    return name.endswith(".json") or "/" in name


def load_benchmarks(benchmarks: Sequence[str] = BENCHMARKS,
                    data_dir: str | Path | None = None, subset: int | None = None,
                    download: bool = False, suites: Sequence[str] | None = None,
                    pairs: Sequence[str | Path] = (),
                    paradigms: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """Read ``benchmarks`` (names of ``BENCHMARKS``): BLiMP's and Marvin & Linzen's pairs,
    SyntaxGym's suites, and ``pairs`` files as the benchmark ``pairs``; every file is read
    before anything is scored, so a missing one stops a run at once.

    Args:
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).
        subset: the first ``subset`` pairs of each BLiMP paradigm and Marvin & Linzen case,
            items of each SyntaxGym suite (a quick run).
        download: fetch a benchmark's missing files (checked against their checksums).
        suites: SyntaxGym suites to read (default ``SUITES``, the paper's 34): names of the
            paper's suites or paths to suite files (JSON as SyntaxGym publishes it).
        pairs: files of one's own minimal pairs (``synlm.tse.blimp.read_pairs``).
        paradigms: BLiMP's paradigms to read, by ``UID`` (default all 67).
    """
    unknown = [name for name in benchmarks if name not in _SCORE]
    if unknown:
        raise InputError(f"unknown benchmark {unknown[0]!r}; expected one of {BENCHMARKS}")
    bad_suites = [name for name in suites or ()
                  if name not in SUITES and not is_suite_file(name)]
    if bad_suites:
        raise InputError(f"unknown SyntaxGym suite {bad_suites[0]!r}"
                         f"{did_you_mean(bad_suites[0], SUITES)} (the paper's 34: "
                         f"{', '.join(SUITES)}; or a path to a suite .json file)")
    loaded: dict[str, list[Any]] = {}
    for name in benchmarks:
        if name == "blimp":
            loaded[name] = read_blimp(data_dir=data_dir, subset=subset, download=download,
                                      paradigms=paradigms)
        elif name == "marvin_linzen":
            loaded[name] = read_marvin_linzen(data_dir=data_dir, subset=subset,
                                              download=download)
        else:
            named = [s for s in suites if not is_suite_file(s)] if suites else None
            read = load_suites(named, data_dir, download)
            read += [read_suite(path) for path in suites or () if is_suite_file(path)]
            loaded[name] = [replace(suite, items=suite.items[:subset]) for suite in read]
    if pairs:
        loaded["pairs"] = [pair for path in pairs for pair in read_pairs(path, subset)]
    return loaded


def score_benchmarks(loaded: Mapping[str, Sequence[Any]], scorer: Scorer,
                     eos: bool | None = None) -> dict[str, BenchmarkResult]:
    """Score what ``load_benchmarks`` read, benchmark by benchmark. ``eos``: None scores each
    benchmark as its reference scorer does (``CONVENTIONS``); True or False counts the end of
    the sentence in every benchmark or in none."""
    return {name: _SCORE[name](data, scorer, eos) for name, data in loaded.items()}


def evaluate_benchmarks(scorer: Scorer, benchmarks: Sequence[str] = BENCHMARKS,
                        data_dir: str | Path | None = None, subset: int | None = None,
                        download: bool = False, eos: bool | None = None,
                        suites: Sequence[str] | None = None,
                        pairs: Sequence[str | Path] = (),
                        paradigms: Sequence[str] | None = None) -> dict[str, BenchmarkResult]:
    """``load_benchmarks`` then ``score_benchmarks`` with one scorer, e.g.
    ``synlm.tse.scoring.ModelScorer(model)`` or ``synlm.tse.hf_scoring.HFScorer(path)``."""
    return score_benchmarks(load_benchmarks(benchmarks, data_dir, subset, download, suites,
                                            pairs, paradigms), scorer, eos)
