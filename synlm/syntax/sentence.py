"""One sentence of a corpus, with its gold syntax when the corpus has it."""

from __future__ import annotations

from dataclasses import dataclass

from nltk import Tree

from synlm.errors import InputError


@dataclass
class Sentence:
    """Words as the language model sees them, plus optional gold syntax.

    ``tree`` is an ``nltk.Tree`` whose leaves are exactly ``words``; ``heads`` gives,
    for each word, the 1-based index of its head word, 0 for the root (CoNLL style).
    ``tags`` are part-of-speech tags aligned to ``words`` (used to drop punctuation
    in parsing evaluation) and ``source`` says where the sentence came from
    (``file:line``) for error messages and reports. A sentence of subwords
    (``synlm.syntax.subwords``) has ``word_index``: the 0-based word each token belongs to.
    """

    words: list[str]
    tree: Tree | None = None
    heads: list[int] | None = None
    tags: list[str] | None = None
    source: str | None = None
    word_index: list[int] | None = None

    def __post_init__(self) -> None:
        n = len(self.words)
        if self.tree is not None and self.tree.leaves() != self.words:
            raise InputError(f"{self.source or 'sentence'}: tree leaves differ from the words")
        for name in ("heads", "tags", "word_index"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise InputError(
                    f"{self.source or 'sentence'}: {len(value)} {name} for {n} words"
                )
