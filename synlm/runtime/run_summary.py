"""The lines ``synlm fit|validate|test`` end with: where the run is, its best and last
checkpoints with their validation metrics, the threads torch ran with, where the metrics
went, and what to run next; and the line an interrupted fit ends with, the command that
continues it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from synlm.runtime import run_folders, usage

#: The metrics a summary shows, in this order, when a validation logged them.
SHOWN = ("val/ppl", "val/mlm_ppl", "val/joint_ppl", "val/uf1", "val/uas", "val/loss")
PAST = {"validate": "validated", "test": "tested", "predict": "predicted"}


@dataclass(frozen=True)
class Saved:
    """A checkpoint a run saved: its file, the global step it holds and the metrics of the
    latest validation before it was saved (at ``validated_step``)."""

    path: Path
    step: int
    metrics: Mapping[str, float]
    validated_step: int | None = None


def metrics_text(metrics: Mapping[str, float]) -> str:
    """``val/ppl 9.37, val/uf1 82.1`` (the ``SHOWN`` ones a validation logged)."""
    return ", ".join(f"{name} {metrics[name]:.4g}" for name in SHOWN if name in metrics)


def _checkpoint_line(label: str, saved: Saved | None) -> str:
    if saved is None:
        return f"{label:<9} none saved (no validation ran)" if label == "best" else \
            f"{label:<9} none saved"
    line = f"{label:<9} {saved.path}  (step {saved.step}"
    if saved.metrics:
        when = "" if saved.validated_step in (None, saved.step) else \
            f", validated at step {saved.validated_step}"
        line += f"{when}: {metrics_text(saved.metrics)}"
    return line + ")"


def threads_line(threads: tuple[int, str]) -> str:
    """``threads   2 (why)``: the thread count torch ran with and why
    (``synlm.runtime.threads``)."""
    return f"{'threads':<9} {threads[0]} ({threads[1]})"


def fit_summary(run: Path, best: Saved | None, last: Saved | None,
                finished_before: int | None = None,
                threads: tuple[int, str] | None = None) -> list[str]:
    """What ``synlm fit`` ends with; ``finished_before``: the step of the checkpoint a
    ``--ckpt_path last`` continued, when training added no step to it; ``threads``: the
    thread count the run used and why."""
    lines = []
    if finished_before is not None:
        lines.append(f"nothing to train: the run in {run} had already reached its end at step "
                     f"{finished_before}; raise --trainer.max_epochs or --trainer.max_steps "
                     "to train it further")
    files = [name for name in ("config.yaml", "metrics.csv") if (run / name).is_file()]
    lines.append(f"{'run':<9} {run}" + (f"  ({', '.join(files)})" if files else ""))
    lines += [_checkpoint_line("best", best), _checkpoint_line("last", last)]
    if threads is not None:
        lines.append(threads_line(threads))
    chosen = "best" if best is not None else ("last" if last is not None else None)
    if chosen:
        lines += [f"{'next':<9} synlm test --ckpt_path {run}/{chosen}",
                  f"{'':<9} echo 'a sentence to parse' | synlm parse --ckpt_path "
                  f"{run}/{chosen} --input - --format pretty"]
    return lines


def evaluation_summary(subcommand: str, checkpoint: Saved | None, run: Path,
                       threads: tuple[int, str] | None = None) -> list[str]:
    """What ``synlm validate|test`` ends with: the checkpoint evaluated (which one, and its
    validation metrics when it was saved), the thread count (``threads``, and why) and
    where the metrics went."""
    if checkpoint is None:
        evaluated = "the untrained model (no --ckpt_path)"
    else:
        evaluated = f"{checkpoint.path} (step {checkpoint.step}" + (
            f"; when saved: {metrics_text(checkpoint.metrics)})" if checkpoint.metrics else ")")
    metrics = run / "metrics.csv"
    where = str(metrics) if metrics.is_file() else f"{run} (logger: false writes no metrics.csv)"
    return [f"{PAST[subcommand]:<9} {evaluated}",
            *([threads_line(threads)] if threads is not None else []),
            f"{'metrics':<9} {where}"]


def interrupted_line(args: Sequence[str], run: Path, root: Path, step: int) -> str:
    """What ``synlm ARGS`` (a fit of the run folder ``run`` under ``root``) says when Ctrl-C
    stops it at ``step``: the command that continues the run from its ``last.ckpt``,
    exactly, which Ctrl-C leaves as it was. That is ``ARGS`` with ``--ckpt_path last``
    (continued in its own folder) when ``run`` is the newest under ``root`` with a
    ``last.ckpt``, else with ``--ckpt_path`` naming the file (the same state, in a new
    folder)."""
    last = run_folders.in_run(run, "last", run_folders.any_best)
    if last is None:
        return (f"synlm: interrupted at step {step}, before {run} saved a checkpoint: "
                "nothing to resume; the same command starts the run again")
    newest = run_folders.latest(root, "last", run_folders.any_best)
    own_folder = newest is not None and newest[1] == last
    command = ["synlm", *usage.without_flag(args, "--ckpt_path"),
               "--ckpt_path", "last" if own_folder else str(last)]
    where = "" if own_folder else " in a new run folder"
    return (f"synlm: interrupted at step {step}; {last} holds the run's last saved state; "
            f"continue from it exactly{where}: {shlex.join(command)}")
