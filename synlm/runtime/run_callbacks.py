"""The callbacks that keep a run's folder: ``RunCheckpoint`` (the best checkpoint and a
``last.ckpt`` that resumes exactly) and ``SaveRunConfig`` (the resolved config beside them,
in every checkpoint and in wandb). ``synlm.lightning_cli`` adds them to every run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from weakref import proxy

import lightning.pytorch as pl
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from synlm.runtime import lightning_internals as internals
from synlm.runtime import runs
from synlm.runtime.run_folders import LAST, Which
from synlm.runtime.run_summary import Saved

#: The checkpoint's key for the number of threads torch ran the fit with (``RunCheckpoint``):
#: ``fit --ckpt_path`` goes on with it (``ThreadChoice.resume``).
THREADS_KEY = "synlm_threads"



class RunCheckpoint(ModelCheckpoint):
    """``epoch{epoch:03d}-step{step:06d}.ckpt`` (best by ``val/ppl``, or the model's
    ``monitor``) plus ``last.ckpt``, in
    the run's ``checkpoints`` folder (``runs/<config>/version_N/checkpoints``).

    ``last.ckpt`` is written where Lightning's loops restart from exactly: after a step's
    validation, or at the end of a step before the loops close its epoch (once closed,
    they count an epoch that training left midway as finished, and a resume would start
    the next one):

    * after every validation during fit (Lightning: only when the best improved);
    * at the end of the step after which training stops (``max_steps``, ``max_time``,
      ``trainer.should_stop``, SIGTERM) or its epoch ends, unless a scheduled validation
      follows (then after that). A validation Lightning adds only because training stops
      is not in the checkpoint, as an uninterrupted run has none;
    * on SIGTERM, which Lightning turns into a ``SIGTERMException`` once the step (and its
      validation if one is due) is done, when the above did not already save that step.

    Nothing is written when training ends (Lightning would, after closing the epoch), on
    other exceptions, which can come from the middle of a step, nor between the batches of
    an accumulated step, whose pending gradients no checkpoint holds: ``last.ckpt`` stays
    the last consistent one."""

    def __init__(self) -> None:
        # Lightning saves the best only (save_last=False): last.ckpt is written here, with
        # public API (write_last), at the moments listed above
        super().__init__(filename="epoch{epoch:03d}-step{step:06d}", monitor="val/ppl",
                         mode="min", save_last=False, auto_insert_metric_name=False,
                         enable_version_counter=False, save_on_train_epoch_end=False)
        #: the latest validation, ``{"step": N, "metrics": {...}}``, kept in every checkpoint
        #: (``runs.VALIDATION_KEY``): the run's summary and ``--ckpt_path best`` read it
        self.validation: dict[str, Any] = {}
        #: the global step this fit last wrote ``last.ckpt`` at (0: none yet; as Lightning's
        #: own count of its saves, not restored when a run continues)
        self.last_step_written = 0
        #: the exception that stopped this fit, as Lightning hands it over (``on_exception``)
        self.stopped_by: BaseException | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """The best is the model's own headline when it names one (``monitor``: an RNNG's
        ``val/joint_ppl``), else ``val/ppl``."""
        self.monitor = getattr(pl_module, "monitor", "val/ppl")
        super().setup(trainer, pl_module, stage)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        if self.validation:
            checkpoint[runs.VALIDATION_KEY] = self.validation
        checkpoint[THREADS_KEY] = torch.get_num_threads()  # a resume goes on with it

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        self.validation = dict(checkpoint.get(runs.VALIDATION_KEY, {}))

    def saved(self, which: Which) -> Saved | None:
        """This run's ``best`` or ``last`` checkpoint, with what it holds."""
        path = Path(self.best_model_path if which == "best" else self.last_model_path)
        if not path.name or not path.is_file():
            return None
        checkpoint = runs.read_checkpoint(path)
        return Saved(path, checkpoint["global_step"], runs.validation(checkpoint),
                     checkpoint.get(runs.VALIDATION_KEY, {}).get("step"))

    def write_last(self, trainer: pl.Trainer) -> None:
        """``last.ckpt`` now, unless this step's is written already or no fit is training
        (``fast_dev_run``, another stage, the sanity check), as Lightning decides for its
        own saves; ``last_model_path`` is set first, as the saved state carries it."""
        if (trainer.fast_dev_run or trainer.state.fn != TrainerFn.FITTING
                or trainer.sanity_checking or self.last_step_written == trainer.global_step):
            return
        path = os.path.join(str(self.dirpath), LAST)
        self.last_model_path = path
        trainer.save_checkpoint(path, self.save_weights_only)
        self.last_step_written = trainer.global_step
        if trainer.is_global_zero:  # as Lightning tells its loggers (wandb's log_model)
            for logger in trainer.loggers:
                logger.after_save_checkpoint(proxy(self))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Resuming from the end of an epoch's last batch, Lightning counts that epoch as
        finished but keeps its mid-epoch restart stage, which would skip the next epoch's
        start (``on_train_epoch_start``: the carried state's reset, NT-ASGD's schedule);
        clear the stage so that the epoch starts as in an uninterrupted run."""
        super().on_train_start(trainer, pl_module)
        completed, ready = internals.epochs_completed_and_ready(trainer)
        if internals.restarted_mid_epoch(trainer) and completed == ready:
            internals.reset_restart_stage(trainer)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._last_step_before_stop_or_epoch_end(trainer):
            self.write_last(trainer)

    @staticmethod
    def _last_step_before_stop_or_epoch_end(trainer: pl.Trainer) -> bool:
        """Whether training (may) stop or the epoch ends after this batch, which closes an
        optimiser step and has no scheduled validation after it. Callbacks that stop
        training at a batch's end (``Timer``) run before checkpoint callbacks, so their
        ``should_stop`` is seen here."""
        stops = internals.training_done(trainer) or trainer.should_stop \
            or trainer.received_sigterm
        if not stops or internals.accumulating(trainer):
            return False
        # the schedule alone: Lightning also validates because should_stop is set
        stop, trainer.should_stop = trainer.should_stop, False
        try:
            return not internals.validation_due(trainer)
        finally:
            trainer.should_stop = stop

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:  # before the best is saved: it carries these too
            self.validation = {"step": trainer.global_step, "metrics": {
                name: float(value) for name, value in trainer.callback_metrics.items()
                if name.startswith("val/")}}
        if self.last_step_written == trainer.global_step:
            return  # a validation Lightning adds because training stops: this step is saved
        super().on_validation_end(trainer, pl_module)
        self.write_last(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Nothing: the step training stopped at is saved (Lightning would save here, with
        the epoch closed, which resumes in the next one)."""

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        """SIGTERM: Lightning finished the step (and its validation if one was due) and
        raised ``SIGTERMException``; save that step if it is not saved yet, unless the
        exception came from a validation, after the epoch was closed or between the
        batches of an accumulated step (no consistent state to save: ``last.ckpt`` is
        left as it was). Any exception is kept (``stopped_by``): after Ctrl-C the CLI
        names the command that continues the run."""
        self.stopped_by = exception
        if not isinstance(exception, SIGTERMException):
            return
        if not (trainer.validating or internals.last_batch_of_epoch(trainer)
                or internals.accumulating(trainer)):
            self.write_last(trainer)
        saved = self.last_step_written == trainer.global_step
        rank_zero_info(f"SIGTERM after step {trainer.global_step}: "
                       + ("saved last.ckpt; " if saved else
                          "no consistent state to save here, last.ckpt is left as it was; ")
                       + "continue with --ckpt_path last")


class SaveRunConfig(SaveConfigCallback):
    """Save the resolved config in the run's folder, push it to wandb when wandb logs, and
    keep it in every checkpoint (``synlm test --ckpt_path FILE`` needs no ``--config``)."""

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        checkpoint[runs.CONFIG_KEY] = self.parser.dump(self.config, skip_none=False)

    def save_config(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                    stage: str) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                config = yaml.safe_load(self.parser.dump(self.config, skip_none=False))
                logger.experiment.config.update(config, allow_val_change=True)
