"""The ON-LSTM time loop of one layer with one fused Triton kernel per step and direction.

Same computation and signature as ``synlm.kernels.on_lstm_torch.TorchRecurrence`` (the
equations of ``synlm.backbones.on_lstm``, numbered as in Du et al. 2020, eq. 1-11;
docs/models/onlstm.md). A forward step is

    gates_t = xi_t + h_{t-1} W_hh^T                          one cuBLAS addmm
    c_t, h_t = step(gates_t, c_{t-1})                        one kernel: master-gate softmax
                                                             and cumsum, the four gates, eq. 8-11

and a backward step is one kernel for every gate gradient (the cumax Jacobian included) and
one product dg_t W_hh for d h_{t-1}. The forward saves only the pre-activations, the cells and
the outputs; the backward kernel recomputes the activations from them, so the saved memory
is (T, B, G + 2H) = (T, B, 6H + 2n) against the PyTorch path's (T, B, 7H + 2n) (its
activations, cells, tanh of the cells, outputs and softmaxes).

One program handles one batch row: the master gates need the whole row's softmax and cumsum
over the n chunks. Blocks are (BLOCK_N, BLOCK_K), the chunk count and size rounded up to
powers of two.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from synlm.kernels.common import masked_softmax, sigmoid, tanh


@triton.jit
def _master_gates(g_row, n, rn, mask_n):
    """[i~, f~] (BLOCK_N,) each and the two softmaxes they are the cumsums of (eq. 5-6)."""
    soft_i = masked_softmax(tl.load(g_row + rn, mask=mask_n, other=0.0), mask_n)
    soft_f = masked_softmax(tl.load(g_row + n + rn, mask=mask_n, other=0.0), mask_n)
    return 1.0 - tl.cumsum(soft_i, 0), tl.cumsum(soft_f, 0), soft_i, soft_f


@triton.jit
def _activations(gates_ptr, b, n, k, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Row b's gates after their nonlinearities, eq. 1-9, as the forward computes them and
    the backward recomputes them: the lanes and offsets of the row, the master gates i~, f~
    (BLOCK_N,) and their softmaxes, w (BLOCK_N, 1), and o, c^, i, f, f^, i^ (BLOCK_N, BLOCK_K).
    """
    H = n * k
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mask_n = rn < n
    mask = mask_n[:, None] & (rk[None, :] < k)
    cell = rn[:, None] * k + rk[None, :]  # (BLOCK_N, BLOCK_K) offsets in an H-block
    g_row = gates_ptr + b * (2 * n + 4 * H)
    i_m, f_m, soft_i, soft_f = _master_gates(g_row, n, rn, mask_n)
    w = (f_m * i_m)[:, None]  # eq. 7
    quad = g_row + 2 * n + cell
    o = sigmoid(tl.load(quad, mask=mask, other=0.0))
    c_hat = tanh(tl.load(quad + H, mask=mask, other=0.0))
    i = sigmoid(tl.load(quad + 2 * H, mask=mask, other=0.0))
    f = sigmoid(tl.load(quad + 3 * H, mask=mask, other=0.0))
    f_hat = f * w + (f_m[:, None] - w)  # eq. 8
    i_hat = i * w + (i_m[:, None] - w)  # eq. 9
    return (rn, mask_n, mask, cell, i_m, f_m, soft_i, soft_f, w,
            o, c_hat, i, f, f_hat, i_hat)


@triton.jit
def _forward_step(
    gates_ptr, c_prev_ptr, c_ptr, h_ptr, n, k,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """One step for row b: gates (B, G), c_{t-1} (B, n, k) -> c_t (B, n, k), h_t (B, H)."""
    b = tl.program_id(0)
    (_, _, mask, cell, _, _, _, _, _,
     o, c_hat, _, _, f_hat, i_hat) = _activations(gates_ptr, b, n, k, BLOCK_N, BLOCK_K)
    row = b * (n * k) + cell
    c = f_hat * tl.load(c_prev_ptr + row, mask=mask, other=0.0) + i_hat * c_hat  # eq. 10
    tl.store(c_ptr + row, c, mask=mask)
    tl.store(h_ptr + row, o * tanh(c), mask=mask)  # eq. 11


@triton.jit
def _backward_step(
    gates_ptr, c_prev_ptr, c_ptr, dh_ptr, d_out_ptr, d_hf_ptr, dc_ptr, dg_ptr, n, k,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Row b of one backward step.

    Reads d h_t = dh (from dg_{t+1} W_hh) + d_out_t, the carried d c_t (updated in place to
    d c_{t-1}) and the gradient of the returned master-forget logits d_hf_t; writes the gate
    pre-activation gradients dg_t (B, G).
    """
    b = tl.program_id(0)
    H = n * k
    (rn, mask_n, mask, cell, i_m, f_m, soft_i, soft_f, w,
     o, c_hat, i, f, f_hat, i_hat) = _activations(gates_ptr, b, n, k, BLOCK_N, BLOCK_K)
    row = b * H + cell
    c_prev = tl.load(c_prev_ptr + row, mask=mask, other=0.0)
    tc = tanh(tl.load(c_ptr + row, mask=mask, other=0.0))
    dh = tl.load(dh_ptr + row, mask=mask, other=0.0) + tl.load(d_out_ptr + row, mask=mask,
                                                                other=0.0)
    dc = tl.load(dc_ptr + row, mask=mask, other=0.0) + dh * o * (1.0 - tc * tc)  # eq. 11
    dg_row = dg_ptr + b * (2 * n + 4 * H)
    dg_quad = dg_row + 2 * n + cell
    tl.store(dg_quad, dh * tc * o * (1.0 - o), mask=mask)
    tl.store(dg_quad + H, dc * i_hat * (1.0 - c_hat * c_hat), mask=mask)
    tl.store(dg_quad + 2 * H, dc * c_hat * w * i * (1.0 - i), mask=mask)
    tl.store(dg_quad + 3 * H, dc * c_prev * w * f * (1.0 - f), mask=mask)
    # eq. 7-10 summed over each chunk: c = (f~ - w(1-f)) c_prev + (i~ - w(1-i)) c^, w = f~ i~
    d_w = tl.sum(dc * (c_prev * (f - 1.0) + c_hat * (i - 1.0)), 1)
    d_f_m = tl.sum(dc * c_prev, 1) + d_w * i_m
    d_i_m = tl.sum(dc * c_hat, 1) + d_w * f_m
    # through the cumsums (a reverse cumsum; i~ = 1 - cumsum) and the softmaxes
    d_soft_i = -tl.cumsum(d_i_m, 0, reverse=True)
    d_soft_f = tl.cumsum(d_f_m, 0, reverse=True)
    d_li = soft_i * (d_soft_i - tl.sum(soft_i * d_soft_i, 0))
    d_lf = soft_f * (d_soft_f - tl.sum(soft_f * d_soft_f, 0))
    d_lf += tl.load(d_hf_ptr + b * n + rn, mask=mask_n, other=0.0)
    tl.store(dg_row + rn, d_li, mask=mask_n)
    tl.store(dg_row + n + rn, d_lf, mask=mask_n)
    tl.store(dc_ptr + row, dc * f_hat, mask=mask)  # d c_{t-1}


def _blocks(n: int, k: int) -> dict[str, int]:
    return {"BLOCK_N": triton.next_power_of_2(n), "BLOCK_K": triton.next_power_of_2(k)}


class TritonRecurrence(torch.autograd.Function):
    """xi (T, B, G), h0 (B, H), c0 (B, n, k), w_hh (G, H) -> hs (T, B, H), h_T, c_T, h^f (T, B, n).

    G = 2n + 4H; xi already holds W_ih x + b_ih + b_hh and w_hh is the window's dropped
    weight, as for the PyTorch path.
    """

    @staticmethod
    def forward(ctx, xi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor):  # type: ignore[override]
        T, B, _ = xi.shape
        n, k = c0.shape[1:]
        H = n * k
        xi, w_t = xi.contiguous(), w_hh.t()
        gates = torch.empty_like(xi)
        cs = xi.new_empty(T + 1, B, n, k)  # c_{t-1} at index t
        hs = xi.new_empty(T, B, H)
        cs[0] = c0
        h, blocks = h0.contiguous(), _blocks(n, k)
        for t in range(T):
            torch.addmm(xi[t], h, w_t, out=gates[t])
            _forward_step[(B,)](gates[t], cs[t], cs[t + 1], hs[t], n, k, **blocks)
            h = hs[t]
        ctx.save_for_backward(h0, w_hh, gates, cs, hs)
        return hs, hs[T - 1].clone(), cs[T].clone(), gates[:, :, n : 2 * n].contiguous()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_hs: Tensor, d_hT: Tensor, d_cT: Tensor, d_hf: Tensor):  # type: ignore[override]
        h0, w_hh, gates, cs, hs = ctx.saved_tensors
        T, B, G = gates.shape
        n, k = cs.shape[2:]
        H = n * k
        d_hs, d_hf = d_hs.contiguous(), d_hf.contiguous()
        dg = torch.empty_like(gates)
        dh = d_hT.contiguous()
        dc = d_cT.clone(memory_format=torch.contiguous_format)  # carried in place
        blocks = _blocks(n, k)
        for t in reversed(range(T)):
            _backward_step[(B,)](gates[t], cs[t], cs[t + 1], dh, d_hs[t], d_hf[t], dc, dg[t],
                                 n, k, **blocks)
            dh = dg[t] @ w_hh  # d h_{t-1}
        h_prev = torch.cat((h0.unsqueeze(0), hs[:-1]), 0).view(T * B, H)
        d_w_hh = dg.view(T * B, G).t() @ h_prev
        return dg, dh, dc, d_w_hh


#: The fused recurrence ``synlm.kernels.self_check`` compares with the PyTorch loop.
FUSED = TritonRecurrence


def check_problem(device: torch.device, dtype: torch.dtype) -> tuple[list[Tensor], list]:
    """The self-check's problem: xi, h0, c0, w_hh of 4 steps, a batch of 2, 3 chunks of 3
    (sizes that are not powers of two, so the masked lanes run too); nothing else."""
    g = torch.Generator().manual_seed(0)
    T, B, n, k = 4, 2, 3, 3
    H, G = n * k, 2 * n + 4 * n * k

    def rand(*shape: int, scale: float = 1.0) -> Tensor:
        return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).to(device, dtype)

    return [rand(T, B, G), rand(B, H), rand(B, n, k), rand(G, H, scale=0.3)], []
