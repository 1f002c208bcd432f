"""Run folders and the checkpoints in them, by their paths alone: which checkpoint file a
path names (``resolve_checkpoint``, the layout in ``synlm.runtime.runs``), and whether it
names one at all (``check_checkpoint``), answered before torch is imported.

Only ``best`` among several checkpoints of one run reads them (their ``val/ppl``), and
imports torch to do so."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from synlm.errors import InputError

LAST = "last.ckpt"
CHECKPOINTS = "checkpoints"
#: What a run folder stands for: its best checkpoint by ``val/ppl``, or its last.
Which = Literal["best", "last"]
WHICH: tuple[Which, ...] = ("best", "last")
_VERSION = re.compile(r"version_(\d+)")


class CheckpointError(InputError):
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


def best_candidates(run: Path) -> list[Path]:
    """One run folder's checkpoints that may be its best: those in ``checkpoints/`` other
    than ``last.ckpt``."""
    return sorted(p for p in (run / CHECKPOINTS).glob("*.ckpt") if p.name != LAST)


def any_best(run: Path) -> Path | None:
    """A checkpoint one run folder's best may be, without reading any: how a check that
    only needs to know whether a run has a best chooses it."""
    return next(iter(best_candidates(run)), None)


#: How one run folder's best checkpoint is chosen: ``synlm.runtime.runs.best_in_run`` reads
#: them (torch), ``any_best`` only looks.
BestOf = Callable[[Path], "Path | None"]


def in_run(run: Path, which: Which, best: BestOf) -> Path | None:
    """One run folder's ``best`` or ``last`` checkpoint, if it saved one."""
    if which == "best":
        return best(run)
    last = run / CHECKPOINTS / LAST
    return last if last.is_file() else None


def latest(root: Path, which: Which, best: BestOf) -> tuple[int, Path] | None:
    """The newest run under ``root`` with a ``which`` checkpoint: its version and that file."""
    for version in reversed(versions(root)):
        path = in_run(version_dir(root, version), which, best)
        if path is not None:
            return version, path
    return None


def resolve_checkpoint(path: str | Path, best: BestOf, flag: str = "--ckpt_path",
                       folder: Which = "last") -> Path:
    """The checkpoint file ``path`` names: itself; ``FOLDER/best`` or ``FOLDER/last`` (one
    run's folder, or ``runs/X`` for its newest run that has one); a folder alone stands for
    its ``folder`` checkpoint. A missing one is a ``CheckpointError`` naming ``flag``.
    ``best``: how one run's best is chosen."""
    path = Path(path)
    if path.is_file():
        return path
    which: Which = folder
    named = not path.is_dir() and path.name in WHICH and path.parent.is_dir()
    if named:
        which, path = path.name, path.parent  # type: ignore[assignment]
    if path.is_dir():
        # a folder alone, for a best: its last when no validation saved one
        for kind in (which,) if named or which == "last" else (which, "last"):
            found = in_run(path, kind, best) or (latest(path, kind, best) or (None, None))[1]
            if found is not None:
                return found
        looked = {"best": f"{CHECKPOINTS}/epoch*.ckpt (a validation saves one)",
                  "last": f"{CHECKPOINTS}/{LAST}"}[which] if named else f"{CHECKPOINTS}/*.ckpt"
        raise CheckpointError(f"{flag}: {path} holds no {which + ' ' if named else ''}"
                              f"checkpoint (looked for {looked} in it and its version_*); has "
                              "its run saved one yet?")
    hint = "; train the first phase or fix the path" if flag == "model.init_from" else ""
    if path.parent.name == CHECKPOINTS and not path.parent.is_dir():
        # the layout before run versions: runs/X/checkpoints/last.ckpt
        run = path.parent.parent
        hint = f"; runs keep theirs in {run}/version_N/{CHECKPOINTS}/, and {run}/best, " \
               f"{run}/last name the newest run's"
    raise CheckpointError(f"{flag}: no checkpoint at {path}{hint}")


def evaluation_folder(checkpoint: Path, subcommand: str) -> tuple[Path, str] | None:
    """Where ``synlm validate|test|predict`` of ``checkpoint`` logs, when it is one of a run
    folder's checkpoints: ``(RUN/<subcommand>, <checkpoint's stem>)``, a folder of the run it
    evaluates (``runs/X/version_0/test/epoch003-step001234/metrics.csv``) that the next
    evaluation of the same checkpoint replaces; ``None`` for a checkpoint elsewhere."""
    if checkpoint.parent.name != CHECKPOINTS:
        return None
    return checkpoint.parent.parent / subcommand, checkpoint.stem


def run_name(configs: Sequence[str]) -> str:
    """``runs/<name>``: the stems of the configs given on the command line joined by ``+``
    (the bases they name with ``config:`` do not count), the data and trainer partials left
    out (``onlstm_syd_layer1`` for an ablation, ``quickstart`` with ``--config
    trainer/debug.yaml``)."""
    stems = [Path(str(c)).stem for c in configs
             if Path(str(c)).parent.name not in ("data", "trainer")]
    return "+".join(stems) or "default"


def best_to_fit(root: Path) -> CheckpointError:
    """``fit --ckpt_path best``: a fit continues from a run's last checkpoint."""
    return CheckpointError(
        "--ckpt_path best: fit continues a run where it stopped (--ckpt_path last); "
        f"to start a new run from the best weights: --model.init_from {root}/best")


def none_under(root: Path, which: str) -> CheckpointError:
    """``validate|test|predict --ckpt_path best|last`` where no run under ``root`` saved one."""
    return CheckpointError(f"--ckpt_path {which}: no run under {root} saved a {which} "
                           "checkpoint (version_*/checkpoints/)")


def check_run_checkpoint(root: Path, which: Which, fit: bool) -> None:
    """``--ckpt_path best|last`` among the runs under ``root``: ``best_to_fit``, or
    ``none_under`` outside ``fit`` (a fit with no ``last`` starts a new run), found without
    reading a checkpoint (nor importing torch)."""
    if fit and which == "best":
        raise best_to_fit(root)
    if not fit and latest(root, which, best=any_best) is None:
        raise none_under(root, which)


def unnamed_run(which: str) -> CheckpointError:
    """``validate|test|predict --ckpt_path best|last`` with no ``--config``: ``best`` and
    ``last`` are looked for among the runs under the config's
    ``trainer.default_root_dir`` (``runs/<config>``), and the checkpoint's own config is read
    only from a checkpoint or run folder that is named."""
    return CheckpointError(
        f"--ckpt_path {which}: which run's? name its folder (--ckpt_path runs/NAME/{which}, "
        f"runs/NAME/version_N/{which}) or give the run's --config (its "
        f"trainer.default_root_dir holds the runs)")


def check_checkpoint(path: str | Path, flag: str = "--ckpt_path",
                     folder: Which = "last") -> None:
    """``resolve_checkpoint``'s ``CheckpointError`` where ``path`` names no checkpoint,
    found without reading one (nor importing torch)."""
    resolve_checkpoint(path, any_best, flag, folder)
