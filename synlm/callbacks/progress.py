"""The progress bar of ``synlm fit``: Lightning's rich bar with short metric names."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import RichProgressBar

#: What the bar calls a logged value (the logs keep the full names); others keep theirs.
SHORT_NAMES = {
    "train/loss_step": "loss",
    "train/loss_epoch": "epoch loss",
    "train/tokens_per_s": "tok/s",
    "val/ppl": "val ppl",
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
