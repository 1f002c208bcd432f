"""An LSTM run over a tree of states level by level, with a backward written for it.

Teacher forcing of the RNNG (``synlm.transition.rnng_levels``) runs LSTMs whose steps form a
tree rather than a chain: a push on the stack reads on the state of the item below it, a
composition's step on the same constituent's previous step. Level p's rows each continue one
row of level p - 1 (``below``), level 0 starts from the zero state; the input products of
every row are given at once. Left to autograd, every level's cell is a dozen small operations
and a product with the recurrent weight whose weight gradient is its own matrix product; here
the backward runs the levels in reverse by hand and takes the recurrent weight's gradient in
one product over every level. D independent LSTMs (the composition's two directions) run
side by side. The cell is ``nn.LSTMCell``'s (Hochreiter & Schmidhuber 1997, with a forget
gate), its gates in the order input, forget, cell, output.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


def _cell(gates: Tensor, below: Tensor) -> tuple[Tensor, ...]:
    """The gates' activations and the new cell and output from the pre-activations
    (D, n, 4H) and the cell below (D, n, H): (i, f, g, o, tanh(c), c, h)."""
    H = below.size(-1)
    i, f, _, o = torch.sigmoid(gates).chunk(4, -1)
    g = torch.tanh(gates.narrow(-1, 2 * H, H))
    cell = f * below + i * g
    tanh_cell = torch.tanh(cell)
    return i, f, g, o, tanh_cell, cell, o * tanh_cell


class _Levels(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gates_in: Tensor, w_hh: Tensor, sizes: list[int],
                below: list[Tensor]) -> Tensor:
        D, H = w_hh.size(0), w_hh.size(2)
        ctx.weight_dtype = w_hh.dtype
        w_hh = w_hh.to(gates_in.dtype)  # as autocast gives the products
        levels = gates_in.split(sizes, 1)
        zeros = gates_in.new_zeros(D, sizes[0], H)
        saved, outputs, inputs = [], [], []
        h = c = zeros
        for p, gates in enumerate(levels):
            if p:
                h, c = h.index_select(1, below[p - 1]), c.index_select(1, below[p - 1])
                inputs.append(h)
                gates = torch.baddbmm(gates, h, w_hh.transpose(1, 2))
            else:
                c = zeros
            i, f, g, o, tanh_cell, cell, out = _cell(gates, c)
            saved.append((i, f, g, o, tanh_cell, c))
            h, c = out, cell
            outputs.append(out)
        ctx.levels, ctx.below, ctx.sizes = saved, below, sizes
        ctx.save_for_backward(w_hh, torch.cat(inputs, 1) if inputs else zeros[:, :0])
        return torch.cat(outputs, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> Any:
        w_hh, inputs = ctx.saved_tensors
        grad_h = list(grad_out.split(ctx.sizes, 1))
        grad_c: list[Tensor | None] = [None] * len(ctx.sizes)
        grad_gates: list[Tensor] = []
        for p in reversed(range(len(ctx.sizes))):
            i, f, g, o, tanh_cell, below_c = ctx.levels[p]
            dh = grad_h[p]
            dc = dh * o * (1 - tanh_cell * tanh_cell)
            if grad_c[p] is not None:
                dc = dc + grad_c[p]
            grad_gates.append(torch.cat([dc * g * i * (1 - i), dc * below_c * f * (1 - f),
                                       dc * i * (1 - g * g), dh * tanh_cell * o * (1 - o)], -1))
            if p:  # to the rows below: their output's and their cell's gradient
                rows = ctx.below[p - 1]
                grad_h[p - 1] = grad_h[p - 1].index_add(
                    1, rows, torch.bmm(grad_gates[-1], w_hh))
                previous = grad_c[p - 1]
                grad_c[p - 1] = (torch.zeros_like(grad_h[p - 1]) if previous is None
                                 else previous).index_add(1, rows, dc * f)
        gates = torch.cat(grad_gates[::-1], 1)  # (D, N, 4H)
        grad_w = torch.bmm(gates[:, ctx.sizes[0]:].transpose(1, 2), inputs)  # (D, 4H, H)
        ctx.levels = None
        return gates, grad_w.to(ctx.weight_dtype), None, None


def lstm_by_levels(gates_in: Tensor, w_hh: Tensor, sizes: list[int],
                   below: list[Tensor]) -> Tensor:
    """D LSTMs over a tree of steps: ``gates_in`` (D, N, 4H) every row's input products (both
    biases in), level by level (``sizes``: rows a level, level 0 first); ``w_hh`` (D, 4H,
    H) the recurrent weights (a row's gates: its ``gates_in`` + ``w_hh`` h_below);
    ``below[p - 1]`` (n_p,): for each row of level p, the row of level p - 1 it continues
    -> (D, N, H) every row's output."""
    return _Levels.apply(gates_in, w_hh, sizes, below)
