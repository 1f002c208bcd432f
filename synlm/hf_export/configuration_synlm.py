"""The configuration of a synlm model exported for Hugging Face ``transformers`` (``synlm
export-hf``, docs/interop.md): the ``synlm.model.SyntaxModel`` constructor arguments its
checkpoint was trained with, and the word normalisation of its corpus.

This file is copied into every exported folder as remote code (``auto_map`` in its
``config.json``); ``transformers`` loads it with ``trust_remote_code=True``. It needs only
``transformers``; ``modeling_synlm.py`` needs the ``synlm`` package.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig


class SynlmConfig(PretrainedConfig):
    """A ``SyntaxModel``'s hyperparameters (``synlm.model.SyntaxModel``'s arguments of the
    same names; ``tie_word_embeddings`` is its ``tie_weights``).

    Args:
        backbone: the backbone's ``{"class_path", "init_args"}`` config.
        heads: the heads' configs.
        vocab_size: V, the model's vocabulary (the tokenizer adds ``<pad>`` after it).
        embedding_dropout: word-type dropout on the embedding (training only).
        decoder_bias: whether the decoder has a bias.
        init_range: the embedding's initialisation range (the weights are then loaded).
        init_std: the embedding's initialisation std, if drawn from a normal.
        normalization: the corpus's word normalisation (``synlm.data.normalization``).
        tie_word_embeddings: the decoder's weight is the embedding matrix.
    """

    model_type = "synlm"

    def __init__(self, backbone: dict[str, Any] | None = None,
                 heads: list[dict[str, Any]] | None = None, vocab_size: int = 10000,
                 embedding_dropout: float = 0.0, decoder_bias: bool = True,
                 init_range: float = 0.1, init_std: float | None = None,
                 normalization: str = "none", tie_word_embeddings: bool = True,
                 **kwargs: Any) -> None:
        self.backbone = backbone
        self.heads = list(heads or [])
        self.vocab_size = vocab_size
        self.embedding_dropout = embedding_dropout
        self.decoder_bias = decoder_bias
        self.init_range = init_range
        self.init_std = init_std
        self.normalization = normalization
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
