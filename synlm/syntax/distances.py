"""Syntactic distances <-> binary trees (Du et al. 2020, Appendix A.1-A.2), the PaLM greedy
span decoder (Peng et al. 2019, §2.2) and the trivial baseline trees.

Distance conventions:

- *gaps*: ``n - 1`` values for ``n`` words, value ``g`` belongs to the gap between word ``g``
  and word ``g + 1`` (0-based); this is what ``tree_to_distances`` returns.
- *per-word*: ``n`` values, value ``i`` is the distance of the gap *before* word ``i``, which is
  what a model reading ``[<eos>, w1..wn]`` produces at inputs 1..n (the ON-LSTM master forget
  gate). The first value (gap ``<eos>``-``w1``) is ignored by the unbiased decoder and used by
  the biased one exactly as ON-LSTM's ``build_tree`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.shapes import BASELINES


def tree_to_distances(tree: Tree | str) -> list[int]:
    """Algorithm 1 on the right-branching binarisation of ``tree``: leaves have height 1, a node
    ``max(children) + 1``; the gap between two adjacent words gets the height of their lowest
    common ancestor. Preterminals and unary chains do not count. Returns ``n - 1`` ints.

    (SDLM's ``helpers.distance`` gives the same values minus one; only the order matters.)
    """
    return distances_and_spans(tree)[0]


def distances_and_spans(tree: Tree | str, n: int | None = None
                        ) -> tuple[list[int], list[tuple[int, int]]]:
    """One pass over ``tree`` (of ``n`` words, counted if not given): the gap distances (see
    ``tree_to_distances``) and the half-open spans of its right-branching binarisation that
    cover more than one word (root included)."""
    if n is None:
        n = len(tree.leaves()) if isinstance(tree, Tree) else 1
    gaps = [0] * max(n - 1, 0)
    found: list[tuple[int, int]] = []

    def walk(t: Tree | str, start: int) -> tuple[int, int]:
        while isinstance(t, Tree) and len(t) == 1:
            (t,) = t
        if isinstance(t, str):
            return start + 1, 1
        ends, heights = [], []
        end = start
        for c in t:
            end, h = walk(c, end)
            ends.append(end)
            heights.append(h)
        h = heights[-1]
        for k in range(len(t) - 2, -1, -1):  # the binarised spine, bottom up
            h = max(heights[k], h) + 1
            gaps[ends[k] - 1] = h
            found.append((ends[k - 1] if k else start, end))
        return end, h

    walk(tree, 0)
    return gaps, found


def distances_to_tree(words: Sequence[str], distances: Sequence[float] | np.ndarray,
                      biased: bool = False) -> Tree:
    """Decode a binary skeleton ``Tree("X", ...)`` over ``words``.

    ``distances`` holds either ``n - 1`` gap values or ``n`` per-word values (module docstring).
    Unbiased (Algorithm 2): split at the largest gap, ``[build(left), build(right)]``, first
    maximum on ties. Biased (Algorithm 3, ON-LSTM ``build_tree``): split before the word ``i``
    with the largest per-word value and attach it to its right part,
    ``[build(left), [w_i, build(right)]]``; with ``n - 1`` gaps the first word's value is
    taken as ``-inf``.
    """
    n = len(words)
    d = np.asarray(distances, dtype=np.float64).reshape(-1)
    if n == 0:
        raise ValueError("cannot build a tree over zero words")
    if len(d) not in (n, n - 1):
        raise ValueError(f"{len(d)} distances for {n} words: expected {n - 1} gaps or {n} "
                         "per-word values")
    if n == 1:
        return Tree("X", [words[0]])
    if biased:
        per_word = d if len(d) == n else np.concatenate([[-np.inf], d])
        out = _biased(list(words), per_word)
    else:
        out = _unbiased(list(words), d[1:] if len(d) == n else d)
    return out if isinstance(out, Tree) else Tree("X", [out])


def _unbiased(words: list[str], gaps: np.ndarray) -> Tree | str:
    if len(words) == 1:
        return words[0]
    i = int(np.argmax(gaps))
    return Tree("X", [_unbiased(words[: i + 1], gaps[:i]),
                      _unbiased(words[i + 1:], gaps[i + 1:])])


def _biased(words: list[str], depth: np.ndarray) -> Tree | str:
    if len(words) == 1:
        return words[0]
    i = int(np.argmax(depth))
    node: Tree | str = words[i]
    if i + 1 < len(words):
        node = Tree("X", [node, _biased(words[i + 1:], depth[i + 1:])])
    return Tree("X", [_biased(words[:i], depth[:i]), node]) if i > 0 else node


def palm_tree(words: Sequence[str], span_scores: np.ndarray) -> Tree:
    """PaLM greedy top-down decoding (Peng et al. 2019 §2.2, span_parser.construct_tree).

    ``span_scores`` has shape ``(n + 2, K)``, one row per input of ``[<eos>, w1..wn, <eos>]``;
    row ``r`` slot ``v`` scores the span of ``K - v`` words ending at the word before input
    ``r`` (right-aligned, slot ``K - 1`` is one word). An interval ``[s, e]`` is split at the
    ``k`` whose right child ``[k + 1, e]`` scores highest; right children longer than the window
    ``K`` are not candidates, so sentences longer than the window still decode. Ties go to the
    longest right child, so oracle scores (1 for every span of the tree, single words
    included, 0 otherwise) recover any binary tree.
    """
    n = len(words)
    scores = np.asarray(span_scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] != n + 2:
        raise ValueError(f"span_scores of shape {scores.shape} for {n} words: expected "
                         f"({n + 2}, K)")
    width = scores.shape[1]

    def build(s: int, e: int) -> Tree | str:  # words s..e, 0-based inclusive
        if s == e:
            return words[s]
        lengths = np.arange(min(e - s, width), 0, -1)  # right-child lengths, longest first
        # right child [e - L + 1, e] ends at word e -> input row e + 2, slot width - L
        best = int(lengths[np.argmax(scores[e + 2, width - lengths])])
        k = e - best
        return Tree("X", [build(s, k), build(k + 1, e)])

    out = build(0, n - 1)
    return out if isinstance(out, Tree) else Tree("X", [out])


def baseline_tree(words: Sequence[str], kind: str,
                  rng: np.random.Generator | None = None) -> Tree:
    """A trivial binary skeleton: ``left-branching``, ``right-branching``, ``balanced`` (split at
    ``ceil(n / 2)`` recursively) or ``random`` (unbiased decoding of a random permutation of gap
    values from ``rng``)."""
    n = len(words)
    if kind == "left-branching":
        gaps = np.arange(n - 1, dtype=np.float64)
    elif kind == "right-branching":
        gaps = np.arange(n - 1, 0, -1, dtype=np.float64)
    elif kind == "balanced":
        gaps = _balanced_gaps(n)
    elif kind == "random":
        gaps = (rng if rng is not None else np.random.default_rng(0)).permutation(n - 1)
    else:
        raise InputError(f"unknown baseline {kind!r}: expected one of {', '.join(BASELINES)}")
    return distances_to_tree(words, gaps)


def _balanced_gaps(n: int) -> np.ndarray:
    gaps = np.zeros(max(n - 1, 0))

    def fill(s: int, e: int, level: int) -> None:  # words s..e-1
        if e - s < 2:
            return
        m = s + (e - s + 1) // 2  # split before word m
        gaps[m - 1] = level
        fill(s, m, level - 1)
        fill(m, e, level - 1)

    fill(0, n, n)
    return gaps
