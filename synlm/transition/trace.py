"""Reads and writes of a stack tensor whose backward touches only the rows they touched.

Teacher forcing writes each action's stack state into a (R, S, ...) tensor and reads earlier
positions back. Done with autograd's indexing, every read's gradient is a zero tensor of the
whole stack with its rows written in, and every in-place write clones the whole gradient:
the backward moves the whole stack once per action, a cost in actions × stack size
(docs/performance.md). Here the stack's values stay outside autograd; its gradient is one
buffer, into which a read's backward adds its rows and from which a write's backward takes
(and clears) the rows it wrote. A scalar ``token`` passes through every read and write in
program order, so that autograd runs their backward in exactly the reverse order: a write's
backward comes after that of every read of what it wrote, before that of any earlier read of
the position's previous value.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

Index = tuple[Tensor, ...]


class _Read(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, token: Tensor, values: Tensor, grads: dict[int, Tensor],
                index: Index) -> tuple[Tensor, Tensor]:
        ctx.values, ctx.grads, ctx.index = values, grads, index
        return values[index], token.clone()

    @staticmethod
    def backward(ctx: Any, grad_value: Tensor | None, grad_token: Tensor | None) -> Any:
        if grad_value is not None:
            _grad_of(ctx.values, ctx.grads).index_put_(ctx.index, grad_value, accumulate=True)
        return grad_token, None, None, None


class _Write(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, value: Tensor, token: Tensor, values: Tensor,
                grads: dict[int, Tensor], index: Index) -> Tensor:
        values[index] = value
        ctx.values, ctx.grads, ctx.index = values, grads, index
        return token.clone()

    @staticmethod
    def backward(ctx: Any, grad_token: Tensor | None) -> Any:
        grad = _grad_of(ctx.values, ctx.grads)
        grad_value = grad[ctx.index]
        grad[ctx.index] = 0.0
        return grad_value, grad_token, None, None, None


def _grad_of(values: Tensor, grads: dict[int, Tensor]) -> Tensor:
    """The gradient buffer of ``values``, made (zeros) the first time."""
    key = id(values)
    if key not in grads:
        grads[key] = torch.zeros_like(values)
    return grads[key]


class Trace:
    """The order of one teacher-forced run's stack reads and writes (module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.token = torch.zeros((), device=device, requires_grad=True)
        self._grads: dict[int, Tensor] = {}

    def read(self, values: Tensor, index: Index) -> Tensor:
        """``values[index]``, its gradient added into ``values``' buffer."""
        value, self.token = _Read.apply(self.token, values, self._grads, index)
        return value

    def write(self, values: Tensor, index: Index, value: Tensor) -> None:
        """``values[index] = value`` in place, ``value``'s gradient taken from the buffer."""
        self.token = _Write.apply(value, self.token, values, self._grads, index)
