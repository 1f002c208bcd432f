"""Unlabelled binary trees as SHIFT/REDUCE action orders, the order GPST's generative model
reads (Hu et al. 2024, §3.2; ``synlm.transition.gpst``): a post-order walk of the tree,
SHIFT (0) at each word, REDUCE (1) at each binary node after its two children. A tree of n
words is 2n − 1 actions; a REDUCE pops the two top elements and pushes their composition.

Two sources of trees:

- a tree given by its split points (``postorder``: each span's split k, the span (i, j)
  splitting into (i, k) and (k + 1, j), inclusive word indices), as GPST's inside pass
  induces it (``synlm.transition.gpst_chart``);
- a gold treebank tree (``binary_actions``), unary chains and preterminals collapsed and
  n-ary nodes right-factored (``synlm.syntax.trees.binarize``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.trees import binarize

SHIFT, REDUCE = 0, 1
#: A span (i, j) of inclusive word indices.
Span = tuple[int, int]


def postorder(n: int, split: Callable[[int, int], int]) -> list[Span]:
    """The spans of the binary tree over words 0..n−1 whose span (i, j) splits at
    ``split(i, j)`` (i ≤ k < j), in post-order (left child, right child, parent)."""
    if n < 1:
        raise InputError(f"a tree needs at least one word, got {n}")
    out: list[Span] = []
    stack: list[tuple[Span, bool]] = [((0, n - 1), False)]
    while stack:
        (i, j), expanded = stack.pop()
        if i == j or expanded:
            out.append((i, j))
            continue
        k = split(i, j)
        if not i <= k < j:
            raise InputError(f"split {k} of span ({i}, {j}): expected {i} <= k < {j}")
        stack.extend([((i, j), True), ((k + 1, j), False), ((i, k), False)])
    return out


def span_actions(spans: Sequence[Span]) -> list[int]:
    """SHIFT for each one-word span, REDUCE for each other (``postorder``'s spans)."""
    return [SHIFT if i == j else REDUCE for i, j in spans]


def binary_actions(tree: Tree | str) -> list[int]:
    """The post-order SHIFT/REDUCE actions of a treebank tree, binarised right-factored."""
    out: list[int] = []

    def walk(t: Tree | str) -> None:
        if isinstance(t, str):
            out.append(SHIFT)
            return
        for child in t:
            walk(child)
        out.extend([REDUCE] * (len(t) - 1))

    walk(binarize(tree))
    return out


def actions_tree(actions: Sequence[int], words: Sequence[str]) -> Tree:
    """The unlabelled binary ``Tree("X", ...)`` an action order builds over ``words``."""
    stack: list[Tree | str] = []
    position = 0
    for t, action in enumerate(actions):
        if action == SHIFT:
            if position >= len(words):
                raise InputError(f"action {t}: SHIFT after the last of {len(words)} words")
            stack.append(words[position])
            position += 1
        elif action == REDUCE:
            if len(stack) < 2:
                raise InputError(f"action {t}: REDUCE with {len(stack)} element(s) stacked")
            right, left = stack.pop(), stack.pop()
            stack.append(Tree("X", [left, right]))
        else:
            raise InputError(f"action {t}: {action}; expected {SHIFT} (SHIFT) or "
                             f"{REDUCE} (REDUCE)")
    if position != len(words) or len(stack) != 1:
        raise InputError(f"the actions build {len(stack)} element(s) over {position} of "
                         f"{len(words)} words; expected one tree over all")
    top = stack[0]
    return top if isinstance(top, Tree) else Tree("X", [top])
