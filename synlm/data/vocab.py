"""Word vocabulary: built once from a corpus, cached as JSON."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

EOS = "<eos>"
UNK = "<unk>"


class Vocab:
    """Maps tokens to ids.

    A word vocabulary is built in order of first appearance (as AWD-LSTM's ``Dictionary``):
    ``<eos>`` is id 0 and ``<unk>`` is always present, and unknown words encode to ``<unk>``.
    A subword vocabulary (``synlm.data.subwords``) names its own end-of-sentence token and
    may have no unknown token (byte-level BPE encodes everything).
    """

    def __init__(self, itos: list[str], eos: str = EOS, unk: str | None = UNK) -> None:
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate words in vocabulary")
        missing = [t for t in (eos, unk) if t is not None and t not in self.stoi]
        if missing:
            raise ValueError(f"the vocabulary lacks its special tokens {missing}")
        self.eos, self.unk = eos, unk
        self.eos_id = self.stoi[eos]
        self.unk_id = self.stoi[unk] if unk is not None else None

    @classmethod
    def build(cls, sentences: Iterable[list[str]]) -> Vocab:
        seen: dict[str, None] = {EOS: None}
        for words in sentences:
            seen.update(dict.fromkeys(words))
        seen.setdefault(UNK, None)
        return cls(list(seen))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: list[str]) -> list[int]:
        if self.unk_id is None:
            unknown = [w for w in words if w not in self.stoi]
            if unknown:
                raise ValueError(f"tokens {unknown[:3]} are not in the vocabulary, which has "
                                 "no unknown token")
        get, unk = self.stoi.get, self.unk_id
        return [get(w, unk) for w in words]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_saved(self) -> list[str] | dict[str, str]:
        """What a checkpoint stores to rebuild it (``synlm.data.subwords.load_vocab``)."""
        return self.itos

    def save(self, path: str | Path) -> None:
        atomic_write_text(Path(path), json.dumps(self.itos, ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
