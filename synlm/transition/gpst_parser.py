"""GPST's split-point parser (Hu et al. 2024, §3.1, the pruned inside pass's merge order;
the released StructuredLM_RTDT ``TransformerParser`` over its Llama-style ``Transformer``):
a score s_k for each split point k between words k and k + 1 (lower merges first)::

    h = RMSNorm(Llama(x))                          (n, d)  pre-norm blocks, rotary
                                                           positions, SwiGLU
    s_k = MLP([h_k; h_{k+1}])                      (n − 1,)
    merge order = argsort(sg(s) + c · g)           ascending, stable; g = −log(Exp(1))

c is the noise coefficient (the released ``coeff``; the noise is drawn in training only, as
``torch.empty_like(s).exponential_()``, and the scores are detached from it). The parser
learns from the inside pass's induced tree (``synlm.transition.gpst_inside.parser_loss``).
As released, the rotary tables are computed in float32 and its RMSNorm computes in float32
(here in the input's precision, equal in float32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + ε) · w."""

    def __init__(self, size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x: Tensor) -> Tensor:
    half = x.size(-1) // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


class ParserBlock(nn.Module):
    """A pre-norm Llama block: attention with rotary positions, then SwiGLU."""

    def __init__(self, size: int, n_heads: int, multiple_of: int = 256) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(size, size, bias=False)
                                              for _ in range(4))
        hidden = int(2 * 4 * size / 3)
        hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(size, hidden, bias=False)
        self.w2 = nn.Linear(hidden, size, bias=False)
        self.w3 = nn.Linear(size, hidden, bias=False)
        self.attention_norm = RMSNorm(size)
        self.ffn_norm = RMSNorm(size)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
        """x (B, n, d), cos and sin (n, d / heads), mask (B, 1, n, n) additive."""
        B, n, d = x.shape
        h = self.attention_norm(x)
        q, k, v = (w(h).view(B, n, self.n_heads, -1).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))  # (B, H, n, d / H)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.wo(attended.transpose(1, 2).reshape(B, n, d))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class SplitParser(nn.Module):
    """The parser (module docstring). Defaults: GPST-small's (``parser_input_dim`` 128,
    ``parser_hidden_dim`` 512, 4 layers, 8 heads, 1024 positions)."""

    def __init__(self, vocab_size: int, size: int = 128, hidden: int = 512, layers: int = 4,
                 n_heads: int = 8, max_positions: int = 1024, dropout: float = 0.1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, size)
        self.layers = nn.ModuleList(ParserBlock(size, n_heads) for _ in range(layers))
        self.norm = RMSNorm(size)
        self.score = nn.Sequential(nn.Linear(2 * size, hidden), nn.GELU(), nn.Dropout(dropout),
                                   nn.Linear(hidden, 1))
        head = size // n_heads
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head, 2).float() / head))
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], -1)  # (P, d / H), float32 as released
        self.register_buffer("cos", angles.cos().to(torch.get_default_dtype()), persistent=False)
        self.register_buffer("sin", angles.sin().to(torch.get_default_dtype()), persistent=False)

    def scores(self, words: Tensor, lengths: Tensor) -> Tensor:
        """s (B, N − 1) of words (B, N) of ``lengths`` (B,); padding attends to padding."""
        N = words.size(1)
        present = torch.arange(N, device=words.device) < lengths[:, None]  # (B, N)
        same = present[:, :, None] == present[:, None, :]  # (B, N, N)
        mask = torch.zeros(same.shape, dtype=self.cos.dtype, device=words.device)
        mask = mask.masked_fill(~same, float("-inf"))[:, None]
        h = self.embedding(words)
        for layer in self.layers:
            h = layer(h, self.cos[:N], self.sin[:N], mask)
        h = self.norm(h)
        return self.score(torch.cat([h[:, :-1], h[:, 1:]], -1))[..., 0]

    def merge_orders(self, scores: Tensor, lengths: Tensor, noise: float = 0.0
                     ) -> list[list[int]]:
        """Each sentence's split points in merge order; ``noise`` c draws c · g in training
        (module docstring)."""
        ranked = scores.detach()
        if self.training:
            ranked = ranked + (-torch.empty_like(ranked).exponential_().log()) * max(0.0, noise)
        present = torch.arange(1, ranked.size(1) + 1, device=ranked.device) < lengths[:, None]
        order = ranked.masked_fill(~present, float("inf")).sort(dim=-1, stable=True).indices
        return [row[:n - 1] for row, n in zip(order.tolist(), lengths.tolist())]
