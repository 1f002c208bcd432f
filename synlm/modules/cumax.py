"""The cumulative softmax of ON-LSTM (Shen et al. 2019, eq. 6)."""

from __future__ import annotations

import torch
from torch import Tensor


def cumax(logits: Tensor, dim: int = -1) -> Tensor:
    """cumax(x) = cumsum(softmax(x)): monotone non-decreasing along ``dim``, in [0, 1].

    Computed in float32 at least, so it stays monotone under mixed precision.
    """
    dtype = torch.promote_types(logits.dtype, torch.float32)
    return torch.cumsum(torch.softmax(logits.to(dtype), dim=dim), dim=dim)
