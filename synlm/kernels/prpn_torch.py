"""The time loop of one PRPN reading layer at CPU speed: a custom autograd function with a
hand-written backward (``kernel="torch"``, and ``"auto"`` off CUDA).

It computes what ``synlm.backbones.prpn.ReadingLayer.reference`` computes (Shen et al. 2018
eq. 9-12 and the layer-normalised LSTM step, one step at a time; tests/test_prpn.py and
tests/test_reference_kernel.py compare the two, forward and gradients), from inputs the
layer prepares for the whole window. Its speed comes from:

- a memory that is a tape (B, n + T, 2H) of [h | c] in time order, read by offset: no
  memory is shifted or copied from one step to the next;
- the input projections hoisted out of the loop: the LSTM's input gates and the input half
  of the attention key are one matmul each for the window;
- a forward that records no graph, a backward written by hand that walks the steps in
  reverse, and the window's weight gradients as one matmul each;
- LayerNorm through its private ATen forward and backward ops, which return and take the
  mean and 1/std (``synlm.kernels.private_ops``, guarded).

The fused GPU version of this loop is ``synlm.kernels.prpn.TritonReadingRecurrence``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from synlm.kernels.private_ops import layer_norm_backward, layer_norm_with_stats


class TorchReadingRecurrence(torch.autograd.Function):
    """The time loop of one reading layer, with a hand-written backward.

    The memory is a tape (B, n + T, 2H) of [h | c] in time order: the n carried slots, then
    one row per step, so step t reads the window tape[:, t : t+n] (steps t−n .. t−1) by
    offset, and nothing is shifted or copied. The forward records no graph; the backward
    walks the steps in reverse, and the weight gradients of the window are one matmul each.

    Inputs (time-major, contiguous): ih (T, B, 4H) = LN_ih(W_ih x); kx (T, B, H) the input
    half of the scaled key with its bias; gates (T, B, n) in window order (index i gates step
    t−n+i); memory (B, n, 2H) slot 0 newest; w_key (H, H) the scaled h half of the key
    weight; the LN-LSTM's w_hh, b_hh and LayerNorm parameters; key_masks (2, T, B, H) or
    None (dropout on h_{t−1} and on the key); rmask (H,) or None; the two LayerNorm eps.
    Output: the tape (B, n + T, 2H).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, ih: Tensor, kx: Tensor, gates: Tensor, memory: Tensor, w_key: Tensor,
        w_hh: Tensor, b_hh: Tensor, ln_w: Tensor, ln_b: Tensor, lnc_w: Tensor, lnc_b: Tensor,
        key_masks: Tensor | None, rmask: Tensor | None, eps: float, eps_c: float,
    ) -> Tensor:
        T, B, G = ih.shape
        H, n = G // 4, memory.size(1)
        tape = ih.new_empty(B, n + T, 2 * H)
        tape[:, :n] = memory.flip(1)
        tape_h, tape_c = tape[..., :H], tape[..., H:]
        new = ih.new_empty
        keys, z_in, acts, tcs = new(T, B, H), new(T, B, G), new(T, B, G), new(T, B, H)
        logits, ex, att, denom = new(T, B, n), new(T, B, n), new(T, B, n), new(T, B, 1)
        sel = new(T, B, 1, 2 * H)  # the attended [h̃ | c̃]
        stats: list[Tensor] = []  # mean and rstd of LN_hh and LN_c per step
        w_key_t, w_hh_t = w_key.t(), w_hh.t()
        m0, m1 = (None, None) if key_masks is None else key_masks.unbind(0)
        for t in range(T):
            window, window_h = tape[:, t : t + n], tape_h[:, t : t + n]  # steps t−n .. t−1
            a = tape_h[:, n + t - 1] if m0 is None else tape_h[:, n + t - 1] * m0[t]
            key = torch.addmm(kx[t], a, w_key_t, out=keys[t])  # (B, H) eq. 9
            if m1 is not None:
                key.mul_(m1[t])
            # (B, n) eq. 10, as (B, 1, H) @ (B, H, n): the fast layout of a CPU batched matvec
            lg = torch.bmm(key[:, None], window_h.transpose(1, 2), out=logits[t, :, None])[:, 0]
            e = torch.exp(lg - lg.amax(-1, keepdim=True), out=ex[t]) * gates[t]  # eq. 11
            s = torch.div(e, torch.sum(e, -1, keepdim=True, out=denom[t]).add_(1e-8), out=att[t])
            hc = torch.bmm(s[:, None], window, out=sel[t])[:, 0]  # (B, 2H) eq. 12
            u = hc[:, :H] if rmask is None else hc[:, :H] * rmask
            z = torch.addmm(b_hh, u, w_hh_t, out=z_in[t])  # (B, 4H)
            y, *stat = layer_norm_with_stats(z, ln_w, ln_b, eps)
            pre = ih[t] + y
            i, f, g, o = torch.sigmoid(pre, out=acts[t]).split(H, dim=-1)  # [i, f, g, o]
            torch.tanh(pre[:, 2 * H : 3 * H], out=g)  # the g block takes tanh, not σ
            c = torch.addcmul(f * hc[:, H:], i, g, out=tape_c[:, n + t])
            nc, *stat_c = layer_norm_with_stats(c, lnc_w, lnc_b, eps_c)
            torch.mul(o, torch.tanh(nc, out=tcs[t]), out=tape_h[:, n + t])
            stats.append(torch.cat([*stat, *stat_c], dim=1))  # (B, 4)
        ctx.save_for_backward(
            tape, gates, w_key, w_hh, ln_w, ln_b, lnc_w, lnc_b, key_masks, rmask,
            keys, z_in, logits, ex, att, denom, acts, tcs, sel, torch.stack(stats),
        )
        return tape

    @staticmethod
    def backward(ctx, d_tape: Tensor):  # type: ignore[override]
        (tape, gates, w_key, w_hh, ln_w, ln_b, lnc_w, lnc_b, key_masks, rmask, keys, z_in,
         logits, ex, att, denom, acts, tcs, sel, stats) = ctx.saved_tensors
        T, B, G = z_in.shape
        H, n = G // 4, gates.size(2)
        tape_h, tape_c = tape[..., :H], tape[..., H:]
        d_tape = d_tape.clone(memory_format=torch.contiguous_format)  # accumulates
        d_tape_h, d_tape_c = d_tape[..., :H], d_tape[..., H:]
        new = z_in.new_empty
        d_ih, d_z, d_kx, d_gates = new(T, B, G), new(T, B, G), new(T, B, H), new(T, B, n)
        d_ln_w, d_ln_b, d_lnc_w, d_lnc_b = (torch.zeros_like(w) for w in (ln_w, ln_b, lnc_w, lnc_b))
        m0, m1 = (None, None) if key_masks is None else key_masks.unbind(0)
        # (T, B, 1) each, contiguous: the LayerNorm backward kernel reads them raw
        mean, rstd, mean_c, rstd_c = stats.permute(2, 0, 1)[..., None].contiguous()
        # what the steps need of the forward, for all steps at once: the max's share of the
        # logits' gradient (spread over ties, as amax's gradient), and e = exp(l − max)·gate
        ties = logits == logits.amax(-1, keepdim=True)
        tie_share = ties / ties.sum(-1, keepdim=True)
        e_all = ex * gates
        for t in reversed(range(T)):
            window, window_h = tape[:, t : t + n], tape_h[:, t : t + n]
            d_window = d_tape[:, t : t + n]
            dh, dc = d_tape_h[:, n + t], d_tape_c[:, n + t]  # complete: later steps are done
            i, f, g, o = acts[t].split(H, dim=-1)
            tc, cs = tcs[t], sel[t, :, 0, H:]
            # h = o tanh(LN_c(c)), c = f c̃ + i g
            dnc, gw, gb = layer_norm_backward(dh * o * (1 - tc * tc), tape_c[:, n + t],
                                              mean_c[t], rstd_c[t], lnc_w, lnc_b)
            dc = dc + dnc
            d_lnc_w += gw
            d_lnc_b += gb
            di, df, dg, do = d_ih[t].split(H, dim=-1)  # d pre-activation = d ih = d LN_hh out
            torch.mul(dc * g, i * (1 - i), out=di)
            torch.mul(dc * cs, f * (1 - f), out=df)
            torch.mul(dc * i, 1 - g * g, out=dg)
            torch.mul(dh * tc, o * (1 - o), out=do)
            dz, gw, gb = layer_norm_backward(d_ih[t], z_in[t], mean[t], rstd[t], ln_w, ln_b)
            d_ln_w += gw
            d_ln_b += gb
            d_z[t] = dz
            du = dz @ w_hh  # (B, H)
            dsel = torch.cat([du if rmask is None else du * rmask, dc * f], dim=-1)  # (B, 2H)
            # sel = s @ window, s = e / (Σe + 1e-8), e = exp(l − max l) · gate
            s = att[t]
            ds = torch.bmm(dsel[:, None], window.transpose(1, 2))[:, 0]  # (B, n)
            d_window.addcmul_(s[:, :, None], dsel[:, None])
            de = (ds - torch.sum(ds * s, -1, keepdim=True)) / denom[t]
            torch.mul(de, ex[t], out=d_gates[t])
            dl = de * e_all[t]
            dl = dl - torch.sum(dl, -1, keepdim=True) * tie_share[t]
            # l = window_h · key, key = (kx + a W_key^T) · m1, a = h_{t−1} · m0
            dkey = torch.bmm(dl[:, None], window_h)[:, 0]
            d_window[..., :H].addcmul_(dl[:, :, None], keys[t][:, None])
            dkey = torch.mul(dkey, m1[t], out=d_kx[t]) if m1 is not None else d_kx[t].copy_(dkey)
            da = dkey @ w_key
            d_tape_h[:, n + t - 1] += da if m0 is None else da * m0[t]
        # the window's weight gradients, one matmul each
        a_in = tape_h[:, n - 1 : n + T - 1].transpose(0, 1)  # (T, B, H) h_{t−1}
        u_in = sel[:, :, 0, :H]
        d_w_key = d_kx.flatten(0, 1).t() @ (a_in if m0 is None else a_in * m0).flatten(0, 1)
        d_w_hh = d_z.flatten(0, 1).t() @ (u_in if rmask is None else u_in * rmask).flatten(0, 1)
        return (
            d_ih, d_kx, d_gates, d_tape[:, :n].flip(1), d_w_key, d_w_hh, d_z.sum((0, 1)),
            d_ln_w, d_ln_b, d_lnc_w, d_lnc_b, None, None, None, None,
        )
