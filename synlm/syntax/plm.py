"""Trees as the token sequences of a parsing-as-language-modelling Transformer (PLM).

Qian et al. 2021, "Structural Guidance for Transformer Language Models" (ACL), train a
Transformer LM over a top-down linearisation of each tree, written by
IBM/transformers-struct-guidance ``src/get_oracle.py --gen`` (``get_actions_and_terms`` with
``is_generative=True``, filtered by ``main`` and ``is_valid_action_sequence``). One line per
tree, space-separated:

- ``NT(X)`` opens a constituent labelled X, with X its whole bracket label (function tags
  are kept if the tree has them; the label of a PTB wrapper ``( (S ...) )`` is empty:
  ``NT()``);
- a word stands for itself, as in the tree (no lowercasing, no unknown-word classes; GPT-2's
  tokenizer splits it later); its part-of-speech tag is not written, and an empty element
  (``-NONE-``) is a word like any other, so traces must be removed before;
- ``REDUCE()`` closes the innermost open constituent.

It is synlm's top-down ``oracle`` (``synlm.syntax.actions``) with each ``SHIFT`` replaced by
its word and ``REDUCE`` spelt ``REDUCE()``. ``main`` drops a tree whose sequence is longer
than 500 tokens (``MAX_TOKENS``); ``plm-gen.py`` prefixes ``[START]`` (``ROOT``) at training
time, which ``get_oracle.py --gen --root`` writes itself. synlm's corpora read a tree with its
wrapper unwrapped and ``clean_tree`` applied (no traces, no function tags): such a tree gives
the line the reference writes for the same cleaned tree, whose labels are then in
``NT_CATEGORIES`` (plus the PTB's rare ``ADVP|PRT``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.actions import REDUCE, SHIFT, oracle, tree_of

#: The closing token (``plm-gen.py``: ``REDUCE = 'REDUCE()'``).
PLM_REDUCE = "REDUCE()"
#: The start token ``plm-gen.py`` puts before each sequence (``ROOT = '[START]'``).
ROOT = "[START]"
#: ``get_oracle.py:main`` skips a tree whose sequence has more tokens than this.
MAX_TOKENS = 500
#: The nonterminal labels ``plm-gen.py`` adds to GPT-2's vocabulary as ``NT(X)`` tokens.
NT_CATEGORIES = ("ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP",
                 "PRN", "PRT", "QP", "RRC", "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP",
                 "WHADJP", "WHADVP", "WHNP", "WHPP", "X")
_BAD = re.compile(r"[\s()]")
_PLM_NT = re.compile(r"NT\((.*)\)")


def _check(tree: Tree) -> list[str]:
    """The words of ``tree``, each under a preterminal (the reference reads ``(TAG word)``
    only), with no brackets or spaces in words and labels (a line could not hold them)."""
    words: list[str] = []

    def walk(node: Tree) -> None:
        if _BAD.search(node.label()):
            raise InputError(f"label {node.label()!r} has a bracket or a space")
        if len(node) == 0:
            raise InputError(f"an empty constituent ({node.label()}) has no PLM tokens")
        if len(node) == 1 and isinstance(node[0], str):
            if _BAD.search(node[0]) or not node[0]:
                raise InputError(f"word {node[0]!r} is empty or has a bracket or a space")
            words.append(node[0])
            return
        for child in node:
            if not isinstance(child, Tree):
                raise InputError(f"word {child!r} under ({node.label()} ...) has no "
                                 "part-of-speech tag")
            walk(child)

    if not isinstance(tree, Tree):
        raise InputError(f"expected a tree, found {str(tree)[:60]!r}")
    walk(tree)
    return words


def plm_tokens(tree: Tree, root: bool = False) -> list[str]:
    """The PLM token sequence of ``tree`` (module docstring), as
    transformers-struct-guidance ``src/get_oracle.py:get_actions_and_terms`` writes it with
    ``is_generative=True``; with ``root``, ``[START]`` first (``--root``). A preterminal gives
    its word alone. Words must sit under preterminals; bad input raises a one-line
    ``InputError``."""
    words = _check(tree)
    head = [ROOT] if root else []
    if len(tree) == 1 and isinstance(tree[0], str):
        return [*head, tree[0]]
    it = iter(words)
    return [*head, *(next(it) if a == SHIFT else PLM_REDUCE if a == REDUCE else a
                     for a in oracle(tree, "top_down"))]


def plm_line(tree: Tree, root: bool = False, max_tokens: int = MAX_TOKENS) -> str | None:
    """The line ``get_oracle.py --gen`` prints for ``tree``; None where ``main`` skips it (more
    than ``max_tokens`` tokens, the ``[START]`` of ``root`` not counted)."""
    tokens = plm_tokens(tree, root)
    return None if len(tokens) - root > max_tokens else " ".join(tokens)


def plm_lines(trees: Iterable[Tree], root: bool = False,
              max_tokens: int = MAX_TOKENS) -> list[str]:
    """The lines ``get_oracle.py --gen`` prints for ``trees``, one per tree it keeps."""
    return [line for tree in trees if (line := plm_line(tree, root, max_tokens)) is not None]


def plm_tree(tokens: Sequence[str] | str) -> Tree:
    """The tree a PLM sequence (a list of tokens or a line, ``[START]`` optional) builds,
    words directly under their constituents: the inverse of ``plm_tokens`` up to
    preterminals. ``NT()`` (an empty label) is not read back. A sequence that builds no
    single tree raises a one-line ``ActionError`` (an ``InputError``)."""
    if isinstance(tokens, str):
        tokens = tokens.split()
    tokens = list(tokens[1:] if tokens and tokens[0] == ROOT else tokens)
    actions: list[str] = []
    words: list[str] = []
    for token in tokens:
        if token == PLM_REDUCE:
            actions.append(REDUCE)
        elif _PLM_NT.fullmatch(token):
            actions.append(token)
        else:
            actions.append(SHIFT)
            words.append(token)
    return tree_of(actions, words, "top_down")
