"""``synlm plot``: the learning curves of one or several runs, from their ``metrics.csv``.

    synlm plot runs/onlstm_syd runs/awd_lstm/version_2 [--metrics val/ppl val/uf1]
               [--x step|epoch] [--output curves.svg]

A RUN is a ``metrics.csv`` file (Lightning's ``CSVLogger``: a ``step`` and an ``epoch``
column, one column per metric, empty cells where a row did not log it), a run's folder
``runs/<config>/version_N`` or a config's folder ``runs/<config>`` (its newest
``version_N`` with a ``metrics.csv``). One subplot per metric, one line per run, named
``<config>/version_N``. See docs/visualisation.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from synlm.errors import InputError, SynLMError, report
from synlm.runtime.arguments import CommandParser
from synlm.runtime.run_folders import version_dir, versions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METRICS_FILE = "metrics.csv"
#: What ``--output`` may end in (matplotlib picks the format from it).
SUFFIXES = (".png", ".svg", ".pdf")
#: The training loss plotted by default besides the validation metrics.
TRAIN_LOSS = "train/loss_epoch"
#: What is plotted by default, where logged: perplexity (a masked LM's: ``mlm_ppl``), parsing
#: F1, attachment, the loss.
HEADLINES = ("val/ppl", "val/mlm_ppl", "val/uf1", "val/uas", TRAIN_LOSS)


class PlotError(InputError):
    """A run or metric that cannot be plotted, as one line."""


@dataclass(frozen=True)
class Run:
    """One run's metrics: its name, its ``metrics.csv`` and the file's rows (cells as
    written, ``""`` where the row did not log that column)."""

    name: str
    path: Path
    columns: tuple[str, ...]
    rows: tuple[dict[str, str], ...]


def metrics_file(run: str | Path) -> Path:
    """The ``metrics.csv`` that ``run`` names: itself, the one in that folder, or for a
    config's folder the one of its newest training run (``synlm test`` runs, which log only
    ``test/`` values, are passed over unless there is nothing else)."""
    path = Path(run)
    if path.is_file():
        return path
    if (path / METRICS_FILE).is_file():
        return path / METRICS_FILE
    found = [version_dir(path, v) / METRICS_FILE for v in reversed(versions(path))]
    found = [f for f in found if f.is_file()]
    for file in found:
        with file.open(newline="", encoding="utf-8") as lines:
            header = next(csv.reader(lines), [])
        if any(c.startswith(("train/", "val/")) for c in header):
            return file
    if found:
        return found[0]
    if path.is_dir():
        raise PlotError(f"{path} holds no {METRICS_FILE} (looked in it and in its "
                        "version_N folders)")
    raise PlotError(f"no run at {path}: expected a {METRICS_FILE}, a run's version_N folder "
                    "or a config's run folder")


def read_run(run: str | Path) -> Run:
    """The run ``run`` names (``metrics_file``), named ``<config>/version_N`` after the two
    folders above its ``metrics.csv``."""
    path = metrics_file(run)
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        rows = tuple(reader)
        columns = tuple(reader.fieldnames or ())
    if "step" not in columns:
        raise PlotError(f"{path} has no 'step' column: expected a metrics.csv written by "
                        "Lightning's CSVLogger")
    name = "/".join(part for part in (path.parent.parent.name, path.parent.name) if part)
    return Run(name, path, columns, rows)


def default_metrics(runs: Sequence[Run]) -> list[str]:
    """The headline curves any run logged, ``HEADLINES`` in order; without any, every
    ``val/`` column (in the order first seen) and ``train/loss_epoch``."""
    logged = {c for run in runs for c in run.columns}
    headlines = [m for m in HEADLINES if m in logged]
    if set(headlines) - {TRAIN_LOSS}:
        return headlines
    found = [c for run in runs for c in run.columns if c.startswith("val/")]
    return list(dict.fromkeys([*found, *([TRAIN_LOSS] if TRAIN_LOSS in logged else [])]))


def check_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    """A metric that no run logged is a ``PlotError`` naming the metrics there are."""
    present = list(dict.fromkeys(c for run in runs for c in run.columns
                                 if c not in ("step", "epoch")))
    for metric in metrics:
        if not any(metric in run.columns for run in runs):
            raise PlotError(f"--metrics: no run logged {metric!r}; they have: "
                            f"{', '.join(present) or 'no metric'}")


def series(run: Run, metric: str, x: str = "step") -> tuple[list[float], list[float]]:
    """The ``(x, value)`` points of ``metric`` in ``run``: the rows that logged it."""
    if x not in run.columns:
        raise PlotError(f"--x: {run.path} has no {x!r} column")
    xs, ys = [], []
    for line, row in enumerate(run.rows, 2):
        if row.get(metric) and row.get(x):
            try:
                xs.append(float(row[x]))
                ys.append(float(row[metric]))
            except ValueError:
                raise PlotError(f"{run.path}:{line}: expected numbers in {x!r} and "
                                f"{metric!r}, found {row[x]!r} and {row[metric]!r}") from None
    return xs, ys


def figure(runs: Sequence[Run], metrics: Sequence[str], x: str = "step") -> Figure:
    """One subplot per metric (up to three a row), one line per run that logged it, labelled
    with the run's name."""
    from matplotlib.figure import Figure  # a second: once the runs are read

    check_metrics(runs, metrics)
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig = Figure(figsize=(4.5 * cols, 3.2 * rows), layout="constrained")
    for k, metric in enumerate(metrics):
        ax = fig.add_subplot(rows, cols, k + 1)
        for run in runs:
            if metric in run.columns:
                xs, ys = series(run, metric, x)
                ax.plot(xs, ys, marker="." if len(xs) < 30 else None, label=run.name)
        ax.set_title(metric)
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return fig


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser("synlm plot", __doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="a metrics.csv, a run's version_N "
                   "folder or a config's run folder (its newest version)")
    p.add_argument("--metrics", nargs="+", metavar="NAME", help="columns to plot "
                   f"(default: those of {', '.join(HEADLINES)} that were logged)")
    p.add_argument("--x", choices=("step", "epoch"), default="step")
    p.add_argument("--output", help="the picture, .png, .svg or .pdf (default: plot.png beside "
                   "the first run's metrics.csv)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synlm plot`` (``argv`` without the word ``plot``): writes the
    picture and prints one JSON line (output, runs, metrics); errors are one line on
    stderr and exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        runs = [read_run(run) for run in args.runs]
        metrics = args.metrics or default_metrics(runs)
        if not metrics:
            raise PlotError(f"{runs[0].path}: no val/ metric or {TRAIN_LOSS} to plot; name "
                            "columns with --metrics")
        output = Path(args.output) if args.output else runs[0].path.parent / "plot.png"
        if output.suffix.lower() not in SUFFIXES:
            raise PlotError(f"--output {output}: expected a name ending in "
                            f"{', '.join(SUFFIXES)}")
        fig = figure(runs, metrics, args.x)
    except SynLMError as err:  # PlotError, ...
        return report(err, "synlm plot")
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    print(json.dumps({"output": str(output), "runs": [run.name for run in runs],
                      "metrics": list(metrics)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
