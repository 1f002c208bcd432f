"""``synlm generate`` and ``synlm evaluate-generation``: samples from a checkpoint as JSONL,
and the generation metrics of DMLM (Yang & Wan 2022 §3.1-3.2) as one JSON object.

    synlm generate --ckpt_path CKPT --stories ROCStories_test.csv --top-p 0.5 --output e.jsonl
    synlm generate --ckpt_path CKPT --contexts prompts.txt [--references endings.txt]
    synlm generate --ckpt_path CKPT --num-samples 1000 --output news.jsonl      (unconditional)
    synlm evaluate-generation e.jsonl [--oracle CKPT] [--gpt2 DIR] [--bert DIR] [--rlm-heldout F]

A context is fed as ``[<eos>, w1 .. wk]`` (how training units start) and the sample runs to
the first ``<eos>`` or ``--max-new-tokens``. Contexts of equal length are sampled together,
through the backbone's cache where it has one, from one seeded generator: the same seed,
checkpoint and inputs give the same samples. Each JSONL record has ``sample`` and, where
there is one, ``context`` and ``reference`` (ROCStories: sentences 1-4 and sentence 5; the
reference is never part of the context). Empty samples (the model ended them at once) are
written too, with one warning line; the metrics leave them out and count them.

This module imports only the light parts of synlm at the top, so that ``--help`` and a wrong
flag answer before torch is imported.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synlm.capabilities import Samples, require
from synlm.catalog import REPO_CONFIGS
from synlm.data.files import read_lines
from synlm.data.vocab import Vocab, atomic_write_text
from synlm.errors import InputError, SynLMError, report, writing
from synlm.runtime.arguments import CommandParser
from synlm.runtime.threads import configure_threads

if TYPE_CHECKING:
    from synlm.lm import SyntaxLM


def empty_warning(samples: Sequence[list[str]], what: str,
                  unknown_share: float | None = None) -> str | None:
    """The warning line for empty samples (None without any): how many of how many ``what``
    (e.g. "endings") the model ended at once, and the likely cause, a model trained on
    other text, with ``unknown_share``, the share of the contexts' words it does not know."""
    empty = sum(len(s) == 0 for s in samples)
    if not empty:
        return None
    verb = "is" if empty == 1 else "are"
    unknown = ("" if unknown_share is None
               else f" (unknown words in the contexts: {unknown_share:.0%})")
    return (f"synlm generate: warning: {empty} of {len(samples)} {what} {verb} empty: the "
            "model ends them at once (the metrics leave them out); was it trained on this "
            f"kind of text?{unknown}")


def metrics_json(result: dict[str, Any]) -> str:
    """``evaluate``'s result as one line of strict JSON: a NaN metric (nothing to score)
    is written as null."""
    return json.dumps({k: None if isinstance(v, float) and math.isnan(v) else v
                       for k, v in result.items()})


def read_records(path: Path) -> list[dict[str, str]]:
    """A JSONL file of samples; a bad line names file and line."""
    out = []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{number}: not JSON ({e.msg}), expected one record "
                             "per line as synlm generate writes") from None
        if not isinstance(record, dict) or not isinstance(record.get("sample"), str):
            raise InputError(f"{path}:{number}: expected an object with a \"sample\" string")
        out.append(record)
    return out


#: Builds a run from CLI arguments: (trainer, model, datamodule);
#: ``synlm.lightning_cli.build_run``, handed down by the CLI, which sits above this
#: module.
BuildRun = Callable[[Sequence[str]], tuple[Any, "SyntaxLM", Any]]


def evaluate(recs: Sequence[dict[str, str]], oracle: str | None = None,
             gpt2: str | None = None, bert: str | None = None, bert_layers: int | None = None,
             rlm_heldout: str | None = None, rlm_config: str | None = None,
             rlm_overrides: Sequence[str] = (), build_run: BuildRun | None = None,
             news: bool = False, news_references: str | None = None) -> dict[str, Any]:
    """Every metric the inputs allow (``docs/evaluation.md``): Distinct and Self-BLEU always
    (with references: Table 2's columns, ``story_metrics``, which drops empty samples; with
    ``news``: the released news evaluation's definitions, ``news_metrics``, BLEU-5 against
    the sentences of ``news_references``); BLEU (and BERTScore with ``bert``) against
    references; LM score under ``oracle``; GPT-2 perplexity with ``gpt2`` (of the samples of
    two words or more, counted by ``gpt2_ppl_samples``); reverse-LM score on ``rlm_heldout``
    (real text). ``samples_scored`` and ``samples_empty`` count the non-empty samples, which
    the model-free metrics read, and the empty ones they leave out; a metric with too few
    samples to score is NaN (``synlm.metrics.generation``)."""
    from synlm.metrics import generation as m

    samples = [r["sample"].split() for r in recs]
    refs = [r["reference"].split() for r in recs if "reference" in r]
    result: dict[str, Any] = {"n_samples": len(samples),
                              "mean_length": sum(map(len, samples)) / max(len(samples), 1)}
    if news:
        real = ([line.split() for line in read_lines(Path(news_references)) if line.split()]
                if news_references else None)
        result.update(m.news_metrics(samples, real))
    elif refs:
        if len(refs) != len(samples):
            raise InputError("some records have a reference and some do not")
        result.update(m.story_metrics(samples, refs))
        if bert:
            result["bertscore"] = m.bert_score(samples, refs, bert, num_layers=bert_layers)
    else:
        for n in (2, 3):
            result[f"distinct_{n}"] = m.distinct(samples, n)
            result[f"self_bleu_{n}"] = m.self_bleu(samples, n)
        result.update(m.sample_counts(samples))
    if oracle:
        from synlm.loading import load_model

        result["lm_score"] = m.lm_score(load_model(oracle, "--oracle"), samples)
    if gpt2:  # samples of two words or more: GPT-2 predicts from the second token on
        scored = [s for s in samples if len(s) > 1]
        result["gpt2_ppl"] = m.gpt2_perplexity(scored, gpt2)
        result["gpt2_ppl_samples"] = len(scored)
    if rlm_heldout:
        heldout = [line.split() for line in read_lines(Path(rlm_heldout)) if line.split()]
        if build_run is None:
            raise InputError("the reverse-LM score needs the CLI's run builder "
                             "(synlm.lightning_cli.build_run)")
        result["rlm_score"] = rlm_score(samples, heldout, build_run, rlm_config,
                                        rlm_overrides)
    return result


#: The reverse language model's config (a small AWD-LSTM, sentence mode).
RLM_CONFIG = "rlm.yaml"


def _config_path(config: str) -> Path:
    """``config`` as given when it is a file, else the shipped config of that name."""
    return Path(config) if Path(config).is_file() else REPO_CONFIGS / config


def rlm_score(samples: Sequence[list[str]], heldout: Sequence[list[str]], build_run: BuildRun,
              config: str | None = None, overrides: Sequence[str] = (),
              valid_fraction: float = 0.1) -> float:
    """Reverse-LM score (Semeniuta et al. 2018; Caccia et al. 2020): train a fresh LM
    (``configs/rlm.yaml`` unless ``config``, with ``KEY=VALUE`` overrides) on the samples,
    keeping ``valid_fraction`` of them to pick its best epoch, then its NLL in nats per token
    (``<eos>`` included) on real held-out text. Its vocabulary is the held-out text's words:
    sampled words outside it read as ``<unk>``, so the score does not depend on the
    generating model's vocabulary. Empty samples are left out; with too few left to train
    on (two or fewer) the score is NaN."""
    samples = [s for s in samples if s]
    n_valid = max(1, int(len(samples) * valid_fraction))
    if len(samples) <= n_valid:
        return math.nan
    with tempfile.TemporaryDirectory(prefix="synlm-rlm-") as tmp:
        root = Path(tmp)
        splits = {"train": samples[:-n_valid], "valid": samples[-n_valid:], "test": heldout}
        for split, sentences in splits.items():
            atomic_write_text(root / f"{split}.txt",
                              "".join(" ".join(s) + "\n" for s in sentences if s))
        Vocab.build(heldout).save(root / "vocab.json")
        files = json.dumps({s: str(root / f"{s}.txt") for s in splits})
        trainer, model, datamodule = build_run([
            "--config", str(_config_path(config or RLM_CONFIG)),
            f"--data.corpus.init_args.files={files}", f"--data.vocab_file={root / 'vocab.json'}",
            f"--data.cache_dir={root / 'cache'}", f"--trainer.default_root_dir={root}",
            *(f"--{o}" for o in overrides)])
        trainer.fit(model, datamodule)
        (metrics,) = trainer.test(model, datamodule, ckpt_path="best", verbose=False)
    return math.log(metrics["test/ppl"])


def _add_metric_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--oracle", help="LM score: a synlm checkpoint trained on the real data")
    p.add_argument("--gpt2", help="GPT-2 perplexity: a local GPT-2 folder or hub name")
    p.add_argument("--bert", help="BERTScore: a local BERT-like model folder or hub name")
    p.add_argument("--bert-layers", type=int, help="BERTScore: the layer to read")
    p.add_argument("--rlm-heldout", help="reverse-LM score: real held-out text, one "
                   "sentence per line (e.g. the test split)")
    p.add_argument("--rlm-config", default=RLM_CONFIG,
                   help="the reverse LM's config: a file, or a shipped config's name")
    p.add_argument("--rlm-set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="overrides of the reverse LM's config, e.g. trainer.max_epochs=5")
    p.add_argument("--news", action="store_true", help="the released news evaluation's "
                   "definitions (WMT News): per-sample Distinct-1..5, smoothed Self-BLEU-5")
    p.add_argument("--news-references", help="--news: BLEU-5 against these real sentences, "
                   "one per line (the test split)")


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser("synlm generate", __doc__.split("\n\n")[0])
    p.add_argument("--ckpt_path", required=True, help="a SyntaxLM checkpoint")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--stories", type=Path, help="a ROCStories CSV: generate each ending")
    src.add_argument("--contexts", type=Path, help="one context per line")
    p.add_argument("--references", type=Path, help="with --contexts: one reference per line")
    p.add_argument("--num-samples", type=int, default=1000,
                   help="unconditional samples (without --stories/--contexts)")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float, help="nucleus sampling (DMLM: 0.5 on ROCStories)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--dm-sampling", choices=("mixture", "logits", "released"),
                   help="a DM-model's sampling distribution instead of its config's: the "
                   "mixture (eq. 4), the attention-mixed logits, or the released DM-LSTM "
                   "sampler whole (raw-state keys, its histories; docs/models/dmlm.md)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--output", type=Path, help="the JSONL file (default: stdout)")
    p.add_argument("--metrics", action="store_true",
                   help="also print the metrics (synlm evaluate-generation) as JSON")
    _add_metric_args(p)
    return p


def main(argv: Sequence[str] | None = None, build_run: BuildRun | None = None) -> int:
    """``synlm generate``; ``build_run`` (the CLI's) trains the reverse LM."""
    args = build_parser().parse_args(argv)
    try:
        if args.references and not args.contexts:
            raise InputError("--references goes with --contexts")
        if args.metrics and not args.output:
            raise InputError("--metrics prints the metrics; give --output FILE for the samples")
        configure_threads()  # torch: once the flags are good
        from synlm.generation import Prompt, lines_prompts, records, sample, stories_prompts
        from synlm.heads import DependencyMixtureHead
        from synlm.loading import load_model
        from synlm.parsing import unknown_words

        model = require(load_model(args.ckpt_path), Samples, f"--ckpt_path {args.ckpt_path}")
        model = model.to(args.device)
        if args.dm_sampling:
            heads = [h for h in model.heads if isinstance(h, DependencyMixtureHead)]
            if not heads:
                raise InputError("--dm-sampling: the checkpoint has no DependencyMixtureHead")
            for head in heads:
                head.sampling = args.dm_sampling
                head.check_sampling()
        if args.stories:
            prompts = stories_prompts(args.stories)
        elif args.contexts:
            prompts = lines_prompts(args.contexts, args.references)
        else:
            prompts = [Prompt()] * args.num_samples
        contexts = [p.context for p in prompts if p.context]
        unknown = (unknown_words(model, contexts, "the contexts' words", "synlm generate")
                   if contexts else None)
        samples = sample(model, prompts, args.max_new_tokens, args.temperature, args.top_k,
                         args.top_p, args.seed, args.batch_size)
        recs = records(prompts, samples)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
        if args.output:
            with writing(args.output):
                atomic_write_text(args.output, text)
        else:
            sys.stdout.write(text)
        warning = empty_warning(samples, "endings" if args.stories else "samples", unknown)
        if warning:
            print(warning, file=sys.stderr)
        if args.metrics:
            print(metrics_json(_evaluate(args, recs, build_run)))
    except SynLMError as err:
        return report(err, "synlm generate")
    return 0


def _evaluate(args: argparse.Namespace, recs: Sequence[dict[str, str]],
              build_run: BuildRun | None) -> dict[str, Any]:
    return evaluate(recs, args.oracle, args.gpt2, args.bert, args.bert_layers,
                    args.rlm_heldout, args.rlm_config, args.rlm_set, build_run,
                    args.news, args.news_references)


def build_evaluate_parser() -> argparse.ArgumentParser:
    p = CommandParser("synlm evaluate-generation", "The generation metrics of a JSONL file "
                      "of samples (synlm generate's), as one JSON object.")
    p.add_argument("file", type=Path)
    _add_metric_args(p)
    return p


def evaluate_main(argv: Sequence[str] | None = None, build_run: BuildRun | None = None) -> int:
    """``synlm evaluate-generation``; ``build_run`` (the CLI's) trains the reverse LM."""
    args = build_evaluate_parser().parse_args(argv)
    try:
        recs = read_records(args.file)
        configure_threads()  # torch: once the flags and the samples are good
        print(metrics_json(_evaluate(args, recs, build_run)))
    except SynLMError as err:
        return report(err, "synlm evaluate-generation")
    return 0
