"""The masked-LM objective (``data.objective: masked``): sentence rows with some words replaced
by ``<mask>``, to be predicted from the whole sentence by a bidirectional backbone (Devlin et
al. 2019 §3.1), masked as the released StructFormer (Shen et al. 2021, ``main.py``
``mask_data``) and UDGN masks them:

    m_t ~ Bernoulli(mask_rate), for each position t of a row
    m_t = 0 where the token is padding or an unknown word (``<unk>``, or under
          ``unknown_words: classes`` an unknown-word class)
    input_t = <mask> where m_t = 1, else the token    (no 80/10/10 split of BERT's)
    target_t = the token; the loss counts the positions where m_t = 1

A row is a sentence as sentence mode serves it, ``[<eos>, w1..wn]``; the leading ``<eos>`` (the
sentence's start, the ROOT of an ``arcs`` structure) is never masked, so what is masked and
predicted are words alone, as in the released code, whose rows are the words alone.

The draws of a sentence come from a generator seeded by ``(seed, phase, split, epoch,
sentence)``: a training sentence gets fresh masks every epoch, the same ones in a resumed run
and whatever batch it lands in; a validation or test sentence the same masks at every
evaluation (the released code redraws them at each). Ranks of a distributed run hold
different sentences, so they draw different masks, each the same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from synlm.data.batching import collate_units
from synlm.data.vocab import MASK, Vocab
from synlm.errors import InputError, SettingError
from synlm.outputs import Batch

#: What the model is trained to predict (``data.objective``): the next token (``causal``) or
#: the masked tokens of a sentence (``masked``).
Objective = Literal["causal", "masked"]
OBJECTIVES: tuple[str, ...] = ("causal", "masked")

#: The released StructFormer's and UDGN's ``--mask_rate``.
DEFAULT_MASK_RATE = 0.3

#: Keeps the masks' generators apart from the other generators seeded by ``seed``.
_STREAM = 0x6D61736B  # "mask"


def check_settings(objective: str, mask_rate: float, mode: str, eval_mode: str) -> None:
    """``objective`` and ``mask_rate`` as the DataModule takes them: a masked objective serves
    sentence rows in training and evaluation; a one-line error naming the setting
    otherwise."""
    if objective not in OBJECTIVES:
        raise SettingError("objective", objective, " | ".join(OBJECTIVES))
    if not 0 < mask_rate < 1:
        raise SettingError("mask_rate", mask_rate, "a probability in (0, 1)")
    if objective == "masked" and (mode, eval_mode) != ("sentence", "sentence"):
        raise InputError(f"data.objective: masked masks the words of sentence rows, but "
                         f"data.mode is {mode} and data.eval_mode {eval_mode}; set "
                         "data.mode: sentence (and leave eval_mode unset)")


def check_objective(objective: str, bidirectional: bool, backbone: str) -> None:
    """The data's ``objective`` fits the backbone: a bidirectional backbone (one that attends
    both ways within a sentence) trains on masked words and only it does; one line naming
    ``--data.objective`` and the backbone otherwise."""
    if objective == "masked" and not bidirectional:
        raise InputError(f"--data.objective masked predicts masked words from the whole "
                         f"sentence, but the backbone {backbone} is causal (it reads only "
                         "the words before each position); use a bidirectional backbone "
                         "(Transformer with causal: false) or --data.objective causal")
    if objective == "causal" and bidirectional:
        raise InputError(f"--data.objective causal predicts each next token, but the backbone "
                         f"{backbone} attends both ways and would read the token it "
                         "predicts; use --data.objective masked")


def masked_vocab(vocab: Vocab) -> Vocab:
    """``vocab`` with ``<mask>`` after its tokens (every other id as it was), or ``vocab``
    itself if it has one. A subword vocabulary is refused in one line."""
    if MASK in vocab.stoi:
        return vocab
    if type(vocab) is not Vocab:
        raise InputError(f"data.objective: masked adds {MASK} to a word vocabulary; it "
                         f"cannot be combined with data.subwords ({type(vocab).__name__})")
    return Vocab([*vocab.itos, MASK], eos=vocab.eos, unk=vocab.unk,
                 unknown_words=vocab.unknown_words)


def sentence_mask(tokens: np.ndarray, rate: float, unknown: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """(n + 1,) bool: which positions of one row ``[<eos>, w1..wn]`` (``tokens``) are masked:
    a Bernoulli(``rate``) draw for each position from ``rng``, never the leading ``<eos>``
    nor a token in ``unknown`` (the vocabulary's unknown ids)."""
    drawn = rng.random(len(tokens)) < rate  # (n + 1,)
    drawn[0] = False
    return drawn & ~np.isin(tokens, unknown)


@dataclass(frozen=True)
class MaskedCollate:
    """Pads sentence units as ``collate_units`` does, then masks their words
    (``sentence_mask``), each sentence's draws from a generator seeded by ``(seed, phase,
    split, epoch, sentence)`` (phase 0: training, whose ``epoch`` changes; 1: evaluation,
    epoch 0). The ``Batch``: ``tokens`` with ``<mask>`` where masked, ``targets`` the
    original tokens, ``mask`` True exactly at the masked positions, ``n_targets`` their
    count, ``lengths`` and ``trees`` as sentence mode's."""

    mask_id: int
    unknown: tuple[int, ...]
    rate: float
    seed: int
    split: int
    epoch: int
    train: bool

    @classmethod
    def of(cls, vocab: Vocab, rate: float, seed: int, split: int, epoch: int, train: bool
           ) -> MaskedCollate:
        return cls(vocab.stoi[MASK], tuple(sorted(vocab.unknown_ids)), rate, seed, split,
                   epoch if train else 0, train)

    def row_mask(self, tokens: np.ndarray, sentence: int) -> np.ndarray:
        """(n + 1,) bool: the masked positions of sentence number ``sentence``."""
        rng = np.random.default_rng([self.seed, _STREAM, int(not self.train), self.split,
                                     self.epoch, sentence])
        return sentence_mask(tokens, self.rate, np.asarray(self.unknown, dtype=np.int64), rng)

    def __call__(self, items: list[tuple[dict[str, np.ndarray], Any]]) -> Batch:
        batch = collate_units(items)
        mask = torch.zeros_like(batch.mask)  # (B, T)
        for row, (item, _) in enumerate(items):
            drawn = self.row_mask(item["tokens"], int(item["sentence_ids"][0]))
            mask[row, : len(drawn)] = torch.from_numpy(drawn)
        batch.targets = batch.tokens
        batch.tokens = batch.tokens.masked_fill(mask, self.mask_id)
        batch.mask = mask
        batch.n_targets = int(mask.sum())
        return batch
