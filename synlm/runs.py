"""Run folders and checkpoints: where a run writes, which checkpoint a path names, and the
config a checkpoint carries.

A run of ``synlm fit --config X.yaml`` lives in ``runs/X/version_N/``::

    runs/X/version_N/
        config.yaml            the resolved config
        metrics.csv            every logged metric (also with wandb or TensorBoard)
        hparams.yaml
        checkpoints/           last.ckpt, the best by val/ppl
        tensorboard/           with --tensorboard true

Each new run takes the next free ``N``; ``--ckpt_path last`` continues the newest run in
its own folder. Wherever a checkpoint is read (``--ckpt_path``, ``model.init_from``,
``synlm parse|generate``), a run folder stands for its newest ``last.ckpt``.
"""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.loggers.tensorboard import (
    _TENSORBOARD_AVAILABLE,
    _TENSORBOARDX_AVAILABLE,
)
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

LAST = "last.ckpt"
CHECKPOINTS = "checkpoints"
#: The checkpoint's key for the resolved config of the run that wrote it (YAML).
CONFIG_KEY = "synlm_config"
_VERSION = re.compile(r"version_(\d+)")


class CheckpointError(ValueError):
    """A checkpoint that is missing or cannot be read, as one line."""


def versions(root: Path) -> list[int]:
    """The ``N`` of each ``root/version_N`` folder, ascending."""
    if not root.is_dir():
        return []
    found = (_VERSION.fullmatch(p.name) for p in root.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def version_dir(root: Path, version: int) -> Path:
    return root / f"version_{version}"


def next_version(root: Path) -> int:
    """The ``N`` a new run under ``root`` takes: one past the highest."""
    return max(versions(root), default=-1) + 1


def latest_last(root: Path) -> tuple[int, Path] | None:
    """The newest run under ``root`` with a ``last.ckpt``: its version and that file."""
    for version in reversed(versions(root)):
        path = version_dir(root, version) / CHECKPOINTS / LAST
        if path.is_file():
            return version, path
    return None


def resolve_checkpoint(path: str | Path, flag: str = "--ckpt_path") -> Path:
    """The checkpoint file ``path`` names: itself, or for a run folder (``runs/X``) its
    newest ``version_N/checkpoints/last.ckpt``, or for one run's folder its
    ``checkpoints/last.ckpt``. A missing one is a ``CheckpointError`` naming ``flag``."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        own = path / CHECKPOINTS / LAST
        if own.is_file():
            return own
        found = latest_last(path)
        if found is not None:
            return found[1]
        raise CheckpointError(f"{flag}: {path} holds no checkpoint (looked for "
                              f"version_*/{CHECKPOINTS}/{LAST}); has its run saved one yet?")
    hint = "; train the first phase or fix the path" if flag == "model.init_from" else ""
    if path.parent.name == CHECKPOINTS and not path.parent.is_dir():
        # the layout before run versions: runs/X/checkpoints/last.ckpt
        hint = f"; runs keep theirs in {path.parent.parent}/version_N/{CHECKPOINTS}/, and "\
               f"the folder {path.parent.parent} stands for its newest {LAST}"
    raise CheckpointError(f"{flag}: no checkpoint at {path}{hint}")


def read_checkpoint(path: str | Path, flag: str = "--ckpt_path") -> dict[str, Any]:
    """The checkpoint ``path`` names (``resolve_checkpoint``), memory-mapped on the CPU (cheap
    to open for its config or to check it); one that cannot be read (truncated, not a
    checkpoint) is a one-line ``CheckpointError``."""
    file = resolve_checkpoint(path, flag)
    if not zipfile.is_zipfile(file):
        raise CheckpointError(f"{flag}: {file} is not a complete checkpoint (torch saves a "
                              "zip archive; this file is cut short or of another kind)")
    try:
        saved = torch.load(file, map_location="cpu", weights_only=False, mmap=True)
    except Exception as err:  # torch raises many kinds for a damaged file
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointError(f"{flag}: {file} cannot be read as a checkpoint (torch.load: "
                              f"{reason}); is it cut short, or not a .ckpt?") from None
    if not isinstance(saved, dict) or "state_dict" not in saved:
        raise CheckpointError(f"{flag}: {file} is not a Lightning checkpoint (no state_dict)")
    return saved


def saved_config(path: str | Path, flag: str = "--ckpt_path") -> str:
    """The resolved config (YAML) that ``synlm fit`` stored in the checkpoint."""
    config = read_checkpoint(path, flag).get(CONFIG_KEY)
    if config is None:
        raise CheckpointError(f"{flag}: {path} carries no config (written by an older synlm "
                              "or outside synlm fit); give the run's --config as well")
    return config


class RunCSVLogger(CSVLogger):
    """Lightning's ``CSVLogger`` writing ``<root>/version_N/metrics.csv`` (the next free ``N``
    unless ``version`` is given). Continuing a run (``resume_step``: the global step of the
    checkpoint it resumes), it keeps the rows logged before that step instead of deleting
    the file (Lightning's behaviour), so the run's curve reads as one; rows a killed run
    logged after its checkpoint are dropped, as the resumed run logs those steps again."""

    def __init__(self, root: str | Path, version: int | None = None,
                 resume_step: int | None = None) -> None:
        super().__init__(save_dir=root, name="", version=version)
        self._resume_step = resume_step

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ContinuedWriter(self.log_dir, self._resume_step)
        return self._experiment


class _ContinuedWriter(ExperimentWriter):
    """An ``ExperimentWriter`` that keeps an existing ``metrics.csv``'s rows before
    ``before_step`` (all of it is deleted when ``before_step`` is None, as Lightning does)."""

    def __init__(self, log_dir: str, before_step: int | None) -> None:
        self._before_step = before_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if self._before_step is None or not path.is_file():
            super()._check_log_dir_exists()
            return
        with path.open(newline="") as file:
            reader = csv.DictReader(file)
            keys = list(reader.fieldnames or [])
            rows = [row for row in reader if int(float(row["step"])) < self._before_step]
        self.metrics_keys = keys
        with path.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)


class _RunTensorBoardLogger(TensorBoardLogger):
    """TensorBoard in ``<csv run folder>/tensorboard``: the CSV logger's version, known
    only once rank 0 has picked it."""

    def __init__(self, csv: RunCSVLogger) -> None:
        super().__init__(save_dir=csv.root_dir, name="", sub_dir="tensorboard",
                         default_hp_metric=False)
        self._csv = csv

    @property
    def version(self) -> int | str:
        return self._csv.version


def run_tensorboard_logger(csv: RunCSVLogger) -> TensorBoardLogger:
    """A TensorBoard logger writing beside ``csv``'s ``metrics.csv``."""
    if not (_TENSORBOARD_AVAILABLE or _TENSORBOARDX_AVAILABLE):
        raise ValueError("--tensorboard needs the tensorboard package: "
                         "pip install 'synlm[tensorboard]'")
    return _RunTensorBoardLogger(csv)
