"""Every private member of Lightning (and of the argument parsers: jsonargparse's under its
CLI, argparse's under synlm's own commands) that synlm uses, one function each, because no
public API answers the same question.

Each function says what it reads or writes, what synlm relies on, and why no public API
would do; ``tests/test_lightning_internals.py`` fails if a member is renamed, changes kind
or signature, or stops behaving as relied on (so a Lightning upgrade beyond the range in
``pyproject.toml`` fails there first, not in the middle of a resumed run). Everything else
synlm does with Lightning goes through public API: ``RunCheckpoint`` writes ``last.ckpt``
with ``Trainer.save_checkpoint``, ``RunCSVLogger`` keeps a continued run's rows through
``CSVLogger.experiment``.

The loop members are read by ``synlm.lightning_cli.RunCheckpoint`` (``last.ckpt`` where the
loops restart from exactly) and ``synlm.callbacks.nt_asgd`` (the step its events are logged
at); the parser members by ``synlm.lightning_cli.SynLMArgumentParser`` (one-line errors)
and ``synlm.runtime.arguments.CommandParser`` (both spellings of an option, the closest option of a
mistyped one).
``trainer.fit_loop`` and ``trainer.fit_loop.epoch_loop`` are public attributes of the
trainer, but their classes (``_FitLoop``, ``_TrainingEpochLoop``) are private: their
public-looking members used here are listed too.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not imported to run: synlm's own commands parse before Lightning loads
    import lightning.pytorch as pl

# --------------------------------------------------------------------- the training loop


def training_done(trainer: pl.Trainer) -> bool:
    """``trainer.fit_loop.epoch_loop._is_training_done`` (read): whether training stops (or
    its epoch ends) after the current batch, by ``max_steps`` or the epoch's last batch.
    The loop's own answer, which decides when it leaves the epoch; the public
    ``trainer.max_steps`` and ``trainer.num_training_batches`` would need the loop's batch
    counting (``limit_train_batches``, iterable datasets) redone."""
    return bool(trainer.fit_loop.epoch_loop._is_training_done)


def last_batch_of_epoch(trainer: pl.Trainer) -> bool:
    """``trainer.fit_loop.epoch_loop._num_ready_batches_reached()`` (called): whether the
    current batch is its epoch's last, as the loop decides it (``num_training_batches`` or
    the fetcher's end of data). No public API; ``batch_progress.is_last_batch`` alone misses
    an epoch cut by ``limit_train_batches``."""
    return bool(trainer.fit_loop.epoch_loop._num_ready_batches_reached())


def accumulating(trainer: pl.Trainer) -> bool:
    """``trainer.fit_loop.epoch_loop._should_accumulate()`` (called): whether the current
    batch only accumulates gradients (no optimiser step after it), so that no checkpoint
    may be written there (the pending gradients are in none). No public API: the answer
    also depends on the strategy (``handles_gradient_accumulation``) and the epoch's
    last batch."""
    return bool(trainer.fit_loop.epoch_loop._should_accumulate())


def data_fetcher(trainer: pl.Trainer) -> Any:
    """``trainer.fit_loop._data_fetcher`` (read): the training data fetcher of the running
    fit, which ``validation_due`` hands to the loop (it tells an iterable dataset's end).
    No public API exposes it."""
    return trainer.fit_loop._data_fetcher


def validation_due(trainer: pl.Trainer) -> bool:
    """``trainer.fit_loop.epoch_loop._should_check_val_fx(data_fetcher)`` (called): whether
    the loop runs a validation after the current batch (``val_check_interval``,
    ``check_val_every_n_epoch``, the epoch's end; also when ``trainer.should_stop`` is set,
    which callers clear around the call to ask for the schedule alone). No public API; the
    schedule has many cases (time intervals, iterable datasets) a copy would drift from."""
    loop = trainer.fit_loop.epoch_loop
    return bool(loop._should_check_val_fx(data_fetcher(trainer)))


def batches_that_stepped(trainer: pl.Trainer) -> int:
    """``trainer.fit_loop.epoch_loop._batches_that_stepped`` (read): the step Lightning's
    logger connector logs values at, the batches that closed an optimiser step before the
    current one (a validation after a step logs one below ``global_step``), so that a
    callback's own ``logger.log_metrics`` lines up with the values ``self.log`` gave. No
    public API; ``trainer.global_step`` is one ahead in a validation."""
    return int(trainer.fit_loop.epoch_loop._batches_that_stepped)


def restarted_mid_epoch(trainer: pl.Trainer) -> bool:
    """``trainer.fit_loop.restarted_mid_epoch`` (read; a public name on the private
    ``_FitLoop``): whether the fit resumed from a checkpoint saved inside an epoch, in
    which case the loop skips that epoch's start hooks (``on_train_epoch_start``)."""
    return bool(trainer.fit_loop.restarted_mid_epoch)


def reset_restart_stage(trainer: pl.Trainer) -> None:
    """``trainer.fit_loop.reset_restart_stage()`` (called; public name, private class):
    forget the restart stage, so that the next epoch starts with its start hooks as in an
    uninterrupted run. ``RunCheckpoint.on_train_start`` calls it when the resumed
    checkpoint was saved after an epoch's last batch (the loop then counts that epoch as
    finished but would still skip the next one's start)."""
    trainer.fit_loop.reset_restart_stage()


def epochs_completed_and_ready(trainer: pl.Trainer) -> tuple[int, int]:
    """``trainer.fit_loop.epoch_progress.current`` (read; public names, private class): the
    epochs completed and started in this fit, equal when the last one is closed."""
    current = trainer.fit_loop.epoch_progress.current
    return int(current.completed), int(current.ready)


# ------------------------------------------------------------- the CLI's argument parser


def subcommand_parser(error: BaseException | None) -> argparse.ArgumentParser | None:
    """``error.subcommand_parser`` (read): the subcommand's parser that jsonargparse attaches
    to an argument error (``fit``'s, whose options a "did you mean" searches). Not in
    jsonargparse's documented API; its own ``ArgumentParser.error`` reads it the same way."""
    return getattr(error, "subcommand_parser", None)


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` (``--trainer.max_epochs``), from argparse's
    ``parser._actions`` (read), which jsonargparse's parser keeps as argparse does: the
    options of its argument groups and mutually exclusive groups too, and every spelling of
    each. argparse has no public list of a parser's actions; ``CommandParser`` reads it for
    the spellings already taken and the closest option to a mistyped one,
    ``SynLMArgumentParser`` for the latter."""
    return [option for action in parser._actions for option in action.option_strings]
