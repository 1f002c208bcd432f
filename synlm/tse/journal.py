"""A long evaluation's scores kept as they come (``evaluate-syntax --journal DIR``), so that
a run stopped part way (a machine taken back, a job's time limit) goes on where it stopped.

A model's scorer is wrapped by ``JournaledScorer``: the sentences a benchmark gives are
scored in chunks of ``CHUNK`` distinct sentences, in the benchmark's order, and each chunk's
scores are appended to ``DIR/<label>.rank<r>.jsonl`` as one line, flushed to disk, before
the next chunk starts. Run again with the same ``--journal``, a chunk already on disk is
read instead of scored: a line cut short by the stop is ignored and its chunk scored again,
whole, so a resumed run scores each chunk with the same batches as a run never stopped and
gives the same numbers to the last digit. Every file of the folder under the model's label
is read, whichever process wrote it, so a run may resume under another ``torchrun`` size.

Each chunk's line also carries the CPU and wall seconds its scoring took in its process
(``{"cpu_seconds", "wall_seconds", "scores"}``; a bare list of scores is read as a chunk
without them), so a run carried over several processes and stops has its whole time:
``time_spent`` sums the folder's lines for a model, and ``evaluate-syntax`` puts the sum in
the run's provenance (``journal``).

The first line of a file is the model's fingerprint: ``synlm.tse.provenance``'s record of
the model (its checkpoint's or Hugging Face files' sha256 and size, vocabulary, parameters,
dtype, search settings and convention), its name and its files' paths left out. A journal
written for other weights or another search is refused, naming the file and what differs:
scores are never mixed across models. A model's untrained copies (``--untrained``) are
scored afresh each run: nothing in their record tells two seeds apart.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

from synlm.errors import InputError
from synlm.tse.progress import adopt
from synlm.tse.scores import ScoredSentence

#: Distinct sentences scored between two writes: at 100/10/1 a few minutes of one core.
CHUNK = 256

Words = tuple[str, ...]


def file_name(label: str, rank: int) -> str:
    """The journal file of the model ``label`` written by process ``rank``."""
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', label)}.rank{rank}.jsonl"


def _lines(path: Path) -> Iterator[Any]:
    """Each whole JSON line of ``path``; a line cut short by a stop is left out."""
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def _differs(written: Mapping[str, Any], wanted: Mapping[str, Any]) -> str:
    keys = sorted(k for k in {*written, *wanted} if written.get(k) != wanted.get(k))
    return ", ".join(keys)


def _chunks(folder: Path, label: str, fingerprint: Mapping[str, Any]
            ) -> Iterator[dict[str, Any]]:
    """Each chunk line of the journal files of ``label`` in ``folder``, as a dict with its
    ``scores`` (a bare list: no times), every file checked against ``fingerprint`` (module
    docstring)."""
    stem = file_name(label, 0).removesuffix("0.jsonl")
    for path in sorted(folder.glob(f"{stem}*.jsonl")):
        lines = _lines(path)
        header = next(lines, None)
        if header is None:
            continue
        written = header.get("fingerprint") if isinstance(header, dict) else None
        if written != fingerprint:
            differs = _differs(written or {}, fingerprint)
            raise InputError(f"--journal: {path} was written for another model or search "
                             f"(differs in: {differs}); give another folder or remove it")
        for chunk in lines:
            yield chunk if isinstance(chunk, dict) else {"scores": chunk}


def read_journal(folder: Path, label: str, fingerprint: Mapping[str, Any]
                 ) -> dict[Words, ScoredSentence]:
    """The sentences the journal files of ``label`` in ``folder`` hold, checked against
    ``fingerprint`` (module docstring)."""
    done: dict[Words, ScoredSentence] = {}
    for chunk in _chunks(folder, label, fingerprint):
        for record in chunk["scores"]:
            scored = ScoredSentence(**{k: tuple(v) if isinstance(v, list) else v
                                       for k, v in record.items()})
            done[scored.words] = scored
    return done


@dataclass(frozen=True)
class TimeSpent:
    """What a model's journal took to score, over all its files (every process, every
    stop): ``sentences`` in ``chunks``; of those, ``timed_sentences`` in ``timed_chunks``
    carry their time, ``cpu_seconds`` and ``wall_seconds`` summed over them (a process's CPU
    time counts all its threads)."""

    chunks: int
    sentences: int
    timed_chunks: int
    timed_sentences: int
    cpu_seconds: float
    wall_seconds: float


class JournaledScorer:
    """``scorer`` with its scores kept in and read from the journal ``folder`` (module
    docstring) under ``label``, as process ``rank``; its other members are its own.
    ``progress`` (set by a ``ProgressScorer``) is told the sentences read from the journal
    at once (``read=True``: done, but not at the rate of this run), then the scorer's
    batches as it scores them, and a chunk's repeated sentences when it is written: each
    sentence once."""

    def __init__(self, scorer: Any, folder: str | Path, label: str,
                 fingerprint: Mapping[str, Any], rank: int = 0) -> None:
        adopt(self, scorer)
        self.scorer, self.fingerprint = scorer, dict(fingerprint)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.label, self.path = label, self.folder / file_name(label, rank)
        self.done = read_journal(self.folder, label, self.fingerprint)
        self.progress: Callable[..., None] | None = None

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        keys = [tuple(s) for s in sentences]
        counts: dict[Words, int] = {}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        distinct = list(counts)
        self._tell(sum(counts[k] for k in distinct if k in self.done), read=True)
        for start in range(0, len(distinct), CHUNK):
            chunk = [k for k in distinct[start:start + CHUNK] if k not in self.done]
            if chunk:
                self.scorer.progress = self.progress  # told each batch of the chunk
                cpu, wall = process_time(), perf_counter()
                try:
                    scored = self.scorer.score(chunk)
                finally:
                    self.scorer.progress = None
                self._write(scored, process_time() - cpu, perf_counter() - wall)
                self._tell(sum(counts[k] - 1 for k in chunk))  # the chunk's repeats
        return [self.done[key] for key in keys]

    def _tell(self, n: int, read: bool = False) -> None:
        if self.progress is not None and n:
            self.progress(n, read=read)

    def time_spent(self) -> TimeSpent:
        """The time of every chunk of this model's journal, whichever process wrote it."""
        chunks = list(_chunks(self.folder, self.label, self.fingerprint))
        timed = [c for c in chunks if "cpu_seconds" in c]
        return TimeSpent(len(chunks), sum(len(c["scores"]) for c in chunks), len(timed),
                         sum(len(c["scores"]) for c in timed),
                         round(sum(c["cpu_seconds"] for c in timed), 3),
                         round(sum(c["wall_seconds"] for c in timed), 3))

    def _write(self, scored: list[ScoredSentence], cpu_seconds: float,
               wall_seconds: float) -> None:
        """``scored`` into the journal as one line with the seconds it took, on disk before
        it returns."""
        with self.path.open("a+b") as out:
            if out.tell() == 0:
                out.write(json.dumps({"fingerprint": self.fingerprint}).encode() + b"\n")
            else:
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":  # a line cut short by a stop: ended, left out
                    out.write(b"\n")
            line = {"cpu_seconds": round(cpu_seconds, 3), "wall_seconds": round(wall_seconds, 3),
                    "scores": [asdict(s) for s in scored]}
            out.write(json.dumps(line).encode() + b"\n")
            out.flush()
            os.fsync(out.fileno())
        self.done.update((s.words, s) for s in scored)


def fingerprint_of(label: str, scorer: Any) -> dict[str, Any]:
    """What identifies ``scorer``'s numbers (module docstring): its provenance record,
    JSON-shaped, without its name and its files' paths (a checkpoint moved is the same)."""
    from synlm.tse.provenance import model_provenance

    record = asdict(model_provenance(label, scorer))
    record.pop("name")
    for digest in record["files"]:
        digest.pop("path")
    return json.loads(json.dumps(record))
