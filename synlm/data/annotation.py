"""Dependency heads for raw text as a cached CoNLL-U file: what ``synlm annotate`` writes
and ``ROCStories``/``WMTNews`` read with ``parser``. The tokens are kept as they are: a spaCy
pipeline gets each sentence as one ``Doc`` (no re-tokenisation, no sentence split), so the
heads align with what a language model reads; or the heads of an existing CoNLL-U parse of
the same sentences are taken, checked token by token. The output is keyed by the input's and
the parser's digests and reused when it exists."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from conllu.models import TokenList

from synlm.data.files import CorpusError, default_cache_dir, read_lines
from synlm.data.vocab import atomic_write_text
from synlm.errors import InputError, reading
from synlm.syntax import read_conllu

Sentences = list[tuple[list[str], str]]  # tokens and their source (file:line)

#: ROCStories CSV columns holding the five sentences of a story.
STORY_COLUMNS = tuple(f"sentence{i}" for i in range(1, 6))


def read_stories(path: Path) -> list[list[tuple[list[str], str]]]:
    """Each story of a ROCStories CSV as its five sentences, each with its
    ``file:line:column``."""
    with reading(path), open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in STORY_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise CorpusError(f"{path}:1: expected a ROCStories header with "
                              f"{', '.join(STORY_COLUMNS)}; missing {', '.join(missing)}")
        stories = []
        for row in reader:
            sentences = [(row[c].split(), f"{path}:{reader.line_num}:{c}")
                         for c in STORY_COLUMNS]
            empty = next((source for words, source in sentences if not words), None)
            if empty:
                raise CorpusError(f"{empty}: empty sentence, expected five sentences per story")
            stories.append(sentences)
    if not stories:
        raise CorpusError(f"{path}: no story after the header")
    return stories


class AnnotateError(InputError):
    """Bad input, a missing parser or a parse that does not match; one line."""


def read_input(path: Path, fmt: str) -> Sentences:
    """The sentences of ``path`` (``lines`` or ``rocstories``) with their ``file:line``."""
    if fmt == "lines":
        out = []
        for number, line in enumerate(read_lines(path), start=1):
            if not line.split():
                raise AnnotateError(f"{path}:{number}: empty line, expected one sentence "
                                    "per line")
            out.append((line.split(), f"{path}:{number}"))
        return out
    return [sentence for story in read_stories(path) for sentence in story]


def spacy_parse(model: str, sentences: Sentences) -> list[tuple[list[int], list[str]]]:
    """Heads (1-based, 0 = root) and labels from a spaCy pipeline (a package name or a
    directory), each sentence parsed as one ``Doc`` of its own tokens."""
    try:
        import spacy
        from spacy.tokens import Doc
    except ImportError:
        raise AnnotateError("--parser spacy needs spaCy: pip install 'synlm[annotate]'") from None
    try:
        nlp = spacy.load(model)
    except OSError:
        raise AnnotateError(f"no spaCy pipeline {model!r}: give a directory written by "
                            "`spacy train` (docs/evaluation.md trains one on UD English "
                            "EWT) or an installed package name") from None
    docs = (Doc(nlp.vocab, words=tokens, sent_starts=[True] + [False] * (len(tokens) - 1))
            for tokens, _ in sentences)
    return [([0 if t.head.i == t.i else t.head.i + 1 for t in doc], [t.dep_ for t in doc])
            for doc in nlp.pipe(docs)]


def conllu_parse(path: Path, sentences: Sentences) -> list[tuple[list[int], list[str]]]:
    """Heads from an existing CoNLL-U parse of the same sentences, in the same order."""
    parsed = read_conllu(path)
    if len(parsed) != len(sentences):
        raise AnnotateError(f"{path}: {len(parsed)} sentences, the input has "
                            f"{len(sentences)}")
    for s, (tokens, source) in zip(parsed, sentences):
        if s.words != tokens:
            raise AnnotateError(f"{s.source}: tokens {s.words[:5]} differ from {source} "
                                f"{tokens[:5]}")
    return [(s.heads, ["_"] * len(s.words)) for s in parsed]


def to_conllu(sentences: Sentences, parses: list[tuple[list[int], list[str]]]) -> str:
    """CoNLL-U text: ID, FORM, HEAD and DEPREL filled, the other columns ``_``."""
    blocks = []
    for (tokens, source), (heads, labels) in zip(sentences, parses):
        rows = TokenList([{"id": i, "form": w, "lemma": "_", "upos": "_", "xpos": "_",
                           "feats": None, "head": h, "deprel": d or "_", "deps": None,
                           "misc": None}
                          for i, (w, h, d) in enumerate(zip(tokens, heads, labels), start=1)],
                         metadata={"source": source, "text": " ".join(tokens)})
        blocks.append(rows.serialize())
    return "".join(blocks)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def parser_identity(parser: str, source: str) -> bytes:
    """What the output depends on besides the input: the parser and its model's files."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return parser.encode() + b"".join(f.read_bytes() for f in files)
    if path.is_file():
        return parser.encode() + path.read_bytes()
    return f"{parser}:{source}".encode()  # an installed package name


def annotate(path: Path, fmt: str = "lines", parser: str = "spacy", model: str | None = None,
             conllu: Path | None = None, output: Path | None = None) -> Path:
    """Write (or reuse) the CoNLL-U annotation of the text at ``path``; returns its path."""
    source = model if parser == "spacy" else conllu
    if source is None:
        raise AnnotateError(f"--parser {parser} needs "
                            f"{'--model NAME_OR_PATH' if parser == 'spacy' else '--conllu FILE'}")
    if output is None:
        key = _digest(path.read_bytes(), fmt.encode(), parser_identity(parser, str(source)))
        output = default_cache_dir() / "annotations" / f"{path.stem}-{key}.conllu"
    if output.exists():
        return output
    sentences = read_input(path, fmt)
    parses = (spacy_parse(str(source), sentences) if parser == "spacy"
              else conllu_parse(Path(source), sentences))
    atomic_write_text(output, to_conllu(sentences, parses))
    return output
