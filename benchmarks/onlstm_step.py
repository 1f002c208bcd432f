"""Micro-benchmark: one ONLSTM training step (forward + backward) against AWDLSTM.

Both backbones get the same embeddings (B, T, input_size), train-mode dropouts and
DropConnect, and the same loss on ``hidden``.

    python benchmarks/onlstm_step.py --batch 20 --bptt 70 --threads 2
"""

from __future__ import annotations

import torch

from synlm.backbones import AWDLSTM, ONLSTM
from timing import report_pair, step_inputs, step_parser


def main() -> None:
    parser = step_parser(__doc__.splitlines()[0], hidden=1150)
    parser.add_argument("--chunk", type=int, default=10)
    args = parser.parse_args()
    x = step_inputs(args)
    base = AWDLSTM(args.input, args.hidden, args.layers).train()
    onlstm = ONLSTM(args.input, args.hidden, args.layers, args.chunk).train()
    print(f"B={args.batch} T={args.bptt} sizes={args.input}/{args.hidden}x{args.layers} "
          f"chunk={args.chunk} threads={torch.get_num_threads()}")
    report_pair(base, onlstm, x, args.repeats, ("AWDLSTM", "ONLSTM"))


if __name__ == "__main__":
    main()
