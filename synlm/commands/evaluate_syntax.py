"""``synlm evaluate-syntax``: targeted syntactic evaluation of synlm checkpoints and Hugging
Face causal and masked LMs on BLiMP, SyntaxGym and Marvin & Linzen (docs/syntactic-evaluation.md).

    synlm evaluate-syntax --ckpt_path RUN [--benchmark blimp syntaxgym marvin-linzen]
    synlm evaluate-syntax --ckpt_path RUN --subset 20 --output pairs.jsonl   (a quick look)
    synlm evaluate-syntax --ckpt_path RUN_A RUN_B --untrained 3 --report DIR (side by side)
    synlm evaluate-syntax --ckpt_path RUN --hf gpt2 --label ours GPT-2 --report DIR  (any mix)
    synlm evaluate-syntax --results a.json b.json --label A B --report DIR   (saved results)
    synlm evaluate-syntax --hf gpt2 --benchmark syntaxgym --suites my_suite.json
    synlm evaluate-syntax --config awd_lstm.yaml --seeds 3   (untrained models: mean and std)
    synlm evaluate-syntax --ckpt_path RUN --sentences text.txt --surprisals tokens.tsv

Each sentence is scored from a fresh state, its words normalised as the training corpus was
(saved in the checkpoint), under each benchmark's reference convention for the end of the
sentence unless ``--eos``/``--no-eos`` says otherwise. A transition LM (RNNG, PLM, PLM-mask,
TG) is scored by its beam search under its surprisal convention (``--search-convention``;
``synlm.transition.types.CONVENTIONS``), which each benchmark's convention names; ``--eos`` is
refused for one whose end term is 0 by construction, and a pair or item with a sentence the
beam finds no tree for is counted apart (``no_parse``). Any mix of ``--ckpt_path`` and ``--hf``
models is scored in one command, each named by its ``--label`` (``synlm.runtime.labels``) in
command-line order. Prints one JSON object on stdout: the headline numbers (``headline``),
each benchmark's full summary and the conventions used, and what they were computed from
(``provenance``: ``synlm.tse.provenance``, also beside every file written); a table of the
headline, each value beside its count, on stderr. The benchmark files are looked for under
``$SYNLM_DATA_DIR`` (or ``--data-dir``); ``--download`` fetches missing ones.

This module imports only the light parts of synlm at the top, so that ``--help`` and a wrong
flag answer before torch is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synlm.capabilities import Searches
from synlm.errors import InputError, SynLMError, existing_file, model_folder, report
from synlm.runtime import usage
from synlm.runtime.arguments import CommandParser
from synlm.runtime.labels import default_labels, label_problem
from synlm.runtime.run_folders import check_checkpoint
from synlm.runtime.threads import configure_threads
from synlm.tse.benchmarks import (
    BENCHMARKS,
    BenchmarkResult,
    is_suite_file,
    load_benchmarks,
    score_benchmarks,
)
from synlm.tse.scores import ScoredSentence
from synlm.tse.units import GROUP_UNITS, UNIT_LEVELS, UNITS

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


class ModelSources(argparse.Action):
    """``--ckpt_path`` and ``--hf``: their values, and every model of both in command-line
    order as ``(flag, source)`` in ``models`` (either flag given any number of times)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), *values])
        namespace.models = [*namespace.models, *((self.dest, value) for value in values)]


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.set_defaults(models=[])
    p.add_argument("--ckpt_path", nargs="+", action=ModelSources, metavar="RUN",
                   help="synlm checkpoints or run folders (several, and beside --hf models: "
                   "one side-by-side table)")
    p.add_argument("--hf", nargs="+", action=ModelSources, metavar="MODEL",
                   help="Hugging Face causal or masked LMs: local folders written by "
                   "save_pretrained, or hub names where the network allows; each is scored "
                   "with its own tokenizer (a masked LM by pseudo-log-likelihood, --pll)")
    p.add_argument("--results", nargs="+", metavar="JSON", help="tables from finished "
                   "evaluations, scoring nothing: the JSON each printed, its --output records "
                   "beside it (one model, or --config's seeds, a file; the same label for "
                   "several files: seeds of one model)")
    p.add_argument("--label", nargs="+", metavar="NAME", help="a name for each model, in "
                   "command-line order (--ckpt_path and --hf together; --config: one), the "
                   "column of the tables; the same name twice: seeds of one model (default: "
                   "each run folder's or model folder's own name)")
    p.add_argument("--trust-remote-code", action="store_true", help="--hf: run the model code "
                   "a folder carries (a synlm export-hf folder does), as transformers asks")
    p.add_argument("--pll", choices=("within_word_l2r", "original"), default=None,
                   help="--hf on a masked LM (BERT, RoBERTa): the pseudo-log-likelihood, each "
                   "token masked with the rest of its word (within_word_l2r, the default) or "
                   "alone (original)")
    p.add_argument("--config", help="a training config: evaluate the untrained models it "
                   "builds (--seeds of them), the chance row of a results table")
    p.add_argument("--seeds", type=_at_least_one, default=1,
                   help="--config: this many untrained models (seeds 0..N-1)")
    p.add_argument("--untrained", type=int, default=0, metavar="N",
                   help="--ckpt_path: also score N untrained copies of each checkpoint's model "
                   "(its config, fresh weights, seeds 0..N-1): its chance row, per paradigm "
                   "and suite")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="--config: overrides, e.g. model.backbone.init_args.hidden_size=400")
    p.add_argument("--benchmark", nargs="+", type=benchmark_names, default=None,
                   metavar="{blimp,syntaxgym,marvin-linzen,all}",
                   help="which benchmarks (default all: blimp syntaxgym marvin-linzen; none "
                   "when --pairs alone is given)")
    p.add_argument("--suites", nargs="+", metavar="SUITE",
                   help="SyntaxGym: these suites only (default the paper's 34), by name or as "
                   "paths to suite .json files of your own")
    p.add_argument("--pairs", nargs="+", default=[], metavar="FILE",
                   help="your own minimal pairs, BLiMP-style JSON lines (sentence_good, "
                   "sentence_bad; UID, linguistics_term optional), scored as the benchmark "
                   "'pairs'")
    p.add_argument("--subset", type=_at_least_one, metavar="N", help="the first N pairs of each "
                   "BLiMP paradigm and Marvin & Linzen case, items of each SyntaxGym suite")
    p.add_argument("--batch-size", type=_at_least_one, default=64,
                   help="sentences per forward pass")
    beam = p.add_argument_group("transition LMs (RNNG, PLM, PLM-mask, TG): word-synchronous "
                                "beam search or particle filtering; unset: the checkpoint's")
    beam.add_argument("--search", choices=("beam", "particles"), default=None,
                      help="beam search, or particle filtering (Crabbé et al. 2019, "
                      "rnng-pytorch's --particle_filter; docs/models/rnng.md)")
    beam.add_argument("--particles", type=_at_least_one, default=None,
                      help="--search particles: particles a sentence (the released 10000)")
    beam.add_argument("--beam-size", type=_at_least_one, default=None,
                      help="items expanded between two words (the reference's 100)")
    beam.add_argument("--word-beam-size", type=_at_least_one, default=None,
                      help="items kept at each word (10)")
    beam.add_argument("--shift-size", type=int, default=None,
                      help="fast-track shifts from outside the beam (RNNG 1, PLM 5)")
    beam.add_argument("--search-convention", choices=("renormalised_given_length",
                                                      "all_actions"), default=None,
                      help="the surprisals: renormalised over the legal actions given the "
                      "length (the RNNG's released search) or over every action (the "
                      "action Transformers'); unset: each model's released one")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (auto: cuda when "
                   "available)")
    p.add_argument("--data-dir", help="the data folder (default $SYNLM_DATA_DIR)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing benchmark files (checked against their checksums)")
    eos = p.add_mutually_exclusive_group()
    eos.add_argument("--eos", dest="eos", action="store_const", const=True, default=None,
                     help="count the end of the sentence in every benchmark (synlm's "
                     "alternative; default: each benchmark's reference convention)")
    eos.add_argument("--no-eos", dest="eos", action="store_const", const=False,
                     help="count the end of the sentence in no benchmark (SyntaxGym included)")
    p.add_argument("--output", help="write one JSON record per pair or item here (JSONL)")
    p.add_argument("--report", metavar="DIR", help="write the side-by-side tables (Markdown, "
                   "CSV, LaTeX: bootstrap intervals, each model against the first with its "
                   "paired test and Holm's adjustment) and plots here")
    p.add_argument("--units", nargs="+", choices=UNITS, default=None, metavar="UNIT",
                   help="--report: the rows of its unit table, any of " + ", ".join(UNITS) +
                   " (BLiMP phenomena and paradigms, SyntaxGym circuits and suites, Marvin & "
                   "Linzen sections and Table 1 rows; default: " + " ".join(GROUP_UNITS) + ")")
    p.add_argument("--resamples", type=_at_least_one, metavar="R",
                   help="--report: the bootstrap resamples behind its intervals and p-values "
                   "(default 10,000: the least p is 2/R, and Holm's adjustment over m "
                   "comparisons reaches 0.05 only if 2m/R does)")
    p.add_argument("--regions", metavar="FILE", help="write SyntaxGym's region surprisals here "
                   "(one row a region: suite, item, condition, region, sum in bits)")
    p.add_argument("--sentences", metavar="FILE", help="score these sentences (one a line) "
                   "instead of the benchmarks; with --surprisals")
    p.add_argument("--surprisals", metavar="FILE", help="--sentences: write the per-token "
                   "surprisal table there (lm-zoo's get-surprisals format, bits)")
    p.add_argument("--warn-unknown", type=_fraction, default=0.1, metavar="SHARE",
                   help="warn when more than this share of a benchmark's pairs or items has "
                   "an unknown word where it matters")
    return p


def device_of(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class ProgressScorer:
    """A scorer that shows its progress on stderr: a bar on a terminal, else a plain line at
    every tenth of the sentences (a log file shows how far a long run is)."""

    def __init__(self, scorer: Any, label: str = "") -> None:
        from rich.console import Console

        self.scorer, self.label = scorer, label
        self.console = Console(stderr=True)

    def __getattr__(self, name: str) -> Any:  # words, syntaxgym_mapping, covers_end, ...
        return getattr(self.scorer, name)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        if self.console.is_terminal:
            return self._with_bar(sentences)
        total, done, shown, start = len(sentences), 0, 0, time.monotonic()

        def log(n: int) -> None:
            nonlocal done, shown
            done += n
            if done * 10 // max(total, 1) > shown or done == total:
                shown = done * 10 // max(total, 1)
                print(f"{PROG}: {self.label}: {done:,}/{total:,} sentences, "
                      f"{time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

        return self._scored(sentences, log)

    def _with_bar(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("sentences"), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task(self.label, total=len(sentences))
            return self._scored(sentences, lambda n: bar.advance(task, n))

    def _scored(self, sentences: Sequence[Sequence[str]],
                progress: Callable[[int], None]) -> list[ScoredSentence]:
        self.scorer.progress = progress
        try:
            return self.scorer.score(sentences)
        finally:
            self.scorer.progress = None


@dataclass
class Evaluated:
    """One model's results and its untrained copies' (the chance row), under its label
    (``name``); ``source``: what was scored (a checkpoint, run folder or Hugging Face model)."""

    name: str
    results: dict[str, BenchmarkResult]
    untrained: list[dict[str, BenchmarkResult]]
    vocab_size: int
    source: str = ""


def by_label(runs: Sequence[Evaluated]) -> dict[str, list[Evaluated]]:
    """The runs under each label, in command-line order: a label given to several models
    names the seeds of one model."""
    groups: dict[str, list[Evaluated]] = {}
    for run in runs:
        groups.setdefault(run.name, []).append(run)
    return groups


def evaluate_scorer(scorer: Any, loaded: dict[str, list[Any]],
                    eos: bool | None) -> dict[str, BenchmarkResult]:
    """The benchmarks ``load_benchmarks`` read, scored with ``scorer`` under ``eos`` (None:
    each benchmark's reference convention), with progress shown a benchmark; a transition
    LM's results name its surprisal convention (``search_convention``)."""
    shown = ProgressScorer(scorer)
    results = {}
    for name, data in loaded.items():
        shown.label = name
        results.update(score_benchmarks({name: data}, shown, eos))
    convention = getattr(scorer, "convention", None)
    if convention is not None:
        from synlm.transition.types import CONVENTIONS, RENORMALISED

        for result in results.values():
            result.convention["search_convention"] = convention
            result.convention["search_text"] = CONVENTIONS[convention]
            result.convention["search"] = scorer.model.beam.describe()  # beam or particles
            if convention == RENORMALISED:
                result.convention["eos_term"] = "0 by construction: --eos changes nothing"
    pll = getattr(scorer, "pll", None)  # a masked LM: which pseudo-log-likelihood
    if pll is not None:
        from synlm.tse.masked_scoring import VARIANT_TEXT

        for result in results.values():
            result.convention.update(pll=pll, pll_text=VARIANT_TEXT[pll])
    return results


def headline(results: dict[str, BenchmarkResult]) -> dict[str, float | None]:
    return {k: v for result in results.values() for k, v in result.headline.items()}


def conventions(results: dict[str, BenchmarkResult]) -> dict[str, dict[str, Any]]:
    """How each benchmark treated the end of the sentence (``BenchmarkResult.convention``)."""
    return {name: result.convention for name, result in results.items()}


def unknown_warnings(results: dict[str, BenchmarkResult], threshold: float,
                     vocab_size: int) -> list[str]:
    """A line for each benchmark whose unknown-word share passes ``threshold``."""
    return [f"{PROG}: warning: {result.name}: {result.unknown_share:.0%} of the pairs or items "
            f"have a word outside the model's {vocab_size}-word vocabulary where it matters; "
            f"compare the in_vocabulary numbers (docs/syntactic-evaluation.md)"
            for result in results.values()
            if result.unknown_share is not None and result.unknown_share > threshold]


def no_parse_warnings(results: dict[str, BenchmarkResult], name: str) -> list[str]:
    """A line for each benchmark with pairs or items the beam found no tree for."""
    from synlm.tse.minimal_pairs import is_unparsed

    counts = {result.name: sum(map(is_unparsed, result.records))
              for result in results.values()}
    return [f"{PROG}: warning: {name}: {benchmark}: {count} pairs or items have a sentence "
            "with no parse within the beam (even with no stack bound); counted apart "
            "(no_parse), outside the accuracies" for benchmark, count in counts.items() if count]


def write_records(path: str, runs: Sequence[Evaluated]) -> int:
    """Every record of ``runs`` as JSON lines (with ``model``, the label, when there are
    several; and ``source`` when a label names several runs), written whole or not at all;
    how many."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    count = 0
    seeds = len({run.name for run in runs}) < len(runs)
    with partial.open("w", encoding="utf-8") as out:
        for run in runs:
            extra = {"model": run.name} if len(runs) > 1 else {}
            if seeds:
                extra["source"] = run.source
            for result in run.results.values():
                for record in result.records:
                    out.write(json.dumps({**extra, **record}) + "\n")
                    count += 1
    os.replace(partial, target)
    return count


def print_table(models: dict[str, list[dict[str, BenchmarkResult]]]) -> None:
    """The headline of each model (label -> its results, one a seed) side by side on stderr,
    each value beside the number of pairs or items it rests on (several seeds: their mean ±
    their standard deviation); an in-vocabulary row only where it differs from its plain
    row (``synlm.tse.compare.comparison_table``)."""
    from rich.console import Console
    from rich.table import Table

    from synlm.loading import mean_and_std
    from synlm.tse.compare import comparison_table

    numbers = comparison_table(models, intervals=False)
    spread = [mean_and_std([headline(r) for r in runs], digits=4) for runs in models.values()]
    table = Table(title="Targeted syntactic evaluation", title_justify="left")
    table.add_column("benchmark/measure")
    for column in numbers.columns:
        table.add_column(column, justify="right")
    for key, cells in numbers.rows:
        shown = []
        for cell, seeds in zip(cells, spread):
            std = seeds.get(f"{key}_std")
            shown.append("-" if cell.value is None else f"{cell.value:.4f}" + (
                f" ± {std:.4f}" if std is not None else "") + f" (n={cell.n})")
        table.add_row(key, *shown)
    Console(stderr=True).print(table)


def _models_text(args: argparse.Namespace) -> str:
    """How many models each flag gave: ``2 --ckpt_path, 1 --hf``."""
    counts = {flag: sum(f == flag for f, _ in args.models) for flag in ("ckpt_path", "hf")}
    return ", ".join(f"{n} --{flag}" for flag, n in counts.items() if n) or "--config"


def report_problem(args: argparse.Namespace) -> str | None:
    """The one-line error for ``--units`` or ``--resamples`` without ``--report``, or a unit
    of no benchmark asked for."""
    if args.resamples is not None and not args.report:
        return "--resamples: the bootstrap behind --report's tables; add --report DIR"
    if not args.units:
        return None
    if not args.report:
        return "--units: the rows of --report's unit table; add --report DIR"
    asked = [*args.benchmark, *(["pairs"] if args.pairs else [])]
    offered = [u for u in UNITS if any(u in UNIT_LEVELS[b] for b in asked)]
    for unit in args.units:
        if unit not in offered:
            owner = next(b for b, levels in UNIT_LEVELS.items() if unit in levels)
            return (f"--units {unit}: a unit of {owner.replace('_', '-')}, which is not scored "
                    f"here; add it to --benchmark, or choose among {', '.join(offered)}")
    return None


def results_problem(args: argparse.Namespace) -> str | None:
    """The first flag ``--results`` (tables from finished evaluations) cannot honour."""
    if args.models:
        return "--results makes tables from finished evaluations; score --ckpt_path and " \
               "--hf models in their own command with --output, then give its JSON here"
    flag = next((f for f, default in SCORING_FLAGS.items() if getattr(args, f) != default),
                None)
    if flag:
        shown = "eos/--no-eos" if flag == "eos" else flag.replace("_", "-")
        return f"--{shown}: how models are scored; --results scores nothing " \
               "(its files were scored with their own settings)"
    return label_problem(args.label, args.results, f"{len(args.results)} --results") or \
        report_problem(args)


def argument_problem(args: argparse.Namespace) -> str | None:
    """The first inconsistency among the flags, as the message of a one-line error."""
    if args.results:
        return results_problem(args)
    if not args.models and not args.config:
        return "give the models to score: --ckpt_path RUN and --hf MODEL (any mix), or " \
               "--config C"
    if args.models and args.config:
        return "--config scores a config's untrained models alone; give --ckpt_path and " \
               "--hf without it"
    problem = label_problem(args.label, [s for _, s in args.models] or [args.config],
                            _models_text(args)) or report_problem(args)
    if problem:
        return problem
    if args.sentences and len(args.models) > 1:
        return "--sentences: the surprisals of one model; give one --ckpt_path or --hf"
    for flag in ("output", "regions", "surprisals"):
        path = getattr(args, flag)
        if path and not Path(path).parent.resolve().is_dir():
            return f"--{flag}: no folder {Path(path).parent} for {path}"
    if args.suites and "syntaxgym" not in args.benchmark:
        return "--suites selects SyntaxGym suites: add syntaxgym to --benchmark"
    if args.seeds > 1 and not args.config:
        return "--seeds needs --config (untrained models); for checkpoints use --untrained N"
    if args.untrained and not args.ckpt_path:
        return "--untrained needs --ckpt_path (the untrained copies of its models)"
    if args.untrained < 0:
        return f"--untrained: must be at least 0, got {args.untrained}"
    if args.particles is not None and args.search != "particles":
        return "--particles: the particles of particle filtering; add --search particles"
    if args.search == "particles" and given_beam_size(args):
        return f"{given_beam_size(args)}: a beam size; particle filtering takes --particles"
    if args.pll and not args.hf:
        return "--pll: the pseudo-log-likelihood of a masked LM given with --hf"
    if args.hf and not args.ckpt_path and given_beam_flag(args):
        return f"{given_beam_flag(args)}: a Hugging Face model has no beam search; the beam " \
               "flags are for synlm's transition LMs (RNNG, PLM, PLM-mask, TG)"
    if bool(args.sentences) != bool(args.surprisals):
        return "--sentences and --surprisals go together: the sentences to score, the table"
    missing = [p for p in [*args.pairs, *filter(is_suite_file, args.suites or ())]
               if not Path(p).is_file()]
    if missing:
        return f"no file {missing[0]} (--pairs or --suites)"
    return None


def check_inputs(args: argparse.Namespace) -> None:
    """What the flags name that needs no model to check, checked before torch is imported:
    each checkpoint or run folder, each local Hugging Face folder, the config, the
    sentence file."""
    for path in args.ckpt_path or ():
        check_checkpoint(path, folder="best")
    for name in args.hf or ():
        model_folder(name)
    if args.config:
        problem = usage.config_error(usage.resolve_configs(["--config", args.config]))
        if problem:
            raise InputError(problem)
    if args.sentences:
        existing_file("--sentences", args.sentences, "a text file, one sentence a line")


def load_model(path: str) -> Any:
    """The synlm model of a checkpoint or run folder (``synlm.loading.load_model``, imported
    here when a model is read, so that ``--help`` answers before torch loads)."""
    from synlm.loading import load_model as load

    return load(path)


#: The flags of a transition LM's search, by their ``args`` names.
BEAM_SIZES = ("beam_size", "word_beam_size", "shift_size")
BEAM_FLAGS = (*BEAM_SIZES, "search_convention", "search", "particles")
#: The flags that score models, with their defaults: a table from ``--results`` takes none.
SCORING_FLAGS: dict[str, Any] = {
    "config": None, "seeds": 1, "subset": None, "eos": None, "sentences": None,
    "untrained": 0, "pll": None, "suites": None, "pairs": [],
    **dict.fromkeys(BEAM_FLAGS)}


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> str | None:
    return next((f"--{name.replace('_', '-')}" for name in names
                 if getattr(args, name) is not None), None)


def given_beam_flag(args: argparse.Namespace) -> str | None:
    """The first search flag given (``--beam-size``), if any."""
    return _given(args, BEAM_FLAGS)


def given_beam_size(args: argparse.Namespace) -> str | None:
    """The first beam size given (``--beam-size``), if any."""
    return _given(args, BEAM_SIZES)


def with_beam(model: Any, args: argparse.Namespace) -> Any:
    """``model`` searching with the search flags, if it is a transition LM (an RNNG):
    its beam's sizes, or particle filtering (``synlm.transition.particles``)."""
    if isinstance(model, Searches) and args.search == "particles":
        from synlm.transition.particles import use_particles

        use_particles(model, args.particles, args.search_convention)
    elif isinstance(model, Searches):
        model.use_beam(args.beam_size, args.word_beam_size, args.shift_size,
                       args.search_convention)
    return model


def end_is_certain(model: Any, convention: str | None = None) -> bool:
    """Whether ``model``'s end-of-sentence term is 0 by construction: a search that
    renormalises over the legal actions given the length (after the last word only the
    closing actions are legal); ``convention``: the one asked for (None: the model's)."""
    return isinstance(model, Searches) and \
        (convention or model.search_convention) == "renormalised_given_length"


def check_model_flags(args: argparse.Namespace, models: Sequence[tuple[str, Any]]) -> None:
    """One-line errors for what the named models cannot honour: a beam flag when none of
    them searches, ``--eos`` for a single model whose end term is 0 by construction (several
    models: that model's conventions say so instead)."""
    flag = given_beam_flag(args)
    if flag and not any(isinstance(model, Searches) for _, model in models):
        raise InputError(f"{flag}: {models[0][0]} has no beam search; the beam flags are for "
                         "transition LMs (RNNG, PLM, PLM-mask, TG)")
    if args.eos and len(models) == 1 and len(args.models) <= 1 and \
            end_is_certain(models[0][1], args.search_convention):
        raise InputError(f"--eos: the end-of-sentence term of {models[0][0]} is 0 by "
                         "construction (its search renormalises over the legal actions given "
                         "the length: renormalised_given_length); drop --eos, or add "
                         "--search-convention all_actions")


def _scorers(args: argparse.Namespace, build_model: Callable[..., Any] | None
             ) -> list[tuple[str, str, Any, list[Any]]]:
    """(label, source, scorer, untrained scorers) of each model the flags name, in
    command-line order; loaded here, after the arguments are checked (torch is imported
    only now). The untrained copies (``--untrained``) are of each label's first checkpoint."""
    from synlm.loading import untrained_copy, untrained_model
    from synlm.tse.scoring import ModelScorer

    device = device_of(args.device)
    if args.config:
        if build_model is None:
            raise InputError("--config needs the CLI's model builder; run `synlm "
                             "evaluate-syntax`")
        label = (args.label or [f"{Path(args.config).stem} untrained"])[0]
        untrained = [untrained_model(build_model, args.config, seed, args.set)
                     for seed in range(args.seeds)]
        check_model_flags(args, [(args.config, untrained[0])])
        return [(label, f"{args.config} untrained, seeds 0-{args.seeds - 1}", None,
                 [ModelScorer(with_beam(model, args), args.batch_size, device)
                  for model in untrained])]
    labels = args.label or default_labels([source for _, source in args.models])
    scorers = _hf_scorers(args, device)
    loaded = {k: load_model(source) for k, (flag, source) in enumerate(args.models)
              if flag == "ckpt_path"}
    if loaded:
        check_model_flags(args, [(args.models[k][1], model) for k, model in loaded.items()])
    out = []
    for k, ((_, source), label) in enumerate(zip(args.models, labels)):
        chance = []
        if k in loaded:
            model = with_beam(loaded[k], args)
            scorers[k] = ModelScorer(model, args.batch_size, device)
            if label not in labels[:k]:  # a label's seeds share its first one's chance row
                chance = [ModelScorer(with_beam(untrained_copy(model, seed), args),
                                      args.batch_size, device)
                          for seed in range(args.untrained)]
        out.append((label, source, scorers[k], chance))
    return out


def _hf_scorers(args: argparse.Namespace, device: str) -> dict[int, Any]:
    """The scorer of each ``--hf`` model, by its place among all the models: a causal LM's
    log-probabilities, or a masked LM's pseudo-log-likelihood."""
    names = [(k, source) for k, (flag, source) in enumerate(args.models) if flag == "hf"]
    if not names:
        return {}
    from synlm.tse.hf_scoring import HFScorer
    from synlm.tse.masked_scoring import PLLScorer, is_masked_lm

    masked = {name: is_masked_lm(name, args.trust_remote_code) for _, name in names}
    if args.eos and any(masked.values()):
        raise InputError(f"--eos: {next(n for n in masked if masked[n])} is a masked LM, "
                         "scored by pseudo-log-likelihood, which has no end-of-sentence "
                         "term; drop --eos")
    if args.pll and not any(masked.values()):
        raise InputError(f"--pll: {names[0][1]} is a causal LM, scored by its own "
                         "log-probabilities; --pll is for a masked LM (BERT, RoBERTa)")
    return {k: PLLScorer(name, variant=args.pll or "within_word_l2r",
                         batch_size=args.batch_size, device=device,
                         trust_remote_code=args.trust_remote_code) if masked[name]
            else HFScorer(name, batch_size=args.batch_size, device=device,
                          trust_remote_code=args.trust_remote_code)
            for k, name in names}


def _vocab_size(scorer: Any) -> int:
    return getattr(scorer, "vocab_size", None) or len(scorer.vocab)


def score_sentences(scorer: Any, path: str, out: str) -> int:
    """lm-zoo's ``get-surprisals`` table of the sentences in ``path`` (one a line), in bits,
    written to ``out``; how many sentences."""
    from synlm.data.vocab import atomic_write_text
    from synlm.tse.surprisal_tables import token_table

    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--sentences: cannot read {path} ({err})") from None
    numbered = [(number, scorer.words(line)) for number, line in enumerate(lines, 1) if line]
    if not numbered:
        raise InputError(f"--sentences: {path} holds no sentence")
    if getattr(scorer, "convention", None) is not None:
        empty = next((number for number, words in numbered if not words), None)
        if empty is not None:
            raise InputError(f"--sentences: {path}:{empty}: no words (after the corpus's "
                             "normalisation); a transition LM generates at least one")
    sentences = [words for _, words in numbered]
    scored = ProgressScorer(scorer, "sentences").score(sentences)
    unparsed = [number for (number, _), s in zip(numbered, scored) if not s.parsed]
    if unparsed:
        print(f"{PROG}: warning: {path}: lines {', '.join(map(str, unparsed))}: no parse "
              "within the beam; left out of the table", file=sys.stderr)
    atomic_write_text(Path(out), token_table(scored))
    return len(sentences)


def summarize_runs(args: argparse.Namespace, runs: list[Evaluated]) -> dict[str, Any]:
    """The JSON object the command prints: one model's summaries (``model``: what was
    scored, ``label``: its name in the tables), or several side by side under ``models``, by
    label (a label of several runs: the mean and spread of their headlines, ``per_seed``)."""
    from synlm.loading import mean_and_std

    def chance_row(untrained: list[dict[str, BenchmarkResult]]) -> dict[str, Any]:
        return mean_and_std([headline(r) for r in untrained], digits=4)

    summary: dict[str, Any] = {"benchmarks": args.benchmark + (["pairs"] if args.pairs else []),
                               "subset": args.subset, "eos": args.eos}
    if args.config:
        chance = runs[0].untrained
        summary["model"], summary["label"] = runs[0].source, runs[0].name
        per_seed = [headline(r) for r in chance]
        summary["headline"] = mean_and_std(per_seed, digits=4)
        summary["per_seed"] = per_seed
        summary["conventions"] = conventions(chance[0])
        return summary
    first = runs[0]
    summary["conventions"] = conventions(first.results)
    if len(runs) == 1:
        summary["model"], summary["label"] = first.source, first.name
        summary["headline"] = headline(first.results)
        summary.update({name: result.summary for name, result in first.results.items()})
        if first.untrained:
            summary["untrained"] = chance_row(first.untrained)
        return summary
    models: dict[str, Any] = {}
    for label, group in by_label(runs).items():
        entry: dict[str, Any] = {"model": group[0].source, "headline": headline(group[0].results)}
        if len(group) > 1:
            per_seed = [headline(run.results) for run in group]
            entry = {"models": [run.source for run in group],
                     "headline": mean_and_std(per_seed, digits=4), "per_seed": per_seed}
        entry["conventions"] = conventions(group[0].results)
        if group[0].untrained:
            entry["untrained"] = chance_row(group[0].untrained)
        models[label] = entry
    summary["models"] = models
    return summary


def table_models(args: argparse.Namespace, runs: list[Evaluated]
                 ) -> tuple[dict[str, list[dict[str, BenchmarkResult]]],
                            dict[str, list[dict[str, BenchmarkResult]]] | None]:
    """The models of the tables, label -> its results (one a seed: a label's runs, or a
    config's untrained seeds), and each one's untrained baseline where scored."""
    if args.config:
        return {runs[0].name: runs[0].untrained}, None
    groups = by_label(runs)
    models = {label: [run.results for run in group] for label, group in groups.items()}
    baselines = {label: group[0].untrained for label, group in groups.items()
                 if group[0].untrained}
    return models, baselines or None


def write_outputs(args: argparse.Namespace, runs: list[Evaluated],
                  summary: dict[str, Any]) -> None:
    """``--output``, ``--regions`` and ``--report`` (tables and plots), each written whole,
    with the run's provenance beside each (``synlm.tse.provenance``); a config's untrained
    seeds are written as models ``seed 0``, ``seed 1``, ..."""
    from synlm.tse import provenance

    scored = runs if not args.config else [
        Evaluated(f"seed {seed}", r, [], runs[0].vocab_size)
        for seed, r in enumerate(runs[0].untrained)]
    if args.output:
        summary["output"] = args.output
        summary["records"] = write_records(args.output, scored)
    if args.regions:
        from synlm.data.vocab import atomic_write_text
        from synlm.tse.surprisal_tables import region_table

        records = [{"model": run.name, **r} if len(scored) > 1 else r for run in scored
                   if "syntaxgym" in run.results for r in run.results["syntaxgym"].records
                   if "surprisals" in r]  # an item without a parse has none
        atomic_write_text(Path(args.regions), region_table(records))
        summary["regions"] = args.regions
    if args.report:
        summary["report"] = write_report(Path(args.report), *table_models(args, runs),
                                         units=args.units or GROUP_UNITS,
                                         resamples=args.resamples)
        summary["report"]["files"].append(str(provenance.write(
            Path(args.report) / provenance.REPORT_FILE, summary["provenance"])))
    for path in filter(None, (args.output, args.regions)):
        provenance.write_beside(path, summary["provenance"])


def provenance_of(args: argparse.Namespace, argv: Sequence[str] | None,
                  models: Sequence[tuple[str, str, Any, list[Any]]], threads: Any,
                  loaded: dict[str, list[Any]] | None = None,
                  runs: Sequence[Evaluated] = ()) -> dict[str, Any]:
    """What the results were computed from (``synlm.tse.provenance``), as JSON: the
    command, the ``models`` (label, source, scorer, untrained scorers), the benchmark files
    ``loaded`` read and each run's conventions."""
    from synlm.tse import provenance

    files = provenance.benchmark_files(list(loaded or ()), args.data_dir, args.suites,
                                       args.pairs)
    return provenance.collect(
        provenance.command_line(PROG, argv), [(label, scorer, chance)
                                              for label, _, scorer, chance in models],
        threads, files, [conventions(run.results or run.untrained[0]) for run in runs],
        args.config).to_json()


def write_report(folder: Path, models: dict[str, list[dict[str, BenchmarkResult]]],
                 baselines: dict[str, list[dict[str, BenchmarkResult]]] | None = None,
                 units: Sequence[str] = GROUP_UNITS, resamples: int | None = None
                 ) -> dict[str, Any]:
    """The side-by-side tables (headline, and per unit for the ``units`` chosen: bootstrap
    intervals from ``resamples`` resamples (None: ``synlm.tse.statistics.RESAMPLES``),
    two-level over seeds, each model's untrained column, each model against the
    first with its paired test and Holm's adjustment), the plots (SyntaxGym's region figure
    of each suite in ``regions/``), and ``paired``: the headline table's comparisons
    (column -> measure -> the test)."""
    from synlm.tse import compare, plots, statistics, tables

    resamples = resamples or statistics.RESAMPLES
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    headline_table = compare.comparison_table(models, baselines, resamples=resamples)
    written += tables.write_tables(headline_table, folder / "headline")
    written += tables.write_tables(compare.comparison_table(
        models, baselines, level="unit", units=units, resamples=resamples), folder / "unit")
    for benchmark, kind in (("syntaxgym", "circuits"), ("blimp", "phenomena")):
        if all(benchmark in results for runs in models.values() for results in runs):
            written += plots.plot_units(models, benchmark, folder / kind, kind=kind,
                                        baselines=baselines, resamples=resamples)
    written += plots.plot_regions(models, folder / "regions")  # SyntaxGym's, a suite each
    report: dict[str, Any] = {"files": [str(path) for path in written]}
    tested = [k for k, t in enumerate(tables.tested_columns(headline_table)) if t]
    if tested:
        report["paired"] = {headline_table.columns[k]: {
            label: {"difference": cells[k].value, "low": cells[k].low, "high": cells[k].high,
                    "p_value": cells[k].p, "holm": cells[k].holm,
                    "holm_bound": cells[k].holm_bound, "items": cells[k].n,
                    "resamples": headline_table.resamples}
            for label, cells in headline_table.rows if cells[k].p is not None}
            for k in tested}
    return report


def from_results(args: argparse.Namespace, argv: Sequence[str] | None,
                 chosen: Sequence[str] | None) -> tuple[list[Evaluated], dict[str, Any]]:
    """The runs of the ``--results`` files (``synlm.tse.saved``) under their labels (the
    ``--label`` of each file, else the label it was scored under), keeping the ``chosen``
    benchmarks (None: all the files were scored on), and the JSON summary of them."""
    from synlm.tse import provenance, saved

    table = saved.read_all(args.results, chosen)
    labels = args.label or [runs[0].label for runs in table.files]
    args.benchmark = [b for b in table.benchmarks if b != "pairs"]
    args.pairs = ["pairs"] if "pairs" in table.benchmarks else []  # its rows, not a file
    args.subset, args.eos = table.subset, table.eos
    units = report_problem(args)
    if units:
        raise InputError(units)
    runs = [Evaluated(label, run.results, [], 0, run.source)
            for label, file_runs in zip(labels, table.files) for run in file_runs]
    for run in runs:
        for line in no_parse_warnings(run.results, run.name):
            print(line, file=sys.stderr)
    summary = summarize_runs(args, runs)
    summary["results"] = list(args.results)
    summary["provenance"] = provenance.of_saved(provenance.command_line(PROG, argv),
                                               table.files, labels)
    return runs, summary


def surprisals_of_sentences(args: argparse.Namespace, argv: Sequence[str] | None,
                            build_model: Callable[..., Any] | None) -> int:
    """``--sentences``: the one model's surprisals of each sentence, to ``--surprisals`` with
    its provenance beside it; prints what was written (one JSON object)."""
    from synlm.tse.provenance import write_beside

    check_inputs(args)
    threads = configure_threads()
    models = _scorers(args, build_model)
    name, source, scorer, _ = models[0]
    count = score_sentences(scorer, args.sentences, args.surprisals)
    record = provenance_of(args, argv, models, threads)
    write_beside(args.surprisals, record)
    print(json.dumps({"model": source, "label": name, "sentences": count,
                      "surprisals": args.surprisals, "provenance": record}))
    return 0


def from_models(args: argparse.Namespace, argv: Sequence[str] | None,
                build_model: Callable[..., Any] | None
                ) -> tuple[list[Evaluated], dict[str, Any]]:
    """Each model of the command line (with its untrained seeds) scored on the benchmarks,
    its unknown words and sentences without a parse said on stderr, and the JSON summary.
    What needs no model, then the benchmark files, are checked before torch loads."""
    check_inputs(args)
    loaded = load_benchmarks(args.benchmark, args.data_dir, args.subset, args.download,
                             args.suites, args.pairs)
    threads = configure_threads()
    models = _scorers(args, build_model)
    runs = []
    for name, source, scorer, chance in models:
        results = evaluate_scorer(scorer, loaded, args.eos) if scorer is not None else {}
        untrained = [evaluate_scorer(c, loaded, args.eos) for c in chance]
        runs.append(Evaluated(name, results, untrained, _vocab_size(scorer or chance[0]),
                              source))
        warnings = unknown_warnings(results or untrained[0], args.warn_unknown,
                                    runs[-1].vocab_size)
        warnings += no_parse_warnings(results, name) + [
            line for r in untrained for line in no_parse_warnings(r, f"{name} untrained")]
        for line in warnings:
            print(line, file=sys.stderr)
    summary = summarize_runs(args, runs)
    summary["provenance"] = provenance_of(args, argv, models, threads, loaded, runs)
    return runs, summary


def main(argv: list[str] | None = None,
         build_model: Callable[..., Any] | None = None) -> int:
    """Entry point of ``synlm evaluate-syntax``; returns the exit code. ``build_model``
    builds a model from a config (``--config``; ``synlm.cli`` passes its own)."""
    args = build_parser().parse_args(argv)
    chosen = args.benchmark  # --results: the benchmarks to keep of its files'
    if args.benchmark is None:
        args.benchmark = [] if args.pairs else list(BENCHMARKS)
    if "all" in args.benchmark:
        args.benchmark = list(BENCHMARKS)
    args.benchmark = list(dict.fromkeys(args.benchmark))
    problem = argument_problem(args)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    try:
        if args.sentences:
            return surprisals_of_sentences(args, argv, build_model)
        runs, summary = (from_results(args, argv, chosen) if args.results
                         else from_models(args, argv, build_model))
        write_outputs(args, runs, summary)
        print_table(table_models(args, runs)[0])
    except SynLMError as err:
        return report(err, PROG)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
