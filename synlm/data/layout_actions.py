"""Sentences as actions (``mode: actions``): each sentence with a tree as its word ids and the
ids of the actions that build its tree (``synlm.syntax.actions``), an ``ActionItem``, batched
as an ``ActionBatch`` for the transition models. ``layout_documents`` makes a row a document
instead."""

from __future__ import annotations

from functools import cached_property

import numpy as np
from nltk import Tree

from synlm import errors
from synlm.data.batching import ActionItem, BucketLoader, collate_actions
from synlm.data.corpora import Corpus
from synlm.data.layout import EXAMPLES, Layout, LayoutData, Loader
from synlm.data.subwords import SubwordVocab
from synlm.errors import InputError
from synlm.syntax import Sentence
from synlm.syntax.actions import ORDERS, ActionError, ActionVocab, oracle, piece_actions


class ActionLayout(Layout):
    """``mode: actions`` with ``action_unit: sentence``: a row is a sentence."""

    def __init__(self, data: LayoutData) -> None:
        super().__init__(data)
        self._items: dict[str, list[ActionItem]] = {}

    @cached_property
    def vocab(self) -> ActionVocab:
        """The actions of the training split's trees (all of it, ``dependency_holdout``'s
        held-out sentences included): ``SHIFT``, ``REDUCE``, ``NT(X)`` by sorted label."""
        train = self.data.corpus_sentences("train")
        trees = [rooted(s.tree, where(s, f"train sentence {i + 1}")) for i, s in enumerate(train)
                 if s.tree is not None]
        if not trees:
            raise InputError(f"action mode needs trees, but no training sentence of "
                             f"{type(self.data.corpus).__name__} has one")
        return self._vocab_of(trees)

    def _vocab_of(self, trees: list[Tree]) -> ActionVocab:
        """The action vocabulary of the training ``trees``."""
        return ActionVocab.from_trees(trees)

    def items(self, split: str) -> list[ActionItem]:
        """The split's rows: its sentences with a tree (as ``sentences`` gives them), each as
        its word ids, the ids of the actions that build its tree (``action_order``) and the
        sentence; sentences without a tree are left out. With ``subwords``: the word-level
        sentence's pieces (each word with a leading space, ``SubwordVocab.split``), which of
        them ends a word, and one ``SHIFT`` a piece (``piece_actions``). A split without any
        tree, a tree the oracle cannot take or a label the training split lacks raises one
        line naming the source."""
        if split not in self._items:
            data = self.data
            subwords = isinstance(data.vocab, SubwordVocab)
            sentences = data.corpus_sentences(split) if subwords else data.sentences(split)
            with_trees = [(i, s) for i, s in enumerate(sentences) if s.tree is not None]
            if not with_trees:
                raise InputError(
                    f"action mode needs trees, but no {split} sentence of "
                    f"{type(data.corpus).__name__} has one; use a corpus with trees in every "
                    "split, e.g. PTBSepsent, or PTBConcatSyn with treebank: the LDC WSJ folder")
            rows = self._rows(split, with_trees)
            pieces = data.vocab.split([s.words for _, s in rows]) if subwords else None
            items = []
            for k, (i, s) in enumerate(rows):
                place = where(s, f"{split} sentence {i + 1}")
                if pieces is None:
                    tokens, ends = s.words, None
                else:
                    tokens, word_index = pieces[k]
                    ends = np.append(np.diff(word_index) != 0, True)
                items.append(ActionItem(np.asarray(data.vocab.encode(tokens), dtype=np.int64),
                                        self._action_ids(s, place, ends), s, ends))
            self._items[split] = items
        return self._items[split]

    def _rows(self, split: str, with_trees: list[tuple[int, Sentence]]
              ) -> list[tuple[int, Sentence]]:
        """The rows of ``split`` made of its sentences with a tree, each with its place
        (``i``: the (i + 1)-th of the split, for errors without a source)."""
        return with_trees

    def _action_ids(self, sentence: Sentence, place: str,
                    word_ends: np.ndarray | None = None) -> np.ndarray:
        """The ids of the oracle's actions for ``sentence``'s tree, one ``SHIFT`` a piece
        where ``word_ends`` (pieces) is given; errors name ``place``."""
        vocab, tree = self.vocab, rooted(sentence.tree, place)
        try:
            actions = oracle(tree, self.data.action_order)
            if word_ends is not None:
                actions = piece_actions(actions, word_ends.tolist())
            return np.asarray(vocab.encode(actions), dtype=np.int64)
        except ActionError as err:  # a label the vocabulary lacks
            raise InputError(f"{place}: {err}; the training split has no constituent with "
                             "this label") from None
        except InputError as err:
            raise InputError(f"{place}: {err}") from None

    def loader(self, split: str, batch_size: int, train: bool) -> Loader:
        """Training: rows of similar action length (``BucketLoader``), redrawn every epoch
        from ``(seed, epoch)``, resumable mid-epoch; evaluation: the split in order."""
        data = self.data
        items = self.items(split)
        if not train:
            return self._in_order(items, batch_size, collate_actions)
        if data.max_length is not None:
            items = [item for item in items if len(item.words) <= data.max_length]
        lengths = np.array([len(item.actions) for item in items], dtype=np.int64)
        if data.max_tokens is not None and lengths.size and lengths.max() > data.max_tokens:
            item = items[int(lengths.argmax())]
            place = where(item.sentence, f"a {split} sentence")
            raise InputError(f"{place}: {len(item.actions)} actions, more than data.max_tokens="
                             f"{data.max_tokens}; raise max_tokens or set data.max_length")
        rank, world = self._world()
        return BucketLoader(items, lengths, batch_size, data.max_tokens, data.seed,
                            self._epoch(), rank, world, collate_actions)


def check_action_mode(corpus: Corpus, order: str, tree_source: str) -> None:
    """Action mode needs a corpus with trees, words and their gold labels; anything else
    raises one line naming the setting."""
    name = type(corpus).__name__
    if "constituency" not in corpus.gold:
        raise InputError(f"data.mode: actions needs constituency trees, but {name} has none; "
                         f"use {EXAMPLES['constituency']}")
    if order not in ORDERS:
        raise errors.SettingError("action_order", order, f"one of {', '.join(ORDERS)}")
    if tree_source != "gold":
        raise InputError(f"data.tree_source: {tree_source} replaces trees by unlabelled ones "
                         "for distance and span targets; action mode needs the gold trees")


def where(sentence: Sentence, otherwise: str) -> str:
    """Where ``sentence`` comes from, for an error: its ``source`` (``file:line``), else
    ``otherwise`` (its place in its split)."""
    return sentence.source or otherwise


def rooted(tree: Tree, place: str) -> Tree:
    """``tree`` as the oracle takes it: an unlabelled root bracket over one constituent is
    dropped (the PTB's ``( (S ...) )``); any other unlabelled bracket raises one line naming
    ``place``."""
    while tree.label() == "" and len(tree) == 1 and isinstance(tree[0], Tree):
        tree = tree[0]
    if any(t.label() == "" for t in tree.subtrees()):
        raise InputError(f"{place}: a bracket without a label; expected a label on every "
                         "constituent (an unlabelled root only over one constituent)")
    return tree

