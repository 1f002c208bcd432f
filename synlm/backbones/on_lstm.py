"""ON-LSTM: the ordered-neurons LSTM of Shen et al. 2019, backbone of ONLSTM-SYD (Du et al. 2020).

One layer (Du et al. 2020 eq. 1-11; yikangshen/Ordered-Neurons ON_LSTM.py:56-118), with
n = hidden_size / chunk_size master-gate chunks:

    gates = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh          (B, 2n + 4H)
    h^f   = gates[n:2n]                                    master-forget logits (eq. 14)
    f~    = cumax(h^f)          i~ = 1 - cumax(gates[:n])  master gates (eq. 5-6, 15)
    o, c^, i, f = sigmoid / tanh / sigmoid / sigmoid of the 4H block, each (n, chunk)
    w     = f~ * i~                                        (eq. 7)
    f^    = f * w + (f~ - w)     i^ = i * w + (i~ - w)     (eq. 8-9)
    c_t   = f^ * c_{t-1} + i^ * c^                         (eq. 10)
    h_t   = o * tanh(c_t)                                  (eq. 11)
    d_t   = 1 - mean(f~)                                   (eq. 12, divided by n)

The gate layout is the reference one, so its weights port one to one: the first 2n columns
are [master-input | master-forget] logits, then [o | c^ | i | f], each an H-block laid out
row-major as (n, chunk). DropConnect on W_hh is the reference LinearDropConnect: in training
a Bernoulli(p) mask zeroes weights *without* rescaling, one mask per window; at evaluation
the weight is multiplied by (1 - p); the bias is never dropped.

Speed: the input projection of a whole window is one matmul; the dropped W_hh is built once
per window (and, on CPU in float32, reordered once for oneDNN); the recurrence is a custom
autograd function whose forward records no graph and whose backward is hand-derived, so
each step costs one matmul plus about a dozen small kernels each way, and the W_hh
gradient of the whole window is a single matmul. Under autocast the recurrence runs in
float32 (cumax included). On CUDA (``kernel="auto"`` or ``"triton"``) the same loop runs
``synlm.kernels.on_lstm.TritonRecurrence``: per step one cuBLAS product and one fused Triton
kernel each way, equal to this path to float32 rounding (tests/test_kernels_on_lstm.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.backbones.base import LayerInsert, RecurrentStack
from synlm.kernels import Kernel, check_kernel, use_triton
from synlm.kernels.self_check import pick_recurrence
from synlm.modules import cumax, drop_connect
from synlm.outputs import BackboneOutput, Structure

#: Per-layer recurrent state: h (B, H) and c (B, n, chunk).
LayerState = tuple[Tensor, Tensor]


@functools.cache
def _onednn_linear_works() -> bool:
    """Whether this CPU build runs oneDNN's linear (probed once on a 1x1 product)."""
    try:
        one = torch.ones(1, 1).to_mkldnn()
        torch._C._nn.mkldnn_linear(one, one, None)
    except (AttributeError, RuntimeError):
        return False
    return True


def _step_matmul(weight: Tensor) -> Callable[[Tensor], Tensor]:
    """x (B, in) -> x @ weight.T (B, out) for every step of a window, weight prepared once.

    On CPU in float32, for weights of a million entries or more, oneDNN reorders the weight
    once into its blocked layout; a product with small B then runs about 1.5x faster than
    addmm at H = 1150 (for small weights it is no faster and slows the steps around it).
    """
    if (weight.device.type == "cpu" and weight.dtype == torch.float32
            and weight.numel() >= 2**20 and _onednn_linear_works()):
        packed = weight.contiguous().to_mkldnn()
        return lambda x: torch._C._nn.mkldnn_linear(x.to_mkldnn(), packed, None).to_dense()
    w_t = weight.t()
    return lambda x: x @ w_t


class _Recurrence(torch.autograd.Function):
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
        h, h_proj = h0, _step_matmul(w_hh)  # h_proj(h) = h @ W_hh^T
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
        dh, dc, dg_proj = d_hT, d_cT, _step_matmul(w_hh.t())  # dg_proj(dg) = dg @ W_hh
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


class ONLSTMCell(nn.Module):
    """One ON-LSTM layer run over a whole window (eq. 1-12).

    ``kernel``: ``"auto"`` runs the fused Triton recurrence on CUDA tensors and the PyTorch
    one elsewhere; ``"torch"`` or ``"triton"`` force one (synlm.kernels).
    """

    def __init__(
        self, input_size: int, hidden_size: int, chunk_size: int, weight_drop: float = 0.0,
        kernel: Kernel = "auto",
    ) -> None:
        super().__init__()
        if hidden_size % chunk_size:
            raise errors.SettingError("chunk_size", chunk_size,
                                      f"a divisor of each layer's size ({hidden_size} here)")
        self.hidden_size = hidden_size
        self.chunk_size = chunk_size
        self.n_chunk = hidden_size // chunk_size
        gates = 2 * self.n_chunk + 4 * hidden_size
        self.ih = nn.Linear(input_size, gates)
        self.hh = nn.Linear(hidden_size, gates)
        self.weight_drop = weight_drop
        self.kernel = check_kernel(kernel)

    def window_weight(self) -> Tensor:
        """W_hh for one window: DropConnect mask drawn once here, reused at every step."""
        return drop_connect(self.hh.weight, self.weight_drop, self.training)

    def init_state(self, batch_size: int, like: Tensor) -> LayerState:
        h = like.new_zeros(batch_size, self.hidden_size)
        return h, like.new_zeros(batch_size, self.n_chunk, self.chunk_size)

    def forward(
        self, x: Tensor, state: LayerState, w_hh: Tensor
    ) -> tuple[Tensor, LayerState, Tensor]:
        """x (B, T, I) -> outputs (B, T, H), new state, master-forget logits h^f (B, T, n)."""
        xi = F.linear(x.transpose(0, 1), self.ih.weight, self.ih.bias + self.hh.bias)  # (T, B, G)
        dtype = torch.promote_types(xi.dtype, torch.float32)  # the recurrence stays >= fp32
        recurrence = pick_recurrence(self.kernel, use_triton(self.kernel, xi), _Recurrence,
                                     "on_lstm", xi.device, dtype)
        with torch.autocast(x.device.type, enabled=False):
            hs, h, c, hf = recurrence.apply(
                xi.to(dtype), state[0].to(dtype), state[1].to(dtype), w_hh.to(dtype)
            )
        return hs.transpose(0, 1), (h, c), hf.transpose(0, 1)

    def extra_repr(self) -> str:
        return (f"chunk_size={self.chunk_size}, n_chunk={self.n_chunk}, "
                f"weight_drop={self.weight_drop}, kernel={self.kernel!r}")


class ONLSTM(RecurrentStack):
    """A stack of ON-LSTM layers with AWD-style regularisation (Shen et al. 2019 §5.1).

    Layer sizes are [input_size] + [hidden_size] * (L - 1) + [input_size] (tied decoder).
    Locked dropout: ``dropout_input`` on the embeddings, ``dropout_hidden`` between layers,
    ``dropout_output`` on the last layer (``hidden``). ``layers`` is the reference stack's
    ``outputs``: each inner layer after the between-layer dropout (what the next layer
    reads), and the *undropped* last layer; the reference applies AR to that last entry
    (docs/reference-implementations.md §1.2), which configs select with
    ``model.ar_target: last_layer``.

    ``distances`` (L, B, T) are 1 - mean(f~) per layer (eq. 12), the structure ``lm``;
    ``distance_features`` (L, B, T, n_max) are the master-forget logits h^f (eq. 14),
    zero-padded on the last dimension to the widest layer; ``spec.distance_feature_sizes[l]``
    is layer l's true n (heads size their layers from the spec in ``bind``).
    State: a ``StackState`` with one (h (B, H_l), c (B, n_l, chunk_size)) per layer.
    DropConnect masks of every layer are drawn once per window, before the input dropout.
    ``kernel`` picks each layer's time loop (``ONLSTMCell``): on a GPU the fused Triton one.
    """

    def __init__(
        self,
        input_size: int = 400,
        hidden_size: int = 1150,
        num_layers: int = 3,
        chunk_size: int = 10,
        dropout_input: float = 0.5,
        dropout_hidden: float = 0.3,
        dropout_output: float = 0.45,
        weight_drop: float = 0.45,
        inserts: Sequence[LayerInsert] = (),
        kernel: Kernel = "auto",
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, dropout_input, dropout_hidden,
                         dropout_output, inserts)
        self.hidden_size = hidden_size
        in_sizes = [input_size, *self.layer_sizes[:-1]]
        self.cells = nn.ModuleList(
            ONLSTMCell(i, h, chunk_size, weight_drop, kernel)
            for i, h in zip(in_sizes, self.layer_sizes, strict=True)
        )
        self.bind_inserts()
        self.spec = self.make_spec(
            provides=frozenset({"distances", "distance_features"}),
            structures=(Structure("lm", "distances"),),
            distance_feature_sizes=tuple(cell.n_chunk for cell in self.cells),
        )

    def window_weights(self) -> list[Tensor]:
        return [cell.window_weight() for cell in self.cells]  # one DropConnect mask per window

    def run_layer(self, index: int, x: Tensor, state: LayerState | None, weight: Tensor
                  ) -> tuple[Tensor, LayerState, Tensor]:
        cell = self.cells[index]
        if state is None:
            state = cell.init_state(x.size(0), x)
        return cell(x, state, weight)  # (B, T, H_l), ((B, H_l), (B, n_l, k)), h^f (B, T, n_l)

    def add_outputs(self, out: BackboneOutput, extras: list[Tensor]) -> None:
        n_max = max(self.spec.distance_feature_sizes)
        out.distances = torch.stack([1.0 - cumax(hf).mean(-1) for hf in extras])  # (L, B, T)
        out.distance_features = torch.stack(  # (L, B, T, n_max)
            [F.pad(hf, (0, n_max - hf.size(-1))) for hf in extras])
