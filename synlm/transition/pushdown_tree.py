"""Pushdown Layers' trees as attachment decisions (Murty et al. 2023, Figure 1).

A sentence is read as ``<s> w_1 ... w_N <eos>`` (T = N + 2 tokens, index 0 the start
token). After token t is read, a shift-reduce parser merges it into the stack: its
*attachment* a_t is the stack item it reduces with, named by that item's last token
(a_t = t: no reduce, t is pushed on its own). Token t's reduce with a_t < t pops every stack
item down to the one holding a_t and merges them with t into one constituent; the tokens of
each item popped rise one level deeper (the released ``compute_stack_tape``: every token of
the growing constituent gains 1 at each merge). The *stack tape* row t is the depth of every
token after tokens 0..t are read, the bias Pushdown attention reads at query t.

Gold attachments come from a binary tree as the released ``compute_attachment_labels_text``
reads one: unary chains collapsed, n-ary nodes right-factored (``(A B C D)`` as
``(A (B (C D)))``: ``binarize_tree``, and ``chomsky_normal_form`` of ``process_bllip.py``),
then the post-order shift-reduce actions of the tree, each reduce popping one item: the
label of word w is the last item popped by the reduces that follow its shift. ``<s>`` and
``<eos>`` get 0 (``<eos>`` closes the sentence onto ``<s>``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from nltk import Tree
from torch import Tensor


def _binary(tree: Tree | str) -> Tree | str:
    """Unary chains collapsed, n-ary nodes right-factored (the released binarisation)."""
    if isinstance(tree, str):
        return tree
    if len(tree) == 1:
        return _binary(tree[0])
    if len(tree) == 2:
        return Tree("X", [_binary(tree[0]), _binary(tree[1])])
    return Tree("X", [_binary(tree[0]), _binary(Tree(tree.label(), list(tree[1:])))])


def _reduces_after_words(tree: Tree | str) -> list[int]:
    """How many reduces follow each word's shift in the tree's post-order actions."""
    counts: list[int] = []

    def visit(node: Tree | str) -> None:
        if isinstance(node, str):
            counts.append(0)
            return
        for child in node:
            visit(child)
        counts[-1] += 1

    visit(_binary(tree))
    return counts


def gold_attachments(tree: Tree | str) -> list[int]:
    """The T attachments of ``<s> words <eos>`` (token indices, 0 for ``<s>`` and ``<eos>``)."""
    reduces = _reduces_after_words(tree)
    stack: list[int] = []
    labels = []
    for word in range(len(reduces)):
        # the reduces after word w's shift are word w's: they pop items before w is pushed
        popped = [stack.pop() for _ in range(reduces[word])]
        labels.append(1 + (popped[-1] if popped else word))
        stack.append(word)
    return [0, *labels, 0]


class Stack:
    """One parse's stack (items as lists of token indices), depths and reduced tokens."""

    def __init__(self, length: int) -> None:
        self.items: list[list[int]] = [[0]]
        self.depth = [0] * length
        self.reduced: set[int] = set()

    def copy(self) -> Stack:
        other = Stack(0)
        other.items = [list(item) for item in self.items]
        other.depth = list(self.depth)
        other.reduced = set(self.reduced)
        return other

    def attach(self, token: int, target: int) -> None:
        """Token ``token`` reduces with the item whose last token is ``target``."""
        if target == token:
            self.items.append([token])
            return
        self.reduced.update(range(target, token))
        merged = [token]
        while len(self.items) > 1 and target not in self.items[-1]:
            merged = self.items.pop() + merged
            for t in merged:
                self.depth[t] += 1
        merged = self.items.pop() + merged
        for t in merged:
            self.depth[t] += 1
        self.items.append(merged)


def depth_tape(attachments: Sequence[int]) -> Tensor:
    """(T, T) long: row t the tokens' depths after tokens 0..t are read (released
    ``compute_stack_tape(..., with_depth_info=True)``: the last row repeats the one before,
    ``<eos>``'s reduce is never read)."""
    length = len(attachments)
    stack = Stack(length)
    rows = [list(stack.depth)]
    for token in range(1, length):
        stack.attach(token, attachments[token])
        rows.append(list(stack.depth))
    return torch.tensor(rows[:-1] + rows[-2:-1] if length > 1 else rows, dtype=torch.long)


def attachments_to_tree(attachments: Sequence[int], words: Sequence[str]) -> Tree | str:
    """The binary tree over ``words`` that the attachments of tokens 1..N+1 (``<eos>``'s
    last) build (released ``attachment_decisions_to_tree``: a reduce nests the popped items
    right-branching onto the token, ``<eos>``'s closes every item onto ``<s>``)."""
    tokens = ["<s>", *words, "<eos>"]
    items: list[Tree | str | None] = ["<s>"]
    last = [0]
    for token in range(1, len(tokens)):
        target = attachments[token - 1]
        if target == token:
            items.append(tokens[token])
            last.append(token)
            continue
        node = None if token == len(tokens) - 1 else tokens[token]
        while len(last) > 1 and last[-1] != target:
            top = items.pop()
            last.pop()
            node = top if node is None else Tree("X", [top, node])
        last.pop()
        node = Tree("X", [items.pop(), node])
        items.append(node)
        last.append(token)
    root = items[0]
    assert len(items) == 1 and isinstance(root, Tree), "the attachments leave one item"
    return root[1]
