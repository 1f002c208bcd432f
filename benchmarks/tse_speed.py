"""Benchmark: sentence scoring for the syntactic evaluation (``synlm.tse.scoring.ModelScorer``)
against the bare forward passes it needs, and the wall time of a whole benchmark.

Both sides score the same BLiMP sentences with the same model in eval mode: the baseline
times only ``SyntaxLM.target_log_probs`` on the padded, length-sorted batches the scorer
builds (made in advance); the scorer's time adds everything else (normalising the text,
encoding, batching, per-word sums, the result objects). Interleaved, median of the repeats;
the target is a ratio (scorer tokens/s over baseline tokens/s) of at least 0.8.
``--full`` then times all of BLiMP (67,000 pairs) through ``evaluate_benchmarks``.

    OMP_NUM_THREADS=2 SYNLM_DATA_DIR=/path/to/data python benchmarks/tse_speed.py \\
        --config awd_lstm.yaml --threads 2 --full
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from synlm.lightning_cli import from_config
from synlm.loading import load_model, untrained_model
from synlm.tse.benchmarks import evaluate_benchmarks
from synlm.tse.blimp import read_blimp
from synlm.tse.scoring import ModelScorer


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="a training config: its untrained model (seed 0)")
    src.add_argument("--ckpt_path", help="a checkpoint or run folder")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--pairs", type=int, default=10, help="BLiMP pairs a paradigm to time")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--full", action="store_true", help="also time all of BLiMP")
    return p.parse_args()


def batches(scorer: ModelScorer, sentences: list[list[str]]) -> list[tuple[torch.Tensor, ...]]:
    """The (tokens, targets) the scorer feeds the model, in its order."""
    rows = sorted((scorer.encode(words)[0] for words in sentences), key=len, reverse=True)
    eos, out = scorer.vocab.eos_id, []
    for start in range(0, len(rows), scorer.batch_size):
        chunk = rows[start:start + scorer.batch_size]
        tokens = torch.full((len(chunk), len(chunk[0]) + 2), eos, dtype=torch.long)
        for b, ids in enumerate(chunk):
            tokens[b, 1:len(ids) + 1] = torch.tensor(ids)
        tokens = tokens.to(scorer.device)
        out.append((tokens[:, :-1], tokens[:, 1:]))
    return out


def seconds(run: object, device: torch.device) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    run()  # type: ignore[operator]
    sync()
    return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = (untrained_model(from_config, args.config, 0, args.set) if args.config
             else load_model(args.ckpt_path))
    scorer = ModelScorer(model, args.batch_size, args.device)
    pairs = read_blimp(subset=args.pairs)
    sentences = [scorer.words(text) for pair in pairs for text in (pair.good, *pair.bad)]
    tokens = sum(len(scorer.encode(words)[0]) + 1 for words in sentences)
    feeds = batches(scorer, sentences)

    def forward() -> None:
        for x, y in feeds:
            model.target_log_probs(x, y)

    def score() -> None:
        scorer.score([scorer.words(text) for pair in pairs for text in (pair.good, *pair.bad)])

    seconds(forward, scorer.device), seconds(score, scorer.device)  # warm-up
    times = [(seconds(forward, scorer.device), seconds(score, scorer.device))
             for _ in range(args.repeats)]
    base = statistics.median(b for b, _ in times)
    cand = statistics.median(c for _, c in times)
    result = {"model": args.config or args.ckpt_path,
              "parameters": sum(p.numel() for p in model.parameters()),
              "device": f"{args.device}, {torch.get_num_threads()} threads",
              "sentences": len(sentences), "tokens": tokens, "batch_size": args.batch_size,
              "forward_tokens_per_s": round(tokens / base),
              "scorer_tokens_per_s": round(tokens / cand),
              "ratio": round(base / cand, 3)}
    if args.full:
        result["blimp_full_s"] = round(seconds(
            lambda: evaluate_benchmarks(scorer, ["blimp"]), scorer.device), 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
