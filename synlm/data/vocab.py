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
    """Maps words to ids in order of first appearance (as AWD-LSTM's ``Dictionary``).

    ``<eos>`` is always id 0 and ``<unk>`` is always present; unknown words encode
    to ``<unk>``.
    """

    def __init__(self, itos: list[str]) -> None:
        if itos[:1] != [EOS] or UNK not in itos:
            raise ValueError(f"a vocabulary starts with {EOS} and contains {UNK}")
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate words in vocabulary")
        self.eos_id = 0
        self.unk_id = self.stoi[UNK]

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
        get, unk = self.stoi.get, self.unk_id
        return [get(w, unk) for w in words]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

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
