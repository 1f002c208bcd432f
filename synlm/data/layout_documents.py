"""Documents as actions (``mode: actions`` with ``action_unit: document``): a row is the
sentences of one source file (an ``.mrg`` file of a treebank: one article) as one tree under
a root ``DOC`` (``synlm.syntax.documents``), as the released Transformer Grammars' documents;
its words are the document's, and ``max_length`` counts them. A document of more than
``max_document_words`` words is cut between its sentences (``cut``), which bounds a row's
memory whatever the corpus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nltk import Tree

from synlm.data.layout_actions import ActionLayout, rooted, where
from synlm.syntax import Sentence
from synlm.syntax.actions import ActionVocab
from synlm.syntax.documents import DOC, documents


def cut(sentences: Sequence[Sentence], max_words: int) -> list[list[Sentence]]:
    """``sentences`` (one document's, in order) as consecutive parts of at most
    ``max_words`` words, each as long as it can be (a sentence of more words alone)."""
    parts: list[list[Sentence]] = []
    words = max_words + 1  # the last part's words: none open yet
    for sentence in sentences:
        if words + len(sentence.words) > max_words:
            parts.append([])
            words = 0
        parts[-1].append(sentence)
        words += len(sentence.words)
    return parts


class DocumentLayout(ActionLayout):
    """``mode: actions`` with ``action_unit: document``: a row is a document (cut at
    ``max_document_words``), ``NT(DOC)`` among the actions."""

    def _vocab_of(self, trees: list[Tree]) -> ActionVocab:
        """The sentences' action vocabulary with ``NT(DOC)``."""
        return ActionVocab([*super()._vocab_of(trees).labels, DOC])

    def _rows(self, split: str, with_trees: list[tuple[int, Sentence]]
              ) -> list[tuple[int, Sentence]]:
        """The split's documents (their sentences' trees ``rooted``), each cut into parts of
        at most ``max_document_words`` words, each with its place."""
        trees = [replace(s, tree=rooted(s.tree, where(s, f"{split} sentence {i + 1}")))
                 for i, s in with_trees]
        bound, start, rows = self.data.max_document_words, 0, []
        for document in documents(trees, split):
            members = trees[start:start + len(document.tree)]  # its sentences
            start += len(members)
            rows += [document] if len(document.words) <= bound else \
                [part for piece in cut(members, bound) for part in documents(piece, split)]
        return list(enumerate(rows))
