"""Directed and undirected dependency accuracy of predicted heads against gold heads, as
StructFormer (Shen et al. 2021) and UDGN (Shen et al. 2022) compute them (docs/evaluation.md,
"Dependency accuracy on constituency trees"). Heads are 1-based, 0 = ROOT, over the words
that are scored (``synlm.syntax.head_rules.evaluation_heads``); every word counts once, its
attachment to ROOT included, and the figures are corpus-level: summed over sentences, then
divided by the words.

By position (UDGN's ``test_phrase_grammar.test``; ``dda``, ``uda``): a word is directed-correct
when its predicted head is its gold head; the undirected figure counts the arcs shared by the
two trees once their direction is dropped, each tree taken as a **set** of unordered pairs
{word, head} (a root as the pair {word, word}, UDGN's self-loop), so two words predicted to
head each other count as one pair.

By words (StructFormer's ``tree_utils.evald``; ``dda_words``, ``uda_words``): each word gives
the pair (word, head word), lowercased, ``<s>`` for ROOT (undirected: the two sorted as
strings); a predicted pair is correct when the same pair of strings is anywhere among the
sentence's gold pairs, so a repeated word (two ``the``) can match the other occurrence's arc;
the predicted pairs name the tree's words, the gold pairs the gold file's (``gold_words``), so
a word a converter wrote otherwise (``3/4`` for ``3\\/4``) never matches.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The head word of a root in StructFormer's word pairs.
ROOT_WORD = "<s>"


def _pairs(heads: Sequence[int]) -> set[tuple[int, int]]:
    """Unordered {word, head} pairs of 1-based heads, a root as {word, word}."""
    return {(min(i, h or i), max(i, h or i)) for i, h in enumerate(heads, 1)}


def _word_pairs(heads: Sequence[int], words: Sequence[str],
                directed: bool) -> list[tuple[str, str]]:
    lower = [w.lower() for w in words]
    pairs = [(lower[i], lower[h - 1] if h else ROOT_WORD) for i, h in enumerate(heads)]
    return pairs if directed else [(min(p), max(p)) for p in pairs]


def sentence_counts(pred: Sequence[int], gold: Sequence[int], words: Sequence[str],
                    gold_words: Sequence[str] | None = None) -> tuple[int, int, int, int]:
    """One sentence's correct words: directed and undirected by position, directed and
    undirected by words (the gold pairs name ``gold_words``, the gold file's spelling of
    ``words``, where one is given)."""
    gold_words = words if gold_words is None else gold_words
    if not len(pred) == len(gold) == len(words) == len(gold_words):
        raise ValueError(f"{len(pred)} predicted heads, {len(gold)} gold heads and "
                         f"{len(words)} words; expected one of each a word")
    counts = [sum(p == g for p, g in zip(pred, gold)), len(_pairs(pred) & _pairs(gold))]
    for directed in (True, False):
        reference = _word_pairs(gold, gold_words, directed)
        counts.append(sum(p in reference for p in _word_pairs(pred, words, directed)))
    return counts[0], counts[1], counts[2], counts[3]


#: The figures of ``DependencyAccuracy.compute``, in the order ``sentence_counts`` counts them.
KEYS = ("dda", "uda", "dda_words", "uda_words")


class DependencyAccuracy:
    """Corpus-level directed and undirected accuracy (``KEYS``), as fractions; ``update``
    takes a batch of sentences' predicted heads, gold heads and words (and the gold file's
    spelling of them)."""

    def __init__(self) -> None:
        self.correct = [0, 0, 0, 0]
        self.n_words = 0
        self.n_sentences = 0

    def update(self, preds: Sequence[Sequence[int]], golds: Sequence[Sequence[int]],
               words: Sequence[Sequence[str]],
               gold_words: Sequence[Sequence[str]] | None = None) -> None:
        spelled = words if gold_words is None else gold_words
        for pred, gold, sentence, written in zip(preds, golds, words, spelled, strict=True):
            counts = sentence_counts(pred, gold, sentence, written)
            self.correct = [a + b for a, b in zip(self.correct, counts)]
            self.n_words += len(gold)
            self.n_sentences += 1

    def compute(self) -> dict[str, float]:
        """Each figure of ``KEYS``: correct words / words (NaN without a word)."""
        return {key: c / self.n_words if self.n_words else float("nan")
                for key, c in zip(KEYS, self.correct)}
