"""Action Transformer: a Transformer language model over a sentence's top-down actions, with
the attention of PLM, PLM-mask or Transformer Grammars.

Like the RNNG (``synlm.transition.rnng``) it models a sentence x and its tree y together as
the top-down actions a_1..a_n of y (``synlm.syntax.actions``), read as tokens after a start
token: ``NT(X)`` and ``REDUCE`` are tokens of their own, a ``SHIFT`` is the word it
generates. One softmax over the words and the non-``SHIFT`` actions gives each next token::

    z_t = E_out h_t                       h_t: the top layer at the token before a_t
    log p(a_t, x | a_<t) = z_t[a_t or its word] − logsumexp(z_t)
    log p(x, y) = Σ_t log p(a_t, x | a_<t)

with E_out the word and action embeddings (tied, as GPT-2 ties its output). The attention
policy ``attention`` (``synlm.transition.attention``, a file each) decides what each token
reads, and how positions enter:

- ``causal`` (PLM, Qian et al. 2021 §3.1): every earlier token, as a GPT-2 over the action
  sequence; learned absolute positions.
- ``plm_mask`` (PLM-mask, Qian et al. 2021 §3.2): as ``causal`` except two heads of every
  layer, the buffer head, which reads only the tokens before the innermost open ``NT``,
  and the stack head, which reads only the tokens from it on.
- ``tg`` (Transformer Grammars, Sartran et al. 2022 §2): each ``REDUCE`` is two tokens, the
  closing bracket ``X)`` twice; the first (COMPOSE attention) reads the opening ``NT`` and
  the children still on the stack and replaces them on it, every other token (STACK
  attention) reads the stack; no absolute positions: Transformer-XL relative attention
  (Dai et al. 2019 eq. 4) whose relative position is the difference of tree depths,
  clipped to [−1, 62] as the paper's configuration::

      logit(i, j) = ((q_i + u)·k_j + (q_i + v)·W_r φ(clip(depth_i − depth_j))) / √d

  with φ the sinusoidal encoding of the released code. The first copy predicts nothing.
  With ``sequence_length`` (documents, as the released document-level models) teacher
  forcing reads each row in chunks of that many tokens with Transformer-XL memory (Dai et
  al. 2019 §3.2): each layer keeps its inputs at the ``memory_length`` tokens the policy's
  memory holds, for TG the top of the stack at the chunk boundary (the released
  ``gather_into_new_memory``), and the next chunk's keys and values are those of
  ``[memory | chunk]``.
- a policy of one's own (``AttentionPolicy``), by ``class_path`` or as an instance.

The model reads only what the policy provides (``synlm.transition.attention.base``): the
tokens and masks of a batch, its rows' state in search and what a step adds, and whether
there are absolute positions, relative attention or closing brackets.

Every policy runs on the same GELU layers, pre-norm as GPT-2's (``x + Attn(LN(x))``,
``x + FFN(LN(x))``, a final LayerNorm; PLM's default) or post-norm as Transformer-XL's
(``LN(x + Attn(x))``, ``LN(x + FFN(x))``; TG's default): the policy's ``pre_norm`` unless
``pre_norm`` is set. Teacher forcing runs a whole batch of sequences with masks built for
the batch at once; beam search (``synlm.transition.beam``) feeds one action per row and
step, each row's keys and values kept in a cache (``ActionTransformerState``).

Where the released models differ (subword tokens, the labelled closing bracket TG predicts,
GPT-2's sizes) is written in docs/reference-implementations.md.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from synlm import errors
from synlm.modules.recorded import RecordsInit
from synlm.transition.attention import POLICIES, Attention, build_policy
from synlm.transition.attention.base import (
    AttentionPolicy,
    AttentionState,
    BatchMasks,
    ChunkedMasks,
    StepMasks,
    opened_by,
)
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import (
    FIRST_NT,
    NO_ACTION,
    REDUCE,
    SHIFT,
    Limits,
    ParserState,
)
from synlm.transition.structure import RowState
from synlm.transition.types import RNNGOutput, full_precision

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


def _relative_encodings(lowest: int, highest: int, size: int) -> Tensor:
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
        B, T, C = x.shape
        return tuple(t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
                     for t in self.qkv(x).split(C, dim=2))  # type: ignore[return-value]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None,
               relative: Tensor | None, encodings: Tensor | None,
               fused: BlockMask | None = None) -> Tensor:
        """softmax(q·kᵀ/√d [+ relative]) v over keys ``allowed`` (B, G, T, S) (None:
        causal, T = S); ``relative`` (B, T, S): each key's index into ``encodings``
        (n_rel, C). With ``fused``, the block mask of ``allowed``, through flex_attention:
        the relative term a ``score_mod`` that reads the (B, nh, T, n_rel) table by
        ``relative``, no (B, nh, T, S) bias built. Returns (B, T, C) after the output
        projection."""
        B, nh, T, hd = q.shape
        p_drop = self.dropout if self.training else 0.0
        if self.relative_keys is not None:
            table = self.relative_keys(F.dropout(encodings, p_drop, self.training))
            table = table.view(-1, nh, hd)  # (n_rel, nh, hd)
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
        return self.proj(y.transpose(1, 2).reshape(B, T, nh * hd))  # (B, T, C)


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
                step: StepMasks | None = None, fused: BlockMask | None = None,
                memory: Tensor | None = None) -> Tensor:
        """``x`` (B, T, C) over the whole sequence; or, with ``cache`` (B, 2, nh, S, hd)
        (this layer's keys and values) and ``step``, T new tokens written into it first and
        the queries attending over its first S' positions (``allowed`` (B, G, T, S')); or,
        with ``memory`` (B, M, C) (Transformer-XL's: this layer's inputs at the tokens the
        memory holds), the keys and values of ``[memory | x]`` (``allowed`` (B, G, T, M + T)).
        ``fused``: ``allowed``'s block mask, attention through flex_attention."""
        q, k, v = self.attn.project(self.attn_norm(x) if self.pre_norm else x)
        if memory is not None:
            _, k_memory, v_memory = self.attn.project(
                self.attn_norm(memory) if self.pre_norm else memory)  # (B, nh, M, hd) each
            k, v = torch.cat([k_memory, k], 2), torch.cat([v_memory, v], 2)
        if cache is not None:
            rows, slots = step.present.nonzero(as_tuple=True)
            at = step.positions[rows, slots]
            cache[rows, 0, :, at] = k[rows, :, slots]
            cache[rows, 1, :, at] = v[rows, :, slots]
            used = allowed.size(-1)
            k, v = cache[:, 0, :, :used], cache[:, 1, :, :used]  # (B, nh, S', hd)
        x = x + self.drop(self.attn.attend(q, k, v, allowed, relative, encodings, fused))
        if self.pre_norm:
            return x + self.ffn(self.ffn_norm(x))
        x = self.attn_norm(x)
        return self.ffn_norm(x + self.ffn(x))


@dataclass
class ActionTransformerState(RowState):
    """R rows of an action Transformer in search.

    Attributes:
        parser: pointer, open constituents, ... (``ParserState``).
        structure: the attention policy's own rows (its ``AttentionState``: ``CausalState``,
            ``PLMMaskState``, ``TGState``, ...).
        cache: (R, L, 2, nh, S, hd) every layer's keys and values per position, S the
            positions allocated: grown (doubled) as rows fill them (``reserve``), up to
            ``capacity``.
        top: (R, C) the top layer (normed) at the last token: what predicts the next.
        open_top: (R, D) the stack size just after each open ``NT``, innermost last.
        open_label: (R, D) the action id of each open ``NT``.
        capacity: the most cache positions a row may fill (the policy's
            ``cache_positions`` of the action budget).
    """

    parser: ParserState
    structure: AttentionState
    cache: Tensor
    top: Tensor
    open_top: Tensor
    open_label: Tensor
    capacity: int

    #: The cache positions first allocated (fewer if ``capacity`` is smaller).
    FIRST_ALLOCATION: ClassVar[int] = 32

    #: The per-row tensors besides ``parser``, ``structure`` and ``cache``.
    ROWS = ("top", "open_top", "open_label")

    def used(self) -> int:
        """The cache positions the longest row has filled (the policy's ``structure``
        counts its tokens in ``length``): beyond them no row has anything to read."""
        return int(self.structure.length.max())

    def reserve(self, positions: int) -> None:
        """Grow the cache to hold at least ``positions`` positions (at most ``capacity``):
        double it, the filled positions copied."""
        allocated = self.cache.size(-2)
        if positions <= allocated:
            return
        size = min(self.capacity, max(positions, 2 * allocated))
        grown = self.cache.new_zeros(*self.cache.shape[:-2], size, self.cache.size(-1))
        used = min(self.used(), allocated)
        grown[..., :used, :] = self.cache[..., :used, :]
        self.cache = grown

    def select(self, index: Tensor, out: ActionTransformerState | None = None
               ) -> ActionTransformerState:
        """``RowState.select``, written into ``out`` with its cache as large as this one's:
        each row's cache is one contiguous block, which ``index_select`` copies whole, several
        times faster than gathering only the ``used`` positions (a strided slice, gathered
        then copied) though its positions past ``used`` are copied too."""
        if out is None:
            return super().select(index)
        if out.cache.shape[1:] != self.cache.shape[1:]:
            out.cache = self.cache.new_empty(out.cache.size(0), *self.cache.shape[1:])
        self.parser.select(index, out=out.parser)
        self.structure.select(index, out=out.structure)
        for name in self.ROWS:
            torch.index_select(getattr(self, name), 0, index, out=getattr(out, name))
        torch.index_select(self.cache, 0, index, out=out.cache)
        return out

    def assign(self, rows: Tensor, source: RowState, source_rows: Tensor) -> None:
        """``RowState.assign``, copying only the cache positions ``source`` has filled."""
        assert isinstance(source, ActionTransformerState)
        used = source.used()
        self.reserve(used)
        self.parser.assign(rows, source.parser, source_rows)
        self.structure.assign(rows, source.structure, source_rows)
        for name in self.ROWS:
            getattr(self, name)[rows] = getattr(source, name)[source_rows]
        self.cache[rows, ..., :used, :] = source.cache[source_rows, ..., :used, :]


def _predictors(masks: BatchMasks | ChunkedMasks, n_actions: int) -> Tensor:
    """(B, A) long: the token whose top layer predicts each action of a batch laid out as
    ``masks``: the start token for the first, then the last predicting token that stands
    for the action before."""
    source = masks.source
    B, T = source.shape
    by_token = torch.where(masks.predicts & (source >= 0), source + 1, n_actions)  # (B, T)
    last = torch.zeros(B, n_actions + 1, dtype=torch.long, device=source.device)
    last.scatter_reduce_(1, by_token, torch.arange(T, device=source.device).expand(B, T),
                         "amax")
    return last[:, :n_actions]


class ActionTransformer(RecordsInit, TransitionModel):
    """A Transformer over top-down actions with the attention policy ``attention`` (module
    docstring).

    Args:
        vocab_size: V, the word vocabulary.
        n_actions: the action vocabulary (``ActionVocab``: SHIFT, REDUCE, NT(X)...).
        attention: ``causal`` (PLM), ``plm_mask`` (PLM-mask) or ``tg`` (Transformer
            Grammars), the names of ``synlm.transition.attention.POLICIES``; or a policy of
            one's own: an ``AttentionPolicy``, its ``{"class_path", "init_args"}`` config or
            its dotted class path.
        size: the model width (GPT-2 small: 768).
        num_layers: layers (12).
        num_heads: heads per layer (12).
        ffn_size: the feed-forward width (4 × size).
        dropout: on the embeddings, the attention weights, after attention and after the
            feed-forward network (GPT-2: 0.1).
        max_positions: learned absolute positions (a policy with ``absolute_positions``:
            ``causal``, ``plm_mask``; GPT-2: 1024): the longest action sequence plus one.
        buffer_head: ``plm_mask``'s buffer head (Qian et al.'s released runs: 0).
        stack_head: ``plm_mask``'s stack head (1).
        min_relative: ``tg``'s smallest relative position (the paper's configuration: −1).
        max_relative: ``tg``'s largest; larger depth differences are clipped to it (62).
        pre_norm: LayerNorm before each sublayer plus a final one (GPT-2's), or after each
            (Transformer-XL's); None: the policy's (each paper's model: pre-norm for
            ``causal`` and ``plm_mask``, post-norm for ``tg``).
        max_open: most constituents open at once in search (``Limits``).
        max_consecutive: most ``NT`` in a row in search.
        attention_kernel: ``fused``: masked attention through flex_attention (compiled on a
            GPU, eager elsewhere), a block mask of the policy's mask and TG's relative term
            as a ``score_mod``; it has no attention dropout, so training with ``dropout``
            above 0, or on a CPU at all (flex_attention has no backward there), is a
            one-line ``SettingError``. ``unfused``: the mask (and relative bias) in full,
            handed to ``scaled_dot_product_attention``. ``auto``: fused on a GPU in float32
            or below where no attention dropout applies, else unfused (the faster on a CPU,
            docs/performance.md). ``causal`` teacher forcing is
            ``scaled_dot_product_attention(is_causal=True)`` under every kernel. The same
            numbers (to float rounding) under every kernel.
        sequence_length: teacher forcing cuts each row's tokens into chunks of this many,
            read one after another with Transformer-XL memory (a policy with ``memory``:
            ``tg``, whose memory carries the stack across a chunk boundary, as the released
            document-level models; their configuration: 256); None: a row is one chunk.
            Search reads a sentence as one chunk: one of more tokens is a one-line
            ``SettingError``.
        memory_length: the memory slots (default ``sequence_length``, the released code's
            only setting); each layer keeps its inputs at the tokens the memory holds, as
            Transformer-XL, with no gradient through them (the released ``stop_gradient``).

    The four policy settings (``buffer_head`` .. ``max_relative``) go to the named policy
    that takes them; one that the policy does not take (``buffer_head`` with ``tg``, any
    with a policy given by class path) must keep its default: a one-line ``SettingError``
    otherwise, as it would change nothing.
    """

    #: The action orders it decodes (``synlm.syntax.actions.ORDERS``): every policy's
    #: masks and its search read top-down actions.
    action_orders: ClassVar[tuple[str, ...]] = ("top_down",)
    #: Its search's released convention (``synlm.transition.types.CONVENTIONS``): the
    #: released PLM search normalises over every word and action, as training does.
    search_convention: ClassVar[str] = "all_actions"

    def __init__(self, vocab_size: int, n_actions: int,
                 attention: Attention | AttentionPolicy = "causal", size: int = 256,
                 num_layers: int = 4, num_heads: int = 4, ffn_size: int | None = None,
                 dropout: float = 0.1, max_positions: int = 1024, buffer_head: int = 0,
                 stack_head: int = 1, min_relative: int = -1, max_relative: int = 62,
                 pre_norm: bool | None = None, max_open: int = 100,
                 max_consecutive: int = 8, attention_kernel: AttentionKernel = "auto",
                 sequence_length: int | None = None, memory_length: int | None = None) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("size", size),
                            ("num_layers", num_layers), ("num_heads", num_heads),
                            ("max_positions", max_positions), ("max_open", max_open),
                            ("max_consecutive", max_consecutive)):
            errors.at_least(name, value)
        errors.at_least("n_actions", n_actions, FIRST_NT + 1)
        errors.probability("dropout", dropout)
        if size % num_heads:
            raise errors.SettingError("size", size, f"a multiple of num_heads={num_heads}")
        if attention_kernel not in KERNELS:
            raise errors.SettingError("attention_kernel", attention_kernel, " | ".join(KERNELS))
        self.attention_kernel = attention_kernel
        defaults = inspect.signature(ActionTransformer.__init__).parameters
        settings = {name: (value, defaults[name].default) for name, value in (
            ("buffer_head", buffer_head), ("stack_head", stack_head),
            ("min_relative", min_relative), ("max_relative", max_relative))}
        self.policy = build_policy(attention, settings)
        self.policy.check(num_heads)
        errors.at_least("sequence_length", sequence_length)
        errors.at_least("memory_length", memory_length)
        if sequence_length is None and memory_length is not None:
            raise errors.SettingError("memory_length", memory_length,
                                      "unset: memory needs a sequence_length to cut chunks")
        if sequence_length is not None and not self.policy.memory:
            raise errors.SettingError(
                "sequence_length", sequence_length,
                f"unset: the attention policy {type(self.policy).__name__} has no "
                "Transformer-XL memory (tg has)")
        self.sequence_length = sequence_length
        self.memory_length = memory_length or sequence_length
        #: the policy as a config value: its name, or its ``{"class_path", "init_args"}``
        self.attention: Any = attention if isinstance(attention, str) and attention in POLICIES \
            else self.policy.init_config
        self.vocab_size, self.n_actions, self.num_heads = vocab_size, n_actions, num_heads
        self.max_positions = max_positions
        self.limits = Limits(max_open, max_consecutive)
        self.embedding = nn.Embedding(vocab_size, size)  # words (tied output)
        self.action_embedding = nn.Embedding(n_actions, size)  # REDUCE, NT(X) (tied); row 0 unused
        self.start = nn.Parameter(torch.zeros(size))
        self.closing_embedding = nn.Embedding(n_actions, size) \
            if self.policy.closing_brackets else None  # X) by X's NT id
        self.position_embedding = nn.Embedding(max_positions, size) \
            if self.policy.absolute_positions else None
        relative = self.policy.relative_range is not None
        self.register_buffer("encodings", _relative_encodings(*self.policy.relative_range, size)
                             if relative else None, persistent=False)
        self.drop = nn.Dropout(dropout)
        self.pre_norm = self.policy.pre_norm if pre_norm is None else pre_norm
        self.layers = nn.ModuleList(
            ActionLayer(size, num_heads, ffn_size or 4 * size, dropout, relative, self.pre_norm)
            for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(size) if self.pre_norm else nn.Identity()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation: weights N(0, 0.02), biases 0, LayerNorms 1 and 0, and
        the residual projections N(0, 0.02 / √(2L))."""
        for name, p in self.named_parameters():
            if "norm" in name:
                continue
            if p.dim() >= 2 or name == "start":
                std = 0.02 / math.sqrt(2 * len(self.layers)) if name.endswith(
                    ("proj.weight", "ffn.2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            else:
                nn.init.zeros_(p)

    # ------------------------------------------------------------------ tokens
    def _token_embedding(self, actions: Tensor, words: Tensor, closing: Tensor | None
                         ) -> Tensor:
        """The input of action tokens (...): a ``SHIFT``'s word ``words``, an ``NT``'s or
        ``REDUCE``'s action embedding, or (a policy with ``closing_brackets``) for a
        ``REDUCE`` the closing bracket of the ``NT`` ``closing``."""
        word = self.embedding(words.clamp(min=0))
        action = self.action_embedding(actions.clamp(min=0))
        if self.closing_embedding is not None:
            action = torch.where((actions == REDUCE)[..., None],
                                 self.closing_embedding(closing.clamp(min=0)), action)
        return torch.where((actions == SHIFT)[..., None], word, action)

    def _input(self, tokens: Tensor, positions: Tensor, is_start: Tensor) -> Tensor:
        """Token embeddings (B, T, C) plus absolute positions (a policy with
        ``absolute_positions``), the start token where ``is_start`` (B, T), with dropout."""
        x = torch.where(is_start[..., None], self.start.to(tokens.dtype), tokens)
        if self.position_embedding is not None:
            if int(positions.max()) >= self.max_positions:
                raise errors.InputError(
                    f"an action sequence of {int(positions.max())} actions is longer than "
                    f"max_positions={self.max_positions} allows; raise max_positions")
            x = x + self.position_embedding(positions)
        return self.drop(x)

    def _relative_index(self, relative: Tensor | None) -> Tensor | None:
        """Rows of ``encodings`` for relative positions ``relative`` (clipped to the policy's
        ``relative_range``); None without."""
        if relative is None:
            return None
        lowest, highest = self.policy.relative_range
        return highest - relative.clamp(lowest, highest)

    def _block_mask(self, allowed: Tensor | None, x: Tensor) -> BlockMask | None:
        """``allowed``'s block mask where attention runs fused (``attention_kernel``) on
        ``x``'s device and dtype; None where it runs unfused or causal (``allowed`` None)."""
        dropping = self.training and self.drop.p > 0
        if self.attention_kernel == "fused" and dropping:
            raise errors.SettingError(
                "attention_kernel", "fused", "unfused or auto while training with dropout > 0 "
                "(flex_attention has no attention dropout), or dropout 0")
        if self.attention_kernel == "fused" and x.requires_grad and not x.is_cuda:
            raise errors.SettingError(
                "attention_kernel", "fused", "unfused or auto to train on a CPU (flex_attention "
                "has no backward there), or fused under torch.no_grad")
        fused = self.attention_kernel == "fused" or (
            self.attention_kernel == "auto" and x.is_cuda and not dropping
            and x.dtype != torch.float64)
        return block_mask(allowed, self.num_heads) if fused and allowed is not None else None

    def _log_softmax_parts(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """From hidden states (..., C): word logits (..., V), action logits (..., n_actions)
        (column 0, SHIFT, unused), the log-normaliser over the words (...) and that over
        words and actions (...): log p(SHIFT) = the first minus the second."""
        word = full_precision(h @ self.embedding.weight.T)  # (..., V)
        action = full_precision(h @ self.action_embedding.weight.T)  # (..., n_actions)
        words_norm = torch.logsumexp(word, -1)  # (...)
        norm = torch.logaddexp(words_norm, torch.logsumexp(action[..., 1:], -1))
        return word, action, words_norm, norm

    # ------------------------------------------------------------------ teacher forcing
    def forward(self, words: Tensor, actions: Tensor, word_lengths: Tensor,
                word_ends: Tensor | None = None) -> RNNGOutput:
        """Teacher-forced log-probabilities of gold ``actions`` (B, A) (-1 padded) over
        ``words`` (B, N): ``action_log_probs`` log p(a_t | a_<t) (a ``SHIFT`` marginal
        over its word), ``word_log_probs`` log p(x_i | a_<t, SHIFT), their sum ``joint``.
        Over subwords (``word_ends`` (B, N)) each piece is a ``SHIFT`` token, as the released
        PLM's pieces are tokens; the softmax is over every token, so nothing here reads
        ``word_ends``."""
        B, A = actions.shape
        device = actions.device
        shifts = actions == SHIFT
        word_index = shifts.long().cumsum(1) - 1  # (B, A) a SHIFT's word's index
        word_of_action = words.gather(1, word_index.clamp(0, words.size(1) - 1))  # its word
        masks = self.policy.masks(actions, self.num_heads) if self.sequence_length is None \
            else self.policy.chunked_masks(actions, self.num_heads, self.sequence_length,
                                           self.memory_length)
        T = masks.source.size(1)
        # each token's action, word and closed NT; column A: the start token's and padding's
        at = torch.where(masks.source >= 0, masks.source, A)  # (B, T)
        padded = F.pad(actions, (0, 1), value=NO_ACTION)  # (B, A + 1)
        closing = None if self.closing_embedding is None else \
            padded.gather(1, opened_by(padded)).gather(1, at)
        tokens = self._token_embedding(padded.gather(1, at),
                                       F.pad(word_of_action, (0, 1)).gather(1, at), closing)
        positions = torch.arange(T, device=device).expand(B, T)
        x = self._input(tokens, positions, positions == 0)
        x = self._whole(x, masks) if isinstance(masks, BatchMasks) else self._chunked(x, masks)
        # the vocabulary only at the M tokens that predict an action (no padding, no copy)
        row, col = (actions != NO_ACTION).nonzero(as_tuple=True)  # (M,) each
        h = self.final_norm(x[row, _predictors(masks, A)[row, col]])  # (M, C)
        word_logits, action_logits, words_norm, norm = self._log_softmax_parts(h)  # (M, ·)
        shift = shifts[row, col]  # (M,)
        action_lp = torch.where(shift, words_norm - norm,  # log p(SHIFT), or the action's
                                action_logits.gather(1, actions[row, col, None])[:, 0] - norm)
        word_given_shift = word_logits.gather(1, word_of_action[row, col, None])[:, 0] - \
            words_norm  # (M,) log p(word | SHIFT)
        action_lps = action_lp.new_zeros(B, A).index_put((row, col), action_lp)
        word_lp = action_lp.new_zeros(words.shape).index_put(
            (row[shift], word_index[row[shift], col[shift]]), word_given_shift[shift])
        return RNNGOutput(action_lps, word_lp, action_lps.sum(1) + word_lp.sum(1))

    def _whole(self, x: Tensor, masks: BatchMasks) -> Tensor:
        """The top layer (B, T, C) of inputs ``x`` (B, T, C) read at once under ``masks``."""
        relative = self._relative_index(masks.relative)
        fused = self._block_mask(masks.allowed, x)
        for layer in self.layers:
            x = layer(x, masks.allowed, relative, self.encodings, fused=fused)  # (B, T, C)
        return x

    def _chunked(self, x: Tensor, masks: ChunkedMasks) -> Tensor:
        """The top layer (B, T, C) of inputs ``x`` (B, T, C) read a chunk at a time with
        Transformer-XL memory (Dai et al. 2019 §3.2; the released Transformer Grammars'
        ``Core``): layer i of chunk k reads its inputs at the tokens the memory holds
        (``MemoryChunk.memory``), which chunk k gathers from its memory and its own
        inputs for chunk k + 1 (``MemoryChunk.update``), without gradient."""
        B, _, C = x.shape
        memory = [x.new_zeros(B, self.memory_length, C) for _ in self.layers]
        out = []
        for chunk in masks.chunks:
            h = x[:, chunk.start:chunk.start + chunk.allowed.size(2)]  # (B, l, C)
            relative = self._relative_index(chunk.relative)
            fused = self._block_mask(chunk.allowed, h)
            for i, layer in enumerate(self.layers):
                keys = torch.cat([memory[i], h], 1)  # (B, M + l, C)
                source = chunk.update.clamp(min=0)[..., None].expand(B, -1, C)
                memory[i] = torch.where(chunk.update[..., None] >= 0,
                                        keys.gather(1, source), 0).detach()  # (B, M, C)
                h = layer(h, chunk.allowed, relative, self.encodings, fused=fused,
                          memory=keys[:, :self.memory_length])
            out.append(h)
        return torch.cat(out, 1)

    # ------------------------------------------------------------------ search
    def cache_positions(self, max_actions: int) -> int:
        """The cache positions a row needs for ``max_actions`` actions (the policy's)."""
        return self.policy.cache_positions(max_actions)

    def initial_state(self, rows: int, stack_size: int, max_actions: int = 200
                      ) -> ActionTransformerState:
        """R rows that have read the start token, each with room for ``stack_size`` stack
        items and ``max_actions`` actions (the key/value cache allocated for a few and
        grown as rows fill it: ``ActionTransformerState.reserve``)."""
        weight = self.embedding.weight
        device = weight.device
        S = self.cache_positions(max_actions)
        structure = self.policy.initial_state(rows, S, self.num_heads, device)
        nh = self.num_heads
        cache = weight.new_zeros(rows, len(self.layers), 2, nh,
                                 min(S, ActionTransformerState.FIRST_ALLOCATION),
                                 weight.size(1) // nh)
        stack = torch.zeros(rows, stack_size, dtype=torch.long, device=device)
        state = ActionTransformerState(ParserState.initial(rows, device), structure, cache,
                                       weight.new_zeros(rows, weight.size(1)), stack,
                                       stack.clone(), S)
        start = StepMasks(torch.zeros(rows, 1, dtype=torch.long, device=device),
                          torch.ones(rows, 1, dtype=torch.bool, device=device),
                          torch.arange(S, device=device).eq(0).expand(rows, 1, 1, S),
                          None if self.encodings is None else
                          torch.zeros(rows, 1, S, dtype=torch.long, device=device))
        self._run(state, start, weight.new_zeros(rows, 1, weight.size(1)),
                  torch.ones(rows, 1, dtype=torch.bool, device=device))
        return state

    def _run(self, state: ActionTransformerState, step: StepMasks, tokens: Tensor,
             is_start: Tensor) -> None:
        """Feed the step's tokens (R, N, C) through the layers, writing their keys and
        values into the cache; the last slot of each row with a token becomes ``top``. The
        queries read only the cache positions some row has filled (``used``)."""
        x = self._input(tokens, step.positions, is_start)
        used = state.used()
        if self.sequence_length is not None and used > self.sequence_length:
            raise errors.SettingError(
                "sequence_length", self.sequence_length,
                f"at least {used}, or unset: search reads a sentence as one chunk, and this "
                f"one needs {used} tokens (teacher forcing would read it in chunks)")
        state.reserve(used)
        allowed = step.allowed[..., :used]
        relative = self._relative_index(None if step.relative is None
                                        else step.relative[..., :used])
        fused = self._block_mask(allowed, x)
        for i, layer in enumerate(self.layers):
            x = layer(x, allowed, relative, self.encodings, cache=state.cache[:, i], step=step,
                      fused=fused)
        fed = step.present[:, -1]
        state.top = torch.where(fed[:, None], self.final_norm(x[:, -1]), state.top)

    def advance(self, state: ActionTransformerState, actions: Tensor, words: Tensor,
                piece_ends: Tensor | None = None) -> ActionTransformerState:
        """Every row's action (R,) (-1: none), in place, and the new state; ``words``
        (R,): the word a ``SHIFT`` of each row generates (over subwords a piece, whether it
        ends its word, ``piece_ends``, changing nothing here)."""
        p = state.parser
        R = actions.size(0)
        rows = torch.arange(R, device=actions.device)
        innermost = (p.n_open - 1).clamp(min=0)
        closing = state.open_label[rows, innermost]  # (R,) the NT a REDUCE closes
        step = state.structure.step(actions)
        token = self._token_embedding(actions, words, closing)  # (R, C)
        tokens = token[:, None].expand(R, step.positions.size(1), token.size(-1))
        self._run(state, step, tokens, torch.zeros_like(step.present))
        opened, reduce = actions >= FIRST_NT, actions == REDUCE
        new_top = torch.where(reduce, state.open_top[rows, innermost], p.top + 1)
        slot = p.n_open.clamp(max=state.open_top.size(1) - 1)
        state.open_top[rows, slot] = torch.where(opened, new_top, state.open_top[rows, slot])
        state.open_label[rows, slot] = torch.where(opened, actions, state.open_label[rows, slot])
        state.parser = p.after(actions, new_top)
        return state

    def next_log_probs(self, state: ActionTransformerState, words: Tensor, legal: Tensor,
                       renormalise: bool = False) -> Tensor:
        """(R, n_actions): log p of each next action, the ``SHIFT`` column joint with its
        word ``words`` (R,); -inf where not ``legal`` (R, n_actions). The softmax is over
        every word and action, as in training (the released PLM's search too), or with
        ``renormalise`` over the words and actions legal there."""
        word_logits, action_logits, words_norm, norm = self._log_softmax_parts(state.top)
        if renormalise:  # log Σ over the legal tokens: every word if SHIFT is legal
            norm = torch.logaddexp(
                words_norm.masked_fill(~legal[:, SHIFT], float("-inf")),
                action_logits[:, 1:].masked_fill(~legal[:, 1:], float("-inf")).logsumexp(-1))
        shift = word_logits.gather(1, words.clamp(min=0)[:, None])[:, 0] - norm
        log_probs = torch.cat([shift[:, None], action_logits[:, 1:] - norm[:, None]], 1)
        return log_probs.masked_fill(~legal, float("-inf"))
