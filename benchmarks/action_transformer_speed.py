"""Action Transformer speed: a training step of each attention policy (PLM, PLM-mask,
Transformer Grammars) against a plain Transformer LM of the same size, and word-synchronous
beam search against synlm's RNNG, all in one process on one device, interleaved so that load
from other processes hits every model alike.

    OMP_NUM_THREADS=1 SYNLM_DATA_DIR=/path/to/data python benchmarks/action_transformer_speed.py \\
        train --threads 1 [--kernels unfused,fused] [--dropout 0] [--forward-only] \\
        [--precisions 32,bf16-mixed] [--trees FILE] [--profile] [--device cuda] [--out train.json]
    OMP_NUM_THREADS=1 python benchmarks/action_transformer_speed.py beam --threads 1 \\
        [--profile] [--device cuda] [--out beam.json]

(On a CPU shared with other jobs, one thread: with more OpenMP threads than free cores every
parallel operator waits for a descheduled thread; docs/performance.md, "RNNG". Absolute times
then carry the other jobs' load; the paired ratios of interleaved steps are what compares.)

``train``: one optimisation step (forward, backward, gradient norm clipped at 1, AdamW lr
5e-4, weight decay 0.01: configs/plm.yaml's recipe) of synlm's ``ActionTransformer`` with
``attention`` ``causal`` (PLM), ``plm_mask`` (PLM-mask) and ``tg`` (Transformer Grammars),
once under each ``attention_kernel`` of ``--kernels`` (default ``unfused``; ``fused`` needs
``--dropout 0``, flex_attention having no attention dropout, and a GPU, having no backward on
a CPU, unless ``--forward-only``), at
configs/plm.yaml's PTB size (width 256, 4 layers, 4 heads, FFN 1024, ``--dropout`` 0.1; each
policy's default normalisation, pre-norm for PLM and PLM-mask, post-norm for TG), and of a
plain Transformer LM of the same size and layers (``SyntaxModel`` with ``Transformer(256, 4
layers, 4 heads, FFN 1024, pre-norm)``, GELU, dropout ``--dropout`` on the attention
probabilities too, as the action Transformer's layers; tied decoder), and beside it, for
reference, the same LM with fairseq's defaults (ReLU, no attention dropout: the fused
attention kernel), on the same batches of ``--batch`` real
sentences: ``rnng_speed.py``'s (the NLTK WSJ sample's training trees, ``mode: actions``,
``unknown_words: classes``; needs ``SYNLM_DATA_DIR``; sorted by length, consecutive batches
from the median length up). The plain LM runs in sentence mode over the words alone (each
row one sentence after an ``<eos>``, predicting exactly its words, as ``rnng_speed.py``'s
AWD-LSTM); the action Transformers predict the words and the actions. Every loss is summed
over the batch and divided by its sentences. The steps run on each batch in turn, the
order rotated from one batch to the next. ``--precisions`` runs each model's step under each
precision (``bf16-mixed``: under ``torch.autocast`` to bfloat16, as Lightning's; the same
model and optimiser), each compared with the plain LM in the same precision, and a
bf16-mixed step also with the model's fp32 one (the median of the paired speed ratios,
"speed / its fp32"). ``--trees FILE`` takes the batches from that treebank file instead of
the NLTK sample (no ``SYNLM_DATA_DIR``: the smoke run's ``tests/fixtures/syntax/sample.mrg``).
``--forward-only`` times, instead of the step,
the teacher-forced loss alone under ``torch.no_grad`` in eval mode (no dropout: what scoring
runs). Words per second count the sentences' words (the
same for every model); input tokens per second each model's own tokens: the words for the
plain LM, the start token and one per action for PLM and PLM-mask, and one more per
``REDUCE`` (its duplicated closing bracket) for TG; beside them, the positions each computes
(rows × the batch's longest row, padding included). The ratio is the median over batches of
the paired step times, model / plain Transformer; the token-rate ratio the median of the
paired input tokens per second, model / plain Transformer (1: as fast per input token).
Beside the steps, on each batch, the masks alone are timed:
``plm_mask_attention(actions, 4)`` (PLM-mask) and ``tg_layout(actions)`` (TG), each a share
of its policy's median step (that of the first of ``--kernels``). Peak memory and the MB
autograd saves for the backward (none with ``--forward-only``) come from one further, untimed
step of each (``rnng_speed.PeakMemory``, ``rnng_speed.saved_mb``). ``--profile`` runs
``torch.profiler`` over one more step of each action Transformer and prints its top
operators by self time.

``beam``: ``search_sentences`` at (beam, word beam, shift) = 10/5/1 and 100/10/1
(``--beams``) with each policy's random ``ActionTransformer`` (the same PTB size, eval mode)
beside synlm's random ``RNNG`` at the size of its equal-budget run (embedding 200, stack
LSTM 400 x 2) and at 256/256/2, on the sentences of ``tests/fixtures/syntax/sample.mrg``
(``rnng_speed.py``'s ``sample_sentences``; ``--sentences`` takes the first N), in the same
batches of ``--beam-batch`` sentences of similar length for every model, over a vocabulary
of the sentences' words padded to ``--vocab-size`` and the PTB's 26 labels. A first search
of the first sentence at 10/5/1 by each model is the warm-up. Each setting runs
``--repeats`` rounds, the models alternating (the order reversed every other round): the
median time of each, sentences per second, and the median of the paired speed ratios model /
RNNG 256/256/2. ``--profile`` then runs ``torch.profiler`` over one search of each action
Transformer at 100/10/1 on the first ``--profile-sentences`` sentences.

Memory: ``rnng_speed.py``'s module docstring (on the CPU, the peak resident set above the
start of the block, sampled; on a GPU, ``torch.cuda.max_memory_allocated`` above it).
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rnng_speed (which adds the repository)

from rnng_speed import (
    BEAMS,
    PTB_LABELS,
    PeakMemory,
    add_common_options,
    add_training_options,
    awd_loss,
    describe,
    load_note,
    padded,
    profile_step,
    run,
    sample_sentences,
    saved_mb,
    timed,
    training_batches,
)

from synlm.backbones.transformer import Transformer
from synlm.model import SyntaxModel
from synlm.outputs import ActionBatch
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention import named_policies
from synlm.transition.attention.plm_mask import plm_mask_attention
from synlm.transition.attention.tg import tg_layout
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.parser_state import NO_ACTION, REDUCE
from synlm.transition.rnng import RNNG

#: configs/plm.yaml's PTB size and recipe.
SIZE, LAYERS, HEADS, FFN, DROPOUT = 256, 4, 4, 1024, 0.1
CLIP, LR, WEIGHT_DECAY = 1.0, 5e-4, 0.01
#: The models' names by policy, and the plain LM's.
NAMES = {"causal": "PLM", "plm_mask": "PLM-mask", "tg": "TG"}
#: The policies by their short names.
ATTENTIONS = sorted(named_policies())
PLAIN = "Transformer LM"
#: The plain LM with fairseq's defaults instead (ReLU, no attention dropout), for reference.
FAIRSEQ_PLAIN = "Transformer LM (ReLU, no attention dropout)"
#: The precisions a training step runs under: the autocast dtype (None: float32 alone).
AUTOCAST = {"32": None, "bf16-mixed": torch.bfloat16}
#: The RNNGs of the beam comparison: (embedding, stack LSTM, layers); the last is the base.
RNNG_SIZES = ((200, 400, 2), (256, 256, 2))
BASE = "RNNG 256/256/2"


def action_transformer(vocab_size: int, n_actions: int, attention: str,
                       kernel: str = "auto", dropout: float = DROPOUT) -> ActionTransformer:
    return ActionTransformer(vocab_size, n_actions, attention=attention,
                             size=SIZE, num_layers=LAYERS, num_heads=HEADS, ffn_size=FFN,
                             dropout=dropout, attention_kernel=kernel)  # type: ignore[arg-type]


def params_of(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------- training
def joint_loss(model: ActionTransformer) -> Callable[[ActionBatch], Tensor]:
    def loss(batch: ActionBatch) -> Tensor:  # -log p(x, y) per sentence
        out = model(batch.words, batch.actions, batch.word_lengths)
        return -out.joint.sum() / batch.words.size(0)
    return loss


@torch.no_grad()
def forward_step(loss: Callable[[ActionBatch], Tensor], batch: ActionBatch) -> float:
    return float(loss(batch))


def train_step(loss: Callable[[ActionBatch], Tensor], params: list[Tensor],
               optimizer: torch.optim.Optimizer, batch: ActionBatch) -> float:
    optimizer.zero_grad(set_to_none=True)
    value = loss(batch)
    value.backward()
    nn.utils.clip_grad_norm_(params, CLIP)
    optimizer.step()
    return float(value.detach())


def precisions(given: str) -> list[str]:
    """``--precisions``: Lightning's names, ``32`` and ``bf16-mixed``."""
    chosen = given.split(",")
    unknown = sorted(set(chosen) - set(AUTOCAST))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown precision {', '.join(unknown)}: expected "
                                         f"{' or '.join(AUTOCAST)}")
    return chosen


def labelled(name: str, precision: str) -> str:
    """A model's name under ``precision`` (the name alone at 32)."""
    return name if precision == "32" else f"{name} {precision}"


def under(precision: str, step: Callable[[Any], Any], device: torch.device
          ) -> Callable[[Any], Any]:
    """``step`` under ``precision``'s autocast (as Lightning's ``bf16-mixed``)."""
    dtype = AUTOCAST[precision]
    if dtype is None:
        return step

    def autocast_step(batch: Any) -> Any:
        with torch.autocast(device.type, dtype=dtype):
            return step(batch)
    return autocast_step


def input_tokens(attention: str | None, batch: ActionBatch) -> tuple[int, int]:
    """The tokens the model of ``attention`` (None: the plain LM) reads for ``batch``
    (module docstring), and the positions it computes: rows × the longest row's tokens."""
    if attention is None:
        return batch.n_words, batch.words.numel()
    actions = batch.actions
    B = actions.size(0)
    tokens = B + int((actions != NO_ACTION).sum())
    if attention != "tg":
        return tokens, B * (actions.size(1) + 1)
    return tokens + int((actions == REDUCE).sum()), B * tg_layout(actions).source.size(1)


def measure_training(args: argparse.Namespace, device: torch.device) -> dict:
    torch.manual_seed(0)
    n_batches = args.warmup + args.steps + 1  # + the memory step
    dm, batches = training_batches(args.batch, n_batches, args.trees)
    batches = [b.to(device) for b in batches]
    V, n_actions, eos = dm.vocab_size, len(dm.action_vocab), dm.vocab.eos_id
    models: dict[str, tuple[nn.Module, Callable[[ActionBatch], Tensor]]] = {}
    policy_of: dict[str, str | None] = {}
    for name, layers in ((PLAIN, {"activation": "gelu", "dropout_attention": args.dropout}),
                         (FAIRSEQ_PLAIN, {})):
        plain = SyntaxModel(Transformer(input_size=SIZE, num_layers=LAYERS, num_heads=HEADS,
                                        ffn_size=FFN, dropout=args.dropout, pre_norm=True,
                                        attention_layer=None, **layers), (), V).to(device)
        models[name], policy_of[name] = (plain, awd_loss(plain, eos)), None
    for attention in ATTENTIONS:
        for kernel in args.kernels:
            name = f"{NAMES[attention]} ({kernel})"
            model = action_transformer(V, n_actions, attention, kernel, args.dropout)
            models[name] = (model.to(device), joint_loss(model))
            policy_of[name] = attention
    steps, variant_of = {}, {}  # a timed step's label: its model's name and precision
    for name, (model, loss) in models.items():
        model.train(not args.forward_only)
        params = list(model.parameters())
        optimizer = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)
        step = (functools.partial(forward_step, loss) if args.forward_only else
                lambda b, loss=loss, params=params, opt=optimizer:
                train_step(loss, params, opt, b))
        for precision in args.precisions:  # one model and optimiser under each precision
            steps[labelled(name, precision)] = under(precision, step, device)
            variant_of[labelled(name, precision)] = (name, precision)
    first = args.kernels[0]  # the masks, timed beside that kernel's model (first precision)
    masks: dict[str, Callable[[Tensor], Any]] = {
        labelled(f"{NAMES['plm_mask']} ({first})", args.precisions[0]):
        lambda a: plm_mask_attention(a, HEADS),
        labelled(f"{NAMES['tg']} ({first})", args.precisions[0]): tg_layout}

    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    mask_times: dict[str, list[float]] = {name: [] for name in masks}
    for i, batch in enumerate(batches[:-1]):
        order = names[i % len(names):] + names[:i % len(names)]  # rotated every batch
        for name in order:
            seconds, _ = timed(functools.partial(steps[name], batch), device)
            if i >= args.warmup:
                times[name].append(seconds)
        for name, build in masks.items():
            seconds, _ = timed(functools.partial(build, batch.actions), device)
            if i >= args.warmup:
                mask_times[name].append(seconds)
        if i >= args.warmup:
            print(f"  batch {i + 1}/{len(batches) - 1}: " + ", ".join(
                f"{n} {times[n][-1] * 1e3:.0f} ms" for n in names), flush=True)
    timed_batches = batches[args.warmup:-1]
    words = sum(b.n_words for b in timed_batches)
    actions = sum(b.n_actions for b in timed_batches)
    rows = {}
    for name in names:
        model_name, precision = variant_of[name]
        model, loss = models[model_name]
        plain, fp32 = times[labelled(PLAIN, precision)], times.get(labelled(model_name, "32"))
        policy = policy_of[model_name]
        with PeakMemory(device) as memory:
            steps[name](batches[-1])
        median = statistics.median(times[name])
        ratios = [t / p for t, p in zip(times[name], plain, strict=True)]
        per_batch = [input_tokens(policy, b)[0] for b in timed_batches]
        plain_per_batch = [input_tokens(None, b)[0] for b in timed_batches]
        rates = [(n / t) / (n0 / t0) for n, t, n0, t0 in zip(
            per_batch, times[name], plain_per_batch, plain, strict=True)]
        tokens = sum(per_batch)
        positions = sum(input_tokens(policy, b)[1] for b in timed_batches)
        rows[name] = {"params": params_of(model), "precision": precision,
                      "speed_over_fp32": None if fp32 is None or precision == "32" else
                      statistics.median(t0 / t for t0, t in zip(fp32, times[name], strict=True)),
                      "attention_kernel": getattr(model, "attention_kernel", None),
                      "pre_norm": getattr(model, "pre_norm", True),
                      "step_seconds": times[name],
                      "median_step_ms": median * 1e3,
                      "words_per_s": words / sum(times[name]),
                      "input_tokens_per_batch": tokens / args.steps,
                      "input_tokens_per_s": tokens / sum(times[name]),
                      "padded_positions_per_batch": positions / args.steps,
                      "ratio_over_plain": statistics.median(ratios),
                      "ratio_range": [min(ratios), max(ratios)],
                      "token_rate_over_plain": statistics.median(rates),
                      "token_rate_range": [min(rates), max(rates)],
                      "peak_memory_mb": memory.peak_mb,
                      "saved_for_backward_mb": None if args.forward_only
                      else saved_mb(under(precision, loss, device), batches[-1])}
        if name in mask_times:
            mask = statistics.median(mask_times[name])
            rows[name]["mask_seconds"] = mask_times[name]
            rows[name]["median_mask_ms"] = mask * 1e3
            rows[name]["mask_share_of_step"] = mask / median
    result: dict[str, Any] = {
        "device": describe(device), "load": load_note(), "memory": memory.kind,
        "sizes": f"width {SIZE}, {LAYERS} layers, {HEADS} heads, FFN {FFN}, "
                 f"dropout {args.dropout}",
        "recipe": "the teacher-forced loss alone, no grad, eval mode" if args.forward_only
        else f"AdamW lr {LR}, weight decay {WEIGHT_DECAY}, clip {CLIP}",
        "batch_sentences": args.batch, "warmup": args.warmup, "steps": args.steps,
        "words_per_batch": words / args.steps, "actions_per_batch": actions / args.steps,
        "longest_sentence": max(int(b.word_lengths.max()) for b in timed_batches),
        "longest_actions": max(int(b.actions.size(1)) for b in timed_batches),
        "models": rows,
    }
    if args.profile:
        for name in (n for n in names if policy_of[variant_of[n][0]] is not None):
            print(f"\n{name} step:")
            result[f"{name}_profile"] = profile_step(
                lambda name=name: steps[name](batches[-1]), device, args.top)
    return result


def over_fp32(row: dict) -> str:
    """A row's speed over its fp32 step's (paired median), or ``-``."""
    return "-" if row["speed_over_fp32"] is None else f"{row['speed_over_fp32']:.2f}"


def print_training(r: dict) -> None:
    print(f"\ndevice: {r['device']}; {r['load']}")
    print(f"{r['sizes']}; {r['recipe']}; batches of {r['batch_sentences']} sentences, "
          f"{r['words_per_batch']:.0f} words and {r['actions_per_batch']:.0f} actions a batch "
          f"(longest {r['longest_sentence']} words, {r['longest_actions']} actions); "
          f"{r['steps']} steps timed after {r['warmup']}")
    print("\n| model | params | step (median) | words/s | input tokens a batch (padded) | "
          "input tokens/s | step / Transformer LM (range) | input tokens/s / Transformer "
          "LM's (range) | speed / its fp32 | peak memory (MB) | saved for backward (MB) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
    for name, m in r["models"].items():
        lo, hi = m["ratio_range"]
        rate_lo, rate_hi = m["token_rate_range"]
        saved = m["saved_for_backward_mb"]
        print(f"| {name} | {m['params']:,} | {m['median_step_ms']:,.0f} ms | "
              f"{m['words_per_s']:,.0f} | {m['input_tokens_per_batch']:,.0f} "
              f"({m['padded_positions_per_batch']:,.0f}) | "
              f"{m['input_tokens_per_s']:,.0f} | {m['ratio_over_plain']:.2f} "
              f"({lo:.2f}-{hi:.2f}) | {m['token_rate_over_plain']:.2f} "
              f"({rate_lo:.2f}-{rate_hi:.2f}) | {over_fp32(m)} | {m['peak_memory_mb']:,.0f} | "
              f"{'-' if saved is None else f'{saved:,.0f}'} |")
    print("\n| masks | built alone (median) | share of the policy's median step |\n"
          "|---|---|---|")
    for name, m in r["models"].items():
        if "median_mask_ms" in m:
            print(f"| {name} | {m['median_mask_ms']:,.1f} ms | "
                  f"{m['mask_share_of_step']:.1%} |")
    print(f"\nmemory: {r['memory']}")
    for name in r["models"]:
        prof = r.get(f"{name}_profile")
        if prof:
            print(f"{name} step profiled ({prof['profiled_wall_s']:.1f} s wall, "
                  f"{prof['calls']:,} operator calls), top: " + ", ".join(
                      f"{e['op']} {e['share']:.0%}" for e in prof["by_op"][:6]))


# ---------------------------------------------------------------------- beam search
def measure_beam(args: argparse.Namespace, device: torch.device) -> dict:
    sentences = sample_sentences(args.sentences)
    types = sorted({w for s in sentences for w in s})
    vocab = [*types, *(f"<filler{i}>" for i in range(args.vocab_size - len(types)))]
    ids = [[vocab.index(w) for w in s] for s in sentences]
    V, n_actions = len(vocab), 2 + len(PTB_LABELS)
    models: dict[str, nn.Module] = {}
    for attention in ATTENTIONS:
        torch.manual_seed(0)
        models[NAMES[attention]] = action_transformer(V, n_actions, attention)
    for w, h, layers in RNNG_SIZES:
        torch.manual_seed(0)
        models[f"RNNG {w}/{h}/{layers}"] = RNNG(V, n_actions, w, h, layers, dropout=0.0)
    models = {name: model.to(device).eval() for name, model in models.items()}
    # the same batches for every model: longest first, --beam-batch sentences each
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    rows_in_order = [ids[i] for i in order]

    def search(model: nn.Module, setting: tuple[int, int, int], rows: list[list[int]]
               ) -> list[list[float]]:
        found = []
        for k in range(0, len(rows), args.beam_batch):
            chunk = rows[k:k + args.beam_batch]
            words = padded(chunk, device)
            lengths = torch.tensor([len(r) for r in chunk], device=device)
            settings = BeamSettings(*setting, max_memory_mb=1e9, batch_size=args.beam_batch)
            found += [list(r.surprisals) for r in search_sentences(
                model, words, lengths, settings)]  # type: ignore[arg-type]
        return found

    n_words = sum(len(r) for r in ids)
    result: dict[str, Any] = {
        "device": describe(device), "sentences": len(ids), "words": n_words,
        "batch_sentences": args.beam_batch, "vocab_size": V, "n_actions": n_actions,
        "params": {name: params_of(m) for name, m in models.items()},
        "pre_norm": {name: getattr(m, "pre_norm", None) for name, m in models.items()
                     if isinstance(m, ActionTransformer)}}
    for model in models.values():  # warm-up
        search(model, BEAMS[0], ids[:1])
    result["load_before"] = load_note()
    result["settings"] = {}
    names = list(models)
    for setting in args.beams:
        key = "/".join(map(str, setting))
        seconds: dict[str, list[float]] = {name: [] for name in names}
        peaks: dict[str, list[float]] = {name: [] for name in names}
        found: dict[str, list[list[float]]] = {}
        for round_ in range(args.repeats):  # the order reversed every other round
            for name in (names if round_ % 2 == 0 else names[::-1]):
                with PeakMemory(device) as memory:
                    t, found[name] = timed(functools.partial(
                        search, models[name], setting, rows_in_order), device)
                seconds[name].append(t)
                peaks[name].append(memory.peak_mb)
                print(f"  {key} round {round_ + 1} {name}: {t:.1f} s", flush=True)
        entry: dict[str, Any] = {}
        for name in names:
            median = statistics.median(seconds[name])
            ratios = [b / s for s, b in zip(seconds[name], seconds[BASE], strict=True)]
            entry[name] = {"seconds": seconds[name], "median_seconds": median,
                           "sentences_per_s": len(ids) / median,
                           "words_per_s": n_words / median,
                           "speed_ratio_over_base": statistics.median(ratios),
                           "speed_ratio_range": [min(ratios), max(ratios)],
                           "peak_memory_mb": max(peaks[name]),
                           "finite": all(math.isfinite(x) for r in found[name] for x in r)}
        result["settings"][key] = entry
    if args.profile:  # one search of the first --profile-sentences, 100/10/1
        rows = ids[:args.profile_sentences]
        result["profile_sentences"] = len(rows)
        for attention in ATTENTIONS:
            name = NAMES[attention]
            print(f"\n{name}, 100/10/1 on the first {len(rows)} sentences:")
            result[f"{name}_profile"] = profile_step(
                lambda name=name: search(models[name], BEAMS[-1], rows), device, args.top)
    result["load_after"] = load_note()
    result["memory"] = memory.kind
    return result


def print_beam(r: dict) -> None:
    print(f"\ndevice: {r['device']}; {r['load_before']} (before), {r['load_after']} (after)")
    print(f"{r['sentences']} sentences ({r['words']} words) of sample.mrg, batches of "
          f"{r['batch_sentences']}, V = {r['vocab_size']}, {r['n_actions']} actions, random "
          f"models")
    print("\n| beam/word beam/shift | model | params | seconds (median) | sentences/s | "
          f"words/s | speed / {BASE} (range) | peak memory (MB) |\n"
          "|---|---|---|---|---|---|---|---|")
    for key, entry in r["settings"].items():
        for name, e in entry.items():
            lo, hi = e["speed_ratio_range"]
            print(f"| {key} | {name} | {r['params'][name]:,} | {e['median_seconds']:.1f} | "
                  f"{e['sentences_per_s']:.3f} | {e['words_per_s']:.2f} | "
                  f"{e['speed_ratio_over_base']:.2f} ({lo:.2f}-{hi:.2f}) | "
                  f"{e['peak_memory_mb']:,.0f} |")
    print(f"memory: {r['memory']}")
    for attention in ATTENTIONS:
        prof = r.get(f"{NAMES[attention]}_profile")
        if prof:
            print(f"{NAMES[attention]}, one profiled search of {r['profile_sentences']} "
                  f"sentences at 100/10/1 ({prof['profiled_wall_s']:.1f} s wall, "
                  f"{prof['calls']:,} operator calls), top: " + ", ".join(
                      f"{e['op']} {e['share']:.0%}" for e in prof["by_op"][:6]))


# ---------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    train = sub.add_parser("train", help="a training step of each policy beside a "
                                         "Transformer LM")
    add_training_options(train)
    train.add_argument("--precisions", type=precisions, default=["32"],
                       help="each model under each: 32, bf16-mixed, comma-separated")
    train.add_argument("--profile", action="store_true",
                       help="profile one more step of each policy (torch.profiler)")
    train.add_argument("--kernels", type=lambda s: s.split(","), default=["unfused"],
                       help="the action Transformers' attention_kernel values, a model each: "
                            "unfused, fused, auto, comma-separated")
    train.add_argument("--dropout", type=float, default=DROPOUT,
                       help="every model's dropout (fused: 0)")
    train.add_argument("--forward-only", action="store_true",
                       help="time the loss alone, no grad, eval mode (fused on a CPU)")
    beam = sub.add_parser("beam", help="beam search: each policy beside synlm's RNNG")
    beam.add_argument("--sentences", type=int, default=0, help="the first N (0: all 10)")
    beam.add_argument("--beam-batch", type=int, default=10, help="sentences a batch")
    beam.add_argument("--repeats", type=int, default=3,
                      help="rounds of each setting, the models alternating")
    beam.add_argument("--vocab-size", type=int, default=9999,
                      help="the random models' word vocabulary")
    beam.add_argument("--profile", action="store_true",
                      help="profile one search of each policy (torch.profiler)")
    beam.add_argument("--profile-sentences", type=int, default=3)
    beam.add_argument("--beams", default=BEAMS,
                      type=lambda s: [tuple(map(int, b.split("/"))) for b in s.split(",")],
                      help="beam/word beam/shift settings, comma-separated (default "
                           "10/5/1,100/10/1)")
    add_common_options(train, beam)
    run(parser.parse_args(), {"train": (measure_training, print_training),
                              "beam": (measure_beam, print_beam)})


if __name__ == "__main__":
    main()
