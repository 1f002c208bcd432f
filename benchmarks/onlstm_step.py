"""Micro-benchmark: one ONLSTM training step (forward + backward) against AWDLSTM.

Both backbones get the same embeddings (B, T, input_size), train-mode dropouts and
DropConnect, and the same loss on ``hidden``. Until ``synlm.backbones.awd_lstm`` exists,
the baseline is a stack of ``WeightDropLSTM`` layers of the same sizes.

    PYTHONPATH=. .venv/bin/python benchmarks/onlstm_step.py --batch 20 --bptt 70 --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch
from torch import nn

from synlm.backbones.on_lstm import ONLSTM
from synlm.modules import WeightDropLSTM


class _LSTMStack(nn.Module):
    """Fallback baseline: AWD-LSTM's stack of weight-dropped one-layer LSTMs."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int) -> None:
        super().__init__()
        sizes = [input_size] + [hidden_size] * (num_layers - 1) + [input_size]
        self.rnns = nn.ModuleList(WeightDropLSTM(i, o, 0.5) for i, o in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for rnn in self.rnns:
            x, _ = rnn(x)
        return x


def baseline(args: argparse.Namespace) -> tuple[str, nn.Module]:
    try:
        from synlm.backbones.awd_lstm import AWDLSTM
    except ImportError:
        return "WeightDropLSTM stack", _LSTMStack(args.input, args.hidden, args.layers)
    return "AWDLSTM", AWDLSTM(
        input_size=args.input, hidden_size=args.hidden, num_layers=args.layers
    )


def step_time(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds of one forward + backward."""
    start = time.perf_counter()
    out = model(x)
    hidden = out if isinstance(out, torch.Tensor) else out.hidden
    hidden.pow(2).mean().backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


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
    name, base = baseline(args)
    onlstm = ONLSTM(args.input, args.hidden, args.layers, args.chunk)
    base.train()
    onlstm.train()
    for _ in range(2):  # warm-up
        step_time(base, x), step_time(onlstm, x)
    # interleaved, so load from other processes hits both alike; medians of each
    pairs = [(step_time(base, x), step_time(onlstm, x)) for _ in range(args.repeats)]
    t_base = statistics.median(b for b, _ in pairs)
    t_on = statistics.median(o for _, o in pairs)
    ratio = statistics.median(o / b for b, o in pairs)
    print(f"B={args.batch} T={args.bptt} sizes={args.input}/{args.hidden}x{args.layers} "
          f"chunk={args.chunk} threads={torch.get_num_threads()}")
    print(f"{name}: {t_base * 1e3:.1f} ms   ONLSTM: {t_on * 1e3:.1f} ms   "
          f"ratio (median of paired ratios) {ratio:.2f}")

if __name__ == "__main__":
    main()
