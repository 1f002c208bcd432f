"""The targeted syntactic evaluation of Marvin & Linzen (2018, EMNLP).

Sentences generated from 22 templates test subject-verb agreement, reflexive anaphora and
negative polarity items (NPIs). Each template holds cases (e.g. ``sing_MS_MV_plur_ES_EV``: a
singular main subject and verb across a plural embedded subject and verb; ``past`` and
``future`` for the NPIs), each a list of items. An agreement or reflexive item is a
grammatical sentence and one ungrammatical sentence; an NPI item is a grammatical sentence
(``no authors ... have ever ...``), an intrusive one (the licensor inside the relative clause:
``the authors that no guards like have ever ...``) and an ungrammatical one (``most`` for
``no``). The paper compares whole-sentence probabilities, the sums of the words'
log-probabilities with no end-of-sentence term (the released scorer, ``src/LM_eval.py``, skips
``<eos>``); so does ``evaluate_pairs`` by default (the released scripts also appended ``" ."``
to each sentence; the sentences here are as the templates have them, lowercased and
unpunctuated).

Summaries (``summarize_marvin_linzen``) give each template, each (template, case), and the
rows of the paper's Table 1 (``TABLE1``). A Table 1 row's accuracy is pooled over the pairs of
its templates and cases (correct pairs over all pairs), as the released analysis script
(``src/analyze_results.py``) does: it concatenates each case's items across the ``_anim`` and
``_inanim`` templates and counts correct items over all items of a construction. An NPI row
reports, as that script does, three pairwise accuracies pooled the same way
(``NPI_COMPARISONS``: grammatical > intrusive, grammatical > ungrammatical, intrusive >
ungrammatical); whether the grammatical sentence beats both (an item's ``correct``) is
synlm's own summary, kept under ``synlm_beats_both``.

The data: the 22 pickles of ``BeckyMarvin/LM_syneval`` (MIT licence), or the JSON-lines form
of them, ``$SYNLM_DATA_DIR/marvin_linzen/marvin_linzen.jsonl.gz`` (one record per item:
``template``, ``case``, ``index``, ``good``, ``bad``; ``bad`` a list of two for the NPIs).
Pickles are read with an unpickler that refuses every class (``unpickle_plain``).
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from synlm.data.files import CorpusError, RemoteFile, default_data_dir, truncated
from synlm.errors import InputError, utf8_text
from synlm.tse.minimal_pairs import (
    MinimalPair,
    fraction,
    group_by,
    is_unparsed,
    missing_file,
    summarize,
    summarize_by,
)
from synlm.tse.shapes import is_kind, shown, typed

FOLDER = "marvin_linzen"
JSONL = "marvin_linzen.jsonl.gz"
PICKLES = "templates"  # the folder under FOLDER that download fills
_URL = ("https://raw.githubusercontent.com/BeckyMarvin/LM_syneval/"
        "edb737877a02092807ac55e165d653108b8e1509/EMNLP2018/templates/")
_BLOBS = {
    "long_vp_coord": "277623d15fed590fc105e85538575ab91706774c",
    "npi_across_anim": "d573eb057d8426514499cf6e9bf853b23a005699",
    "npi_across_inanim": "d1308d8b1e38cc3e6d2f35b271c6f7129e86302e",
    "obj_rel_across_anim": "04506663d0ab03153113155c779f5b51f1c366ef",
    "obj_rel_across_inanim": "edb14861ca65906c560e6bf1e31cb45fa837be1d",
    "obj_rel_no_comp_across_anim": "8575332576a0a09308c0f58d4bd43a1b7178606a",
    "obj_rel_no_comp_across_inanim": "9f0aac2b642c336ccb9861bba67871fae756a577",
    "obj_rel_no_comp_within_anim": "1c78705a176b08ff4a6f30bec5a097607af2e024",
    "obj_rel_no_comp_within_inanim": "76595632d34d9d5a3102bc80f0794919064bc44b",
    "obj_rel_within_anim": "f9674d1a0357f7619e6b5d9ebe88ebcceff21f01",
    "obj_rel_within_inanim": "db162af1aa7e3510dffdf71c7e5796ca3435aae9",
    "prep_anim": "ca945eef4c110b73fde68eacec7815634811743b",
    "prep_inanim": "f2a377dd878696cef04fb4cd49041762d8a2b594",
    "reflexive_sent_comp": "7d83b688e6e95be05e880beabf74f5aa6f9fe627",
    "reflexives_across": "4b15a9b7ee9f40c489a87530014d898b83b24ef4",
    "sent_comp": "0ccbf1ec1fe2ef168321bf1919f801422cd65b98",
    "simple_agrmt": "0455922d6d5fc9b4685d4bb835a4d58bb6cd1966",
    "simple_npi_anim": "cfc2edc81b1b3ca84a73ccf6eb68597114031e73",
    "simple_npi_inanim": "851458ce67458a6c1b099ca4bbaa80c4b1b5331c",
    "simple_reflexives": "e3e65adf6f3ca4c83267301bd7ac7ccc41a99c8d",
    "subj_rel": "2a4cdb1a1da8e10c6c01532796fd200ca1903c80",
    "vp_coord": "849455f5832add815bac7017902b5f1155a79b1f",
}
#: The 22 template pickles at the pinned commit, checked by their git blob ids.
TEMPLATES = {name: RemoteFile(f"{name}.pickle", f"{_URL}{name}.pickle", git_blob=blob)
             for name, blob in _BLOBS.items()}
#: The templates whose items have two ungrammatical sentences.
NPI_TEMPLATES = frozenset(name for name in TEMPLATES if "npi" in name)
#: The three comparisons the released analysis reports for an NPI item, by their keys: which
#: sentence must be more probable than which (0 grammatical, 1 intrusive, 2 ungrammatical).
NPI_COMPARISONS: dict[str, tuple[int, int]] = {
    "grammatical_gt_intrusive": (0, 1),
    "grammatical_gt_ungrammatical": (0, 2),
    "intrusive_gt_ungrammatical": (1, 2),
}
#: The paper's Table 1: (section, row, the templates pooled in the row).
TABLE1: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Subject-verb agreement", "Simple", ("simple_agrmt",)),
    ("Subject-verb agreement", "In a sentential complement", ("sent_comp",)),
    ("Subject-verb agreement", "Short VP coordination", ("vp_coord",)),
    ("Subject-verb agreement", "Long VP coordination", ("long_vp_coord",)),
    ("Subject-verb agreement", "Across a prepositional phrase", ("prep_anim", "prep_inanim")),
    ("Subject-verb agreement", "Across a subject relative clause", ("subj_rel",)),
    ("Subject-verb agreement", "Across an object relative clause",
     ("obj_rel_across_anim", "obj_rel_across_inanim")),
    ("Subject-verb agreement", "Across an object relative (no that)",
     ("obj_rel_no_comp_across_anim", "obj_rel_no_comp_across_inanim")),
    ("Subject-verb agreement", "In an object relative clause",
     ("obj_rel_within_anim", "obj_rel_within_inanim")),
    ("Subject-verb agreement", "In an object relative (no that)",
     ("obj_rel_no_comp_within_anim", "obj_rel_no_comp_within_inanim")),
    ("Reflexive anaphora", "Simple", ("simple_reflexives",)),
    ("Reflexive anaphora", "In a sentential complement", ("reflexive_sent_comp",)),
    ("Reflexive anaphora", "Across a relative clause", ("reflexives_across",)),
    ("Negative polarity items", "Simple", ("simple_npi_anim", "simple_npi_inanim")),
    ("Negative polarity items", "Across a relative clause",
     ("npi_across_anim", "npi_across_inanim")),
)


class _NoClasses(pickle.Unpickler):
    """An unpickler that builds only plain data: every class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only dicts, lists, "
                                     f"tuples and strings are read")


def unpickle_plain(data: bytes, source: str = "pickle") -> Any:
    """The plain data (dicts, lists, tuples, strings, numbers) pickled in ``data``; a pickle
    that names any class or function, or a broken one, is a ``CorpusError``."""
    try:
        return _NoClasses(io.BytesIO(data), encoding="utf-8").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as err:  # what a malformed pickle raises
        raise CorpusError(f"{source}: {err}") from None


def records_from_pickle(data: bytes, template: str,
                        source: str | Path | None = None) -> list[dict[str, Any]]:
    """A template pickle (``{case: [(good, bad), ...]}``, or ``(good, bad, bad)`` items for the
    NPIs) as records: ``template``, ``case``, ``index``, ``good``, ``bad`` (a string, or a list
    of the two NPI alternatives). Errors name ``source`` (the file; by default the
    template)."""
    where = str(source or template)
    cases = unpickle_plain(data, where)
    if not isinstance(cases, dict):
        raise CorpusError(f"{where}: a {type(cases).__name__}, expected a dict of cases")
    records = []
    for case, items in cases.items():
        if not (isinstance(case, str) and isinstance(items, list)):
            raise CorpusError(f"{where}: case {shown(case)} holds a {type(items).__name__}, "
                              f"expected a case name and a list of items")
        for index, item in enumerate(items):
            if not (isinstance(item, tuple | list) and len(item) in (2, 3)
                    and all(isinstance(s, str) for s in item)):
                raise CorpusError(f"{where}: {case}[{index}] is {shown(item)}, expected "
                                  f"2 or 3 sentences")
            bad = item[1] if len(item) == 2 else list(item[1:])
            records.append({"template": template, "case": case, "index": index,
                            "good": item[0], "bad": bad})
    return records


def read_marvin_linzen(path: str | Path | None = None, data_dir: str | Path | None = None,
                       subset: int | None = None, download: bool = False
                       ) -> list[MinimalPair]:
    """The items of every template and case, in the data's order.

    Args:
        path: ``marvin_linzen.jsonl.gz`` (or ``.jsonl``), or a folder of the 22
            ``<template>.pickle`` files; by default ``data_dir/marvin_linzen/`` with
            ``marvin_linzen.jsonl.gz`` in it, else its ``templates/`` folder of pickles.
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).
        subset: keep the first ``subset`` items of each (template, case) (a quick run).
        download: fetch the 22 pickles into ``data_dir/marvin_linzen/templates/`` when
            neither form is there.

    A pair's ``ids`` are ``template``, ``case`` and ``index``.
    """
    if subset is not None and subset < 1:
        raise InputError(f"subset must be at least 1, got {subset}")
    path = Path(path) if path else default_source(data_dir, download)
    if path.is_dir():
        records = _pickle_records(path)
    elif path.exists():
        records = _jsonl_records(path)
    else:
        raise CorpusError(f"Marvin & Linzen: missing {path}; expected {JSONL} or a folder of "
                          f"the 22 template pickles")
    return [_pair(record, f"{path}: item {number}")
            for number, record in enumerate(_first(records, subset), start=1)]


def default_source(data_dir: str | Path | None, download: bool) -> Path:
    """Marvin & Linzen's data under ``data_dir``: the JSON lines file, else the folder of
    the 22 pickles (fetched first with ``download``); missing: a one-line ``CorpusError``."""
    folder = (Path(data_dir) if data_dir else default_data_dir()) / FOLDER
    pickles = folder / PICKLES
    if (folder / JSONL).exists():
        return folder / JSONL
    if all((pickles / remote.name).exists() for remote in TEMPLATES.values()):
        return pickles
    if download:
        for remote in TEMPLATES.values():
            if not (pickles / remote.name).exists():
                remote.fetch(pickles / remote.name)
        return pickles
    raise missing_file("Marvin & Linzen", folder / JSONL,
                       f"{FOLDER}/{JSONL} (or {FOLDER}/{PICKLES}/<template>.pickle)", _URL)


def _pickle_records(folder: Path) -> list[dict[str, Any]]:
    records = []
    for name, remote in TEMPLATES.items():
        file = folder / remote.name
        if not file.exists():
            raise CorpusError(f"Marvin & Linzen: missing {file} (one of the 22 templates)")
        records.extend(records_from_pickle(file.read_bytes(), name, file))
    return records


def _jsonl_records(path: Path) -> list[dict[str, Any]]:
    """The typed records of a JSON-lines file (gzipped when it ends in ``.gz``); a bad
    line, a byte that is not UTF-8 or a cut archive is one ``CorpusError`` naming where."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as file:
            data = file.read()
    except (EOFError, gzip.BadGzipFile, zlib.error):
        raise truncated(path) from None
    except OSError as err:
        raise CorpusError(f"{path}: {err}") from None
    text = utf8_text(data, str(path), CorpusError)
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{path}:{number}: not JSON ({err.msg})") from None
            records.append(_typed_record(f"{path}:{number}", record))
    return records


#: The fields of a JSON-lines record and the kind of each (``bad``: a string or a list).
_FIELDS = {"template": "a string", "case": "a string", "index": "a whole number",
           "good": "a string", "bad": "a string or a list of strings"}


def _typed_record(where: str, record: Any) -> dict[str, Any]:
    """A JSON line's record (``where``: file and line): an object with ``_FIELDS`` of their
    kinds and a template of the 22."""
    typed(record, "an object", where, CorpusError)
    for name, kind in _FIELDS.items():
        if name not in record:
            raise CorpusError(f"{where}: no {name!r} ({kind})")
        value = record[name]
        fits = (is_kind(value, "a string") or (is_kind(value, "a list")
                and all(is_kind(s, "a string") for s in value))) if name == "bad" \
            else is_kind(value, kind)
        if not fits:
            raise CorpusError(f"{where}: {name!r} is {shown(value)}; expected {kind}")
    if record["template"] not in TEMPLATES:
        raise CorpusError(f"{where}: 'template' is {shown(record['template'])}; expected one "
                          "of the 22 templates")
    return record


def _first(records: list[dict[str, Any]], subset: int | None) -> list[dict[str, Any]]:
    if subset is None:
        return records
    seen: dict[tuple[str, str], int] = {}
    kept = []
    for record in records:
        key = (record.get("template"), record.get("case"))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= subset:
            kept.append(record)
    return kept


def _pair(record: Mapping[str, Any], where: str) -> MinimalPair:
    """A record as a pair; its template must be one of the 22 and its ``bad`` fit it."""
    try:
        template, case, index, good, bad = (record[k] for k in
                                            ("template", "case", "index", "good", "bad"))
    except KeyError as err:
        raise CorpusError(f"{where}: no {err}") from None
    if template not in TEMPLATES:
        raise CorpusError(f"{where}: unknown template {template!r}")
    bad = (bad,) if isinstance(bad, str) else tuple(bad)
    want = 2 if template in NPI_TEMPLATES else 1
    if len(bad) != want or not all(isinstance(s, str) for s in (good, *bad)):
        raise CorpusError(f"{where}: {template} wants a sentence and {want} ungrammatical "
                          f"one(s), got {good!r} and {list(bad)!r}")
    return MinimalPair({"template": template, "case": case, "index": index}, good, bad)


def with_npi_comparisons(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records, each NPI item's with its three pairwise outcomes (``NPI_COMPARISONS``,
    True when the first sentence's log-probability is strictly greater; none for an item
    without a parse)."""
    out = []
    for record in records:
        record = dict(record)
        if record["template"] in NPI_TEMPLATES and not is_unparsed(record):
            log_probs = (record["good_log_prob"], *record["bad_log_probs"])
            record.update({key: log_probs[a] > log_probs[b]
                           for key, (a, b) in NPI_COMPARISONS.items()})
        out.append(record)
    return out


def summarize_npi(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An NPI row as the released analysis reports it: each pairwise accuracy of
    ``NPI_COMPARISONS`` pooled over the items (and over the in-vocabulary items, with their
    count), the unknown share, and synlm's "beats both" summary (``summarize``); items
    without a parse are left out, counted in ``no_parse_pairs``."""
    both = summarize(records)
    records = [r for r in records if not is_unparsed(r)]
    known = [r for r in records if not r["unknown"]]
    return {
        **{key: fraction(sum(r[key] for r in records), len(records)) for key in NPI_COMPARISONS},
        "pairs": len(records),
        "unknown_share": both["unknown_share"],
        "in_vocabulary": {key: fraction(sum(r[key] for r in known), len(known))
                          for key in NPI_COMPARISONS},
        "in_vocabulary_pairs": len(known),
        "same_words_pairs": both["same_words_pairs"],
        "no_parse_pairs": both["no_parse_pairs"],
        "synlm_beats_both": both,
    }


def summarize_marvin_linzen(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``table1``: {section: {row: pooled summary}} over the templates present (a row with
    none is left out): ``summarize`` (pooled over pairs) for agreement and reflexives,
    ``summarize_npi`` for the NPI rows (its records as ``with_npi_comparisons`` gives
    them); ``templates``: each template pooled over its cases; ``cases``: {template: {case:
    summary}} (``summarize``)."""
    by_template = group_by(records, _template)
    table: dict[str, dict[str, Any]] = {}
    for section, row, templates in TABLE1:
        pooled = [r for name in templates for r in by_template.get(name, [])]
        if pooled:
            npi = all(name in NPI_TEMPLATES for name in templates)
            table.setdefault(section, {})[row] = (summarize_npi if npi else summarize)(pooled)
    return {
        "table1": table,
        "templates": {name: summarize(group) for name, group in by_template.items()},
        "cases": {name: summarize_by(group, _case) for name, group in by_template.items()},
    }


def _template(record: Mapping[str, Any]) -> str:
    return record["template"]


def _case(record: Mapping[str, Any]) -> str:
    return record["case"]
