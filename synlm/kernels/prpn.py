"""The time loop of one PRPN reading layer with two fused Triton kernels per step and direction.

Same computation, signature and return value as
``synlm.kernels.prpn_torch.TorchReadingRecurrence`` (Shen et al. 2018 eq. 9-12 and the LN-LSTM
of ``synlm.modules.ln_lstm``, as ``synlm.backbones.prpn.ReadingLayer.step``); the memory is the
same tape (B, n + T, 2H) of [h | c] in time order, step t reading tape[:, t : t+n]. A forward
step is

    k_t   = kx_t + (h_{t−1}·m0) W_key^T                   cuBLAS addmm              eq. 9
    A     key ← k_t·m1; l = window_h k_t; s = exp(l − max)·g / (Σ + 1e-8);        eq. 10-11
          [h̃ | c̃] = s window; u = h̃·rmask                                          eq. 12
    z_t   = b_hh + u W_hh^T                               cuBLAS addmm
    B     pre = ih_t + LN_hh(z_t); [i, f, g, o] = [σ, σ, tanh, σ](pre);
          c_t = f c̃ + i g; h_t = o tanh(LN_c(c_t)); tape row n+t ← [h_t | c_t]
          (and h_t·m0_{t+1}, the next key's input, when there are key masks)

and a backward step mirrors it: kernel B' (the gate and both LayerNorm input gradients, from
d h_t, d c_t), du = dz W_hh (cuBLAS), kernel A' (the attention backward: the window rows'
gradients accumulated into d_tape, d gates, d key with the max's share spread over ties as
``amax``'s gradient is), da = d key W_key (cuBLAS). Kernel B' of step t − 1 adds da·m0_t to
d h_{t−1}, so no elementwise torch op runs inside either loop.

Saved for the backward: the tape, the input ih, the masked keys (T, B, H), z (T, B, 4H) and
[u | c̃] (T, B, 2H); the kernels recompute the logits, the attention, the LayerNorm statistics
and the activations from them. Per step and row that is 7H of its own plus ih (4H), which it
keeps alive, against the PyTorch path's 12H + 3n + 5.

The LayerNorm weight gradients are not accumulated per step: kernel B' stores d pre·x̂ (4H),
d LN_c·ĉ and d LN_c (H each; ĉ is the normalised c) per step and row, and one sum over (T, B)
after the loop gives d ln_w, d lnc_w and d lnc_b (d ln_b is the sum of d ih). The window's
weight gradients are one matmul each after the loop, as in the PyTorch path.

Kept as torch ops: the tape's initial copy of the memory, the first key input h_{−1}·m0_0,
the final d h_{−1} += da·m0_0 into the memory slot, and the reductions after the loop.

One program handles one batch row. Kernel A and A' walk H in chunks of BLOCK_H (a power of
two, at most ``MAX_TILE`` / BLOCK_N) in two passes: the logits (and d s) need every chunk
before the attention weights are known. Kernel B and B' hold the row's 4H gates whole, as a
(4, BLOCK_H) block, for the LayerNorms. H is a compile-time constant (a chunk loop needs
static bounds in Triton's interpreter).

Precision: a Python float argument reaches a compiled kernel as float32 (the interpreter
keeps it exact), so the two LayerNorm eps travel as a tensor [eps, eps_c] of the kernel's dtype:
in float64 the kernels normalise with exactly the eps of the PyTorch loop. Passed as floats,
1e-5 became 1e-5·(1 − 2.5e-8) on a GPU, which moved float64 gradients by up to 4e-9 relative
(docs/performance.md, "Float64 on a GPU"). Literals such as the 1e-8 take the dtype of the
tensor they meet, so they are exact.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from synlm.kernels.common import sigmoid, tanh

MAX_TILE = 4096  # elements of one (BLOCK_N, BLOCK_H) window chunk in kernels A and A'


@triton.jit
def _attention(l, gate, mask_n):
    """eq. 10-11 on one row: logits l and gates (BLOCK_N,) -> the logits with -inf on the
    padding, their max, exp(l − max), e = exp(l − max)·gate and Σe + 1e-8."""
    l = tl.where(mask_n, l, float("-inf"))
    top = tl.max(l, 0)
    ex = tl.where(mask_n, tl.exp(l - top), 0.0)
    e = ex * gate
    return l, top, ex, e, tl.sum(e, 0) + 1e-8


@triton.jit
def _attend(
    key_ptr, m1_ptr, win_ptr, gate_ptr, rmask_ptr, sel_ptr, stride_b, n,
    H: tl.constexpr, KEY_MASK: tl.constexpr, RMASK: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Kernel A, row b: key (B, H) (masked by m1 in place), the window tape[b, t : t+n]
    (n, 2H) at win_ptr with batch stride stride_b, gate (B, n) -> sel (B, 2H) = [u | c̃]."""
    b = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    mask_n = rn < n
    key_row = key_ptr + b * H
    win = win_ptr + b * stride_b + rn[:, None] * (2 * H)  # (BLOCK_N, 1) row starts
    # pass 1: the logits l = window_h · key (the key is pre-scaled by 1/√H)
    l = tl.zeros([BLOCK_N], dtype=key_ptr.dtype.element_ty)
    for h0 in range(0, H, BLOCK_H):
        rh = h0 + tl.arange(0, BLOCK_H)
        mask_h = rh < H
        key = tl.load(key_row + rh, mask=mask_h, other=0.0)
        if KEY_MASK:
            key = key * tl.load(m1_ptr + b * H + rh, mask=mask_h, other=0.0)
            tl.store(key_row + rh, key, mask=mask_h)
        mask = mask_n[:, None] & mask_h[None, :]
        l += tl.sum(tl.load(win + rh[None, :], mask=mask, other=0.0) * key[None, :], 1)
    gate = tl.load(gate_ptr + b * n + rn, mask=mask_n, other=0.0)
    _, _, _, e, denom = _attention(l, gate, mask_n)
    s = (e / denom)[:, None]  # (BLOCK_N, 1)
    # pass 2: [h̃ | c̃] = s · window, u = h̃ · rmask
    sel_row = sel_ptr + b * (2 * H)
    for h0 in range(0, H, BLOCK_H):
        rh = h0 + tl.arange(0, BLOCK_H)
        mask_h = rh < H
        mask = mask_n[:, None] & mask_h[None, :]
        u = tl.sum(s * tl.load(win + rh[None, :], mask=mask, other=0.0), 0)
        c_sel = tl.sum(s * tl.load(win + H + rh[None, :], mask=mask, other=0.0), 0)
        if RMASK:
            u = u * tl.load(rmask_ptr + rh, mask=mask_h, other=0.0)
        tl.store(sel_row + rh, u, mask=mask_h)
        tl.store(sel_row + H + rh, c_sel, mask=mask_h)


@triton.jit
def _attend_grad_inputs(key_ptr, du_ptr, dcs_ptr, rmask_ptr, b, rh, mask_h, H: tl.constexpr,
                        RMASK: tl.constexpr):
    """One chunk of row b's (masked) key, d h̃ = du·rmask and d c̃."""
    key = tl.load(key_ptr + b * H + rh, mask=mask_h, other=0.0)
    du = tl.load(du_ptr + b * H + rh, mask=mask_h, other=0.0)
    if RMASK:
        du = du * tl.load(rmask_ptr + rh, mask=mask_h, other=0.0)
    return key, du, tl.load(dcs_ptr + b * H + rh, mask=mask_h, other=0.0)


@triton.jit
def _attend_backward(
    key_ptr, m1_ptr, win_ptr, gate_ptr, rmask_ptr, du_ptr, dcs_ptr,
    d_win_ptr, d_gate_ptr, d_kx_ptr, stride_b, n,
    H: tl.constexpr, KEY_MASK: tl.constexpr, RMASK: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Kernel A', row b: from d sel = [du·rmask | d c̃] (B, H) each, add the window rows'
    gradients into d_win (the window of d_tape), write d gate (B, n) and d kx = d key·m1."""
    b = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    mask_n = rn < n
    win = win_ptr + b * stride_b + rn[:, None] * (2 * H)
    d_win = d_win_ptr + b * stride_b + rn[:, None] * (2 * H)
    # pass 1: the logits again, and d s = window · d sel
    l = tl.zeros([BLOCK_N], dtype=key_ptr.dtype.element_ty)
    ds = tl.zeros([BLOCK_N], dtype=key_ptr.dtype.element_ty)
    for h0 in range(0, H, BLOCK_H):
        rh = h0 + tl.arange(0, BLOCK_H)
        mask_h = rh < H
        mask = mask_n[:, None] & mask_h[None, :]
        key, du, dcs = _attend_grad_inputs(key_ptr, du_ptr, dcs_ptr, rmask_ptr, b, rh, mask_h,
                                           H, RMASK)
        w_h = tl.load(win + rh[None, :], mask=mask, other=0.0)
        w_c = tl.load(win + H + rh[None, :], mask=mask, other=0.0)
        l += tl.sum(w_h * key[None, :], 1)
        ds += tl.sum(w_h * du[None, :] + w_c * dcs[None, :], 1)
    gate = tl.load(gate_ptr + b * n + rn, mask=mask_n, other=0.0)
    l, top, ex, e, denom = _attention(l, gate, mask_n)
    s = e / denom
    # s = e / (Σe + 1e-8), e = exp(l − max l)·gate
    de = (ds - tl.sum(ds * s, 0)) / denom
    tl.store(d_gate_ptr + b * n + rn, de * ex, mask=mask_n)
    dl = de * e
    ties = tl.where(l == top, 1.0, 0.0)  # the max's gradient, shared over ties as amax's
    dl = dl - tl.sum(dl, 0) * ties / tl.sum(ties, 0)
    # pass 2: d key = dl · window_h, d window += s ⊗ d sel + dl ⊗ [key | 0]
    for h0 in range(0, H, BLOCK_H):
        rh = h0 + tl.arange(0, BLOCK_H)
        mask_h = rh < H
        mask = mask_n[:, None] & mask_h[None, :]
        key, du, dcs = _attend_grad_inputs(key_ptr, du_ptr, dcs_ptr, rmask_ptr, b, rh, mask_h,
                                           H, RMASK)
        d_key = tl.sum(dl[:, None] * tl.load(win + rh[None, :], mask=mask, other=0.0), 0)
        if KEY_MASK:
            d_key = d_key * tl.load(m1_ptr + b * H + rh, mask=mask_h, other=0.0)
        tl.store(d_kx_ptr + b * H + rh, d_key, mask=mask_h)
        d_h = tl.load(d_win + rh[None, :], mask=mask, other=0.0)
        d_h += s[:, None] * du[None, :] + dl[:, None] * key[None, :]
        tl.store(d_win + rh[None, :], d_h, mask=mask)
        d_c = tl.load(d_win + H + rh[None, :], mask=mask, other=0.0) + s[:, None] * dcs[None, :]
        tl.store(d_win + H + rh[None, :], d_c, mask=mask)


@triton.jit
def _row(x, rq, q: tl.constexpr):
    """Row q of a (4, BLOCK_H) block, as (BLOCK_H,)."""
    return tl.sum(tl.where(rq[:, None] == q, x, 0.0), 0)


@triton.jit
def _layer_norm(x, mask, N: tl.constexpr, eps):
    """x̂ = (x − mean)·rstd over the N valid lanes of a 1-d block (zero elsewhere), rstd."""
    xc = tl.where(mask, x - tl.sum(x, 0) / N, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, 0) / N + eps)
    return xc * rstd, rstd


@triton.jit
def _lstm_gates(z_ptr, ih_ptr, ln_w_ptr, ln_b_ptr, b, rq, quad, mask, H: tl.constexpr, eps):
    """Row b of pre = ih + LN_hh(z) as a (4, BLOCK_H) block [i, f, g, o] -> the activations
    [σ, σ, tanh, σ](pre), x̂ of LN_hh and its rstd."""
    z = tl.load(z_ptr + b * (4 * H) + quad, mask=mask, other=0.0)
    zc = tl.where(mask, z - tl.sum(tl.sum(z, 1), 0) / (4 * H), 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(zc * zc, 1), 0) / (4 * H) + eps)
    x_hat = zc * rstd
    ln_w = tl.load(ln_w_ptr + quad, mask=mask, other=0.0)
    pre = tl.load(ih_ptr + b * (4 * H) + quad, mask=mask, other=0.0)
    pre += x_hat * ln_w + tl.load(ln_b_ptr + quad, mask=mask, other=0.0)
    act = tl.where(rq[:, None] == 2, tanh(pre), sigmoid(pre))
    return act, x_hat, rstd, ln_w


@triton.jit
def _cell(
    z_ptr, ih_ptr, sel_ptr, ln_w_ptr, ln_b_ptr, lnc_w_ptr, lnc_b_ptr, out_ptr, m0_ptr, a_ptr,
    eps_ptr, stride_b, H: tl.constexpr, KEY_MASK: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Kernel B, row b: z (B, 4H), ih (B, 4H), c̃ = sel[:, H:], [eps, eps_c] (2,) -> [h_t | c_t]
    into the tape row at out_ptr (batch stride stride_b), and a = h_t·m0 (B, H) when KEY_MASK."""
    b = tl.program_id(0)
    eps, eps_c = tl.load(eps_ptr), tl.load(eps_ptr + 1)
    rq = tl.arange(0, 4)
    rh = tl.arange(0, BLOCK_H)
    mask_h = rh < H
    quad = rq[:, None] * H + rh[None, :]  # (4, BLOCK_H) offsets of [i, f, g, o]
    mask = (rq[:, None] < 4) & mask_h[None, :]
    act, _, _, _ = _lstm_gates(z_ptr, ih_ptr, ln_w_ptr, ln_b_ptr, b, rq, quad, mask, H, eps)
    i, f, g, o = _row(act, rq, 0), _row(act, rq, 1), _row(act, rq, 2), _row(act, rq, 3)
    c = f * tl.load(sel_ptr + b * (2 * H) + H + rh, mask=mask_h, other=0.0) + i * g
    c_hat, _ = _layer_norm(c, mask_h, H, eps_c)
    nc = c_hat * tl.load(lnc_w_ptr + rh, mask=mask_h, other=0.0)
    nc += tl.load(lnc_b_ptr + rh, mask=mask_h, other=0.0)
    h = o * tanh(nc)
    row = out_ptr + b * stride_b
    tl.store(row + rh, h, mask=mask_h)
    tl.store(row + H + rh, c, mask=mask_h)
    if KEY_MASK:
        a = h * tl.load(m0_ptr + b * H + rh, mask=mask_h, other=0.0)
        tl.store(a_ptr + b * H + rh, a, mask=mask_h)


@triton.jit
def _cell_backward(
    z_ptr, ih_ptr, sel_ptr, ln_w_ptr, ln_b_ptr, lnc_w_ptr, lnc_b_ptr, tape_ptr, d_tape_ptr,
    d_a_ptr, m0_ptr, d_ih_ptr, d_z_ptr, ln_grad_ptr, dcs_ptr, eps_ptr, stride_b,
    H: tl.constexpr, KEY_MASK: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Kernel B', row b. Reads d h_t = d_tape row + d_a (·m0_{t+1}: the next key's input) and
    d c_t from the d_tape row (complete: later steps are done); writes d ih = d pre (B, 4H),
    d z (B, 4H), d c̃ (B, H) and the row's LayerNorm weight terms (B, 6H) =
    [d pre·x̂ | d LN_c·ĉ | d LN_c]. [eps, eps_c] (2,) at eps_ptr."""
    b = tl.program_id(0)
    eps, eps_c = tl.load(eps_ptr), tl.load(eps_ptr + 1)
    rq = tl.arange(0, 4)
    rh = tl.arange(0, BLOCK_H)
    mask_h = rh < H
    quad = rq[:, None] * H + rh[None, :]
    mask = (rq[:, None] < 4) & mask_h[None, :]
    act, x_hat, rstd, ln_w = _lstm_gates(z_ptr, ih_ptr, ln_w_ptr, ln_b_ptr, b, rq, quad, mask,
                                         H, eps)
    i, f, g, o = _row(act, rq, 0), _row(act, rq, 1), _row(act, rq, 2), _row(act, rq, 3)
    c_sel = tl.load(sel_ptr + b * (2 * H) + H + rh, mask=mask_h, other=0.0)
    row = b * stride_b + rh
    c_hat, rstd_c = _layer_norm(tl.load(tape_ptr + row + H, mask=mask_h, other=0.0), mask_h, H,
                                eps_c)
    lnc_w = tl.load(lnc_w_ptr + rh, mask=mask_h, other=0.0)
    tc = tanh(c_hat * lnc_w + tl.load(lnc_b_ptr + rh, mask=mask_h, other=0.0))
    dh = tl.load(d_tape_ptr + row, mask=mask_h, other=0.0)
    d_a = tl.load(d_a_ptr + b * H + rh, mask=mask_h, other=0.0)
    if KEY_MASK:
        d_a = d_a * tl.load(m0_ptr + b * H + rh, mask=mask_h, other=0.0)
    dh += d_a
    # h = o tanh(LN_c(c)): LayerNorm backward to d c
    d_nc = dh * o * (1.0 - tc * tc)
    d_ch = d_nc * lnc_w
    dc = rstd_c * (d_ch - tl.sum(d_ch, 0) / H - c_hat * (tl.sum(d_ch * c_hat, 0) / H))
    dc = tl.where(mask_h, dc + tl.load(d_tape_ptr + row + H, mask=mask_h, other=0.0), 0.0)
    # c = f c̃ + i g, h = o tanh(.): d pre = (upstream of each gate) · (its activation')
    up = tl.where(rq[:, None] == 0, (dc * g)[None, :], (dc * c_sel)[None, :])
    up = tl.where(rq[:, None] == 2, (dc * i)[None, :], up)
    up = tl.where(rq[:, None] == 3, (dh * tc)[None, :], up)
    d_pre = up * tl.where(rq[:, None] == 2, 1.0 - act * act, act * (1.0 - act))
    tl.store(d_ih_ptr + b * (4 * H) + quad, d_pre, mask=mask)
    # pre = ih + LN_hh(z): LayerNorm backward to d z
    d_xh = d_pre * ln_w
    mean_d = tl.sum(tl.sum(d_xh, 1), 0) / (4 * H)
    mean_dx = tl.sum(tl.sum(d_xh * x_hat, 1), 0) / (4 * H)
    tl.store(d_z_ptr + b * (4 * H) + quad, rstd * (d_xh - mean_d - x_hat * mean_dx), mask=mask)
    grads = ln_grad_ptr + b * (6 * H)
    tl.store(grads + quad, d_pre * x_hat, mask=mask)
    tl.store(grads + 4 * H + rh, d_nc * c_hat, mask=mask_h)
    tl.store(grads + 5 * H + rh, d_nc, mask=mask_h)
    tl.store(dcs_ptr + b * H + rh, dc * f, mask=mask_h)


def _blocks(n: int, H: int) -> tuple[dict[str, int], dict[str, int]]:
    """Launch constants of kernels A/A' and B/B'."""
    block_n = triton.next_power_of_2(n)
    block_h = triton.next_power_of_2(H)
    attend = {"H": H, "BLOCK_N": block_n, "num_warps": 4,
              "BLOCK_H": min(block_h, max(1, MAX_TILE // block_n))}
    cell = {"H": H, "BLOCK_H": block_h, "num_warps": min(16, max(4, block_h // 128))}
    return attend, cell


def _eps_tensor(like: Tensor, eps: float, eps_c: float) -> Tensor:
    """[eps, eps_c] (2,) in ``like``'s dtype and device, filled on the device (no host copy,
    so no wait for the stream)."""
    eps_t = like.new_full((2,), eps)
    eps_t[1] = eps_c
    return eps_t


class TritonReadingRecurrence(torch.autograd.Function):
    """Drop-in for ``TorchReadingRecurrence``: ih (T, B, 4H), kx (T, B, H), gates (T, B, n) in
    window order, memory (B, n, 2H) slot 0 newest, w_key (H, H), w_hh (4H, H), b_hh, ln_w,
    ln_b (4H,), lnc_w, lnc_b (H,), key_masks (2, T, B, H) or None, rmask (H,) or None, eps,
    eps_c -> the tape (B, n + T, 2H)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, ih: Tensor, kx: Tensor, gates: Tensor, memory: Tensor, w_key: Tensor,
        w_hh: Tensor, b_hh: Tensor, ln_w: Tensor, ln_b: Tensor, lnc_w: Tensor, lnc_b: Tensor,
        key_masks: Tensor | None, rmask: Tensor | None, eps: float, eps_c: float,
    ) -> Tensor:
        T, B, G = ih.shape
        H, n = G // 4, memory.size(1)
        ih, kx, gates = ih.contiguous(), kx.contiguous(), gates.contiguous()
        ln_w, ln_b, lnc_w, lnc_b = (p.contiguous() for p in (ln_w, ln_b, lnc_w, lnc_b))
        tape = ih.new_empty(B, n + T, 2 * H)
        tape[:, :n] = memory.flip(1)
        tape_h = tape[..., :H]
        keys, z, sel = ih.new_empty(T, B, H), ih.new_empty(T, B, G), ih.new_empty(T, B, 2 * H)
        none = ih.new_zeros(1)  # stands for an absent mask (never read)
        masked = key_masks is not None
        m0, m1 = key_masks.contiguous().unbind(0) if masked else ([none] * T, [none] * T)
        rm = none if rmask is None else rmask.contiguous()
        flags = {"KEY_MASK": masked, "RMASK": rmask is not None}
        attend, cell = _blocks(n, H)
        eps_t = _eps_tensor(ih, eps, eps_c)
        a = tape_h[:, n - 1] * m0[0] if masked else tape_h[:, n - 1]  # (B, H) the key's input
        w_key_t, w_hh_t = w_key.t(), w_hh.t()
        for t in range(T):
            torch.addmm(kx[t], a, w_key_t, out=keys[t])  # eq. 9
            _attend[(B,)](keys[t], m1[t], tape[:, t:], gates[t], rm, sel[t], tape.stride(0),
                          n, **flags, **attend)
            torch.addmm(b_hh, sel[t, :, :H], w_hh_t, out=z[t])
            # at the last step the a it writes (with m0_{T−1}) is never read
            _cell[(B,)](z[t], ih[t], sel[t], ln_w, ln_b, lnc_w, lnc_b, tape[:, n + t],
                        m0[min(t + 1, T - 1)], a if masked else none, eps_t, tape.stride(0),
                        KEY_MASK=masked, **cell)
            if not masked:
                a = tape_h[:, n + t]
        ctx.save_for_backward(ih, gates, w_key, w_hh, ln_w, ln_b, lnc_w, lnc_b, key_masks,
                              rmask, tape, keys, z, sel)
        ctx.eps = eps_t
        return tape

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_tape: Tensor):  # type: ignore[override]
        (ih, gates, w_key, w_hh, ln_w, ln_b, lnc_w, lnc_b, key_masks, rmask, tape, keys, z,
         sel) = ctx.saved_tensors
        T, B, G = z.shape
        H, n = G // 4, gates.size(2)
        d_tape = d_tape.clone(memory_format=torch.contiguous_format)  # accumulates
        new = z.new_empty
        d_ih, d_z, d_kx, d_gates = new(T, B, G), new(T, B, G), new(T, B, H), new(T, B, n)
        ln_grads = new(T, B, 6 * H)  # [d pre·x̂ | d LN_c·ĉ | d LN_c] per step and row
        du, dcs, d_a = new(B, H), new(B, H), z.new_zeros(B, H)  # d a: from the step after
        none = z.new_zeros(1)
        masked = key_masks is not None
        m0, m1 = key_masks.contiguous().unbind(0) if masked else ([none] * T, [none] * T)
        rm = none if rmask is None else rmask.contiguous()
        flags = {"KEY_MASK": masked, "RMASK": rmask is not None}
        attend, cell = _blocks(n, H)
        stride = tape.stride(0)
        for t in reversed(range(T)):
            _cell_backward[(B,)](z[t], ih[t], sel[t], ln_w, ln_b, lnc_w, lnc_b, tape[:, n + t],
                                 d_tape[:, n + t], d_a, m0[min(t + 1, T - 1)], d_ih[t], d_z[t],
                                 ln_grads[t], dcs, ctx.eps, stride, KEY_MASK=masked, **cell)
            torch.mm(d_z[t], w_hh, out=du)
            _attend_backward[(B,)](keys[t], m1[t], tape[:, t:], gates[t], rm, du, dcs,
                                   d_tape[:, t:], d_gates[t], d_kx[t], stride, n, **flags,
                                   **attend)
            torch.mm(d_kx[t], w_key, out=d_a)  # d a_t, a_t = h_{t−1}·m0_t
        d_tape[:, n - 1, :H] += (d_a * m0[0]) if masked else d_a  # the memory's h_{−1}
        # the window's weight gradients, one matmul or sum each
        a_in = tape[:, n - 1 : n + T - 1, :H].transpose(0, 1)  # (T, B, H) h_{t−1}
        a_in = a_in * key_masks[0] if masked else a_in
        d_w_key = d_kx.flatten(0, 1).t() @ a_in.flatten(0, 1)
        d_w_hh = d_z.flatten(0, 1).t() @ sel[..., :H].flatten(0, 1)
        d_ln_w, d_lnc_w, d_lnc_b = ln_grads.sum((0, 1)).split([G, H, H])
        return (
            d_ih, d_kx, d_gates, d_tape[:, :n].flip(1), d_w_key, d_w_hh, d_z.sum((0, 1)),
            d_ln_w, d_ih.sum((0, 1)), d_lnc_w, d_lnc_b, None, None, None, None,
        )


#: The fused recurrence ``synlm.kernels.self_check`` compares with the PyTorch loop.
FUSED = TritonReadingRecurrence


def check_problem(device: torch.device, dtype: torch.dtype) -> tuple[list[Tensor], list]:
    """The self-check's problem: 4 steps, a batch of 2, H 8, 3 slots, with key masks and a
    recurrent-dropout mask; the eleven tensor inputs are differentiated."""
    g = torch.Generator().manual_seed(0)
    T, B, H, n = 4, 2, 8, 3

    def rand(*shape: int, scale: float = 1.0) -> Tensor:
        return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).to(device, dtype)

    grads = [rand(T, B, 4 * H), rand(T, B, H), torch.sigmoid(rand(T, B, n, scale=2.0)),
             rand(B, n, 2 * H), rand(H, H, scale=0.5), rand(4 * H, H, scale=0.5),
             rand(4 * H, scale=0.1), 1 + rand(4 * H, scale=0.1), rand(4 * H, scale=0.1),
             1 + rand(H, scale=0.1), rand(H, scale=0.1)]
    key_masks = ((torch.rand(2, T, B, H, generator=g) >= 0.3) / 0.7).to(device, dtype)
    rmask = ((torch.rand(H, generator=g) >= 0.25) / 0.75).to(device, dtype)
    return grads, [key_masks, rmask, 1e-5, 1e-5]
