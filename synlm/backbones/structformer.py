"""StructFormer (Shen et al. 2021, "StructFormer: Joint Unsupervised Induction of Dependency
and Constituency Structure from Masked Language Modeling", ACL), as google-research's
``structformer/`` computes it (``structformer.py``, ``layers.py``): a masked language model
whose self-attention is constrained by the dependency graph its own parser induces.

Per sentence of n words with embeddings e (B, T, E) (``SyntaxLM`` owns the embedding and the
tied decoder, whose bias starts at zero, as the released ``output_layer``):

    δ, τ         = parser(e)                              (B, T) each      §4.1
    p_p, p_d     = parent and dependent distributions     (B, T, T) each   §4.2
                   (``synlm.modules.structformer_parser``)
    w_l          = softmax(ω_l)                           (L, heads, 2)    §4.3, the released
                                                                           ``weight_act``
    D_l,h        = w_l,h,parent p_p + w_l,h,dependent p_d (B, T, T)        §4.3
    h_0          = e + P[position]                        learned positions (``pos_emb``)
    A_l,h        = σ(q k^T / √d_h [+ b_h(|i − j|)]) ⊙ D_l,h                §4.3, a gated (not
                                                                           normalised) attention
    h_l          = h_{l−1} + Drop(W_o [A_l,h v]_h)        with q, k, v of LN(h_{l−1})
    h_l         += Drop(FFN(h_l)),  FFN = Linear(LeakyReLU(Linear(LN(·))))  (4E inner width)
    hidden       = Drop(LN(h_L))

A row of synlm's sentence layout is ``[<eos>, w1..wn]`` (``lengths`` counts the ``<eos>``):
the released model reads the words alone, so the ``<eos>`` in front takes no part in the
parser, the distributions or the attention (it stands for ROOT in the ``arcs`` layout), and
the words' positions count from 0 at w1; the words' numbers are the released model's on the
sentence alone. Padding past a row's length takes no part either.

Structures (``synlm.outputs``): ``constituency`` (kind ``distances``, (1, B, T)), the value at
input t the calibrated distance of the gap between inputs t − 1 and t (the gap after w_n is
the released ``FAR``), decoded by synlm's Algorithm 2 as the released ``build_tree`` splits at
the largest distance (the released one splits at every gap tied with the largest, which
float distances do not tie); ``dependency`` (kind ``arcs``, (B, T, T)), the parent
distribution p_p(h | d) over the words, and in column 0 (ROOT) 1 for the words of the largest
height, 0 for the others: an argmax per word gives the released evaluation's heads
(``test_phrase_grammar.py``: argmax of p_p, ROOT for the highest word).

Where this differs from the released code, for rows to be independent of their batch: the
calibration margin is each sentence's own (the released one is the batch's largest), and
the relative position bias of head h is its own for every row (the released
``repeat_interleave`` hands row b head (b·heads + h) // B's bias when B > 1). Both equal the
released numbers at batch size 1, where its parsing evaluation runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.backbones.base import Backbone, BackboneSpec
from synlm.errors import InputError
from synlm.modules.structformer_parser import FAR, StructFormerParser, parent_distribution
from synlm.outputs import BackboneOutput, Structure

#: The dependency relations a head's attention may mix (§4.3; the released ``relations``).
RELATIONS = ("head", "child", "cibling")
#: Relative distances the released position bias covers: |i − j| + 256 indexes 512 slots.
RELATIVE_SLOTS = 512


class DependencyAttention(nn.Module):
    """§4.3, dependency-constrained multi-head self-attention (the released
    ``MultiheadAttention`` with an ``attn_mask``): each head's weights are
    σ(q k^T / √d_h + b) ⊙ D, D its mixture of dependency distributions."""

    def __init__(self, size: int, num_heads: int, dropout_attention: float,
                 relative_bias: bool) -> None:
        super().__init__()
        if size % num_heads:
            raise InputError(f"hidden_size {size} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.q = nn.Linear(size, size)
        self.k = nn.Linear(size, size)
        self.v = nn.Linear(size, size)
        self.out = nn.Linear(size, size)
        self.relative_bias = (nn.Parameter(torch.zeros(num_heads, RELATIVE_SLOTS))
                              if relative_bias else None)
        self.drop = nn.Dropout(dropout_attention)
        for linear in (self.q, self.k, self.v, self.out):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor, dependency: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, T, E), dependency D (B, heads, T, T) -> output (B, T, E) and the weights
        A (B, heads, T, T) before dropout."""
        B, T, E = x.shape
        nh, hd = self.num_heads, E // self.num_heads
        q, k, v = (proj(x).view(B, T, nh, hd).transpose(1, 2)  # (B, nh, T, hd)
                   for proj in (self.q, self.k, self.v))
        scores = (q * hd ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
        if self.relative_bias is not None:
            position = torch.arange(T, device=x.device)
            offset = (position[:, None] - position[None, :]).abs() + RELATIVE_SLOTS // 2
            scores = scores + self.relative_bias[:, offset]  # (nh, T, T) broadcast
        weights = torch.sigmoid(scores) * dependency  # (B, nh, T, T)
        y = (self.drop(weights) @ v).transpose(1, 2).reshape(B, T, E)
        return self.out(y), weights


class StructFormerLayer(nn.Module):
    """A pre-norm layer (the released ``TransformerLayer``): dependency-constrained
    attention on LN(h), then a LeakyReLU feed-forward network on LN(h), each with dropout
    and a residual connection."""

    def __init__(self, size: int, num_heads: int, dropout: float, dropout_attention: float,
                 relative_bias: bool) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(size)
        self.attention = DependencyAttention(size, num_heads, dropout_attention, relative_bias)
        self.ffn_norm = nn.LayerNorm(size)
        self.fc1 = nn.Linear(size, 4 * size)
        self.fc2 = nn.Linear(4 * size, size)
        self.drop = nn.Dropout(dropout)

    def forward(self, h: Tensor, dependency: Tensor) -> tuple[Tensor, Tensor]:
        a, weights = self.attention(self.attention_norm(h), dependency)
        h = h + self.drop(a)  # (B, T, E)
        f = self.fc2(self.drop(F.leaky_relu(self.fc1(self.ffn_norm(h)))))
        return h + self.drop(f), weights


class StructFormer(Backbone):
    """StructFormer's parser and dependency-constrained Transformer over ``SyntaxLM``'s
    embeddings (module docstring); trained with the masked objective.

    Args:
        hidden_size: the width E of the embeddings and every layer (the released ``nhid``,
            512).
        num_layers: Transformer layers (``nlayers``, 8).
        num_heads: attention heads (``nheads``, 8).
        parser_layers: the parser's convolution layers (``n_parser_layers``, 3).
        conv_size: their kernel size (``conv_size``, 9).
        dropout: after attention, in and after the feed-forward network and on the output
            (``dropout``, 0.1).
        dropout_attention: on the attention weights (``dropatt``, 0).
        relative_bias: a learned bias per head and relative distance |i − j| < 256 in the
            attention scores (``--relative_bias``, off).
        position_embedding: learned absolute positions added to the embeddings
            (``--pos_emb``, on in the README's command).
        max_positions: the positions it has (500, the released table).
        relations: the distributions each head mixes, of ``head`` (p_p), ``child`` (p_d)
            and ``cibling`` (p_p p_d, diagonal removed) (``relations``, head and child).
        weight_act: ``softmax`` over the relations or an independent ``sigmoid`` of each
            (``weight_act``, softmax).
    """

    def __init__(self, hidden_size: int = 512, num_layers: int = 8, num_heads: int = 8,
                 parser_layers: int = 3, conv_size: int = 9, dropout: float = 0.1,
                 dropout_attention: float = 0.0, relative_bias: bool = False,
                 position_embedding: bool = True, max_positions: int = 500,
                 relations: Sequence[str] = ("head", "child"),
                 weight_act: Literal["softmax", "sigmoid"] = "softmax") -> None:
        super().__init__()
        for name, size in (("hidden_size", hidden_size), ("num_layers", num_layers),
                           ("num_heads", num_heads), ("parser_layers", parser_layers),
                           ("conv_size", conv_size), ("max_positions", max_positions)):
            errors.at_least(name, size)
        for name, p in (("dropout", dropout), ("dropout_attention", dropout_attention)):
            errors.probability(name, p)
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown or not relations or len(set(relations)) != len(relations):
            raise InputError(f"relations must be distinct names among {list(RELATIONS)}, "
                             f"not {list(relations)}")
        if weight_act not in ("softmax", "sigmoid"):
            raise InputError(f"weight_act must be 'softmax' or 'sigmoid', not {weight_act!r}")
        self.relations = tuple(relations)
        self.weight_act = weight_act
        self.max_positions = max_positions
        self.parser = StructFormerParser(hidden_size, parser_layers, conv_size)
        self.positions = nn.Embedding(max_positions, hidden_size) if position_embedding \
            else None
        if self.positions is not None:
            nn.init.uniform_(self.positions.weight, -0.1, 0.1)
        self.layers = nn.ModuleList(
            StructFormerLayer(hidden_size, num_heads, dropout, dropout_attention,
                              relative_bias) for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden_size)
        self.drop = nn.Dropout(dropout)
        self.relation_logits = nn.Parameter(torch.empty(num_layers, num_heads,
                                                        len(self.relations)))
        nn.init.normal_(self.relation_logits, 0.0, 0.1)
        self.log_scales = nn.Parameter(torch.zeros(2))  # c_0 (constituents), c_1 (heads)
        self.spec = BackboneSpec(
            input_size=hidden_size, output_size=hidden_size,
            layer_sizes=(hidden_size,) * num_layers,
            provides=frozenset({"layers", "distances", "arcs", "head_attention"}),
            recurrent=False, incremental=False, bidirectional=True,
            structures=(Structure("constituency", "distances"),
                        Structure("dependency", "arcs")))

    def relation_weights(self) -> Tensor:
        """w (L, heads, relations): each head's mixture of the dependency distributions."""
        if self.weight_act == "softmax":
            return self.relation_logits.softmax(-1)
        return torch.sigmoid(self.relation_logits)

    def forward(self, x: Tensor, state: Any = None, lengths: Tensor | None = None
                ) -> BackboneOutput:
        """x (B, T, E) for rows ``[<eos>, w1..wn]`` right-padded; ``lengths`` (B,) the inputs
        of each row (None: every row is T long). ``state`` is unused (a sentence is read
        whole)."""
        B, T, _ = x.shape
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.long, device=x.device)
        index = torch.arange(T, device=x.device)
        words = (index >= 1) & (index < lengths[:, None])  # (B, T)
        if self.max_positions < T - 1:
            raise InputError(f"a row of {T - 1} words is longer than StructFormer's "
                             f"max_positions ({self.max_positions})")
        distance, height = self.parser(x, words)  # (B, T) each, gap after / per word
        parent = parent_distribution(distance, height, self.log_scales.exp(), words)  # (B, T, T)
        dependency = self.dependency_masks(parent)  # (L, B, heads, T, T)
        h = x
        if self.positions is not None:
            h = h + self.positions((index - 1).clamp(min=0))  # w1 at position 0
        layers, attention = [], {}
        for l, layer in enumerate(self.layers):
            h, attention[l] = layer(h, dependency[l])  # (B, T, E), (B, heads, T, T)
            layers.append(h)
        layers[-1] = self.norm(h)
        return BackboneOutput(
            hidden=self.drop(layers[-1]), layers=layers,
            distances=F.pad(distance[:, :-1], (1, 0), value=FAR)[None],  # (1, B, T)
            arcs=self._arcs(parent, height, words), head_attention=attention)

    def dependency_masks(self, parent: Tensor) -> Tensor:
        """D (L, B, heads, T, T): each layer's and head's mixture of the relations (§4.3) of
        the parent distribution ``parent`` (B, T, T); zero towards a non-word, as the
        released key padding mask makes the attention."""
        child = parent.transpose(1, 2)
        found = {"head": parent, "child": child}
        if "cibling" in self.relations:
            eye = torch.eye(parent.size(1), dtype=torch.bool, device=parent.device)
            found["cibling"] = (parent @ child).masked_fill(eye, 0.0)
        relations = torch.stack([found[r] for r in self.relations], dim=1)  # (B, R, T, T)
        return torch.einsum("lhr,brij->lbhij", self.relation_weights(), relations)

    @staticmethod
    def _arcs(parent: Tensor, height: Tensor, words: Tensor) -> Tensor:
        """(B, T, T) in the ``arcs`` layout: p_p(h | d) over the words, and in column 0
        (ROOT) 1 for the words of the sentence's largest height (the released decoder's root),
        0 for the others."""
        top = height.masked_fill(~words, -math.inf).amax(-1, keepdim=True)  # (B, 1)
        root = (words & (height >= top)).to(parent.dtype)  # (B, T)
        return torch.cat([root[..., None], parent[..., 1:]], dim=-1)
