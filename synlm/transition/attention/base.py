"""What an attention policy of the action Transformer provides.

The action Transformer (``synlm.transition.action_transformer``) reads a sentence's top-down
actions as tokens, position 0 a start token, and runs the same layers whatever its policy;
the policy decides which earlier tokens each token reads, in the two ways the model runs:

- **teacher forcing**, a whole batch at once: ``masks(actions, num_heads)`` lays out the
  batch's tokens (``BatchMasks``: the action each token stands for, so a policy may read an
  action as several tokens, as Transformer Grammars reads a ``REDUCE`` as two; which tokens
  predict the next action; the keys each token may attend to; relative positions); or, for
  a policy that reads in chunks with Transformer-XL memory (Transformer Grammars'
  documents, given its ``sequence_length``), cuts them into chunks and says what each reads
  (``ChunkedMasks``: per ``MemoryChunk`` the keys of its own tokens and of the memory
  slots, and which tokens the next chunk's memory holds; ``memory.read_in_chunks`` runs
  them);
- **search**, one action per row and step through a key/value cache:
  ``initial_state(rows, capacity, num_heads, device)`` gives the rows' ``AttentionState``
  (the start token read), whose ``step(actions)`` updates it in place and returns what the
  step feeds the attention (``StepMasks``: the new tokens' cache positions and their mask
  rows); ``cache_positions(max_actions)`` says how many positions a row may fill;

and it sets what the model builds around it: learned absolute positions
(``absolute_positions``) or none, Transformer-XL relative attention over a range of
relative positions (``relative_range``) or none, a ``REDUCE`` read as the labelled closing
bracket of its constituent (``closing_brackets``) or as ``REDUCE``, and the layer order the
model takes when its ``pre_norm`` is unset. A policy that both ways gives the same masks
gives the same log-probabilities by teacher forcing and by search
(tests/test_attention_policies.py checks a policy written in the test file).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch
from torch import Tensor

from synlm.modules.recorded import RecordsInit
from synlm.transition.parser_state import FIRST_NT, REDUCE


@dataclass(frozen=True)
class BatchMasks:
    """The tokens of a teacher-forced batch of B action sequences (A actions, -1 padded) and
    the attention between them; T tokens a row, position 0 the start token.

    Attributes:
        source: (B, T) long: the index of the action each token stands for (several tokens
            may stand for one action), -1 for the start token and for padding (a token that
            stands for a padding action (-1) is padding too).
        predicts: (B, T) bool: the token's top layer predicts the next action; of the
            tokens that stand for an action, the model reads the last that predicts.
        allowed: (B, G, T, T) bool: query i may attend key j, G 1 (every head alike) or
            the number of heads (a mask per head); a real token attends at least itself, a
            padding query at least one key. None: causal (every earlier token and itself).
        relative: (B, T, T) long: the relative position of each key where ``allowed``
            (clipped by the model to ``relative_range``); None with no relative attention.
    """

    source: Tensor
    predicts: Tensor
    allowed: Tensor | None
    relative: Tensor | None = None


@dataclass(frozen=True)
class MemoryChunk:
    """What one chunk of a batch read with Transformer-XL memory attends: the chunk's l
    tokens (positions ``start`` to ``start + l`` of ``BatchMasks.source``) read the M memory
    slots, then the chunk's own tokens (the layout of the released ``cpp_masking`` chunks:
    memory columns first).

    Attributes:
        start: the position of the chunk's first token.
        allowed: (B, G, l, M + l) bool: query i may attend memory slot m (columns < M) or
            the chunk's token j (column M + j); a padding query attends itself only.
        relative: (B, l, M + l) long: the relative position of each key where ``allowed``
            (0 elsewhere); None with no relative attention.
        memory: (B, M) long: the token each memory slot holds while the chunk is read (its
            position), -1 for an empty slot.
        update: (B, M) long: the memory the next chunk reads: each slot's source as an index
            into this chunk's keys ``[memory | chunk]`` (what a layer's input there was),
            -1 for an empty slot.
    """

    start: int
    allowed: Tensor
    relative: Tensor | None
    memory: Tensor
    update: Tensor


@dataclass(frozen=True)
class ChunkedMasks:
    """A teacher-forced batch cut into chunks read with memory (a policy's ``masks``):
    ``source`` and ``predicts`` as ``BatchMasks``' over the whole rows, and the chunks in
    order."""

    source: Tensor
    predicts: Tensor
    chunks: tuple[MemoryChunk, ...]


@dataclass
class StepMasks:
    """What one step of R rows feeds the attention: N new token slots per row (1, or 2 in
    Transformer Grammars), each attending over the S cache positions (its own included).
    The last slot of a row is the token that predicts the row's next action.

    Attributes:
        positions: (R, N) the cache position each new token is written to (also its
            absolute position).
        present: (R, N) bool: the slot holds a token (a row without an action, or a
            Transformer Grammars step that is not a ``REDUCE``, leaves slots empty; an empty
            slot is computed but never written, and its ``allowed`` row holds key 0 only).
        allowed: (R, G, N, S) bool: the keys each new token may attend to; G is 1 (every
            head alike) or the number of heads (a mask per head).
        relative: (R, N, S) long: the relative position of each key (Transformer
            Grammars' depth differences), or None (the policy has none).
    """

    positions: Tensor
    present: Tensor
    allowed: Tensor
    relative: Tensor | None = None


class AttentionState(Protocol):
    """A policy's rows in search: a ``RowState`` (``synlm.transition.structure``: row
    selection) that counts each row's tokens and steps."""

    #: (R,) long: tokens so far, the start token included (the next cache position).
    length: Tensor

    def step(self, actions: Tensor) -> StepMasks:
        """Read one action a row (R,) (-1: none; the row keeps its state), in place."""
        ...

    def select(self, index: Tensor, out: AttentionState | None = None) -> AttentionState:
        ...

    def assign(self, rows: Tensor, source: AttentionState, source_rows: Tensor) -> None: ...


class AttentionPolicy(RecordsInit, abc.ABC):
    """Which earlier tokens each token of an action Transformer reads (module docstring).

    A policy of one's own subclasses this, implements ``masks`` and ``initial_state``, and
    sets the class attributes where the defaults (a GPT-2's: learned absolute positions,
    pre-norm) do not hold; its constructor's arguments are its settings, so a config names
    it as any component, by class name or ``{"class_path": ..., "init_args": {...}}`` (the
    registry's ``attention_policies``, which ``synlm ls`` lists). It holds no weights: what
    it asks for (positions, relative attention, closing brackets) the model builds, under
    the same names whatever the policy.

    Attributes:
        pre_norm: the layer order when the model's ``pre_norm`` is None: LayerNorm before
            each sublayer plus a final one (GPT-2's), or after each (Transformer-XL's).
        absolute_positions: the model adds learned absolute positions (the token's index,
            up to ``max_positions``).
        closing_brackets: a ``REDUCE`` is read as the closing bracket ``X)`` of the
            constituent it closes, an embedding per label (Transformer Grammars), rather
            than as ``REDUCE``.
        relative_range: (lowest, highest) relative positions of Transformer-XL relative
            attention (Dai et al. 2019 eq. 4), others clipped to them; None: no relative
            attention.
        name: the short name a config may give instead of the policy's class (``tg``),
            built with its defaults; None: by class name or class_path only.
    """

    pre_norm: bool = True
    absolute_positions: bool = True
    closing_brackets: bool = False
    relative_range: tuple[int, int] | None = None
    name: ClassVar[str | None] = None

    def __init__(self) -> None:
        """No settings (a policy's own constructor takes its settings): what a policy
        without any, as ``CausalPolicy``, saves as its ``init_args``."""

    def check(self, num_heads: int) -> None:
        """A one-line ``SettingError`` if the policy cannot run on ``num_heads`` heads (the
        model asks when it is built); any number by default."""

    @abc.abstractmethod
    def masks(self, actions: Tensor, num_heads: int) -> BatchMasks | ChunkedMasks:
        """The tokens and attention (``BatchMasks``) of ``actions`` (B, A) (-1 padded), or
        their chunks read with memory (``ChunkedMasks``); an action sequence the policy
        cannot read is a one-line ``ActionError`` naming the row and the action's index."""

    @abc.abstractmethod
    def initial_state(self, rows: int, capacity: int, num_heads: int,
                      device: torch.device | str | None = None) -> AttentionState:
        """``rows`` rows that hold the start token at position 0, with room for
        ``capacity`` tokens (``cache_positions``); its ``step`` gives ``StepMasks`` whose
        rows equal those of ``masks`` for the same actions."""

    def cache_positions(self, max_actions: int) -> int:
        """The cache positions a row needs for ``max_actions`` actions: the start token and
        one per action, by default."""
        return 1 + max_actions


def opened_by(actions: Tensor) -> Tensor:
    """(B, A) top-down actions (-1 padded) -> (B, A) long: for each ``REDUCE``, the index of
    the ``NT(X)`` action that opened the constituent it closes (the last ``NT`` before it at
    its depth: a later one would have been closed); 0 for other actions."""
    opens, closes = actions >= FIRST_NT, actions == REDUCE
    step = opens.long() - closes.long()
    depth = step.cumsum(1) - step + 1 - closes.long()  # a closing bracket's depth is its NT's
    index = torch.arange(actions.size(1), device=actions.device)
    out = torch.zeros_like(actions)
    if actions.numel() == 0:
        return out
    for d in range(int(depth.min()), int(depth.max()) + 1):  # the last NT at each depth so far
        last = torch.where(opens & (depth == d), index, 0).cummax(1).values
        out = torch.where(closes & (depth == d), last, out)
    return out


def causal_masks(actions: Tensor) -> BatchMasks:
    """One token per action after the start token, every token predicting; the ``source``
    of the policies that read an action as one token (``allowed`` None: causal)."""
    B, A = actions.shape
    source = torch.arange(-1, A, device=actions.device).expand(B, A + 1)
    return BatchMasks(source=source, predicts=torch.ones_like(source, dtype=torch.bool),
                      allowed=None)
