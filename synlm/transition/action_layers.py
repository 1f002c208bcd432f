"""The layers of the action Transformer (``synlm.transition.action_transformer``): multi-head
self-attention under a policy's mask (``ActionAttention``), with Transformer-XL relative
attention (Dai et al. 2019 eq. 4) over the policy's relative positions where it has them::

    logit(i, j) = ((q_i + u)·k_j + (q_i + v)·W_r φ(clip(r_ij))) / √d

with φ the sinusoidal encoding of the released Transformer Grammars
(``relative_encodings``); and the Transformer layer around it (``ActionLayer``), pre-norm
as GPT-2's or post-norm as Transformer-XL's. The attention runs unfused, the mask (and
relative bias) handed to ``scaled_dot_product_attention``, or fused through flex_attention
(``attention_kernel``; ``block_mask``), the same function either way.

Teacher forcing runs the layers' matrix products on the real tokens alone, packed (N, C),
and, unfused, attention on the batch's rows grouped by length (``Buckets``): each group
padded only to its own longest row, its masks and relative positions cut once a batch, the
attention written out as the unfused ``scaled_dot_product_attention`` computes it
(``ActionAttention.attend_rows``).

Search runs a step's present tokens packed as well: each layer writes their keys and values
into its cache in one write, at the rows and positions found once a step (``CacheWrite``),
and pads their queries alone.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from synlm.errors import SettingError

#: ``attention_kernel``: ``fused`` (flex_attention: a block mask, TG's relative term as a
#: ``score_mod``), ``unfused`` (the (B, G, T, S) mask and relative bias handed to
#: ``scaled_dot_product_attention``), or ``auto`` (fused on a GPU where it applies).
AttentionKernel = Literal["auto", "fused", "unfused"]
KERNELS: tuple[str, ...] = ("auto", "fused", "unfused")


@cache
def _compiled_flex_attention() -> Any:
    """flex_attention compiled (its fused kernel; on a GPU)."""
    return torch.compile(flex_attention, dynamic=True)


def _flex_attention(q: Tensor, k: Tensor, v: Tensor, score_mod: Any, block_mask: BlockMask
                    ) -> Tensor:
    """flex_attention, compiled on a GPU; eager elsewhere (its reference implementation,
    the same function: the warning that it is not compiled is silenced)."""
    if q.is_cuda:
        return _compiled_flex_attention()(q, k, v, score_mod=score_mod, block_mask=block_mask)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention.*")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def block_mask(allowed: Tensor, num_heads: int) -> BlockMask:
    """flex_attention's ``BlockMask`` of ``allowed`` (B, G, T, S) (G 1 or ``num_heads``):
    blocks with no allowed key skipped, the rest masked as ``allowed``."""
    B, G, T, S = allowed.shape
    if G == 1:
        def mask_mod(b: Tensor, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
            return allowed[b, 0, q, kv]
    else:
        def mask_mod(b: Tensor, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
            return allowed[b, h, q, kv]
    return create_block_mask(mask_mod, B, num_heads if G > 1 else None, T, S,
                             device=allowed.device)


def kernel_mask(kernel: str, allowed: Tensor | None, x: Tensor, num_heads: int,
                dropping: bool) -> BlockMask | None:
    """``allowed``'s block mask where attention runs fused under ``kernel`` on ``x``'s device
    and dtype (``dropping``: attention dropout applies); None where it runs unfused or
    causal (``allowed`` None). ``fused`` where it cannot run is a one-line ``SettingError``."""
    if kernel == "fused" and dropping:
        raise SettingError(
            "attention_kernel", "fused", "unfused or auto while training with dropout > 0 "
            "(flex_attention has no attention dropout), or dropout 0")
    if kernel == "fused" and x.requires_grad and not x.is_cuda:
        raise SettingError(
            "attention_kernel", "fused", "unfused or auto to train on a CPU (flex_attention "
            "has no backward there), or fused under torch.no_grad")
    fused = kernel == "fused" or (
        kernel == "auto" and x.is_cuda and not dropping and x.dtype != torch.float64)
    return block_mask(allowed, num_heads) if fused and allowed is not None else None


@dataclass(frozen=True)
class Packing:
    """The real tokens of a padded batch of B rows of T positions, packed into N rows: the
    layers' matrix products run on the N real tokens alone, only attention on (B, T)
    (teacher forcing: padding dropped; search: the rows and slots with no token).

    Attributes:
        index: (N,) long: each real token's ``b * T + t``, in order.
        rows: B.
        length: T.
    """

    index: Tensor
    rows: int
    length: int

    def pad(self, x: Tensor) -> Tensor:
        """(N, D) -> (B, T, D), zeros at the padding."""
        flat = x.new_zeros(self.rows * self.length, x.size(-1)).index_copy(0, self.index, x)
        return flat.view(self.rows, self.length, -1)

    def unpad(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...): the real tokens'."""
        return x.flatten(0, 1).index_select(0, self.index)

    def cache_write(self, positions: Tensor) -> CacheWrite:
        """Where a search step's tokens, those of this packing, go in the cache: each in
        its row, at its cache position ``positions`` (N,)."""
        return CacheWrite(torch.div(self.index, self.length, rounding_mode="floor"), positions)


@dataclass(frozen=True)
class CacheWrite:
    """Where the N tokens of a search step (packed, ``Packing``) go in a layer's cache
    (B, 2, nh, S, hd): the same for every layer, found once a step.

    Attributes:
        rows: (N,) long: each token's cache row.
        at: (N,) long: its cache position.
    """

    rows: Tensor
    at: Tensor


#: What a group of rows costs ``Buckets`` besides its attention scores (n·T² for n rows of
#: T positions), in scores: the operators each group adds to a layer. Measured on a CPU
#: (docs/performance.md, "Syntactic Transformers").
GROUP_COST = 4096


def length_groups(lengths: list[int], group_cost: int | None = None) -> list[int]:
    """The sizes of the groups that split ``lengths`` (sorted longest first) into runs, each
    padded to its first: those of least Σ (n·T² + ``group_cost``) over the groups of n rows
    of T positions (a split only where the length changes; None: ``GROUP_COST``)."""
    group_cost = GROUP_COST if group_cost is None else group_cost
    cuts = [i for i in range(1, len(lengths)) if lengths[i] != lengths[i - 1]]
    ends = [*cuts, len(lengths)]
    starts = [0, *cuts]
    best = {0: (0, 0)}  # rows covered -> (cost, where the last group starts)
    for end in ends:
        best[end] = min((best[start][0] + (end - start) * lengths[start] ** 2 + group_cost,
                         start) for start in starts if start < end)
    sizes, end = [], len(lengths)
    while end:
        start = best[end][1]
        sizes.append(end - start)
        end = start
    return sizes[::-1]


@dataclass(frozen=True)
class Buckets(Packing):
    """A ``Packing`` whose attention runs on the batch's rows grouped by length: each group
    of n rows padded to the T positions of its longest (what a real query attends there
    included), so attention costs Σ n·T² rather than B·T_max²; the groups by
    ``length_groups``.

    The masks are cut once a batch: a real query keeps its row of ``allowed``, a padding
    query (its output unused) attends key 0 alone, so no row of scores is all −inf.

    Attributes (besides ``Packing``'s):
        slots: (N,) long: each real token's place in the groups' (n, T) blocks laid one
            after another.
        shapes: each group's (n, T).
        biases: each group's additive mask, 0 where allowed and −inf elsewhere,
            (n, G, T, T) or, causal, (T, T); None with relative positions.
        relative: each group's (n, G, T, T) long: the row of the relative table
            (``table_rows`` of the encodings) of each key, the table's length where the key
            is not allowed (a −inf column); None without relative positions.
        table_rows: the rows of the encodings some allowed key reads.
    """

    slots: Tensor
    shapes: tuple[tuple[int, int], ...]
    biases: tuple[Tensor, ...] | None
    relative: tuple[Tensor, ...] | None
    table_rows: slice | None

    @classmethod
    def of(cls, real: Tensor, allowed: Tensor | None, relative: Tensor | None,
           dtype: torch.dtype, group_cost: int | None = None) -> Buckets:
        """The buckets of a batch whose tokens ``real`` (B, T) are real, under the mask
        ``allowed`` (B, G, T, T) (None: causal) and with ``relative`` (B, T, T) the row of
        the encodings of each key (None: no relative positions); masks in ``dtype``; the groups
        by ``length_groups`` with ``group_cost``."""
        B, T = real.shape
        device = real.device
        pos = torch.arange(T, device=device)
        needed = torch.where(real, pos, 0)  # (B, T)
        if allowed is not None:  # the keys a real query reads
            read = (allowed & real[:, None, :, None]).any(2).any(1)  # (B, T)
            needed = torch.maximum(needed, torch.where(read, pos, 0))
        lengths = (needed.amax(1) + 1).tolist()
        order = sorted(range(B), key=lambda b: -lengths[b])
        sizes = length_groups([lengths[b] for b in order], group_cost)
        rows = torch.tensor(order, device=device).split(sizes)
        shapes = tuple((n, lengths[int(group[0])]) for n, group in zip(sizes, rows))
        offsets = torch.tensor([0] + [n * t for n, t in shapes], device=device).cumsum(0)
        base = torch.empty(B, dtype=torch.long, device=device)
        for group, (n, t), offset in zip(rows, shapes, offsets.tolist()):
            base[group] = offset + t * torch.arange(n, device=device)
        packing = {"index": real.flatten().nonzero()[:, 0], "rows": B, "length": T,
                   "slots": (base[:, None] + pos)[real], "shapes": shapes}  # (N,) each
        if allowed is None:
            causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
            biases = tuple(_additive(causal[:t, :t], dtype) for _, t in shapes)
            return cls(**packing, biases=biases, relative=None, table_rows=None)
        masks = [torch.where(real[group, :t][:, None, :, None], allowed[group, :, :t, :t],
                             pos[:t] == 0)
                 for group, (_, t) in zip(rows, shapes)]  # (n, G, t, t) each
        if relative is None:
            return cls(**packing, biases=tuple(_additive(m, dtype) for m in masks),
                       relative=None, table_rows=None)
        used = relative[:, None].expand_as(allowed)[allowed & real[:, None, :, None]]
        low, high = int(used.min()), int(used.max())
        cut = tuple(torch.where(m, (relative[group][:, None, :t, :t] - low).clamp(0, high - low),
                                high - low + 1)
                    for m, group, (_, t) in zip(masks, rows, shapes))
        return cls(**packing, biases=None, relative=cut, table_rows=slice(low, high + 1))

    def split(self, x: Tensor) -> list[Tensor]:
        """(N, D) -> each group's (n, T, D), zeros at the padding."""
        flat = x.new_zeros(sum(n * t for n, t in self.shapes), x.size(-1))
        parts = flat.index_copy(0, self.slots, x).split([n * t for n, t in self.shapes])
        return [part.view(n, t, -1) for part, (n, t) in zip(parts, self.shapes)]

    def join(self, parts: list[Tensor]) -> Tensor:
        """Each group's (n, T, D) -> (N, D): the real tokens'."""
        return torch.cat([part.flatten(0, 1) for part in parts]).index_select(0, self.slots)


def _additive(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """0 where ``allowed``, −inf elsewhere."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, float("-inf"))


def relative_encodings(lowest: int, highest: int, size: int) -> Tensor:
    """Transformer-XL's sinusoids for the relative positions ``highest`` down to ``lowest``
    (rows), as the released Transformer Grammars builds them:
    ``[sin(r·ω_0..) , cos(r·ω_0..)]`` with ω_i = 10000^(−2i / size)."""
    inv_freq = 10000.0 ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)  # (size/2,)
    r = torch.arange(highest, lowest - 1, -1, dtype=torch.float64)  # (n_rel,)
    angles = r[:, None] * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], 1).float()  # (n_rel, size)


class ActionAttention(nn.Module):
    """Multi-head self-attention under a given mask, with Transformer-XL relative attention
    over the policy's relative positions (TG's depth differences) when ``relative`` (module
    docstring)."""

    def __init__(self, size: int, n_heads: int, dropout: float, relative: bool) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_size = size // n_heads
        self.dropout = dropout
        self.qkv = nn.Linear(size, 3 * size)  # q | k | v
        self.proj = nn.Linear(size, size)
        self.relative_keys = nn.Linear(size, size, bias=False) if relative else None
        if relative:  # u and v of Dai et al. 2019 eq. 4 (r_w_bias, r_r_bias)
            self.content_bias = nn.Parameter(torch.zeros(n_heads, self.head_size))
            self.position_bias = nn.Parameter(torch.zeros(n_heads, self.head_size))

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v of ``x`` (B, T, C), each (B, nh, T, hd)."""
        return self.heads(self.qkv(x))

    def heads(self, qkv: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v (B, nh, T, hd) each of the projections ``qkv`` (B, T, 3C)."""
        B, T, C3 = qkv.shape
        return tuple(t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
                     for t in qkv.split(C3 // 3, dim=2))  # type: ignore[return-value]

    def relative_table(self, encodings: Tensor) -> Tensor:
        """W_r φ(r) of the relative positions' ``encodings`` (n_rel, C) after dropout:
        (n_rel, nh, hd)."""
        p_drop = self.dropout if self.training else 0.0
        table = self.relative_keys(F.dropout(encodings, p_drop, self.training))
        return table.view(-1, self.n_heads, self.head_size)

    def attend_rows(self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None,
                    relative: Tensor | None, table: Tensor | None) -> Tensor:
        """``attend`` over one group of ``Buckets``: q, k, v (n, nh, T, hd), the additive
        mask ``bias`` (n, G, T, T) or (T, T), or with relative positions ``relative``
        (n, G, T, T) each key's row of ``table`` (n_rel, nh, hd) (n_rel: not allowed).
        Written out as the unfused ``scaled_dot_product_attention`` computes it (q and k
        each scaled by d^(−1/4), the mask added, softmax, dropout), less its check for a
        row with no allowed key (none has). Returns (n, T, C)."""
        n, nh, T, hd = q.shape
        p_drop = self.dropout if self.training else 0.0
        if table is not None:
            by_position = torch.einsum("bhtd,rhd->bhtr", q + self.position_bias[:, None],
                                       table) / math.sqrt(hd)  # (n, nh, T, n_rel)
            by_position = F.pad(by_position, (0, 1), value=float("-inf"))
            bias = by_position.gather(-1, relative.expand(n, nh, T, T))  # (n, nh, T, T)
            q = q + self.content_bias[:, None]
        scale = math.sqrt(1.0 / math.sqrt(hd))
        scores = torch.matmul(q * scale, k.transpose(-2, -1) * scale).add_(bias)
        weights = torch.softmax(scores, -1)  # (n, nh, T, T)
        if p_drop > 0:
            weights = F.dropout(weights, p_drop)
        return torch.matmul(weights, v).transpose(1, 2).reshape(n, T, nh * hd)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None,
               relative: Tensor | None, encodings: Tensor | None,
               fused: BlockMask | None = None) -> Tensor:
        """softmax(q·kᵀ/√d [+ relative]) v over keys ``allowed`` (B, G, T, S) (None:
        causal, T = S); ``relative`` (B, T, S): each key's index into ``encodings``
        (n_rel, C). With ``fused``, the block mask of ``allowed``, through flex_attention:
        the relative term a ``score_mod`` that reads the (B, nh, T, n_rel) table by
        ``relative``, no (B, nh, T, S) bias built. Returns (B, T, C) before the output
        projection ``proj``."""
        B, nh, T, hd = q.shape
        p_drop = self.dropout if self.training else 0.0
        if self.relative_keys is not None:
            table = self.relative_table(encodings)  # (n_rel, nh, hd)
            by_position = torch.einsum("bhtd,rhd->bhtr", q + self.position_bias[:, None],
                                       table) / math.sqrt(hd)  # (B, nh, T, n_rel)
            q = q + self.content_bias[:, None]
        if fused is not None:
            score_mod = None
            if self.relative_keys is not None:
                def score_mod(score: Tensor, b: Tensor, h: Tensor, i: Tensor, j: Tensor
                              ) -> Tensor:
                    return score + by_position[b, h, i, relative[b, i, j]]
            y = _flex_attention(q, k, v, score_mod, fused)
        elif self.relative_keys is None:
            y = F.scaled_dot_product_attention(q, k, v, allowed, dropout_p=p_drop,
                                               is_causal=allowed is None)
        else:
            index = relative[:, None].expand(B, nh, T, relative.size(-1))
            bias = by_position.gather(-1, index)  # (B, nh, T, S)
            bias = bias.masked_fill(~allowed, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, bias, dropout_p=p_drop)
        return y.transpose(1, 2).reshape(B, T, nh * hd)  # (B, T, C)


class ActionLayer(nn.Module):
    """A Transformer layer: pre-norm (GPT-2's) ``x + Attn(LN(x))``, ``x + FFN(LN(x))``, or
    post-norm (Transformer-XL's, the released Transformer Grammars')
    ``LN(x + Attn(x))``, ``LN(x + FFN(x))``."""

    def __init__(self, size: int, n_heads: int, ffn_size: int, dropout: float,
                 relative: bool, pre_norm: bool) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.attn_norm = nn.LayerNorm(size)
        self.attn = ActionAttention(size, n_heads, dropout, relative)
        self.ffn_norm = nn.LayerNorm(size)
        self.ffn = nn.Sequential(nn.Linear(size, ffn_size), nn.GELU(),
                                 nn.Linear(ffn_size, size), nn.Dropout(dropout))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, allowed: Tensor | None, relative: Tensor | None,
                encodings: Tensor | None, cache: Tensor | None = None,
                write: CacheWrite | None = None, fused: BlockMask | None = None,
                memory: Tensor | None = None, packed: Packing | Buckets | None = None
                ) -> Tensor:
        """``x`` (B, T, C) over the whole sequence; or, with ``cache`` (B, 2, nh, S, hd)
        (this layer's keys and values), ``packed`` and ``write``, the N new tokens' keys and
        values written into it where ``write`` says (one write of both) and their queries,
        padded to (B, T), attending over its first S' positions (``allowed``
        (B, G, T, S')); or, with ``memory`` (B, M, C) (Transformer-XL's: this layer's inputs
        at the tokens the memory holds), the keys and values of ``[memory | x]``
        (``allowed`` (B, G, T, M + T)).
        ``fused``: ``allowed``'s block mask, attention through flex_attention. With
        ``packed``, ``x`` (N, C) holds the real tokens of a (B, T) batch alone (``Packing``:
        only attention runs padded), or with ``Buckets`` attention on its groups of rows
        (``allowed`` and ``relative`` unused: the groups' own; ``encodings`` all rows)."""
        qkv = self.attn.qkv(self.attn_norm(x) if self.pre_norm else x)  # (B, T, 3C) or (N, 3C)
        if isinstance(packed, Buckets):
            y = packed.join(self._attend_buckets(qkv, packed, encodings))  # (N, C)
            return self._rest(x, y)
        if cache is not None:
            q, k, v = self._write(qkv, cache, write, packed, allowed.size(-1))
        else:
            q, k, v = self.attn.heads(qkv if packed is None else packed.pad(qkv))
        if memory is not None:
            _, k_memory, v_memory = self.attn.project(
                self.attn_norm(memory) if self.pre_norm else memory)  # (B, nh, M, hd) each
            k, v = torch.cat([k_memory, k], 2), torch.cat([v_memory, v], 2)
        y = self.attn.attend(q, k, v, allowed, relative, encodings, fused)  # (B, T, C)
        return self._rest(x, y if packed is None else packed.unpad(y))

    def _write(self, qkv: Tensor, cache: Tensor, write: CacheWrite, packed: Packing,
               used: int) -> tuple[Tensor, Tensor, Tensor]:
        """The keys and values of the N packed tokens' projections ``qkv`` (N, 3C) written
        into ``cache`` (B, 2, nh, S, hd) at ``write``'s rows and positions, in one write;
        their queries padded to (B, nh, T, hd) and the cache's first ``used`` keys and
        values (B, nh, S', hd) each."""
        nh, hd = self.attn.n_heads, self.attn.head_size
        C = nh * hd
        cache[write.rows, :, :, write.at] = qkv[:, C:].view(-1, 2, nh, hd)  # (N, 2, nh, hd)
        q = packed.pad(qkv[:, :C]).view(packed.rows, packed.length, nh, hd).transpose(1, 2)
        return q, cache[:, 0, :, :used], cache[:, 1, :, :used]

    def _attend_buckets(self, qkv: Tensor, packed: Buckets, encodings: Tensor | None
                        ) -> list[Tensor]:
        """Each group's attention (n, T, C) of the projections ``qkv`` (N, 3C)."""
        table = None if packed.relative is None else \
            self.attn.relative_table(encodings[packed.table_rows])  # (n_rel, nh, hd)
        return [self.attn.attend_rows(
            *self.attn.heads(part), None if packed.biases is None else packed.biases[g],
            None if packed.relative is None else packed.relative[g], table)
            for g, part in enumerate(packed.split(qkv))]

    def _rest(self, x: Tensor, y: Tensor) -> Tensor:
        """The layer after attention: ``x`` plus the projected attention ``y``, then the
        feed-forward network, each sublayer normed as ``pre_norm`` says."""
        x = x + self.drop(self.attn.proj(y))
        if self.pre_norm:
            return x + self.ffn(self.ffn_norm(x))
        x = self.attn_norm(x)
        return self.ffn_norm(x + self.ffn(x))
