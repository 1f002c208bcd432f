"""Documents as actions (``mode: actions`` with ``action_unit: document``): a row is the
sentences of one source file (an ``.mrg`` file of a treebank: one article) as one tree under
a root ``DOC`` (``synlm.syntax.documents``), as the released Transformer Grammars' documents;
its words are the document's, and ``max_length`` counts them. A document of more than
``max_document_words`` words is cut between its sentences (``cut``), which bounds a row's
memory whatever the corpus.

Training reads the documents in one of two orders (``document_order``): ``chunked``, each
batch a few documents, each read from its start in chunks with memory; or ``streamed``
(``StreamedLoader``), as the released Transformer Grammars' trainer (``preprocessing.py``
``get_chunks_from_dataset``): the documents back to back through the batch's rows, one
chunk a row and batch, a row taking the next document when its own ends; the model carries
each row's memory from batch to batch and empties it where a document starts (the released
``beginning_of_seq``), and computes each batch over its chunks alone
(``synlm.transition.stream``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch
from nltk import Tree

from synlm.data.batching import ActionItem, ResumableLoader, collate_actions
from synlm.data.layout import Loader
from synlm.data.layout_actions import ActionLayout, rooted, where
from synlm.errors import InputError
from synlm.outputs import ActionBatch
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

    def loader(self, split: str, batch_size: int, train: bool) -> Loader:
        """``document_order: chunked``: as ``ActionLayout``'s; ``streamed``: training batches
        of ``StreamedLoader`` (the module docstring), the chunks a document is read in
        counted by the DataModule's ``chunks_of`` (which the recipe sets from its model)."""
        data = self.data
        if not train or data.document_order == "chunked":
            return super().loader(split, batch_size, train)
        if data.chunks_of is None:
            raise InputError("data.document_order: streamed reads one chunk of a document a "
                             "batch, but the model reads documents whole; use a model that "
                             "reads them in chunks with memory (configs/tg_document.yaml), or "
                             "data.document_order: chunked")
        items = [item for item in self.items(split)
                 if data.max_length is None or len(item.words) <= data.max_length]
        chunks = np.array([data.chunks_of(item.actions) for item in items], dtype=np.int64)
        rank, world = self._world()
        return StreamedLoader(items, chunks, batch_size, data.seed, self._epoch(), rank, world)


def stream_schedule(chunks: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Documents of ``chunks`` (D,) chunks each, in order, through ``rows`` rows: each goes
    to the row that frees first (the lowest on a tie), as the released trainer's rows draw
    from one iterator. Returns (S, rows) long each: the document each row reads at step s
    (-1 once its documents are done) and its chunk."""
    free = np.zeros(rows, dtype=np.int64)  # the step each row's documents end at
    taken: list[list[int]] = [[] for _ in range(rows)]
    for d, n in enumerate(chunks):
        row = int(np.argmin(free))
        taken[row].append(d)
        free[row] += n
    steps = int(free.max()) if rows else 0
    document = np.full((steps, rows), -1, dtype=np.int64)
    chunk = np.zeros((steps, rows), dtype=np.int64)
    for row, ds in enumerate(taken):
        if ds:
            document[:free[row], row] = np.repeat(ds, chunks[ds])
            chunk[:free[row], row] = np.concatenate([np.arange(chunks[d]) for d in ds])
    return document, chunk


class StreamedLoader(ResumableLoader):
    """Training batches of documents streamed through ``batch_size`` rows (module
    docstring): the documents in an order redrawn per epoch from ``(seed, epoch)``; with
    ``world_size`` ranks, rank r streams documents r, r + world_size, ... (disjoint), every
    rank as many steps as the longest stream (a row with nothing left reads an empty
    document). Batch s holds each row's document whole, and in ``ActionBatch.chunk`` the
    chunk of it the row reads (0: its start)."""

    def __init__(self, items: Sequence[ActionItem], chunks: np.ndarray, batch_size: int,
                 seed: int, epoch: int = 0, rank: int = 0, world_size: int = 1) -> None:
        super().__init__(epoch)
        order = np.random.default_rng([seed, epoch]).permutation(len(items))
        schedules = [stream_schedule(chunks[order[r::world_size]], batch_size)
                     for r in range(world_size)]
        steps = max(len(document) for document, _ in schedules)
        document, self.chunks = (np.pad(a, ((0, steps - len(a)), (0, 0)), constant_values=v)
                                 for a, v in zip(schedules[rank], (-1, 0), strict=True))
        mine = order[rank::world_size]
        self.documents = np.where(document >= 0, mine[document.clip(min=0)], -1)  # (S, rows)
        self.items = items

    def __len__(self) -> int:
        return len(self.documents)

    def batch(self, i: int) -> ActionBatch:
        empty = ActionItem(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), None)
        rows = [self.items[d] if d >= 0 else empty for d in self.documents[i]]
        return replace(collate_actions(rows), chunk=torch.from_numpy(self.chunks[i]))
