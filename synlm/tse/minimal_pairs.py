"""Minimal pairs scored as whole sentences: what BLiMP and Marvin & Linzen share.

Both benchmarks (Marvin & Linzen 2018; Warstadt et al. 2020) pair a grammatical sentence with
one or more ungrammatical ones that differ from it in a word or two, and count the model right
when it gives the grammatical sentence the higher probability. Here every sentence is read with
``Scorer.words`` and scored from a fresh state in a single ``Scorer.score`` call (each distinct
word list once); a pair is correct when the good sentence's total log-probability is strictly
greater than that of every bad alternative (a tie is wrong). The total is the sum of the
words' log-probabilities, without the end of the sentence, as the reference scorers take it
(the BLiMP paper, lm-evaluation-harness's ``blimp_*`` tasks, minicons; Marvin & Linzen's
released scorer); ``eos=True`` adds log p(end | sentence), synlm's alternative.

A pair whose sentences the model reads as the same words (a difference only in punctuation or
case, which Mikolov's PTB deletes or folds) cannot be told apart: its record says
``same_words`` and summaries count such pairs, so a tie for that reason is never silent.

A model with a closed word vocabulary reads some benchmark words as ``<unk>``; when a word that
tells the sentences apart is unknown the comparison says little about syntax. Each pair
therefore records whether any of its differing words (``differing_words``) was read as
unknown, and summaries give the accuracy over all pairs and over the pairs without one.

A transition LM's beam search can find no tree for a sentence (``ScoredSentence.parsed``
False): a pair with such a sentence has no log-probabilities and no ``correct`` (its record
says ``no_parse``), is neither right nor wrong, and summaries count it apart
(``no_parse_pairs``), outside every accuracy and share.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synlm.data.files import DATA_ENV, CorpusError
from synlm.errors import InputError
from synlm.tse.scores import ScoredSentence, Scorer

#: Places kept in the fractions of a summary.
DIGITS = 4


@dataclass(frozen=True)
class MinimalPair:
    """A grammatical sentence and the ungrammatical alternatives it must all beat.

    ``ids`` are the benchmark's keys for the pair (e.g. BLiMP's ``UID`` and ``pairID``, Marvin
    & Linzen's ``template``, ``case`` and ``index``); they head the pair's record.
    """

    ids: dict[str, str | int]
    good: str
    bad: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.bad:
            raise InputError(f"minimal pair {self.ids}: no ungrammatical sentence")


def differences(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """The stretches ``a[i1:i2]``/``b[j1:j2]`` outside the alignment of ``a`` and ``b``:
    ``difflib.SequenceMatcher`` opcodes other than ``equal``."""
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def differing_words(good_words: Sequence[str], bad_words: Sequence[str]) -> list[str]:
    """The words of both lists outside their alignment: for each differing stretch, its good
    words then its bad words (``the author laughs`` / ``the author laugh``: ``[laughs, laugh]``)."""
    return [word for i1, i2, j1, j2 in differences(good_words, bad_words)
            for word in (*good_words[i1:i2], *bad_words[j1:j2])]


def evaluate_pairs(pairs: Sequence[MinimalPair], scorer: Scorer,
                   eos: bool = False) -> list[dict[str, Any]]:
    """Score every pair; one record per pair, in order.

    Each distinct sentence is turned into words once, and each distinct word list is scored
    once, all in one ``scorer.score`` call. A record holds the pair's ``ids``, its sentences
    (``good``, ``bad``), their log-probabilities (``good_log_prob``, ``bad_log_probs``; with
    the end of sentence when ``eos``), ``correct``, ``unknown`` (a differing word, against any
    alternative, was read as unknown) and ``differing_words`` (each once, in order); a pair
    with a sentence of no parse has ``no_parse`` instead of the log-probabilities and
    ``correct``.
    """
    words_of: dict[str, tuple[str, ...]] = {}
    for pair in pairs:
        for text in (pair.good, *pair.bad):
            if text not in words_of:
                words_of[text] = tuple(scorer.words(text))
    unique = list(dict.fromkeys(words_of.values()))
    scored = scorer.score([list(words) for words in unique]) if unique else []
    if len(scored) != len(unique):
        raise ValueError(f"the scorer returned {len(scored)} sentences for {len(unique)}")
    by_words = dict(zip(unique, scored))
    return [_record(pair, [by_words[words_of[text]] for text in (pair.good, *pair.bad)], eos)
            for pair in pairs]


def _record(pair: MinimalPair, scored: list[ScoredSentence], eos: bool) -> dict[str, Any]:
    good, *bads = scored
    words: list[str] = []
    unknown = False
    for bad in bads:
        for i1, i2, j1, j2 in differences(good.words, bad.words):
            words.extend((*good.words[i1:i2], *bad.words[j1:j2]))
            unknown = unknown or any(good.unknown[i1:i2]) or any(bad.unknown[j1:j2])
    if all(s.parsed for s in scored):
        good_log_prob = good.total(eos)
        bad_log_probs = [bad.total(eos) for bad in bads]
        outcome: dict[str, Any] = {
            "good_log_prob": good_log_prob, "bad_log_probs": bad_log_probs,
            "correct": all(good_log_prob > bad for bad in bad_log_probs)}
    else:
        outcome = {"no_parse": True}
    return {
        **pair.ids,
        "good": pair.good,
        "bad": list(pair.bad),
        **outcome,
        "unknown": unknown,
        "differing_words": list(dict.fromkeys(words)),
        "same_words": any(good.words == bad.words for bad in bads),
    }


def fraction(part: float, whole: float) -> float | None:
    """``part / whole`` rounded to ``DIGITS`` places; None when ``whole`` is 0."""
    return round(part / whole, DIGITS) if whole else None


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Pooled over the records with a parse (every record but a transition LM's ``no_parse``
    ones): ``accuracy`` (all those pairs), ``in_vocabulary_accuracy`` (pairs with no unknown
    differing word; None when there is none), ``unknown_share`` (the share of pairs with
    one) and the counts behind them, ``same_words_pairs`` among them (pairs the model reads
    as the same words: a tie, counted wrong); ``no_parse_pairs``: the pairs left out."""
    everything = list(records)
    records = [r for r in everything if not is_unparsed(r)]
    known = [r for r in records if not r["unknown"]]
    return {
        "accuracy": fraction(sum(r["correct"] for r in records), len(records)),
        "in_vocabulary_accuracy": fraction(sum(r["correct"] for r in known), len(known)),
        "unknown_share": fraction(len(records) - len(known), len(records)),
        "pairs": len(records),
        "correct": sum(r["correct"] for r in records),
        "in_vocabulary_pairs": len(known),
        "in_vocabulary_correct": sum(r["correct"] for r in known),
        "same_words_pairs": sum(r.get("same_words", False) for r in records),
        "no_parse_pairs": len(everything) - len(records),
    }


def is_unparsed(record: Mapping[str, Any]) -> bool:
    """Whether a pair's or item's record is one without a parse (``no_parse``)."""
    return bool(record.get("no_parse"))


def group_by(records: Iterable[Mapping[str, Any]],
             key: Callable[[Mapping[str, Any]], str]) -> dict[str, list[Mapping[str, Any]]]:
    """The records under each ``key(record)``, keys in order of first appearance."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def summarize_by(records: Iterable[Mapping[str, Any]],
                 key: Callable[[Mapping[str, Any]], str]) -> dict[str, dict[str, Any]]:
    """``summarize`` of each group of ``group_by(records, key)``."""
    return {name: summarize(group) for name, group in group_by(records, key).items()}


def missing_file(benchmark: str, path: Path, relative: str, url: str) -> CorpusError:
    """The one-line error for a benchmark file that is not there: where it was looked for,
    where ``$SYNLM_DATA_DIR`` should point, and how to fetch it."""
    return CorpusError(f"{benchmark}: missing {path}; set {DATA_ENV} to a folder holding "
                       f"{relative}, or pass --download (download=True) to fetch it from {url}")
