"""What ``synlm fit|validate|test`` checks once the command line is parsed, before anything
is built or written: the trainer's numbers that Lightning would take silently or fail on
deep inside a run (``accumulate_grad_batches=0`` divides by zero at the first step), and
the optimiser's values, by building it once over a stand-in parameter."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import torch

from synlm.errors import SettingError

#: trainer key -> (the least value it takes, what it means); None always passes (unset)
TRAINER_MINIMA: dict[str, tuple[float, str]] = {
    "max_epochs": (-1, "a whole number >= -1 (-1: no limit)"),
    "max_steps": (-1, "a whole number >= -1 (-1: no limit)"),
    "min_epochs": (0, "a whole number >= 0"),
    "min_steps": (0, "a whole number >= 0"),
    "accumulate_grad_batches": (1, "a whole number >= 1"),
    "log_every_n_steps": (1, "a whole number >= 1"),
    "check_val_every_n_epoch": (1, "a whole number >= 1"),
    "num_sanity_val_steps": (-1, "a whole number >= -1 (-1: all batches)"),
    "gradient_clip_val": (0, "a number >= 0"),
    "limit_train_batches": (0, "a number >= 0 (a share of the batches up to 1.0, or a count)"),
    "limit_val_batches": (0, "a number >= 0 (a share of the batches up to 1.0, or a count)"),
    "limit_test_batches": (0, "a number >= 0 (a share of the batches up to 1.0, or a count)"),
}


def check_trainer(trainer: Mapping[str, Any]) -> None:
    """``SettingError`` (named ``trainer.KEY``) for the first value out of range."""
    for key, (least, expected) in TRAINER_MINIMA.items():
        value = trainer.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < least:
            raise SettingError(f"trainer.{key}", value, expected)
    interval = trainer.get("val_check_interval")
    if isinstance(interval, (int, float)) and interval <= 0:
        raise SettingError("trainer.val_check_interval", interval,
                           "a number > 0 (a share of the epoch up to 1.0, or a step count)")


def check_optimizer(class_path: str, init_args: Mapping[str, Any],
                    key: str = "optimizer") -> None:
    """Build the optimiser ``class_path`` with ``init_args`` over one stand-in parameter;
    what it refuses is a ``SettingError`` naming the argument whose value its message
    quotes (``optimizer.lr``), else ``key``."""
    module, _, name = class_path.rpartition(".")
    optimizer_class = getattr(importlib.import_module(module), name)
    try:
        optimizer_class([torch.nn.Parameter(torch.zeros(1))], **init_args)
    except (ValueError, TypeError) as err:
        reason = str(err).strip().splitlines()[0]
        quoted = [k for k, v in init_args.items() if v is not None and str(v) in reason]
        arg = quoted[0] if len(quoted) == 1 else None
        raise SettingError(f"{key}.{arg}" if arg else key,
                           init_args[arg] if arg else dict(init_args),
                           f"a value {name} accepts ({reason})") from None
