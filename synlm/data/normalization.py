"""Word normalisations: how a corpus maps a raw (treebank or user) word onto its vocabulary.

A corpus names its normalisation (``Corpus.normalization``); checkpoints save the name so that
``synlm parse`` maps raw text the way the training corpus did.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NUMBER = re.compile(r"[0-9][0-9.,:\-]*(\\/[0-9.,:\-]*)*")


def identity(word: str) -> str:
    """The word unchanged (corpora whose text is already what the vocabulary holds)."""
    return word


def normalize_word(word: str) -> str:
    """Mikolov's PTB form of a kept word: lowercase; numbers (digits with ``.``, ``,``, ``-``,
    ``:``, ``\\/``) and ``%`` become ``N``."""
    w = word.lower()
    return "N" if w == "%" or _NUMBER.fullmatch(w) else w


#: Normalisations by name (the name is what corpora declare and checkpoints store).
NORMALIZATIONS: dict[str, Callable[[str], str]] = {
    "none": identity,
    "ptb": normalize_word,
}


def normalizer(name: str) -> Callable[[str], str]:
    """The normalisation called ``name``; an unknown name raises a one-line ``ValueError``."""
    try:
        return NORMALIZATIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown word normalization {name!r}; valid names: "
                         f"{', '.join(sorted(NORMALIZATIONS))}") from None
