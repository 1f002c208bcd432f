"""Constituency -> dependency by head rules, and projection of word heads onto subwords."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from nltk import Tree

from synlm.syntax.trees import base_label

#: A head table: label -> (search direction, priority list); an entry of the list is a label
#: or a frozenset of labels of equal priority (the first child in the direction with any).
HeadRules = dict[str, tuple[str, tuple["str | frozenset[str]", ...]]]


#: Collins (1999, Appendix A) head table: label -> (search direction, priority list). For each
#: label of the list in turn, children are scanned in the direction; without a match the first
#: child in the direction is the head. NP has its own rule (``_np_head``).
COLLINS_RULES: HeadRules = {
    k: (d, tuple(v.split())) for k, (d, v) in {
        "ADJP": ("left", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
        "ADVP": ("right", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
        "CONJP": ("right", "CC RB IN"),
        "FRAG": ("right", ""),
        "INTJ": ("left", ""),
        "LST": ("right", "LS :"),
        "NAC": ("left", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
        "PP": ("right", "IN TO VBG VBN RP FW"),
        "PRN": ("left", ""),
        "PRT": ("right", "RP"),
        "QP": ("left", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
        "RRC": ("right", "VP NP ADVP ADJP PP"),
        "S": ("left", "TO IN VP S SBAR ADJP UCP NP"),
        "SBAR": ("left", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
        "SBARQ": ("left", "SQ S SINV SBARQ FRAG"),
        "SINV": ("left", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
        "SQ": ("left", "VBZ VBD VBP VB MD VP SQ"),
        "UCP": ("right", ""),
        "VP": ("left", "TO VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP"),
        "WHADJP": ("left", "CC WRB JJ ADJP"),
        "WHADVP": ("right", "CC WRB"),
        "WHNP": ("left", "WDT WP WP$ WHADJP WHPP WHNP"),
        "WHPP": ("right", "IN TO FW"),
    }.items()
}


def _np_head(labels: list[str]) -> int:
    """Collins' NP rule."""
    if labels[-1] == "POS":
        return len(labels) - 1
    for direction, group in (("right", {"NN", "NNP", "NNPS", "NNS", "NX", "POS", "JJR"}),
                             ("left", {"NP"}), ("right", {"$", "ADJP", "PRN"}),
                             ("right", {"CD"}), ("right", {"JJ", "JJS", "RB", "QP"})):
        order = range(len(labels)) if direction == "left" else range(len(labels) - 1, -1, -1)
        for i in order:
            if labels[i] in group:
                return i
    return len(labels) - 1


def head_child(label: str, child_labels: list[str],
               rules: HeadRules = COLLINS_RULES,
               default: str = "left", skip: frozenset[str] = frozenset()) -> int:
    """Index of the head child of a node (Collins rules; unknown labels use ``default``).
    Without a match of the priority list, the first child in the direction whose label is
    not in ``skip`` is the head (the first child when all are)."""
    label = base_label(label)
    labels = [base_label(c) for c in child_labels]
    if label in ("NP", "NX", "NML") and rules is COLLINS_RULES:
        return _np_head(labels)
    direction, priority = rules.get(label, (default, ()))
    order = list(range(len(labels)))
    if direction == "right":
        order.reverse()
    for want in priority:  # a label, or a group of labels of equal priority
        group = want if isinstance(want, frozenset) else {want}
        for i in order:
            if labels[i] in group:
                return i
    return next((i for i in order if labels[i] not in skip), order[0])


def tree_to_heads(tree: Tree | str,
                  rules: HeadRules = COLLINS_RULES,
                  default: str = "left", n: int | None = None,
                  skip: frozenset[str] = frozenset()) -> list[int]:
    """CoNLL-style heads (1-based, 0 = root) of the words of ``tree`` by head rules: the head
    word of a node is its head child's head word; every other child's head word depends on
    it. Works on any labelled tree (the synthetic treebank falls back to ``default``).
    ``n``, the number of words, is counted if not given; ``skip``: labels that
    ``head_child``'s fallback passes over."""
    if n is None:
        n = len(tree.leaves()) if isinstance(tree, Tree) else 1
    heads: list[int] = [0] * n

    def walk(t: Tree | str, start: int) -> tuple[int, int]:  # (end, head word index)
        if isinstance(t, str):
            return start + 1, start
        if len(t) == 1:
            (child,) = t
            return walk(child, start)
        found, end = [], start
        for c in t:
            end, h = walk(c, end)
            found.append(h)
        labels = [c.label() if isinstance(c, Tree) else c for c in t]
        k = head_child(t.label(), labels, rules, default, skip)
        for i, h in enumerate(found):
            if i != k:
                heads[h] = found[k] + 1
        return end, found[k]

    _, root = walk(tree, 0)
    heads[root] = 0
    return heads


def project_heads(heads: Sequence[int], word_index: Sequence[int]) -> np.ndarray:
    """Subword heads from word heads (DMLM build_bpe_dependency,
    docs/reference-implementations.md §5.1).

    ``word_index[s]`` is the (0-based) word of subword ``s``, non-decreasing. The first subword
    of a word takes the word's head, mapped to the *last* subword of the head word; each later
    subword attaches to the previous subword. Returns 1-based heads, 0 = root.
    """
    h = np.asarray(heads, dtype=np.int64)
    w = np.asarray(word_index, dtype=np.int64)
    s = np.arange(len(w))
    change = w[1:] != w[:-1]
    is_first = np.concatenate([[True], change])
    is_last = np.concatenate([change, [True]])
    last_sub = np.zeros(len(h) + 1, dtype=np.int64)  # 1-based last subword of each word
    last_sub[w[is_last] + 1] = s[is_last] + 1
    word_head = h[w]
    return np.where(is_first, np.where(word_head == 0, 0, last_sub[word_head]), s)
