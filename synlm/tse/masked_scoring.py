"""Scoring whole sentences with a Hugging Face masked LM (BERT, RoBERTa ...) by
pseudo-log-likelihood, for the syntactic benchmarks.

A sentence (a list of words) is the text of its words joined by single spaces, tokenised by
the model's own fast tokenizer *with* its special tokens (BERT: ``[CLS] t1 .. tn [SEP]``;
RoBERTa: ``<s> .. </s>``). Its pseudo-log-likelihood (PLL; Salazar et al. 2020, "Masked
Language Model Scoring") is the sum over its tokens ti (every token but the special ones) of
log p(ti | the sentence with some tokens replaced by the mask token), each read at ti's
position from one copy of the sentence:

- ``original``: only ti is masked (Salazar et al.);
- ``within_word_l2r`` (the default): ti and the tokens after it in the same word are masked,
  so a word's first token does not see its own continuation and each later token sees the
  ones before it: the word is scored left to right (Kauf & Ivanova 2023, "A Better Way to
  Do Masked Language Model Scoring"). Words here are the tokenizer's own (its pre-tokenizer's
  ``word_ids``: BERT's splits ``store.`` into ``store`` and ``.``), as in their definition
  and in minicons.

These are the numbers of minicons' ``MaskedLMScorer(..., PLL_metric=...)`` (its
``sequence_score`` summed, its ``token_score``), which ``tests/test_masked_scoring.py`` checks.
A benchmark word's log-probability is the sum over the tokens whose characters start in it
(``synlm.tse.hf_scoring.word_index``); the special tokens are context and never scored, and
there is no end-of-sentence term (``eos_log_prob`` None): a masked LM does not predict where a
sentence ends, so ``--eos`` is refused for one.

All masked copies of the sentences of a group go through the model ``batch_size`` copies at a
time; which positions each copy masks is one boolean (copy, position) matrix built at once.

A synlm masked LM (a ``SyntaxLM`` whose backbone attends both ways, trained with
``data.objective: masked``) is scored by the same scorer: ``SynLMMaskedLM`` puts it behind a
masked LM's call (its ``SyntaxModel.masked_log_probs``) with the tokenizer ``synlm export-hf``
writes for it (``synlm.hf_export.tokenizer``: ``<eos> w1 .. wn``, ``<eos>`` the special token,
``<mask>`` the mask token), so its pseudo-log-likelihoods are those of its export.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.modeling_outputs import MaskedLMOutput

from synlm.errors import InputError, at_least
from synlm.tse.hf_scoring import _dtype, load_model_and_tokenizer, quoted, word_index
from synlm.tse.scores import ScoredSentence, by_length

#: The PLL variants, the default first.
VARIANTS = ("within_word_l2r", "original")
#: What each variant masks for a target token, as the output's conventions say it.
VARIANT_TEXT = {
    "within_word_l2r": "pseudo-log-likelihood, each token masked with the tokens after it in "
                       "its word (Kauf & Ivanova 2023; minicons PLL_metric='within_word_l2r')",
    "original": "pseudo-log-likelihood, each token masked alone (Salazar et al. 2020; "
                "minicons PLL_metric='original')",
}
#: A tokenizer's ``model_max_length`` when it sets none (transformers' VERY_LARGE_INTEGER).
_NO_LIMIT = 10 ** 9


def masked_lm_classes() -> tuple[set[str], set[str]]:
    """The class names of transformers' masked and causal LMs (its auto mappings)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    def names(mapping: Any) -> set[str]:
        return {n for v in mapping.values() for n in ((v,) if isinstance(v, str) else v)}

    return names(MODEL_FOR_MASKED_LM_MAPPING_NAMES), names(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def is_masked_config(config: Any) -> bool:
    """Whether a ``transformers`` config is a masked LM's: its ``architectures`` (what
    ``save_pretrained`` wrote) name a masked-LM class (``BertForMaskedLM``); else, when they
    name no LM class, its ``model_type`` has a masked LM and is not set up as a decoder (BERT
    and RoBERTa have a causal head too: ``is_decoder`` picks it)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    masked, causal = masked_lm_classes()
    architectures = set(getattr(config, "architectures", None) or ())
    # remote code's classes follow transformers' naming (synlm's SynlmForMaskedLM)
    if architectures & masked or any(a.endswith("ForMaskedLM") for a in architectures):
        return True
    if architectures & causal:
        return False
    return getattr(config, "model_type", None) in MODEL_FOR_MASKED_LM_MAPPING_NAMES and \
        not getattr(config, "is_decoder", False)


def is_masked_lm(name: str, trust_remote_code: bool = False) -> bool:
    """Whether the folder or hub name ``name`` holds a masked LM (``is_masked_config`` of its
    config); a config that cannot be read is left to the causal scorer, whose error names it."""
    try:
        config = AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        return False
    return is_masked_config(config)


class SynLMMaskedLM(nn.Module):
    """A synlm masked LM ``lm`` (a ``SyntaxLM`` with a bidirectional backbone) as
    ``PLLScorer`` reads a ``transformers`` masked LM: ``forward(input_ids, attention_mask)``
    gives ``logits``, its ``SyntaxModel.masked_log_probs`` (what ``synlm export-hf``'s
    ``SynlmForMaskedLM`` computes), and ``tokenizer`` is the export's, built from the model's
    vocabulary and normalisation. ``name``: what was loaded (a checkpoint or run folder)."""

    def __init__(self, lm: Any, name: str) -> None:
        from synlm.hf_export.tokenizer import build_tokenizer

        super().__init__()
        if not lm.backbone.spec.bidirectional:
            raise InputError(f"{name}: {type(lm.backbone).__name__} is causal; scoring by "
                             "pseudo-log-likelihood is for a masked LM")
        self.lm = lm
        self.name = name
        self.tokenizer = build_tokenizer(lm.vocab, lm.normalization)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> MaskedLMOutput:
        # input_ids, attention_mask: (B, T); the tokenizer's <pad> (id V) only where masked
        kept = attention_mask.bool()
        tokens = input_ids.masked_fill(~kept, self.lm.vocab.eos_id)
        return MaskedLMOutput(logits=self.lm.model.masked_log_probs(tokens, kept))


class PLLScorer:
    """The ``synlm.tse.scores.Scorer`` of a ``transformers`` masked LM: pseudo-log-likelihood.

    ``words`` splits benchmark text at whitespace; ``score`` tokenises each sentence with
    offsets and the tokenizer's special tokens, sorts the sentences by length, builds every
    masked copy of ``batch_size`` sentences at a time and runs them through the model
    ``batch_size`` copies a pass (right padded, with an attention mask), returning the
    sentences in the given order. Log-probabilities are natural logs, float64 values of the
    model's ``log_softmax`` at each target position (computed in float32 at least).

    Args:
        model: a folder written by ``save_pretrained``, a hub name (where the network
            allows), a built ``PreTrainedModel`` with a masked-LM head (then ``tokenizer``
            is required), or a synlm masked LM as a ``SynLMMaskedLM`` (its tokenizer
            with it). It is put in eval mode on ``device``.
        tokenizer: the model's fast tokenizer (with a mask token), or its folder or hub name;
            None loads it from ``model``'s folder or name.
        variant: ``"within_word_l2r"`` (default) or ``"original"`` (module docstring).
        batch_size: sentences a group, and masked copies a forward pass.
        device, progress, dtype, trust_remote_code: as ``HFScorer``'s.
    """

    #: Benchmark regions are mapped by character offsets, as SyntaxGym's reference runner does
    #: for a Hugging Face model; it adds no end-of-sentence token, and a masked LM has none.
    syntaxgym_mapping = "offsets"

    def __init__(self, model: str | os.PathLike[str] | PreTrainedModel | SynLMMaskedLM,
                 tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
                 variant: str = "within_word_l2r", batch_size: int = 16,
                 device: str | torch.device = "cpu",
                 progress: Callable[[int], None] | None = None,
                 dtype: torch.dtype | str | None = None,
                 trust_remote_code: bool = False) -> None:
        at_least("batch_size", batch_size)
        if variant not in VARIANTS:
            raise InputError(f"variant={variant!r}: expected one of {', '.join(VARIANTS)}")
        dtype = _dtype(dtype)
        if isinstance(model, SynLMMaskedLM):
            self.name, tokenizer = model.name, model.tokenizer
        else:
            self.name, model, tokenizer = load_model_and_tokenizer(
                model, tokenizer, AutoModelForMaskedLM, "masked LM", dtype, trust_remote_code)
        if tokenizer.mask_token_id is None:
            raise InputError(f"{self.name}: its tokenizer has no mask token; expected a "
                             f"masked LM's tokenizer ([MASK], <mask>)")
        self.model = model.to(device=device, dtype=dtype).eval()
        self.tokenizer = tokenizer
        self.variant = variant
        self.vocab_size = len(tokenizer)
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.progress = progress
        self.mask_id: int = tokenizer.mask_token_id
        self.pad_id: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.unk_id: int | None = tokenizer.unk_token_id
        config = model.config.get_text_config() if isinstance(model, PreTrainedModel) else None
        limits = [getattr(config, "max_position_embeddings", None),
                  tokenizer.model_max_length if tokenizer.model_max_length < _NO_LIMIT else None]
        self.max_positions: int | None = min((x for x in limits if x), default=None)

    @property
    def pll(self) -> str:
        """The PLL variant, as the output's conventions name it."""
        return self.variant

    def words(self, text: str) -> list[str]:
        """The whitespace-separated words of ``text`` (``the store.``: ``the``, ``store.``)."""
        return text.split()

    def covers_end(self, text: str) -> bool:
        """Always: the words are ``text``'s whitespace-separated pieces, the last one its end."""
        return True

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[dict[str, list[int]]]:
        """Each sentence's token ids with the special tokens (``ids``), the tokenizer's word
        of each (``token_words``, -1 for a special token) and the positions of the scored
        tokens (``targets``) with the benchmark word of each (``word_index``)."""
        texts = [" ".join(words) for words in sentences]
        encoded = self.tokenizer(texts, return_offsets_mapping=True,
                                 return_special_tokens_mask=True)
        out = []
        for b, words in enumerate(sentences):
            special = encoded["special_tokens_mask"][b]
            targets = [i for i, s in enumerate(special) if not s]
            token_words = [-1 if s or w is None else w
                           for s, w in zip(special, encoded.word_ids(b))]
            offsets = encoded["offset_mapping"][b]
            out.append({"ids": list(encoded["input_ids"][b]), "token_words": token_words,
                        "targets": targets,
                        "word_index": word_index(words, [offsets[i] for i in targets])})
        return out

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        encoded = self.encode(sentences)
        if self.max_positions is not None:
            for words, row in zip(sentences, encoded):
                if len(row["ids"]) > self.max_positions:
                    raise InputError(f"the sentence {quoted(words)!r} is {len(row['ids'])} tokens "
                                     f"with its special tokens, past {self.name}'s context of "
                                     f"{self.max_positions} positions; expected at most "
                                     f"{self.max_positions}")

        def batch(chunk: list[int]) -> list[ScoredSentence]:
            rows = self._log_probs([encoded[i] for i in chunk])
            return [self._scored(sentences[i], encoded[i], row) for i, row in zip(chunk, rows)]

        return by_length([len(row["ids"]) for row in encoded], self.batch_size, batch,
                         self.progress)

    def masked_copies(self, rows: list[dict[str, list[int]]]) -> tuple[torch.Tensor, ...]:
        """Every masked copy of ``rows``: (input ids with the mask token put in, attention
        mask, the position of its target, the target's id), each (R, T) or (R,), copies in
        sentence order and, within one, target order."""
        width = max(len(r["ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)  # (B, T)
        attention = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
        words = torch.full((len(rows), width), -1, dtype=torch.long)  # (B, T)
        target = torch.zeros((len(rows), width), dtype=torch.bool)  # (B, T)
        for b, row in enumerate(rows):
            n = len(row["ids"])
            ids[b, :n] = torch.tensor(row["ids"], dtype=torch.long)
            attention[b, :n] = 1
            words[b, :n] = torch.tensor(row["token_words"], dtype=torch.long)
            target[b, row["targets"]] = True
        positions = torch.arange(width)
        masked = positions[None, None, :] == positions[None, :, None]  # (1, T target, T)
        if self.variant == "within_word_l2r":
            # the later tokens of the target's word: the same tokenizer word, to its right
            masked = masked | ((positions[None, None, :] > positions[None, :, None])
                               & (words[:, None, :] == words[:, :, None])
                               & (words[:, :, None] >= 0))  # (B, T target, T)
        sentence, position = target.nonzero(as_tuple=True)  # (R,), (R,)
        masked = masked.expand(len(rows), -1, -1)[sentence, position]  # (R, T)
        copies = torch.where(masked, self.mask_id, ids[sentence])  # (R, T)
        return copies, attention[sentence], position, ids[sentence, position]

    def _log_probs(self, rows: list[dict[str, list[int]]]) -> list[np.ndarray]:
        """Each row's target log-probabilities, (n targets,)."""
        copies, attention, position, wanted = self.masked_copies(rows)
        out = torch.empty(len(copies), dtype=torch.float64)  # (R,)
        with torch.inference_mode():
            for start in range(0, len(copies), self.batch_size):
                part = slice(start, start + self.batch_size)
                width = int(attention[part].sum(1).max())  # the part's longest sentence
                logits = self.model(
                    input_ids=copies[part, :width].to(self.device),
                    attention_mask=attention[part, :width].to(self.device)).logits  # (r, T, V)
                at = logits[torch.arange(logits.shape[0], device=logits.device),
                            position[part].to(logits.device)]  # (r, V)
                at = at.to(torch.promote_types(at.dtype, torch.float32))
                out[part] = at.log_softmax(-1).gather(
                    -1, wanted[part, None].to(at.device)).squeeze(-1).double().cpu()
        counts = [len(r["targets"]) for r in rows]
        return [part.numpy() for part in out.split(counts)]

    def _scored(self, words: Sequence[str], row: dict[str, list[int]],
                log_probs: np.ndarray) -> ScoredSentence:
        per_word = np.zeros(len(words))
        np.add.at(per_word, np.asarray(row["word_index"], dtype=np.int64), log_probs)
        ids = [row["ids"][i] for i in row["targets"]]
        unknown = [False] * len(words)
        for token, w in zip(ids, row["word_index"]):
            unknown[w] |= token == self.unk_id
        return ScoredSentence(words=tuple(words), word_log_probs=tuple(per_word.tolist()),
                              unknown=tuple(unknown), eos_log_prob=None,
                              tokens=tuple(self.tokenizer.convert_ids_to_tokens(ids)),
                              token_log_probs=tuple(log_probs.tolist()))
