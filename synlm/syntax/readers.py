"""Treebank readers: PTB/CTB brackets (files, directories, LDC section dirs, NLTK zips), CoNLL-U,
and NLTK's Malt-TAB ``dependency_treebank.zip``. Every error is one line, ``file:line: what``.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import conllu
from nltk import Tree

from synlm.errors import InputError, MissingFileError, not_utf8, reading, utf8_text
from synlm.syntax.sentence import Sentence
from synlm.syntax.trees import TreeFormatError, read_brackets, words_and_tags


class ReaderError(InputError):
    """A treebank file is malformed; the message is ``file:line: what was expected``."""


def _decode(data: bytes, source: str) -> str:
    """A tree file's text: UTF-8, or GB18030 (CTB releases before 6.0 are GB-encoded);
    neither is a ``ReaderError`` naming the line and byte where UTF-8 fails."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        try:
            return data.decode("gb18030")
        except UnicodeDecodeError:
            raise not_utf8(source, data, err, ReaderError,
                           "UTF-8 (or GB18030) text") from None


def _bracket_files(path: Path, sections: Iterable[int] | None,
                   suffixes: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of the tree files under ``path`` in sorted order."""
    if path.suffix == ".zip":
        if not zipfile.is_zipfile(path):
            raise ReaderError(f"{path}: not a zip archive (cut short, or of another kind)")
        with zipfile.ZipFile(path) as z:
            names = sorted(n for n in z.namelist() if n.endswith(suffixes))
            return [(f"{path}/{n}", z.read(n)) for n in names]
    if path.is_file():
        return [(str(path), path.read_bytes())]
    if not path.is_dir():
        raise MissingFileError(f"{path}: expected a tree file, a directory or a .zip")
    if sections is not None:  # LDC WSJ layout: <dir>/<NN>/wsj_NNxx.mrg
        files = [f for s in sections for f in sorted((path / f"{s:02d}").glob("*"))
                 if f.name.endswith(suffixes)]
    else:
        files = sorted(f for f in path.rglob("*") if f.is_file() and f.name.endswith(suffixes))
    return [(str(f), f.read_bytes()) for f in files]


def read_trees(path: str | os.PathLike, sections: Iterable[int] | None = None,
               suffixes: tuple[str, ...] = (".mrg",)) -> list[tuple[Tree, str]]:
    """Bracketed trees with their ``file:line`` sources from a file, a directory (recursive),
    an LDC WSJ directory restricted to ``sections`` (00-24), or a zip (NLTK ``treebank.zip``:
    its ``combined/*.mrg``). Raises ``ReaderError`` naming file and line on bad brackets."""
    out = []
    for name, data in _bracket_files(Path(path), sections, suffixes):
        try:
            text = _decode(data, name)
            out.extend((t, f"{name}:{line}") for t, line in read_brackets(text, name))
        except TreeFormatError as e:
            raise ReaderError(str(e)) from None
    return out


@dataclass(frozen=True)
class GoldTreebank:
    """A treebank to score against, as read: a CoNLL-U file's ``sentences`` (with their
    heads), or bracketed ``trees`` with their ``file:line`` sources."""

    path: str
    sentences: list[Sentence]
    trees: list[tuple[Tree, str]]


def read_gold(path: str, sections: Iterable[int] | None = None) -> GoldTreebank:
    """A CoNLL-U file's sentences (``.conllu``), or bracketed trees (``read_trees``: a file,
    a directory, an LDC WSJ dir restricted to ``sections``, a zip); one that holds none is
    a ``ReaderError`` too."""
    if path.endswith(".conllu"):
        gold = GoldTreebank(path, sentences=read_conllu(path), trees=[])
    else:
        gold = GoldTreebank(path, sentences=[], trees=read_trees(path, sections))
    if not (gold.sentences or gold.trees):
        expected = "CoNLL-U sentences" if path.endswith(".conllu") else \
            "bracketed trees, (S (NP ...) ...) a sentence"
        raise ReaderError(f"{path}: nothing in it; expected {expected}")
    return gold


def tree_sentences(trees: Sequence[tuple[Tree, str]]) -> list[Sentence]:
    """Sentences (words, tags, tree as read) of bracketed trees."""
    out = []
    for tree, source in trees:
        words, tags = words_and_tags(tree)
        out.append(Sentence(words, tree=tree, tags=tags, source=source))
    return out


def read_conllu(path: str | os.PathLike, text: str | None = None) -> list[Sentence]:
    """Words, UPOS tags and heads of a CoNLL-U file (multiword ranges and empty nodes are
    skipped). ``text`` overrides reading ``path`` (which then only names the source)."""
    name = str(path)
    if text is None:
        with reading(path):
            text = utf8_text(Path(path).read_bytes(), name, ReaderError)
    out, line = [], 1
    for block in re.split(r"\n[ \t]*\n", text.rstrip("\n") + "\n"):
        start, line = line, line + block.count("\n") + 2
        if not block.strip():
            continue
        first = start + next((i for i, r in enumerate(block.split("\n")) if r.strip()), 0)
        try:
            (sent,) = conllu.parse(block + "\n\n")
            rows = [t for t in sent if isinstance(t["id"], int)]
            words = [t["form"] for t in rows]
            heads = [t["head"] for t in rows]
            tags = [t["upos"] for t in rows]
        except Exception as e:
            raise ReaderError(f"{name}:{first}: expected 10 tab-separated CoNLL-U columns "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:80]})") from None
        n = len(words)
        bad = next((i for i, h in enumerate(heads) if not isinstance(h, int) or not 0 <= h <= n),
                   None)
        if n == 0 or bad is not None or [t["id"] for t in rows] != list(range(1, n + 1)):
            where = first + (bad or 0)
            raise ReaderError(f"{name}:{where}: expected word ids 1..n and integer heads in "
                              f"0..{n}")
        out.append(Sentence(words, heads=heads, tags=tags, source=f"{name}:{first}"))
    return out


def read_malt_zip(path: str | os.PathLike) -> list[Sentence]:
    """NLTK ``dependency_treebank.zip``: Malt-TAB ``word tag head`` rows, blank-line separated."""
    out = []
    with zipfile.ZipFile(path) as z:
        for member in sorted(n for n in z.namelist() if n.endswith(".dp")):
            name = f"{path}/{member}"
            words: list[str] = []
            tags: list[str] = []
            heads: list[int] = []
            lines = [*z.read(member).decode("utf-8").split("\n"), ""]
            for i, row in enumerate(lines, 1):
                cols = row.split("\t")
                if row.strip() and len(cols) >= 3 and cols[2].isdigit():
                    words.append(cols[0])
                    tags.append(cols[1])
                    heads.append(int(cols[2]))
                elif row.strip():
                    raise ReaderError(f"{name}:{i}: expected 'word<TAB>tag<TAB>head'")
                elif words:
                    if max(heads) > len(words):
                        raise ReaderError(f"{name}:{i - 1}: expected heads in 0..{len(words)}")
                    out.append(Sentence(words, heads=heads, tags=tags,
                                        source=f"{name}:{i - len(words)}"))
                    words, tags, heads = [], [], []
    return out
