"""The ON-LSTM time loop of one layer at CPU speed: a custom autograd function with a
hand-written backward (``kernel="torch"``, and ``"auto"`` off CUDA).

It computes what ``synlm.backbones.on_lstm.reference_recurrence`` computes (Shen et al.
2019 eq. 9-14 one step at a time; tests/test_on_lstm.py and tests/test_reference_kernel.py
compare the two, forward and gradients), with the same signature and outputs. Its speed
comes from:

- a forward that records no autograd graph (about 14 kernels a step) and writes into
  buffers allocated once per window;
- a backward that precomputes, for the whole window, every factor that does not depend on
  the incoming gradient, so a step is one matmul plus about a dozen elementwise kernels,
  and the W_hh gradient of the window is one (G, T*B) x (T*B, H) matmul;
- on CPU in float32, the per-step products through oneDNN on a W_hh reordered once
  (``synlm.kernels.private_ops.step_matmul``, a guarded private op).

The fused GPU version of this loop is ``synlm.kernels.on_lstm.TritonRecurrence``. Equation
numbers in the comments are Du et al. 2020's (eq. 1-12; the backbone's docstring maps them
to Shen et al. 2019's).
"""

from __future__ import annotations

import torch
from torch import Tensor

from synlm.kernels.private_ops import step_matmul


class TorchRecurrence(torch.autograd.Function):
    """The ON-LSTM time loop of one layer, with a hand-written backward.

    Inputs: xi (T, B, G) = W_ih x + b_ih + b_hh for the whole window, G = 2n + 4H;
    h0 (B, H); c0 (B, n, k); w_hh (G, H) the (already dropped) recurrent weight.
    Outputs: hs (T, B, H), h_T (B, H), c_T (B, n, k), h^f (T, B, n) master-forget logits.

    The forward records no autograd graph (about 14 kernels a step). The backward
    precomputes, for the whole window, every factor that does not depend on the incoming
    gradient, so a step is one matmul plus about a dozen elementwise kernels, and the
    W_hh gradient is one (G, T*B) x (T*B, H) matmul.
    """

    @staticmethod
    def forward(ctx, xi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor):  # type: ignore[override]
        T, B, G = xi.shape
        n, k = c0.shape[1:]
        H = n * k
        gates = xi.new_empty(T, B, G)  # pre-activations
        acts = xi.new_empty(T, B, 4, n, k)  # o, c^, i, f after their nonlinearity
        cs = xi.new_empty(T + 1, B, n, k)  # c_{t-1} at index t
        tcs = xi.new_empty(T, B, n, k)  # tanh(c_t)
        hs = xi.new_empty(T, B, H)
        sign, offset = _master_affine(xi)
        softs = []
        cs[0] = c0
        h, h_proj = h0, step_matmul(w_hh)  # h_proj(h) = h @ W_hh^T
        # per-step views of the window buffers, made once
        xi_t, gates_t, acts_t = xi.unbind(0), gates.unbind(0), acts.unbind(0)
        cs_t, tcs_t, hs_t = cs.unbind(0), tcs.unbind(0), hs.view(T, B, n, k).unbind(0)
        for t in range(T):
            g = torch.add(xi_t[t], h_proj(h), out=gates_t[t])  # (B, G)
            s = torch.softmax(g[:, : 2 * n].view(B, 2, n), dim=-1)  # (B, 2, n)
            softs.append(s)
            master = torch.addcmul(offset, s.cumsum(-1), sign).unsqueeze(-1)  # [i~, f~] eq. 5-6
            w = master.prod(1, keepdim=True)  # (B, 1, n, 1) eq. 7
            a = acts_t[t]
            torch.sigmoid(g[:, 2 * n :].view(B, 4, n, k), out=a)
            torch.tanh(g[:, 2 * n + H : 2 * n + 2 * H].view(B, n, k), out=a[:, 1])
            hat = torch.addcmul(master - w, w, a[:, 2:])  # [i^, f^] (B, 2, n, k) eq. 8-9
            c = torch.addcmul(hat[:, 1] * cs_t[t], hat[:, 0], a[:, 1], out=cs_t[t + 1])  # eq. 10
            tc = torch.tanh(c, out=tcs_t[t])
            h = torch.mul(a[:, 0], tc, out=hs_t[t]).view(B, H)  # eq. 11
        ctx.save_for_backward(h0, w_hh, acts, torch.stack(softs), cs, tcs, hs)
        return hs, h.clone(), cs[T].clone(), gates[:, :, n : 2 * n].contiguous()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_hs: Tensor, d_hT: Tensor, d_cT: Tensor, d_hf: Tensor):  # type: ignore[override]
        h0, w_hh, acts, soft, cs, tcs, hs = ctx.saved_tensors
        T, B, _, n, k = acts.shape
        H = n * k
        # gradient-independent factors for the whole window, (T, B, ...)
        sign, offset = _master_affine(acts)
        master = torch.addcmul(offset, soft.cumsum(-1), sign).unsqueeze(-1)  # (T, B, 2, n, 1)
        w = master.prod(2)  # (T, B, n, 1)
        o, cc, i, f = acts.unbind(2)  # (T, B, n, k)
        hat = master - w.unsqueeze(2) * (1.0 - acts[:, :, 2:])  # [i^, f^] (T, B, 2, n, k)
        c_prev = cs[:-1]
        dc_from_h = o * (1.0 - tcs * tcs)  # d c_t / d h_t
        d_o = tcs * o * (1.0 - o)  # o-logit grad per unit d h_t
        # c^-, i-, f-logit grads per unit d c_t
        d_cif = torch.stack(
            (hat[:, :, 0] * (1.0 - cc * cc), cc * w * i * (1.0 - i), c_prev * w * f * (1.0 - f)), 2
        )
        # per unit d c_t, summed over the chunk: d w, d i~ (direct), d f~ (direct)
        d_wif = torch.stack((c_prev * (f - 1.0) + cc * (i - 1.0), cc, c_prev), 2)
        cross = master.squeeze(-1).flip(2)  # [f~, i~]: d i~ += d w * f~, d f~ += d w * i~
        signed_soft = soft * sign  # cumax backward ends with the softmax Jacobian; i~ = 1 - cumax
        rev_cumsum = torch.ones(n, n, dtype=acts.dtype, device=acts.device).tril()
        # h^f_t is read from h_{t-1}: its direct gradient joins d h_{t-1}
        d_h_hf = d_hf @ w_hh[n : 2 * n]  # (T, B, H)
        d_out = d_hs.clone()
        d_out[:-1] += d_h_hf[1:]

        dg = acts.new_empty(T, B, 2 * n + 4 * H)
        # per-step views, made once
        dg_t, d_out_t, f_hat_t = dg.unbind(0), d_out.unbind(0), hat[:, :, 1].unbind(0)
        d_master_in_t = dg[:, :, : 2 * n].view(T, B, 2, n).unbind(0)
        d_gate_t = dg[:, :, 2 * n :].view(T, B, 4, n, k).unbind(0)
        dh, dc, dg_proj = d_hT, d_cT, step_matmul(w_hh.t())  # dg_proj(dg) = dg @ W_hh
        for t in reversed(range(T)):
            dhv = (dh + d_out_t[t]).view(B, n, k)
            dc = torch.addcmul(dc, dhv, dc_from_h[t])
            torch.mul(dhv, d_o[t], out=d_gate_t[t][:, 0])
            torch.mul(dc.unsqueeze(1), d_cif[t], out=d_gate_t[t][:, 1:])
            sums = (dc.unsqueeze(1) * d_wif[t]).sum(-1)  # (B, 3, n)
            d_master = torch.addcmul(sums[:, 1:], sums[:, :1], cross[t])  # [d i~, d f~]
            d_sm = d_master @ rev_cumsum  # (B, 2, n) through the cumsum
            d_sm = d_sm - torch.linalg.vecdot(soft[t], d_sm).unsqueeze(-1)
            torch.mul(signed_soft[t], d_sm, out=d_master_in_t[t])
            dh = dg_proj(dg_t[t])
            dc = dc * f_hat_t[t]
        dg[:, :, n : 2 * n] += d_hf
        h_prev = torch.cat((h0.unsqueeze(0), hs[:-1]), 0).view(T * B, H)
        d_w_hh = dg.view(T * B, -1).t() @ h_prev
        return dg, dh + d_h_hf[0], dc, d_w_hh


def _master_affine(like: Tensor) -> tuple[Tensor, Tensor]:
    """(sign, offset), both (2, 1): [i~, f~] = offset + sign * cumsum(softmax([l_i, l_f]))."""
    sign = torch.tensor([[-1.0], [1.0]], dtype=like.dtype, device=like.device)
    return sign, 1.0 - sign.clamp_min(0.0)
