"""Perplexity as exp(total NLL / total tokens), summed across batches and ranks."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric


class Perplexity(Metric):
    """Accumulates the summed negative log-likelihood and the token count.

    ``compute()`` gives exp(Σ NLL / N), the AWD-LSTM evaluation (main.py:156-168),
    identical however the tokens were split into batches, windows or ranks.
    """

    full_state_update = False
    higher_is_better = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("nll", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, nll: Tensor, mask: Tensor, units: Tensor | None = None) -> None:
        """``nll`` (B, T) per-token negative log-likelihood, ``mask`` (B, T) bool. ``units``
        (B, T) bool: the positions counted in the denominator (default ``mask``); counting
        only the ends of words gives a subword model's word-level perplexity, exp(Σ NLL over
        subwords / number of words)."""
        self.nll += nll.detach().double()[mask].sum()
        self.count += (mask if units is None else units & mask).sum()

    def compute(self) -> Tensor:
        return torch.exp(self.nll / self.count.clamp(min=1))

    def mean_nll(self) -> Tensor:
        return self.nll / self.count.clamp(min=1)
