"""ON-LSTM: the ordered-neurons LSTM of Shen et al. 2019, backbone of ONLSTM-SYD (Du et al. 2020).

One layer, one step (``on_lstm_step``; yikangshen/Ordered-Neurons ON_LSTM.py:56-118), with
n = hidden_size / chunk_size master-gate chunks of k = chunk_size neurons each; the columns
give the equation in Shen et al. 2019 and in Du et al. 2020 (which restates it):

                                                      shape          Shen 2019     Du 2020
    gates = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh     (B, 2n + 4H)
    o, ĉ, i, f = σ, tanh, σ, σ of the 4H block        (B, n, k)      the LSTM's    eq. 1-4
    f̃   = cumax(h^f),  h^f = gates[n:2n]              (B, n)         eq. 9         eq. 5, 14
    ĩ   = 1 − cumax(gates[:n])                        (B, n)         eq. 10        eq. 6
    ω   = f̃ ∘ ĩ                                       (B, n)         eq. 11        eq. 7
    f̂   = f ∘ ω + (f̃ − ω)                             (B, n, k)      eq. 12        eq. 8
    î   = i ∘ ω + (ĩ − ω)                             (B, n, k)      eq. 13        eq. 9
    c_t = f̂ ∘ c_{t-1} + î ∘ ĉ                         (B, n, k)      eq. 14        eq. 10
    h_t = o ∘ tanh(c_t)                               (B, H)         the LSTM's    eq. 11
    d_t = 1 − mean_k f̃_k                              (B,)           D_m − Σ f̃, /n eq. 12

cumax(x) = cumsum(softmax(x)); each master gate is one value per chunk, broadcast over the
chunk's k neurons. The gate layout is the reference one, so its weights port one to one: the
first 2n columns are [master-input | master-forget] logits, then [o | ĉ | i | f], each an
H-block laid out row-major as (n, k). DropConnect on W_hh is the reference
LinearDropConnect: in training a Bernoulli(p) mask zeroes weights *without* rescaling, one
mask per window; at evaluation the weight is multiplied by (1 - p); the bias is never dropped.

Kernels (``kernel``, synlm.kernels): the input projection of a whole window is one matmul
and the dropped W_hh is built once per window whichever runs the time loop; then

- ``"reference"``: ``reference_recurrence``, the equations above one step at a time in
  plain PyTorch, differentiated by autograd: the specification the others are tested
  against (slow: a dozen small ops a step, each recorded for the backward);
- ``"torch"``: ``synlm.kernels.on_lstm_torch.TorchRecurrence``, the same loop as a custom
  autograd function with a hand-written backward (CPU speed);
- ``"triton"``: ``synlm.kernels.on_lstm.TritonRecurrence``, one cuBLAS product and one fused
  Triton kernel per step each way;
- ``"auto"`` (default): Triton on CUDA tensors, the torch loop elsewhere.

Under autocast the time loop runs in float32 (cumax included).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.backbones.base import LayerInsert, RecurrentStack
from synlm.kernels import Kernel, check_kernel, use_triton
from synlm.kernels.on_lstm_torch import TorchRecurrence
from synlm.kernels.self_check import pick_recurrence
from synlm.modules import cumax, drop_connect
from synlm.outputs import BackboneOutput, Structure

#: Per-layer recurrent state: h (B, H) and c (B, n, chunk).
LayerState = tuple[Tensor, Tensor]


def on_lstm_step(xi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One ON-LSTM step (the module docstring's equations).

    Args:
        xi: (B, G) the input's share of the gates, W_ih x_t + b_ih + b_hh; G = 2n + 4H.
        h: (B, H) h_{t-1}.
        c: (B, n, k) c_{t-1}.
        w_hh: (G, H) the recurrent weight (after DropConnect).
    Returns:
        h_t (B, H), c_t (B, n, k) and the master-forget logits h^f_t (B, n).
    """
    B, n, k = c.shape
    gates = xi + h @ w_hh.T  # (B, 2n + 4H)
    l_i, l_f = gates[:, :n], gates[:, n : 2 * n]  # (B, n) master-gate logits
    o, c_hat, i, f = gates[:, 2 * n :].view(B, 4, n, k).unbind(1)  # (B, n, k) each
    o, c_hat, i, f = torch.sigmoid(o), torch.tanh(c_hat), torch.sigmoid(i), torch.sigmoid(f)
    f_m = cumax(l_f)[..., None]  # (B, n, 1) f̃, eq. 9
    i_m = 1.0 - cumax(l_i)[..., None]  # (B, n, 1) ĩ, eq. 10
    w = f_m * i_m  # (B, n, 1) ω, eq. 11
    f_hat = f * w + (f_m - w)  # (B, n, k) eq. 12
    i_hat = i * w + (i_m - w)  # (B, n, k) eq. 13
    c = f_hat * c + i_hat * c_hat  # (B, n, k) eq. 14
    h = (o * torch.tanh(c)).reshape(B, n * k)  # (B, H)
    return h, c, l_f


def reference_recurrence(xi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor
                         ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``kernel="reference"``: ``on_lstm_step`` over a window, differentiated by autograd.

    Same signature and outputs as the fast loops (``TorchRecurrence.apply``): xi (T, B, G),
    h0 (B, H), c0 (B, n, k), w_hh (G, H) -> hs (T, B, H), h_T (B, H), c_T (B, n, k) and the
    master-forget logits h^f (T, B, n).
    """
    h, c, hs, hfs = h0, c0, [], []
    for xi_t in xi.unbind(0):
        h, c, hf = on_lstm_step(xi_t, h, c, w_hh)
        hs.append(h)
        hfs.append(hf)
    return torch.stack(hs), h, c, torch.stack(hfs)


class ONLSTMCell(nn.Module):
    """One ON-LSTM layer run over a whole window (``on_lstm_step`` at every step).

    ``kernel``: ``"auto"`` runs the fused Triton loop on CUDA tensors and the torch one
    elsewhere; ``"torch"``, ``"triton"`` or ``"reference"`` force one (module docstring).
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
        if self.kernel == "reference":
            loop = reference_recurrence
        else:
            loop = pick_recurrence(self.kernel, use_triton(self.kernel, xi), TorchRecurrence,
                                   "on_lstm", xi.device, dtype).apply
        with torch.autocast(x.device.type, enabled=False):
            hs, h, c, hf = loop(  # (T, B, H), (B, H), (B, n, k), (T, B, n)
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

    ``distances`` (L, B, T) are 1 - mean(f~) per layer (Du et al. eq. 12), the structure
    ``lm``; ``distance_features`` (L, B, T, n_max) are the master-forget logits h^f (Du et
    al. eq. 14), zero-padded on the last dimension to the widest layer;
    ``spec.distance_feature_sizes[l]`` is layer l's true n (heads size their layers from the
    spec in ``bind``).
    State: a ``StackState`` with one (h (B, H_l), c (B, n_l, chunk_size)) per layer.
    DropConnect masks of every layer are drawn once per window, before the input dropout.
    ``kernel`` picks each layer's time loop (module docstring): on a GPU the fused Triton
    one, elsewhere the torch one; ``"reference"`` runs the equations step by step.
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
