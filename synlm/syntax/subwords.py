"""Word-level gold syntax projected onto subwords."""

from __future__ import annotations

from collections.abc import Sequence

from nltk import Tree

from synlm.syntax.heads import project_heads, tree_to_heads
from synlm.syntax.sentence import Sentence

#: The label of the constituent a multi-subword word becomes.
WORD_LABEL = "WORD"


def project_tree(tree: Tree, pieces: Sequence[str], word_index: Sequence[int]) -> Tree:
    """``tree`` with leaf k replaced by word k's subwords: the subword itself when the word
    has one, else a ``WORD`` constituent over them (so the word's span stays a span and
    binarisation splits it right-branching, as it splits any flat constituent)."""
    groups: list[list[str]] = [[] for _ in tree.leaves()]
    for piece, k in zip(pieces, word_index):
        groups[k].append(piece)
    cursor = iter(groups)

    def walk(t: Tree | str) -> Tree | str:
        if isinstance(t, str):
            group = next(cursor)
            return group[0] if len(group) == 1 else Tree(WORD_LABEL, group)
        return Tree(t.label(), [walk(child) for child in t])

    return walk(tree)  # type: ignore[return-value]


def project_sentence(sentence: Sentence, pieces: Sequence[str],
                     word_index: Sequence[int]) -> Sentence:
    """The sentence as subwords ``pieces`` (``word_index[s]``: the 0-based word of subword s,
    non-decreasing, every word at least once): the tree by ``project_tree``, the heads by
    ``project_heads`` (heads from the tree by head rules when the sentence has none), each
    subword tagged as its word."""
    n = len(sentence.words)
    if sorted(set(word_index)) != list(range(n)) or list(word_index) != sorted(word_index):
        raise ValueError(f"{sentence.source or 'sentence'}: subwords do not cover its {n} "
                         "words in order")
    heads = sentence.heads
    if heads is None and sentence.tree is not None:
        heads = tree_to_heads(sentence.tree, n=n)
    return Sentence(
        words=list(pieces),
        tree=project_tree(sentence.tree, pieces, word_index) if sentence.tree is not None
        else None,
        heads=project_heads(heads, word_index).tolist() if heads is not None else None,
        tags=[sentence.tags[k] for k in word_index] if sentence.tags is not None else None,
        source=sentence.source, word_index=list(word_index))
