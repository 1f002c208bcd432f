"""DropConnect on an LSTM's hidden-to-hidden weights, keeping the fused kernel."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call


class WeightDropLSTM(nn.Module):
    """A one-layer batch-first ``nn.LSTM`` with DropConnect on ``weight_hh_l0``.

    Merity et al. 2018 §2: one mask per forward (per BPTT window), inverted scaling
    as ``F.dropout`` does (salesforce/awd-lstm-lm weight_drop.py). The dropped weight is
    passed through ``torch.func.functional_call``, so the module keeps a single real
    parameter and the fused LSTM kernel runs; no ``flatten_parameters`` patching.

    Under autocast the LSTM runs in float32 (input and state cast up, outputs float32), as the
    ON-LSTM and PRPN recurrences do: cuDNN's autocast LSTM copies the weights into a new
    16-bit buffer on every call, and measured 0.77x fp32's speed in bf16-mixed on an H100
    (docs/performance.md); the decoder and the rest of the step still run in 16 bits.
    """

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)
        self.weight_drop = weight_drop

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        # x: (B, T, I); state: ((1, B, H), (1, B, H))
        dtype = self.lstm.weight_hh_l0.dtype
        with torch.autocast(x.device.type, enabled=False):
            x = x.to(dtype)
            state = None if state is None else (state[0].to(dtype), state[1].to(dtype))
            if self.training and self.weight_drop > 0.0:
                w_hh = F.dropout(self.lstm.weight_hh_l0, self.weight_drop, training=True)
                return functional_call(self.lstm, {"weight_hh_l0": w_hh}, (x, state))
            return self.lstm(x, state)


def drop_connect(weight: Tensor, p: float, training: bool) -> Tensor:
    """DropConnect as ON-LSTM/SDLM's ``LinearDropConnect``.

    Training: a Bernoulli(p) mask zeroes weights, kept ones are *not* rescaled.
    Evaluation: the weight is scaled by (1 - p), its expectation under that mask.
    """
    if p == 0.0:
        return weight
    if not training:
        return weight * (1.0 - p)
    return weight.masked_fill(torch.rand_like(weight) < p, 0.0)
