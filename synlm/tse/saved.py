"""Finished evaluations read back (``synlm evaluate-syntax --results``): the JSON the command
printed for one model, or for a config's untrained seeds, with the records it wrote
(``--output``), rebuilt as each run's ``BenchmarkResult`` so that the tables of runs scored
in several commands (seeds trained over days, on several machines) are made without
scoring anything again. Each result's summary and headline are recomputed from its records
(``synlm.tse.recomputed``), never read from the figures the JSON stored.

A file must hold one model's results (one ``--ckpt_path`` or ``--hf``) or a config's
untrained seeds (``--config C --seeds N``: one run a seed); every file must have been scored
on the same benchmarks, subset and end-of-sentence choice, since the tables pair items
across models. Files under one label are seeds of one model, each a run, where they score
the same items; where the same weights and search scored each its own units (BLiMP
paradigms, SyntaxGym suites, Marvin & Linzen templates: a run split with ``--paradigms`` or
``--suites``), they are the parts of one run, their records joined (``run_groups``). Each
check is a one-line error naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
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
#: A search's settings that batch its sentences alone (their numbers the same up to float
#: rounding, as under ``torchrun``): the parts of a run may differ in them.
BATCHING = ("batch_size", "max_memory_mb")
#: The field of a benchmark's records that names its unit, those the parts of a run divide.
UNIT_FIELDS = {"blimp": "UID", "pairs": "UID", "syntaxgym": "suite",
               "marvin_linzen": "template"}


@dataclass(frozen=True)
class SavedPart:
    """One file read back: the JSON (``file``), its records (``records``) and the provenance
    it was scored with."""

    file: str
    records: str
    provenance: dict[str, Any]


@dataclass(frozen=True)
class SavedRun:
    """One run of a finished evaluation: the ``label`` it was scored under, ``source`` (what
    was scored: a run folder, a Hugging Face model, a config's seed), its ``results``
    (benchmark -> ``BenchmarkResult``) and the files read (``parts``: one, or each part of a
    run split over commands)."""

    label: str
    source: str
    results: dict[str, BenchmarkResult]
    parts: tuple[SavedPart, ...]


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
             benchmarks: Sequence[str], source: str | Path) -> dict[str, BenchmarkResult]:
    """Each benchmark's ``BenchmarkResult`` of one run: its records (read from ``source``),
    its summary and headline recomputed from them (``synlm.tse.recomputed``; the figures
    ``summary``, the file's JSON, stored are not read) and its convention."""
    conventions = summary.get("conventions", {})
    return {name: recomputed(
        name, [r for r in records if r.get("benchmark") == name], summary.get(name, {}),
        dict(conventions.get(name, {})), f"--results: {source}") for name in benchmarks}


def label_of(file: str | Path, summary: dict[str, Any]) -> str:
    """The label a file was scored under (``summary``, its JSON), else its name's stem."""
    return str(summary.get("label", Path(file).stem))


def _read_part(file: str | Path, summary: dict[str, Any]
               ) -> tuple[SavedPart, list[dict[str, Any]]]:
    """The file (``summary``, its JSON) as a ``SavedPart``, and its records, each checked."""
    path = Path(file)
    source = records_path(path, summary)
    return (SavedPart(str(path), str(source), summary.get("provenance", {})),
            _records(path, source, summary["benchmarks"]))


def _runs(part: SavedPart, summary: dict[str, Any], records: list[dict[str, Any]],
          benchmarks: Sequence[str]) -> list[SavedRun]:
    """The runs of one finished evaluation, read (``_read_part``): one model's, or each of a
    config's untrained seeds, on the ``benchmarks`` kept."""
    path, source = Path(part.file), Path(part.records)
    label = label_of(path, summary)
    per_seed = summary.get("per_seed")
    if per_seed is None:  # one model
        return [SavedRun(label, str(summary.get("model", path)),
                         _results(records, summary, benchmarks, source), (part,))]
    runs = []
    for seed in range(len(per_seed)):
        mine = records if len(per_seed) == 1 else [
            r for r in records if r.get("model") == f"seed {seed}"]
        if not mine:
            raise InputError(f"--results: {source} has no records of seed {seed} "
                             f"('model': 'seed {seed}') of the {len(per_seed)} in {path}")
        runs.append(SavedRun(label, f"{summary.get('model', path)}: seed {seed}",
                             _results(mine, summary, benchmarks, source), (part,)))
    return runs


def _joined(parts: Sequence[SavedPart], summaries: Sequence[dict[str, Any]],
            records: Sequence[list[dict[str, Any]]], benchmarks: Sequence[str]) -> SavedRun:
    """The one run whose parts these files are (``run_groups``): their records in the order
    given, SyntaxGym's region names of every part."""
    first = summaries[0]
    region_names = {suite: names for summary in summaries
                    for suite, names in summary.get("syntaxgym", {}).get("region_names",
                                                                         {}).items()}
    summary = {**first, "syntaxgym": {"region_names": region_names}}
    return SavedRun(label_of(parts[0].file, first), str(first.get("model", parts[0].file)),
                    _results([r for mine in records for r in mine], summary, benchmarks,
                             " + ".join(part.records for part in parts)), tuple(parts))


def _scored_with(summary: dict[str, Any]) -> dict[str, Any] | None:
    """What scored a file of one model: its provenance's model record less the name it was
    scored under, the paths of its files (their sha256 stay) and its search's ``BATCHING``;
    None for a config's seeds or a file without that record."""
    models = summary.get("provenance", {}).get("models")
    if summary.get("per_seed") is not None or not isinstance(models, list) or \
            len(models) != 1 or not isinstance(models[0], dict):
        return None
    scored = {key: value for key, value in models[0].items() if key != "name"}
    scored["files"] = [file.get("sha256") if isinstance(file, dict) else file
                       for file in scored.get("files") or []]
    if isinstance(scored.get("search"), dict):
        scored["search"] = {key: value for key, value in scored["search"].items()
                            if key not in BATCHING}
    return scored


def _units(records: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """(benchmark, unit) of every record: the units a part of a run scored."""
    return {(r["benchmark"], str(r.get(UNIT_FIELDS[r["benchmark"]]))) for r in records}


def run_groups(files: Sequence[str], labels: Sequence[str],
               summaries: Sequence[dict[str, Any]],
               records: Sequence[list[dict[str, Any]]]) -> list[list[int]]:
    """The files of each run, by index, in the order of their first file: under one label,
    the files that the same weights and search (``_scored_with``) scored on units none of
    the others scored are the parts of one run; files that scored the same units are seeds,
    each its own run. Files of one model sharing some units but not all, and parts scored
    with other settings, are one-line errors."""
    scored = [_scored_with(summary) for summary in summaries]
    grouped: dict[Any, list[int]] = {}
    for index, (label, model) in enumerate(zip(labels, scored)):
        key = index if model is None else (label, json.dumps(model["files"]))
        grouped.setdefault(key, []).append(index)
    runs: list[list[int]] = []
    for members in grouped.values():
        units = [_units(records[index]) for index in members]
        if all(mine == units[0] for mine in units):
            runs.extend([index] for index in members)
            continue
        for (i, mine), (j, theirs) in combinations(zip(members, units), 2):
            if mine & theirs:
                benchmark, unit = min(mine & theirs)
                raise InputError(f"--results: {files[i]} and {files[j]} both scored {benchmark} "
                                 f"{unit!r} of one model under {labels[i]!r}; seeds score the "
                                 "same items, the parts of a run each its own")
        first = scored[members[0]] or {}
        for index in members[1:]:
            other = scored[index] or {}
            if other != first:
                differs = next(key for key in sorted(first.keys() | other.keys())
                               if first.get(key) != other.get(key))
                raise InputError(f"--results: {files[index]} and {files[members[0]]}, parts of "
                                 f"one run under {labels[index]!r}, were scored with other "
                                 f"{differs!r}; the parts of a run are scored alike")
        runs.append(members)
    return sorted(runs)


@dataclass(frozen=True)
class SavedTable:
    """The files of one table read back: each run's ``labels`` and its ``files``' runs (a
    config's seeds, or one run of one file or of several parts), the ``benchmarks`` kept,
    and the ``subset`` and ``eos`` choice they were all scored with."""

    files: list[list[SavedRun]]
    labels: list[str]
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


def read_all(files: Sequence[str], chosen: Sequence[str] | None = None,
             labels: Sequence[str] | None = None) -> SavedTable:
    """Each file's runs on the ``chosen`` benchmarks (``kept_benchmarks``), the files
    checked alike (``check_alike``), under ``labels`` (one a file; default the label each
    was scored under), the parts of a run joined (``run_groups``)."""
    summaries = [_summary(Path(file)) for file in files]
    check_alike(files, summaries)
    keep = kept_benchmarks(files, summaries, chosen)
    labels = list(labels or [label_of(file, summary) for file, summary in zip(files, summaries)])
    read = [_read_part(file, summary) for file, summary in zip(files, summaries)]
    groups = run_groups(files, labels, summaries, [records for _, records in read])
    runs = [_runs(read[group[0]][0], summaries[group[0]], read[group[0]][1], keep)
            if len(group) == 1 else
            [_joined([read[i][0] for i in group], [summaries[i] for i in group],
                     [read[i][1] for i in group], keep)] for group in groups]
    return SavedTable(runs, [labels[group[0]] for group in groups], keep,
                      summaries[0].get("subset"), summaries[0].get("eos"))
