"""Finished evaluations read back (``synlm evaluate-syntax --results``): the JSON the command
printed for one model, or for a config's untrained seeds, with the records it wrote
(``--output``), rebuilt as each run's ``BenchmarkResult`` so that the tables of runs scored
in several commands (seeds trained over days, on several machines) are made without
scoring anything again. Each result's summary and headline are recomputed from its records
(``synlm.tse.recomputed``), never read from the figures the JSON stored.

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

from synlm.errors import InputError, not_utf8
from synlm.tse.benchmarks import BENCHMARKS, BenchmarkResult
from synlm.tse.blimp import json_lines
from synlm.tse.marvin_linzen import NPI_COMPARISONS, NPI_TEMPLATES, TEMPLATES
from synlm.tse.recomputed import recomputed
from synlm.tse.shapes import field, is_kind, shown, typed

#: What must agree between the files of one table, beside their benchmarks: the items
#: scored of each and the end-of-sentence choice.
ALIKE = ("subset", "eos")
#: The keys of a file's JSON, when there, and the kind of each (``None``: null allowed).
SUMMARY_KEYS: dict[str, tuple[str, bool]] = {
    "headline": ("an object", False), "benchmarks": ("a list", False),
    "subset": ("a whole number", True), "eos": ("true or false", True),
    "output": ("a string", True), "label": ("a string", False), "model": ("a string", False),
    "per_seed": ("a list", False), "conventions": ("an object", False),
    "provenance": ("an object", False)}
#: The fields of every record of a benchmark, and of each with a parse (no ``no_parse``).
RECORD_FIELDS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    **{name: ((("UID", "a string"), ("phenomenon", "a string"), ("unknown", "true or false")),
              (("correct", "true or false"),)) for name in ("blimp", "pairs")},
    "syntaxgym": ((("suite", "a string"), ("item", "a whole number"),
                   ("unknown", "true or false")),
                  (("correct", "true or false"), ("predictions", "a list"),
                   ("surprisals", "an object"))),
    "marvin_linzen": ((("template", "a string"), ("case", "a string"),
                       ("unknown", "true or false")), (("correct", "true or false"),)),
}


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
        models = summary["models"]
        count = len(models) if isinstance(models, dict | list) else "several"
        raise InputError(f"--results: {path} holds {count} models' results; "
                         "give each model's own evaluation (one --ckpt_path or --hf, or "
                         "--config) and their labels")
    _check_summary(path, summary)
    return summary


def _check_summary(path: Path, summary: dict[str, Any]) -> None:
    """Each key of ``SUMMARY_KEYS`` there of its kind; the benchmarks known, each one's
    summary and convention an object; each headline (``per_seed``: one a seed) numbers."""
    where = f"--results: {path}"
    for key, (kind, nullable) in SUMMARY_KEYS.items():
        if key in summary and not (nullable and summary[key] is None):
            typed(summary[key], kind, f"{where}: {key!r}")
    known = (*BENCHMARKS, "pairs")
    for number, name in enumerate(field(summary, "benchmarks", "a list", where)):
        if name not in known:
            raise InputError(f"{where}: benchmarks[{number}] is {shown(name)}; expected one "
                             f"of {', '.join(known)}")
        for key, value in ((name, summary.get(name, {})),
                           (f"conventions.{name}", summary.get("conventions", {}).get(name, {}))):
            typed(value, "an object", f"{where}: {key!r}")
    if summary.get("per_seed") == []:
        raise InputError(f"{where}: 'per_seed' is []; expected one headline a seed")
    headlines = {"headline": summary["headline"], **{
        f"per_seed[{seed}]": typed(headline, "an object", f"{where}: per_seed[{seed}]")
        for seed, headline in enumerate(summary.get("per_seed", []))}}
    for key, headline in headlines.items():
        for name, value in headline.items():
            if value is not None and not is_kind(value, "a number"):
                raise InputError(f"{where}: {key}[{shown(name)}] is {shown(value)}; expected "
                                 "a number or null")


def _check_record(where: str, record: Any, benchmarks: Sequence[str]) -> dict[str, Any]:
    """``record`` (at ``where``, file and line) when it is of a known benchmark and, one of
    ``benchmarks`` (those the file lists), has its fields (``RECORD_FIELDS``); else a
    one-line error naming the first that is missing or of another kind."""
    typed(record, "an object", where)
    name = field(record, "benchmark", "a string", where)
    if name not in RECORD_FIELDS:
        raise InputError(f"{where}: a record of {shown(name)}; expected one of "
                         f"{', '.join(RECORD_FIELDS)}")
    if name not in benchmarks:  # left out of the tables
        return record
    every, parsed = RECORD_FIELDS[name]
    for key, kind in (*every, *(() if record.get("no_parse") else parsed)):
        field(record, key, kind, f"{where}: {name} record")
    if name == "marvin_linzen":
        _check_marvin_linzen(where, record)
    if name == "syntaxgym" and not record.get("no_parse"):
        _check_surprisals(where, record["surprisals"])
    return record


def _check_marvin_linzen(where: str, record: dict[str, Any]) -> None:
    """A Marvin & Linzen record's template is one of the 22, an NPI one's parsed record
    with the three comparisons (``NPI_COMPARISONS``)."""
    template = record["template"]
    if template not in TEMPLATES:
        raise InputError(f"{where}: marvin_linzen record: 'template' is {shown(template)}; "
                         "expected one of the 22 templates")
    if template in NPI_TEMPLATES and not record.get("no_parse"):
        for key in NPI_COMPARISONS:
            field(record, key, "true or false", f"{where}: marvin_linzen record")


def _check_surprisals(where: str, surprisals: dict[str, Any]) -> None:
    """A SyntaxGym record's surprisals: condition -> region number -> a number."""
    for condition, regions in surprisals.items():
        at = f"{where}: syntaxgym record: surprisals[{shown(condition)}]"
        for region, value in typed(regions, "an object", at).items():
            if not region.isdigit() or not is_kind(value, "a number"):
                raise InputError(f"{at}[{shown(region)}] is {shown(value)}; expected a number "
                                 "under a region number")


def _records(path: Path, source: Path, benchmarks: Sequence[str]) -> list[dict[str, Any]]:
    """The records of ``path`` (its ``--output``, at ``source``), each checked."""
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"--results: cannot read {source}, the records of {path} "
                         f"({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise not_utf8(f"--results: {source}", source.read_bytes(), err) from None
    where = f"--results: {source}"
    return [_check_record(f"{where}:{number}", record, benchmarks)
            for number, record in json_lines(where, text)]


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


def _results(records: Sequence[dict[str, Any]], summary: dict[str, Any],
             benchmarks: Sequence[str], source: Path) -> dict[str, BenchmarkResult]:
    """Each benchmark's ``BenchmarkResult`` of one run: its records (read from ``source``),
    its summary and headline recomputed from them (``synlm.tse.recomputed``; the figures
    ``summary``, the file's JSON, stored are not read) and its convention."""
    conventions = summary.get("conventions", {})
    return {name: recomputed(
        name, [r for r in records if r.get("benchmark") == name], summary.get(name, {}),
        dict(conventions.get(name, {})), f"--results: {source}") for name in benchmarks}


def read_saved(file: str | Path, summary: dict[str, Any],
               benchmarks: Sequence[str]) -> list[SavedRun]:
    """The runs of one finished evaluation (a config's untrained seeds: one run each):
    ``summary``, its JSON, and its records, on the ``benchmarks`` kept."""
    path = Path(file)
    source = records_path(path, summary)
    records = _records(path, source, summary["benchmarks"])
    provenance = summary.get("provenance", {})
    label = str(summary.get("label", path.stem))
    per_seed = summary.get("per_seed")
    if per_seed is None:  # one model
        return [SavedRun(label, str(summary.get("model", path)),
                         _results(records, summary, benchmarks, source),
                         str(path), str(source), provenance)]
    runs = []
    for seed in range(len(per_seed)):
        mine = records if len(per_seed) == 1 else [
            r for r in records if r.get("model") == f"seed {seed}"]
        if not mine:
            raise InputError(f"--results: {source} has no records of seed {seed} "
                             f"('model': 'seed {seed}') of the {len(per_seed)} in {path}")
        runs.append(SavedRun(label, f"{summary.get('model', path)}: seed {seed}",
                             _results(mine, summary, benchmarks, source),
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
