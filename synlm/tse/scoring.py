"""Scoring whole sentences with a ``SyntaxLM``: the one API the syntactic benchmarks use.

Every family is conditioned on the start context it was trained with: synlm's data put an
``<eos>`` before every sentence (``synlm.data.batching``: a unit is ``[<eos>, w1..wn]``, in
stream and sentence mode alike, and GPT-2's ``<|endoftext|>`` is its ``<eos>``), so a sentence
is scored as the row ``[<eos>, t1..tn]`` with targets ``[t1..tn, <eos>]`` from a fresh state
(a zero recurrent state, an empty key/value cache, an empty mixture history), in eval mode.
A stream-trained model saw the previous sentence's state there instead; a fresh state is
the common choice of the field's evaluations (no context leaks from one item to the next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from synlm.capabilities import Searches
from synlm.data.normalization import TEXT_COVERS_END, text_normalizer
from synlm.data.subwords import SubwordVocab
from synlm.errors import InputError
from synlm.tse.scores import ScoredSentence, by_length


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """``model`` in eval mode for the block, then back in the mode it was in."""
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)


def _device_of(model: Any) -> torch.device:
    """Where ``model``'s parameters are (the CPU for a model without any)."""
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if parameters is not None else None
    return first.device if first is not None else torch.device("cpu")


def sentence_rows(rows: Sequence[Sequence[int]], eos: int) -> torch.Tensor:
    """Token rows ``[<eos>, t1..tn, <eos>]``, right-padded with ``<eos>`` to the longest,
    (B, max n + 2): a model reads ``[:, :-1]`` and predicts ``[:, 1:]``; a row's padding
    follows it, so a causal model scores each row as on its own."""
    tokens = torch.full((len(rows), max(len(r) for r in rows) + 2), eos, dtype=torch.long)
    for b, ids in enumerate(rows):
        tokens[b, 1:len(ids) + 1] = torch.tensor(list(ids), dtype=torch.long)
    return tokens


class ModelScorer:
    """The ``synlm.tse.scores.Scorer`` of a ``SyntaxLM``.

    ``words`` maps benchmark text onto the training corpus's words with the normalisation
    its checkpoint saved (Mikolov's PTB: Treebank tokens, punctuation dropped, lowercase,
    numbers ``N``). ``score`` encodes each sentence in the model's vocabulary (a word a
    token; subwords: each word on its own with a leading space, as in training, and a
    word's log-probability is the sum of its subwords'), sorts the rows by length, scores
    them ``batch_size`` at a time with ``SyntaxLM.target_log_probs`` and returns them in the
    given order; a row's numbers do not depend on its batch (every backbone is causal and
    right padding follows the row).

    The one sentence scorer of synlm: the syntactic benchmarks, the generation metrics' LM
    score (``synlm.metrics.generation.lm_score``) and the unknown-word count of ``synlm
    parse`` read the model through it. Scoring runs in eval mode without gradients and puts
    the model back in the mode it found it in; the model stays where it is unless ``device``
    names another place, where it is moved once, here.

    A transition LM (an RNNG, PLM, Transformer Grammar) is scored by its word-synchronous
    beam search (``synlm.transition.beam``): its ``convention`` says which quantity that is
    (``renormalised_given_length`` or ``all_actions``), and a sentence the beam finds no tree
    for is ``ScoredSentence.parsed`` False; a sentence of no words is an ``InputError``
    naming it (such a model generates a word before its root closes).

    Args:
        model: the language model (its ``vocab`` and ``normalization`` set, as a checkpoint
            or ``setup`` sets them).
        batch_size: sentences per forward pass.
        device: where to run (``cpu``, ``cuda``): the model is moved there; None (the
            default) leaves it where it is.
        progress: called with the number of sentences after each batch (a progress bar).
    """

    def __init__(self, model: Any, batch_size: int = 64, device: str | torch.device | None = None,
                 progress: Callable[[int], None] | None = None) -> None:
        if model.vocab is None:
            raise InputError("the model has no vocabulary: load it from a checkpoint or call "
                             "model.setup('predict') with its DataModule")
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model if device is None else model.to(device)
        self.vocab = model.vocab
        self.batch_size = batch_size
        self.device = _device_of(model) if device is None else torch.device(device)
        self.progress = progress
        self._text = text_normalizer(model.normalization)
        self._covers_end = TEXT_COVERS_END[model.normalization]

    #: SyntaxGym's reference runner maps a word-level model's tokens, its end-of-sentence token
    #: included, with its heuristic walk (``synlm.tse.syntaxgym.map_regions``); synlm's models
    #: predict ``<eos>`` after every sentence.
    syntaxgym_mapping = "heuristic"

    @property
    def vocab_size(self) -> int:
        """The number of words the model knows, as the Hugging Face scorers count tokens."""
        return len(self.vocab)

    @property
    def convention(self) -> str | None:
        """A transition LM's surprisal convention (``synlm.transition.types.CONVENTIONS``);
        None for a model that reads every word left to right (no search)."""
        return self.model.search_convention if isinstance(self.model, Searches) else None

    @property
    def end_is_certain(self) -> bool:
        """Whether its end-of-sentence term is 0 for every sentence (a transition LM whose
        search leaves no choice after the last word: ``end_is_certain``), so that ``--eos``
        changes nothing."""
        return end_is_certain(self.model)

    def words(self, text: str) -> list[str]:
        return self._text(text)

    def covers_end(self, text: str) -> bool:
        """Whether ``words(text)`` reach the end of ``text`` (Mikolov's PTB deletes trailing
        punctuation: ``the store.`` ends before its period)."""
        return self._covers_end(text)

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int], list[bool]]:
        """The token ids of ``words``, the word index of each token, and whether each word
        was read as unknown (``<unk>``, or an unknown-word class)."""
        vocab = self.vocab
        if isinstance(vocab, SubwordVocab):
            tokens, word_index = vocab.split([list(words)])[0]
            ids = [vocab.stoi[t] for t in tokens]
        else:
            ids, word_index = vocab.encode(list(words)), list(range(len(words)))
        unknown = [False] * len(words)
        for i, w in zip(ids, word_index):
            unknown[w] |= vocab.is_unknown(i)
        return ids, word_index, unknown

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        encoded = [self.encode(words) for words in sentences]
        if self.convention is not None:
            empty = next((i for i, (ids, _, _) in enumerate(encoded) if not ids), None)
            if empty is not None:
                raise InputError(f"sentence {empty + 1} of {len(sentences)}: no words; a "
                                 "transition LM generates at least one word under its root")

        def batch(chunk: list[int]) -> list[ScoredSentence]:
            rows = self._log_probs([encoded[i][0] for i in chunk])
            return [self._scored(sentences[i], *encoded[i], row) for i, row in zip(chunk, rows)]

        with evaluating(self.model), torch.no_grad():
            return by_length([len(ids) for ids, _, _ in encoded], self.batch_size, batch,
                             self.progress)

    def _log_probs(self, rows: list[list[int]]) -> list[np.ndarray | None]:
        """Each row's target log-probabilities: its tokens, then ``<eos>``, (n + 1,); for a
        transition LM (an RNNG), its beam search's word log-probabilities, then the end's
        (None: no parse within the beam)."""
        if isinstance(self.model, Searches):
            results = self.model.search_ids(rows)
            return [np.array([*r.word_log_probs, r.end_log_prob]) if r.parsed else None
                    for r in results]
        eos = self.vocab.eos_id
        tokens = sentence_rows(rows, eos).to(self.device)
        log_probs = self.model.target_log_probs(tokens[:, :-1], tokens[:, 1:])
        log_probs = log_probs.double().cpu().numpy()
        return [log_probs[b, :len(ids) + 1] for b, ids in enumerate(rows)]

    def _scored(self, words: Sequence[str], ids: list[int], word_index: list[int],
                unknown: list[bool], row: np.ndarray | None) -> ScoredSentence:
        if row is None:
            return ScoredSentence(words=tuple(words), word_log_probs=None,
                                  unknown=tuple(unknown), eos_log_prob=None,
                                  tokens=tuple(self.vocab.decode(ids)), token_log_probs=None,
                                  parsed=False)
        per_word = np.zeros(len(words))
        np.add.at(per_word, np.asarray(word_index, dtype=np.int64), row[:-1])
        return ScoredSentence(words=tuple(words), word_log_probs=tuple(per_word.tolist()),
                              unknown=tuple(unknown), eos_log_prob=float(row[-1]),
                              tokens=tuple(self.vocab.decode(ids)),
                              token_log_probs=tuple(row[:-1].tolist()))


def end_is_certain(model: Any) -> bool:
    """Whether ``model``'s end-of-sentence term is 0 for every sentence: a transition LM
    whose search, as it is set, leaves no choice after the last word
    (``synlm.transition.beam.SearchSettings.end_is_certain``: renormalised over the legal
    actions, a top-down model); an in-order RNNG's, or one over every action, is real."""
    return isinstance(model, Searches) and model.beam.end_is_certain(model.model)
