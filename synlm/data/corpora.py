"""Corpora: where their files live, how to fetch them, how to read them into sentences."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from synlm.syntax import Sentence

DATA_ENV = "SYNLM_DATA_DIR"


def default_data_dir() -> Path:
    """``$SYNLM_DATA_DIR`` if set, else ``~/.cache/synlm/data``."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "synlm" / "data"


class CorpusError(ValueError):
    """A corpus file is missing or malformed; the message names file and line."""


class Corpus:
    """Base class of every corpus.

    A corpus turns each split into a list of ``Sentence``. ``has_trees`` says whether
    sentences may carry gold syntax (constituency ``tree`` and/or dependency ``heads``).
    ``cache_key()`` identifies the content (file hashes and options) for the on-disk
    vocabulary/target caches.
    """

    name: ClassVar[str] = "corpus"
    splits: ClassVar[tuple[str, ...]] = ("train", "valid", "test")
    has_trees: ClassVar[bool] = False

    def __init__(self, data_dir: str | None = None) -> None:
        self.data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()

    def sentences(self, split: str) -> list[Sentence]:
        raise NotImplementedError  # pragma: no cover

    def cache_key(self) -> str:
        raise NotImplementedError  # pragma: no cover
