"""PaLM's span attention (Peng et al. 2019 §2.1 and Appendix A), a ``LayerInsert``.

Placed between two layers of a recurrent stack (after the second of three in the paper), it
reads the layer's output h_t and, with window m and K = m − 1 candidate spans:

1. encodes the K spans ending at the *previous* input, [t − ℓ, t − 1] for ℓ = 1..K, with a
   bidirectional rational RNN (eq. 1, 2): ``rational_span_states``, computed for every
   position at once by K shift steps;
2. gates and squashes them per token: r_{t,v} = tanh(σ(W_g h_t + b_g) ⊙ [→c; ←c]);
3. scores them with an MLP (eq. 3): s_{t,v} = w₂ᵀ tanh(W_s r_{t,v} + W_h h_t + b), or, for
   PaLM-RB (footnote 12), fixes the scores to the span lengths K, K − 1, .., 1 (the paper's
   m, .., 1 over its m slots; the softmax does not see the shift);
4. attends: ω_t = softmax_v(s_t), a_t = Σ_v ω_{t,v} r_{t,v} (eq. 3a, 3b);
5. mixes a_t into the next layer's input with a residual gate (eq. 6, as released: see
   ``SpanAttention``).

Slot v of a position holds the span of K − v words (v = 0 the longest), the ``spans``
structure layout of ``synlm.outputs``; ``span_scores`` are the raw scores s (B, T, K), which
the greedy decoder ``synlm.syntax.palm_tree`` turns into trees. The last K inputs are carried
across windows, so spans reach into the previous window (and across sentences) as in the
released code. Released-code details are in docs/reference-implementations.md §4.2-4.3.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from synlm.backbones.base import InsertOutput, LayerInsert
from synlm.errors import InputError
from synlm.modules import LockedDropout
from synlm.outputs import Structure

Scores = Literal["mlp", "right_branching"]
Activation = Literal["none", "tanh"]
MixInput = Literal["context", "hidden_and_context"]


def rational_span_states(u_fw: Tensor, f_fw: Tensor, u_bw: Tensor, f_bw: Tensor, K: int
                         ) -> tuple[Tensor, Tensor]:
    """Rational-RNN encodings of the K spans ending at each position, both directions.

    Inputs (B, K - 1 + T, n): the gated inputs u = (1 − f) ⊙ ũ and forget gates f of eq. 1 for
    K − 1 carried positions followed by the T positions whose spans are wanted. The forward
    encoding of a span [s, e] is the recurrence c_i = f_i ⊙ c_{i−1} + u_i run over it from
    zero (eq. 2's →c_{s,e}); the backward one runs it from e down to s. Both are built by
    extending every span one word to the left per step, with a running product of forget
    gates (never the exp of a long log-sum, which loses float32 precision):

        fw: R_ℓ(e) = R_{ℓ−1}(e) + (f_{e−ℓ+2} ⋯ f_e) ⊙ u_{e−ℓ+1}
        bw: P_ℓ(e) = f_{e−ℓ+1} ⊙ P_{ℓ−1}(e) + u_{e−ℓ+1}

    Returns fw, bw (B, T, K, n) in slot order: slot v is the span of K − v words ending at
    the position.
    """
    T = u_fw.size(1) - (K - 1)
    end = slice(K - 1, K - 1 + T)
    fw, bw = u_fw[:, end], u_bw[:, end]  # ℓ = 1: (B, T, n)
    carry = torch.ones_like(fw)
    fws, bws = [fw], [bw]
    for length in range(2, K + 1):
        start = slice(K - length, K - length + T)  # word e − ℓ + 1 of each end e
        carry = carry * f_fw[:, K - length + 1:K - length + 1 + T]
        fw = fw + carry * u_fw[:, start]
        bw = f_bw[:, start] * bw + u_bw[:, start]
        fws.append(fw)
        bws.append(bw)
    return torch.stack(fws[::-1], 2), torch.stack(bws[::-1], 2)  # (B, T, K, n)


def _glorot_(weight: Tensor, fan_in: int, fan_out: int, gain: float = 1.0) -> None:
    """U(±gain·√(6 / (fan_in + fan_out))) with explicit fans, as the released code's."""
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    nn.init.uniform_(weight, -bound, bound)


class SpanScorer(nn.Module):
    """Steps 1-3: span representations r (B, T, K, 2n) and scores s (B, T, K) from a tape of
    the K − 1 carried inputs and the window's T inputs (the released ``SpanScorer``).

    ``activation``: ``none`` feeds the rational RNN's input projection as it is (released
    code, its nonlinearity switched off); ``tanh`` applies eq. 1b's tanh.
    """

    def __init__(self, size: int, rrnn_size: int, parser_size: int, window: int,
                 scores: Scores, activation: Activation, dropout: float) -> None:
        super().__init__()
        self.K = window - 1
        self.rrnn_size = rrnn_size
        self.scores = scores
        self.activation = activation
        n = rrnn_size
        # rational RNN input projection: [ũ_fw, ũ_bw, f_fw, f_bw], the gates with a bias
        self.rrnn = nn.Linear(size, 4 * n, bias=False)
        self.forget_bias = nn.Parameter(torch.zeros(2 * n))
        self.gate = nn.Linear(size, 2 * n)
        self.drop = LockedDropout(dropout)
        _glorot_(self.rrnn.weight, size, n, nn.init.calculate_gain("tanh"))
        _glorot_(self.gate.weight, size, n, nn.init.calculate_gain("sigmoid"))
        nn.init.zeros_(self.gate.bias)
        if scores == "mlp":
            self.span_proj = nn.Linear(2 * n, parser_size, bias=False)
            self.token_proj = nn.Linear(size, parser_size)
            self.score = nn.Linear(parser_size, 1, bias=False)
            _glorot_(self.span_proj.weight, 2 * n + size, parser_size)
            _glorot_(self.token_proj.weight, 2 * n + size, parser_size)
            nn.init.zeros_(self.token_proj.bias)
            _glorot_(self.score.weight, parser_size, 1)

    def forward(self, tape: Tensor) -> tuple[Tensor, Tensor]:
        K, n = self.K, self.rrnn_size
        x = tape[:, K:]  # (B, T, H): the window's inputs
        pre = self.rrnn(tape[:, :-1])  # (B, K - 1 + T, 4n); the last input ends no span
        u, f = pre[..., :2 * n], torch.sigmoid(pre[..., 2 * n:] + self.forget_bias)
        if self.activation == "tanh":
            u = torch.tanh(u)
        u = u * (1 - f)
        fw, bw = rational_span_states(u[..., :n], f[..., :n], u[..., n:], f[..., n:], K)
        B, T = x.shape[:2]
        reprs = self.drop(torch.cat([fw, bw], -1).flatten(1, 2)).view(B, T, K, 2 * n)
        reprs = torch.tanh(reprs * torch.sigmoid(self.gate(x)).unsqueeze(2))  # (B, T, K, 2n)
        if self.scores == "right_branching":
            lengths = torch.arange(K, 0, -1, device=x.device, dtype=reprs.dtype)
            return reprs, lengths.expand(B, T, K)
        hidden = torch.tanh(self.span_proj(reprs) + self.token_proj(x).unsqueeze(2))
        return reprs, self.score(hidden).squeeze(-1)  # (B, T, K, 2n), (B, T, K)


class SpanAttention(LayerInsert):
    """PaLM's span attention between layer ``after`` and the next (module docstring).

    Mixing (step 5). Released code (default, ``mix_input="context"``)::

        a = drop(a);  g = σ(W_r [h; a]);  ĥ = drop(g ⊙ h_raw + (1 − g) ⊙ drop(tanh(W_a a)))

    where h is the layer output after the between-layer dropout and h_raw before it. The
    paper's eq. 6 feeds [h; a] to the tanh MLP: ``mix_input="hidden_and_context"``. Every
    dropout is locked, rate ``dropout`` (default: the stack's between-layer rate, as the
    released ``dropouth``), and the span representations get one more before the gate.

    Args:
        after: the layer it follows (0-based; PaLM: 1, between layers 2 and 3 of 3).
        window: m; K = m − 1 spans ending at the previous input are scored (PTB 20,
            WikiText-2 10).
        rrnn_size: rational RNN width per direction; the context is 2 · rrnn_size wide
            (paper Table 5: 200 and 400; released ``rrnn_size``/``cxtsize`` 400 are the two
            directions together).
        parser_size: hidden width of the score MLP (released ``parser_size`` 100).
        scores: ``mlp`` (PaLM-U/S) or ``right_branching`` (PaLM-RB: fixed to span lengths).
        activation: the rational RNN's input nonlinearity, ``none`` (released) or ``tanh``
            (eq. 1b).
        mix_input: what the mixing MLP reads (above).
        dropout: rate of its locked dropouts; None: the stack's between-layer rate.
    """

    provides = frozenset({"span_scores"})
    structures = (Structure("span_attention", "spans"),)

    def __init__(self, after: int = 1, window: int = 20, rrnn_size: int = 200,
                 parser_size: int = 100, scores: Scores = "mlp", activation: Activation = "none",
                 mix_input: MixInput = "context", dropout: float | None = None) -> None:
        super().__init__(after)
        if window < 2:
            raise InputError(f"SpanAttention window must be >= 2 (K = window - 1 spans), "
                             f"got {window}")
        for option, value, choices in (("scores", scores, get_args(Scores)),
                                       ("activation", activation, get_args(Activation)),
                                       ("mix_input", mix_input, get_args(MixInput))):
            if value not in choices:
                raise InputError(f"SpanAttention {option} must be one of {choices}, "
                                 f"not {value!r}")
        self.window, self.rrnn_size, self.parser_size = window, rrnn_size, parser_size
        self.scores, self.activation, self.mix_input = scores, activation, mix_input
        self.dropout = dropout
        self.K = window - 1

    def bind(self, size: int, dropout_hidden: float) -> None:
        p = dropout_hidden if self.dropout is None else self.dropout
        context = 2 * self.rrnn_size
        self.scorer = SpanScorer(size, self.rrnn_size, self.parser_size, self.window,
                                 self.scores, self.activation, p)
        self.mix_gate = nn.Linear(size + context, size)
        mix_in = context if self.mix_input == "context" else size + context
        self.mix = nn.Linear(mix_in, size)
        self.drop = LockedDropout(p)
        nn.init.xavier_uniform_(self.mix.weight)
        nn.init.zeros_(self.mix.bias)
        nn.init.xavier_uniform_(self.mix_gate.weight, nn.init.calculate_gain("sigmoid"))
        nn.init.zeros_(self.mix_gate.bias)

    def spec_fields(self) -> dict[str, int]:
        return {"span_slots": self.K}

    def forward(self, h: Tensor, raw: Tensor, state: Tensor | None) -> InsertOutput:
        # h, raw: (B, T, H); state: the last K inputs (B, K, H), oldest first
        past = h.new_zeros(h.size(0), self.K, h.size(2)) if state is None else state
        tape = torch.cat([past, h], 1)  # (B, K + T, H)
        with torch.autocast(h.device.type, enabled=False):  # span states and scores in fp32
            reprs, scores = self.scorer(tape.to(torch.promote_types(tape.dtype, torch.float32)))
        weights = torch.softmax(scores, -1)  # ω (B, T, K)
        context = self.drop(torch.einsum("btk,btkc->btc", weights, reprs))  # a (B, T, 2n)
        gate = torch.sigmoid(self.mix_gate(torch.cat([h, context], -1)))  # (B, T, H)
        mix_in = context if self.mix_input == "context" else torch.cat([h, context], -1)
        update = self.drop(torch.tanh(self.mix(mix_in)))
        out = self.drop(gate * raw + (1 - gate) * update)  # (B, T, H)
        return InsertOutput(out, tape[:, -self.K:], {"span_scores": scores})
