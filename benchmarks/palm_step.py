"""Micro-benchmark: one PaLM training step (AWD-LSTM + span attention, forward + backward)
against the same AWD-LSTM without it, and the memory the step keeps for backward.

Both get the same embeddings (B, T, input_size), train-mode dropouts and DropConnect, and
the same loss on ``hidden``. Memory is the bytes of the tensors autograd saves during the
forward, at T and 2T: the span attention keeps (B, T, K, ·) tensors, so doubling T doubles
it (never O(T²)).

    python benchmarks/palm_step.py --batch 20 --bptt 70 --threads 2
"""

from __future__ import annotations

import torch

from synlm.backbones import AWDLSTM, SpanAttention
from timing import report_pair, saved_megabytes, step_inputs, step_parser


def main() -> None:
    parser = step_parser(__doc__.splitlines()[0], hidden=1020)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--rrnn", type=int, default=200)
    parser.add_argument("--parser", type=int, default=100)
    args = parser.parse_args()
    x = step_inputs(args)
    base = AWDLSTM(args.input, args.hidden, args.layers).train()
    palm = AWDLSTM(args.input, args.hidden, args.layers, inserts=[SpanAttention(
        after=args.layers - 2, window=args.window, rrnn_size=args.rrnn,
        parser_size=args.parser)]).train()
    print(f"B={args.batch} T={args.bptt} sizes={args.input}/{args.hidden}x{args.layers} "
          f"window={args.window} rrnn={args.rrnn} parser={args.parser} "
          f"threads={torch.get_num_threads()}")
    report_pair(base, palm, x, args.repeats, ("AWDLSTM", "PaLM"))
    for name, model in (("AWDLSTM", base), ("PaLM", palm)):
        one, two = (saved_megabytes(
            lambda t=t, m=model: m(torch.randn(args.batch, t, args.input)))
            for t in (args.bptt, 2 * args.bptt))
        print(f"{name}: saved for backward {one:.1f} MB at T={args.bptt}, {two:.1f} MB at "
              f"T={2 * args.bptt} (x{two / one:.2f})")


if __name__ == "__main__":
    main()
