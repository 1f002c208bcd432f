"""What ``synlm fit`` shows on the console: Lightning's rich bar with short metric names, and
the model's size in one line instead of Lightning's summary table."""

from __future__ import annotations

from typing import Any

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
        if "tok/s" in (shown := {SHORT_NAMES.get(k, k): v for k, v in items.items()}):
            shown["tok/s"] = f"{shown['tok/s']:.0f}"
        return shown


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
