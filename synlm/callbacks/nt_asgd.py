"""Non-monotonically triggered ASGD (Merity et al. 2018 §3, Algorithm 1) as a callback."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info

from synlm.errors import InputError
from synlm.runtime import lightning_internals as internals


class NTASGD(Callback):
    """Switch SGD to averaged SGD when validation stops improving, then fine-tune.

    * Switch rule (salesforce/awd-lstm-lm main.py:275-277): after a validation whose
      ``monitor`` value is worse than the best of all but the last ``nonmono`` ones, the
      optimiser becomes ``ASGD(lr, t0=0, lambd=0, weight_decay)`` with the base lr.
    * Once averaging, validation and the checkpoints written at validation run on the
      averaged weights; training resumes on the raw weights at the next batch.
    * Fine-tuning (``finetune_epoch``, ON-LSTM's ``--finetuning``): at the start of that
      epoch a fresh ASGD restarts the averaging (switching first if needed) and the
      history is cleared. With ``stop_when_nonmono`` training then stops at the first
      non-monotone validation (AWD finetune.py:213-216; ON-LSTM's version of this rule
      never fires because it never records the history, which is fixed here).
    * ``switch_epoch`` replaces the switch rule by a fixed epoch: at its start the
      optimiser becomes ASGD (PaLM, Peng et al. 2019 Appendix A: Adam for 40 epochs, then
      ASGD). ``lr`` sets the ASGD learning rate (default: the optimiser's base lr; after
      Adam, the SGD rate the recipe's ASGD runs at).
    * Everything, including raw weights held aside during validation, is saved in the
      checkpoint, so ``--ckpt_path last`` resumes exactly.
    * Each switch, the start of fine-tuning and the stop it triggers are printed and
      logged as ``nt_asgd/averaging``, ``nt_asgd/finetuning`` and ``nt_asgd/stopped``
      (value 1 at that step).
    """

    def __init__(
        self,
        nonmono: int = 5,
        monitor: str = "val/ppl",
        finetune_epoch: int | None = None,
        stop_when_nonmono: bool = True,
        switch_epoch: int | None = None,
        lr: float | None = None,
    ) -> None:
        self.nonmono = nonmono
        self.monitor = monitor
        self.finetune_epoch = finetune_epoch
        self.stop_when_nonmono = stop_when_nonmono
        self.switch_epoch = switch_epoch
        self.lr = lr
        self.averaging = False
        self.finetuning = False
        self.history: list[float] = []
        self._raw: list[torch.Tensor] | None = None

    # ------------------------------------------------------------------ optimiser
    @staticmethod
    def _params(module: pl.LightningModule) -> list[torch.nn.Parameter]:
        return list(module.parameters())

    def _start_asgd(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        old = trainer.optimizers[0]
        if trainer.lr_scheduler_configs:
            raise InputError("NTASGD replaces the optimiser; use it without an lr scheduler")
        group = old.param_groups[0]
        lr = group.get("initial_lr", group["lr"]) if self.lr is None else self.lr
        asgd = torch.optim.ASGD(self._params(module), lr=lr, t0=0, lambd=0.0,
                                weight_decay=group["weight_decay"])
        trainer.strategy.optimizers = [asgd]
        self.averaging = True

    def on_fit_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        # Resuming after the switch: rebuild the ASGD before its state is loaded.
        if self.averaging and not isinstance(trainer.optimizers[0], torch.optim.ASGD):
            self._start_asgd(trainer, module)

    # ------------------------------------------------------------------ averaged weights
    def _swap_in_average(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        optimizer = trainer.optimizers[0]
        params = self._params(module)
        if self._raw is not None or not all("ax" in optimizer.state[p] for p in params):
            return
        self._raw = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p in params:
                p.copy_(optimizer.state[p]["ax"])

    def _swap_back(self, module: pl.LightningModule) -> None:
        if self._raw is None:
            return
        with torch.no_grad():
            for p, raw in zip(self._params(module), self._raw):
                p.copy_(raw)
        self._raw = None

    def on_validation_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if self.averaging and trainer.state.fn == "fit":
            self._swap_in_average(trainer, module)

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        self._swap_back(module)

    def on_train_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._swap_back(module)

    # ------------------------------------------------------------------ schedule
    def on_train_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.current_epoch == self.switch_epoch and not self.averaging:
            self._start_asgd(trainer, module)
            _event(trainer, "averaging", f"switch_epoch {self.switch_epoch}: averaged SGD "
                   f"from now on (lr {trainer.optimizers[0].param_groups[0]['lr']:g})")
        if self.finetune_epoch is not None and trainer.current_epoch == self.finetune_epoch \
                and not self.finetuning:
            self._start_asgd(trainer, module)
            self.finetuning = True
            self.history = []
            _event(trainer, "finetuning", f"finetune_epoch {self.finetune_epoch}: fine-tuning "
                   "with a fresh averaged SGD")

    def on_validation_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            raise InputError(f"NTASGD monitors {self.monitor!r}, which was not logged")
        value = float(value)
        nonmono = len(self.history) > self.nonmono and value > min(self.history[:-self.nonmono])
        worse = (f"{self.monitor} {value:.4g} is worse than the best before the last "
                 f"{self.nonmono} validations")
        if nonmono and not self.averaging and self.switch_epoch is None:
            self._start_asgd(trainer, module)
            _event(trainer, "averaging", f"{worse}: averaged SGD from now on")
        elif nonmono and self.finetuning and self.stop_when_nonmono:
            trainer.should_stop = True
            _event(trainer, "stopped", f"{worse} while fine-tuning: training stops")
        self.history.append(value)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {"averaging": self.averaging, "finetuning": self.finetuning,
                "history": list(self.history), "raw": self._raw}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.averaging = state["averaging"]
        self.finetuning = state["finetuning"]
        self.history = list(state["history"])
        self._raw = state["raw"]


def _event(trainer: pl.Trainer, name: str, what: str) -> None:
    """An NT-ASGD event: one line on the console and ``nt_asgd/<name> = 1`` in every
    logger (a mark on the learning curves: metrics.csv, wandb, TensorBoard), at the step
    Lightning logs this moment's values at (a validation's are one below ``global_step``)."""
    rank_zero_info(f"NT-ASGD, epoch {trainer.current_epoch}, step {trainer.global_step}: {what}")
    step = internals.batches_that_stepped(trainer)
    for logger in trainer.loggers:
        logger.log_metrics({f"nt_asgd/{name}": 1.0}, step=step)
