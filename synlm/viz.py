"""Trees and structures to look at: text and SVG drawings of trees (a prediction beside its
gold tree), syntactic distances as bars, span or attention scores as heat maps.

Trees are ``nltk.Tree``s: treebank trees, or the unlabeled binary skeletons
``Tree("X", ...)`` that synlm's decoders return (``synlm.syntax.trees``). Pictures are
``matplotlib.figure.Figure``s made without pyplot, so nothing opens a window; save one with
``fig.savefig("bars.svg")``, and a notebook shows it as the cell's value. In a notebook::

    from synlm.viz import show
    show(predicted, gold=gold)   # SVG in Jupyter, nltk's text drawing in a terminal
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import svgling
from matplotlib.figure import Figure
from nltk import Tree
from nltk.tree.prettyprinter import TreePrettyPrinter
from svgling.figure import Caption, SideBySide

from synlm.syntax.distances import tree_to_distances
from synlm.syntax.trees import spans

#: Shading of a gold constituent that the prediction does not have.
MISSED_FILL = "red"


def pretty(tree: Tree, gold: Tree | None = None) -> str:
    """nltk's text drawing of ``tree`` (``TreePrettyPrinter``), trailing spaces removed; with
    ``gold``, the prediction under a ``predicted:`` header and the gold tree under
    ``gold:``."""
    if gold is not None:
        return f"predicted:\n{pretty(tree)}\ngold:\n{pretty(gold)}"
    # Leaves given as indices into the sentence: with the words themselves, nltk misplaces
    # a word that is a sibling of a subtree, (X (X the cat) sat) reads "sat the cat"
    # (nltk issue 2139).
    indexed = tree.copy(deep=True)
    for i, position in enumerate(indexed.treepositions("leaves")):
        indexed[position] = i
    lines = TreePrettyPrinter(indexed, tree.leaves()).text().splitlines()
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def missed_paths(tree: Tree, gold: Tree) -> list[tuple[int, ...]]:
    """Tree positions in ``gold`` of its constituents whose span ``tree`` lacks (the spans
    that recall counts as missed: single words and the whole sentence left out), the top
    node of each unary chain only."""
    wanted = spans(gold) - spans(tree)
    found: dict[tuple[int, int], tuple[int, ...]] = {}

    def walk(t: Tree | str, path: tuple[int, ...], start: int) -> int:
        if isinstance(t, str):
            return start + 1
        end = start
        for k, child in enumerate(t):
            end = walk(child, (*path, k), end)
        if (start, end) in wanted:
            found[(start, end)] = path  # a unary chain's top node is visited last
        return end

    walk(gold, (), 0)
    return sorted(found.values())


class _Caption(Caption):
    """svgling's caption, given room for its text: svgling guesses half an em a character,
    which clips a caption wider than its tree."""

    def caption_width(self) -> float:
        return 0.6 * self.font_size * len(self.caption)


def drawing(tree: Tree, gold: Tree | None = None) -> Any:
    """An svgling drawing of ``tree`` (words aligned on one line); with ``gold``, the
    prediction beside the gold tree, whose constituents the prediction misses are shaded.
    It shows itself in Jupyter (``_repr_svg_``)."""
    predicted = svgling.draw_tree(tree, leaf_nodes_align=True)
    if gold is None:
        return predicted
    reference = svgling.draw_tree(gold, leaf_nodes_align=True)
    for path in missed_paths(tree, gold):  # svgling 0.5 draws each box twice: 0.15 seen
        reference.box_constituent(path, fill=MISSED_FILL, fill_opacity=0.08)
    return SideBySide(_Caption(predicted, "predicted"),
                      _Caption(reference, "gold (shaded: missed)"))


def svg(tree: Tree, gold: Tree | None = None) -> str:
    """The SVG document of ``drawing(tree, gold)``."""
    return drawing(tree, gold)._repr_svg_()


@dataclass(frozen=True)
class TreeView:
    """A tree (and its gold tree) that shows itself: SVG in Jupyter, text in a terminal."""

    tree: Tree
    gold: Tree | None = None

    def _repr_svg_(self) -> str:
        return svg(self.tree, self.gold)

    def __str__(self) -> str:
        return pretty(self.tree, self.gold)

    def __repr__(self) -> str:
        return str(self)


def show(tree: Tree, gold: Tree | None = None) -> TreeView:
    """``tree`` (beside ``gold`` when given) as a notebook cell's value: a picture in
    Jupyter, nltk's text drawing when printed or shown in a terminal."""
    return TreeView(tree, gold)


def gaps(n: int, distances: Sequence[float] | np.ndarray, what: str = "distances"
         ) -> np.ndarray:
    """The ``n - 1`` gap values of ``n`` words from ``distances``: themselves, or ``n``
    per-word values (a model's, read at ``w1..wn``) less the first, the gap before the
    first word, as the unbiased decoder ignores it (``synlm.syntax.distances``)."""
    values = np.asarray(distances, dtype=float).reshape(-1)
    if len(values) == n:
        return values[1:]
    if len(values) != n - 1:
        raise ValueError(f"{what}: expected {n - 1} gap values (or {n} per-word values) for "
                         f"{n} words, got {len(values)}")
    return values


def distance_bars(words: Sequence[str], distances: Sequence[float] | np.ndarray,
                  gold: Tree | Sequence[float] | None = None) -> Figure:
    """The syntactic distance of each gap between adjacent words as a bar standing between
    them (the words label the x axis); a tree splits first at its tallest bar. ``gold``
    (a tree, or its gap distances) adds the gold distances as black marks on a right-hand
    axis: their scale (tree heights) differs from a model's."""
    n = len(words)
    values = gaps(n, distances)
    fig = Figure(figsize=(max(4.0, 0.6 * n), 3.0), layout="constrained")
    ax = fig.add_subplot()
    between = np.arange(n - 1) + 0.5
    ax.bar(between, values, width=0.6, color="tab:blue", label="predicted")
    ax.set_xticks(np.arange(n), list(words), rotation=45 if n > 8 else 0)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylabel("distance")
    if gold is not None:
        reference = gaps(n, tree_to_distances(gold) if isinstance(gold, Tree) else gold,
                         "gold")
        right = ax.twinx()
        right.plot(between, reference, linestyle="none", marker="_", markersize=18,
                   markeredgewidth=2, color="black", label="gold")
        right.set_ylim(bottom=0)
        right.set_ylabel("gold distance")
        fig.legend(loc="outside upper right", ncols=2)
    return fig


def span_matrix(span_scores: Any, n: int) -> np.ndarray:
    """A ``spans`` structure's scores for one sentence of ``n`` words, ``(n + 2, K)`` for
    rows ``[<eos>, w1..wn, <eos>]`` (PaLM's window of ``K`` spans ending at each word, as
    ``synlm.syntax.palm_tree`` reads them), as an ``(n, n)`` matrix whose cell ``(i, j)``
    scores words ``i..j``; spans longer than the window, and ``i > j``, are NaN."""
    scores = np.asarray(span_scores, dtype=float)
    if scores.ndim != 2 or scores.shape[0] < n + 2:
        raise ValueError(f"span_scores: expected ({n + 2}, K) scores for {n} words (rows "
                         f"<eos>, w1..wn, <eos>), got shape {scores.shape}")
    width = scores.shape[1]
    out = np.full((n, n), np.nan)
    for j in range(n):
        for length in range(1, min(j + 1, width) + 1):
            out[j - length + 1, j] = scores[j + 2, width - length]
    return out


def span_heatmap(words: Sequence[str], scores: Any) -> Figure:
    """An ``(n, n)`` matrix of span or attention scores as a heat map, cell ``(i, j)`` at row
    ``i`` (word ``i`` on the y axis: a span's first word, an attention's query) and column
    ``j`` (a span's last word, an attention's key); non-finite cells are left blank. PaLM's
    windowed span scores become such a matrix with ``span_matrix``."""
    matrix = np.asarray(scores, dtype=float)
    n = len(words)
    if matrix.shape != (n, n):
        raise ValueError(f"scores: expected an ({n}, {n}) matrix for {n} words, got shape "
                         f"{matrix.shape}")
    fig = Figure(figsize=(max(3.5, 0.45 * n + 1.5), max(3.0, 0.45 * n)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="viridis")
    ax.set_xticks(np.arange(n), list(words), rotation=90)
    ax.set_yticks(np.arange(n), list(words))
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig
