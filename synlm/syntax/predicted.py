"""What ``synlm parse`` scores against, read before torch is imported: the treebank
(``--treebank``), its evaluation trees under ``--protocol`` and ``--max-length``, and the
trees another system predicted for them (``--predicted``: one bracketed tree a line, checked
against the gold sentences)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nltk import Tree

from synlm.errors import InputError, reading, utf8_text
from synlm.syntax.protocols import evaluation_tree
from synlm.syntax.readers import GoldTreebank, read_gold
from synlm.syntax.trees import TreeFormatError, read_brackets


def read_predicted(path: str, golds: Sequence[Tree], gold_name: str) -> list[Tree | None]:
    """The trees of ``--predicted``: one bracketed tree a line, the words of line N those of
    gold sentence N, or an empty line for a sentence the system found no tree for (None, as
    ``synlm parse --output`` writes a sentence whose beam found none); anything else (not
    UTF-8, a line that is not one tree, other words, another number of lines) is a one-line
    ``InputError`` naming the line."""
    with reading(path):
        data = Path(path).read_bytes()
    lines = utf8_text(data, f"--predicted: {path}",
                      expected="UTF-8 text, one bracketed tree a line").splitlines()
    trees: list[Tree | None] = []
    for n, line in enumerate(lines, 1):
        where = f"--predicted: {path}:{n}"
        if not line.strip():
            trees.append(None)
            continue
        try:
            found = [tree for tree, _ in read_brackets(line, where)]
        except TreeFormatError as err:
            raise InputError(f"{where}: {str(err).split(': ', 2)[2]}") from None
        if len(found) != 1:
            raise InputError(f"{where}: expected one bracketed tree, found {len(found)}")
        if n <= len(golds) and found[0].leaves() != golds[n - 1].leaves():
            raise InputError(f"{where}: the tree's words differ from {gold_name}'s sentence "
                             f"{n}: {' '.join(found[0].leaves())!r} against "
                             f"{' '.join(golds[n - 1].leaves())!r} (the protocol's filters "
                             "applied: punctuation removed, sentences skipped)")
        trees.append(found[0])
    if len(trees) != len(golds):
        n = min(len(trees), len(golds)) + 1
        raise InputError(f"--predicted: {path}:{n}: {len(trees)} trees for the {len(golds)} "
                         f"sentences of {gold_name} that the protocol and --max-length keep; "
                         "expected one tree a line, in the treebank's order")
    return trees


def read_treebank(path: str, sections: Sequence[int] | None = None) -> GoldTreebank:
    """``--treebank``, read before torch is imported (``synlm.syntax.readers.read_gold``);
    a malformed or empty one is one line naming the flag, the file and the line."""
    try:
        return read_gold(path, sections)
    except InputError as err:
        raise InputError(f"--treebank: {err}") from None


def predicted_trees(args: argparse.Namespace, treebank: GoldTreebank) -> list[Tree | None]:
    """``--predicted``'s trees, one for each evaluation tree (none: no gold tree passes)."""
    golds = gold_trees(args, treebank)
    return [] if golds is None else read_predicted(args.predicted, golds, str(args.treebank))


def gold_trees(args: argparse.Namespace, treebank: GoldTreebank) -> list[Tree] | None:
    """The evaluation trees of ``treebank`` under ``--protocol`` and ``--max-length``;
    None (after a one-line message) when it holds none (CoNLL-U) or none passes."""
    if not treebank.trees:
        print(f"synlm parse: --treebank {treebank.path} holds dependency heads, and these "
              "trees are scored against constituency trees: give bracketed trees",
              file=sys.stderr)
        return None
    golds = [g for g in (evaluation_tree(t, args.protocol) for t, _ in treebank.trees)
             if g is not None]
    if args.max_length:
        golds = [g for g in golds if len(g.leaves()) <= args.max_length]
    if not golds:
        print(f"synlm parse: no sentence of {args.treebank} passes the filters", file=sys.stderr)
        return None
    return golds
