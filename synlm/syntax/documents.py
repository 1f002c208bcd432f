"""Documents: the sentences of one source file as one tree, as the released Transformer
Grammars reads a document (``(DOC (S ...) (S ...) DOC)``: every sentence's tree under one
root labelled ``DOC``, Sartran et al. 2022 §4, the release's ``tools/transform_trees.py``
``--document_level``).

A sentence's document is the file its ``source`` (``file:line``) names: a treebank file
(an ``.mrg`` file of the WSJ, one article) is a document. Consecutive sentences of one file
make one document, in the corpus's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.sentence import Sentence

#: The label of a document's root.
DOC = "DOC"


def source_file(sentence: Sentence) -> str | None:
    """The file a sentence's ``source`` (``file:line``) names; None without a line."""
    if sentence.source is None or ":" not in sentence.source:
        return None
    return sentence.source.rsplit(":", 1)[0]


def documents(sentences: Sequence[Sentence], what: str) -> list[Sentence]:
    """Consecutive ``sentences`` (each with a tree) of one source file as one ``Sentence``:
    their words in order, the tree ``(DOC t_1 .. t_k)``, their tags if all have them,
    ``source`` the file. A sentence without a ``file:line`` source raises one line naming
    ``what`` (the split) and the sentence."""
    for i, sentence in enumerate(sentences):
        if source_file(sentence) is None:
            raise InputError(f"{what} sentence {i + 1}: no file:line source to group documents "
                             f"by (data.action_unit: document); use a treebank read from "
                             "files, e.g. Treebank, or data.action_unit: sentence")
    out = []
    for name, group in groupby(sentences, key=source_file):
        members = list(group)
        tags = [t for s in members for t in s.tags] if all(s.tags for s in members) else None
        out.append(Sentence([w for s in members for w in s.words],
                            tree=Tree(DOC, [s.tree for s in members]), tags=tags,
                            source=name))
    return out
