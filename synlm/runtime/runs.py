"""Run folders and checkpoints: where a run writes, which checkpoint a path names, and the
config a checkpoint carries.

A run of ``synlm fit --config X.yaml`` lives in ``runs/X/version_N/``::

    runs/X/version_N/
        config.yaml            the resolved config
        metrics.csv            every logged metric (also with wandb or TensorBoard)
        hparams.yaml
        checkpoints/           last.ckpt, the best by val/ppl
        tensorboard/           with --tensorboard true
        test/<checkpoint>/     metrics.csv of synlm test of one of its checkpoints (validate/,
                               predict/ likewise)

Each new run takes the next free ``N``; ``--ckpt_path last`` continues the newest run in
its own folder. Wherever a checkpoint is read (``--ckpt_path``, ``model.init_from``,
``synlm parse|generate|evaluate-syntax``), a path may name a run's folder: ``runs/X/best``
and ``runs/X/last`` are the newest run's best (by ``val/ppl``) and last checkpoints,
``runs/X/version_N/best`` one run's, and the folder alone stands for its best where a
model is evaluated (its last when no validation saved a best) and its last where training
continues (``fit``, ``model.init_from``).
"""

from __future__ import annotations

import csv
import importlib.util
import math
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.trainer.states import TrainerFn

from synlm.errors import InputError
from synlm.runtime.run_folders import (
    CheckpointError,
    Which,
    best_candidates,
    resolve_checkpoint,
)

#: The checkpoint's key for the resolved config of the run that wrote it (YAML).
CONFIG_KEY = "synlm_config"
#: The checkpoint's key for the latest validation before it was saved: ``{"step": N,
#: "metrics": {"val/ppl": ..., ...}}`` (``RunCheckpoint``), for summaries and ``best``.
VALIDATION_KEY = "synlm_validation"


def best_in_run(run: Path) -> Path | None:
    """One run folder's best checkpoint by ``val/ppl``: among its ``best_candidates``
    (``RunCheckpoint`` keeps one), the lowest ``val/ppl`` they carry (a masked LM's
    ``val/mlm_ppl``)."""
    found = best_candidates(run)
    if len(found) < 2:
        return found[0] if found else None

    def ppl(path: Path) -> float:
        metrics = validation(read_checkpoint(path))
        return metrics.get("val/ppl", metrics.get("val/mlm_ppl", math.inf))

    return min(found, key=ppl)


def validation(checkpoint: dict[str, Any]) -> dict[str, float]:
    """The metrics of the latest validation before ``checkpoint`` was saved (``{}`` for a
    checkpoint written before synlm kept them, or before any validation)."""
    return dict(checkpoint.get(VALIDATION_KEY, {}).get("metrics", {}))


def read_checkpoint(path: str | Path, flag: str = "--ckpt_path",
                    folder: Which = "last") -> dict[str, Any]:
    """The checkpoint ``path`` names (``resolve_checkpoint``), memory-mapped on the CPU (cheap
    to open for its config or to check it); one that cannot be read (truncated, not a
    checkpoint) is a one-line ``CheckpointError``."""
    file = resolve_checkpoint(path, best_in_run, flag, folder)
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


def saved_config(path: str | Path, flag: str = "--ckpt_path", folder: Which = "best") -> str:
    """The resolved config (YAML) that ``synlm fit`` stored in the checkpoint."""
    config = read_checkpoint(path, flag, folder).get(CONFIG_KEY)
    if config is None:
        raise CheckpointError(f"{flag}: {path} carries no config (written by an older synlm "
                              "or outside synlm fit); give the run's --config as well")
    return config


class RunCSVLogger(CSVLogger):
    """Lightning's ``CSVLogger`` writing ``<root>/version_N/metrics.csv`` (the next free ``N``
    unless ``version`` is given; ``<root>/<version>/metrics.csv`` for a name). Continuing a
    run (``resume_step``: the global step of the checkpoint it resumes), it keeps the rows
    logged before that step instead of deleting the file (Lightning's behaviour), so the
    run's curve reads as one; rows a killed run logged after its checkpoint are dropped, as
    the resumed run logs those steps again."""

    def __init__(self, root: str | Path, version: int | str | None = None,
                 resume_step: int | None = None) -> None:
        super().__init__(save_dir=root, name="", version=version)
        self.resume_step = resume_step
        self._kept_rows = resume_step is None  # nothing to keep for a new run

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        """Lightning's writer; made the first time, it has deleted the file, which then
        gets back the rows logged before ``resume_step``."""
        if self._kept_rows:
            return super().experiment
        path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
        keys, rows = _rows_before(path, self.resume_step) if path.is_file() else ([], [])
        with warnings.catch_warnings():  # "...exists and is not empty": it is the run's own
            warnings.filterwarnings("ignore", message=r".*exists and is not empty")
            writer = super().experiment
        self._kept_rows = True
        if keys:
            writer.metrics_keys = keys  # the header the next rows are appended under
            with path.open("w", newline="") as file:
                out = csv.DictWriter(file, fieldnames=keys)
                out.writeheader()
                out.writerows(rows)
        return writer


def _rows_before(path: Path, step: int | None) -> tuple[list[str], list[dict[str, str]]]:
    """The header of the CSV file ``path`` and its rows of a step below ``step``."""
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        keys = list(reader.fieldnames or [])
        rows = [row for row in reader if step is not None and int(float(row["step"])) < step]
    return keys, rows


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


def tensorboard_available() -> bool:
    """Whether a TensorBoard writer (``tensorboard`` or ``tensorboardX``), which Lightning's
    ``TensorBoardLogger`` needs, can be imported."""
    return any(importlib.util.find_spec(name) is not None
               for name in ("tensorboard", "tensorboardX"))


def run_tensorboard_logger(csv: RunCSVLogger) -> TensorBoardLogger:
    """A TensorBoard logger writing beside ``csv``'s ``metrics.csv``."""
    if not tensorboard_available():
        raise InputError("--tensorboard needs the tensorboard package: "
                         "pip install 'synlm[tensorboard]'")
    return _RunTensorBoardLogger(csv)


def torch_rng() -> dict[str, Any]:
    """torch's random states (the CPU's, and every GPU's when there is one), as a checkpoint
    keeps them so that a resumed run draws the same dropout masks."""
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def restore_rng_if_resuming(module: Any, saved: dict[str, Any]) -> None:
    """Put back the RNG states ``torch_rng`` saved in ``saved`` (the GPUs' where there are
    GPUs) when ``module`` is restored by a fit that resumes (so that its dropout masks are
    an uninterrupted run's); loading its weights elsewhere (``load_from_checkpoint``,
    ``synlm test``) leaves the global RNG alone."""
    try:
        fitting = module.trainer.state.fn == TrainerFn.FITTING
    except RuntimeError:  # no trainer attached
        fitting = False
    if not fitting or "rng" not in saved:
        return
    torch.set_rng_state(saved["rng"]["cpu"])
    if "cuda" in saved["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
