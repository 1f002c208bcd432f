"""PRPN: Parsing-Reading-Predict Networks (Shen et al., ICLR 2018), and PRPN-SYD (Du et al.
2020, Appendix A.4.2).

Per step t, as yikangshen/PRPN computes it (model_PRPN.py, ParsingNetwork.py,
ReadingNetwork.py, PredictNetwork.py, LSTMCell.py), with n = n_slots, L = n_lookback, E the
embedding size and H the hidden size; the last column is the paper's equation:

    parse    d_t, d'_{t+1} = ReLU(W_d ReLU(Norm(W_c [e_{t-L} .. e_t])))  (B,) each   eq. 7-8, 13
             α(Δ)  = σ(10 τ Δ + 5)                soft (the code's default)
                   = (hardtanh(2 τ Δ + 1) + 1)/2  hard (``--hard``, the README's setting)
             g_t[k]  = Π_{j≤k} α(d_t      − d_{t−j})   (B, n) gate of memory slot k   eq. 5-6
             g'_t[k] = Π_{j≤k} α(d'_{t+1} − d_{t−j})   (B, n) the predictor's gate
    read     (per layer; memory m_h, m_c (B, n, H): h, c of steps t−1 .. t−n, slot k = t−1−k)
             k_t = W_x x_t + W_h h_{t−1}                          (B, H)               eq. 9
             s_t = exp(m_h k_t/√H − max)·g_t / (Σ + 1e-8)         (B, n)               eq. 10-11
             h̃_t, c̃_t = Σ_k s_t[k] (m_h, m_c)[k]                  (B, H) each          eq. 12
             h_t, c_t = LN-LSTM(x_t, (h̃_t · rmask, c̃_t))         (B, H) each
    predict  k'_t = W_p h_t   (top reading layer; memory m'_h (B, n, H) of its past h)
             p_t = exp(m'_h k'_t/√H − max)·g'_t / (Σ + 1e-8)      (B, n)
             sel_t = Σ_k p_t[k] m'_h[k]                            (B, H)
             out_t = tanh(Norm(W_o [h_t; sel_t]))                  (B, E)               eq. 14

``ReadingLayer.step`` and ``PredictNetwork.attend_step`` are these equations, one step at a
time. τ = 1/resolution of the code (res 0.1 ⇔ τ = 10, the paper's temperature). Before the
start the past distances are +inf, so those slots are closed. The code's gate product
includes the slot j = 0 term α(0) (σ(5) soft, 1 hard); the paper's eq. 5 starts at j = 1.

PRPN-SYD replaces the parser by LSTM_w → Conv → LSTM_d and two 2-layer feed-forward heads:
d_lm (with d'_{t+1}) drives the gates, d_syd is only read by a distance ranking head.

The parser and the gates need no time loop: they are computed for a whole window at once,
and dropout masks are drawn once per window. Then ``kernel`` (synlm.kernels) picks what runs
the reading layers' time loops, each layer its own (no layer feeds back into a lower one):

- ``"reference"``: ``ReadingLayer.step`` at every step, the memory shifted by one slot a
  step, differentiated by autograd; the predictor's attention step by step too
  (``attend_step``). The specification the others are tested against; slow.
- ``"torch"``: ``synlm.kernels.prpn_torch.TorchReadingRecurrence``, a custom autograd
  function with a hand-written backward whose memory is a tape read by offset, with the
  input projections hoisted out of the loop (CPU speed).
- ``"triton"``: ``synlm.kernels.prpn.TritonReadingRecurrence``, the same loop with its
  per-step elementwise work fused into Triton kernels between the cuBLAS products.
- ``"auto"`` (default): Triton on CUDA tensors, the torch loop elsewhere.

With every kernel but ``"reference"`` the predictor's attention runs without a loop (its
memory is past top-layer outputs, known once the reading layers have run): two batched
matmuls over a band of the (T, n + T) score matrix (``PredictNetwork.attend``).

One module because the parsing, reading and predict networks are one family's equations,
read side by side with the released code's three files; the fast time loop is in
``synlm.kernels.prpn``.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.backbones.base import Backbone, BackboneSpec
from synlm.errors import InputError
from synlm.kernels import Kernel, check_kernel, use_triton
from synlm.kernels.prpn_torch import TorchReadingRecurrence
from synlm.kernels.self_check import pick_recurrence
from synlm.modules import dropout_mask
from synlm.modules.ln_lstm import LayerNormLSTMCell
from synlm.outputs import BackboneOutput, Structure

Norm = Literal["batch", "layer"]


class PRPNState(NamedTuple):
    """Carried across windows. Memories keep slot 0 for the most recent step."""

    parser: tuple[Tensor, ...]  # ConvParser: (look-back embeddings (B, L, E),)
    # SYDParser: (look-back LSTM_w outputs (B, L, P), h_w, c_w, h_d, c_d each (1, B, P))
    distances: Tensor  # (B, n) d_{t−n} .. d_{t−1}, +inf before the start
    readers: list[Tensor]  # per reading layer (B, n, 2H): [h | c] of the last n steps
    predictor: Tensor  # (B, n, H) the last n top-layer h


def parsing_gates(
    query: Tensor, distances: Tensor, past: Tensor, tau: float, hard: bool
) -> Tensor:
    """Gates of eq. 5-6 for every step of a window at once.

    Args:
        query: (..., B, T) the distance step t compares with the past: d_t for the reading
            network, the estimate d'_{t+1} for the predict network.
        distances: (B, T) d_t of the window.
        past: (B, n) the n distances before the window (+inf where there were none).
    Returns:
        (..., B, T, n) g[..., t, k] = Π_{j≤k} α(query_t − d_{t−j}), non-increasing in k.
    """
    n = past.size(1)
    hist = torch.cat([past, distances], dim=1)  # (B, n+T), hist[:, n+t] = d_t
    window = hist.unfold(1, n, 1)[:, 1:].flip(-1)  # (B, T, n), window[:, t, k] = d_{t−k}
    delta = query[..., None] - window  # (..., B, T, n)
    if hard:
        alpha = (F.hardtanh(2 * tau * delta + 1) + 1) / 2
    else:
        alpha = torch.sigmoid(10 * tau * delta + 5)
    return alpha.cumprod(-1)


def gated_softmax(logits: Tensor, gate: Tensor) -> Tensor:
    """Structured attention, eq. 10-11 as coded (PRPN blocks.py): exp(x − max)·g / (Σ + 1e-8)."""
    e = torch.exp(logits - logits.amax(-1, keepdim=True)) * gate
    return e / (e.sum(-1, keepdim=True) + 1e-8)


def _keep_mask(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """Inverted dropout masks of ``shape``: 0 w.p. p, else 1/(1−p) (``rand`` is faster than
    ``bernoulli_`` on CPU)."""
    keep = torch.rand(shape, device=like.device) >= p
    return keep.to(like.dtype) / (1 - p)


def _dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout`` with the faster mask of ``_keep_mask``."""
    return x * _keep_mask(x, x.shape, p) if training and p > 0 else x


def _band(full: Tensor, n: int) -> Tensor:
    """(B, T, n + T) -> (B, T, n) with out[:, t, i] = full[:, t, t + i] (a skew by padding)."""
    B, T, W = full.shape
    return F.pad(full.flatten(1), (0, T)).view(B, T, W + 1)[..., :n]


def _unband(band: Tensor) -> Tensor:
    """(B, T, n) -> (B, T, n + T) with out[:, t, t + i] = band[:, t, i], zero elsewhere."""
    B, T, n = band.shape
    return F.pad(band, (0, T + 1)).flatten(1)[:, : T * (n + T)].view(B, T, n + T)


def _make_norm(norm: Norm, size: int) -> nn.Module:
    if norm == "batch":
        return nn.BatchNorm1d(size)
    if norm == "layer":
        return nn.LayerNorm(size)
    raise InputError(f"norm must be 'batch' or 'layer', got {norm!r}")


def _channel_norm(norm: nn.Module, x: Tensor) -> Tensor:
    """Apply ``norm`` over the channels of a (B, C, T) tensor."""
    if isinstance(norm, nn.LayerNorm):
        return norm(x.transpose(1, 2)).transpose(1, 2)
    return norm(x)


class ConvParser(nn.Module):
    """The parsing network, eq. 7-8 and 13: a convolution over the L + 1 embeddings
    e_{t−L} .. e_t, Norm, ReLU, then a grouped 1x1 convolution to (d_t, d'_{t+1}), ReLU.
    The first window sees L zero embeddings before its start (paper §4.2)."""

    def __init__(
        self, input_size: int, hidden_size: int, n_lookback: int, dropout: float, norm: Norm
    ) -> None:
        super().__init__()
        self.input_size = input_size
        self.n_lookback = n_lookback
        self.dropout = dropout
        self.conv = nn.Conv1d(input_size, hidden_size, n_lookback + 1)  # W_c, eq. 7
        self.norm = _make_norm(norm, hidden_size)
        self.out = nn.Conv1d(hidden_size, 2, 1, groups=2)  # W_d and W'_d, eq. 8 and 13

    def initial_state(self, x: Tensor) -> tuple[Tensor, ...]:
        return (x.new_zeros(x.size(0), self.n_lookback, self.input_size),)

    def forward(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """x (B, T, E) -> distances (B, T, 2) = [d_t, d'_{t+1}] and the new look-back."""
        (lookback,) = state
        seq = torch.cat([lookback, x], dim=1)  # (B, L+T, E)
        hid = self.conv(_dropout(seq, self.dropout, self.training).transpose(1, 2))  # (B, P, T)
        hid = F.relu(_channel_norm(self.norm, hid))
        dist = F.relu(self.out(_dropout(hid, self.dropout, self.training)))  # (B, 2, T)
        return dist.transpose(1, 2), (seq[:, -self.n_lookback :],)


class SYDParser(nn.Module):
    """PRPN-SYD's parsing network (Du et al. 2020, A.4.2 eq. 25-28): LSTM_w over the
    embeddings, a convolution over the L + 1 last LSTM_w outputs (Norm, ReLU), LSTM_d, then
    two 2-layer feed-forward heads: FF_lm -> ReLU -> (d_t, d'_{t+1}) as the plain parser, and
    FF_syd -> d_syd, unbounded (a ranking loss reads it; nothing in the LM path does)."""

    def __init__(
        self, input_size: int, hidden_size: int, n_lookback: int, dropout: float, norm: Norm
    ) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.n_lookback = n_lookback
        self.dropout = dropout
        self.word_rnn = nn.LSTM(input_size, hidden_size, batch_first=True)  # eq. 25
        self.conv = nn.Conv1d(hidden_size, hidden_size, n_lookback + 1)  # eq. 26
        self.norm = _make_norm(norm, hidden_size)
        self.dist_rnn = nn.LSTM(hidden_size, hidden_size, batch_first=True)  # eq. 27
        self.ff_lm = nn.Sequential(  # eq. 28, d_lm and its next-step estimate
            nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, 2), nn.ReLU()
        )
        self.ff_syd = nn.Sequential(  # eq. 28, d_syd
            nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, 1)
        )

    def initial_state(self, x: Tensor) -> tuple[Tensor, ...]:
        B, P = x.size(0), self.hidden_size
        zeros = x.new_zeros(1, B, P)
        return (x.new_zeros(B, self.n_lookback, P), zeros, zeros, zeros, zeros)

    def forward(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """x (B, T, E) -> distances (B, T, 3) = [d_t, d'_{t+1}, d_syd] and the new state."""
        lookback, h_w, c_w, h_d, c_d = state
        p, train = self.dropout, self.training
        w, (h_w, c_w) = self.word_rnn(_dropout(x, p, train), (h_w, c_w))  # (B, T, P)
        seq = torch.cat([lookback, w], dim=1)  # (B, L+T, P)
        g = self.conv(_dropout(seq, p, train).transpose(1, 2))  # (B, P, T)
        g = F.relu(_channel_norm(self.norm, g)).transpose(1, 2)  # (B, T, P)
        s, (h_d, c_d) = self.dist_rnn(_dropout(g, p, train), (h_d, c_d))  # (B, T, P)
        s = _dropout(s, p, train)
        dist = torch.cat([self.ff_lm(s), self.ff_syd(s)], dim=-1)  # (B, T, 3)
        return dist, (seq[:, -self.n_lookback :], h_w, c_w, h_d, c_d)


class ReadingLayer(nn.Module):
    """One layer of the reading network (§5.1): structured attention over the last n (h, c)
    of this layer (eq. 9-12), then a layer-normalised LSTM step from the selected state.

    ``step`` is one time step of the equations; ``kernel`` picks what runs the window's time
    loop (``"reference"``: ``step`` itself, differentiated by autograd; the PRPN docstring
    names the others). Dropout masks are drawn once per window, before either runs, so every
    kernel sees the same masks.
    """

    def __init__(self, input_size: int, hidden_size: int, dropout: float, key_dropout: float,
                 kernel: Kernel = "auto"):
        super().__init__()
        self.kernel = check_kernel(kernel)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.dropout = dropout  # on the LSTM input
        self.key_dropout = key_dropout  # before and after the key projection
        self.key = nn.Linear(input_size + hidden_size, hidden_size)  # [W_x W_h], eq. 9
        self.cell = LayerNormLSTMCell(input_size, hidden_size)

    def step(self, x: Tensor, x_key: Tensor, gate: Tensor, mem_h: Tensor, mem_c: Tensor,
             masks: tuple[Tensor, Tensor] | None, rmask: Tensor | None) -> tuple[Tensor, Tensor]:
        """One step t (eq. 9-12 and the LN-LSTM).

        Args:
            x: (B, I) x_t after the LSTM input's dropout.
            x_key: (B, I) x_t after the key input's dropout.
            gate: (B, n) g_t; slot k gates step t−1−k.
            mem_h: (B, n, H) the memory's h, slot 0 = step t−1.
            mem_c: (B, n, H) the memory's c.
            masks: the key's dropout masks (B, H) on h_{t−1} and on k_t, or None.
            rmask: (H,) the recurrent-dropout mask on h̃_t, or None.
        Returns:
            h_t and c_t, (B, H) each.
        """
        h_prev = mem_h[:, 0] if masks is None else mem_h[:, 0] * masks[0]  # (B, H)
        k = self.key(torch.cat([x_key, h_prev], dim=-1))  # (B, H) W_x x_t + W_h h_{t−1}, eq. 9
        if masks is not None:
            k = k * masks[1]
        logits = (mem_h @ k[:, :, None])[..., 0] / math.sqrt(self.hidden_size)  # (B, n) eq. 10
        s = gated_softmax(logits, gate)  # (B, n) eq. 10-11
        h_sel = (s[:, :, None] * mem_h).sum(1)  # (B, H) h̃_t, eq. 12
        c_sel = (s[:, :, None] * mem_c).sum(1)  # (B, H) c̃_t, eq. 12
        if rmask is not None:
            h_sel = h_sel * rmask
        return self.cell(x, (h_sel, c_sel))  # (B, H) x 2: LN-LSTM from (h̃_t, c̃_t)

    def reference(self, x: Tensor, x_key: Tensor, gates: Tensor, memory: Tensor,
                  key_masks: Tensor | None, rmask: Tensor | None) -> tuple[Tensor, Tensor]:
        """``kernel="reference"``: ``step`` over the window, the memory shifted by one slot a
        step. x, x_key (T, B, I), gates (B, T, n), memory (B, n, 2H) slot 0 newest,
        key_masks (2, T, B, H) or None -> h (B, T, H) and the new memory."""
        H = self.hidden_size
        mem_h, mem_c = memory[..., :H], memory[..., H:]  # (B, n, H) each
        hs = []
        for t in range(x.size(0)):
            masks = None if key_masks is None else (key_masks[0, t], key_masks[1, t])
            h, c = self.step(x[t], x_key[t], gates[:, t], mem_h, mem_c, masks, rmask)
            mem_h = torch.cat([h[:, None], mem_h[:, :-1]], dim=1)  # h_t into slot 0
            mem_c = torch.cat([c[:, None], mem_c[:, :-1]], dim=1)
            hs.append(h)
        return torch.stack(hs, dim=1), torch.cat([mem_h, mem_c], dim=-1)

    def forward(
        self, x: Tensor, gates: Tensor, memory: Tensor, rmask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """x (B, T, I), gates (B, T, n), memory (B, n, 2H) slot 0 newest, rmask (H,) or None
        -> h (B, T, H) and the new memory."""
        B, T, _ = x.shape
        H, n = self.hidden_size, memory.size(1)
        pk, train, cell = self.key_dropout, self.training, self.cell
        xt = x.transpose(0, 1)  # (T, B, I): the loop runs time-major
        x_in = _dropout(xt, self.dropout, train)  # (T, B, I) the LSTM's input
        x_key = _dropout(xt, pk, train)  # (T, B, I) the key's input half
        key_masks = _keep_mask(x, (2, T, B, H), pk) if train and pk > 0 else None
        if self.kernel == "reference":
            dtype = torch.promote_types(x.dtype, torch.float32)  # as the fast loops: >= fp32
            with torch.autocast(x.device.type, enabled=False):
                return self.reference(*(a if a is None else a.to(dtype) for a in (
                    x_in, x_key, gates, memory, key_masks, rmask)))
        # the fast loops (synlm.kernels): the window's input projections hoisted, the key's
        # 1/√H folded into its weights, the gates in window order (index i: step t−n+i)
        scale = 1.0 / math.sqrt(H)
        w_x, w_h = (self.key.weight * scale).split([self.input_size, H], dim=1)
        ih = cell.input_gates(x_in)  # (T, B, 4H)
        kx = F.linear(x_key, w_x, self.key.bias * scale)  # (T, B, H)
        args = (
            ih, kx, gates.flip(-1).transpose(0, 1).contiguous(), memory, w_h,
            cell.hh.weight, cell.hh.bias, cell.hh_norm.weight, cell.hh_norm.bias,
            cell.c_norm.weight, cell.c_norm.bias, key_masks, rmask,
        )
        dtype = torch.promote_types(ih.dtype, torch.float32)  # under autocast the loop is fp32
        recurrence = pick_recurrence(self.kernel, use_triton(self.kernel, ih),
                                     TorchReadingRecurrence, "prpn", ih.device, dtype)
        with torch.autocast(x.device.type, enabled=False):
            tape = recurrence.apply(
                *(a if a is None else a.to(dtype) for a in args),
                cell.hh_norm.eps, cell.c_norm.eps,
            )  # (B, n+T, 2H) [h | c] in time order
        return tape[:, n:, :H], tape[:, T:].flip(1)


class PredictNetwork(nn.Module):
    """The predict network (§5.2): attention over the last n top-layer h with the next-step
    gates g'_t, then out_t = tanh(Norm(W_o [h_t; sel_t])) (eq. 14; no ResBlock, as for PTB).

    ``attend_step`` is one time step; ``attend`` computes every step of a window at once
    (the memory is past top-layer outputs, known once the reading layers have run)."""

    def __init__(self, hidden_size: int, output_size: int, dropout: float, norm: Norm) -> None:
        super().__init__()
        self.dropout = dropout
        self.key = nn.Linear(hidden_size, hidden_size)
        self.proj = nn.Linear(2 * hidden_size, output_size)
        self.norm = _make_norm(norm, output_size)

    def keys(self, h: Tensor) -> Tensor:
        """k'_t / √H = drop(W_p drop(h_t)) / √H for the window: (B, T, H) -> (B, T, H)."""
        p, train = self.dropout, self.training
        return _dropout(self.key(_dropout(h, p, train)), p, train) / math.sqrt(h.size(2))

    @staticmethod
    def attend_step(key: Tensor, gate: Tensor, memory: Tensor) -> Tensor:
        """One step: key (B, H) k'_t / √H, gate (B, n) g'_t, memory (B, n, H) h_{t−1−k} in
        slot k -> sel_t (B, H) = Σ_k p_t[k] h_{t−1−k}, p_t = softmax(m'_h k'_t / √H, g'_t)."""
        p = gated_softmax((memory @ key[:, :, None])[..., 0], gate)  # (B, n)
        return (p[:, :, None] * memory).sum(1)

    def attend_reference(self, h: Tensor, gates: Tensor, memory: Tensor
                         ) -> tuple[Tensor, Tensor]:
        """``kernel="reference"``: ``attend_step`` at each step, the memory shifted by one
        slot a step. Same arguments and results as ``attend``."""
        key, sels = self.keys(h), []  # (B, T, H)
        for t in range(h.size(1)):
            sels.append(self.attend_step(key[:, t], gates[:, t], memory))
            memory = torch.cat([h[:, t, None], memory[:, :-1]], dim=1)  # h_t into slot 0
        return torch.stack(sels, dim=1), memory

    def attend(self, h: Tensor, gates: Tensor, memory: Tensor) -> tuple[Tensor, Tensor]:
        """h (B, T, H), gates (B, T, n), memory (B, n, H) slot 0 newest -> sel (B, T, H) and
        the new memory. No time loop: step t reads h_{t−n} .. h_{t−1} of one tape, two
        batched matmuls over a band of the (T, n + T) score matrix."""
        n = memory.size(1)
        key = self.keys(h)  # (B, T, H)
        tape = torch.cat([memory.flip(1), h], dim=1)  # (B, n+T, H), tape[:, n+t] = h_t
        logits = _band(key @ tape.transpose(1, 2), n)  # (B, T, n), [:, t, i] = k_t · h_{t−n+i}
        att = gated_softmax(logits, gates.flip(-1))  # slot k = n−1−i
        sel = _unband(att) @ tape  # (B, T, H)
        return sel, tape[:, -n:].flip(1)

    def output(self, h: Tensor, sel: Tensor) -> Tensor:
        """tanh(Norm(W_o drop([h; sel]))): (B, T, H) x 2 -> (B, T, E)."""
        z = self.proj(_dropout(torch.cat([h, sel], dim=-1), self.dropout, self.training))
        if isinstance(self.norm, nn.BatchNorm1d):  # statistics over B x T positions
            return torch.tanh(self.norm(z.flatten(0, 1)).view_as(z))
        return torch.tanh(self.norm(z))


class PRPN(Backbone):
    """Parsing-Reading-Predict Networks (Shen et al. 2018) as a backbone; ``syd=True`` gives
    PRPN-SYD (Du et al. 2020, A.4.2).

    ``distances`` is (1, B, T) = [d_lm] for PRPN and (2, B, T) = [d_lm, d_syd] for PRPN-SYD:
    ``distances[0]`` is always what drives the gates (parse with it), ``distances[-1]`` is
    the set meant for a ranking head (d_syd under SYD). ``distance_names`` says the same.
    ``layers`` holds the reading layers' outputs (B, T, H); ``hidden`` is the predict
    network's output (B, T, input_size) after output dropout, ready for the tied decoder.
    The carried state is a ``PRPNState`` (look-back, the last n distances, each reading
    layer's memory, the predictor's memory); a plain tuple of the same fields is accepted.

    Norm (``norm``) is the reference's BatchNorm by default, in the parser and after the
    predictor's projection. In training it normalises with statistics over the batch and
    the window, so an output at t depends on other rows and on later steps of the window
    (not causal at train time; padding counts in sentence mode); evaluation uses running
    statistics and is causal. ``norm="layer"`` normalises each position alone: causal always.

    Args:
        input_size: embedding size E (= output size, for tying); paper 800.
        hidden_size: reading-network size H (and the parser's); paper 1200.
        num_layers: reading layers; paper 2.
        n_slots: memory span N_m; paper 15.
        n_lookback: look-back range L of the parsing convolution; paper 5.
        tau: gate temperature (1 / the code's ``resolution``); paper 10.
        hard: hardtanh gates (the README's ``--hard``) instead of sigmoid ones.
        dropout: on the first reading layer's input and on the output (code ``dropout``).
        idropout: parser, attention keys, upper reading layers' inputs, predictor
            (``idropout``).
        rdropout: one mask (num_layers, H) per window on the selected h̃, shared over batch
            and time (``rdropout``).
        norm: "batch" (reference) or "layer" in the parser and the predictor.
        syd: use the PRPN-SYD parsing network.
        parser_size: hidden size of the parsing network; defaults to ``hidden_size``.
        kernel: what runs the time loops (module docstring): ``auto`` (fused Triton
            kernels on CUDA, the torch loop elsewhere), ``torch``, ``triton`` or
            ``reference`` (the equations one step at a time; the predictor's attention too).
    """

    def __init__(
        self,
        input_size: int = 800,
        hidden_size: int = 1200,
        num_layers: int = 2,
        n_slots: int = 15,
        n_lookback: int = 5,
        tau: float = 10.0,
        hard: bool = True,
        dropout: float = 0.7,
        idropout: float = 0.5,
        rdropout: float = 0.5,
        norm: Norm = "batch",
        syd: bool = False,
        parser_size: int | None = None,
        kernel: Kernel = "auto",
    ) -> None:
        super().__init__()
        if n_slots < 1 or n_lookback < 1:
            raise InputError("n_slots and n_lookback must be at least 1")
        self.hidden_size = hidden_size
        self.n_slots = n_slots
        self.tau = tau
        self.hard = hard
        self.dropout = dropout
        self.rdropout = rdropout
        self.syd = syd
        self.kernel = check_kernel(kernel)
        self.distance_names = ("lm", "syd") if syd else ("lm",)
        parser = SYDParser if syd else ConvParser
        self.parser = parser(input_size, parser_size or hidden_size, n_lookback, idropout, norm)
        self.readers = nn.ModuleList(
            ReadingLayer(input_size if i == 0 else hidden_size, hidden_size,
                         dropout if i == 0 else idropout, idropout, kernel)
            for i in range(num_layers)
        )
        self.predictor = PredictNetwork(hidden_size, input_size, idropout, norm)
        self.spec = BackboneSpec(
            input_size=input_size, output_size=input_size, layer_sizes=(hidden_size,) * num_layers,
            provides=frozenset({"distances", "layers"}), recurrent=True, incremental=True,
            structures=(Structure("lm", "distances", layers=(0,) if syd else None),))  # row 1: syd

    def initial_state(self, x: Tensor) -> PRPNState:
        """Zero memories and look-back, +inf past distances, for the batch of ``x`` (B, T, E)."""
        B, H, n = x.size(0), self.hidden_size, self.n_slots
        return PRPNState(
            parser=self.parser.initial_state(x),
            distances=x.new_full((B, n), math.inf),
            readers=[x.new_zeros(B, n, 2 * H) for _ in self.readers],
            predictor=x.new_zeros(B, n, H),
        )

    def recurrent_mask(self, x: Tensor) -> Tensor | None:
        """The rdropout mask (num_layers, H), or None when it would be all ones."""
        if not self.training or self.rdropout == 0.0:
            return None
        return dropout_mask(x, (len(self.readers), self.hidden_size), self.rdropout)

    def forward(self, x: Tensor, state: PRPNState | None = None) -> BackboneOutput:
        # x: (B, T, E)
        st = self.initial_state(x) if state is None else PRPNState(*state)
        dist, parser_state = self.parser(x, st.parser)  # (B, T, 2 or 3)
        d = dist[..., 0]  # (B, T) d_t
        gates, gates_next = parsing_gates(  # (B, T, n) each
            dist[..., :2].permute(2, 0, 1), d, st.distances, self.tau, self.hard
        )
        rmask = self.recurrent_mask(x)
        h, layers, memories = x, [], []
        for i, reader in enumerate(self.readers):
            h, memory = reader(h, gates, st.readers[i], None if rmask is None else rmask[i])
            layers.append(h)
            memories.append(memory)
        attend = (self.predictor.attend_reference if self.kernel == "reference"
                  else self.predictor.attend)
        sel, pred_memory = attend(h, gates_next, st.predictor)  # (B, T, H), (B, n, H)
        out = _dropout(self.predictor.output(h, sel), self.dropout, self.training)  # (B, T, E)
        distances = dist[..., 0::2] if self.syd else dist[..., :1]  # (B, T, 1 or 2)
        new_state = PRPNState(
            parser=parser_state,
            distances=torch.cat([st.distances, d], dim=1)[:, -self.n_slots :],
            readers=memories,
            predictor=pred_memory,
        )
        return BackboneOutput(
            hidden=out, state=new_state, layers=layers, distances=distances.permute(2, 0, 1)
        )
