"""What the transition models share besides their contract (``synlm.transition.model``):
the rows search holds (``TransitionState``, ``GrowingState``), a search step in two parts
(``SplitStep``), what teacher forcing returns
(``RNNGOutput``), what a search returns (``SearchResult``) and the precision the softmaxes
are taken in (``full_precision``), and a tensor derived from weights, kept until they change
(``derived``). The RNNG (``synlm.transition.rnng``) and the
action Transformer (``synlm.transition.action_transformer``) import them from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

RENORMALISED, ALL_ACTIONS = "renormalised_given_length", "all_actions"
#: The Pushdown LM's search (``synlm.transition.pushdown_beam``), a word-synchronous beam
#: over attachments rather than actions.
PUSHDOWN_RANKED = "pushdown_ranked"
#: How a search normalises each action's probability (module docstring), by name.
CONVENTIONS: dict[str, str] = {
    RENORMALISED: "each action renormalised over the actions legal given the sentence's "
    "length (rnng-pytorch's search): log p(x_i | x_<i, n); the end term is 0 for a top-down "
    "model (after the last word only REDUCE is legal), not for the in-order RNNG",
    ALL_ACTIONS: "each action normalised over every action, as in training (the released "
    "PLM's search): log p(x_i | x_<i); the end term is log p(end | x)",
    PUSHDOWN_RANKED: "Pushdown Layers' released beam search over attachments: the prefix "
    "probability after each word is the sum over the beam's size of best-ranked extensions "
    "of their origin's joint and the word, each attachment normalised over every token; the "
    "end term is log p(<eos>, </s> | x)",
}
#: What a sentence whose beam emptied, twice, is marked as (``SearchResult.parsed`` False).
NO_PARSE = "no parse within the beam"


def full_precision(x: Tensor) -> Tensor:
    """Logits in at least single precision (half-precision runs normalise in float32)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def derived(owner: Any, name: str, sources: tuple[Tensor, ...],
            make: Callable[[], Tensor]) -> Tensor:
    """``make()``, kept on ``owner`` as attribute ``name`` and made again whenever one of
    ``sources`` changes: another tensor, its storage or its version (an optimiser step,
    ``load_state_dict``, ``to``)."""
    key = tuple((source.data_ptr(), source._version) for source in sources)
    kept = getattr(owner, name, None)  # (the sources, their storage and versions, the value)
    if kept is None or any(a is not b for a, b in zip(kept[0], sources)) or kept[1] != key:
        with torch.no_grad():
            kept = (sources, key, make())
        setattr(owner, name, kept)
    return kept[2]


@dataclass
class RNNGOutput:
    """Teacher-forced log-probabilities of gold actions and words (natural log).

    Attributes:
        action_log_probs: (B, A) log p(a_t | a_<t), 0 at padding.
        word_log_probs: (B, N) log p(x_i | a_<t(i)), 0 at padding.
        joint: (B,) log p(x, y) = the two summed.
    """

    action_log_probs: Tensor
    word_log_probs: Tensor
    joint: Tensor


class TransitionState(Protocol):
    """A batch of R stacks: its ``parser`` (``ParserState``) and row selection."""

    parser: Any

    def select(self, index: Tensor, out: Any = None) -> TransitionState: ...

    def assign(self, rows: Tensor, source: Any, source_rows: Tensor) -> None: ...


class SplitStep(Protocol):
    """One search step's log-probabilities in two parts (``TransitionModel.split_log_probs``):
    ``actions`` (R, n_actions), -inf where not legal, whose ``SHIFT`` column is log p(SHIFT)
    without the word; ``word_log_probs(rows)`` (R',) log p(word) of those rows, the word
    softmax, a step's largest product, on them alone; ``word_bounds(rows)`` (R',) float64,
    an upper bound of each for a small share of that cost."""

    actions: Tensor

    def word_log_probs(self, rows: Tensor) -> Tensor: ...

    def word_bounds(self, rows: Tensor) -> Tensor: ...


@runtime_checkable
class GrowingState(Protocol):
    """A state whose per-row memory grows as its rows fill it (an action Transformer's key and
    value cache), up to ``capacity`` positions; ``reserve(capacity)`` allocates it all (what
    the search's batch sizing counts)."""

    capacity: int

    def reserve(self, positions: int) -> None: ...


@dataclass(frozen=True)
class SearchResult:
    """One sentence's search (natural logs).

    Attributes:
        word_log_probs: log p(x_i | x_<i) ≈ the change of the beam's log-sum at word i (the
            negated surprisal; given n under ``renormalised_given_length``); None when the
            beam emptied (``parsed``).
        end_log_prob: log p(end | x): the log-sum over the finished trees minus that after
            the last word (0 under ``renormalised_given_length`` for a top-down model,
            ``SearchSettings.end_is_certain``); None when the beam emptied.
        parses: the final beam, best first: (action ids, log p(x, y)); empty when the beam
            emptied.
        unbounded_stack: the sentence was searched again without the stack bound (its
            first beam emptied).
    """

    word_log_probs: tuple[float, ...] | None
    end_log_prob: float | None
    parses: tuple[tuple[tuple[int, ...], float], ...]
    unbounded_stack: bool = False

    @property
    def parsed(self) -> bool:
        """Whether the search found a tree (False: ``NO_PARSE``, no log-probabilities)."""
        return self.word_log_probs is not None

    @property
    def surprisals(self) -> tuple[float, ...] | None:
        if self.word_log_probs is None:
            return None
        return tuple(-lp for lp in self.word_log_probs)
