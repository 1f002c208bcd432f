"""AWD-LSTM regularisers (Merity et al. 2018, §4): variational dropout and word-type dropout."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LockedDropout(nn.Module):
    """Variational dropout: one Bernoulli mask per sequence, shared over time.

    Input (B, T, H); the mask is (B, 1, H), inverted-scaled by 1/(1-p).
    """

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1 - self.p) / (1 - self.p)
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}"


def embedding_dropout(weight: Tensor, tokens: Tensor, p: float, training: bool) -> Tensor:
    """Look up ``tokens`` (B, T) in ``weight`` (V, E) after dropping whole word types.

    A (V, 1) mask zeroes entire rows of the embedding matrix (the word type is dropped
    everywhere in the batch) and scales kept rows by 1/(1-p)
    (salesforce/awd-lstm-lm embed_regularize.py).
    """
    if training and p > 0.0:
        mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)
        weight = weight * mask
    return F.embedding(tokens, weight)


def dropout_mask(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """An inverted-scaled Bernoulli mask of ``shape`` with ``like``'s dtype and device."""
    return torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(1 - p) / (1 - p)
