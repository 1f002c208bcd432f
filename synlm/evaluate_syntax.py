"""``synlm evaluate-syntax``: targeted syntactic evaluation of a checkpoint on BLiMP,
SyntaxGym and Marvin & Linzen (docs/syntactic-evaluation.md).

    synlm evaluate-syntax --ckpt_path RUN [--benchmark blimp syntaxgym marvin_linzen]
    synlm evaluate-syntax --ckpt_path RUN --subset 20 --output pairs.jsonl   (a quick look)
    synlm evaluate-syntax --ckpt_path RUN --benchmark syntaxgym --suites npi_orc_any
    synlm evaluate-syntax --config awd_lstm.yaml --seeds 3   (untrained models: mean and std)

Each sentence is scored from a fresh state after ``<eos>``, its words normalised as the
training corpus was (saved in the checkpoint). Prints one JSON object on stdout: the headline
numbers (``headline``) and each benchmark's full summary; a table of the headline on stderr.
``--output`` writes one JSON record per pair or item. The benchmark files are looked for under
``$SYNLM_DATA_DIR`` (or ``--data-dir``); ``--download`` fetches missing ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from synlm.arguments import CommandParser
from synlm.errors import InputError, SynLMError, report
from synlm.parse import load_model, mean_and_std, untrained_model
from synlm.tse.benchmarks import BENCHMARKS, BenchmarkResult, load_benchmarks, score_benchmarks
from synlm.tse.scores import ScoredSentence
from synlm.tse.scoring import ModelScorer

PROG = "synlm evaluate-syntax"


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def benchmark_names(text: str) -> str:
    """A ``--benchmark`` value: ``all``, or a benchmark, ``marvin-linzen`` or ``marvin_linzen``."""
    name = text.replace("-", "_")
    if name != "all" and name not in BENCHMARKS:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {text!r}; expected blimp, syntaxgym, marvin-linzen or all")
    return name


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt_path", help="a SyntaxLM checkpoint or run folder")
    src.add_argument("--config", help="a training config: evaluate the untrained models it "
                     "builds (--seeds of them), the chance row of a results table")
    p.add_argument("--seeds", type=_at_least_one, default=1,
                   help="--config: this many untrained models (seeds 0..N-1)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="--config: overrides, e.g. model.backbone.init_args.hidden_size=400")
    p.add_argument("--benchmark", nargs="+", type=benchmark_names, default=list(BENCHMARKS),
                   metavar="{blimp,syntaxgym,marvin-linzen,all}",
                   help="which benchmarks (default all: blimp syntaxgym marvin-linzen)")
    p.add_argument("--suites", nargs="+", metavar="SUITE",
                   help="SyntaxGym: these suites only (default the paper's 34)")
    p.add_argument("--subset", type=_at_least_one, metavar="N", help="the first N pairs of each "
                   "BLiMP paradigm and Marvin & Linzen case, items of each SyntaxGym suite")
    p.add_argument("--batch-size", type=_at_least_one, default=64,
                   help="sentences per forward pass")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (auto: cuda when "
                   "available)")
    p.add_argument("--data-dir", help="the data folder (default $SYNLM_DATA_DIR)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing benchmark files (checked against their checksums)")
    p.add_argument("--no-eos", action="store_true", help="BLiMP, Marvin & Linzen: leave the end "
                   "of the sentence out of its log-probability")
    p.add_argument("--output", help="write one JSON record per pair or item here (JSONL)")
    p.add_argument("--warn-unknown", type=_fraction, default=0.1, metavar="SHARE",
                   help="warn when more than this share of a benchmark's pairs or items has "
                   "an unknown word where it matters")
    return p


def device_of(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class ProgressScorer:
    """A ``ModelScorer`` that shows a progress bar of its sentences (on stderr)."""

    def __init__(self, scorer: ModelScorer, progress: Progress) -> None:
        self.scorer, self.bar, self.label = scorer, progress, ""

    def words(self, text: str) -> list[str]:
        return self.scorer.words(text)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        task = self.bar.add_task(self.label, total=len(sentences))
        self.scorer.progress = lambda n: self.bar.advance(task, n)
        try:
            return self.scorer.score(sentences)
        finally:
            self.scorer.progress = None


def evaluate_model(model: Any, loaded: dict[str, list[Any]],
                   args: argparse.Namespace) -> dict[str, BenchmarkResult]:
    """The benchmarks ``load_benchmarks`` read, scored with ``model`` as ``args`` say, with a
    progress bar a benchmark."""
    scorer = ModelScorer(model, args.batch_size, device_of(args.device))
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("sentences"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        shown = ProgressScorer(scorer, bar)
        results = {}
        for name, data in loaded.items():
            shown.label = name
            results.update(score_benchmarks({name: data}, shown, eos=not args.no_eos))
    return results


def headline(results: dict[str, BenchmarkResult]) -> dict[str, float | None]:
    return {k: v for result in results.values() for k, v in result.headline.items()}


def unknown_warnings(results: dict[str, BenchmarkResult], threshold: float,
                     vocab_size: int) -> list[str]:
    """A line for each benchmark whose unknown-word share passes ``threshold``."""
    return [f"{PROG}: warning: {result.name}: {result.unknown_share:.0%} of the pairs or items "
            f"have a word outside the model's {vocab_size}-word vocabulary where it matters; "
            f"compare the in_vocabulary numbers (docs/syntactic-evaluation.md)"
            for result in results.values()
            if result.unknown_share is not None and result.unknown_share > threshold]


def write_records(path: str, results: Sequence[dict[str, BenchmarkResult]]) -> int:
    """Every record of ``results`` as JSON lines, written whole or not at all; how many."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    count = 0
    with partial.open("w", encoding="utf-8") as out:
        for seed, by_name in enumerate(results):
            for result in by_name.values():
                for record in result.records:
                    extra = {"seed": seed} if len(results) > 1 else {}
                    out.write(json.dumps({**extra, **record}) + "\n")
                    count += 1
    os.replace(partial, target)
    return count


def print_table(title: str, numbers: dict[str, Any]) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("benchmark/measure")
    table.add_column("value", justify="right")
    for key, value in numbers.items():
        if not key.endswith("_std") and key != "n_models":
            std = numbers.get(f"{key}_std")
            shown = "-" if value is None else f"{value:.4f}"
            table.add_row(key, shown + (f" ± {std:.4f}" if std is not None else ""))
    Console(stderr=True).print(table)


def output_problem(args: argparse.Namespace) -> str | None:
    if args.output and not Path(args.output).parent.resolve().is_dir():
        return f"--output: no folder {Path(args.output).parent} for {args.output}"
    if args.suites and "syntaxgym" not in args.benchmark:
        return "--suites selects SyntaxGym suites: add syntaxgym to --benchmark"
    if args.seeds > 1 and not args.config:
        return "--seeds needs --config (untrained models)"
    return None


def main(argv: list[str] | None = None,
         build_model: Callable[..., Any] | None = None) -> int:
    """Entry point of ``synlm evaluate-syntax``; returns the exit code. ``build_model``
    builds a model from a config (``--config``; ``synlm.cli`` passes its own)."""
    args = build_parser().parse_args(argv)
    if "all" in args.benchmark:
        args.benchmark = list(BENCHMARKS)
    args.benchmark = list(dict.fromkeys(args.benchmark))
    problem = output_problem(args)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    try:
        checkpoint = load_model(args.ckpt_path) if args.ckpt_path else None
        loaded = load_benchmarks(args.benchmark, args.data_dir, args.subset, args.download,
                                 args.suites)
        if checkpoint is not None:
            models: Iterable[Any] = [checkpoint]
        elif build_model is None:
            raise InputError("--config needs the CLI's model builder; run `synlm "
                             "evaluate-syntax`")
        else:
            models = (untrained_model(build_model, args.config, seed, args.set)
                      for seed in range(args.seeds))
        runs = []
        for model in models:
            runs.append(evaluate_model(model, loaded, args))
            for line in unknown_warnings(runs[-1], args.warn_unknown, len(model.vocab)):
                print(line, file=sys.stderr)
    except SynLMError as err:
        return report(err, PROG)
    summary: dict[str, Any] = {"model": args.ckpt_path, "benchmarks": args.benchmark,
                               "subset": args.subset, "eos": not args.no_eos}
    if args.config:
        summary["model"] = f"{args.config} untrained, seeds 0-{args.seeds - 1}"
        summary["headline"] = mean_and_std([headline(r) for r in runs], digits=4)
        summary["per_seed"] = [headline(r) for r in runs]
    else:
        summary["headline"] = headline(runs[0])
        summary.update({name: result.summary for name, result in runs[0].items()})
    if args.output:
        summary["output"] = args.output
        summary["records"] = write_records(args.output, runs)
    print_table(summary["model"], summary["headline"])
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
