"""Training speed on the progress bar and in the logs: tokens per second."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import lightning.pytorch as pl

from synlm.errors import InputError


class TokensPerSecond(pl.Callback):
    """``train/tokens_per_s``: the tokens the loss counts (padding left out) per second of
    training, over the last ``window`` steps, on the progress bar and to the loggers at
    their cadence (``log_every_n_steps``).

    Token counts come from the batch as built on the host (``Batch.n_targets``), so
    measuring adds no device synchronisation (a batch built by hand without it is counted
    from its mask); on a GPU the rate is that of the steps
    the host has queued, which over a window of steps matches the device's. Validation
    time is not counted: the window restarts after each validation."""

    def __init__(self, window: int = 20) -> None:
        if window < 1:
            raise InputError(f"TokensPerSecond: window must be >= 1, got {window}")
        self.window = window
        self._marks: deque[tuple[float, int]] = deque(maxlen=window + 1)

    def _restart(self) -> None:
        self._marks.clear()
        self._marks.append((time.perf_counter(), 0))

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restart()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restart()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if not self._marks:
            self._restart()
        counted = batch.n_targets or int(batch.mask.sum())  # a batch built by hand
        tokens = self._marks[-1][1] + counted
        self._marks.append((time.perf_counter(), tokens))
        (start, first), (end, last) = self._marks[0], self._marks[-1]
        if end > start:
            pl_module.log("train/tokens_per_s", (last - first) / (end - start), on_step=True,
                          on_epoch=False, prog_bar=True, batch_size=1)
