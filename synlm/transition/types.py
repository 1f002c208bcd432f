"""What the transition models share: the contract beam search (``synlm.transition.beam``)
holds a model to (``TransitionLM``, its rows ``TransitionState``), what teacher forcing
returns (``RNNGOutput``), what a search returns (``SearchResult``) and the precision the
softmaxes are taken in (``full_precision``). The RNNG (``synlm.transition.rnng``) and the
action Transformer (``synlm.transition.action_transformer``) import them from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from synlm.transition.parser_state import Limits


def full_precision(x: Tensor) -> Tensor:
    """Logits in at least single precision (half-precision runs normalise in float32)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


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


class TransitionLM(Protocol):
    """What the search asks of a model: R empty stacks, the log-probabilities of the next
    actions (the ``SHIFT`` column joint with the word it generates), and a step."""

    n_actions: int
    limits: Limits

    def initial_state(self, rows: int, stack_size: int, max_actions: int) -> TransitionState:
        ...

    def next_log_probs(self, state: Any, words: Tensor, legal: Tensor) -> Tensor: ...

    def advance(self, state: Any, actions: Tensor, words: Tensor) -> TransitionState: ...


@dataclass(frozen=True)
class SearchResult:
    """One sentence's search (natural logs).

    Attributes:
        word_log_probs: log p(x_i | x_<i) ≈ the change of the beam's log-sum at word i (the
            negated surprisal).
        end_log_prob: log p(end | x): the log-sum over the finished trees minus that after
            the last word.
        parses: the final beam, best first: (action ids, log p(x, y)).
    """

    word_log_probs: tuple[float, ...]
    end_log_prob: float
    parses: tuple[tuple[tuple[int, ...], float], ...]

    @property
    def surprisals(self) -> tuple[float, ...]:
        return tuple(-lp for lp in self.word_log_probs)
