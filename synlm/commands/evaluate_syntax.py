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

The command checks its flags, a refusal one line, then calls ``synlm.tse``: ``scorers``
(each model's scorer), ``evaluation`` (the benchmarks scored, warnings and the summary),
``reports`` (the files asked for, the headline table). Prints one JSON object on stdout: the
headline numbers (``headline``), each benchmark's full summary and the conventions used, and
what they were computed from (``provenance``: ``synlm.tse.provenance``, also beside every
file written); the headline table, each value beside its count, on stderr. The benchmark
files are looked for under ``$SYNLM_DATA_DIR`` (or ``--data-dir``); ``--download`` fetches
missing ones.

This module imports only the light parts of synlm at the top, so that ``--help`` and a wrong
flag answer before torch is imported.

One module because it is the command's flags (their help text, a third of it, prints as
``--help`` shows it) and their checks; what it calls lives in ``synlm.tse`` (``scorers``,
``evaluation``, ``reports``, ``progress``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synlm.capabilities import Searches
from synlm.errors import InputError, SynLMError, existing_file, model_folder, report
from synlm.runtime import usage
from synlm.runtime.arguments import CommandParser, add_memory_budget
from synlm.runtime.labels import label_problem
from synlm.runtime.run_folders import check_checkpoint
from synlm.runtime.threads import configure_threads
from synlm.tse.benchmarks import BENCHMARKS, is_suite_file, load_benchmarks
from synlm.tse.units import GROUP_UNITS, UNIT_LEVELS, UNITS

if TYPE_CHECKING:
    from synlm.tse.evaluation import Evaluated
    from synlm.tse.scorers import ModelScorers

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
                   "several files: seeds of one model, or the parts of one run that "
                   "--paradigms or --suites split, joined)")
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
    p.add_argument("--paradigms", nargs="+", metavar="UID",
                   help="BLiMP: these paradigms only (default all 67), by UID, e.g. "
                   "adjunct_island: one phenomenon, or a long run split into parts")
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
    add_memory_budget(beam)
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
    p.add_argument("--tokenise", choices=("whitespace", "treebank"), default=None,
                   help="--sentences: how a line becomes words: whitespace (the default: "
                   "pre-tokenised text, its tokens kept as they are, as rnng-pytorch and "
                   "lm-zoo read it) or treebank (raw text, read as the benchmarks' sentences "
                   "are: NLTK's Treebank tokenizer and the corpus's normalisation; a Hugging "
                   "Face model's own tokenizer)")
    p.add_argument("--warn-unknown", type=_fraction, default=0.1, metavar="SHARE",
                   help="warn when more than this share of a benchmark's pairs or items has "
                   "an unknown word where it matters")
    p.add_argument("--journal", metavar="DIR", help="keep each model's scores in DIR as they "
                   "come, a chunk of sentences at a time, and read them back when run again "
                   "with the same DIR: a long run stopped part way goes on where it stopped, "
                   "with the same numbers (refused for another model or search)")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="show no progress on stderr (by default: a bar with the time left on "
                   "a terminal, else a line at every tenth of a benchmark's sentences with "
                   "the time so far and about how long is left)")
    return p


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
    if args.paradigms and "blimp" not in args.benchmark:
        return "--paradigms selects BLiMP paradigms: add blimp to --benchmark"
    if args.seeds > 1 and not args.config:
        return "--seeds needs --config (untrained models); for checkpoints use --untrained N"
    if args.untrained and not args.ckpt_path:
        return "--untrained needs --ckpt_path (the untrained copies of its models)"
    if args.untrained < 0:
        return f"--untrained: must be at least 0, got {args.untrained}"
    if args.particles is not None and args.search != "particles":
        return "--particles: the particles of particle filtering; add --search particles"
    if args.search == "particles" and given(args, BEAM_SIZES):
        return f"{given(args, BEAM_SIZES)}: a beam size; particle filtering takes --particles"
    if args.pll and not (args.hf or args.ckpt_path):
        return ("--pll: the pseudo-log-likelihood of a masked LM given with --hf or "
                "--ckpt_path")
    if args.hf and not args.ckpt_path and given(args, BEAM_FLAGS):
        return f"{given(args, BEAM_FLAGS)}: a Hugging Face model has no beam search; the beam " \
               "flags are for synlm's transition LMs (RNNG, PLM, PLM-mask, TG)"
    if bool(args.sentences) != bool(args.surprisals):
        return "--sentences and --surprisals go together: the sentences to score, the table"
    if args.tokenise and not args.sentences:
        return "--tokenise: how --sentences lines become words; add --sentences FILE"
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
        if args.journal:
            raise InputError("--journal keeps the benchmarks' scores; --sentences writes its "
                             "table in one pass: leave one out")


#: The flags of a transition LM's search, by their ``args`` names.
BEAM_SIZES = ("beam_size", "word_beam_size", "shift_size")
BEAM_FLAGS = (*BEAM_SIZES, "search_convention", "search", "particles", "max_memory_mb")
#: The flags that score models, with their defaults: a table from ``--results`` takes none.
SCORING_FLAGS: dict[str, Any] = {
    "config": None, "seeds": 1, "subset": None, "eos": None, "sentences": None,
    "tokenise": None,
    "untrained": 0, "pll": None, "suites": None, "paradigms": None, "pairs": [], "journal": None,
    **dict.fromkeys(BEAM_FLAGS)}


def given(args: argparse.Namespace, names: tuple[str, ...]) -> str | None:
    """The first of the flags ``names`` given (``--beam-size``), if any."""
    return next((f"--{name.replace('_', '-')}" for name in names
                 if getattr(args, name) is not None), None)


def with_beam(model: Any, args: argparse.Namespace) -> Any:
    """``model`` searching with the search flags, if it is a transition LM (an RNNG):
    its beam's sizes, or particle filtering (``synlm.transition.particles``)."""
    if isinstance(model, Searches) and args.search == "particles":
        from synlm.transition.particles import use_particles

        use_particles(model, args.particles, args.search_convention, args.max_memory_mb)
    elif isinstance(model, Searches):
        model.use_beam(args.beam_size, args.word_beam_size, args.shift_size,
                       args.search_convention, args.max_memory_mb)
    return model


def warn(lines: Sequence[str]) -> None:
    """Each line on stderr, after the command's name."""
    for line in lines:
        print(f"{PROG}: {line}", file=sys.stderr)


def _settings(args: argparse.Namespace) -> Any:
    """How the flags say every model is scored (``synlm.tse.scorers.Settings``)."""
    from synlm.tse import scorers

    return scorers.Settings(args.batch_size, scorers.device_of(args.device), args.eos,
                            args.pll, args.trust_remote_code, given(args, BEAM_FLAGS))


def _scorers(args: argparse.Namespace, build_model: Callable[..., Any] | None
             ) -> list[ModelScorers]:
    """(label, source, scorer, untrained scorers) of each model the flags name, in
    command-line order (``synlm.tse.scorers``), loaded only now that the flags are checked;
    ``--config``'s models built by ``build_model``."""
    from synlm import loading
    from synlm.tse import scorers

    settings = _settings(args)
    untrained = None if build_model is None else (
        lambda seed: loading.untrained_model(build_model, args.config, seed, args.set))
    builders = scorers.Builders(loading.load_model, loading.untrained_copy,
                                lambda model: with_beam(model, args), untrained)
    return scorers.build_scorers(args.models, args.label, settings, builders, args.untrained,
                                 args.config, args.seeds)


def from_results(args: argparse.Namespace, argv: Sequence[str] | None,
                 chosen: Sequence[str] | None) -> tuple[list[Evaluated], dict[str, Any]]:
    """The runs of the ``--results`` files (``synlm.tse.saved``) under their labels (the
    ``--label`` of each file, else the label it was scored under), keeping the ``chosen``
    benchmarks (None: all the files were scored on), and their provenance; ``args`` take
    the benchmarks, subset and end-of-sentence choice the files were scored with."""
    from synlm.tse import evaluation, provenance, saved

    table = saved.read_all(args.results, chosen, args.label)
    labels = table.labels
    args.benchmark = [b for b in table.benchmarks if b != "pairs"]
    args.pairs = ["pairs"] if "pairs" in table.benchmarks else []  # its rows, not a file
    args.subset, args.eos = table.subset, table.eos
    units = report_problem(args)
    if units:
        raise InputError(units)
    runs = [evaluation.Evaluated(label, run.results, [], 0, run.source)
            for label, file_runs in zip(labels, table.files) for run in file_runs]
    warn([line for run in runs for line in evaluation.run_warnings(run)])
    return runs, provenance.of_saved(provenance.command_line(PROG, argv), table.files, labels)


def from_models(args: argparse.Namespace, argv: Sequence[str] | None,
                build_model: Callable[..., Any] | None
                ) -> tuple[list[Evaluated], dict[str, Any]]:
    """Each model of the command line (with its untrained seeds) scored on the benchmarks
    (``synlm.tse.evaluation``), its unknown words and sentences without a parse said on
    stderr, and their provenance. What needs no model, then the flags a Hugging Face model
    cannot honour (its config read), then the benchmark files, are checked before any model
    loads."""
    check_inputs(args)
    if any(flag == "hf" for flag, _ in args.models):  # what they cannot honour, before data
        from synlm.tse.scorers import Settings, check_hf_models

        check_hf_models(args.models, Settings(eos=args.eos, pll=args.pll,
                                              trust_remote_code=args.trust_remote_code))
    loaded = load_benchmarks(args.benchmark, args.data_dir, args.subset, args.download,
                             args.suites, args.pairs, args.paradigms)
    threads = configure_threads()
    from synlm.tse import scorers
    from synlm.tse.sharding import joined, sharded

    rank, world = joined(scorers.device_of(args.device))  # under torchrun: its processes
    models = _scorers(args, build_model)
    from synlm.transition.types import CONVENTIONS
    from synlm.tse import evaluation, provenance
    from synlm.tse.progress import model_shown

    runs, journaled = [], {}
    for model in models:
        label, source, scorer, untrained = model
        show = sharded(model_shown(label, untrained, PROG, shown=args.progress and rank == 0),
                       rank, world)
        if args.journal and scorer is not None:
            from synlm.tse.journal import JournaledScorer, fingerprint_of

            scorer = journaled[label] = JournaledScorer(scorer, args.journal, label,
                                                        fingerprint_of(label, scorer), rank)
        runs.append(evaluation.evaluate_model((label, source, scorer, untrained), loaded,
                                              args.eos, CONVENTIONS, show))
        if rank == 0:
            warn(evaluation.run_warnings(runs[-1], args.warn_unknown))
    files = provenance.benchmark_files(list(loaded), args.data_dir, args.suites, args.pairs)
    record = evaluation.provenance_of(provenance.command_line(PROG, argv), models, threads,
                                      files, runs, args.config)
    if journaled and rank == 0:  # every process's chunks are on disk: the runs gathered
        # their scores; the other processes' records are not printed (``evaluated``)
        record["journal"] = {"folder": args.journal, "models": {
            label: asdict(scorer.time_spent()) for label, scorer in journaled.items()}}
    return runs, record


def surprisals_of_sentences(args: argparse.Namespace, argv: Sequence[str] | None,
                            build_model: Callable[..., Any] | None) -> dict[str, Any]:
    """``--sentences``: the one model's surprisals of each sentence, to ``--surprisals`` with
    its provenance beside it; what was written (the JSON the command prints)."""
    from synlm.tse import evaluation, provenance
    from synlm.tse.progress import ProgressScorer
    from synlm.tse.reports import sentence_surprisals
    from synlm.tse.sharding import joined

    check_inputs(args)
    if joined()[1] > 1:
        raise InputError("--sentences scores in one process; run it without torchrun")
    threads = configure_threads()
    models = _scorers(args, build_model)
    name, source, scorer, _ = models[0]
    tokenise = args.tokenise or "whitespace"
    shown = ProgressScorer(scorer, "sentences", PROG, name) if args.progress else scorer
    count, unparsed = sentence_surprisals(shown, args.sentences, args.surprisals, tokenise)
    if unparsed:
        warn([f"warning: {args.sentences}: lines {', '.join(map(str, unparsed))}: no parse "
              "within the beam; left out of the table"])
    record = evaluation.provenance_of(provenance.command_line(PROG, argv), models, threads, {},
                                      config=args.config,
                                      sentences=(args.sentences, tokenise))
    provenance.write_beside(args.surprisals, record)
    return {"model": source, "label": name, "sentences": count,
            "surprisals": args.surprisals, "provenance": record}


def evaluated(args: argparse.Namespace, argv: Sequence[str] | None,
              chosen: Sequence[str] | None, build_model: Callable[..., Any] | None
              ) -> dict[str, Any] | None:
    """The runs scored here (or read, ``--results``), their files written
    (``synlm.tse.reports``) and their headline table on stderr; the JSON summary
    (``synlm.tse.evaluation.summarize_runs``). Under torchrun, rank 0's alone (None on
    the others: ``synlm.tse.sharding``)."""
    from synlm.tse.sharding import joined

    runs, record = (from_results(args, argv, chosen) if args.results
                    else from_models(args, argv, build_model))
    if joined()[0] > 0:
        return None
    from rich.console import Console

    from synlm.loading import mean_and_std
    from synlm.tse import reports
    from synlm.tse.evaluation import summarize_runs

    config = bool(args.config)
    summary = summarize_runs(runs, [*args.benchmark, *(["pairs"] if args.pairs else [])],
                             args.subset, args.eos, mean_and_std, config)
    if args.results:
        summary["results"] = list(args.results)
    summary["provenance"] = record
    written = reports.write_outputs(runs, summary, config=config, output=args.output,
                                    regions=args.regions, report=args.report,
                                    units=args.units, resamples=args.resamples)
    console, table = Console(stderr=True), reports.headline_table(
        reports.table_models(runs, config)[0], mean_and_std, args.resamples, written)
    if not console.is_terminal:  # a log file: a row a line, however wide
        console.width = max(console.width, console.measure(
            table, options=console.options.update_width(10_000)).maximum)
    console.print(table)
    return summary


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
        summary = (surprisals_of_sentences(args, argv, build_model) if args.sentences
                   else evaluated(args, argv, chosen, build_model))
    except SynLMError as err:
        return report(err, PROG)
    if summary is not None:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
