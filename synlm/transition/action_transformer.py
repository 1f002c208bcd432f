"""Action Transformer: a Transformer language model over a sentence's top-down actions, with
the attention of PLM, PLM-mask, Transformer Grammars or a policy of one's own.

Like the RNNG (``synlm.transition.rnng``) it models a sentence x and its tree y together as
the top-down actions a_1..a_n of y (``synlm.syntax.actions``), read as tokens after a start
token: ``NT(X)`` and ``REDUCE`` are tokens of their own, a ``SHIFT`` is the word it
generates. One softmax over the words and the non-``SHIFT`` actions gives each next token::

    z_t = E_out h_t                       h_t: the top layer at the token before a_t
    log p(a_t, x | a_<t) = z_t[a_t or its word] − logsumexp(z_t)
    log p(x, y) = Σ_t log p(a_t, x | a_<t)

with E_out the word and action embeddings (tied, as GPT-2 ties its output). The attention
policy ``attention`` (``synlm.transition.attention``, a file each, with its settings)
decides what each token reads, and how positions enter: ``CausalPolicy`` (PLM, Qian et al.
2021 §3.1: every earlier token, learned absolute positions), ``PLMMaskPolicy`` (PLM-mask,
§3.2: two heads restricted to either side of the innermost open ``NT``), ``TGPolicy``
(Transformer Grammars, Sartran et al. 2022 §2: each ``REDUCE`` two tokens, STACK and
COMPOSE attention, relative attention by depth difference, and for documents chunks read
with Transformer-XL memory), or a policy of one's own (``AttentionPolicy``).

The model reads only what the policy provides (``synlm.transition.attention.base``): the
tokens and masks of a batch (or its chunks, ``synlm.transition.attention.memory``), its rows'
state in search and what a step adds, and whether there are absolute positions, relative
attention or closing brackets.

Every policy runs on the same GELU layers (``synlm.transition.action_layers``), pre-norm as
GPT-2's (``x + Attn(LN(x))``, ``x + FFN(LN(x))``, a final LayerNorm; PLM's default) or
post-norm as Transformer-XL's (``LN(x + Attn(x))``, ``LN(x + FFN(x))``; TG's default): the
policy's ``pre_norm`` unless ``pre_norm`` is set. Teacher forcing runs a whole batch of
sequences with masks built for the batch at once; beam search (``synlm.transition.beam``)
feeds one action per row and step, each row's keys and values kept in a cache
(``action_cache.ActionTransformerState``).

Where the released models differ (subword tokens, the labelled closing bracket TG predicts,
GPT-2's sizes) is written in docs/reference-implementations.md.

One module because the teacher-forced pass, the search step and the reading of
configs saved in an earlier form are one model's, over the same layer inputs; its layers
are in ``action_layers``, each policy in ``attention/``.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.modules.recorded import RecordsInit
from synlm.transition.action_cache import ActionTransformerState
from synlm.transition.action_layers import (
    KERNELS,
    ActionLayer,
    AttentionKernel,
    Buckets,
    Packing,
    kernel_mask,
    relative_encodings,
)
from synlm.transition.attention import build_policy, named_policies
from synlm.transition.attention.base import (
    AttentionPolicy,
    BatchMasks,
    ChunkedMasks,
    StepMasks,
    opened_by,
)
from synlm.transition.attention.memory import read_in_chunks
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import (
    FIRST_NT,
    NO_ACTION,
    REDUCE,
    SHIFT,
    Limits,
    ParserState,
)
from synlm.transition.types import RNNGOutput, derived, full_precision

#: The settings of the policies that ``ActionTransformer`` took as its own arguments before
#: each policy held its own (``upgraded`` reads a config saved then).
FORMER_POLICY_SETTINGS = ("buffer_head", "stack_head", "min_relative", "max_relative",
                          "sequence_length", "memory_length")


def token_fields(actions: Tensor, words: Tensor, source: Tensor
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """Each token's action, word and closed ``NT`` (B, T) each, of ``actions`` (B, A)
    (-1 padded) over ``words`` (B, N) laid out as ``source`` (B, T) (a token's action, -1
    for the start token and padding, whose action is ``NO_ACTION``)."""
    A = actions.size(1)
    at = torch.where(source >= 0, source, A)  # (B, T) column A: the start token's, padding's
    padded = F.pad(actions, (0, 1), value=NO_ACTION)  # (B, A + 1)
    word_index = (actions == SHIFT).long().cumsum(1) - 1  # (B, A) a SHIFT's word's index
    word = F.pad(words.gather(1, word_index.clamp(0, words.size(1) - 1)), (0, 1))  # (B, A + 1)
    closing = padded.gather(1, opened_by(padded))  # (B, A + 1)
    return padded.gather(1, at), word.gather(1, at), closing.gather(1, at)


def predictors(masks: BatchMasks | ChunkedMasks, n_actions: int) -> Tensor:
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
        attention: the attention policy, with its settings (``synlm.transition.attention``):
            ``CausalPolicy`` (PLM), ``PLMMaskPolicy`` (PLM-mask), ``TGPolicy`` (Transformer
            Grammars) or one's own ``AttentionPolicy``, which a config names by class name
            or ``class_path`` with ``init_args``; or a policy's short name (``causal``,
            ``plm_mask``, ``tg``), that policy with its defaults.
        size: the model width (GPT-2 small: 768).
        num_layers: layers (12).
        num_heads: heads per layer (12).
        ffn_size: the feed-forward width (4 × size).
        dropout: on the embeddings, the attention weights, after attention and after the
            feed-forward network (GPT-2: 0.1).
        max_positions: learned absolute positions (a policy with ``absolute_positions``:
            ``causal``, ``plm_mask``; GPT-2: 1024): the longest action sequence plus one.
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
            docs/performance.md). ``causal`` teacher forcing is causal attention under
            every kernel (``scaled_dot_product_attention(is_causal=True)`` on a GPU). Unfused
            teacher forcing on a CPU attends on the batch's rows grouped by length, each
            group padded to its longest row only (``action_layers.Buckets``). The same
            numbers (to float rounding) under every kernel.
    """

    #: The action orders it decodes (``synlm.syntax.actions.ORDERS``): every policy's
    #: masks and its search read top-down actions.
    action_orders: ClassVar[tuple[str, ...]] = ("top_down",)
    #: Its search's released convention (``synlm.transition.types.CONVENTIONS``): the
    #: released PLM search normalises over every word and action, as training does.
    search_convention: ClassVar[str] = "all_actions"
    #: After the last word only ``REDUCE`` is legal (``TransitionModel``).
    closes_without_choice: ClassVar[bool] = True

    @classmethod
    def upgraded(cls, init_args: dict[str, Any]) -> dict[str, Any]:
        """A config saved when the policies' settings were ``ActionTransformer``'s own
        arguments (``attention: tg`` beside ``min_relative``, ``sequence_length``, ...): the
        named policy with those of the settings it takes, so the model it saved builds
        unchanged; the others were not read by that policy."""
        flat = {name: init_args.pop(name) for name in FORMER_POLICY_SETTINGS
                if name in init_args}
        attention = init_args.get("attention", "causal")
        if flat and isinstance(attention, str) and attention in named_policies():
            policy = named_policies()[attention]
            takes = inspect.signature(policy).parameters
            init_args["attention"] = {
                "class_path": f"{policy.__module__}.{policy.__qualname__}",
                "init_args": {name: value for name, value in flat.items() if name in takes}}
        return init_args

    def __init__(self, vocab_size: int, n_actions: int,
                 attention: AttentionPolicy | str = "causal", size: int = 256,
                 num_layers: int = 4, num_heads: int = 4, ffn_size: int | None = None,
                 dropout: float = 0.1, max_positions: int = 1024, pre_norm: bool | None = None,
                 max_open: int = 100, max_consecutive: int = 8,
                 attention_kernel: AttentionKernel = "auto") -> None:
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
        self.policy = build_policy(attention)
        self.policy.check(num_heads)
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
        self.register_buffer("encodings", relative_encodings(*self.policy.relative_range, size)
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

    def embed(self, actions: Tensor, words: Tensor, closing: Tensor | None, positions: Tensor
              ) -> Tensor:
        """The input (..., C) of the tokens of ``actions`` (...) at ``positions`` (...), the
        start token at position 0 (``_token_embedding``, ``_input``)."""
        return self._input(self._token_embedding(actions, words, closing), positions,
                           positions == 0)

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

    def layer_inputs(self, allowed: Tensor | None, relative: Tensor | None, x: Tensor
                     ) -> dict[str, Any]:
        """What each layer reads besides ``x`` under the mask ``allowed`` and the relative
        positions ``relative`` (clipped to the policy's ``relative_range``, as rows of
        ``encodings``): with ``fused``, ``allowed``'s block mask where attention runs fused
        on ``x`` (``attention_kernel``)."""
        index = None
        if relative is not None:
            lowest, highest = self.policy.relative_range
            index = highest - relative.clamp(lowest, highest)
        fused = kernel_mask(self.attention_kernel, allowed, x, self.num_heads,
                            dropping=self.training and self.drop.p > 0)
        return {"allowed": allowed, "relative": index, "encodings": self.encodings,
                "fused": fused}

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
        masks = self.policy.masks(actions, self.num_heads)
        T = masks.source.size(1)
        action_of, word_of, closing = token_fields(actions, words, masks.source)  # (B, T) each
        if self.closing_embedding is None:
            closing = None
        positions = torch.arange(T, device=device).expand(B, T)
        row, col = (actions != NO_ACTION).nonzero(as_tuple=True)  # (M,) each
        predictor = predictors(masks, A)[row, col]  # (M,) the token predicting each action
        if isinstance(masks, ChunkedMasks):  # chunks read with Transformer-XL memory
            x = self.embed(action_of, word_of, closing, positions)
            x = read_in_chunks(x, masks, self.layers, lambda chunk, h: self.layer_inputs(
                chunk.allowed, chunk.relative, h))[row, predictor]  # (M, C)
        else:  # the real tokens alone (the start token and the actions'), packed
            real = (positions == 0) | (action_of != NO_ACTION)  # (B, T)
            packed = Packing(real.flatten().nonzero()[:, 0], B, T)  # N real tokens
            place = torch.full((B * T,), -1, dtype=torch.long, device=device)
            place[packed.index] = torch.arange(packed.index.numel(), device=device)
            x = self.embed(packed.unpad(action_of), packed.unpad(word_of),
                           None if closing is None else packed.unpad(closing),
                           packed.unpad(positions))  # (N, C)
            inputs = self.layer_inputs(masks.allowed, masks.relative, x)
            if inputs["fused"] is None and not x.is_cuda:  # attention on rows of like length
                packed = Buckets.of(real, masks.allowed, inputs["relative"], x.dtype)
            for layer in self.layers:
                x = layer(x, packed=packed, **inputs)  # (N, C)
            x = x[place.view(B, T)[row, predictor]]  # (M, C)
        # the vocabulary only at the M tokens that predict an action (no padding, no copy)
        action_lps, word_lps = self.scored(x, words, actions, row, col)
        return RNNGOutput(action_lps, word_lps, action_lps.sum(1) + word_lps.sum(1))

    def scored(self, top: Tensor, words: Tensor, actions: Tensor, row: Tensor, col: Tensor
               ) -> tuple[Tensor, Tensor]:
        """From the top layer ``top`` (M, C) of the tokens that predict the M actions
        ``actions[row, col]`` of ``actions`` (B, A) over ``words`` (B, N): log p(a_t | a_<t)
        at (row, col) (a ``SHIFT`` marginal over its word) (B, A), and log p(x_i | a_<t,
        SHIFT) at those ``SHIFT``s' words (B, N); 0 elsewhere (Sartran et al. 2022 §2)."""
        shifts = actions == SHIFT
        word_index = shifts.long().cumsum(1) - 1  # (B, A) a SHIFT's word's index
        word_of = words.gather(1, word_index.clamp(0, words.size(1) - 1))[row, col]  # (M,)
        word_logits, action_logits, words_norm, norm = self._log_softmax_parts(
            self.final_norm(top))  # (M, ·)
        shift = shifts[row, col]  # (M,)
        action_lp = torch.where(shift, words_norm - norm,  # log p(SHIFT), or the action's
                                action_logits.gather(1, actions[row, col, None])[:, 0] - norm)
        word_given_shift = word_logits.gather(1, word_of[:, None])[:, 0] - \
            words_norm  # (M,) log p(word | SHIFT)
        action_lps = action_lp.new_zeros(actions.shape).index_put((row, col), action_lp)
        word_lps = action_lp.new_zeros(words.shape).index_put(
            (row[shift], word_index[row[shift], col[shift]]), word_given_shift[shift])
        return action_lps, word_lps

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
                                       torch.arange(rows, device=device),
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
        layers run on the first cache rows up to the last that a row with a token holds
        (``ActionTransformerState.slot``: a search puts its live items first), their matrix
        products on the present tokens alone (``Packing``: rows without an action, TG's
        empty COMPOSE slots), and the queries read only the cache positions some row has
        filled (``used``)."""
        acting = step.present.any(1)  # (R,)
        if not bool(acting.any()):
            return
        H = int(state.slot[acting].max()) + 1  # the cache rows the layers read
        order = torch.empty_like(state.slot).index_copy_(
            0, state.slot, torch.arange(state.slot.size(0), device=state.slot.device))[:H]
        N = step.present.size(1)  # order (H,): the row in each of the first H cache rows
        used = state.used()
        state.reserve(used)
        step = StepMasks(step.positions[order], step.present[order],
                         step.allowed[order, ..., :used],
                         None if step.relative is None else step.relative[order, ..., :used])
        packed = Packing(step.present.flatten().nonzero()[:, 0], H, N)  # N' present tokens
        write = packed.cache_write(packed.unpad(step.positions))  # the same for every layer
        x = self._input(packed.unpad(tokens[order]), write.at,
                        packed.unpad(is_start[order]))  # (N', C)
        inputs = self.layer_inputs(step.allowed, step.relative, x)
        cache = state.cache[:H]
        for i, layer in enumerate(self.layers):
            x = layer(x, cache=cache[:, i], write=write, packed=packed, **inputs)
        place = step.present.flatten().cumsum(0).view(H, N) - 1  # each token's packed row
        fed = step.present[:, -1].nonzero()[:, 0]  # (H',) the cache rows whose last slot is fed
        state.top = state.top.index_put((order[fed],), self.final_norm(x[place[fed, -1]]))

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
        ``renormalise`` over the words and actions legal there. Only the rows with a legal
        action are computed."""
        live = legal.any(1)  # (R,) rows with a legal action: the others' are all -inf
        if not bool(live.all()):
            rows = live.nonzero()[:, 0]
            found = self._next_log_probs(state.top[rows], words[rows], legal[rows], renormalise)
            return found.new_full(legal.shape, float("-inf")).index_copy(0, rows, found)
        return self._next_log_probs(state.top, words, legal, renormalise)

    def _next_log_probs(self, top: Tensor, words: Tensor, legal: Tensor, renormalise: bool
                        ) -> Tensor:
        """``next_log_probs`` of the rows whose top layer is ``top`` (R, C): the softmax of
        ``_log_softmax_parts``, its word product (the largest) on the word embeddings
        transposed (``_word_columns``) and, with ``renormalise``, only at the rows where
        ``SHIFT`` is legal (no word's probability enters elsewhere)."""
        action_logits = full_precision(top @ self.action_embedding.weight.T)  # (R, n_actions)
        scored = legal[:, SHIFT].nonzero()[:, 0] if renormalise else None  # (R',) or all
        word_logits = full_precision((top if scored is None else top[scored])
                                     @ self._word_columns())  # (R', V)
        words_norm = torch.logsumexp(word_logits, -1)  # (R',)
        word = word_logits.gather(1, (words if scored is None else words[scored])
                                  .clamp(min=0)[:, None])[:, 0]  # (R',)
        actions = action_logits[:, 1:]
        if scored is not None:  # log Σ over the legal tokens: every word if SHIFT is legal
            unscored = action_logits.new_full(legal.shape[:1], float("-inf"))
            words_norm = unscored.index_copy(0, scored, words_norm)
            word = unscored.index_copy(0, scored, word)
            actions = actions.masked_fill(~legal[:, 1:], float("-inf"))
        norm = torch.logaddexp(words_norm, actions.logsumexp(-1))  # (R,)
        log_probs = torch.cat([(word - norm)[:, None], action_logits[:, 1:] - norm[:, None]], 1)
        return log_probs.masked_fill(~legal, float("-inf"))

    def _word_columns(self) -> Tensor:
        """(C, V) the word embeddings transposed into contiguous memory, which the search's
        vocabulary product reads 12-25 % faster on a CPU than the transposed view (20-100
        rows, V = 9,999, C = 256); made again whenever the embeddings change (the tensor,
        its storage or its version: an optimiser step, ``load_state_dict``, ``to``)."""
        weight = self.embedding.weight
        return derived(self, "_columns", (weight,), lambda: weight.T.contiguous())
