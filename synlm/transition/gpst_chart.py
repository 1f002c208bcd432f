"""GPST's pruned chart (Hu et al. 2024, §3.1, after Fast-R2D2, Hu et al. 2022, §3): which
spans the inside pass composes, with which split points, in which order: the work of the
released C++ extension's ``TableManager`` (StructuredLM_RTDT, ``cpp_extension``), in plain
Python over spans (integers only; the arithmetic is ``synlm.transition.gpst_inside``'s).

A sentence of n words starts as n atoms. The chart holds the spans of at most W + 1
consecutive atoms (W the window, the released ``window_size`` 2), each with a split point
at every atom boundary inside it. The parser's merge order (``synlm.transition.gpst_parser``:
split points by ascending score) then merges, n − 1 − W times, the two atoms on either side
of the next split point into one atom; each merge adds the spans of W + 1 consecutive atoms
that contain the new atom, with their W boundaries as split points. The last span added
covers the sentence: its root. Spans already in the chart keep the split points they were
made with.

A span is composed once its children are (the released ``step``: step t composes the spans
whose children were composed by step t − 1, in the order they became ready, sentences
interleaved), and only if a later span or the root needs it. Node ids: the words of all
sentences first (sentence by sentence), then the spans in the order they are composed, the
released cache ids less its three placeholders.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

#: A span (i, j) of inclusive word indices.
Span = tuple[int, int]


@dataclass(eq=False)
class Cell:
    """A span of sentence ``b``: its split points, the spans it is a child of, how many of
    its children are composed, and its node id once it is."""

    b: int
    i: int
    j: int
    splits: list[int]
    is_root: bool
    parents: list[Cell] = field(default_factory=list)
    ready_children: int = 0
    node: int = -1


@dataclass
class Step:
    """One batched composition step: ``targets`` (M,) the spans' node ids, ``children``
    (M, S, 2) their (left, right) children's node ids at each of their S split points."""

    targets: Tensor
    children: Tensor


@dataclass
class Chart:
    """A batch's pruned charts (module docstring).

    Attributes:
        lengths: each sentence's words.
        steps: the composition steps, in order.
        cells: each node's ``Cell`` (words included), by node id.
        roots: (B,) each sentence's root node id.
        tables: per sentence, span (i, j) -> ``Cell``.
    """

    lengths: list[int]
    steps: list[Step]
    cells: list[Cell]
    roots: Tensor
    tables: list[dict[Span, Cell]]

    def node(self, b: int, i: int, j: int) -> int:
        """The node id of span (i, j) of sentence ``b``."""
        return self.tables[b][i, j].node


def merge_spans(order: Sequence[int], n: int) -> list[Span]:
    """The spans each merge makes: ``order`` is the split points (k between words k and
    k + 1) in merge order; each merge joins the atoms on either side of its split point."""
    start, end = list(range(n)), list(range(n))  # atom around each word
    out = []
    for k in order[:n - 1]:
        i, j = start[k], end[k + 1]
        out.append((i, j))
        start[j], end[i] = i, j
    return out


def _sentence_cells(b: int, n: int, window: int, order: Sequence[int]
                    ) -> tuple[dict[Span, Cell], list[list[Cell]]]:
    """Sentence ``b``'s cells and, for each step 1..n−1, the cells it adds (in order)."""
    table: dict[Span, Cell] = {}

    def cell(i: int, j: int, splits: list[int]) -> Cell:
        table[i, j] = Cell(b, i, j, splits, is_root=(i, j) == (0, n - 1))
        return table[i, j]

    for p in range(n):
        cell(p, p, [])
    added: list[list[Cell]] = []
    for width in range(1, min(window, n - 1) + 1):
        added.append([cell(i, i + width, list(range(i, i + width)))
                      for i in range(n - width)])
    atoms = [(p, p) for p in range(n)]
    for i, j in merge_spans(order, n)[:max(n - 1 - window, 0)]:
        p = next(a for a, (s, _) in enumerate(atoms) if s == i)
        atoms[p:p + 2] = [(i, j)]
        starts = range(max(0, p - window), min(p, len(atoms) - window - 1) + 1)
        added.append([cell(atoms[s][0], atoms[s + window][1],
                           [atoms[s + t][1] for t in range(window)]) for s in starts])
    for new in added:
        for parent in new:
            for k in parent.splits:
                table[parent.i, k].parents.append(parent)
                table[k + 1, parent.j].parents.append(parent)
    return table, added


def build_chart(lengths: Sequence[int], orders: Sequence[Sequence[int]], window: int = 2
                ) -> Chart:
    """The pruned charts of sentences of ``lengths`` with the parser's merge ``orders``
    (each a permutation of 0..n−2) and ``window`` W (module docstring)."""
    tables = []
    for b, (n, order) in enumerate(zip(lengths, orders)):
        if sorted(order[:n - 1]) != list(range(n - 1)):
            raise ValueError(f"merge order of sentence {b}: {list(order[:n - 1])}; expected a "
                             f"permutation of the {n - 1} split points")
        tables.append(_sentence_cells(b, n, window, order)[0])
    cells: list[Cell] = [tables[b][p, p] for b, n in enumerate(lengths) for p in range(n)]
    ready: deque[Cell] = deque()

    def composed(c: Cell) -> None:
        for parent in c.parents:
            parent.ready_children += 1
            if parent.ready_children == 2 * len(parent.splits) and (
                    parent.is_root or parent.parents):
                ready.append(parent)

    for node, c in enumerate(cells):
        c.node = node
        composed(c)
    steps = []
    while ready:
        batch = [ready.popleft() for _ in range(len(ready))]
        for c in batch:
            composed(c)
            c.node = len(cells)
            cells.append(c)
        children = [[(tables[c.b][c.i, k].node, tables[c.b][k + 1, c.j].node)
                     for k in c.splits] for c in batch]
        steps.append(Step(torch.tensor([c.node for c in batch]), torch.tensor(children)))
    roots = torch.tensor([tables[b][0, n - 1].node for b, n in enumerate(lengths)])
    return Chart(list(lengths), steps, cells, roots, tables)
