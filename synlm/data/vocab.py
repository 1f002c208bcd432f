"""Word vocabulary: built once from a corpus, cached as JSON."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, get_args

from synlm.data.unknown_words import RNNG_PYTORCH_RULES, is_signature, word_class
from synlm.errors import InputError, reading
from synlm.runtime.files import follow_umask

EOS = "<eos>"
UNK = "<unk>"
#: The token that stands for a masked word under the masked objective
#: (``synlm.data.masking``): added after a word vocabulary's tokens when that objective trains.
MASK = "<mask>"

#: How a word vocabulary encodes a word it lacks: ``unk``: as ``<unk>``; ``classes``: as its
#: unknown-word class (``synlm.data.unknown_words.word_class``) if the vocabulary has it, else
#: as ``<unk>``; ``berkeleyrule`` and ``berkeleyrule2``: as its class by rnng-pytorch's
#: ``--unkmethod`` of that name (``synlm.data.unknown_words.berkeley_rule``,
#: ``berkeley_rule2``) if the vocabulary has it, else as ``<unk>`` (under ``berkeleyrule``
#: itself one of the classes; a ``berkeleyrule2`` vocabulary has none, and such a word is an
#: error), as the released ``Vocabulary.get_id``.
UnknownWords = Literal["unk", "classes", "berkeleyrule", "berkeleyrule2"]


class Vocab:
    """Maps tokens to ids.

    A word vocabulary is built in order of first appearance (as AWD-LSTM's ``Dictionary``):
    ``<eos>`` is id 0 and ``<unk>`` is always present, and unknown words encode to ``<unk>``,
    or with ``unknown_words="classes"`` to their unknown-word class where the vocabulary has
    it (``build_classes``). A subword vocabulary (``synlm.data.subwords``) names its own
    end-of-sentence token and may have no unknown token (byte-level BPE encodes everything).
    """

    def __init__(self, itos: list[str], eos: str = EOS, unk: str | None = UNK,
                 unknown_words: UnknownWords = "unk") -> None:
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise InputError("duplicate words in vocabulary")
        missing = [t for t in (eos, unk) if t is not None and t not in self.stoi]
        if missing:
            raise InputError(f"the vocabulary lacks its special tokens {missing}")
        self.eos, self.unk = eos, unk
        self.eos_id = self.stoi[eos]
        self.unk_id = self.stoi[unk] if unk is not None else None
        if unknown_words not in get_args(UnknownWords):
            raise InputError(f"unknown_words is {unknown_words!r}; choose one of "
                             f"{list(get_args(UnknownWords))}")
        if unknown_words == "classes" and unk is None:
            raise InputError("unknown-word classes need an unknown token to fall back on")
        self.unknown_words = unknown_words
        is_class = {"classes": is_signature, **{name: pattern.fullmatch for name, (_, pattern)
                                                in RNNG_PYTORCH_RULES.items()}}.get(
            unknown_words, lambda w: False)
        unknown = {i for i, w in enumerate(self.itos) if is_class(w)}
        if self.unk_id is not None:
            unknown.add(self.unk_id)
        #: The ids an unknown word may encode to: ``<unk>`` and the classes.
        self.unknown_ids = frozenset(unknown)

    @classmethod
    def build(cls, sentences: Iterable[list[str]]) -> Vocab:
        seen: dict[str, None] = {EOS: None}
        for words in sentences:
            seen.update(dict.fromkeys(words))
        seen.setdefault(UNK, None)
        return cls(list(seen))

    @classmethod
    def build_classes(cls, train: Sequence[list[str]], min_count: int) -> Vocab:
        """A ``classes`` vocabulary from the training split alone: the words seen at least
        ``min_count`` times, and the unknown-word classes of the others (a word that already
        is a class stays itself), in order of first appearance (``<eos>`` first, ``<unk>``
        last unless seen)."""
        counts = Counter(w for words in train for w in words)
        known = {w for w, n in counts.items() if n >= min_count}
        vocab = cls.build([word_class(w, known) for w in words] for words in train)
        return cls(vocab.itos, unknown_words="classes")

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: list[str]) -> list[int]:
        if self.unknown_words in RNNG_PYTORCH_RULES:
            return self._encode_released(words)
        if self.unk_id is None:
            unknown = [w for w in words if w not in self.stoi]
            if unknown:
                raise InputError(f"tokens {unknown[:3]} are not in the vocabulary, which has "
                                 "no unknown token")
        get, unk = self.stoi.get, self.unk_id
        if self.unknown_words == "classes":
            return [i if (i := get(w)) is not None else get(word_class(w, self.stoi), unk)
                    for w in words]
        return [get(w, unk) for w in words]

    def _encode_released(self, words: list[str]) -> list[int]:
        """Words as rnng-pytorch's ``Vocabulary.get_id`` reads them under its rule."""
        rule, _ = RNNG_PYTORCH_RULES[self.unknown_words]
        get, unk = self.stoi.get, self.unk_id
        ids = [i if (i := get(w)) is not None else get(rule(w), unk) for w in words]
        if None in ids:
            word = words[ids.index(None)]
            raise InputError(f"word {word!r}: its class {rule(word)} is not in the "
                             f"vocabulary, which has no {UNK} to fall back on")
        return ids

    def is_unknown(self, token: int) -> bool:
        """Whether token id ``token`` stands for a word the vocabulary lacks: ``<unk>``, or under
        ``classes``, ``berkeleyrule`` or ``berkeleyrule2`` an unknown-word class
        (``unknown_ids``)."""
        return token in self.unknown_ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_saved(self) -> list[str] | dict[str, str | list[str]]:
        """What a checkpoint stores to rebuild it (``synlm.data.subwords.load_vocab``)."""
        return self._saved_words()

    def _saved_words(self) -> list[str] | dict[str, str | list[str]]:
        """The word list, as every vocabulary was saved before unknown-word classes; under
        ``classes`` the list and the policy (``from_saved``)."""
        if self.unknown_words == "unk":
            return self.itos
        return {"words": self.itos, "unknown_words": self.unknown_words}

    @classmethod
    def from_saved(cls, saved: list[str] | dict[str, str | list[str]]) -> Vocab:
        """The word vocabulary ``to_saved`` (or ``save``) wrote: a word list (``unk``), or
        the words and their policy. A vocabulary rnng-pytorch built has ``<unk>`` only if it
        is one of its words (a ``berkeleyrule2`` one never has it)."""
        if isinstance(saved, list):
            return cls(saved)
        words, policy = saved["words"], saved["unknown_words"]
        unk = UNK if UNK in words or policy not in RNNG_PYTORCH_RULES else None
        return cls(words, unk=unk, unknown_words=policy)

    def save(self, path: str | Path) -> None:
        atomic_write_text(Path(path), json.dumps(self._saved_words(), ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        with reading(path):
            text = Path(path).read_text(encoding="utf-8")
        return cls.from_saved(json.loads(text))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        follow_umask(fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
