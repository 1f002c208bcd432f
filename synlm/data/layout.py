"""What a layout of ``SynLMDataModule`` is: how one ``mode`` batches a split, reading the
DataModule's settings, sentences and vocabulary (``layout_tokens``: streams and sentence rows;
``layout_actions``: sentences as actions; ``layout_documents``: documents as actions)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from synlm.data.batching import ResumableLoader
from synlm.syntax import Sentence

#: The part of the training split ``dependency_holdout`` holds out, as ``sentences`` and
#: ``stream`` name it; validation serves it.
HELD_OUT = "train-held-out"

#: Corpora named in the error of a missing kind.
EXAMPLES = {"constituency": "a corpus with trees, e.g. PTBConcatSyn or SyntheticTreebank",
            "dependency": "a corpus with dependency heads or trees, e.g. UDTreebank, "
                          "PTBConcatSyn or SyntheticTreebank"}

#: What a layout's ``loader`` returns: a resumable training loader, or an evaluation loader.
Loader = ResumableLoader | torch.utils.data.DataLoader


class LayoutData(Protocol):
    """What a layout reads of its DataModule (``SynLMDataModule``): its settings, its
    corpus and vocabulary, the gold requested of it, and the sentences of a split."""

    trainer: Any
    corpus: Any
    vocab: Any
    seed: int
    objective: str
    mask_rate: float
    num_workers: int
    bptt: int
    variable_bptt: bool
    max_length: int | None
    max_tokens: int | None
    max_document_words: int
    document_order: str
    #: with ``document_order: streamed``, the chunks the model reads a document's actions
    #: in (the recipe sets it from its model; None: it reads documents whole)
    chunks_of: Callable[[np.ndarray], int] | None
    action_order: str
    tree_source: str
    dependency_holdout: float
    span_window: int | None
    boundary: float
    requested: frozenset[str]
    cache_dir: Path
    cache_key: str

    def sentences(self, split: str) -> list[Sentence]:
        """The split's sentences as the model reads them."""
        ...

    def corpus_sentences(self, split: str) -> list[Sentence]:
        """The split's sentences as the corpus gives them."""
        ...


class Layout:
    """How one ``mode`` batches a split (``loader``); ``data`` is the DataModule whose
    settings, sentences and vocabulary it reads."""

    def __init__(self, data: LayoutData) -> None:
        self.data = data

    def loader(self, split: str, batch_size: int, train: bool) -> Loader:
        """Training: batches redrawn every epoch from ``(seed, epoch)``, resumable mid-epoch;
        evaluation: the split in order."""
        raise NotImplementedError  # pragma: no cover

    def _world(self) -> tuple[int, int]:
        """This process's rank and the number of processes (0, 1 outside a trainer)."""
        trainer = self.data.trainer
        if trainer is None:
            return 0, 1
        return trainer.global_rank, trainer.world_size

    def _epoch(self) -> int:
        """The trainer's current epoch (0 outside a trainer): what training batches are
        redrawn from."""
        trainer = self.data.trainer
        return trainer.current_epoch if trainer is not None else 0

    def _in_order(self, dataset: Any, batch_size: int,
                  collate: Callable[[list[Any]], Any]) -> torch.utils.data.DataLoader:
        """An evaluation loader: ``dataset`` in order, ``batch_size`` items a batch. Its own
        generator: a loader's iterator draws its seed from one, which must not be torch's
        global RNG (dropout masks)."""
        return torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, collate_fn=collate, num_workers=self.data.num_workers,
            generator=torch.Generator().manual_seed(self.data.seed))
