"""Per-row state for beam search, and the check every mask builder makes of its actions.

A ``RowState`` is a dataclass of per-row tensors with the row selection beam search needs:
the parser's (``synlm.transition.parser_state``), an attention policy's
(``synlm.transition.attention``) and the action Transformer's are ones.
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


def check_actions(actions: Tensor) -> None:
    """A (batch, actions) integer tensor of action ids; otherwise a one-line
    ``InputError``."""
    if actions.dim() != 2 or actions.dtype == torch.bool or actions.is_floating_point() \
            or actions.is_complex():
        raise InputError(f"expected actions as a (batch, actions) integer tensor, found "
                         f"shape {tuple(actions.shape)} of {actions.dtype}")
