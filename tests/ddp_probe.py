"""Run by test_ddp.py as ``python ddp_probe.py OUT DEVICES PROBE...``, each PROBE a fit
whose result is written to OUT (JSON) under its name: ``columns``, a short fit on the
synthetic treebank (per-rank columns and validation perplexity); ``budget``, one epoch of a
Transformer on token-budget sentence batches (per-rank step counts and sentences);
``masked``, one epoch of a bidirectional Transformer on masked sentences (each rank's masked
positions by sentence). Each
fit seeds itself, so it gives the same alone or after another. Lightning's DDP launcher
re-runs this script once per extra rank, at the first fit; the later fits reuse those
ranks and their process group (one launch, not one per probe: each costs seconds of
imports)."""

from __future__ import annotations

import json
import sys

import lightning.pytorch as pl
import torch

from synlm.backbones import AWDLSTM, Transformer
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.lm import SyntaxLM

COLUMNS, EVAL_COLUMNS = 4, 4  # in total, split over the ranks


class RecordColumns(pl.Callback):
    """Gather the sentence id at the start of every column of the first batch."""

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if batch_idx == 0:
            first = batch.sentence_ids[:, 0].contiguous()
            module.columns = trainer.strategy.all_gather(first).reshape(-1, len(first)).tolist()


class RecordSentences(pl.Callback):
    """Every rank's training steps and the sentences of its rows, gathered on rank 0."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self.seen += batch.sentence_ids[:, 0].tolist()
        module.steps = batch_idx + 1

    def on_train_epoch_end(self, trainer, module) -> None:
        module.ranks = gathered(trainer, (module.steps, self.seen))


class RecordMasks(pl.Callback):
    """Each rank's masked positions of every training sentence, gathered on rank 0."""

    def __init__(self) -> None:
        self.seen: dict[int, list[int]] = {}

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        for row, n in enumerate(batch.lengths.tolist()):
            sentence = int(batch.sentence_ids[row, 0])
            self.seen[sentence] = batch.mask[row, :n].nonzero().flatten().tolist()

    def on_train_epoch_end(self, trainer, module) -> None:
        module.masks = gathered(trainer, self.seen)


def gathered(trainer: pl.Trainer, value: object) -> list[object]:
    """Every rank's ``value``, in rank order."""
    if trainer.world_size == 1:
        return [value]
    out = [None] * trainer.world_size
    torch.distributed.all_gather_object(out, value)
    return out


def one_epoch(model: SyntaxLM, dm: SynLMDataModule, devices: int,
              callback: pl.Callback) -> pl.Trainer:
    """The trainer after one training epoch of ``model`` on ``dm`` (no validation)."""
    trainer = pl.Trainer(accelerator="cpu", devices=devices,
                         strategy="ddp" if devices > 1 else "auto", max_epochs=1,
                         limit_val_batches=0, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[callback])
    trainer.fit(model, dm)
    return trainer


def masked(devices: int) -> tuple[int, dict]:
    pl.seed_everything(0)
    dm = SynLMDataModule(SyntheticTreebank(n_train=60, n_valid=10, n_test=10),
                         mode="sentence", objective="masked", batch_size=8)
    model = SyntaxLM(Transformer(16, 2, 2, 32, causal=False), vocab_size=dm.vocab_size)
    trainer = one_epoch(model, dm, devices, RecordMasks())
    return trainer.global_rank, {"masks": model.masks}


def budget(devices: int) -> tuple[int, dict]:
    pl.seed_everything(0)
    dm = SynLMDataModule(SyntheticTreebank(n_train=120, n_valid=20, n_test=10),
                         mode="sentence", max_tokens=96)
    model = SyntaxLM(Transformer(16, 2, 2, 32), vocab_size=dm.vocab_size, decoder_bias=False)
    trainer = one_epoch(model, dm, devices, RecordSentences())
    return trainer.global_rank, {"ranks": model.ranks, "sentences": len(dm.sentences("train"))}


def columns(devices: int) -> tuple[int, dict]:
    pl.seed_everything(0)
    corpus = SyntheticTreebank(n_train=120, n_valid=40, n_test=10)
    dm = SynLMDataModule(corpus, batch_size=COLUMNS // devices,
                         eval_batch_size=EVAL_COLUMNS // devices, bptt=8)
    backbone = AWDLSTM(16, 32, 2, dropout_input=0, dropout_hidden=0, dropout_output=0,
                       weight_drop=0)
    model = SyntaxLM(backbone, vocab_size=dm.vocab_size, bptt=8, embedding_dropout=0.0,
                     alpha=2.0, beta=1.0,
                     optimizer={"class_path": "torch.optim.SGD",
                                "init_args": {"lr": 1.0, "weight_decay": 1.2e-6}})
    trainer = pl.Trainer(accelerator="cpu", devices=devices,
                         strategy="ddp" if devices > 1 else "auto", max_steps=2,
                         val_check_interval=2, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[RecordColumns()])
    trainer.fit(model, dm)
    return trainer.global_rank, {
        "columns": model.columns, "val_ppl": float(trainer.callback_metrics["val/ppl"]),
        "weight_sum": float(sum(p.double().sum() for p in model.parameters())),
        "world_size": trainer.world_size}


PROBES = {"columns": columns, "budget": budget, "masked": masked}


def main(out: str, devices: int, probes: list[str]) -> None:
    results, rank = {}, 0
    for name in probes:
        rank, results[name] = PROBES[name](devices)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
