"""What a scorer returns for one sentence, and what every benchmark asks of a scorer.

The benchmarks (``blimp``, ``marvin_linzen``, ``syntaxgym``) read only this module's types:
they turn benchmark text into words with ``Scorer.words`` and score lists of words with
``Scorer.score``. Three scorers ship: ``synlm.tse.scoring.ModelScorer`` (a synlm model),
``synlm.tse.hf_scoring.HFScorer`` (a Hugging Face causal LM) and
``synlm.tse.masked_scoring.PLLScorer`` (a masked LM, by pseudo-log-likelihood); anything with
these two methods is another. What a scorer may say besides is a protocol here, checked with
``isinstance``: ``MapsRegions`` and ``CoversEnd`` (SyntaxGym's regions), ``ScoresHubModel``,
``ScoresPLL`` and ``RunsOnDevice`` (what ``synlm.tse.provenance`` records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@dataclass(frozen=True)
class ScoredSentence:
    """One sentence scored from a fresh state: natural-log probabilities.

    ``words`` are what the model read, in its corpus's form (``Scorer.words``); each word's
    log-probability is the sum over its tokens (one token a word for a word vocabulary, its
    subwords otherwise); ``unknown[i]`` says whether word i was read as the unknown token.
    ``eos_log_prob`` is the log-probability of the end of the sentence after the last word
    (None for a scorer that does not model it).

    A transition LM's beam search can find no tree for a sentence (``parsed`` False, "no
    parse within the beam"): it then has no log-probabilities (``word_log_probs``,
    ``token_log_probs`` and ``eos_log_prob`` None), and the benchmarks count it apart.
    """

    words: tuple[str, ...]
    word_log_probs: tuple[float, ...] | None
    unknown: tuple[bool, ...]
    eos_log_prob: float | None
    tokens: tuple[str, ...]  # the model's tokens, in order (``<unk>`` where unknown)
    token_log_probs: tuple[float, ...] | None
    parsed: bool = True

    def total(self, eos: bool = False) -> float:
        """log p(sentence): the words' log-probabilities and, with ``eos``, its end's (the
        reference scorers of BLiMP and Marvin & Linzen leave the end out: the default)."""
        if not self.parsed:
            raise ValueError(f"{' '.join(self.words)!r}: no parse within the beam, so no "
                             "log-probability; count it apart (ScoredSentence.parsed)")
        if eos and self.eos_log_prob is None:
            raise ValueError("this scorer gives no end-of-sentence probability; score "
                             "without the end-of-sentence term (eos=False)")
        return sum(self.word_log_probs) + (  # type: ignore[arg-type]
            self.eos_log_prob if eos else 0.0)  # type: ignore[operator]


class Scorer(Protocol):
    """What a benchmark needs of a model. It may also map SyntaxGym's regions its own way
    (``MapsRegions``, ``CoversEnd``)."""

    def words(self, text: str) -> list[str]:
        """``text`` (benchmark English: cased, punctuated) as the words the model reads, in
        its training corpus's form; may be empty (a region of punctuation only)."""
        ...

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        """Each sentence (words as ``words`` returns them) scored from a fresh state."""
        ...


@runtime_checkable
class MapsRegions(Protocol):
    """Says how SyntaxGym's reference runner maps this kind of model's tokens onto regions
    (a scorer without it: ``"heuristic"``)."""

    #: ``"heuristic"``: its heuristic walk, end-of-sentence token included (lm-zoo's
    #: word-level models end every sentence with one); ``"offsets"``: its Hugging Face path
    #: (character offsets, no end-of-sentence token)
    syntaxgym_mapping: str


@runtime_checkable
class CoversEnd(Protocol):
    """Says whether its words reach the end of a text (a scorer without it: always)."""

    def covers_end(self, text: str) -> bool:
        """Whether ``words(text)`` reach the end of ``text``: nothing the model drops
        (punctuation of Mikolov's PTB) trails the last word. SyntaxGym's mapping moves on
        to the next region only when a region's text is used up."""
        ...


@runtime_checkable
class SearchesTrees(Protocol):
    """Scores by search over trees (``ModelScorer`` over a transition LM): ``convention``,
    the surprisal its search reports (``synlm.transition.types.CONVENTIONS``; None for a
    model that reads every word left to right), the ``model`` it searches with, and
    ``end_is_certain``: whether its end-of-sentence term is 0 for every sentence under that
    convention (a top-down model renormalised; not the in-order RNNG)."""

    convention: str | None
    model: Any
    end_is_certain: bool


@runtime_checkable
class ScoresHubModel(Protocol):
    """Scores with a Hugging Face model (``HFScorer``, ``PLLScorer``): the ``name`` or
    folder it loaded and the transformers ``model``."""

    name: str
    model: Any


@runtime_checkable
class AdaptsSynLM(Protocol):
    """A synlm model behind a Hugging Face model's call (``SynLMMaskedLM``, which a
    ``PLLScorer`` scores): ``lm``, the synlm model (provenance)."""

    lm: Any


@runtime_checkable
class ScoresPLL(Protocol):
    """Scores by pseudo-log-likelihood (``PLLScorer``): ``pll``, the variant, as the output's
    conventions name it."""

    pll: str


@runtime_checkable
class RunsOnDevice(Protocol):
    """Runs its model on ``device`` (a ``torch.device``)."""

    device: Any


def by_length(lengths: Sequence[int], batch_size: int, score: Callable[[list[int]], list[T]],
              progress: Callable[[int], None] | None = None) -> list[T]:
    """``score`` applied to the indices of the items sorted by ``lengths``, longest first,
    ``batch_size`` at a time (so padding stays small), its results back in the given order;
    ``progress`` is called with the number of items after each batch."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[T | None] = [None] * len(lengths)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        for i, result in zip(chunk, score(chunk), strict=True):
            out[i] = result
        if progress is not None:
            progress(len(chunk))
    return out  # type: ignore[return-value]
