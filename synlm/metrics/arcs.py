"""Heads from arc scores in the ``arcs`` layout (``synlm.outputs``): ``values`` (T, T) for a
row ``[<eos>, w1..wn]``, ``values[d, h]`` the score of input h as the head of input d, row and
column 0 (the ``<eos>``) standing for ROOT. Two decoders (``ARC_DECODERS``):

- ``argmax``: each word's head is the argmax of its row over inputs 0..n other than itself
  (StructFormer's released evaluation, and UDGN's ``--mode argmax`` and per-epoch
  validation); the heads need not form a tree;
- ``tree``: the maximum spanning tree with a single word on ROOT (UDGN's released evaluation,
  ``test_phrase_grammar.py`` ``dms``, its default ``--mode tree``). With arc scores
  s(d, h) = log(values[d, h] + 10⁻⁹) (the arc values are probabilities), for each word r the
  maximum spanning arborescence of the words rooted at r (Chu-Liu-Edmonds), whose score is
  the sum of its arcs plus s(r, ROOT); the best of these, the first r on ties.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

#: The decoders of ``decode_heads`` (``synlm parse --arcs-decoder``).
ARC_DECODERS = ("argmax", "tree")
#: What the released tree decoder adds to an arc's value before its logarithm.
TREE_EPS = 1e-9


def argmax_heads(values: Tensor, n: int) -> list[int]:
    """Heads (1-based, 0 = ROOT) of words 1..n from arc scores (T, T): row d's argmax over
    rows 0..n, itself excluded."""
    scores = values[1:n + 1, :n + 1].detach().float().clone()  # (n, n + 1)
    scores[torch.arange(n), torch.arange(1, n + 1)] = float("-inf")
    return scores.argmax(-1).tolist()


def _cycle(heads: np.ndarray) -> np.ndarray | None:
    """The nodes of a cycle in the graph node -> ``heads[node]`` (−1: none), or None."""
    state = np.zeros(len(heads), dtype=np.int8)  # 0 unseen, 1 on the current walk, 2 done
    for start in range(len(heads)):
        walk, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = heads[node]
        if node >= 0 and state[node] == 1:
            return np.array(walk[walk.index(node):])
        state[walk] = 2
    return None


def arborescence(score: np.ndarray, root: int) -> np.ndarray:
    """The maximum spanning arborescence rooted at ``root`` (Chu-Liu-Edmonds) of the complete
    graph with arc scores ``score[d, h]`` for h -> d (n, n): each node's head, −1 at
    ``root``. Greedy best heads; a cycle is contracted into one node, solved recursively,
    and expanded again."""
    n = score.shape[0]
    s = score.astype(np.float64, copy=True)
    np.fill_diagonal(s, -np.inf)
    s[root] = -np.inf
    heads = s.argmax(1)
    heads[root] = -1
    cycle = _cycle(heads)
    if cycle is None:
        return heads
    rest = np.setdiff1d(np.arange(n), cycle)  # the nodes outside the cycle, c of them
    c = len(rest)
    leaving = s[np.ix_(rest, cycle)]  # (c, k): arcs from a cycle node to a node outside
    entering = s[np.ix_(cycle, rest)] - s[cycle, heads[cycle]][:, None]  # (k, c)
    small = np.full((c + 1, c + 1), -np.inf)  # the cycle is node c
    small[:c, :c] = s[np.ix_(rest, rest)]
    small[:c, c] = leaving.max(1)
    small[c, :c] = entering.max(0)
    sub = arborescence(small, int(np.flatnonzero(rest == root)[0]))
    out = heads.copy()
    for i, node in enumerate(rest):
        h = sub[i]
        out[node] = -1 if h < 0 else cycle[leaving[i].argmax()] if h == c else rest[h]
    enter_from = sub[c]
    out[cycle[entering[:, enter_from].argmax()]] = rest[enter_from]
    return out


def spanning_tree_heads(values: Tensor, n: int) -> list[int]:
    """Heads (1-based, 0 = ROOT) of words 1..n from arc scores (T, T): the best single-rooted
    maximum spanning tree under s = log(values + 10⁻⁹) (the module's ``tree``), a tree in
    which every word reaches ROOT."""
    score = np.log(values[:n + 1, :n + 1].detach().double().cpu().numpy() + TREE_EPS)
    words, to_root = score[1:, 1:], score[1:, 0]  # (n, n), (n,)
    best, best_heads = -np.inf, np.full(n, -1)
    for root in range(n):
        heads = arborescence(words, root)
        others = np.arange(n) != root
        total = words[others, heads[others]].sum() + to_root[root]
        if total > best:
            best, best_heads = total, heads
    return (best_heads + 1).tolist()
