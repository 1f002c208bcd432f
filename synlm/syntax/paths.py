"""Path lengths between the words of a sentence's tree: D_ij = CountEdge(w_i, w_j), the
syntactic distance of tree-planting (Yoshida, Someya & Oseki 2024, "Tree-Planted
Transformers", Findings of ACL), over ``[BOS, w_1, .., w_n, EOS]``.

- ``constituency``: the edges between two leaves of the treebank tree (part-of-speech
  preterminals and unary nodes count), BOS and EOS being leaves under a new root above the
  tree's (as the authors' released preprocess_constituency.py adds them).
- ``dependency``: the edges between two words of the dependency tree, BOS and EOS depending on
  the root word (the released preprocess_dependency.py); heads are the sentence's own, else
  Collins' rules on its tree (as ``synlm.syntax.targets`` takes them).

A subword sentence (``Sentence.word_index``) gives its words' path lengths: its projected
tree's ``WORD`` constituents fold back into words, its projected heads back into word heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

import numpy as np
from nltk import Tree

from synlm.syntax.heads import tree_to_heads
from synlm.syntax.sentence import Sentence
from synlm.syntax.subwords import WORD_LABEL

PathKind = Literal["constituency", "dependency"]


def constituency_path_lengths(tree: Tree) -> np.ndarray:
    """(n + 2, n + 2) int64: the edges between any two leaves of ``tree`` (its n leaves),
    BOS (row 0) and EOS (row n + 1) being leaves under a new root above the tree's.
    D_ij = depth_i + depth_j − 2 depth(lca(i, j)); for i < j the lowest common ancestor's
    depth is the smallest over the neighbouring pairs between them."""
    paths = [(0,), *((1, *p) for p in tree.treepositions("leaves")), (2,)]
    depth = np.array([len(p) for p in paths], dtype=np.int64)  # (m,)
    m = len(paths)
    shared = np.array([_common_prefix(a, b) for a, b in pairwise(paths)],
                      dtype=np.int64)  # (m - 1,) depth of lca(i, i + 1)
    after = np.arange(m - 1)[None, :] >= np.arange(m)[:, None]  # (m, m - 1): gap j ≥ word i
    gaps = np.where(after, shared[None, :], np.iinfo(np.int64).max)
    lowest = np.minimum.accumulate(gaps, axis=1)  # (m, m - 1): min(shared[i..j])
    lca = np.zeros((m, m), dtype=np.int64)
    lca[:, 1:] = lowest  # lca[i, j] = min(shared[i..j - 1]) for j > i
    lca = np.triu(lca, 1)
    lca = lca + lca.T + np.diag(depth)
    return depth[:, None] + depth[None, :] - 2 * lca


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """The length of the common prefix of two tree positions: their lca's depth."""
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    return k


def dependency_path_lengths(heads: Sequence[int]) -> np.ndarray | None:
    """(n + 2, n + 2) int64: the edges between any two words of the dependency tree given by
    ``heads`` (1-based, 0 = root, CoNLL style), BOS (row 0) and EOS (row n + 1) depending on
    the root word; None unless the heads form one rooted tree. With C_ij the number of
    common ancestors-or-self of i and j, D_ij = C_ii + C_jj − 2 C_ij."""
    n = len(heads)
    h = np.asarray(heads, dtype=np.int64)
    roots = np.flatnonzero(h == 0)
    if len(roots) != 1 or h.min(initial=0) < 0 or h.max(initial=0) > n:
        return None
    root = int(roots[0]) + 1
    m = n + 2
    parent = np.concatenate([[root], h, [root]])  # (m,) node -> its head; BOS, EOS -> root
    parent[root] = root
    ancestor = np.zeros((m, m), dtype=np.int64)  # [i, a] = 1: a is i or above it
    nodes, current = np.arange(m), np.arange(m)
    for _ in range(m):
        ancestor[nodes, current] = 1
        current = parent[current]
    if np.any(current != root):  # a cycle never reaches the root
        return None
    common = ancestor @ ancestor.T  # (m, m) C_ij
    own = np.diag(common)
    return own[:, None] + own[None, :] - 2 * common


def word_tree(sentence: Sentence) -> Tree | None:
    """``sentence``'s tree over its words: a subword sentence's ``WORD`` constituents
    (``synlm.syntax.subwords.project_tree``) become the words they were."""
    if sentence.tree is None or sentence.word_index is None:
        return sentence.tree

    def walk(t: Tree | str) -> Tree | str:
        if isinstance(t, str):
            return t
        if t.label() == WORD_LABEL and all(isinstance(c, str) for c in t):
            return "".join(t)
        return Tree(t.label(), [walk(c) for c in t])

    return walk(sentence.tree)  # type: ignore[return-value]


def word_heads(sentence: Sentence) -> list[int] | None:
    """``sentence``'s heads over its words (1-based, 0 = root): its own, else Collins' rules
    on its tree; a subword sentence's from its first pieces' (``project_heads`` points a
    word's first piece at the head word's last piece)."""
    heads = sentence.heads
    if heads is None:
        tree = word_tree(sentence)
        return None if tree is None else tree_to_heads(tree)
    if sentence.word_index is None:
        return heads
    index = sentence.word_index
    firsts = [s for s in range(len(index)) if s == 0 or index[s] != index[s - 1]]
    return [0 if heads[s] == 0 else index[heads[s] - 1] + 1 for s in firsts]


def path_lengths(sentence: Sentence, kind: PathKind) -> np.ndarray | None:
    """(n + 2, n + 2) int64 over ``[BOS, w_1, .., w_n, EOS]`` for ``sentence``'s n words (a
    subword sentence: its words), in its ``kind`` of tree; None when it has none."""
    if kind == "dependency":
        heads = word_heads(sentence)
        return None if heads is None else dependency_path_lengths(heads)
    tree = word_tree(sentence)
    return None if tree is None else constituency_path_lengths(tree)
