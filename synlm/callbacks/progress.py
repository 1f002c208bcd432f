"""What ``synlm fit`` shows on the console: Lightning's rich bar with short metric names, a
plain progress line for a log file (``ProgressLines``), and the model's size in one line
instead of Lightning's summary table."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelSummary, RichProgressBar
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.model_summary import get_human_readable_count

#: What the bar calls a logged value (the logs keep the full names); others keep theirs.
SHORT_NAMES = {
    "train/loss_step": "loss",
    "train/loss_epoch": "epoch loss",
    "train/tokens_per_s": "tok/s",
    "val/ppl": "val ppl",
    "val/mlm_ppl": "val mlm ppl",
    "val/joint_ppl": "val joint ppl",
    "val/uf1": "val uf1",
    "val/uas": "val uas",
}


class SynLMProgressBar(RichProgressBar):
    """``loss``, ``tok/s``, ``val ppl`` and ``val uf1`` (the values logged with
    ``prog_bar=True``, renamed by ``SHORT_NAMES``) without Lightning's ``v_num``, refreshed
    every ``refresh_rate`` steps (each refresh reads the values from the device)."""

    def __init__(self, refresh_rate: int = 10, **kwargs: Any) -> None:
        super().__init__(refresh_rate=refresh_rate, **kwargs)

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule
                    ) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return short_metrics(items)


def short_metrics(items: dict[str, Any]) -> dict[str, Any]:
    """The values by ``SHORT_NAMES`` (others keep their names), tokens/s as a whole number."""
    shown = {SHORT_NAMES.get(k, k): v for k, v in items.items()}
    if "tok/s" in shown:
        shown["tok/s"] = f"{float(shown['tok/s']):.0f}"
    return shown


def _value(value: Any) -> str:
    value = float(value)
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class ProgressLines(pl.Callback):
    """A plain line on stderr at every tenth of a training epoch and after every validation,
    for a run whose output goes to a log file (a bar draws nothing there until it ends)::

        synlm fit: epoch 0, batch 64/64 (100%), step 64, loss 4.411, tok/s 5424, 8 s
        synlm fit: validation at epoch 0, step 64: val ppl 35.71, val uf1 34.79, 9 s

    An epoch of unknown length (an iterable dataset) gets a line every ``every`` batches.
    Only the first process prints."""

    def __init__(self, every: int = 50, file: TextIO | None = None) -> None:
        self.every = every
        self.file = file
        self._start = time.monotonic()

    def _print(self, trainer: pl.Trainer, text: str) -> None:
        if trainer.is_global_zero:
            print(f"synlm fit: {text}, {time.monotonic() - self._start:.0f} s",
                  file=self.file or sys.stderr, flush=True)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.monotonic()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        done, total = batch_idx + 1, trainer.num_training_batches
        if math.isinf(total):
            due, where = done % self.every == 0, f"batch {done}"
        else:
            due = done * 10 // total > batch_idx * 10 // total
            where = f"batch {done}/{total} ({done / total:.0%})"
        if not due:
            return
        shown = short_metrics({k: v for k, v in trainer.progress_bar_metrics.items()
                               if not k.startswith("val/")})
        values = "".join(f", {name} {_value(v) if name != 'tok/s' else v}"
                         for name, v in shown.items())
        self._print(trainer, f"epoch {trainer.current_epoch}, {where}, "
                             f"step {trainer.global_step}{values}")

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        shown = short_metrics({k: v for k, v in trainer.progress_bar_metrics.items()
                               if k.startswith("val/")})
        values = ", ".join(f"{name} {_value(v)}" for name, v in shown.items())
        self._print(trainer, f"validation at epoch {trainer.current_epoch}, step "
                             f"{trainer.global_step}: {values or 'no values logged'}")


class ParameterSummary(ModelSummary):
    """The model's parameters in one line, by top-level module (``parameters: 600 K
    (backbone 595 K, heads 72, embedding 4.5 K, decoder 4.5 K), all trainable``), in place
    of Lightning's table, whose FLOPs column is zeros for a model without an
    ``example_input_array`` (every synlm model: its input is a batch of sentences)."""

    @staticmethod
    def summarize(summary_data: list[tuple[str, list[str]]], total_parameters: int,
                  trainable_parameters: int, model_size: float,
                  total_training_modes: dict[str, int], total_flops: int,
                  **summarize_kwargs: Any) -> None:
        columns = dict(summary_data)
        parts = ", ".join(f"{name} {count.strip()}" for name, count in
                          zip(columns["Name"], columns["Params"]) if count.strip() != "0")
        trainable = ("all trainable" if trainable_parameters == total_parameters else
                     f"{get_human_readable_count(trainable_parameters)} trainable")
        rank_zero_info(f"parameters: {get_human_readable_count(total_parameters)} ({parts}), "
                       f"{trainable}")
