"""``GPSTLM``: GPST's training recipe (Hu et al. 2024; StructuredLM_RTDT's
``trainer/ddp_trainer.py`` with ``FastGenerativeR2D2``), a LightningModule over sentence
batches (``data.mode: sentence``) that trains ``StructuredGPST``
(``synlm.transition.gpst_structured``) as released: the parser's noisy merge order prunes
each sentence's chart, the inside-outside pass induces its binary tree, the generative model
reads that tree's SHIFT/REDUCE order, and the released loss sum is minimised::

    L = L_inside_outside + L_height + ½ L_words + L_actions + L_parser

Each step backpropagates as ``gradients`` says: ``split`` (GPST-small's script,
``trainer/ddp_trainer_nosync.py``) the structural loss, then the generative loss with the
inside pass's split weights cut off (``InsideOutside.weights_frozen``); ``sum``
(``trainer/ddp_trainer.py``) their sum at once. Then the gradient norm is clipped to
``max_norm`` (released 1.0) and the optimiser steps (manual optimisation: a scheduler, if
any, steps with it; ``trainer.gradient_clip_val`` is not used).

The parser's noise coefficient and the inside softmax's temperature follow the released
``LinearProgressScheduler`` (from ``*_start`` to ``*_end`` over the first ``proportion``
of the training steps, then constant; GPST-small's script keeps both at 1). The parser's
parameters take their own learning rate (``parser_lr``, released 1e-3), the rest the
optimiser's.

``trees: gold`` trains the generative model alone on the corpus's trees (binarised
right-factored, ``synlm.syntax.binary_actions``), each REDUCE's input the hard composition
of its children (``GPST.forward``): ½ L_words + L_actions, the parser and the
inside-outside pass left untrained.

It offers what the commands ask of a transition LM (``synlm.capabilities``): ``Searches``
(``synlm evaluate-syntax``, ``synlm lm-eval``: the released word-synchronous beam search of
the generative model, ``synlm.transition.gpst_search.beam_search``, surprisal convention
``all_actions``) and ``Parses`` (``synlm parse``: the beam's best tree, as the released
grammar-induction evaluation's ``generative`` mode parses).

Each row ``<eos> w_1 .. w_N`` of the DataModule gives the words w_1 .. w_N. Validation and
test log the loss (``val/loss``; the parser without noise) and the words' mean negative
log-likelihood given the induced (or gold) trees (``val/word_nll``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import instantiate_class
from torch import Tensor

from synlm import errors
from synlm.data.vocab import UNK, Vocab
from synlm.errors import InputError
from synlm.lm import KeepsDataModule, with_scheduler
from synlm.outputs import Batch
from synlm.syntax.binary_actions import actions_tree, binary_actions
from synlm.transition.gpst_search import beam_searches
from synlm.transition.gpst_structured import StructuredGPST
from synlm.transition.own_search import (
    OwnBeam,
    encoded,
    refuse_other_settings,
    sentence_data,
)
from synlm.transition.types import ALL_ACTIONS, SearchResult

TREES = ("induced", "gold")
GRADIENTS = ("split", "sum")


@dataclass(frozen=True)
class GPSTBeam(OwnBeam):
    """The search's settings (``Searches.beam``): its beam (the released evaluators' 20)
    and its one convention."""

    beam_size: int = 20
    convention: str = ALL_ACTIONS
    manner: ClassVar[str] = ", word-synchronous"


def progress(start: float, end: float, proportion: float, step: int, total: int) -> float:
    """The released ``LinearProgressScheduler``: ``start`` to ``end`` linearly over the
    first ``proportion`` of ``total`` steps, then ``end``."""
    r = min(1.0, step / max(total * proportion, 1e-12))
    return start * (1 - r) + end * r


class GPSTLM(KeepsDataModule, pl.LightningModule):
    """GPST's training recipe as released (module docstring); its size arguments are the
    model's (defaults: GPST-small).

    Args:
        vocab_size: V (linked from the DataModule).
        trees: ``induced`` (as released) or ``gold``.
        noise_start, noise_end, temperature_start, temperature_end, proportion: the
            schedules (released defaults of the GPST-small script: 1, 1, 1, 1, 0.8).
        parser_lr: the parser's learning rate.
        gradients: ``split`` or ``sum`` (module docstring).
        max_norm: the gradient norm's bound.
        beam_size: the search's beam.
        optimizer: ``{"class_path", "init_args"}``; default AdamW, lr 5e-5, no decay.
        lr_scheduler: the same for a scheduler.
    """

    monitor = "val/loss"
    default_optimizer: ClassVar[dict[str, Any]] = {
        "class_path": "torch.optim.AdamW", "init_args": {"lr": 5e-5, "weight_decay": 0.0}}

    def __init__(self, vocab_size: int = 10000, size: int = 768, n_heads: int = 12,
                 action_layers: int = 3, generation_layers: int = 9, compose_size: int = 256,
                 compose_heads: int = 8, compose_ffn: int = 1024, compose_layers: int = 4,
                 max_positions: int = 2048, dropout: float = 0.1, score_size: int = 128,
                 outside_layers: int = 1, window: int = 2, parser_size: int = 128,
                 parser_hidden: int = 512, parser_layers: int = 4, parser_heads: int = 8,
                 parser_positions: int = 1024, trees: str = "induced",
                 noise_start: float = 1.0, noise_end: float = 1.0,
                 temperature_start: float = 1.0, temperature_end: float = 1.0,
                 proportion: float = 0.8, parser_lr: float = 1e-3, gradients: str = "split",
                 max_norm: float = 1.0, beam_size: int = 20, optimizer: dict | None = None,
                 lr_scheduler: dict | None = None) -> None:
        super().__init__()
        if trees not in TREES:
            raise errors.SettingError("model.trees", trees, " or ".join(TREES))
        if gradients not in GRADIENTS:
            raise errors.SettingError("model.gradients", gradients, " or ".join(GRADIENTS))
        self.automatic_optimization = False
        errors.at_least("window", window, 1)
        errors.at_least("beam_size", beam_size, 1)
        self.save_hyperparameters()
        self.model = StructuredGPST(
            vocab_size, size, n_heads, action_layers, generation_layers, compose_size,
            compose_heads, compose_ffn, compose_layers, max_positions, dropout, score_size,
            outside_layers, window, parser_size, parser_hidden, parser_layers, parser_heads,
            parser_positions)
        self.beam = GPSTBeam(beam_size)
        self.vocab: Vocab | None = None
        self.normalization = "none"

    def setup(self, stage: str) -> None:
        datamodule = sentence_data(self)
        if datamodule is not None:
            if self.hparams.trees == "gold":
                datamodule.request(frozenset({"trees"}), who="GPSTLM with trees: gold")
            self.vocab = datamodule.vocab
            self.normalization = datamodule.normalization

    def inputs(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """Words (B, N) and lengths (B,) of a sentence batch (``tokens`` ``<eos> words``)."""
        if batch.lengths is None:
            raise InputError("GPSTLM trains on sentences: data.mode: sentence")
        lengths = (batch.lengths - 1).to(batch.tokens.device)
        if int(lengths.min()) < 1:
            raise InputError("GPSTLM: a sentence of no words in the batch")
        return batch.tokens[:, 1:int(lengths.max()) + 1], lengths

    def losses(self, batch: Batch) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None]:
        """The loss, the words' mean negative log-likelihood and (induced trees) the
        structural and generative losses of a batch."""
        words, lengths = self.inputs(batch)
        if self.hparams.trees == "gold":
            if batch.trees is None or any(s is None or s.tree is None for s in batch.trees):
                raise InputError("GPSTLM with trees: gold: a sentence without a tree; give "
                                 "a treebank, or trees: induced")
            rows = [binary_actions(sentence.tree) for sentence in batch.trees]
            width = max(map(len, rows))
            actions = torch.tensor([r + [-1] * (width - len(r)) for r in rows],
                                   device=words.device)
            out = self.model.generative(words, actions, lengths)
            word_nll = -out.word_log_probs.sum() / lengths.sum()
            action_nll = -out.action_log_probs.sum() / (actions >= 0).sum()
            return 0.5 * word_nll + action_nll, word_nll, None
        hp = self.hparams
        total = max(int(self.trainer.estimated_stepping_batches), 1) if self._trainer else 1
        step = self.global_step
        out = self.model(words, lengths,
                         progress(hp.noise_start, hp.noise_end, hp.proportion, step, total),
                         progress(hp.temperature_start, hp.temperature_end, hp.proportion,
                                  step, total))
        return out.loss, out.words, (out.structural, out.generative)

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        loss, word_nll, parts = self.losses(batch)
        if parts is not None and self.hparams.gradients == "split":
            self.manual_backward(parts[0], retain_graph=True)
            with self.model.inside_outside.weights_frozen():
                self.manual_backward(parts[1])
        else:
            self.manual_backward(loss)
        self.clip_gradients(optimizer, gradient_clip_val=self.hparams.max_norm,
                            gradient_clip_algorithm="norm")
        optimizer.step()
        optimizer.zero_grad()
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()
        size = len(batch.lengths)
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/word_nll", word_nll, batch_size=size)
        return loss

    def _evaluate(self, batch: Batch, stage: str) -> None:
        loss, word_nll, _ = self.losses(batch)
        size = len(batch.lengths)
        self.log(f"{stage}/loss", loss, batch_size=size)
        self.log(f"{stage}/word_nll", word_nll, batch_size=size)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    # ------------------------------------------------------------------ search
    def use_beam(self, beam_size: int | None = None, word_beam_size: int | None = None,
                 shift_size: int | None = None, convention: str | None = None,
                 max_memory_mb: float | None = None) -> None:
        """Search with ``beam_size`` from now on; the top-down searches' other settings are
        refused in one line."""
        refuse_other_settings("GPST", self.beam, word_beam_size=word_beam_size,
                              shift_size=shift_size, max_memory_mb=max_memory_mb,
                              convention=None if convention == ALL_ACTIONS else convention)
        if beam_size is not None:
            errors.at_least("beam_size", beam_size, 1)
            self.beam = GPSTBeam(int(beam_size))

    @property
    def search_convention(self) -> str:
        return ALL_ACTIONS

    def search_ids(self, rows: Sequence[Sequence[int]]) -> list[SearchResult]:
        """The released beam search of each sentence (word ids of ``self.vocab``)."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                return beam_searches(self.model.generative, rows, self.beam.beam_size,
                                     self.device)
        finally:
            self.train(was_training)

    def parse(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        """The beam's best tree of each sentence (words as given, normalised as the
        training corpus was read)."""
        rows = encoded(self, sentences)
        return [actions_tree(list(r.parses[0][0]), list(words))
                for r, words in zip(self.search_ids(rows), sentences, strict=True)]

    def configure_optimizers(self) -> Any:
        """The optimiser over two groups: the parser at ``parser_lr``, the rest."""
        hp = self.hparams
        parser = list(self.model.parser.parameters())
        ids = {id(p) for p in parser}
        rest = [p for p in self.model.parameters() if id(p) not in ids]
        optimizer = instantiate_class(
            [{"params": rest}, {"params": parser, "lr": hp.parser_lr}],
            hp.optimizer or self.default_optimizer)
        return with_scheduler(optimizer, hp.lr_scheduler)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The vocabulary and normalisation, and the recipe's name."""
        checkpoint["synlm"] = {
            "model_class": f"{GPSTLM.__module__}.{GPSTLM.__name__}",
            "vocab": self.vocab.itos if self.vocab is not None else None,
            "normalization": self.normalization}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("synlm") or {}
        if saved.get("vocab") is not None:
            words = saved["vocab"]
            self.vocab = Vocab(words, unk=UNK if UNK in words else None)
        self.normalization = saved.get("normalization", "none")
