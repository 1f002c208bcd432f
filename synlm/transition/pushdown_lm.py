"""``PushdownLM``: the training recipe of Pushdown Layers (``synlm.transition.pushdown``), a
LightningModule over sentence batches with their gold trees (``data.mode: sentence``).

A Pushdown LM generates its tree bottom-up, one attachment per word, not as the top-down
actions of a ``TransitionModel`` (``synlm.transition.model``), so it has its own recipe; it
offers what the commands ask of a transition LM (``synlm.capabilities``): ``Searches``
(``synlm evaluate-syntax``, ``synlm lm-eval``: its released beam search) and ``Parses``
(``synlm parse``: the beam's best tree).

Each row ``<eos> w_1 .. w_N`` of the DataModule becomes ``<s> w_1 .. w_N <eos>`` with ``<s>``
and ``</s>`` the model's own ids, its tree's gold attachments and stack tape
(``synlm.transition.pushdown_tree``). Training minimises the released loss; validation and
test log it (``val/loss``) and the perplexity given the gold trees, as the released
``eval_gold`` reports it::

    ppl = exp(−Σ (log p(words, <eos>, </s>) + log p(gold attachments)) / Σ (N + 1))

A search's word log-probabilities are those of ``w_1 .. w_N``; its end term log p(end | x)
those of ``<eos>`` and ``</s>`` together (``synlm.transition.pushdown_beam``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import lightning.pytorch as pl
import torch
from torch import Tensor
from torchmetrics import SumMetric

from synlm import errors
from synlm.data.subwords import SubwordVocab
from synlm.data.vocab import UNK, Vocab
from synlm.errors import InputError
from synlm.lm import KeepsDataModule
from synlm.outputs import Batch
from synlm.transition.lm import TransitionLM
from synlm.transition.own_search import (
    OwnBeam,
    encoded,
    refuse_other_settings,
    sentence_data,
)
from synlm.transition.pushdown import PushdownTransformer
from synlm.transition.pushdown_beam import search_within
from synlm.transition.pushdown_tree import attachments_to_tree, depth_tape, gold_attachments
from synlm.transition.types import PUSHDOWN_RANKED, SearchResult


@dataclass(frozen=True)
class PushdownBeam(OwnBeam):
    """The search's settings (``Searches.beam``): its beam, its one convention and the
    memory of one batch of sentences' beams (``synlm.transition.pushdown_beam.search_within``).
    A request for particle filtering (``synlm.transition.particles.use_particles``) is
    refused by ``PushdownLM.search_ids``."""

    beam_size: int = 300
    convention: str = PUSHDOWN_RANKED
    manner: ClassVar[str] = " over attachments"


class PushdownLM(KeepsDataModule, pl.LightningModule):
    """The recipe of a ``PushdownTransformer`` (module docstring); its arguments are the
    model's (``synlm.transition.pushdown.PushdownTransformer``), the search's and the
    optimiser's.

    Args:
        vocab_size: V (linked from the DataModule).
        beam_size: the search's beam (the released ``eval_pushdown_model``'s 300).
        optimizer: ``{"class_path", "init_args"}``; default the released Adam, lr 1e-4.
        lr_scheduler: the same for a scheduler.
    """

    monitor = "val/ppl"
    default_optimizer: ClassVar[dict[str, Any]] = {"class_path": "torch.optim.Adam",
                                                   "init_args": {"lr": 1e-4}}

    def __init__(self, vocab_size: int = 10000, size: int = 1024, num_layers: int = 16,
                 attention_heads: int = 8, ff_multiplier: int = 8, head_depth_divisor: int = 8,
                 max_depth: int = 50, dropout: float = 0.1, embedding_dropout: float = 0.1,
                 beam_size: int = 300, optimizer: dict | None = None,
                 lr_scheduler: dict | None = None) -> None:
        super().__init__()
        errors.at_least("beam_size", beam_size, 1)
        self.model = PushdownTransformer(vocab_size, size, num_layers, attention_heads,
                                         ff_multiplier, head_depth_divisor, max_depth, dropout,
                                         embedding_dropout)
        self.save_hyperparameters({
            "_class_path": f"{type(self).__module__}.{type(self).__qualname__}",
            **{k: v for k, v in self.model.init_config["init_args"].items()},
            "beam_size": beam_size, "optimizer": optimizer, "lr_scheduler": lr_scheduler})
        self.beam = PushdownBeam(beam_size)
        self.sums = torch.nn.ModuleDict({f"{stage}_{name}": SumMetric()
                                         for stage in ("val", "test")
                                         for name in ("ll", "tokens", "loss", "batches")})
        self.vocab: Vocab | None = None
        self.normalization = "none"

    def setup(self, stage: str) -> None:
        datamodule = sentence_data(self)
        if datamodule is not None:
            if datamodule.action_order != "top_down":  # the default: unset
                raise errors.SettingError("data.action_order", datamodule.action_order,
                                          "top_down (unset): the PushdownLM reads no actions, "
                                          "it attaches each word to its tree")
            datamodule.request(frozenset({"trees"}), who="PushdownLM")
            self.vocab = datamodule.vocab
            self.normalization = datamodule.normalization

    # ------------------------------------------------------------------ batches
    def inputs(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``<s> words <eos>`` rows (B, T), lengths (B,), gold tapes (B, T, T) and
        attachments (B, T) of a sentence batch (``tokens`` ``<eos> words``)."""
        if batch.lengths is None or batch.trees is None:
            raise InputError("PushdownLM trains on sentences with trees: data.mode: sentence")
        model, eos = self.model, self.vocab.eos_id if self.vocab is not None else 0
        lengths = batch.lengths + 1
        B, T = len(lengths), int(lengths.max())
        tokens = torch.zeros(B, T, dtype=torch.long)
        tapes = torch.zeros(B, T, T, dtype=torch.long)
        attachments = torch.zeros(B, T, dtype=torch.long)
        words = batch.tokens.cpu()
        for b, sentence in enumerate(batch.trees):
            n = int(lengths[b])
            if sentence is None or sentence.tree is None:
                raise InputError(f"{getattr(sentence, 'source', None) or 'a sentence'}: no "
                                 "tree; PushdownLM trains on gold (or silver) trees")
            tokens[b, :n] = torch.cat([torch.tensor([model.start_id]), words[b, 1:n - 1],
                                       torch.tensor([eos])])
            gold = gold_attachments(sentence.tree)
            attachments[b, :n] = torch.tensor(gold)
            tapes[b, :n, :n] = depth_tape(gold)
        if int(tapes.max()) >= model.max_depth:
            raise errors.SettingError("model.max_depth", model.max_depth,
                                      f"more than the trees' depth {int(tapes.max())}")
        device = batch.tokens.device
        return tokens.to(device), lengths, tapes.to(device), attachments.to(device)

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        tokens, lengths, tapes, attachments = self.inputs(batch)
        loss = self.model(tokens, lengths, tapes, attachments).loss
        self.log("train/loss", loss, prog_bar=True, batch_size=len(lengths))
        return loss

    def _evaluate(self, batch: Batch, stage: str) -> None:
        tokens, lengths, tapes, attachments = self.inputs(batch)
        out = self.model(tokens, lengths, tapes, attachments)
        ll = out.word_log_probs.sum() + out.gold_attachment_log_probs.sum()
        for name, value in (("ll", ll), ("tokens", (lengths - 1).sum()), ("loss", out.loss),
                            ("batches", 1.0)):
            self.sums[f"{stage}_{name}"].update(torch.as_tensor(value, dtype=torch.float64))

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def _log_epoch(self, stage: str) -> None:
        sums = {name: self.sums[f"{stage}_{name}"] for name in ("ll", "tokens", "loss", "batches")}
        values = {name: metric.compute() for name, metric in sums.items()}
        for metric in sums.values():
            metric.reset()
        if values["tokens"] > 0:
            self.log(f"{stage}/ppl", torch.exp(-values["ll"] / values["tokens"]).float())
            self.log(f"{stage}/loss", (values["loss"] / values["batches"]).float())

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    # ------------------------------------------------------------------ search
    def use_beam(self, beam_size: int | None = None, word_beam_size: int | None = None,
                 shift_size: int | None = None, convention: str | None = None,
                 max_memory_mb: float | None = None) -> None:
        """Search with ``beam_size`` and batches within ``max_memory_mb`` from now on (one
        left unset keeps its value); the settings of top-down searches (word beam, fast
        track, another convention) are refused in one line."""
        refuse_other_settings("the Pushdown LM", self.beam, word_beam_size=word_beam_size,
                              shift_size=shift_size,
                              convention=None if convention == PUSHDOWN_RANKED else convention)
        if beam_size is not None:
            errors.at_least("beam_size", beam_size, 1)
        if max_memory_mb is not None and not max_memory_mb > 0:
            raise errors.SettingError("max_memory_mb", max_memory_mb, "a positive number")
        self.beam = PushdownBeam(int(beam_size or self.beam.beam_size),
                                 max_memory_mb=float(max_memory_mb or self.beam.max_memory_mb))

    @property
    def search_convention(self) -> str:
        return PUSHDOWN_RANKED

    def search_ids(self, rows: Sequence[Sequence[int]]) -> list[SearchResult]:
        """The released beam search of each sentence (word ids of ``self.vocab``), several
        sentences a batch (``synlm.transition.pushdown_beam.search_within``)."""
        if not isinstance(self.beam, PushdownBeam):  # particle filtering was asked for
            raise InputError(f"the Pushdown LM searches by its beam over attachments, not by "
                             f"{self.beam.describe()}")
        was_training = self.training
        self.eval()
        eos = self.vocab.eos_id if self.vocab is not None else 0
        try:
            found = search_within(self.model, [[self.model.start_id, *ids, eos] for ids in rows],
                                  self.beam.beam_size, self.beam.max_memory_mb)
        finally:
            self.train(was_training)
        results = []
        for search in found:
            lp = search.word_log_probs.tolist()
            results.append(SearchResult(tuple(lp[:-2]), lp[-2] + lp[-1],
                                        tuple((tuple(h), s) for s, h in search.beam)))
        return results

    def parse(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        """The beam's best tree of each sentence (words as given, normalised as the
        training corpus was to be read)."""
        if isinstance(self.vocab, SubwordVocab):
            raise InputError("the Pushdown LM parses over its tokens; this one's are subwords "
                             "(data.subwords), give it words")
        rows = encoded(self, sentences)
        return [attachments_to_tree(list(r.parses[0][0]), list(words))
                for r, words in zip(self.search_ids(rows), sentences, strict=True)]

    #: The optimiser over the model's parameters, as ``TransitionLM`` builds it.
    configure_optimizers = TransitionLM.configure_optimizers

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The vocabulary and normalisation that scoring and parsing need, and the recipe's
        name."""
        checkpoint["synlm"] = {
            "model_class": f"{PushdownLM.__module__}.{PushdownLM.__name__}",
            "vocab": self.vocab.itos if self.vocab is not None else None,
            "normalization": self.normalization}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The vocabulary and normalisation, and the weights' precision: a converted float64
        checkpoint loads as float64."""
        weight = checkpoint.get("state_dict", {}).get("model.embedding.weight")
        if weight is not None:
            self.to(weight.dtype)
        saved = checkpoint.get("synlm") or {}
        if saved.get("vocab") is not None:
            words = saved["vocab"]
            self.vocab = Vocab(words, unk=UNK if UNK in words else None)
        self.normalization = saved.get("normalization", "none")
