"""A synlm model as a Hugging Face causal LM, or a masked LM where its backbone attends both
ways (``synlm export-hf``, docs/interop.md): the checkpoint's ``synlm.model.SyntaxModel``,
rebuilt from ``config.json`` by the installed ``synlm`` package, behind ``transformers``'
``forward(input_ids, attention_mask, labels)``.

This file is copied into every exported folder as remote code (``auto_map`` in its
``config.json``); ``transformers`` loads it with ``trust_remote_code=True``. The model's
code is synlm's, so the folder needs ``pip install synlm``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput, MaskedLMOutput

try:
    from synlm.model import SyntaxModel
except ImportError as err:  # the folder holds the weights, not the model's code
    raise ImportError("this model was exported by synlm and runs on its code: "
                      "pip install synlm") from err

from .configuration_synlm import SynlmConfig


class _SynlmModel(PreTrainedModel):
    """The checkpoint's ``SyntaxModel`` (``self.model``), rebuilt from the config, its
    weights read from the folder."""

    config_class = SynlmConfig
    base_model_prefix = "model"
    _tied_weights_keys = {"model.decoder.weight": "model.embedding.weight"}

    def __init__(self, config: SynlmConfig) -> None:
        super().__init__(config)
        self.model = SyntaxModel(config.backbone, config.heads, config.vocab_size,
                                 config.embedding_dropout, config.tie_word_embeddings,
                                 config.decoder_bias, config.init_range, config.init_std)
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        """Nothing: every weight is read from the folder's ``model.safetensors``."""

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.model.embedding

    def get_output_embeddings(self) -> torch.nn.Linear:
        return self.model.decoder

    def _kept(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """(B, T) bool: the positions read, neither masked out by ``attention_mask`` nor the
        tokenizer's ``<pad>`` id V, which lies outside the model's vocabulary."""
        kept = input_ids < self.config.vocab_size
        if attention_mask is not None:
            kept &= attention_mask.bool()
        return kept


class SynlmForMaskedLM(_SynlmModel):
    """``SyntaxModel.masked_log_probs`` as a masked LM: ``logits`` are the log-probabilities
    (B, T, V) of the token at each position, each row read as a whole (its ``<mask>``
    tokens among its words) by the bidirectional backbone, in eval mode without gradients;
    a log-softmax of them changes nothing. Padding (``attention_mask`` 0, or the ``<pad>``
    id V) may stand on either side: no kept position reads it."""

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, **kwargs: Any) -> MaskedLMOutput:
        """Log-probabilities (B, T, V) of ``input_ids`` (B, T) as ``logits``; with
        ``labels`` (B, T; -100 where ignored) also ``loss``, the mean negative
        log-likelihood of the labelled positions. Other keyword arguments are ignored."""
        kept = self._kept(input_ids, attention_mask)
        tokens = input_ids.masked_fill(~kept, self.config.eos_token_id)
        log_probs = self.model.masked_log_probs(tokens, kept)
        loss = None
        if labels is not None:
            scored = labels != -100
            picked = log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
            loss = -picked[scored].mean()
        return MaskedLMOutput(loss=loss, logits=log_probs)


class SynlmForCausalLM(_SynlmModel, GenerationMixin):
    """``SyntaxModel.log_probs`` as a causal LM: ``logits`` are the next-token
    log-probabilities (B, T, V) of the distribution the model uses (a replacing head's, such
    as DM's mixture, else the decoder's), computed in eval mode without gradients; a
    log-softmax of them changes nothing.

    Every row is read from a fresh state (zero recurrent state, empty cache) from its first
    kept token on; a tokenizer of the export starts each text with ``<eos>``, the context
    synlm conditions every sentence on. Padding (``attention_mask`` 0, or the ``<pad>`` id
    V) may stand on either side: the kept tokens of a row are read in order, then the
    padding, so a padded position changes no kept one (every backbone is causal). No
    key/value cache is kept: generation reads the whole sequence at every step.
    """

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, **kwargs: Any) -> CausalLMOutput:
        """Next-token log-probabilities (B, T, V) of ``input_ids`` (B, T) as ``logits``;
        with ``labels`` (B, T; -100 where ignored) also ``loss``, the mean negative
        log-likelihood of ``labels[:, 1:]`` (``transformers``' shift). Other keyword
        arguments (``position_ids``, ``past_key_values``, ``use_cache`` ...) are ignored:
        positions count from each row's first kept token and no cache is kept."""
        kept = self._kept(input_ids, attention_mask)
        tokens = input_ids.masked_fill(~kept, self.config.eos_token_id)
        if bool((kept[:, 1:] & ~kept[:, :-1]).any()):  # padding before a kept token
            order = torch.argsort((~kept).to(torch.int8), dim=1, stable=True)
            log_probs = self.model.log_probs(tokens.gather(1, order))
            back = order.argsort(dim=1)[..., None].expand_as(log_probs)
            log_probs = log_probs.gather(1, back)
        else:
            log_probs = self.model.log_probs(tokens)
        loss = None
        if labels is not None:
            targets = labels[:, 1:]
            scored = targets != -100
            picked = log_probs[:, :-1].gather(-1, targets.clamp(min=0)[..., None])[..., 0]
            loss = -picked[scored].mean()
        return CausalLMOutput(loss=loss, logits=log_probs)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """No cache for ``generate`` to make: the model keeps none (``transformers``' hook)."""
        return False

    def prepare_inputs_for_generation(self, input_ids: Tensor,
                                      attention_mask: Tensor | None = None,
                                      **kwargs: Any) -> dict[str, Any]:
        """The whole sequence at every step of ``generate`` (no cache)."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}
