"""Scoring whole sentences with any Hugging Face causal LM, for the syntactic benchmarks.

A sentence (a list of words) is the text of its words joined by single spaces, tokenised by
the model's own fast tokenizer without the tokenizer's special tokens, and conditioned on one
start token: the tokenizer's BOS token, else its EOS token (GPT-2: ``<|endoftext|>``). This
is what the reference scorers of the field do: minicons' ``IncrementalLMScorer`` with
``bos_token=True``, and lm-evaluation-harness's ``hf`` model for a continuation with an empty
context (BLiMP's ``loglikelihood`` requests). From one forward pass over ``[start, t1..tn]``
each token's natural-log probability is read; a word's log-probability is the sum over the
tokens whose characters start in it (a token that also covers the space before a word, as
GPT-2's ``Ġword`` does, belongs to that word), and the end of the sentence is
log p(EOS | the sentence) when the tokenizer has an EOS token.

SyntaxGym's reference runner (``syntaxgym-core``, ``prepare_sentences_huggingface``) maps a
Hugging Face model's tokens onto regions by character offsets and adds no end-of-sentence
token, so its regions never count one (``HFScorer.syntaxgym_mapping``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from synlm.errors import InputError, at_least, model_folder
from synlm.tse.scores import ScoredSentence, by_length

#: Text any tokenizer of English reads as some tokens (transformers builds a tokenizer with
#: an empty vocabulary for a folder without tokenizer files).
PROBE = "The cat."
#: Words of a sentence quoted in the error for one past the model's context.
QUOTED_WORDS = 6


class HFScorer:
    """The ``synlm.tse.scores.Scorer`` of a ``transformers`` causal LM.

    ``words`` splits benchmark text at whitespace: a subword tokenizer (byte-level BPE,
    sentencepiece) reads cased, punctuated text as it is. ``score`` tokenises each sentence
    (its words joined by single spaces) with offsets, sorts the rows by length, scores them
    ``batch_size`` at a time (right padded, with an attention mask) and returns them in the
    given order; a row's numbers do not depend on its batch (the model is causal and right
    padding follows the row). Log-probabilities are natural logs, returned as float64
    values of the model's ``log_softmax`` (computed in float32 at least).

    Args:
        model: a folder written by ``save_pretrained``, a hub name (where the network
            allows), or a built ``PreTrainedModel`` (then ``tokenizer`` is required). It is
            put in eval mode on ``device``.
        tokenizer: the model's fast tokenizer, or its folder or hub name; None loads it from
            ``model``'s folder or name.
        batch_size: sentences per forward pass.
        device: where to run (``cpu``, ``cuda``); the model is moved there.
        progress: called with the number of sentences after each batch (a progress bar).
        dtype: the model's parameter type (``torch.float32``, ``"bfloat16"``); None keeps
            what it has (a loaded model: the type its checkpoint was saved in).
        trust_remote_code: run the model code a folder carries (``auto_map`` in its
            ``config.json``; a ``synlm export-hf`` folder is one), as transformers asks.
    """

    #: SyntaxGym's reference runner maps a Hugging Face model's tokens by their offsets and
    #: adds no end-of-sentence token (``prepare_sentences_huggingface``; ``synlm.tse.syntaxgym``).
    syntaxgym_mapping = "offsets"

    def __init__(self, model: str | os.PathLike[str] | PreTrainedModel,
                 tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
                 batch_size: int = 16, device: str | torch.device = "cpu",
                 progress: Callable[[int], None] | None = None,
                 dtype: torch.dtype | str | None = None,
                 trust_remote_code: bool = False) -> None:
        at_least("batch_size", batch_size)
        dtype = _dtype(dtype)
        self.name, model, tokenizer = load_model_and_tokenizer(
            model, tokenizer, AutoModelForCausalLM, "causal LM", dtype, trust_remote_code)
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None \
            else tokenizer.eos_token_id
        if start is None:
            raise InputError(f"{self.name}: its tokenizer has neither a BOS nor an EOS token "
                             f"to condition the first word on; expected one of them")
        self.model = model.to(device=device, dtype=dtype).eval()
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.progress = progress
        self.start_id: int = start
        self.eos_id: int | None = tokenizer.eos_token_id
        self.unk_id: int | None = tokenizer.unk_token_id
        config = model.config.get_text_config()
        self.max_positions: int | None = (getattr(config, "max_position_embeddings", None)
                                          or getattr(config, "n_positions", None))

    def words(self, text: str) -> list[str]:
        """The whitespace-separated words of ``text`` (``the store.``: ``the``, ``store.``)."""
        return text.split()

    def covers_end(self, text: str) -> bool:
        """Always: a byte-level or sentencepiece tokenizer drops no character of ``text``."""
        return True

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[int]]]:
        """Each sentence's token ids (no start token) and the word index of each token.

        A token belongs to the word its first character is in; one that starts at the space
        between two words (GPT-2's ``Ġword``, sentencepiece's ``▁word`` or a lone ``▁``)
        belongs to the word after it.
        """
        texts = [" ".join(words) for words in sentences]
        encoded = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        return [(list(ids), word_index(words, offsets)) for words, ids, offsets in
                zip(sentences, encoded["input_ids"], encoded["offset_mapping"])]

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        encoded = self.encode(sentences)
        if self.max_positions is not None:
            for words, (ids, _) in zip(sentences, encoded):
                if len(ids) + 1 > self.max_positions:
                    raise InputError(f"the sentence {quoted(words)!r} is {len(ids)} tokens, past "
                                     f"{self.name}'s context of {self.max_positions} positions "
                                     f"less its start token; expected at most "
                                     f"{self.max_positions - 1} tokens")

        def batch(chunk: list[int]) -> list[ScoredSentence]:
            rows = self._log_probs([encoded[i][0] for i in chunk])
            return [self._scored(sentences[i], *encoded[i], row) for i, row in zip(chunk, rows)]

        return by_length([len(ids) for ids, _ in encoded], self.batch_size, batch,
                         self.progress)

    def _log_probs(self, rows: list[list[int]]) -> list[np.ndarray]:
        """Each row's target log-probabilities: its tokens, then EOS (the start token, not
        read, when the tokenizer has no EOS), (n + 1,)."""
        width = max(len(r) for r in rows) + 1
        end = self.eos_id if self.eos_id is not None else self.start_id
        tokens = torch.full((len(rows), width + 1), self.start_id, dtype=torch.long)  # (B, T+1)
        mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
        for b, ids in enumerate(rows):
            tokens[b, 1:len(ids) + 1] = torch.tensor(ids, dtype=torch.long)
            tokens[b, len(ids) + 1] = end
            mask[b, :len(ids) + 1] = 1
        tokens, mask = tokens.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=tokens[:, :-1], attention_mask=mask,
                                use_cache=False).logits  # (B, T, V)
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            log_probs = logits.log_softmax(-1).gather(-1, tokens[:, 1:, None]).squeeze(-1)  # (B, T)
        log_probs = log_probs.double().cpu().numpy()
        return [log_probs[b, :len(ids) + 1] for b, ids in enumerate(rows)]

    def _scored(self, words: Sequence[str], ids: list[int], word_index: list[int],
                row: np.ndarray) -> ScoredSentence:
        n = len(ids)
        per_word = np.zeros(len(words))
        np.add.at(per_word, np.asarray(word_index, dtype=np.int64), row[:n])
        unknown = [False] * len(words)
        for token, w in zip(ids, word_index):
            unknown[w] |= token == self.unk_id
        return ScoredSentence(words=tuple(words), word_log_probs=tuple(per_word.tolist()),
                              unknown=tuple(unknown),
                              eos_log_prob=float(row[n]) if self.eos_id is not None else None,
                              tokens=tuple(self.tokenizer.convert_ids_to_tokens(ids)),
                              token_log_probs=tuple(row[:n].tolist()))


def word_index(words: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The word of each token of ``" ".join(words)`` by its ``(start, end)`` character
    offsets: the word its first character is in; a token that starts at the space between
    two words belongs to the word after it."""
    # (n_words,): one past each word's last character
    ends = np.cumsum([len(w) + 1 for w in words], dtype=np.int64) - 1
    starts = np.asarray([s for s, _ in offsets], dtype=np.int64)  # (n_tokens,)
    return np.minimum(np.searchsorted(ends, starts, side="right"),
                      max(len(words) - 1, 0)).tolist()




def quoted(words: Sequence[str]) -> str:
    """A sentence's first ``QUOTED_WORDS`` words, for an error naming it."""
    return " ".join(words[:QUOTED_WORDS]) + (" ..." if len(words) > QUOTED_WORDS else "")

def load_model_and_tokenizer(model: str | os.PathLike[str] | PreTrainedModel,
                             tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None,
                             auto_class: Any, kind: str, dtype: torch.dtype | None,
                             trust_remote_code: bool
                             ) -> tuple[str, PreTrainedModel, PreTrainedTokenizerBase]:
    """A scorer's model (a folder or hub name loaded with ``auto_class``, or a built one),
    its name and its fast tokenizer (``model``'s own where ``tokenizer`` is None); a model
    of another type, a tokenizer without character offsets or one that reads English as no
    tokens is a one-line ``InputError``."""
    if isinstance(model, PreTrainedModel):
        if tokenizer is None:
            raise InputError("tokenizer: required with a built model; pass the model's "
                             "fast tokenizer, or the folder or hub name it was saved under")
        name = str(model.name_or_path)
    elif isinstance(model, (str, os.PathLike)):
        name = str(model)
        model = _load(name, "model", lambda: auto_class.from_pretrained(
            name, dtype="auto" if dtype is None else dtype,
            trust_remote_code=trust_remote_code), kind=kind)
        tokenizer = name if tokenizer is None else tokenizer
    else:
        raise InputError(f"model: expected a folder, a hub name or a transformers "
                         f"PreTrainedModel, got a {type(model).__name__}")
    if isinstance(tokenizer, (str, os.PathLike)):
        path = str(tokenizer)
        tokenizer = _load(path, "tokenizer", lambda: AutoTokenizer.from_pretrained(
            path, trust_remote_code=trust_remote_code), kind=kind)
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"{name}: its tokenizer ({type(tokenizer).__name__}) gives "
                         f"no character offsets; expected a fast (tokenizers) tokenizer")
    if not tokenizer(PROBE, add_special_tokens=False)["input_ids"]:
        raise InputError(f"{name}: its tokenizer reads {PROBE!r} as no tokens (an "
                         f"empty vocabulary: its tokenizer files are missing?); expected "
                         f"the model's own tokenizer")
    return name, model, tokenizer

def _dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    """``dtype`` as a torch floating-point type (``"bfloat16"``: ``torch.bfloat16``)."""
    value = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if dtype is not None and not (isinstance(value, torch.dtype) and value.is_floating_point):
        raise InputError(f"dtype={dtype}: expected a torch floating-point type such as "
                         f"float32 or bfloat16")
    return value


def _load(name: str, what: str, load: Callable[[], Any], kind: str = "causal LM") -> Any:
    """``load()`` of the ``what`` (model, tokenizer) of a ``kind`` (causal LM, masked LM) at
    folder or hub name ``name``; a missing folder or a failure is a one-line ``InputError``
    naming ``name``."""
    model_folder(name)
    path = Path(name).expanduser()
    try:
        return load()
    except (OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        where = "this folder" if path.exists() else "the hub (no such folder either)"
        raise InputError(f"{name}: cannot load a {kind}'s {what} from {where} ({reason}); "
                         f"expected a folder written by save_pretrained (config.json, weights "
                         f"and tokenizer files) or a Hugging Face hub name") from err
