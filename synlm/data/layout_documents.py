"""Documents as actions (``mode: actions`` with ``action_unit: document``): a row is the
sentences of one source file (an ``.mrg`` file of a treebank: one article) as one tree under
a root ``DOC`` (``synlm.syntax.documents``), as the released Transformer Grammars' documents;
its words are the document's, and ``max_length`` counts them."""

from __future__ import annotations

from dataclasses import replace

from nltk import Tree

from synlm.data.layout_actions import ActionLayout, rooted, where
from synlm.syntax import Sentence
from synlm.syntax.actions import ActionVocab
from synlm.syntax.documents import DOC, documents


class DocumentLayout(ActionLayout):
    """``mode: actions`` with ``action_unit: document``: a row is a document, ``NT(DOC)``
    among the actions."""

    def _vocab_of(self, trees: list[Tree]) -> ActionVocab:
        """The sentences' action vocabulary with ``NT(DOC)``."""
        return ActionVocab([*super()._vocab_of(trees).labels, DOC])

    def _rows(self, split: str, with_trees: list[tuple[int, Sentence]]
              ) -> list[tuple[int, Sentence]]:
        """The split's documents (their sentences' trees ``rooted``), each with its place."""
        trees = [replace(s, tree=rooted(s.tree, where(s, f"{split} sentence {i + 1}")))
                 for i, s in with_trees]
        return list(enumerate(documents(trees, split)))
