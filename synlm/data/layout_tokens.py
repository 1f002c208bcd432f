"""Streams and sentence rows (``mode: stream``, ``mode: sentence``): every sentence a unit of
inputs ``[<eos>, w1..wn]``, a split's units one stream plus a closing ``<eos>``, with the
requested gold syntax aligned to its inputs (``synlm.syntax.targets``). ``StreamLayout`` cuts
the stream into columns read window by window, ``SentenceLayout`` serves one padded unit a
row, under the masked objective with its words masked (``synlm.data.masking``). Under
``tree_source: random`` the gold is built from random trees (``random_tree``), which the
training rows carry as their trees too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from nltk import Tree

from synlm.data.batching import (
    PATH_FIELDS,
    Columns,
    ShuffledLoader,
    StreamLoader,
    TokenArrays,
    TokenBudgetLoader,
    UnitDataset,
    awd_window_lengths,
    collate_units,
    fixed_window_lengths,
)
from synlm.data.gold_requests import FIELD_KINDS, ROW_FIELDS
from synlm.data.layout import HELD_OUT, Layout, LayoutData, Loader
from synlm.data.masking import MaskedCollate
from synlm.data.subwords import SubwordVocab
from synlm.errors import InputError
from synlm.outputs import Batch
from synlm.syntax import Sentence, baseline_tree
from synlm.syntax.subwords import project_tree
from synlm.syntax.targets import cached_targets


class TokenLayout(Layout):
    """A split as one stream of units with its gold arrays, built once per split (``mode``
    says how the gold is aligned: ``targets.cached_targets``)."""

    mode: str

    def __init__(self, data: LayoutData) -> None:
        super().__init__(data)
        self._streams: dict[str, tuple[TokenArrays, np.ndarray]] = {}
        self._random: dict[str, list[Sentence]] = {}

    def reset(self) -> None:
        """Forgets the built streams: the next use rebuilds them with the requested gold."""
        self._streams.clear()

    def stream(self, split: str) -> tuple[TokenArrays, np.ndarray]:
        """The split as one stream of units ``[<eos>, w1..wn]`` plus a closing ``<eos>``,
        and the start of each unit (the last entry is the closing ``<eos>``)."""
        if split not in self._streams:
            data = self.data
            sentences = data.sentences(split)
            lengths = np.array([len(s.words) + 1 for s in sentences], dtype=np.int64)
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            tokens = np.full(bounds[-1] + 1, data.vocab.eos_id, dtype=np.int64)
            words = [w for s in sentences for w in s.words]
            is_word = np.ones(bounds[-1], dtype=bool)
            is_word[bounds[:-1]] = False
            tokens[:-1][is_word] = data.vocab.encode(words)
            arrays: TokenArrays = {"tokens": tokens}
            if isinstance(data.vocab, SubwordVocab):
                arrays["word_ends"] = _word_ends(sentences, is_word)
            # the closing <eos> gets an id of its own
            arrays["sentence_ids"] = np.append(np.repeat(np.arange(len(sentences)), lengths),
                                               len(sentences)).astype(np.int64)
            if data.requested - ROW_FIELDS:
                arrays.update(self._gold(split))
            self._streams[split] = (arrays, bounds)
        return self._streams[split]

    def tree_sentences(self, split: str) -> list[Sentence]:
        """The split's sentences as its gold is built from: the model's, under
        ``tree_source: random`` each tree replaced by a random one (``random_tree``) drawn
        from ``(seed, the split's place among the corpus's)`` (the held-out training
        sentences: the training split's), once."""
        data = self.data
        if data.tree_source != "random":
            return data.sentences(split)
        if split not in self._random:
            origin = "train" if split == HELD_OUT else split
            rng = np.random.default_rng([data.seed, data.corpus.splits.index(origin)])
            self._random[split] = [replace(s, tree=random_tree(s, rng)) if s.tree is not None
                                   else s for s in data.sentences(split)]
        return self._random[split]

    def _gold(self, split: str) -> TokenArrays:
        """Gold syntax aligned with the stream (``synlm.syntax.targets``), cached on disk.
        A requested field with no gold at all in the training split raises: a head would
        train on an all-false mask. Evaluation splits may lack gold (PTB-Concat-Syn with
        the NLTK sample has trees in its training split only)."""
        data = self.data
        stream = self.mode == "stream"
        part = split
        if data.dependency_holdout and split in ("train", HELD_OUT):
            part = f"{split}{data.dependency_holdout:g}"  # the sentences differ by it
        source = "random-over-words" if data.tree_source == "random" else data.tree_source
        targets = cached_targets(
            self.tree_sentences(split), data.cache_dir / data.corpus.cache_key(),
            key=f"{data.cache_key}-{part}-{source}-{data.seed}", mode=self.mode,
            span_window=data.span_window or 10, boundary=data.boundary, closing_eos=stream)
        present = {"constituency": targets.distance_mask.any(),
                   "dependency": targets.dep_row_mask.any()}
        requested = data.requested
        empty = sorted(f for f in requested & FIELD_KINDS.keys() if not present[FIELD_KINDS[f]])
        if empty and split == data.corpus.splits[0]:
            kinds = " and ".join(sorted({FIELD_KINDS[f] for f in empty}))
            raise InputError(
                f"{type(data.corpus).__name__} declares {kinds} gold but no {split} sentence "
                f"has it ({', '.join(empty)} would be all masked); check its trees or heads")
        # a split without any gold of a kind serves none (its batches carry None, so heads
        # log no loss there rather than a zero)
        gold: TokenArrays = {}
        if "distances" in requested and present["constituency"]:
            gold["distances"], gold["distance_mask"] = targets.distances, targets.distance_mask
        if "spans" in requested and present["constituency"]:
            gold["spans"], gold["span_mask"] = targets.spans, targets.span_mask
        if "dep_targets" in requested and present["dependency"]:
            gold["dep_offsets"], gold["dep_mask"] = targets.dep_targets, targets.dep_mask
            gold["dep_rows"] = targets.dep_row_mask
        if not stream:  # one more row for the closing <eos>, never a target input
            gold = {k: np.concatenate([v, np.zeros_like(v[:1])]) for k, v in gold.items()}
        return gold


class StreamLayout(TokenLayout):
    """``mode: stream``: the stream cut into contiguous columns, read in windows (AWD-LSTM),
    the model's state carried from window to window."""

    mode = "stream"

    def loader(self, split: str, batch_size: int, train: bool) -> StreamLoader:
        """``batch_size`` columns of this rank; training windows of AWD-LSTM's varying
        lengths drawn from ``(seed, epoch)`` (``variable_bptt``), else of ``bptt``."""
        data = self.data
        rank, world = self._world()
        columns = Columns.cut(self.stream(split)[0], batch_size, rank, world)
        epoch = self._epoch() if train else 0
        if train and data.variable_bptt:
            rng = np.random.default_rng([data.seed, epoch])
            lengths = awd_window_lengths(columns.length, data.bptt, rng)
        else:
            lengths = fixed_window_lengths(columns.length, data.bptt)
        return StreamLoader(columns, lengths, epoch=epoch)


class SentenceLayout(TokenLayout):
    """``mode: sentence``: one unit a row, padded, with its gold ``Sentence`` (``Batch.trees``:
    in training the one its gold is built from, ``tree_sentences``; in evaluation the
    corpus's) and the per-row gold (``PATH_FIELDS``); under ``objective: masked`` its words
    masked (``MaskedCollate``)."""

    mode = "sentence"

    def loader(self, split: str, batch_size: int, train: bool) -> Loader:
        """Training: batches redrawn every epoch from ``(seed, epoch)``, resumable mid-epoch
        (``ResumableLoader``); evaluation: the split in order."""
        data = self.data
        arrays, bounds = self.stream(split)
        sentences = self.tree_sentences(split) if train else data.sentences(split)
        if train and "trees" in data.requested and all(s.tree is None for s in sentences):
            raise InputError(f"{type(data.corpus).__name__} declares constituency gold but no "
                             f"{split} sentence has a tree (the trees a head trains on would "
                             "all be None); check its trees")
        dataset = UnitDataset(arrays, bounds, sentences,
                              paths=sorted(data.requested & PATH_FIELDS.keys()))
        lengths = np.diff(bounds)  # tokens per unit
        collate = self._collate(split, train)
        if not train:
            return self._in_order(dataset, batch_size, collate)
        if data.max_length is not None:
            keep = np.flatnonzero(lengths - 1 <= data.max_length)
            dataset, lengths = torch.utils.data.Subset(dataset, keep.tolist()), lengths[keep]
        rank, world = self._world()
        epoch = self._epoch()
        if data.max_tokens is not None:
            return TokenBudgetLoader(dataset, lengths, data.max_tokens, data.seed, epoch,
                                     rank, world, collate)
        return ShuffledLoader(dataset, batch_size, data.seed, epoch, rank, world, collate)

    def _collate(self, split: str, train: bool) -> Callable[[list[Any]], Batch]:
        """How units become a batch: padded (``collate_units``), and under the masked
        objective masked, by generators seeded from the split's place among the corpus's
        (the held-out training sentences: the training split's) and, in training, the
        epoch."""
        data = self.data
        if data.objective != "masked":
            return collate_units
        origin = data.corpus.splits.index("train" if split == HELD_OUT else split)
        return MaskedCollate.of(data.vocab, data.mask_rate, data.seed, origin, self._epoch(),
                                train)


def random_tree(sentence: Sentence, rng: np.random.Generator) -> Tree:
    """A random binary tree over ``sentence`` (``baseline_tree``: Du et al. 2020 Table 4); over
    its words when it is subwords (``word_index``), projected onto their pieces as gold trees
    are (``project_tree``), so that no word is split."""
    if sentence.word_index is None:
        return baseline_tree(sentence.words, "random", rng)
    words = [str(k) for k in range(sentence.word_index[-1] + 1)]
    return project_tree(baseline_tree(words, "random", rng), sentence.words,
                        sentence.word_index)


def _word_ends(sentences: list[Sentence], is_word: np.ndarray) -> np.ndarray:
    """(N + 1,) bool over a subword stream's inputs: whether the target there (the next
    token) ends a word: the last subword of a word, or an ``<eos>``. The closing ``<eos>``
    has no target."""
    n_words = [s.word_index[-1] + 1 if s.word_index else 0 for s in sentences]
    first_word = np.cumsum([0, *n_words[:-1]])  # of each sentence, numbered across the split
    word_of = np.concatenate([np.asarray(s.word_index, dtype=np.int64) + first
                              for s, first in zip(sentences, first_word)])  # per subword
    token_ends = np.ones(len(is_word) + 1, dtype=bool)  # <eos> positions end a "word"
    token_ends[:-1][is_word] = np.append(word_of[1:] != word_of[:-1], True)
    return np.append(token_ends[1:], False)
