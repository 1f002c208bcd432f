"""What an action Transformer's attention policy tracks per row while actions are fed one at
a time (beam search), and what one step hands the attention.

An action Transformer (``synlm.transition.action_transformer``) reads a sentence's top-down
actions (``synlm.syntax.actions``) as tokens: position 0 is a start token, then one token
per action, or two for a ``REDUCE`` in Transformer Grammars (its closing bracket is
duplicated). A policy's ``RowState`` knows, for each row, which earlier positions each new
token may attend to; ``step`` returns that as ``StepMasks`` and updates the rows in place.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TypeVar

import torch
from torch import Tensor

from synlm.errors import InputError

S = TypeVar("S", bound="RowState")


@dataclass
class RowState:
    """A dataclass of per-row tensors (dimension 0: the row) or nested ``RowState``s, with
    the row selection beam search needs; a field of another type (a size, a setting) is the
    same for every row and kept as it is. Subclasses add fields only."""

    def select(self: S, index: Tensor, out: S | None = None) -> S:
        """The rows ``index`` (R',), in that order: new tensors, or written into ``out`` (a
        state of R' rows and the same sizes) and ``out`` returned."""
        if out is None:
            return type(self)(**{f.name: _select(getattr(self, f.name), index)
                                 for f in fields(self)})
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, RowState):
                value.select(index, out=getattr(out, f.name))
            elif isinstance(value, Tensor):
                torch.index_select(value, 0, index, out=getattr(out, f.name))
        return out

    def assign(self, rows: Tensor, source: RowState, source_rows: Tensor) -> None:
        """``self[rows] = source[source_rows]``, in place."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, RowState):
                value.assign(rows, getattr(source, f.name), source_rows)
            elif isinstance(value, Tensor):
                value[rows] = getattr(source, f.name)[source_rows]


def _select(value: object, index: Tensor) -> object:
    if isinstance(value, RowState):
        return value.select(index)
    return value.index_select(0, index) if isinstance(value, Tensor) else value


@dataclass
class StepMasks:
    """What one step of R rows feeds the attention: N new token slots per row (1, or 2 in
    Transformer Grammars), each attending over the S cache positions (its own included).

    Attributes:
        positions: (R, N) the cache position each new token is written to.
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


def check_actions(actions: Tensor) -> None:
    """A (batch, actions) integer tensor of action ids; otherwise a one-line
    ``InputError``."""
    if actions.dim() != 2 or actions.dtype == torch.bool or actions.is_floating_point() \
            or actions.is_complex():
        raise InputError(f"expected actions as a (batch, actions) integer tensor, found "
                         f"shape {tuple(actions.shape)} of {actions.dtype}")
