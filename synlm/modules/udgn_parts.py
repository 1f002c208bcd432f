"""The parts of UDGN (Shen et al. 2022, "Unsupervised Dependency Graph Network"): its
dependency parser, the dependency graph it builds from the parser's head distribution and
the Dependency Graph Network layer with its competitive gated heads. The released
evaluation's decoding rule (a maximum spanning tree over the head distribution,
Chu-Liu-Edmonds with the best single root) is ``synlm.metrics.arcs``' ``tree`` decoder.

Each part computes what the released code (yikangshen/UDGN, ``models.py`` ``UDGN`` and
``layers.py`` ``GatedMultiheadAttention``/``DGNLayer``) computes; where the paper and the
code differ, the code is followed and the docstring says so.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

#: What the released code adds to the dependency probability before its logarithm.
EDGE_EPS = 1e-6


def key_mask(lengths: Tensor, T: int) -> Tensor:
    """(B, 1, T) bool, True at the keys ``s < lengths[b]`` every query of row b may read."""
    return (torch.arange(T, device=lengths.device)[None, :] < lengths[:, None])[:, None, :]


class DependencyParser(nn.Module):
    """UDGN's dependency parser: a bidirectional LSTM over the parser's own word embeddings, a
    linear map of its states to a child and a parent vector per word, and the head
    distribution

        p(h | d) = softmax_h(c_d · p_h / √E)   over the inputs h of d's row (d's own too),

    with [p_h; c_d] = W_ff BiLSTM(dropout(e_parser))_t + b (the released code chunks the
    output as parent first, child second; E is the embedding width). Dropout on the
    embeddings, between the LSTM layers and on its output (the released ``parser_dropout``).
    Padding never enters the LSTM (packed by ``lengths``) and is never a head.
    """

    def __init__(self, size: int, num_layers: int, dropout: float) -> None:
        super().__init__()
        self.size = size
        self.lstm = nn.LSTM(size, size, num_layers, dropout=dropout, batch_first=True,
                            bidirectional=True)
        self.ff = nn.Linear(2 * size, 2 * size)
        self.drop = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.ff.weight)
        nn.init.zeros_(self.ff.bias)

    def forward(self, emb: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``emb`` (B, T, E) parser embeddings, ``lengths`` (B,) -> (p, logits), both
        (B, T, T): ``p[b, d, h]`` = p(h | d), logits −inf at padded heads."""
        T = emb.size(1)
        packed = pack_padded_sequence(self.drop(emb), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        h, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True,
                                   total_length=T)  # (B, T, 2E)
        parent, child = self.ff(self.drop(h)).chunk(2, dim=-1)  # (B, T, E) each
        logits = torch.bmm(child, parent.transpose(1, 2)) * self.size ** -0.5  # (B, T, T)
        logits = logits.masked_fill(~key_mask(lengths, T), float("-inf"))
        return logits.softmax(-1), logits


def dependency_graph(p: Tensor) -> tuple[Tensor, Tensor]:
    """The head distribution without self-attachment, ``head`` (B, T, T) = p with a zero
    diagonal, and the probability that d and h are linked in either direction,

        dep(d, h) = head(d, h) + head(h, d) − head(d, h) · head(h, d),

    the released ``generate_mask``: the DGN's attention reads each pair of words through
    the probability of a dependency edge between them."""
    eye = torch.eye(p.size(-1), dtype=torch.bool, device=p.device)
    head = p.masked_fill(eye, 0.0)  # (B, T, T)
    child = head.transpose(1, 2)
    return head + child - head * child, head


def direction_features(T: int, like: Tensor) -> Tensor:
    """(T, T, 2) float: [h left of d, h right of d], the two relations whose per-head
    biases the DGN's attention adds (the released ``rels``)."""
    ones = torch.ones(T, T, dtype=like.dtype, device=like.device)
    return torch.stack([ones.tril(-1), ones.triu(1)], dim=-1)


class GatedAttention(nn.Module):
    """Competitive gated heads, the released ``GatedMultiheadAttention``.

    With [q; k; v; g] = W x + b split into ``num_heads`` heads of width ``head_size``:

        s_dhk = (q_dk · k_hk + β_{rel(d, h), k}) / √head_size
        a_dhk = softmax_k(s_dhk) · (dep(d, h) + 1e-6)        (zero at padded h)
        o_dk  = σ(g_dk) ⊙ Σ_h a_dhk tanh(v_hk)
        out_d = W_o dropout([o_d1; ..; o_dK]) + b_o

    The softmax runs over the heads k, not over the positions h: the heads compete for
    each edge, and the parser's edge probability dep(d, h) (``dependency_graph``) decides
    how much of it is read. β (2, K) is a bias per head for a head to the left and to the
    right, U(−0.1, 0.1) at init; the code scales it by 1/√head_size with the scores. The
    attention weights go through ``dropout_attention``.
    """

    def __init__(self, size: int, head_size: int, num_heads: int, dropout: float,
                 dropout_attention: float) -> None:
        super().__init__()
        self.num_heads, self.head_size = num_heads, head_size
        inner = num_heads * head_size
        self.proj = nn.Linear(size, 4 * inner)
        self.out_proj = nn.Linear(inner, size)
        self.rel_bias = nn.Parameter(torch.empty(2, num_heads).uniform_(-0.1, 0.1))
        self.drop = nn.Dropout(dropout)
        self.drop_attention = nn.Dropout(dropout_attention)
        for linear in (self.proj, self.out_proj):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor, log_dep: Tensor, keys: Tensor, rels: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        """``x`` (B, T, E), ``log_dep`` (B, T, T) = log(dep + 1e-6), ``keys`` (B, 1, T) bool,
        ``rels`` (T, T, 2) -> (out (B, T, E), attention a (B, T, T, K), gates σ(g)
        (B, T, K, head_size))."""
        B, T, _ = x.shape
        q, k, v, g = (t.reshape(B, T, self.num_heads, self.head_size)
                      for t in self.proj(x).chunk(4, dim=-1))  # (B, T, K, D) each
        scores = torch.einsum("bihd,bjhd->bijh", q, k)  # (B, T, T, K)
        scores = (scores + rels @ self.rel_bias) * self.head_size ** -0.5
        attention = (scores.log_softmax(-1) + log_dep[..., None]).exp()
        attention = attention.masked_fill(~keys[..., None], 0.0)  # (B, T, T, K)
        gates = torch.sigmoid(g)
        read = torch.einsum("bijh,bjhd->bihd", self.drop_attention(attention), torch.tanh(v))
        out = self.out_proj(self.drop((read * gates).reshape(B, T, -1)))  # (B, T, E)
        return out, attention, gates


class DGNLayer(nn.Module):
    """One Dependency Graph Network layer: x + dropout(GatedAttention(x)), no
    normalisation and no feed-forward block (the released ``DGNLayer``)."""

    def __init__(self, size: int, head_size: int, num_heads: int, dropout: float,
                 dropout_attention: float) -> None:
        super().__init__()
        self.attention = GatedAttention(size, head_size, num_heads, dropout, dropout_attention)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, log_dep: Tensor, keys: Tensor, rels: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        out, attention, gates = self.attention(x, log_dep, keys, rels)
        return x + self.drop(out), attention, gates
