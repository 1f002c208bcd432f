"""Trees as the action sequences of recurrent neural network grammars, and back.

An RNNG (Dyer et al. 2016) generates a sentence and its tree together by a sequence of
actions on a stack: ``NT(X)`` opens a constituent labelled X, ``SHIFT`` generates the next
word, ``REDUCE`` closes the innermost open constituent. Two orders of the same actions:

- **top-down** (Dyer et al. 2016, §3): a constituent's ``NT(X)`` comes before all of its
  children, its ``REDUCE`` after them (a pre-order walk);
- **in-order** (Liu & Zhang 2017, "In-Order Transition-based Constituent Parsing", §3): a
  constituent's first child comes first, then its ``NT(X)``, then the other children, then
  its ``REDUCE`` (the left-corner order, arc-standard: a constituent is projected from its
  completed first child).

Words are the tree's leaves; part-of-speech tags are not generated (a preterminal is the
``SHIFT`` of its word), so the trees built back from actions hold the words directly under
their constituents (``without_preterminals``). ``ActionVocab`` numbers the actions of a
treebank.

Over subwords (rnng-pytorch's ``subword_end_mask``), a word of k pieces is k ``SHIFT`` in a
row, one a piece, with no other action between them (``piece_actions``; ``word_actions``
undoes it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

from nltk import Tree

from synlm.errors import InputError

SHIFT = "SHIFT"
REDUCE = "REDUCE"
#: The action orders ``oracle`` and ``tree_of`` know.
ORDERS = ("top_down", "in_order")
_NT = re.compile(r"NT\((.+)\)")
#: An action as a name or an id.
T = TypeVar("T", str, int)


class ActionError(InputError):
    """An action sequence that builds no tree; the one-line message names the action."""


def nt(label: str) -> str:
    """The action that opens a constituent labelled ``label``: ``NT(label)``."""
    return f"NT({label})"


def nt_label(action: str) -> str | None:
    """The label an ``NT(X)`` action opens; None for ``SHIFT`` and ``REDUCE``."""
    match = _NT.fullmatch(action)
    return match.group(1) if match else None


def _is_preterminal(tree: Tree) -> bool:
    return len(tree) == 1 and isinstance(tree[0], str)


def without_preterminals(tree: Tree) -> Tree:
    """``tree`` with each preterminal replaced by its word: the tree an RNNG builds."""
    return Tree(tree.label(), [child[0] if _is_preterminal(child)
                               else without_preterminals(child) for child in tree])


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise InputError(f"unknown action order {order!r}; expected one of {', '.join(ORDERS)}")


def oracle(tree: Tree, order: str = "top_down") -> list[str]:
    """The actions that build ``tree`` in ``order`` (``ORDERS``); a preterminal (a tag over
    a word) or a bare word is one ``SHIFT``. ``tree`` must be a constituent over at least
    one word (not a preterminal)."""
    _check_order(order)
    if not isinstance(tree, Tree) or _is_preterminal(tree):
        raise InputError(f"expected a constituent over words, found {str(tree)[:60]!r}")
    actions: list[str] = []

    def walk(node: Tree | str) -> None:
        if isinstance(node, str) or _is_preterminal(node):
            actions.append(SHIFT)
            return
        if len(node) == 0:
            raise InputError(f"an empty constituent ({node.label()}) has no actions")
        if order == "top_down":
            actions.append(nt(node.label()))
            for child in node:
                walk(child)
        else:
            walk(node[0])
            actions.append(nt(node.label()))
            for child in node[1:]:
                walk(child)
        actions.append(REDUCE)

    walk(tree)
    return actions


def tree_of(actions: Sequence[str], words: Sequence[str], order: str = "top_down") -> Tree:
    """The tree ``actions`` build over ``words`` (words directly under their constituents);
    the inverse of ``oracle`` up to preterminals. A sequence that builds no single tree over
    exactly these words raises ``ActionError`` naming the action at fault."""
    _check_order(order)
    build = _top_down if order == "top_down" else _in_order
    stack, used = build(actions, words)
    if used != len(words):
        raise ActionError(f"the actions generate {used} of the {len(words)} words")
    if len(stack) != 1 or not isinstance(stack[0], Tree):
        raise ActionError(f"the actions leave {len(stack)} items on the stack, expected one "
                          "closed constituent")
    return stack[0]


def _top_down(actions: Sequence[str], words: Sequence[str]) -> tuple[list[Tree | str], int]:
    """Top-down: open constituents on a stack, a word or a closed one joins the innermost."""
    opened: list[Tree] = []
    done: list[Tree | str] = []
    used = 0
    for i, action in enumerate(actions):
        label = nt_label(action)
        if done:
            raise ActionError(f"action {i} ({action}): the tree is already complete")
        if label is not None:
            opened.append(Tree(label, []))
        elif action == SHIFT:
            if not opened or used == len(words):
                why = "no open constituent" if not opened else "no word left"
                raise ActionError(f"action {i} (SHIFT): {why}")
            opened[-1].append(words[used])
            used += 1
        elif action == REDUCE:
            if not opened or not len(opened[-1]):
                why = "no open constituent" if not opened else "an empty constituent"
                raise ActionError(f"action {i} (REDUCE): {why}")
            closed = opened.pop()
            if opened:
                opened[-1].append(closed)
            else:
                done.append(closed)
        else:
            raise ActionError(f"action {i}: unknown action {action!r}; expected SHIFT, "
                              "REDUCE or NT(label)")
    if opened:
        raise ActionError(f"{len(opened)} constituents left open")
    return done, used


def _in_order(actions: Sequence[str], words: Sequence[str]) -> tuple[list[Tree | str], int]:
    """In-order: words and closed constituents on a stack; ``NT(X)`` takes the top one as
    its first child, ``REDUCE`` gathers the items above the innermost open one."""
    stack: list[Tree | str | tuple[str, Tree | str]] = []  # (label, first child): open
    used = 0
    for i, action in enumerate(actions):
        label = nt_label(action)
        if label is not None:
            if not stack or isinstance(stack[-1], tuple):
                raise ActionError(f"action {i} ({action}): no completed first child")
            stack.append((label, stack.pop()))  # type: ignore[arg-type]
        elif action == SHIFT:
            if used == len(words):
                raise ActionError(f"action {i} (SHIFT): no word left")
            stack.append(words[used])
            used += 1
        elif action == REDUCE:
            rest: list[Tree | str] = []
            while stack and not isinstance(stack[-1], tuple):
                rest.append(stack.pop())  # type: ignore[arg-type]
            if not stack:
                raise ActionError(f"action {i} (REDUCE): no open constituent")
            label, first = stack.pop()  # type: ignore[misc]
            stack.append(Tree(label, [first, *reversed(rest)]))
        else:
            raise ActionError(f"action {i}: unknown action {action!r}; expected SHIFT, "
                              "REDUCE or NT(label)")
    if any(isinstance(item, tuple) for item in stack):
        raise ActionError(f"{sum(isinstance(item, tuple) for item in stack)} constituents "
                          "left open")
    return stack, used  # type: ignore[return-value]


def piece_actions(actions: Sequence[str], word_ends: Sequence[bool]) -> list[str]:
    """``actions`` over words with each word's ``SHIFT`` repeated once per piece:
    ``word_ends[s]`` says whether piece s ends its word (rnng-pytorch's
    ``subword_end_mask``; the last piece ends the last word)."""
    pieces_per_word, count = [], 0
    for end in word_ends:
        count += 1
        if end:
            pieces_per_word.append(count)
            count = 0
    if count or not word_ends:
        raise InputError(f"word ends {list(word_ends)[:8]}: the last piece must end a word")
    words = iter(pieces_per_word)
    out: list[str] = []
    for action in actions:
        out.extend([SHIFT] * next(words) if action == SHIFT else [action])
    if next(words, None) is not None:
        raise ActionError(f"the actions shift fewer words than the {len(pieces_per_word)} "
                          "the pieces make")
    return out


def word_actions(actions: Sequence[T], word_ends: Sequence[bool], shift: T = SHIFT) -> list[T]:
    """``actions`` over pieces as actions over words: a piece's ``SHIFT`` is kept where the
    piece ends its word (the inverse of ``piece_actions``); an action between two pieces of
    one word raises ``ActionError``. ``shift``: what ``SHIFT`` is written as (an id)."""
    out: list[T] = []
    piece = 0
    for i, action in enumerate(actions):
        inside = 0 < piece <= len(word_ends) and not word_ends[piece - 1]
        if action == shift:
            if piece >= len(word_ends):
                raise ActionError(f"action {i} (SHIFT): no piece left")
            if word_ends[piece]:
                out.append(action)
            piece += 1
        elif inside:
            raise ActionError(f"action {i} ({action}): inside a word (after piece {piece} of "
                              "a word that continues)")
        else:
            out.append(action)
    return out


class ActionVocab:
    """The actions of a treebank, numbered: ``SHIFT`` 0, ``REDUCE`` 1, then ``NT(X)`` for
    each label in sorted order."""

    def __init__(self, labels: Iterable[str]) -> None:
        self.itos = [SHIFT, REDUCE, *(nt(label) for label in sorted(set(labels)))]
        self.stoi = {action: i for i, action in enumerate(self.itos)}

    @classmethod
    def from_trees(cls, trees: Iterable[Tree]) -> ActionVocab:
        """The labels of every constituent of ``trees`` (preterminals are not actions)."""
        return cls(t.label() for tree in trees for t in tree.subtrees()
                   if not _is_preterminal(t))

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def labels(self) -> list[str]:
        """The nonterminal labels, in id order."""
        return [label for action in self.itos if (label := nt_label(action)) is not None]

    def encode(self, actions: Sequence[str]) -> list[int]:
        """The ids of ``actions``; a label the vocabulary lacks is a one-line error."""
        try:
            return [self.stoi[a] for a in actions]
        except KeyError as err:
            raise ActionError(f"unknown action {err.args[0]}: the vocabulary's labels are "
                              f"{', '.join(self.labels)}") from None

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_saved(self) -> list[str]:
        """What a checkpoint stores to rebuild it (``from_saved``): the actions in id order."""
        return list(self.itos)

    @classmethod
    def from_saved(cls, saved: list[str]) -> ActionVocab:
        """The vocabulary ``to_saved`` wrote; a list in any other order (its ids would
        differ) is a one-line error."""
        vocab = cls(label for action in saved if (label := nt_label(action)) is not None)
        if vocab.itos != list(saved):
            raise InputError(f"a saved action vocabulary is {SHIFT}, {REDUCE}, then NT(X) "
                             f"by sorted label, each once; got {list(saved)[:4]} "
                             f"({len(saved)} actions)")
        return vocab
