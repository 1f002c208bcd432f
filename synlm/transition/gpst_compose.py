"""GPST's composition function (Hu et al. 2024, §3.1; the ``InsideEncoder`` of the released
StructuredLM_RTDT): a REDUCE's constituent from the representations of its two children, by
a small Transformer over the pair with learned role embeddings (left 0, right 1)::

    h = [l; r]                       (2, d)
    h = N(h + Attn(h + e, h + e, h)) (per layer; e the role embeddings)
    h = N(h + W2 GELU(W1 h))
    c = N(h_0 + h_1)

N is the released ``InstanceNorm1d`` without affine weights, which over the pair's
(2, d) rows normalises each row over its d features: a layer norm without weights
(``F.layer_norm``, eps 1e-5). The released module also holds two MLPs that score a split
(``left_linear``, ``right_linear``); they serve the inside pass, not a REDUCE
(``synlm.transition.gpst_inside``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

EPS = 1e-5


def normalise(x: Tensor) -> Tensor:
    """The released ``InstanceNorm1d`` over the last dimension (no affine weights)."""
    return F.layer_norm(x, x.shape[-1:], eps=EPS)


class CompositionLayer(nn.Module):
    """One post-norm layer over a pair: self-attention whose queries and keys add the
    role embeddings (values do not), then a GELU feed-forward (module docstring)."""

    def __init__(self, size: int, n_heads: int, ffn_size: int, dropout: float, roles: int
                 ) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(size, n_heads, dropout=dropout,
                                               batch_first=True)
        self.ffn_in = nn.Linear(size, ffn_size)
        self.ffn_out = nn.Linear(ffn_size, size)
        self.roles = nn.Embedding(roles, size)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, roles: Tensor | None = None) -> Tensor:
        """``x`` (R, 2, d) -> (R, 2, d); ``roles`` (R, 2) each row's role ids (default left
        0, right 1; the outside pass's parent 0 with its sibling 1 or 2)."""
        keyed = x + (self.roles.weight[:2] if roles is None else self.roles(roles))  # (R, 2, d)
        x = normalise(x + self.drop(self.attention(keyed, keyed, x, need_weights=False)[0]))
        ffn = self.ffn_out(self.drop(F.gelu(self.ffn_in(x))))
        return normalise(x + self.drop(ffn))


class Composition(nn.Module):
    """``layers`` composition layers over the (left, right) pair, summed and normalised."""

    def __init__(self, size: int = 256, n_heads: int = 8, ffn_size: int = 1024,
                 layers: int = 4, dropout: float = 0.1, roles: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            CompositionLayer(size, n_heads, ffn_size, dropout, roles) for _ in range(layers))

    def forward(self, left: Tensor, right: Tensor) -> Tensor:
        """``left``, ``right`` (R, d) -> the constituents (R, d)."""
        x = torch.stack([left, right], 1)  # (R, 2, d)
        for layer in self.layers:
            x = layer(x)
        return normalise(x.sum(1))
