"""Word normalisations: how a corpus maps a raw (treebank or user) word onto its vocabulary,
and running text (a benchmark's English sentences) onto the words it would hold.

A corpus names its normalisation (``Corpus.normalization``); checkpoints save the name so that
``synlm parse`` and ``synlm evaluate-syntax`` map raw text the way the training corpus did.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from synlm.errors import InputError

_NUMBER = re.compile(r"[0-9][0-9.,:\-]*(\\/[0-9.,:\-]*)*")


def identity(word: str) -> str:
    """The word unchanged (corpora whose text is already what the vocabulary holds)."""
    return word


def normalize_word(word: str) -> str:
    """Mikolov's PTB form of a kept word: lowercase; numbers (digits with ``.``, ``,``, ``-``,
    ``:``, ``\\/``) and ``%`` become ``N``."""
    w = word.lower()
    return "N" if w == "%" or _NUMBER.fullmatch(w) else w


#: Tokens deleted from Mikolov's PTB text (lowercased PTB forms; Du et al. 2020 Appendix A.3
#: steps 4-5): punctuation, brackets and quotes. ``'`` is kept where a treebank tags it as a
#: possessive (``synlm.data.treebanks.mikolov_tokens``); in running text it is deleted.
MIKOLOV_DELETED = frozenset(
    {"``", "''", ",", ".", ":", ";", "-", "?", "!", ";;", "--", "...", "`", "'", "\\", "|",
     "~", "-lrb-", "-rrb-", "-lcb-", "-rcb-", "(", ")", "[", "]", "{", "}", "<", ">", '"'}
)

@functools.cache
def _treebank() -> Any:
    """nltk's Treebank tokenizer, built on first use (importing nltk takes seconds, and the
    commands' ``--help`` imports this module)."""
    from nltk.tokenize import TreebankWordTokenizer

    return TreebankWordTokenizer()


def treebank_words(text: str) -> list[str]:
    """``text`` split as the Penn Treebank splits words (nltk's Treebank tokenizer): clitics
    apart (``is n't``, ``ca n't``, ``John 's``), punctuation and quotes as tokens."""
    return _treebank().tokenize(text)


def ptb_text_words(text: str) -> list[str]:
    """Running text as Mikolov's PTB holds it: Treebank tokens, punctuation deleted, each kept
    word in its ``ptb`` form (lowercase, numbers ``N``)."""
    return [normalize_word(w) for w in treebank_words(text) if w.lower() not in MIKOLOV_DELETED]


#: Normalisations by name (the name is what corpora declare and checkpoints store).
NORMALIZATIONS: dict[str, Callable[[str], str]] = {
    "none": identity,
    "ptb": normalize_word,
}


#: How running text becomes a corpus's words, by normalisation name: Mikolov's PTB drops
#: punctuation; the other corpora keep Treebank tokens as they are (WikiText-2, a user's text).
TEXT_NORMALIZATIONS: dict[str, Callable[[str], list[str]]] = {
    "none": treebank_words,
    "ptb": ptb_text_words,
}


def ptb_text_covers_end(text: str) -> bool:
    """Whether Mikolov's PTB form of ``text`` keeps its last Treebank token (``the store``:
    yes; ``the store .``: no, the period is deleted)."""
    tokens = treebank_words(text)
    return not tokens or tokens[-1].lower() not in MIKOLOV_DELETED


def _keeps_every_token(text: str) -> bool:
    return True


#: Whether a normalisation's words of running text reach its end, by normalisation name: only
#: Mikolov's PTB deletes tokens (punctuation), so only there can text trail the last word.
TEXT_COVERS_END: dict[str, Callable[[str], bool]] = {
    "none": _keeps_every_token,
    "ptb": ptb_text_covers_end,
}


def text_normalizer(name: str) -> Callable[[str], list[str]]:
    """The running-text form of normalisation ``name`` (``TEXT_NORMALIZATIONS``)."""
    normalizer(name)  # an unknown name: the one-line error
    return TEXT_NORMALIZATIONS[name]


def normalizer(name: str) -> Callable[[str], str]:
    """The normalisation called ``name``; an unknown name raises a one-line ``ValueError``."""
    try:
        return NORMALIZATIONS[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown word normalization {name!r}; valid names: "
                         f"{', '.join(sorted(NORMALIZATIONS))}") from None


def encode_words(vocab: Any, name: str, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
    """Each sentence's ids in ``vocab`` (its ``encode``), its words normalised by the
    normalisation called ``name``, as the model's training corpus was read."""
    normalize = normalizer(name)
    return [vocab.encode([normalize(w) for w in words]) for words in sentences]
