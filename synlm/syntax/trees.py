"""Tree utilities: a line-aware bracket reader, cleaning, spans, binarisation, shape stats.

Conventions used everywhere in ``synlm.syntax``:

- a *treebank tree* is an ``nltk.Tree`` with POS preterminals, e.g. ``(S (NP (DT the) (NN dog)))``;
- a *skeleton* is an unlabeled binary ``Tree("X", ...)`` whose leaves are the words themselves
  (no preterminals, no unary nodes); decoders and baselines return skeletons;
- spans are half-open word intervals ``(i, j)``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator

from nltk import Tree

from synlm.errors import InputError

#: The 36 word tags of the ON-LSTM/PRPN evaluation (Ordered-Neurons data_ptb.py): everything
#: else (punctuation, ``$``, ``#``, ``-NONE-``) is dropped before scoring.
WORD_TAGS = frozenset({
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP",
    "NNPS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB",
    "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
})
#: PaLM keeps currency symbols, as the Mikolov text does (docs/reference-implementations.md §4.5).
PALM_TAGS = WORD_TAGS | {"$", "#"}
#: Tags of empty elements (PTB traces, CTB empty categories).
EMPTY_TAGS = frozenset({"-NONE-"})

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class TreeFormatError(InputError):
    """A bracketed tree file is malformed; the message is ``file:line: what was expected``."""


def read_brackets(text: str, source: str = "<string>") -> Iterator[tuple[Tree, int]]:
    """Yield ``(tree, line)`` for every top-level bracketed tree of ``text`` (PTB ``.mrg``,
    CTB, one tree per line or spread over lines); ``line`` is where the tree starts.

    A PTB wrapper with an empty label, ``( (S ...) )``, is unwrapped. Lines starting with ``<``
    (CTB SGML markup such as ``<S ID=1>``) are ignored. Errors raise ``TreeFormatError`` naming
    ``source:line``.
    """
    text = re.sub(r"(?m)^[ \t]*<[^\n]*>[ \t]*$", "", text)
    line_starts = [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(line_starts, pos) + 1

    stack: list[tuple[str, list, int]] = []
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    k = 0
    while k < len(tokens):
        tok, pos = tokens[k]
        k += 1
        if tok == "(":
            label = ""
            if k < len(tokens) and tokens[k][0] not in "()":
                label, k = tokens[k][0], k + 1
            elif k < len(tokens) and tokens[k][0] == ")":
                raise TreeFormatError(f"{source}:{line_of(pos)}: expected a label or a "
                                      "subtree after '(', found ')'")
            stack.append((label, [], pos))
        elif tok == ")":
            if not stack:
                raise TreeFormatError(f"{source}:{line_of(pos)}: unexpected ')' with no "
                                      "open bracket")
            label, kids, start = stack.pop()
            if not kids:
                raise TreeFormatError(f"{source}:{line_of(start)}: expected children in "
                                      f"'({label}', found ')'")
            node = Tree(label, kids)
            if stack:
                stack[-1][1].append(node)
            elif label == "" and len(node) == 1 and isinstance(node[0], Tree):
                yield node[0], line_of(start)
            else:
                yield node, line_of(start)
        elif stack:
            stack[-1][1].append(tok)
        else:
            raise TreeFormatError(f"{source}:{line_of(pos)}: expected '(' before {tok!r}")
    if stack:
        raise TreeFormatError(f"{source}:{line_of(stack[-1][2])}: expected ')' to close this "
                              "bracket, found end of file")


@functools.lru_cache(maxsize=4096)
def base_label(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``PP=2`` -> ``PP``; ``-NONE-``/``-LRB-`` stay as they are."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def clean_tree(tree: Tree, keep_tags: frozenset[str] | None = None,
               drop_tags: frozenset[str] = EMPTY_TAGS) -> Tree | None:
    """Copy of ``tree`` without preterminals whose tag is dropped, and without the constituents
    left empty; labels lose function tags. ``keep_tags`` (if given) whitelists POS tags."""
    if isinstance(tree[0], str):  # preterminal
        tag = tree.label()
        if tag in drop_tags or (keep_tags is not None and tag not in keep_tags):
            return None
        return Tree(tag, list(tree))
    kids = [k for k in (clean_tree(c, keep_tags, drop_tags) for c in tree) if k is not None]
    return Tree(base_label(tree.label()), kids) if kids else None


def words_and_tags(tree: Tree) -> tuple[list[str], list[str]]:
    """Leaves and their preterminal tags."""
    pairs = tree.pos()
    return [w for w, _ in pairs], [t for _, t in pairs]


def map_leaves(tree: Tree, words: list[str]) -> Tree:
    """Copy of ``tree`` whose i-th leaf is ``words[i]`` (same shape)."""
    out = tree.copy(deep=True)
    for pos, w in zip(out.treepositions("leaves"), words, strict=True):
        out[pos] = w
    return out


def labeled_spans(tree: Tree | str) -> list[tuple[int, int, str]]:
    """All ``(i, j, label)`` of constituents above the preterminals, half-open, in pre-order.

    A unary chain yields one entry per label on the same span (``S -> VP`` gives both)."""
    out: list[tuple[int, int, str]] = []

    def walk(t: Tree | str, i: int) -> int:
        if isinstance(t, str):
            return i + 1
        if isinstance(t[0], str) and len(t) == 1:  # preterminal
            return i + 1
        k = len(out)
        out.append((i, i, t.label()))
        j = i
        for c in t:
            j = walk(c, j)
        out[k] = (i, j, t.label())
        return j

    walk(tree, 0)
    return out


def spans(tree: Tree | str, trivial: bool = False) -> set[tuple[int, int]]:
    """Unlabeled half-open spans as a set (unary chains collapse). Without ``trivial``, single
    words and the whole sentence are left out (docs/reference-implementations.md §7.1)."""
    found = {(i, j) for i, j, _ in labeled_spans(tree)}
    if trivial:
        return found
    n = len(tree.leaves()) if isinstance(tree, Tree) else 1
    return {(i, j) for i, j in found if j - i > 1 and (i, j) != (0, n)}


def binarize(tree: Tree | str) -> Tree | str:
    """Unlabeled right-branching binarisation (Stern et al. 2017; SYD ``tree2list``): unary
    chains and preterminals collapse, an n-ary node ``[c0, c1, .., ck]`` becomes
    ``[c0, [c1, [.., ck]]]``. A one-word tree gives ``Tree("X", [word])``."""
    def walk(t: Tree | str) -> Tree | str:
        if isinstance(t, str):
            return t
        if len(t) == 1:
            return walk(t[0])
        kids = [walk(c) for c in t]
        node = kids[-1]
        for k in reversed(kids[:-1]):
            node = Tree("X", [k, node])
        return node

    out = walk(tree)
    return out if isinstance(out, Tree) else Tree("X", [out])


def skeleton(tree: Tree | str) -> Tree:
    """Unlabeled copy with preterminals and unary chains collapsed, arity kept."""
    def walk(t: Tree | str) -> Tree | str:
        if isinstance(t, str):
            return t
        if len(t) == 1:
            return walk(t[0])
        return Tree("X", [walk(c) for c in t])

    out = walk(tree)
    return out if isinstance(out, Tree) else Tree("X", [out])


def leaf_depths(tree: Tree | str) -> list[int]:
    """Depth of each word (number of branching nodes above it; unary chains collapsed)."""
    out: list[int] = []

    def walk(t: Tree | str, d: int) -> None:
        if isinstance(t, str):
            out.append(d)
        elif len(t) == 1:
            walk(t[0], d)
        else:
            for c in t:
                walk(c, d + 1)

    walk(tree, 0)
    return out


def branching_counts(tree: Tree | str) -> tuple[int, int, int, int]:
    """``(left_children, right_children, left_splits, right_splits)`` of one tree.

    Du et al. 2020 Table 3 R/L ratio: a word is a *right child* when it is the last child of its
    (unary-collapsed) parent, a *left child* otherwise. PaLM Table 4 splits: a binary node over
    >= 3 words is a left split when it divides [i, j] into [i, j-1] and j, a right split when it
    divides it into i and [i+1, j]; n-ary nodes and 2-word spans count as neither.
    """
    counts = [0, 0, 0, 0]

    def walk(t: Tree | str) -> int:
        if isinstance(t, str):
            return 1
        if len(t) == 1:
            return walk(t[0])
        sizes = [walk(c) for c in t]
        for pos, (c, s) in enumerate(zip(t, sizes, strict=True)):
            if s == 1 and _is_word(c):
                counts[1 if pos == len(t) - 1 else 0] += 1
        if len(t) == 2 and sum(sizes) >= 3:
            if sizes[1] == 1:
                counts[2] += 1
            elif sizes[0] == 1:
                counts[3] += 1
        return sum(sizes)

    walk(tree)
    return counts[0], counts[1], counts[2], counts[3]


def _is_word(t: Tree | str) -> bool:
    while isinstance(t, Tree) and len(t) == 1:
        t = t[0]
    return isinstance(t, str)


def to_bracket(tree: Tree | str) -> str:
    """One-line bracketed string."""
    if isinstance(tree, str):
        return tree
    return f"({tree.label()} {' '.join(to_bracket(c) for c in tree)})"
