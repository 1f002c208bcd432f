"""RNNG speed: a training step against an AWD-LSTM LM of the same sizes, and word-synchronous
beam search against the released RNNG (aistairc/rnng-pytorch), each pair in one process on
one device, interleaved so that load from other processes hits both alike.

    OMP_NUM_THREADS=1 SYNLM_DATA_DIR=/path/to/data python benchmarks/rnng_speed.py train \\
        --threads 1 [--trees FILE] [--profile] [--device cuda] [--out train.json]
    OMP_NUM_THREADS=1 python benchmarks/rnng_speed.py beam --threads 1 \\
        --reference PATH/TO/rnng-pytorch [--profile] [--device cuda] [--out beam.json]

(On a CPU shared with other jobs, one thread: with more OpenMP threads than free cores every
parallel operator waits for a descheduled thread; docs/performance.md, "RNNG".)

``train``: one optimisation step (forward, backward, gradient norm clipped at 5, Adam lr
0.001: the released RNNG recipe's) of synlm's ``RNNG`` (256/256/2, dropout 0.3) and of an
AWD-LSTM LM (``SyntaxModel`` with ``AWDLSTM(256, 256, 2)`` and its default dropouts and
weight drop, embedding dropout 0.1, tied decoder) on the same batches of ``--batch`` real
sentences of similar length: the NLTK WSJ sample's training trees (``Treebank``, ``mode:
actions``, ``unknown_words: classes``; needs ``SYNLM_DATA_DIR``; or the treebank file
``--trees``), sorted by length, consecutive batches from the median length up. The AWD-LSTM
runs in sentence mode: each row is one sentence, read from a zero state after an ``<eos>``,
predicting exactly the sentence's words (no final ``<eos>``), so both models generate the
same words; both losses are summed over the batch and divided by its sentences. Words per
second count those words; the RNNG also predicts the actions. The steps alternate (AWD-LSTM,
RNNG) on the same batch; the ratio is the median of the paired ratios of step times (RNNG /
AWD-LSTM, per word: both steps see the same words). Peak memory comes from one further,
untimed step of each (``PeakMemory``); also the MB of tensors autograd saves for the
backward. ``--profile`` runs ``torch.profiler`` over one more RNNG step and prints its top
operators by self time.

``beam``: ``search_sentences`` against the reference's ``word_sync_beam_search`` with the
same weights, at (beam, word beam, shift) = 10/5/1 and 100/10/1 (the reference's default),
on the sentences of ``tests/fixtures/syntax/sample.mrg`` (cleaned as synlm's PTB corpora
clean them; ``--sentences`` takes the first N), in batches of ``--beam-batch`` sentences of
similar length (the same batches for both). ``--reference`` is a checkout of
aistairc/rnng-pytorch (f30c0ed, patched as tests/fixtures/rnng/README.md says); this script
only imports its ``fixed_stack_models`` and ``action_dict`` and contains none of its code.
The reference builds a random ``FixedStackRNNG`` (w = h = 256, two layers, 26 PTB labels,
``torch.manual_seed(0)``, a vocabulary of the sentences' words padded to ``--vocab-size``),
whose weights ``tests/test_rnng_reference.py``'s ``transplanted`` copies into synlm's
``RNNG``; before timing, the first sentence's surprisals from both (searched alone, 10/5/1)
must agree to 1e-4 (that search is also the warm-up). The reference runs with
``stack_size_bound=100``, its method's default (synlm's ``max_stack``). Each setting runs
``--repeats`` rounds, the two codes alternating (reference, synlm, synlm, reference, ...):
the median time of each, and the median of the paired speed ratios. ``--profile`` then runs
``torch.profiler`` over one search of each at 100/10/1 on the first few sentences. Without
``--reference`` only synlm runs, on a random RNNG of the same sizes.

Peak memory (``PeakMemory``): on a GPU, ``torch.cuda.max_memory_allocated`` above what was
allocated at the start of the measured block; on the CPU, the process's resident set sampled
every 5 ms by a thread, its peak above its value at the start (freed heap is handed back with
glibc's ``malloc_trim`` first). ``ru_maxrss`` cannot serve on the CPU: it only grows, so a
block's delta is zero unless it beats every earlier peak. ``tracemalloc`` does not see
PyTorch's allocations.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib
import json
import math
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from throughput import synchronize  # noqa: E402

from synlm.backbones import AWDLSTM  # noqa: E402
from synlm.model import SyntaxModel  # noqa: E402
from synlm.outputs import ActionBatch, Batch  # noqa: E402
from synlm.syntax.readers import read_trees  # noqa: E402
from synlm.syntax.trees import clean_tree, words_and_tags  # noqa: E402
from synlm.transition.beam import BeamSettings, search_sentences  # noqa: E402
from synlm.transition.rnng import RNNG  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "syntax" / "sample.mrg"
#: The labels of the random reference model (the PTB's 26, sorted: ActionVocab's order).
PTB_LABELS = ["ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN",
              "PRT", "QP", "RRC", "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP",
              "WHADVP", "WHNP", "WHPP", "X"]
#: (beam, word beam, shift) settings timed, the smaller first.
BEAMS = ((10, 5, 1), (100, 10, 1))
CLIP = 5.0  # the released recipe's gradient norm
LR = 1e-3


# ---------------------------------------------------------------------- device and memory
def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return (f"cpu, {torch.get_num_threads()} torch threads of {os.cpu_count()} cores, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} "
            f"(torch {torch.__version__})")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _malloc_trim() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakMemory:
    """The peak memory a block adds, in MB (``peak_mb``; module docstring)."""

    def __init__(self, device: torch.device, interval: float = 0.005) -> None:
        self.device, self.interval = device, interval
        self.peak_mb = float("nan")

    def __enter__(self) -> PeakMemory:
        synchronize(self.device)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        _malloc_trim()
        self._base = self._peak = _rss_bytes()
        self._stop = threading.Event()

        def sample() -> None:
            while not self._stop.wait(self.interval):
                self._peak = max(self._peak, _rss_bytes())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            self._stop.set()
            self._thread.join()
            peak = max(self._peak, _rss_bytes())
        self.peak_mb = (peak - self._base) / 2**20

    @property
    def kind(self) -> str:
        return ("torch.cuda.max_memory_allocated above the start" if self.device.type == "cuda"
                else "peak RSS above the start, sampled every 5 ms")


def timed(run: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    synchronize(device)
    start = time.perf_counter()
    value = run()
    synchronize(device)
    return time.perf_counter() - start, value


def load_note() -> str:
    return "load average (1, 5, 15 min) " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# ---------------------------------------------------------------------- training
def training_batches(batch: int, n: int, trees: Path | None = None
                     ) -> tuple[Any, list[ActionBatch]]:
    """``n`` batches of ``batch`` training sentences of the NLTK sample (or of the treebank
    file ``trees``, every split), sorted by length, consecutive from the median length up;
    and the DataModule."""
    from synlm.data.batching import collate_actions
    from synlm.data.datamodule import SynLMDataModule
    from synlm.data.treebanks import Treebank

    corpus = Treebank(path="nltk_treebank/treebank.zip") if trees is None else \
        Treebank(**dict.fromkeys(("train", "valid", "test"), str(trees.resolve())))
    dm = SynLMDataModule(corpus=corpus, mode="actions", unknown_words="classes")
    items = sorted(dm.action_items("train"), key=lambda item: len(item.words))
    start = len(items) // 2
    if start + n * batch > len(items):
        start = max(0, len(items) - n * batch)
    chunks = [items[start + i * batch:start + (i + 1) * batch] for i in range(n)]
    if any(len(c) < batch for c in chunks):
        raise SystemExit(f"the training split has too few sentences for {n} batches of {batch}")
    return dm, [collate_actions(c) for c in chunks]


def lm_batch(batch: ActionBatch, eos: int) -> Batch:
    """The same sentences for a left-to-right LM: input ``<eos> w_1 .. w_{n-1}``, targets
    ``w_1 .. w_n`` (the words the RNNG generates), padding masked."""
    words, lengths = batch.words, batch.word_lengths
    tokens = torch.cat([torch.full_like(words[:, :1], eos), words[:, :-1]], 1)
    mask = torch.arange(words.size(1), device=words.device) < lengths[:, None]
    return Batch(tokens=tokens, targets=words, mask=mask, lengths=lengths,
                 n_targets=batch.n_words)


def rnng_loss(model: RNNG) -> Callable[[ActionBatch], Tensor]:
    def loss(batch: ActionBatch) -> Tensor:  # the RNNG config's loss_normalize: sentences
        out = model(batch.words, batch.actions, batch.word_lengths)
        return -out.joint.sum() / batch.words.size(0)
    return loss


def awd_loss(model: SyntaxModel, eos: int) -> Callable[[ActionBatch], Tensor]:
    def loss(batch: ActionBatch) -> Tensor:
        lm = lm_batch(batch, eos)
        nll = -model(lm).target_log_probs  # (B, N)
        return nll.masked_fill(~lm.mask, 0.0).sum() / batch.words.size(0)
    return loss


def train_step(loss: Callable[[ActionBatch], Tensor], params: list[Tensor],
               optimizer: torch.optim.Optimizer, batch: ActionBatch) -> float:
    optimizer.zero_grad(set_to_none=True)
    value = loss(batch)
    value.backward()
    nn.utils.clip_grad_norm_(params, CLIP)
    optimizer.step()
    return float(value.detach())


def saved_mb(loss: Callable[[ActionBatch], Tensor], batch: ActionBatch) -> float:
    """MB of the tensors autograd saves for the backward of one forward."""
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss(batch)
    return sum(seen.values()) / 2**20


def profile_step(step: Callable[[], Any], device: torch.device, top: int) -> dict:
    """The ``top`` operators of one step by self time (device time on a GPU), also split by
    their input shapes."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if device.type == "cuda" else [])
    start = time.perf_counter()
    with profile(activities=activities, record_shapes=True) as prof:
        step()
        synchronize(device)
    wall = time.perf_counter() - start
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    out = {}
    for name, shapes in (("by_op", False), ("by_op_and_shapes", True)):
        events = sorted(prof.key_averages(group_by_input_shape=shapes),
                        key=lambda e: getattr(e, key, 0.0), reverse=True)
        total = sum(getattr(e, key, 0.0) for e in events)
        out[name] = [{"op": e.key, "calls": e.count, "self_ms": getattr(e, key) / 1e3,
                      "share": getattr(e, key) / total,
                      **({"input_shapes": str(e.input_shapes)} if shapes else {})}
                     for e in events[:top]]
    out["total_self_ms"] = total / 1e3
    out["profiled_wall_s"] = wall  # the profiler's own cost included
    out["calls"] = sum(e.count for e in prof.key_averages())
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by=key, row_limit=top, max_name_column_width=36, max_shapes_column_width=60))
    return out


def measure_training(args: argparse.Namespace, device: torch.device) -> dict:
    torch.manual_seed(0)
    n_batches = args.warmup + args.steps + 1  # + the memory step
    dm, batches = training_batches(args.batch, n_batches, args.trees)
    batches = [b.to(device) for b in batches]
    V, n_actions, eos = dm.vocab_size, len(dm.action_vocab), dm.vocab.eos_id
    rnng = RNNG(V, n_actions, args.size, args.size, args.layers, dropout=0.3).to(device).train()
    awd = SyntaxModel(AWDLSTM(args.size, args.size, args.layers), (), V,
                      embedding_dropout=0.1).to(device).train()
    models = {"AWD-LSTM": (awd, awd_loss(awd, eos)), "RNNG": (rnng, rnng_loss(rnng))}
    steps = {}
    for name, (model, loss) in models.items():
        params = list(model.parameters())
        optimizer = torch.optim.Adam(params, lr=LR)
        steps[name] = (lambda b, loss=loss, params=params, opt=optimizer:
                       train_step(loss, params, opt, b))

    times: dict[str, list[float]] = {name: [] for name in models}
    for i, batch in enumerate(batches[:-1]):
        for name in models:  # AWD-LSTM then RNNG, on the same batch
            seconds, _ = timed(functools.partial(steps[name], batch), device)
            if i >= args.warmup:
                times[name].append(seconds)
    timed_batches = batches[args.warmup:-1]
    words = sum(b.n_words for b in timed_batches)
    actions = sum(b.n_actions for b in timed_batches)
    rows = {}
    for name, (model, loss) in models.items():
        with PeakMemory(device) as memory:
            steps[name](batches[-1])
        rows[name] = {"params": sum(p.numel() for p in model.parameters()),
                      "median_step_ms": statistics.median(times[name]) * 1e3,
                      "words_per_s": words / sum(times[name]),
                      "peak_memory_mb": memory.peak_mb,
                      "saved_for_backward_mb": saved_mb(loss, batches[-1])}
    ratios = [r / a for a, r in zip(times["AWD-LSTM"], times["RNNG"], strict=True)]
    result = {
        "device": describe(device), "load": load_note(), "memory": memory.kind,
        "sizes": f"{args.size}/{args.size}/{args.layers}", "batch_sentences": args.batch,
        "warmup": args.warmup, "steps": args.steps,
        "words_per_batch": words / args.steps, "actions_per_batch": actions / args.steps,
        "longest_sentence": max(int(b.word_lengths.max()) for b in timed_batches),
        "models": rows,
        "ratio_rnng_over_awd_per_word": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
    }
    if args.profile:
        result["rnng_profile"] = profile_step(lambda: steps["RNNG"](batches[-1]), device,
                                                  args.top)
    return result


def print_training(r: dict) -> None:
    print(f"device: {r['device']}; {r['load']}")
    print(f"{r['sizes']} (embedding/hidden/layers), batches of {r['batch_sentences']} "
          f"sentences, {r['words_per_batch']:.0f} words and {r['actions_per_batch']:.0f} "
          f"actions a batch (longest {r['longest_sentence']} words); "
          f"{r['steps']} steps timed after {r['warmup']}")
    print("\n| model | params | step (median) | words/s | peak memory (MB) | saved for "
          "backward (MB) |\n|---|---|---|---|---|---|")
    for name, m in r["models"].items():
        print(f"| {name} | {m['params']:,} | {m['median_step_ms']:,.0f} ms | "
              f"{m['words_per_s']:,.0f} | {m['peak_memory_mb']:,.0f} | "
              f"{m['saved_for_backward_mb']:,.0f} |")
    lo, hi = r["ratio_range"]
    print(f"\nRNNG / AWD-LSTM time per word: {r['ratio_rnng_over_awd_per_word']:.2f} "
          f"(median of paired steps; range {lo:.2f}-{hi:.2f}); memory: {r['memory']}")
    if "rnng_profile" in r:
        prof = r["rnng_profile"]
        print(f"\nRNNG step, top operators by self time (profiled: {prof['profiled_wall_s']:.1f} "
              f"s wall, {prof['total_self_ms']:,.0f} ms self time, {prof['calls']:,} operator "
              "calls; the profiler slows large fills and copies most):")
        for e in prof["by_op"]:
            print(f"  {e['op']}: {e['share']:.1%}, {e['self_ms']:,.0f} ms, {e['calls']} calls")


# ---------------------------------------------------------------------- beam search
def sample_sentences(limit: int) -> list[list[str]]:
    """The words of ``SAMPLE``'s trees, cleaned as synlm's PTB corpora clean them."""
    out = []
    for tree, _ in read_trees(SAMPLE):
        cleaned = clean_tree(tree)
        if cleaned is not None:
            out.append(words_and_tags(cleaned)[0])
    return out[:limit] if limit else out


def import_reference(path: Path) -> tuple[ModuleType, ModuleType]:
    """The reference's ``fixed_stack_models`` and ``action_dict`` modules."""
    sys.path.insert(0, str(path.resolve()))
    with warnings.catch_warnings():  # its utils.py: `is not` with a literal
        warnings.simplefilter("ignore", SyntaxWarning)
        return (importlib.import_module("fixed_stack_models"),
                importlib.import_module("action_dict"))


def reference_and_transplant(path: Path, vocab: list[str]) -> tuple[Any, RNNG]:
    """The reference's random 2 x 256 ``FixedStackRNNG`` (float32, eval) and synlm's
    ``RNNG`` holding its weights (``tests/test_rnng_reference.py``'s ``transplanted``)."""
    from test_rnng_reference import transplanted

    models, dicts = import_reference(path)
    torch.manual_seed(0)
    config = {"w_dim": 256, "h_dim": 256, "num_layers": 2, "max_open_nts": 100,
              "max_cons_nts": 8}
    reference = models.FixedStackRNNG(dicts.TopDownActionDict(PTB_LABELS), vocab=len(vocab),
                                      padding_idx=0, dropout=0.0, **config).eval()
    fixture = {"state_dict": {k: v.detach().double() for k, v in
                              reference.state_dict().items()},
               "config": config, "nonterminals": PTB_LABELS, "words": vocab,
               "actions_itos": list(reference.action_dict.i2a)}
    ours, _ = transplanted(fixture)
    return reference, ours.float().eval()


def padded(rows: Sequence[Sequence[int]], device: torch.device) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [0] * (width - len(r)) for r in rows], device=device)


def measure_beam(args: argparse.Namespace, device: torch.device) -> dict:
    sentences = sample_sentences(args.sentences)
    types = sorted({w for s in sentences for w in s})
    vocab = ["<pad>", *types, *(f"<filler{i}>" for i in range(args.vocab_size - len(types) - 1))]
    ids = [[vocab.index(w) for w in s] for s in sentences]  # the reference's (0: <pad>)
    if args.reference:
        reference, ours = reference_and_transplant(args.reference, vocab)
        reference = reference.to(device)
    else:
        torch.manual_seed(0)
        reference, ours = None, RNNG(len(vocab) - 1, 2 + len(PTB_LABELS), 256, 256, 2,
                                     dropout=0.0).eval()
    ours = ours.to(device)
    # the same batches for both: longest first, --beam-batch sentences each
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    groups = [order[k:k + args.beam_batch] for k in range(0, len(order), args.beam_batch)]

    def run_ours(setting: tuple[int, int, int], rows: list[list[int]]) -> list[list[float]]:
        found = []
        for k in range(0, len(rows), args.beam_batch):
            chunk = rows[k:k + args.beam_batch]
            words = padded([[w - 1 for w in r] for r in chunk], device)
            lengths = torch.tensor([len(r) for r in chunk], device=device)
            settings = BeamSettings(*setting, max_memory_mb=1e9, batch_size=args.beam_batch)
            found += [list(r.surprisals) for r in search_sentences(ours, words, lengths,
                                                                     settings)]
        return found

    def run_reference(setting: tuple[int, int, int], rows: list[list[int]]) -> list[list[float]]:
        found = []
        with torch.no_grad():
            for k in range(0, len(rows), args.beam_batch):
                x = padded(rows[k:k + args.beam_batch], device)
                _, surprisals = reference.word_sync_beam_search(
                    x, torch.ones_like(x, dtype=torch.bool), *setting, stack_size_bound=100)
                found += [[float(s) for s in row] for row in surprisals]
        return found

    rows_in_order = [ids[i] for g in groups for i in g]
    words = sum(len(r) for r in ids)
    result: dict[str, Any] = {"device": describe(device), "sentences": len(ids), "words": words,
                              "batch_sentences": args.beam_batch, "vocab_size": len(vocab),
                              "reference": str(args.reference) if args.reference else None}
    if reference is not None:  # the same function: the first sentence alone, 10/5/1
        theirs = run_reference(BEAMS[0], ids[:1])[0]
        mine = run_ours(BEAMS[0], ids[:1])[0]
        result["sanity_max_abs_surprisal_difference"] = max(
            abs(a - b) for a, b in zip(theirs, mine, strict=True))
        if not result["sanity_max_abs_surprisal_difference"] <= 1e-4:
            raise SystemExit(f"the reference and synlm differ on the first sentence: "
                             f"{theirs} against {mine}")
    else:  # warm-up
        run_ours(BEAMS[0], ids[:1])
    result["load_before"] = load_note()
    result["settings"] = {}
    for setting in BEAMS:
        key = "/".join(map(str, setting))
        runs = {"synlm": run_ours} if reference is None else \
            {"reference": run_reference, "synlm": run_ours}
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        peaks: dict[str, list[float]] = {name: [] for name in runs}
        found: dict[str, list[list[float]]] = {}
        for round_ in range(args.repeats):  # ABBA: the order flips every round
            for name in (list(runs) if round_ % 2 == 0 else list(runs)[::-1]):
                with PeakMemory(device) as memory:
                    t, found[name] = timed(
                        functools.partial(runs[name], setting, rows_in_order), device)
                seconds[name].append(t)
                peaks[name].append(memory.peak_mb)
                print(f"  {key} round {round_ + 1} {name}: {t:.1f} s", flush=True)
        entry: dict[str, Any] = {}
        for name in runs:
            median = statistics.median(seconds[name])
            entry[name] = {"seconds": seconds[name], "median_seconds": median,
                           "sentences_per_s": len(ids) / median, "words_per_s": words / median,
                           "peak_memory_mb": max(peaks[name]),
                           "finite": all(math.isfinite(x) for r in found[name] for x in r),
                           "surprisals": found[name]}
        if reference is not None:
            ratios = [r / o for r, o in zip(seconds["reference"], seconds["synlm"], strict=True)]
            entry["speed_ratio_synlm_over_reference"] = statistics.median(ratios)
            entry["speed_ratio_range"] = [min(ratios), max(ratios)]
            entry["max_abs_surprisal_difference"] = max(
                abs(a - b) for ra, rb in zip(found["reference"], found["synlm"], strict=True)
                for a, b in zip(ra, rb, strict=True))
        result["settings"][key] = entry
    if args.profile:  # one search of the first --profile-sentences, 100/10/1, each code
        rows = ids[:args.profile_sentences]
        result["profile_sentences"] = len(rows)
        for name, run in runs.items():
            print(f"\n{name}, 100/10/1 on the first {len(rows)} sentences:")
            result[f"{name}_profile"] = profile_step(lambda run=run: run(BEAMS[-1], rows),
                                                     device, args.top)
    result["load_after"] = load_note()
    result["memory"] = memory.kind
    return result


def print_beam(r: dict) -> None:
    print(f"device: {r['device']}; {r['load_before']} (before), {r['load_after']} (after)")
    print(f"{r['sentences']} sentences ({r['words']} words) of sample.mrg, batches of "
          f"{r['batch_sentences']}, V = {r['vocab_size']}, random 2 x 256 model")
    for name in ("reference", "synlm"):
        if f"{name}_profile" in r:
            prof = r[f"{name}_profile"]
            print(f"{name}, one profiled search of {r['profile_sentences']} sentences at "
                  f"100/10/1: {prof['profiled_wall_s']:.1f} s wall, "
                  f"{prof['total_self_ms']:,.0f} ms self time, "
                  f"{prof['calls']:,} operator calls; top: " + ", ".join(
                      f"{e['op']} {e['share']:.0%}" for e in prof["by_op"][:5]))
    if "sanity_max_abs_surprisal_difference" in r:
        print(f"first sentence alone, 10/5/1: surprisals differ by at most "
              f"{r['sanity_max_abs_surprisal_difference']:.1e}")
    print("\n| beam/word beam/shift | code | seconds (median) | sentences/s | words/s | "
          "peak memory (MB) | synlm / reference speed (range) |\n|---|---|---|---|---|---|---|")
    for key, entry in r["settings"].items():
        for name in ("reference", "synlm"):
            if name in entry:
                e = entry[name]
                ratio = ""
                if name == "synlm" and "speed_ratio_synlm_over_reference" in entry:
                    lo, hi = entry["speed_ratio_range"]
                    ratio = (f"{entry['speed_ratio_synlm_over_reference']:.2f} "
                             f"({lo:.2f}-{hi:.2f})")
                print(f"| {key} | {name} | {e['median_seconds']:.1f} | "
                      f"{e['sentences_per_s']:.3f} | "
                      f"{e['words_per_s']:.2f} | {e['peak_memory_mb']:,.0f} | {ratio} |")
    for key, entry in r["settings"].items():
        if "max_abs_surprisal_difference" in entry:
            print(f"{key}: surprisals of all sentences differ by at most "
                  f"{entry['max_abs_surprisal_difference']:.1e}")
    print(f"memory: {r['memory']}")


# ---------------------------------------------------------------------- main
def add_training_options(train: argparse.ArgumentParser) -> None:
    """The options of a speed benchmark's ``train``: its batches."""
    train.add_argument("--batch", type=int, default=64, help="sentences a batch")
    train.add_argument("--warmup", type=int, default=2)
    train.add_argument("--steps", type=int, default=10)
    train.add_argument("--trees", type=Path,
                       help="a treebank file for the batches instead of the NLTK sample "
                            "(no SYNLM_DATA_DIR needed: a smoke run)")


def add_common_options(*parsers: argparse.ArgumentParser) -> None:
    """The options every subcommand of a speed benchmark takes."""
    for p in parsers:
        p.add_argument("--top", type=int, default=10, help="operators the profile lists")
        p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
        p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1")
        p.add_argument("--out", type=Path, help="write the results here as JSON")


def run(args: argparse.Namespace,
        subcommands: dict[str, tuple[Callable[[argparse.Namespace, torch.device], dict],
                                     Callable[[dict], None]]]) -> None:
    """Measure and print the subcommand ``args.what`` (``subcommands``: its measuring and
    printing functions) with ``args.threads`` on ``args.device``; ``args.out``: the JSON."""
    if args.threads:
        torch.set_num_threads(args.threads)
    measure, show = subcommands[args.what]
    result = measure(args, torch.device(args.device))
    show(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    train = sub.add_parser("train", help="a training step: RNNG beside an AWD-LSTM LM")
    train.add_argument("--size", type=int, default=256, help="embedding and hidden size")
    train.add_argument("--layers", type=int, default=2)
    add_training_options(train)
    train.add_argument("--profile", action="store_true",
                       help="profile one more RNNG step (torch.profiler)")
    beam = sub.add_parser("beam", help="beam search: synlm beside the released reference")
    beam.add_argument("--reference", type=Path,
                      help="the patched aistairc/rnng-pytorch checkout (its code folder)")
    beam.add_argument("--sentences", type=int, default=0, help="the first N (0: all 10)")
    beam.add_argument("--beam-batch", type=int, default=10, help="sentences a batch")
    beam.add_argument("--repeats", type=int, default=3,
                      help="rounds of each setting, the two codes alternating")
    beam.add_argument("--vocab-size", type=int, default=10000,
                      help="the random model's vocabulary, <pad> included")
    beam.add_argument("--profile", action="store_true",
                      help="profile one search of each code (torch.profiler)")
    beam.add_argument("--profile-sentences", type=int, default=3)
    add_common_options(train, beam)
    run(parser.parse_args(), {"train": (measure_training, print_training),
                              "beam": (measure_beam, print_beam)})


if __name__ == "__main__":
    main()
