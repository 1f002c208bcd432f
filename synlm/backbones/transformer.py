"""Transformer language model: fairseq's ``transformer_lm``, the base DMLM trains (Yang & Wan
2022 Appendix A: 6 layers, 8 heads, width 512, FFN 2048, dropout 0.1).

A decoder-only stack of Vaswani et al. (2017) layers (§3.1-3.5): token embeddings scaled by
√E plus sinusoidal positions, then per layer masked multi-head self-attention and a ReLU
feed-forward network, each with dropout, a residual connection and LayerNorm. Post-norm
(``LayerNorm(x + sublayer(x))``, fairseq's default) or pre-norm (``x + sublayer(LayerNorm(x))``
with a final LayerNorm). ``SyntaxLM`` owns the embedding and the tied decoder (fairseq's
``--share-decoder-input-output-embed``, no output bias).

Attention is PyTorch's fused ``scaled_dot_product_attention`` except in ``attention_layer``
(default the penultimate, as a dependency-mixture head reads it, DMLM §2.2), which computes
the probabilities explicitly and returns their mean over heads as ``attention`` (B, T, S).
Every layer's per-head probabilities are also at hand as ``head_attention`` (``HeadAttention``,
(B, heads, T, S) by layer): computed from the layer's queries and keys only when a head reads
them (a tree-planting head, its planted layers), so the layers no head reads keep the fused
kernel and cost nothing more.

The ``state`` is a key/value cache: passing it back continues the same sequences
(incremental decoding for generation). Training never carries it across windows
(``spec.recurrent`` is False): sentence mode feeds one sentence per row, as fairseq's
``--sample-break-mode eos``; stream mode with fixed windows is fairseq's ``none`` (blocks).

With ``causal=False`` the stack is a Transformer encoder (Vaswani et al. 2017 §3.2.3,
self-attention over every position), the masked language model of BERT (Devlin et al. 2019)
and the released StructFormer's Transformer baseline (Shen et al. 2021): each position
attends to every position of its own row, none past the row's length (a key padding mask
from ``lengths``); ``spec.bidirectional`` is set and no cache is kept (``incremental`` is
False), so it trains under the masked objective only (``data.objective: masked``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.backbones.base import (
    Backbone,
    BackboneSpec,
    KVCache,
    attention_layer_index,
    causal_mask,
)
from synlm.errors import InputError
from synlm.outputs import BackboneOutput

#: The feed-forward activations: fairseq's ``relu`` (``transformer_lm``) and ``gelu``
#: (``transformer_lm_gpt``), and the released StructFormer's ``leaky_relu`` (slope 0.01).
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu, "gelu": F.gelu, "leaky_relu": F.leaky_relu}


def sinusoidal_positions(positions: Tensor, size: int) -> Tensor:
    """fairseq's ``SinusoidalPositionalEmbedding`` (Vaswani et al. 2017 §3.5): for position p,
    ``[sin(p·ω_0) .. sin(p·ω_{h-1}), cos(p·ω_0) .. cos(p·ω_{h-1})]`` with h = size / 2 and
    ω_i = 10000^(−i / (h − 1)) (halves concatenated, not interleaved). Positions count from
    0 (fairseq starts at padding_idx + 1, a shift that no result depends on)."""
    half = size // 2
    freq = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float32)
                     * -(math.log(10000.0) / (half - 1)))  # (h,)
    angles = positions.float()[:, None] * freq[None, :]  # (T, h)
    table = torch.cat([angles.sin(), angles.cos()], dim=1)  # (T, 2h)
    return F.pad(table, (0, size - 2 * half))  # (T, size)


class HeadAttention(Mapping[int, Tensor]):
    """Each head's attention probabilities (B, heads, T, S) of a Transformer stack, by 0-based
    layer, S = cached + T: ``compute(layer)`` runs the first time a layer is read and its
    result is kept, so a forward pass pays only for the layers a head reads (the probabilities
    are softmax(q kᵀ · scale + causal mask) of the layer's own queries and keys, Vaswani et
    al. 2017 eq. 1, before attention dropout; the fused kernel computes the same ones
    without keeping them)."""

    def __init__(self, n_layers: int, compute: Callable[[int], Tensor],
                 known: Mapping[int, Tensor] | None = None) -> None:
        self._n_layers = n_layers
        self._compute = compute
        self._known: dict[int, Tensor] = dict(known or {})

    def __getitem__(self, layer: int) -> Tensor:
        if not isinstance(layer, int) or not 0 <= layer < self._n_layers:
            raise KeyError(f"attention of layer {layer!r}: the layers are 0..{self._n_layers - 1}")
        if layer not in self._known:
            self._known[layer] = self._compute(layer)  # (B, heads, T, S)
        return self._known[layer]

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._n_layers))

    def __len__(self) -> int:
        return self._n_layers


def attention_probabilities(q: Tensor, k: Tensor, allowed: Tensor | None = None) -> Tensor:
    """softmax(q kᵀ / √d + mask) (B, heads, T, S) (Vaswani et al. 2017 eq. 1) from queries
    (B, heads, T, d), the last T of S positions, and keys (B, heads, S, d); in float32 at
    least. ``allowed`` (broadcast to (B, heads, T, S), True where a query may attend to a
    key): default the causal mask."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, heads, T, S)
    if allowed is None:
        allowed = causal_mask(q.size(2), k.size(2), q.device)  # (T, S)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32))


def key_padding_mask(lengths: Tensor | None, T: int, device: torch.device) -> Tensor:
    """(B, 1, 1, T) bool, True at the keys within each row's length: what a bidirectional
    stack attends to (every key of a row when ``lengths`` is None: (1, 1, 1, T))."""
    positions = torch.arange(T, device=device)
    if lengths is None:
        return torch.ones(1, 1, 1, T, dtype=torch.bool, device=device)
    return (positions[None, :] < lengths.to(device)[:, None])[:, None, None, :]


class SelfAttention(nn.Module):
    """Masked multi-head self-attention (Vaswani et al. 2017 §3.2.2): causal, or within the
    keys ``allowed`` when given (a bidirectional stack's key padding mask). ``explicit`` computes
    softmax(QKᵀ/√d) itself and returns each head's probabilities; otherwise the fused kernel
    runs and none are kept. The queries are returned either way (``HeadAttention`` computes a
    fused layer's probabilities from them and the keys when a head asks)."""

    def __init__(self, size: int, n_heads: int, dropout_attention: float, explicit: bool
                 ) -> None:
        super().__init__()
        if size % n_heads:
            raise InputError(f"width {size} is not divisible by {n_heads} heads")
        self.n_heads = n_heads
        self.dropout_attention = dropout_attention
        self.explicit = explicit
        self.qkv = nn.Linear(size, 3 * size)  # q | k | v
        self.proj = nn.Linear(size, size)

    def forward(self, x: Tensor, cache: tuple[Tensor, Tensor] | None,
                allowed: Tensor | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor, Tensor | None]:
        # allowed: None (causal) or (B, 1, 1, S) bool, the keys every query may attend to
        B, T, C = x.shape
        nh, hd = self.n_heads, C // self.n_heads
        q, k, v = (t.view(B, T, nh, hd).transpose(1, 2)  # (B, nh, T, hd)
                   for t in self.qkv(x).split(C, dim=2))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)  # (B, nh, S, hd)
            v = torch.cat([cache[1], v], dim=2)
        S = k.size(2)
        p_drop = self.dropout_attention if self.training else 0.0
        probs = None
        if self.explicit:
            probs = attention_probabilities(q, k, allowed)  # (B, nh, T, S)
            y = F.dropout(probs.to(v.dtype), p_drop, self.training) @ v  # (B, nh, T, hd)
        elif allowed is not None:
            y = F.scaled_dot_product_attention(q, k, v, allowed, dropout_p=p_drop)
        elif S == T:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=True)
        else:  # queries are the last T of S positions: the mask is aligned bottom-right
            y = F.scaled_dot_product_attention(q, k, v, causal_mask(T, S, x.device),
                                               dropout_p=p_drop)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.proj(y), (k, v), q, probs  # probs: (B, nh, T, S) or None


class TransformerLayer(nn.Module):
    """Self-attention and a feed-forward network (§3.3), each with dropout and a residual
    connection, post-norm or pre-norm (fairseq ``TransformerDecoderLayer`` without
    encoder attention)."""

    def __init__(self, size: int, n_heads: int, ffn_size: int, dropout: float,
                 dropout_attention: float, dropout_activation: float,
                 activation: str, pre_norm: bool, explicit: bool) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = SelfAttention(size, n_heads, dropout_attention, explicit)
        self.attn_norm = nn.LayerNorm(size)
        self.fc1 = nn.Linear(size, ffn_size)
        self.fc2 = nn.Linear(ffn_size, size)
        self.ffn_norm = nn.LayerNorm(size)
        self.activation = ACTIVATIONS[activation]
        self.drop = nn.Dropout(dropout)
        self.drop_activation = nn.Dropout(dropout_activation)

    def forward(self, x: Tensor, cache: tuple[Tensor, Tensor] | None,
                allowed: Tensor | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor, Tensor | None]:
        # x: (B, T, C); allowed: None (causal) or (B, 1, 1, T) bool
        h = self.attn_norm(x) if self.pre_norm else x
        a, kv, q, probs = self.attn(h, cache, allowed)
        x = x + self.drop(a)
        if not self.pre_norm:
            x = self.attn_norm(x)
        h = self.ffn_norm(x) if self.pre_norm else x
        f = self.fc2(self.drop_activation(self.activation(self.fc1(h))))  # (B, T, C)
        x = x + self.drop(f)
        if not self.pre_norm:
            x = self.ffn_norm(x)
        return x, kv, q, probs


class Transformer(Backbone):
    """A Transformer decoder stack over ``SyntaxLM``'s embeddings.

    Args:
        input_size: model width E (the embedding size; 512 in fairseq's base).
        num_layers: decoder layers (6).
        num_heads: attention heads (8).
        ffn_size: feed-forward inner width (2048).
        dropout: after attention and after the feed-forward network (0.1), and on the
            embeddings unless ``dropout_input`` is given.
        dropout_attention: on the attention probabilities (fairseq default 0).
        dropout_activation: after the feed-forward activation (fairseq default 0).
        activation: ``relu`` (``transformer_lm``), ``gelu`` (``transformer_lm_gpt``) or
            ``leaky_relu`` (the released StructFormer's).
        dropout_input: on the embeddings plus positions (None: ``dropout``; the released
            StructFormer: 0).
        dropout_output: on the top layer's output, the decoder's input (the released
            StructFormer: its dropout, after the final LayerNorm; fairseq: 0).
        pre_norm: LayerNorm before each sublayer plus a final one (fairseq
            ``--decoder-normalize-before``); False: after (the default of ``transformer_lm``).
        scale_embedding: multiply the embeddings by √E (fairseq's default).
        positions: ``sinusoidal`` (fixed, Vaswani et al. 2017 §3.5, fairseq's) or
            ``learned``: an embedding of each position 0..``max_positions`` − 1, initialised
            U(−0.1, 0.1) (the released StructFormer's ``--pos_emb``, 500 positions).
        max_positions: with ``learned`` positions, how many.
        attention_layer: the layer (0-based, negative from the top) whose head-averaged
            attention probabilities are computed explicitly and provided as ``attention``
            (default −2, the penultimate); None: every layer uses the fused kernel and no
            attention is provided. ``head_attention`` (every layer's per-head probabilities,
            computed when read) is provided either way.
        causal: each position attends to itself and the positions before it (a language
            model); False: to every position of its row within its length (``lengths``), a
            masked language model's encoder (``spec.bidirectional``, no cache).
    """

    def __init__(
        self,
        input_size: int = 512,
        num_layers: int = 6,
        num_heads: int = 8,
        ffn_size: int = 2048,
        dropout: float = 0.1,
        dropout_attention: float = 0.0,
        dropout_activation: float = 0.0,
        activation: Literal["relu", "gelu", "leaky_relu"] = "relu",
        pre_norm: bool = False,
        scale_embedding: bool = True,
        attention_layer: int | None = -2,
        causal: bool = True,
        dropout_input: float | None = None,
        dropout_output: float = 0.0,
        positions: Literal["sinusoidal", "learned"] = "sinusoidal",
        max_positions: int = 500,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise errors.SettingError("activation", activation, " | ".join(ACTIVATIONS))
        if positions not in ("sinusoidal", "learned"):
            raise errors.SettingError("positions", positions, "sinusoidal | learned")
        for name, size in (("input_size", input_size), ("num_layers", num_layers),
                           ("num_heads", num_heads), ("ffn_size", ffn_size),
                           ("max_positions", max_positions)):
            errors.at_least(name, size)
        dropout_input = dropout if dropout_input is None else dropout_input
        for name, p in (("dropout", dropout), ("dropout_attention", dropout_attention),
                        ("dropout_activation", dropout_activation),
                        ("dropout_input", dropout_input), ("dropout_output", dropout_output)):
            errors.probability(name, p)
        self.input_size = input_size
        self.causal = causal
        self.embed_scale = math.sqrt(input_size) if scale_embedding else 1.0
        self.attention_layer = attention_layer_index(attention_layer, num_layers)
        self.drop = nn.Dropout(dropout_input)
        # none at all when 0: the random stream of every earlier run stays as it was
        self.drop_output = nn.Dropout(dropout_output) if dropout_output else nn.Identity()
        self.positions = nn.Embedding(max_positions, input_size) if positions == "learned" \
            else None
        self.layers = nn.ModuleList(
            TransformerLayer(input_size, num_heads, ffn_size, dropout, dropout_attention,
                             dropout_activation, activation, pre_norm,
                             explicit=i == self.attention_layer)
            for i in range(num_layers))
        self.final_norm = nn.LayerNorm(input_size) if pre_norm else nn.Identity()
        self.reset_parameters()
        provides = {"layers", "head_attention"} | (
            {"attention"} if self.attention_layer is not None else set())
        self.spec = BackboneSpec(
            input_size=input_size, output_size=input_size, layer_sizes=(input_size,) * num_layers,
            provides=frozenset(provides), recurrent=False, incremental=causal,
            bidirectional=not causal)

    def reset_parameters(self) -> None:
        """fairseq's initialisation: Xavier-uniform weights, zero biases. The fused q|k|v
        matrix (3E × E) under plain Xavier has fairseq's bound for its separate q, k, v with
        gain 1/√2. Learned positions: U(−0.1, 0.1), as the released StructFormer's."""
        for name, p in self.named_parameters():
            if "norm" in name:
                continue
            if name == "positions.weight":
                nn.init.uniform_(p, -0.1, 0.1)
            elif p.dim() == 2:
                nn.init.xavier_uniform_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, x: Tensor, state: KVCache | tuple | None = None,
                lengths: Tensor | None = None) -> BackboneOutput:
        # x: (B, T, E) token embeddings; state: the cache of earlier positions, or None;
        # lengths: (B,) tokens per row, read when not causal (None: every position counts)
        if not self.causal and state is not None:
            raise InputError("a bidirectional Transformer (causal: false) reads whole "
                             "sentences and keeps no cache; it cannot continue a state")
        allowed = None if self.causal else key_padding_mask(lengths, x.size(1), x.device)
        cache = KVCache(*state) if state is not None else None
        offset = cache.length if cache is not None else 0
        h = self.drop(x * self.embed_scale
                      + self._positions(offset, x.size(1), x.device).to(x.dtype))  # (B, T, E)
        layers, keys, values, queries, explicit = [], [], [], [], {}
        for i, layer in enumerate(self.layers):
            h, (k, v), q, probs = layer(h, None if cache is None else
                                        (cache.keys[i], cache.values[i]), allowed)  # (B, T, E)
            layers.append(h)
            keys.append(k)
            values.append(v)
            queries.append(q)  # (B, nh, T, hd)
            if probs is not None:
                explicit[i] = probs  # (B, nh, T, S)
        layers[-1] = self.final_norm(h)
        attention = explicit[max(explicit)].mean(dim=1) if explicit else None  # (B, T, S)
        head_attention = HeadAttention(
            len(self.layers), lambda i: attention_probabilities(queries[i], keys[i], allowed),
            explicit)
        state = KVCache(tuple(keys), tuple(values)) if self.causal else None
        return BackboneOutput(hidden=self.drop_output(layers[-1]), state=state,
                              layers=layers, attention=attention, head_attention=head_attention)

    def _positions(self, offset: int, T: int, device: torch.device) -> Tensor:
        """(T, E): the encodings of positions offset .. offset + T − 1."""
        positions = torch.arange(offset, offset + T, device=device)
        if self.positions is None:
            return sinusoidal_positions(positions, self.input_size)
        if offset + T > self.positions.num_embeddings:
            raise InputError(f"a row of {offset + T} positions is longer than the "
                             f"{self.positions.num_embeddings} learned positions "
                             "(max_positions)")
        return self.positions(positions)
