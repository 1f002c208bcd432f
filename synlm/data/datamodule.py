"""``SynLMDataModule``: one DataModule for every corpus, in stream or sentence mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import lightning.pytorch as pl
import numpy as np
import torch

from synlm.data.batching import (
    Columns,
    StreamLoader,
    TokenArrays,
    UnitDataset,
    awd_window_lengths,
    collate_units,
    fixed_window_lengths,
)
from synlm.data.corpora import Corpus, env_dir
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import Vocab
from synlm.outputs import GOLD_FIELDS
from synlm.syntax import Sentence, baseline_tree
from synlm.syntax.targets import cached_targets, max_distance

CACHE_ENV = "SYNLM_CACHE_DIR"

#: The gold kind (``Corpus.gold``) each gold ``Batch`` field is built from. ``trees`` (the
#: per-row gold ``Sentence`` list, sentence mode only) comes with either kind.
FIELD_KINDS = {"distances": "constituency", "spans": "constituency", "dep_targets": "dependency"}

#: Corpora named in the error of a missing kind.
_EXAMPLES = {"constituency": "a corpus with trees, e.g. PTBConcatSyn or SyntheticTreebank",
             "dependency": "a corpus with dependency heads or trees, e.g. UDTreebank, "
                           "PTBConcatSyn or SyntheticTreebank"}


def default_cache_dir() -> Path:
    """``$SYNLM_CACHE_DIR`` if set, else ``~/.cache/synlm``."""
    return env_dir(CACHE_ENV, "")


class SynLMDataModule(pl.LightningDataModule):
    """Batches a ``Corpus`` for language modelling with optional gold syntax.

    Args:
        corpus: the corpus (default: the bundled synthetic treebank).
        mode: ``stream`` (AWD-style contiguous columns, state carried across windows)
            or ``sentence`` (one padded sentence per row, for parsing evaluation and
            sentence-level models).
        eval_mode: the mode of validation, test and predict (default: ``mode``); a
            stream-trained model validated in ``sentence`` mode logs ``val/uf1``.
        batch_size: training columns (stream) or sentences (sentence) per device.
        eval_batch_size, test_batch_size: the same for validation and test (AWD: 10, 1).
        bptt: base window length; training windows vary as AWD-LSTM's unless
            ``variable_bptt`` is False; evaluation windows are fixed.
        max_length: sentence mode: training sentences longer than this are dropped.
        span_window: PaLM's m: span targets cover the m - 1 spans ending at each word;
            None: the window a head asks for (``SpanHead`` asks for its attention's), else 10.
        tree_source: ``random`` replaces every gold tree by a seeded random binary tree
            over the same words before targets are built (Du et al. 2020 Table 4,
            "random trees"); evaluation trees stay gold.
        seed: seeds the window lengths of each epoch (with the epoch number).
        cache_dir: where vocabularies and encoded splits are cached
            (default ``$SYNLM_CACHE_DIR`` or ``~/.cache/synlm``).
    """

    def __init__(
        self,
        corpus: Corpus | None = None,
        mode: Literal["stream", "sentence"] = "stream",
        eval_mode: Literal["stream", "sentence"] | None = None,
        batch_size: int = 20,
        eval_batch_size: int = 10,
        test_batch_size: int = 1,
        bptt: int = 70,
        variable_bptt: bool = True,
        max_length: int | None = None,
        span_window: int | None = None,
        tree_source: Literal["gold", "random"] = "gold",
        seed: int = 141,
        num_workers: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.corpus = corpus if corpus is not None else SyntheticTreebank()
        self.mode = mode
        self.eval_mode = eval_mode or mode
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.test_batch_size = test_batch_size
        self.bptt = bptt
        self.variable_bptt = variable_bptt
        self.max_length = max_length
        self.span_window = span_window
        self.tree_source = tree_source
        self.seed = seed
        self.num_workers = num_workers
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.requested: frozenset[str] = frozenset()
        self._sentences: dict[str, list[Sentence]] = {}
        self._streams: dict[tuple[str, str], tuple[TokenArrays, np.ndarray]] = {}

    # ------------------------------------------------------------------ corpus
    def sentences(self, split: str) -> list[Sentence]:
        if split not in self._sentences:
            self._sentences[split] = self.corpus.sentences(split)
        return self._sentences[split]

    @cached_property
    def vocab(self) -> Vocab:
        """Built from all splits in order of first appearance (as AWD-LSTM), cached."""
        path = self.cache_dir / self.corpus.cache_key() / "vocab.json"
        if path.exists():
            return Vocab.load(path)
        vocab = Vocab.build(s.words for split in self.corpus.splits
                            for s in self.sentences(split))
        vocab.save(path)
        return vocab

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def normalization(self) -> str:
        """The corpus's word normalisation (a ``synlm.data.normalization.NORMALIZATIONS`` name),
        for checkpoints and ``synlm parse``."""
        return self.corpus.normalization

    def gold_fields(self) -> frozenset[str]:
        """Gold ``Batch`` fields this corpus can supply in these modes: ``distances`` and
        ``spans`` with constituency gold, ``dep_targets`` with dependency gold, and ``trees``
        (the rows' gold ``Sentence``) with either when ``mode`` or ``eval_mode`` is
        ``sentence``."""
        gold = self.corpus.gold
        fields = {f for f, kind in FIELD_KINDS.items() if kind in gold}
        if gold and "sentence" in (self.mode, self.eval_mode):
            fields.add("trees")
        return frozenset(fields)

    def request(self, fields: frozenset[str], who: str,
                options: Mapping[str, Any] | None = None) -> None:
        """Ask for gold fields, built with ``options`` (``span_window``); a field the corpus
        cannot supply, or an option that conflicts with an explicit setting, raises a
        one-line ``ValueError`` naming ``who``."""
        missing = fields - self.gold_fields()
        if missing:
            raise ValueError(self._missing_message(frozenset(missing), who))
        for option, value in (options or {}).items():
            if option != "span_window":
                raise ValueError(f"{who} asks for data option {option!r}; the DataModule "
                                 "takes only span_window")
            if self.span_window is not None and self.span_window != value:
                raise ValueError(f"{who} needs span targets over a window of {value} (its "
                                 f"attention's) but data.span_window is {self.span_window}; "
                                 f"set data.span_window: {value} or remove it")
            if self.span_window != value:
                self.span_window = value
                self._streams.clear()
        requested = self.requested | (fields & GOLD_FIELDS)
        if requested != self.requested:
            self.requested = requested
            self._streams.clear()  # rebuilt with the new gold arrays on next use

    def _missing_message(self, missing: frozenset[str], who: str) -> str:
        """One line: who needs which gold kind (and fields), what the corpus has, what to do."""
        corpus, has = type(self.corpus).__name__, self.corpus.gold
        unknown = sorted(missing - GOLD_FIELDS)
        if unknown:
            return (f"{who} needs {unknown}, which are not gold fields; gold fields are "
                    f"{sorted(GOLD_FIELDS)}")
        has_text = f"has only {' and '.join(sorted(has))} gold" if has else "has no gold syntax"
        kinds = sorted({FIELD_KINDS[f] for f in missing if f in FIELD_KINDS})
        if kinds:
            need = f"{' and '.join(kinds)} gold ({', '.join(sorted(missing))})"
            use = _EXAMPLES[kinds[0]] if len(kinds) == 1 else _EXAMPLES["constituency"]
        elif not has:
            need, use = "gold sentences (trees)", _EXAMPLES["constituency"]
        else:
            return (f"{who} needs gold sentences (trees), which only sentence mode serves, but "
                    f"{corpus} is served in stream mode only; set eval_mode: sentence")
        stream_only = "trees" in missing and has  # the corpus has gold, the mode has no rows
        return (f"{who} needs {need} but {corpus} {has_text}; use {use}"
                + ("; trees also need eval_mode: sentence" if stream_only else ""))

    # ------------------------------------------------------------------ streams
    def stream(self, split: str, mode: str | None = None) -> tuple[TokenArrays, np.ndarray]:
        """The split as one stream of units ``[<eos>, w1..wn]`` plus a closing
        ``<eos>``, and the start of each unit (the last entry is the closing ``<eos>``)."""
        mode = mode or self.mode
        if (split, mode) not in self._streams:
            sentences = self.sentences(split)
            lengths = np.array([len(s.words) + 1 for s in sentences], dtype=np.int64)
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            tokens = np.zeros(bounds[-1] + 1, dtype=np.int64)  # 0 is <eos>
            words = [w for s in sentences for w in s.words]
            is_word = np.ones(bounds[-1], dtype=bool)
            is_word[bounds[:-1]] = False
            tokens[:-1][is_word] = self.vocab.encode(words)
            arrays: TokenArrays = {"tokens": tokens}
            # the closing <eos> gets an id of its own
            arrays["sentence_ids"] = np.append(np.repeat(np.arange(len(sentences)), lengths),
                                               len(sentences)).astype(np.int64)
            if self.requested - {"trees"}:
                arrays.update(self._gold(split, mode))
            self._streams[split, mode] = (arrays, bounds)
        return self._streams[split, mode]

    @cached_property
    def boundary(self) -> float:
        """The sentence-boundary distance: the training split's largest gap + 1 (random
        trees: the longest sentence + 1, above any binary tree's height)."""
        if self.tree_source == "random":
            return float(max(len(s.words) for s in self.sentences("train")) + 1)
        return float(max_distance(self.sentences("train")) + 1)

    def _gold(self, split: str, mode: str) -> TokenArrays:
        """Gold syntax aligned with the stream (``synlm.syntax.targets``), cached on disk.
        A requested field with no gold at all in the training split raises: a head would
        train on an all-false mask. Evaluation splits may lack gold (PTB-Concat-Syn with
        the NLTK sample has trees in its training split only)."""
        stream = mode == "stream"
        sentences = self.sentences(split)
        if self.tree_source == "random":
            rng = np.random.default_rng([self.seed, self.corpus.splits.index(split)])
            sentences = [replace(s, tree=baseline_tree(s.words, "random", rng))
                         if s.tree is not None else s for s in sentences]
        targets = cached_targets(
            sentences, self.cache_dir / self.corpus.cache_key(),
            key=f"{self.corpus.cache_key()}-{split}-{self.tree_source}-{self.seed}", mode=mode,
            span_window=self.span_window or 10, boundary=self.boundary, closing_eos=stream)
        present = {"constituency": targets.distance_mask.any(),
                   "dependency": targets.dep_row_mask.any()}
        empty = sorted(f for f in self.requested & FIELD_KINDS.keys()
                       if not present[FIELD_KINDS[f]])
        if empty and split == self.corpus.splits[0]:
            kinds = " and ".join(sorted({FIELD_KINDS[f] for f in empty}))
            raise ValueError(
                f"{type(self.corpus).__name__} declares {kinds} gold but no {split} sentence "
                f"has it ({', '.join(empty)} would be all masked); check its trees or heads")
        # a split without any gold of a kind serves none (its batches carry None, so heads
        # log no loss there rather than a zero)
        gold: TokenArrays = {}
        if "distances" in self.requested and present["constituency"]:
            gold["distances"], gold["distance_mask"] = targets.distances, targets.distance_mask
        if "spans" in self.requested and present["constituency"]:
            gold["spans"], gold["span_mask"] = targets.spans, targets.span_mask
        if "dep_targets" in self.requested and present["dependency"]:
            gold["dep_offsets"], gold["dep_mask"] = targets.dep_targets, targets.dep_mask
        if not stream:  # one more row for the closing <eos>, never a target input
            gold = {k: np.concatenate([v, np.zeros_like(v[:1])]) for k, v in gold.items()}
        return gold

    # ------------------------------------------------------------------ loaders
    def _world(self) -> tuple[int, int]:
        if self.trainer is None:
            return 0, 1
        return self.trainer.global_rank, self.trainer.world_size

    def setup(self, stage: str) -> None:
        if self.mode == "stream" and self.variable_bptt and self.trainer is not None:
            # windows are redrawn every epoch, so the loader (and its length) is too
            self.trainer.reload_dataloaders_every_n_epochs = 1

    def _stream_loader(self, split: str, n_columns: int, train: bool) -> StreamLoader:
        rank, world = self._world()
        columns = Columns.cut(self.stream(split, "stream")[0], n_columns, rank, world)
        epoch = self.trainer.current_epoch if (train and self.trainer is not None) else 0
        if train and self.variable_bptt:
            rng = np.random.default_rng([self.seed, epoch])
            lengths = awd_window_lengths(columns.length, self.bptt, rng)
        else:
            lengths = fixed_window_lengths(columns.length, self.bptt)
        return StreamLoader(columns, lengths, epoch=epoch)

    def _sentence_loader(self, split: str, batch_size: int, train: bool
                         ) -> torch.utils.data.DataLoader:
        arrays, bounds = self.stream(split, "sentence")
        dataset = UnitDataset(arrays, bounds, self.sentences(split))
        if train and self.max_length is not None:
            keep = [i for i, s in enumerate(self.sentences(split))
                    if len(s.words) <= self.max_length]
            dataset = torch.utils.data.Subset(dataset, keep)
        generator = torch.Generator().manual_seed(self.seed)
        return torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, shuffle=train, collate_fn=collate_units,
            num_workers=self.num_workers, generator=generator)

    def _loader(self, split: str, batch_size: int, train: bool = False):
        if (self.mode if train else self.eval_mode) == "stream":
            return self._stream_loader(split, batch_size, train)
        return self._sentence_loader(split, batch_size, train)

    def train_dataloader(self):
        return self._loader("train", self.batch_size, train=True)

    def val_dataloader(self):
        return self._loader("valid", self.eval_batch_size)

    def test_dataloader(self):
        return self._loader("test", self.test_batch_size)

    def predict_dataloader(self):
        return self._loader("test", self.test_batch_size)
