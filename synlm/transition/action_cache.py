"""The search state of an action Transformer (``synlm.transition.action_transformer``): each
row's parser and attention-policy state, and every layer's keys and values per position in
a cache that grows as rows fill it. A search's selection keeps an item in its cache row
where it can and puts the live items in the first cache rows (``move``), so that a step's
layers read those alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from synlm.transition.attention.base import AttentionState
from synlm.transition.parser_state import ParserState
from synlm.transition.structure import RowState


@dataclass
class ActionTransformerState(RowState):
    """R rows of an action Transformer in search.

    Attributes:
        parser: pointer, open constituents, ... (``ParserState``).
        structure: the attention policy's own rows (its ``AttentionState``: ``CausalState``,
            ``PLMMaskState``, ``TGState``, ...).
        cache: (R, L, 2, nh, S, hd) every layer's keys and values per position, S the
            positions allocated: grown as rows fill them (``reserve``), up to
            ``capacity``; row r's in cache row ``slot[r]``.
        slot: (R,) long: each row's cache row, a permutation of them. A search's selection
            (``move``) leaves a kept item in its cache row and puts the live items in the
            first cache rows, so that a step's layers read those alone.
        top: (R, C) the top layer (normed) at the last token: what predicts the next.
        open_top: (R, D) the stack size just after each open ``NT``, innermost last.
        open_label: (R, D) the action id of each open ``NT``.
        capacity: the most cache positions a row may fill (the policy's
            ``cache_positions`` of the action budget).
    """

    parser: ParserState
    structure: AttentionState
    cache: Tensor
    slot: Tensor
    top: Tensor
    open_top: Tensor
    open_label: Tensor
    capacity: int

    #: The cache positions first allocated (fewer if ``capacity`` is smaller), and those
    #: added each time rows fill them: a search copies each moved row's whole block, so the
    #: positions allocated follow the filled ones closely.
    FIRST_ALLOCATION: ClassVar[int] = 16
    GROWTH: ClassVar[int] = 16

    #: The most bytes of cache rows a selection gathers at once on a CPU to copy them within
    #: a cache (``move``): few enough to stay in the processor's caches and to come from
    #: memory the allocator holds, where the whole selection's rows would be fresh pages.
    COPY_BYTES: ClassVar[int] = 4 << 20

    #: The per-row tensors besides ``parser``, ``structure``, ``cache`` and ``slot``.
    ROWS = ("top", "open_top", "open_label")

    def used(self) -> int:
        """The cache positions the longest row has filled (the policy's ``structure``
        counts its tokens in ``length``): beyond them no row has anything to read."""
        return int(self.structure.length.max())

    def reserve(self, positions: int) -> None:
        """Grow the cache to hold at least ``positions`` positions (at most ``capacity``):
        by ``GROWTH`` positions, the filled positions copied."""
        allocated = self.cache.size(-2)
        if positions <= allocated:
            return
        size = min(self.capacity, max(positions, allocated + self.GROWTH))
        grown = self.cache.new_zeros(*self.cache.shape[:-2], size, self.cache.size(-1))
        used = min(self.used(), allocated)
        grown[..., :used, :] = self.cache[..., :used, :]
        self.cache = grown

    def _select_rows(self, index: Tensor, out: ActionTransformerState) -> None:
        """Every field but the cache and ``slot``: the rows ``index``, written into ``out``."""
        self.parser.select(index, out=out.parser)
        self.structure.select(index, out=out.structure)
        for name in self.ROWS:
            torch.index_select(getattr(self, name), 0, index, out=getattr(out, name))

    def select(self, index: Tensor, out: ActionTransformerState | None = None
               ) -> ActionTransformerState:
        """``RowState.select``, each row in its own order in the cache (``slot`` the
        identity), written into ``out`` with its cache as large as this one's: each row's
        cache is one contiguous block, which ``index_select`` copies whole, several times
        faster than gathering only the ``used`` positions (a strided slice, gathered then
        copied) though its positions past ``used`` are copied too."""
        rows = torch.arange(index.size(0), device=index.device)
        if out is None:
            return ActionTransformerState(
                self.parser.select(index), self.structure.select(index),
                self.cache.index_select(0, self.slot[index]), rows,
                *(getattr(self, name).index_select(0, index) for name in self.ROWS),
                capacity=self.capacity)
        self._select_rows(index, out)
        if out.cache.shape[1:] != self.cache.shape[1:]:
            out.cache = self.cache.new_empty(out.cache.size(0), *self.cache.shape[1:])
        torch.index_select(self.cache, 0, self.slot[index], out=out.cache)
        out.slot = rows
        return out

    def move(self, index: Tensor, out: ActionTransformerState, live: Tensor
             ) -> ActionTransformerState:
        """``select`` into ``out`` where this state is read no more and only the ``live``
        rows (R',) bool of the result are (a search's selection: its empty slots): the
        live rows' caches in ``out``'s first cache rows, the others' left as they were.
        Where ``out`` has as many cache rows as this state, this state's cache moves to
        ``out`` and this state keeps ``out``'s former one: a live row whose cache row is
        among the first and read by no earlier live row stays in it, the others' rows are
        copied to the free ones among the first (a search keeps many items in their rows,
        and a row several items keep is copied for all but the first)."""
        self._select_rows(index, out)
        R = index.size(0)
        rows = torch.arange(R, device=index.device)
        kept = live.nonzero()[:, 0]  # (n,) the live rows
        n = kept.size(0)
        source = self.slot[index[kept]]  # (n,) their cache rows here
        taken = torch.zeros(R, dtype=torch.bool, device=index.device)
        slot = torch.empty_like(rows)
        in_place = out.cache.size(0) == self.cache.size(0) == R
        if in_place:  # the first live row reading a cache row among the first n keeps it
            first = torch.full_like(rows, n).scatter_reduce_(0, source, rows[:n], "amin")
            stays = (first[source] == rows[:n]) & (source < n)  # (n,)
            slot[kept[stays]] = source[stays]
            taken[source[stays]] = True
            movers = (~stays).nonzero()[:, 0]
        else:
            if out.cache.shape[1:] != self.cache.shape[1:]:
                out.cache = self.cache.new_empty(out.cache.size(0), *self.cache.shape[1:])
            movers = rows[:n]
        free = (~taken[:n]).nonzero()[:, 0]  # (movers,) cache rows among the first n
        slot[kept[movers]] = free
        taken[free] = True
        slot[~live] = (~taken).nonzero()[:, 0]
        if in_place:  # no mover reads a free row: a free row is read by no live row first
            self._copy_rows(source[movers], free)
            out.cache, self.cache = self.cache, out.cache
            out.slot, self.slot = slot, out.slot
        else:
            torch.index_select(self.cache, 0, source, out=out.cache[:n])
            out.slot = slot
        return out

    def _copy_rows(self, source: Tensor, to: Tensor) -> None:
        """Cache rows ``source`` (n,) into the rows ``to`` (n,), none of which is among
        ``source``: gathered ``COPY_BYTES`` at a time on a CPU, all at once elsewhere."""
        if not to.numel():
            return
        row_bytes = self.cache[0].numel() * self.cache.element_size()
        step = max(1, self.COPY_BYTES // row_bytes) if self.cache.device.type == "cpu" \
            else to.numel()
        buffer = self.cache.new_empty(min(step, to.numel()), *self.cache.shape[1:])
        for start in range(0, to.numel(), step):
            rows = source[start:start + step]
            gathered = buffer[:rows.numel()]
            torch.index_select(self.cache, 0, rows, out=gathered)
            self.cache.index_copy_(0, to[start:start + step], gathered)

    def assign(self, rows: Tensor, source: RowState, source_rows: Tensor) -> None:
        """``RowState.assign``: each row's whole cache block where both caches have as many
        positions (contiguous, as ``select``), else only the positions ``source`` has
        filled."""
        assert isinstance(source, ActionTransformerState)
        used = source.used()
        self.reserve(used)
        self.parser.assign(rows, source.parser, source_rows)
        self.structure.assign(rows, source.structure, source_rows)
        for name in self.ROWS:
            getattr(self, name)[rows] = getattr(source, name)[source_rows]
        to, read = self.slot[rows], source.slot[source_rows]
        if self.cache.shape[1:] == source.cache.shape[1:]:
            self.cache.index_copy_(0, to, source.cache.index_select(0, read))
        else:
            self.cache[to, ..., :used, :] = source.cache[read, ..., :used, :]
