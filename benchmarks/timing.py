"""Shared timing of the backbone micro-benchmarks: training steps of two backbones,
interleaved so that load from other processes hits both alike."""

from __future__ import annotations

import time

from torch import Tensor

from synlm.backbones.base import Backbone


def train_step_seconds(model: Backbone, x: Tensor) -> float:
    """Seconds of one forward + backward of ``model`` on embeddings ``x`` (B, T, E)."""
    start = time.perf_counter()
    model(x).hidden.square().mean().backward()
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
