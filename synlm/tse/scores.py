"""What a scorer returns for one sentence, and what every benchmark asks of a scorer.

The benchmarks (``blimp``, ``marvin_linzen``, ``syntaxgym``) read only this module's types:
they turn benchmark text into words with ``Scorer.words`` and score lists of words with
``Scorer.score``; ``synlm.tse.scoring.ModelScorer`` is the scorer of a ``SyntaxLM``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ScoredSentence:
    """One sentence scored from a fresh state: natural-log probabilities.

    ``words`` are what the model read, in its corpus's form (``Scorer.words``); each word's
    log-probability is the sum over its tokens (one token a word for a word vocabulary, its
    subwords otherwise); ``unknown[i]`` says whether word i was read as the unknown token.
    ``eos_log_prob`` is the log-probability of the end of the sentence after the last word.
    """

    words: tuple[str, ...]
    word_log_probs: tuple[float, ...]
    unknown: tuple[bool, ...]
    eos_log_prob: float
    tokens: tuple[str, ...]  # the model's tokens, in order (``<unk>`` where unknown)
    token_log_probs: tuple[float, ...]

    def total(self, eos: bool = True) -> float:
        """log p(sentence): the words' log-probabilities and, with ``eos``, its end's."""
        return sum(self.word_log_probs) + (self.eos_log_prob if eos else 0.0)


class Scorer(Protocol):
    """What a benchmark needs of a model."""

    def words(self, text: str) -> list[str]:
        """``text`` (benchmark English: cased, punctuated) as the words the model reads, in
        its training corpus's form; may be empty (a region of punctuation only)."""
        ...

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        """Each sentence (words as ``words`` returns them) scored from a fresh state."""
        ...
