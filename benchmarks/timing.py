"""Shared timing of the backbone micro-benchmarks: training steps of two backbones,
interleaved so that load from other processes hits both alike."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor

from synlm.backbones.base import Backbone


def train_step_seconds(model: Backbone, x: Tensor) -> float:
    """Seconds of one forward + backward of ``model`` on embeddings ``x`` (B, T, E); on a GPU
    the device is synchronised before and after, so the time is the step's."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    model(x).hidden.square().mean().backward()
    sync()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return elapsed


def interleaved_steps(baseline: Backbone, candidate: Backbone, x: Tensor, repeats: int,
                      warmup: int = 2) -> list[tuple[float, float]]:
    """(baseline, candidate) step times, ``repeats`` pairs after ``warmup`` pairs."""
    for _ in range(warmup):
        train_step_seconds(baseline, x), train_step_seconds(candidate, x)
    return [(train_step_seconds(baseline, x), train_step_seconds(candidate, x))
            for _ in range(repeats)]


def saved_megabytes(forward: Callable[[], object]) -> float:
    """MB of the tensors autograd saves for backward while ``forward()`` runs."""
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(seen.values()) / 2**20


def paired_ratio(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Median baseline and candidate seconds, and the median of the paired ratios."""
    return (statistics.median(b for b, _ in pairs), statistics.median(c for _, c in pairs),
            statistics.median(c / b for b, c in pairs))


def step_parser(description: str, hidden: int) -> argparse.ArgumentParser:
    """The arguments of a backbone-against-AWD-LSTM step benchmark (PTB sizes by default);
    callers add their own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=70)
    parser.add_argument("--input", type=int, default=400)
    parser.add_argument("--hidden", type=int, default=hidden)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    return parser


def step_inputs(args: argparse.Namespace) -> Tensor:
    """Sets the torch threads (``--threads``) and seed 0; the embeddings (B, T, E) to time."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return torch.randn(args.batch, args.bptt, args.input, device=args.device)


def report_pair(baseline: Backbone, candidate: Backbone, x: Tensor, repeats: int,
                names: tuple[str, str]) -> None:
    """Times the two interleaved and prints their median step times and the median of the
    paired ratios (candidate / baseline)."""
    t_base, t_cand, ratio = paired_ratio(interleaved_steps(baseline, candidate, x, repeats))
    print(f"{names[0]}: {t_base * 1e3:.1f} ms   {names[1]}: {t_cand * 1e3:.1f} ms   "
          f"ratio (median of paired ratios) {ratio:.2f}")
