"""The corpora of DMLM's generation tasks (Yang & Wan 2022 §3.1-3.2, Appendix A):
ROCStories story endings and EMNLP2017 WMT News sentences.

Both come as their public preprocessed releases (the ones the paper used), fetched with
``download=True`` and checked against their checksums. Where the training file is not at
hand (a data folder with only the evaluation splits), ``staged=True`` trains on the
validation split less its last ``held_out`` units and validates on those; the test split is
never touched, so samples are still drawn for, and scored against, the real test set.

Dependency heads for DM-models come from ``parser``, a spaCy pipeline (``synlm annotate``
parses each file once, caching the CoNLL-U under ``$SYNLM_CACHE_DIR/annotations``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from synlm.data.annotation import annotate, parser_identity, read_input, read_stories
from synlm.data.corpora import TextCorpus
from synlm.data.files import CorpusError, RemoteFile, sha256_of
from synlm.syntax import ReaderError, Sentence, read_conllu


@dataclass(frozen=True)
class Story:
    """A ROCStories story: the first four sentences (``context``, one word list) and the
    fifth (``ending``), the sentence to generate."""

    context: list[str]
    ending: list[str]
    source: str

    @classmethod
    def read(cls, path: Path) -> list[Story]:
        """Every story of a ROCStories CSV as context and ending."""
        return [cls([w for words, _ in story[:4] for w in words], story[4][0],
                    _story_source(story))
                for story in read_stories(path)]


def _story_source(story: list[tuple[list[str], str]]) -> str:
    """``file:line`` of a story read by ``read_stories`` (its sentences add ``:column``)."""
    return story[0][1].rsplit(":", 1)[0]


class GenerationCorpus(TextCorpus):
    """A corpus of text units (stories or sentences) for language modelling and sampling.

    Args:
        data_dir: the folder holding ``folder`` (default ``$SYNLM_DATA_DIR``).
        download: fetch a missing file and verify its checksum.
        staged: only the validation and test files exist: train on the validation split
            less its last ``held_out`` units and validate on those.
        held_out: the units kept for validation with ``staged``.
        parser: a spaCy pipeline (a directory written by ``spacy train`` or a package name)
            whose heads give the dependency gold of DM-models; None: no gold.
    """

    annotation_format: ClassVar[str]  # ``synlm annotate --format``

    def __init__(self, data_dir: str | None = None, download: bool = False,
                 staged: bool = False, held_out: int = 1000, parser: str | None = None
                 ) -> None:
        super().__init__(data_dir, download)
        self.staged = staged
        self.held_out = held_out
        self.parser = parser
        self.gold = frozenset({"dependency"}) if parser else frozenset()

    def missing_hint(self, split: str) -> str:
        if split != "train":
            return ""
        return (f", or set staged: true to train on the {self.files['valid'].name} split "
                "(docs/data.md)")

    def units(self, split: str) -> list[Sentence]:
        """Every unit of the ``split`` file, in order, with heads when ``parser`` is set."""
        raise NotImplementedError  # pragma: no cover

    def sentences(self, split: str) -> list[Sentence]:
        if not self.staged or split == "test":
            return self.units(split)
        units = self.units("valid")
        if len(units) <= self.held_out:
            raise CorpusError(f"{self.name}: staged: the valid split has {len(units)} units, "
                              f"not more than held_out={self.held_out}")
        return units[:-self.held_out] if split == "train" else units[-self.held_out:]

    def annotation(self, split: str) -> list[Sentence]:
        """The ``parser``'s parse of the ``split`` file (cached by ``synlm annotate``)."""
        try:
            return read_conllu(annotate(self.path(split), self.annotation_format, "spacy",
                                        self.parser))
        except ReaderError as e:
            raise CorpusError(str(e)) from None

    def cache_key(self) -> str:
        return self._key

    @cached_property
    def _key(self) -> str:
        """The files' digests, the staged split and the parser's identity."""
        splits = ("valid", "test") if self.staged else self.splits
        parts = [self.name, *(sha256_of(self.path(s))[:12] for s in splits)]
        if self.staged:
            parts.append(f"staged{self.held_out}")
        if self.parser:
            identity = parser_identity("spacy", self.parser)
            parts.append(f"parsed{hashlib.sha256(identity).hexdigest()[:12]}")
        return "-".join(parts)


_ROC_URL = ("https://raw.githubusercontent.com/thu-coai/Stylized-Story-Generation-with-Style-"
            "Guided-Planning/b8e52bf7f970a19e4bf689d72556d57cbe151ef7/data/")
_NEWS_URL = ("https://raw.githubusercontent.com/pclucas14/GansFallingShort/"
             "e6be915b1aed7843d83f7d543bfb8de9f3d3461f/real_data_experiments/data/news/")


class ROCStories(GenerationCorpus):
    """ROCStories (Mostafazadeh et al. 2016) as Kong et al. (2021) split it 8:1:1 and
    delexicalised it (names → ``[MALE]``, ``[FEMALE]``, ``[NEUTRAL]``): five lowercased,
    tokenised sentences per story. A unit is a whole story (the five sentences' words, as the
    released DMLM code trains on); ``stories(split)`` gives the context (sentences 1-4) and
    the ending (sentence 5) for story-ending generation. The full corpus has 78,529 / 9,816 /
    9,816 stories and a 31,216-word vocabulary. With ``parser``, each sentence is parsed on
    its own and a story's heads are its sentences' heads, each root attached to the story's
    ``<eos>`` (ROOT)."""

    name = "rocstories"
    folder = "rocstories"
    annotation_format = "rocstories"
    files = {
        "train": RemoteFile("ROCStories_train.csv", _ROC_URL + "ROCStories_train.csv",
                            git_blob="ddb0978889d81e61e7ade4ed93005a7690d0a7a6"),
        "valid": RemoteFile("ROCStories_dev.csv", _ROC_URL + "ROCStories_dev.csv",
                            "ac3db2c59d3ff7ee88162707aad7f2d7b0a16a73bb11bc0faa9e5cd172577f6b"),
        "test": RemoteFile("ROCStories_test.csv", _ROC_URL + "ROCStories_test.csv",
                           "49b8ecec496c64c636aca420c02f44ae9fb79068976f37a91cbe0fb428bb745c"),
    }

    def units(self, split: str) -> list[Sentence]:
        stories = read_stories(self.path(split))
        parsed = self.annotation(split) if self.parser else None
        out = []
        for i, story in enumerate(stories):
            words = [w for sentence, _ in story for w in sentence]
            heads = None
            if parsed is not None:
                heads, offset = [], 0
                for sentence in parsed[5 * i:5 * i + 5]:
                    heads += [h + offset if h else 0 for h in sentence.heads]
                    offset += len(sentence.words)
            out.append(Sentence(words, heads=heads, source=_story_source(story)))
        return out

    def stories(self, split: str) -> list[Story]:
        """The ``split``'s stories as context (sentences 1-4) and ending (sentence 5)."""
        if self.staged and split != "test":
            raise CorpusError(f"{self.name}: staged: only the test split's stories are "
                              "served as contexts")
        return Story.read(self.path(split))


class WMTNews(GenerationCorpus):
    """EMNLP2017 WMT News as Caccia et al. (2020) preprocessed it (one tokenised, cased
    sentence per line, 5,268 words, at most 51 tokens; 268,586 / 10,000 / 10,000
    sentences), the unconditional generation task of DMLM §3.2."""

    name = "wmt_news"
    folder = "emnlp2017_news"
    annotation_format = "lines"
    files = {
        "train": RemoteFile("train.txt", _NEWS_URL + "train.txt",
                            git_blob="66abc879b4d72f13de02183b71cffb8f3e83b5bd"),
        "valid": RemoteFile("valid.txt", _NEWS_URL + "valid.txt",
                            "e66a6fdd1f6cb15cb8f851051e5c49062270e0de1e69213289ce50b88a1d7281"),
        "test": RemoteFile("test.txt", _NEWS_URL + "test.txt",
                           "e1ba37a752bc8fba6d9743898b30bb36119cc665cd35b229060bf5f75a94837d"),
    }

    def units(self, split: str) -> list[Sentence]:
        lines = read_input(self.path(split), "lines")
        parsed = self.annotation(split) if self.parser else [None] * len(lines)
        return [Sentence(words, heads=p.heads if p else None, source=source)
                for (words, source), p in zip(lines, parsed)]
