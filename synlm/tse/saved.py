"""Finished evaluations read back (``synlm evaluate-syntax --results``): the JSON the command
printed for one model, or for a config's untrained seeds, with the records it wrote
(``--output``), rebuilt as each run's ``BenchmarkResult`` so that the tables of runs scored
in several commands (seeds trained over days, on several machines) are made without
scoring anything again.

A file must hold one model's results (one ``--ckpt_path`` or ``--hf``) or a config's
untrained seeds (``--config C --seeds N``: one run a seed); every file must have been scored
on the same benchmarks, subset and end-of-sentence choice, since the tables pair items
across models. Each check is a one-line error naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synlm.errors import InputError
from synlm.tse.benchmarks import BenchmarkResult
from synlm.tse.blimp import json_lines

#: What must agree between the files of one table, beside their benchmarks: the items
#: scored of each and the end-of-sentence choice.
ALIKE = ("subset", "eos")


@dataclass(frozen=True)
class SavedRun:
    """One run of a finished evaluation: the ``label`` it was scored under, ``source`` (what
    was scored: a run folder, a Hugging Face model, a config's seed), its ``results``
    (benchmark -> ``BenchmarkResult``) and the files read (``file``: the JSON, ``records``:
    the JSON lines)."""

    label: str
    source: str
    results: dict[str, BenchmarkResult]
    file: str
    records: str
    provenance: dict[str, Any]


def _summary(path: Path) -> dict[str, Any]:
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"--results: cannot read {path} ({err.strerror or err})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"--results: {path} is not JSON ({err}); expected what `synlm "
                         "evaluate-syntax` printed on stdout") from None
    if not isinstance(summary, dict) or "headline" not in summary:
        raise InputError(f"--results: {path} is not the JSON `synlm evaluate-syntax` prints "
                         "(no 'headline')")
    if "models" in summary:
        raise InputError(f"--results: {path} holds {len(summary['models'])} models' results; "
                         "give each model's own evaluation (one --ckpt_path or --hf, or "
                         "--config) and their labels")
    return summary


def records_path(path: Path, summary: dict[str, Any]) -> Path:
    """The records file of ``summary`` (read from ``path``): its ``output`` as written, else
    the file of that name beside ``path`` (a folder moved whole)."""
    written = summary.get("output")
    if not written:
        raise InputError(f"--results: {path} was scored without --output; the tables need "
                         "its per-item records: score it again with --output FILE.jsonl")
    for candidate in (Path(written), path.parent / Path(written).name):
        if candidate.is_file():
            return candidate
    raise InputError(f"--results: {path} names its records {written}, which is neither there "
                     f"nor beside it")


def _results(records: Sequence[dict[str, Any]], headline: dict[str, Any],
             summary: dict[str, Any], benchmarks: Sequence[str]) -> dict[str, BenchmarkResult]:
    """Each benchmark's ``BenchmarkResult`` of one run: its records, the headline measures
    under its name, its summary (a single model's JSON has it) and its convention."""
    conventions = summary.get("conventions", {})
    return {name: BenchmarkResult(
        name, summary.get(name, {}),
        [r for r in records if r.get("benchmark") == name],
        {k: v for k, v in headline.items() if k.startswith(f"{name}/")},
        dict(conventions.get(name, {}))) for name in benchmarks}


def read_saved(file: str | Path, summary: dict[str, Any],
               benchmarks: Sequence[str]) -> list[SavedRun]:
    """The runs of one finished evaluation (a config's untrained seeds: one run each):
    ``summary``, its JSON, and its records, on the ``benchmarks`` kept."""
    path = Path(file)
    source = records_path(path, summary)
    records = [record for _, record in
               json_lines(f"--results: {source}", source.read_text(encoding="utf-8"))]
    provenance = summary.get("provenance", {})
    label = str(summary.get("label", path.stem))
    per_seed = summary.get("per_seed")
    if per_seed is None:  # one model
        return [SavedRun(label, str(summary.get("model", path)),
                         _results(records, summary["headline"], summary, benchmarks),
                         str(path), str(source), provenance)]
    runs = []
    for seed, headline in enumerate(per_seed):
        mine = records if len(per_seed) == 1 else [
            r for r in records if r.get("model") == f"seed {seed}"]
        if not mine:
            raise InputError(f"--results: {source} has no records of seed {seed} "
                             f"('model': 'seed {seed}') of the {len(per_seed)} in {path}")
        runs.append(SavedRun(label, f"{summary.get('model', path)}: seed {seed}",
                             _results(mine, headline, summary, benchmarks),
                             str(path), str(source), provenance))
    return runs


@dataclass(frozen=True)
class SavedTable:
    """The files of one table read back: each file's runs, the ``benchmarks`` kept, and the
    ``subset`` and ``eos`` choice they were all scored with."""

    files: list[list[SavedRun]]
    benchmarks: list[str]
    subset: int | None
    eos: bool | None


def check_alike(files: Sequence[str], summaries: Sequence[dict[str, Any]]) -> None:
    """A one-line error where a file was scored on other items or under another
    end-of-sentence choice than the first."""
    first = summaries[0]
    for file, summary in zip(files[1:], summaries[1:]):
        for key in ALIKE:
            if summary.get(key) != first.get(key):
                raise InputError(f"--results: {file} was scored with {key} "
                                 f"{summary.get(key)!r}, {files[0]} with {first.get(key)!r}; "
                                 "a table pairs the same items under one convention")


def kept_benchmarks(files: Sequence[str], summaries: Sequence[dict[str, Any]],
                    chosen: Sequence[str] | None) -> list[str]:
    """The benchmarks of the table: the ``chosen`` ones (None or ``all``: the first file's,
    which every file must then have been scored on), each in every file."""
    first = list(summaries[0].get("benchmarks", []))
    keep = first if chosen is None or "all" in chosen else list(dict.fromkeys(chosen))
    for file, summary in zip(files, summaries):
        scored = summary.get("benchmarks", [])
        missing = [b for b in keep if b not in scored]
        if missing and keep is first:
            raise InputError(f"--results: {file} was scored on {', '.join(scored)}, {files[0]} "
                             f"on {', '.join(first)}; choose the benchmarks both have with "
                             "--benchmark")
        if missing:
            raise InputError(f"--benchmark {missing[0].replace('_', '-')}: {file} was not "
                             f"scored on it (it has {', '.join(scored)})")
    return keep


def read_all(files: Sequence[str], chosen: Sequence[str] | None = None) -> SavedTable:
    """Each file's runs on the ``chosen`` benchmarks (``kept_benchmarks``), the files
    checked alike (``check_alike``)."""
    summaries = [_summary(Path(file)) for file in files]
    check_alike(files, summaries)
    keep = kept_benchmarks(files, summaries, chosen)
    return SavedTable([read_saved(file, summary, keep) for file, summary in
                       zip(files, summaries)], keep, summaries[0].get("subset"),
                      summaries[0].get("eos"))
