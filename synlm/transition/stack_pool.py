"""The RNNG family's stacks in search as shared nodes (a persistent stack): every item of a
beam is a pointer to its top node, so that keeping an item copies a pointer, not a stack.

A push appends one node to a ``NodePool``: the stack reader's state at that position (the
stack LSTM's output and cell per layer; a CAG's keys and values), the item's embedding, the
node below it and its stack position. A ``PooledState`` row holds its top node, its open
nonterminals' nodes and positions, and the top output the next action is predicted from;
``select`` and ``assign`` (``RowState``'s) move only these. A pop moves the pointer: a
``REDUCE`` reads its children by following the pointers down from the top (``stack_nodes``:
one gather per stack position, every row at once) and pushes the composed constituent on the
node below its nonterminal. Two items that share a prefix of actions share its nodes.

The pool only grows while a search runs; ``compact`` keeps the nodes reachable from the rows
still alive (and renumbers them, the order kept: a node's ``below`` is always a smaller id),
so that its size follows the live stacks, not the steps taken. The values are the ones the
fixed-layout ``RNNGState`` holds at the same stack positions, to rounding: the stack reader
(the model's ``read_node``: the stack LSTM, or a CAG's Transformer over the keys and values
gathered down the stack) runs on the rows that act only, and a product over fewer rows may
round otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, ParserState
from synlm.transition.structure import RowState

#: The sentinel node, id 0: below every stack's bottom, a zero state, position -1.
SENTINEL = 0


@dataclass
class NodePool:
    """Stack nodes shared by the rows of a search; ids ``[0, size)`` are in use.

    Attributes:
        values: (C, *state) the stack reader's state at each node (``RNNG.position_state``).
        items: (C, W) each node's item embedding (what a composition reads).
        below: (C,) long, the node beneath (``SENTINEL`` under the bottom).
        depth: (C,) long, the node's stack position (0: the initial item).
        size: the nodes in use.
    """

    values: Tensor
    items: Tensor
    below: Tensor
    depth: Tensor
    size: int = 1

    @classmethod
    def empty(cls, state: tuple[int, ...], width: int, like: Tensor, capacity: int) -> NodePool:
        """A pool holding only the sentinel, with room for ``capacity`` nodes of a reader
        state of shape ``state`` and items of ``width``, ``like``'s dtype and device."""
        capacity = max(capacity, 1)
        long = {"dtype": torch.long, "device": like.device}
        return cls(like.new_zeros(capacity, *state), like.new_zeros(capacity, width),
                   torch.zeros(capacity, **long), torch.full((capacity,), -1, **long))

    @property
    def capacity(self) -> int:
        return self.below.size(0)

    def _resize(self, capacity: int, keep: Tensor | None = None) -> None:
        """New storage of ``capacity`` nodes holding the nodes ``keep`` (all in use: None),
        in order, at ids 0, 1, ..."""
        for name in ("values", "items", "below", "depth"):
            old = getattr(self, name)
            kept = old[:self.size] if keep is None else old.index_select(0, keep)
            new = old.new_empty(capacity, *old.shape[1:])
            new[:kept.size(0)] = kept
            setattr(self, name, new)

    def push(self, below: Tensor, depth: Tensor, values: Tensor, items: Tensor) -> Tensor:
        """Append one node per row: on ``below`` (R,) at stack position ``depth`` (R,),
        with reader state ``values`` (R, *state) and item ``items`` (R, W); their ids
        (R,)."""
        n = below.size(0)
        if self.size + n > self.capacity:
            self._resize(max(self.size + n, self.capacity * 3 // 2))
        ids = torch.arange(self.size, self.size + n, device=below.device)
        end = self.size + n
        self.values[self.size:end] = values
        self.items[self.size:end] = items
        self.below[self.size:end] = below
        self.depth[self.size:end] = depth
        self.size = end
        return ids

    def reachable(self, tops: Tensor) -> Tensor:
        """(size,) bool: the nodes on the stacks whose top nodes are ``tops`` (any shape),
        the sentinel included; one gather per stack position."""
        marked = torch.zeros(self.size, dtype=torch.bool, device=tops.device)
        marked[SENTINEL] = True
        frontier = tops.reshape(-1).unique()
        while frontier.numel():
            marked[frontier] = True
            frontier = self.below[frontier].unique()
            frontier = frontier[~marked[frontier]]
        return marked

    def keep_only(self, marked: Tensor, spare: int) -> Tensor:
        """Drop every node not ``marked`` (size,) bool, the others renumbered in order,
        with room for ``spare`` more; the new id of each old one (size,) (kept ones only
        meaningful)."""
        keep = marked.nonzero()[:, 0]  # ascending: a node's below keeps a smaller id
        renumber = marked.long().cumsum(0) - 1
        self._resize(max(keep.size(0) + spare, 1), keep)
        self.size = keep.size(0)
        self.below[:self.size] = renumber[self.below[:self.size]]
        return renumber


def stack_nodes(pool: NodePool, top: Tensor, low: Tensor, span: int) -> Tensor:
    """(R, span) the ids of the nodes at stack positions ``low + j`` (j < span) of the
    stacks whose top nodes are ``top`` (R,), ``low`` (R,); ``SENTINEL`` where a stack has
    no node there (above its top, below its bottom). One step down a row per position."""
    R = top.size(0)
    ids = torch.full((R, span + 1), SENTINEL, dtype=torch.long, device=top.device)
    current = top
    for _ in range(span):
        column = pool.depth[current] - low
        column = torch.where((column >= 0) & (column < span), column, span)  # else scratch
        ids.scatter_(1, column[:, None], current[:, None])
        current = pool.below[current]
    return ids[:, :span]


@dataclass
class PooledState(RowState):
    """The stacks of R rows as pointers into a shared ``NodePool`` (module docstring).

    Attributes:
        parser: pointer, open constituents, ... (``ParserState``).
        node: (R,) long, each row's top node.
        open_nodes: (R, S) long, the node of each open nonterminal, innermost last
            (``parser.n_open`` of them).
        open_at: (R, S) long, the stack position each one reopens at when it is reduced
            (``RNNGState.open_at``'s).
        top: (R, H) the top layer's output at the stack top.
        pool: the nodes, shared by every state of the search (not a row's).
    """

    parser: ParserState
    node: Tensor
    open_nodes: Tensor
    open_at: Tensor
    top: Tensor
    pool: NodePool

    @property
    def stack_size(self) -> int:
        return self.open_at.size(1)

    def push(self, model: Any, acted: Tensor, below: Tensor, depth: Tensor, items: Tensor
             ) -> Tensor:
        """The stack reader of ``model`` (``read_node``) reads each ``acted`` (R,) row's new
        item ``items`` (R, W) at stack position ``depth`` (R,) on the node ``below`` (R,),
        and pushes it; each row's new top node (R,), the old one where it did not act (its
        ``top`` too)."""
        rows = acted.nonzero()[:, 0]
        if not rows.numel():
            return self.node
        out, values = model.read_node(self.pool, below[rows], depth[rows], items[rows])
        node = self.node.clone()
        node[rows] = self.pool.push(below[rows], depth[rows], values, items[rows])
        self.top = self.top.clone()
        self.top[rows] = out
        return node

    def open(self, opened: Tensor, node: Tensor, at: Tensor) -> None:
        """Record the nonterminal each ``opened`` (R,) row opened: its ``node`` (R,) and
        the position ``at`` (R,) it reopens at."""
        rows = torch.arange(node.size(0), device=node.device)
        slot = self.parser.n_open.clamp(max=self.stack_size - 1)
        for values, new in ((self.open_nodes, node), (self.open_at, at)):
            values[rows, slot] = torch.where(opened, new, values[rows, slot])


def compact(states: Sequence[tuple[PooledState, Tensor]], spare: int = 0) -> None:
    """Keep only the nodes of the ``states``' rows marked alive (each with a (R,) bool),
    in place: the dead rows point at ``SENTINEL``, the pool holds the live stacks' nodes
    and room for ``spare`` more. Every state that shares the pool and is read again must
    be among ``states``."""
    pool = states[0][0].pool
    for state, live in states:
        if state.pool is not pool:
            raise ValueError("compact: the states do not share one pool")
        state.node = torch.where(live, state.node, SENTINEL)
        state.open_nodes = torch.where(live[:, None], state.open_nodes, SENTINEL)
    renumber = pool.keep_only(pool.reachable(torch.cat([s.node for s, _ in states])), spare)
    for state, _ in states:
        state.node = renumber[state.node]
        state.open_nodes = renumber[state.open_nodes]


def children(pool: NodePool, top: Tensor, low: Tensor, n: Tensor) -> Tensor:
    """(C, M, W) the items of the ``n`` (C,) nodes at positions ``low`` (C,) and above on
    the stacks whose top nodes are ``top`` (C,), bottom first, left-aligned (M the largest
    n; the sentinel's zero item after a row's last)."""
    return pool.items[stack_nodes(pool, top, low, int(n.max()))]


def advance_top_down(model: Any, state: PooledState, actions: Tensor, words: Tensor
                     ) -> PooledState:
    """``RNNG.advance`` on a ``PooledState``: every row's action (R,) (-1: none), ``SHIFT``
    generating ``words`` (R,); the same values as on the fixed layout."""
    p, pool = state.parser, state.pool
    R = actions.size(0)
    rows = torch.arange(R, device=actions.device)
    acted = actions != NO_ACTION
    opened, reduce = actions >= FIRST_NT, actions == REDUCE
    innermost = (p.n_open - 1).clamp(min=0)
    label_node = state.open_nodes[rows, innermost]  # (R,) the innermost open NT's node
    position = torch.where(reduce, state.open_at[rows, innermost], p.top + 1)
    below = torch.where(reduce, pool.below[label_node], state.node)
    item = model.pushed_items(actions, words)
    if reduce.any():
        item = item.clone()
        reduced = reduce.nonzero()[:, 0]  # (C,)
        at = position[reduced]
        n_children = p.top[reduced] - at
        item[reduced] = model.composition(
            pool.items[label_node[reduced]],
            children(pool, state.node[reduced], at + 1, n_children), n_children)
    node = state.push(model, acted, below, position, item)
    state.open(opened, node, position)
    state.node = node
    state.parser = p.after(actions, position)
    return state


def advance_in_order(model: Any, state: PooledState, actions: Tensor, words: Tensor,
                     piece_ends: Tensor | None = None) -> PooledState:
    """``InOrderRNNG.advance`` on a ``PooledState``. The nodes follow the order the stack
    LSTM reads the items in: ``NT(X)`` pushes X on its first child (the unit from stack
    position ``corner`` up), so a ``REDUCE`` finds, from position ``corner`` up, the unit,
    X, then X's later children, and composes X over the unit and the later ones."""
    p, pool = state.parser, state.pool
    R = actions.size(0)
    rows = torch.arange(R, device=actions.device)
    finish = actions == model.finish_action
    acted = (actions != NO_ACTION) & ~finish
    reduce = actions == REDUCE
    opened = (actions >= FIRST_NT) & ~finish
    innermost = (p.n_open - 1).clamp(min=0)
    label_node = state.open_nodes[rows, innermost]  # (R,) X's node
    corner = state.open_at[rows, innermost]  # (R,) where X's first child starts
    position = torch.where(reduce, corner, p.top + 1)
    below = state.node
    item = model.pushed_items(actions, words)
    if reduce.any():
        item, below = item.clone(), below.clone()
        reduced = reduce.nonzero()[:, 0]  # (C,)
        at, X = corner[reduced], label_node[reduced]
        n_children = p.top[reduced] - at  # besides X
        span = int(n_children.max()) + 1
        nodes = stack_nodes(pool, state.node[reduced], at, span)  # unit, X, later ones
        unit = pool.depth[X] - at  # (C,) X's place among them
        steps = torch.arange(span - 1, device=actions.device)
        skip_x = steps + (steps >= unit[:, None]).long()  # (C, M)
        child_nodes = nodes.gather(1, skip_x.clamp(max=span - 1))
        item[reduced] = model.composition(pool.items[X], pool.items[child_nodes], n_children)
        below[reduced] = pool.below[nodes[:, 0]]  # under the unit's first node
    node = state.push(model, acted, below, position, item)
    state.open(opened, node, p.corner)
    state.node = node
    state.parser = p.after(actions, torch.where(finish, p.top, position), piece_ends)
    return state
