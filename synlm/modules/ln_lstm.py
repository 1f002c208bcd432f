"""A layer-normalised LSTM cell (Ba et al. 2016, §3.1), as PRPN's reading network uses it.

yikangshen/PRPN LSTMCell.py: LayerNorm on the input projection, on the recurrent projection
and on the cell before its tanh; gate order [i, f, g, o]. The reference LayerNorm divides by
(unbiased std + 1e-6); this cell uses ``nn.LayerNorm`` (biased variance, eps inside the square
root), a relative difference of about 1/(2N) on N = 4H features, for the fused kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LayerNormLSTMCell(nn.Module):
    """One LSTM step with layer normalisation::

        gates = LN_ih(W_ih x + b_ih) + LN_hh(W_hh h + b_hh)      (B, 4H) as [i, f, g, o]
        c'    = σ(f) c + σ(i) tanh(g)
        h'    = σ(o) tanh(LN_c(c'))

    ``input_gates`` depends on the input alone, so a caller can compute it for a whole
    window in one matmul and feed the rows to ``step``.
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.ih_norm = nn.LayerNorm(4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size)
        self.hh_norm = nn.LayerNorm(4 * hidden_size)
        self.c_norm = nn.LayerNorm(hidden_size)

    def input_gates(self, x: Tensor) -> Tensor:
        """LN_ih(W_ih x + b_ih): (..., input_size) -> (..., 4H)."""
        return self.ih_norm(self.ih(x))

    def step(self, ih: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """One step from precomputed input gates ``ih`` (B, 4H) and the state (B, H) x 2."""
        gates = ih + self.hh_norm(self.hh(h))  # (B, 4H)
        act = torch.sigmoid(gates)  # i, f, o read from here; g needs tanh
        i, f, _, o = act.chunk(4, dim=-1)
        g = torch.tanh(gates[:, 2 * self.hidden_size : 3 * self.hidden_size])
        c = f * c + i * g
        return o * torch.tanh(self.c_norm(c)), c

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """x (B, input_size), state (h, c) each (B, H) -> (h', c')."""
        return self.step(self.input_gates(x), *state)
