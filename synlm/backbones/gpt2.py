"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners").

A Transformer decoder: learned position embeddings added to the token embeddings, blocks of
pre-LayerNorm causal multi-head self-attention and a GELU MLP, a final LayerNorm, the
decoder tied to the token embedding. The blocks, the position embeddings and the final
LayerNorm are Hugging Face ``transformers``' ``GPT2Model`` (randomly initialised, or
pretrained weights by hub name or ``save_pretrained`` directory), run on its fused SDPA
attention. This wrapper adds what the backbone contract asks of it:

- it reads embeddings, not ids: the token embedding is ``SyntaxLM``'s, which copies a
  pretrained ``wte`` from ``pretrained_embedding``; the wrapper keeps no ``wte`` module;
- ``layers``: every block's output (the top one after the final LayerNorm);
- ``attention``: one layer's attention probabilities averaged over heads, computed
  explicitly from that layer's queries and keys (every layer keeps the fused kernel);
- ``head_attention``: every block's per-head probabilities (B, heads, T, S), computed the
  same way from its queries and keys only when a head reads that block
  (``synlm.backbones.transformer.HeadAttention``);
- its state is an immutable key/value cache (``KVCache``) for incremental decoding;
  training never carries it across windows. The state also holds the ``transformers``
  cache object its tensors live in, which the next step continues in place rather than
  rebuilding it (``_continued_cache``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from synlm.backbones.base import (
    Backbone,
    BackboneSpec,
    KVCache,
    attention_layer_index,
    causal_mask,
)
from synlm.backbones.transformer import HeadAttention
from synlm.errors import InputError
from synlm.outputs import BackboneOutput


def _layer_cache(cache: Any, layer: int) -> tuple[Tensor, Tensor]:
    """Layer ``layer``'s keys and values (B, heads, S, head_dim) in the cache ``GPT2Model``
    returned: a ``DynamicCache`` (read by ``layers`` in transformers 4.57 and 5, by
    ``key_cache`` in 4.5x) or a legacy tuple of (key, value) pairs (4.45 to 4.51; 4.52 to
    4.56 when no cache was passed in)."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    return cache[layer]


@functools.cache
def _cache_keyword() -> str:
    """The keyword ``GPT2Model.forward`` takes the key/value cache by in the installed
    transformers, read once from its signature: ``cache`` where it has one (5.x releases
    that deprecate ``past_key_values``, to be removed in 5.40), else ``past_key_values``."""
    from transformers import GPT2Model

    return "cache" if "cache" in inspect.signature(GPT2Model.forward).parameters \
        else "past_key_values"


class _CarriedKVCache(KVCache):
    """A ``KVCache`` that also holds ``cache``, the ``transformers`` cache object whose
    layers held exactly these tensors when ``GPT2Model`` returned it. A plain ``KVCache``
    of the same tensors (a checkpoint's tuples, a detached copy) continues the same way,
    from a cache rebuilt from its tensors."""

    cache: Any = None


def _carried(keys: Sequence[Tensor], values: Sequence[Tensor], cache: Any) -> KVCache:
    """The backbone's state: ``keys`` and ``values`` per layer, and the cache holding them."""
    state = _CarriedKVCache(tuple(keys), tuple(values))
    state.cache = cache
    return state


def _holds(cache: Any, past: KVCache) -> bool:
    """Whether every layer of ``cache`` holds ``past``'s keys and values themselves (the same
    tensor objects)."""
    for layer, (k, v) in enumerate(zip(past.keys, past.values)):
        held_k, held_v = _layer_cache(cache, layer)
        if held_k is not k or held_v is not v:
            return False
    return True


def _continued_cache(past: KVCache) -> Any:
    """The cache object ``GPT2Model`` continues ``past`` from: the one ``past`` carries, when
    it is a ``Cache`` that still holds ``past``'s tensors (no step went on from it since;
    ``DynamicCache`` grows its object in place, into new tensors, so ``past``'s own tensors
    never change); otherwise a ``DynamicCache`` filled with ``past``'s tensors, layer by
    layer. Rebuilt are: a state used a second time (its first use moved the cache on), a
    plain ``KVCache`` or tuple, and the legacy tuples of transformers before 4.57 (4.45 to
    4.51 read a ``DynamicCache`` as such a tuple; 4.52 to 4.56 keep it as the cache
    object)."""
    from transformers import Cache, DynamicCache

    carried = getattr(past, "cache", None)
    if isinstance(carried, Cache) and _holds(carried, past):
        return carried
    cache = DynamicCache()
    for layer, (k, v) in enumerate(zip(past.keys, past.values)):
        cache.update(k, v, layer)
    return cache


class GPT2(Backbone):
    """GPT-2 blocks over ``SyntaxLM``'s embeddings; ``hidden`` is the top block's output
    after the final LayerNorm (E = ``n_embd`` wide, for the tied decoder; GPT-2's decoder has
    no bias: ``decoder_bias: false``).

    A pretrained model brings its token embedding (``pretrained_embedding``), so the
    vocabulary must be its tokenizer's. ``attention`` (B, T, S), S = cached + T positions,
    holds the probabilities before attention dropout, as does ``head_attention`` (every
    block's, per head, (B, heads, T, S), computed when read).

    Args:
        pretrained: a hub name (``gpt2``) or a directory written by ``save_pretrained`` (of
            a ``GPT2Model`` or a ``GPT2LMHeadModel``); the size arguments are then ignored.
            None: a randomly initialised model of the sizes below.
        n_layer: number of blocks.
        n_head: attention heads per block.
        n_embd: embedding and hidden width E.
        n_positions: longest sequence (cached positions included).
        dropout: residual, embedding and attention dropout; None keeps the pretrained
            config's values (``transformers``' defaults, 0.1, for a random model).
        attention_layer: the block whose head-averaged attention is returned (negative
            counts from the top; default the penultimate); None: no ``attention``.
        revision: the hub revision (branch, tag or commit) of ``pretrained``.
    """

    def __init__(
        self,
        pretrained: str | None = None,
        n_layer: int = 2,
        n_head: int = 2,
        n_embd: int = 64,
        n_positions: int = 256,
        dropout: float | None = 0.1,
        attention_layer: int | None = -2,
        revision: str | None = None,
    ) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2Model  # imported here: it takes seconds

        rates = {} if dropout is None else \
            {"resid_pdrop": dropout, "embd_pdrop": dropout, "attn_pdrop": dropout}
        if pretrained is None:
            # vocab_size 1: the token embedding is SyntaxLM's, so wte is only a placeholder
            model = GPT2Model(GPT2Config(
                n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_positions,
                vocab_size=1, bos_token_id=None, eos_token_id=None,
                attn_implementation="sdpa", **rates))
            self._embedding = None
        else:
            # transformers 5 keeps the checkpoint's dtype; 4.x loads in the default dtype
            model = GPT2Model.from_pretrained(pretrained, revision=revision,
                                              attn_implementation="sdpa", **rates)
            model.to(torch.get_default_dtype())
            model.train()  # from_pretrained leaves it in eval mode (no dropout) otherwise
            self._embedding = model.wte.weight.detach()  # (V, E), not a parameter
        model.wte = None
        self.model = model
        config = model.config
        self.attention_layer = attention_layer_index(attention_layer, config.n_layer)
        self.spec = BackboneSpec(
            input_size=config.n_embd, output_size=config.n_embd,
            layer_sizes=(config.n_embd,) * config.n_layer,
            provides=frozenset({"layers", "head_attention"} if self.attention_layer is None
                               else {"layers", "head_attention", "attention"}),
            recurrent=False, incremental=True)

    def layer_scale(self, layer: int) -> float:
        """What block ``layer``'s q kᵀ is multiplied by: 1/√head_dim (``scale_attn_weights``),
        divided by ``layer + 1`` under ``scale_attn_by_inverse_layer_idx``."""
        config = self.model.config
        scale = (config.n_embd // config.n_head) ** -0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= layer + 1
        return scale

    def pretrained_embedding(self) -> Tensor | None:
        return self._embedding

    def forward(self, x: Tensor, state: KVCache | tuple | None = None) -> BackboneOutput:
        # x: (B, T, E)
        config = self.model.config
        past = state if state is None or isinstance(state, KVCache) else KVCache(*state)
        offset = 0 if past is None else past.length
        T = x.size(1)
        if offset + T > config.n_positions:
            raise InputError(f"GPT2 got {offset + T} positions ({offset} cached + {T} new), "
                             f"more than its n_positions={config.n_positions}")
        cache = None if past is None else _continued_cache(past)
        captured: dict[int, Tensor] = {}  # each block's fused q|k|v (B, T, 3E)
        hooks = [block.attn.c_attn.register_forward_hook(
            lambda module, args, qkv, layer=layer: captured.__setitem__(layer, qkv))
            for layer, block in enumerate(self.model.h)]
        try:
            out = self.model(inputs_embeds=x, use_cache=True, output_hidden_states=True,
                             position_ids=torch.arange(offset, offset + T, device=x.device)[None],
                             **{_cache_keyword(): cache})
        finally:
            for hook in hooks:
                hook.remove()
        # the output's field is ``cache`` where forward takes it so, else past_key_values
        returned = out["cache"] if "cache" in out else out["past_key_values"]
        keys, values = zip(*(_layer_cache(returned, layer) for layer in range(config.n_layer)))
        head_attention = HeadAttention(
            config.n_layer, lambda layer: self._head_attention(layer, captured[layer],
                                                               keys[layer]))
        result = BackboneOutput(hidden=out.last_hidden_state,  # (B, T, E)
                                state=_carried(keys, values, returned),
                                layers=list(out.hidden_states[1:]),  # L x (B, T, E)
                                head_attention=head_attention)
        if self.attention_layer is not None:
            result.attention = head_attention[self.attention_layer].mean(1)  # (B, T, S)
        return result

    def _head_attention(self, layer: int, qkv: Tensor, keys: Tensor) -> Tensor:
        """Block ``layer``'s softmax(q kᵀ · scale + causal mask) per head (B, heads, T, S)
        (Radford et al. 2019 keep Vaswani et al. 2017's eq. 1), from its q|k|v (B, T, 3E) and
        its keys (B, heads, S, head_dim), S = cached + T."""
        B, T, E = qkv.size(0), qkv.size(1), qkv.size(2) // 3
        q = qkv[..., :E].reshape(B, T, self.model.config.n_head, -1).transpose(1, 2)
        scores = q @ keys.transpose(-1, -2) * self.layer_scale(layer)  # (B, heads, T, S)
        scores = scores.masked_fill(~causal_mask(T, keys.size(2), q.device), float("-inf"))
        return scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32))
