"""Micro-benchmark: one ONLSTM training step (forward + backward) against AWDLSTM.

Both backbones get the same embeddings (B, T, input_size), train-mode dropouts and
DropConnect, and the same loss on ``hidden``.

    python benchmarks/onlstm_step.py --batch 20 --bptt 70 --threads 2
"""

from __future__ import annotations

import argparse
import statistics

import torch

from synlm.backbones import AWDLSTM, ONLSTM
from timing import interleaved_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=70)
    parser.add_argument("--input", type=int, default=400)
    parser.add_argument("--hidden", type=int, default=1150)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.bptt, args.input)
    name = "AWDLSTM"
    base = AWDLSTM(args.input, args.hidden, args.layers).train()
    onlstm = ONLSTM(args.input, args.hidden, args.layers, args.chunk).train()
    pairs = interleaved_steps(base, onlstm, x, args.repeats)
    t_base = statistics.median(b for b, _ in pairs)
    t_on = statistics.median(o for _, o in pairs)
    ratio = statistics.median(o / b for b, o in pairs)
    print(f"B={args.batch} T={args.bptt} sizes={args.input}/{args.hidden}x{args.layers} "
          f"chunk={args.chunk} threads={torch.get_num_threads()}")
    print(f"{name}: {t_base * 1e3:.1f} ms   ONLSTM: {t_on * 1e3:.1f} ms   "
          f"ratio (median of paired ratios) {ratio:.2f}")


if __name__ == "__main__":
    main()
