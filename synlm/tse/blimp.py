"""BLiMP, the Benchmark of Linguistic Minimal Pairs (Warstadt et al. 2020, TACL).

BLiMP has 67 paradigms (``UID``) of 1,000 generated minimal pairs each, grouped into 12
phenomena. The paper's headline method compares whole sentences: a pair is right when the
model gives the acceptable sentence the higher total log-probability (``evaluate_pairs``).

Aggregation follows the paper (and the per-paradigm results the authors publish in
``raw_results/summary/models_summary.jsonl``, ``read_published``): a paradigm's accuracy is
over its pairs, a phenomenon's accuracy is the unweighted mean of its paradigms' accuracies
and the overall accuracy the unweighted mean over the paradigms (``paper_average``), not a
pooled count. The two ``animate_subject_*`` paradigms say ``s-selection`` in their files; the
paper counts them under ``argument_structure`` (``PHENOMENON_ALIASES``).

The data is the repository's ``BLiMP.zip`` (CC-BY 4.0), read without unpacking from
``$SYNLM_DATA_DIR/blimp/BLiMP.zip``, or a folder of ``<UID>.jsonl`` files.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from synlm.data.files import CorpusError, RemoteFile, default_data_dir, truncated
from synlm.errors import InputError, not_utf8, utf8_text
from synlm.runtime.usage import did_you_mean
from synlm.tse.minimal_pairs import (
    DIGITS,
    MinimalPair,
    group_by,
    missing_file,
    summarize,
)
from synlm.tse.shapes import is_kind, shown, typed

FOLDER = "blimp"
_URL = ("https://raw.githubusercontent.com/alexwarstadt/blimp/"
        "3e56b06fcabca9b30822fc66435fca6b1aa40bb1/")
#: The 67 paradigms, as the repository archives them (``data/<UID>.jsonl``).
BLIMP_ZIP = RemoteFile("BLiMP.zip", _URL + "BLiMP.zip",
                       "172a1a714d72e72a89e8384dd531483f3d0f8a9aee3d33dccaf7992d8cecbb73")
#: The paper's per-paradigm accuracies (the README's errata say to cite these).
MODELS_SUMMARY = RemoteFile(
    "models_summary.jsonl", _URL + "raw_results/summary/models_summary.jsonl",
    "d54b1b361559eec9182f89930d5012af89d1a35d8e2ff435637b3166e2e3037a")
#: The models of ``models_summary.jsonl``: 5-gram, LSTM, Transformer-XL, GPT-2.
PUBLISHED_MODELS = ("ngram", "lstm", "txl", "gpt2")
#: ``linguistics_term`` values the paper files under another phenomenon.
PHENOMENON_ALIASES = {"s-selection": "argument_structure"}

_FIELDS = ("sentence_good", "sentence_bad", "UID", "linguistics_term", "pairID")
_PARADIGM = re.compile(r"(?:^|/)([^/.][^/]*)\.jsonl$")


def data_file(remote: RemoteFile, data_dir: str | Path | None = None,
              download: bool = False) -> Path:
    """``data_dir/blimp/<name>`` (``data_dir``: ``$SYNLM_DATA_DIR``); fetched and checked when
    missing and ``download``, else a one-line ``CorpusError``."""
    path = (Path(data_dir) if data_dir else default_data_dir()) / FOLDER / remote.name
    if path.exists():
        return path
    if download:
        return remote.fetch(path)
    raise missing_file("BLiMP", path, f"{FOLDER}/{remote.name}", remote.url)


def phenomenon(linguistics_term: str) -> str:
    """The paper's phenomenon of a paradigm whose files say ``linguistics_term``."""
    return PHENOMENON_ALIASES.get(linguistics_term, linguistics_term)


def read_blimp(path: str | Path | None = None, data_dir: str | Path | None = None,
               subset: int | None = None, download: bool = False,
               paradigms: Sequence[str] | None = None) -> list[MinimalPair]:
    """BLiMP's pairs, paradigm by paradigm (sorted by ``UID``), each in file order.

    Args:
        path: ``BLiMP.zip`` or a folder of ``<UID>.jsonl``; by default
            ``data_dir/blimp/BLiMP.zip``.
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).
        subset: keep the first ``subset`` pairs of each paradigm (a quick run).
        download: fetch ``BLiMP.zip`` when it is missing.
        paradigms: these paradigms only (their ``UID``s; default all): a run split into
            parts, or one phenomenon's paradigms; a name the data lacks is a one-line error.

    A pair's ``ids`` are ``UID``, ``phenomenon`` (``phenomenon(linguistics_term)``) and
    ``pairID``.
    """
    if subset is not None and subset < 1:
        raise InputError(f"subset must be at least 1, got {subset}")
    path = _source(path, data_dir, download)
    pairs: list[MinimalPair] = []
    for where, uid, text in _chosen(_paradigm_texts(path), paradigms, path):
        pairs.extend(_paradigm_pairs(where, uid, text)[:subset])
    return pairs


def paradigm_uids(path: str | Path | None = None, data_dir: str | Path | None = None
                  ) -> list[str]:
    """The ``UID`` of each BLiMP paradigm, sorted (what ``paradigms`` takes): of ``path``
    (``BLiMP.zip`` or a folder of ``<UID>.jsonl``), by default ``data_dir/blimp/BLiMP.zip``."""
    return [uid for _, uid, _ in _paradigm_texts(_source(path, data_dir))]


def _source(path: str | Path | None, data_dir: str | Path | None,
            download: bool = False) -> Path:
    """``path``, or ``data_dir/blimp/BLiMP.zip`` (``data_file``); a missing one is a
    one-line ``CorpusError``."""
    path = Path(path) if path is not None else data_file(BLIMP_ZIP, data_dir, download)
    if not path.exists():
        raise CorpusError(f"BLiMP: missing {path}; expected BLiMP.zip or a folder of "
                          f"<UID>.jsonl files")
    return path


def _chosen(texts: list[tuple[str, str, str]], paradigms: Sequence[str] | None,
            path: Path) -> list[tuple[str, str, str]]:
    """The paradigm files of ``texts`` (``_paradigm_texts``') that ``paradigms`` names (all
    when None); an unknown name is a one-line error with the nearest ``UID``."""
    if paradigms is None:
        return texts
    uids = [uid for _, uid, _ in texts]
    unknown = [name for name in paradigms if name not in uids]
    if unknown:
        raise InputError(f"unknown BLiMP paradigm {unknown[0]!r}"
                         f"{did_you_mean(unknown[0], uids)} (expected the UID of "
                         f"one of the {len(uids)} in {path}, e.g. {uids[0]})")
    return [text for text in texts if text[1] in paradigms]


def read_pairs(path: str | Path, subset: int | None = None) -> list[MinimalPair]:
    """A researcher's own minimal pairs in BLiMP's JSON-lines form, from any path: one object
    a line with ``sentence_good`` and ``sentence_bad``; ``UID`` (default: the file's stem),
    ``linguistics_term`` (default: the ``UID``) and ``pairID`` (default: the line number)
    are optional (strings; ``pairID`` may be a whole number). Pairs are grouped by ``UID`` as
    BLiMP's paradigms are (``subset``: the first pairs of each); a bad line is a one-line
    error naming file, line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise CorpusError(f"{path}: cannot read pairs ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise not_utf8(str(path), path.read_bytes(), err, CorpusError) from None
    pairs: dict[str, list[MinimalPair]] = {}
    for number, item in json_lines(str(path), text):
        item = _typed_item(f"{path}:{number}", item, {"UID": path.stem, "pairID": number},
                           optional=("linguistics_term",))
        uid = item["UID"]
        ids = {"UID": uid, "phenomenon": phenomenon(item.get("linguistics_term", uid)),
               "pairID": item["pairID"]}
        pairs.setdefault(uid, []).append(
            MinimalPair(ids, item["sentence_good"], (item["sentence_bad"],)))
    if not pairs:
        raise CorpusError(f"{path}: no pairs")
    return [pair for uid in sorted(pairs) for pair in pairs[uid][:subset]]


def _paradigm_texts(path: Path) -> list[tuple[str, str, str]]:
    """(where, UID, text) of every ``<UID>.jsonl`` in the zip or folder, sorted by UID."""
    found: list[tuple[str, str, str]] = []
    if path.is_dir():
        for file in sorted(path.glob("*.jsonl")):
            found.append((str(file), file.stem,
                          utf8_text(file.read_bytes(), str(file), CorpusError)))
    else:
        try:
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    match = _PARADIGM.search(name)
                    if match and not name.startswith("__MACOSX/"):
                        text = utf8_text(archive.read(name), f"{path}:{name}", CorpusError)
                        found.append((f"{path}:{name}", match.group(1), text))
        except (zipfile.BadZipFile, EOFError, zlib.error):
            raise truncated(path) from None
    if not found:
        raise CorpusError(f"BLiMP: {path} holds no <UID>.jsonl paradigm files")
    return sorted(found, key=lambda item: item[1])


def json_lines(where: str, text: str) -> Iterator[tuple[int, Any]]:
    """(line number, object) of each non-blank line; a bad line is a one-line error."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{where}:{number}: not JSON ({err.msg})") from None


def _typed_item(where: str, item: Any, defaults: Mapping[str, str | int],
                optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A line's pair (``where``: file and line): an object whose ``_FIELDS`` are strings
    (``pairID`` a string or a whole number); ``defaults`` stand for missing ones, those
    ``optional`` may be missing."""
    item = {**defaults, **typed(item, "an object", where, CorpusError)}
    for name in _FIELDS:
        pair_id = name == "pairID"
        if name not in item and name not in optional:
            raise CorpusError(f"{where}: no {name!r} (a string)")
        if name in item and not (is_kind(item[name], "a string")
                                 or (pair_id and is_kind(item[name], "a whole number"))):
            raise CorpusError(f"{where}: {name!r} is {shown(item[name])}; expected a string"
                              f"{' or a whole number' if pair_id else ''}")
    return item


def _paradigm_pairs(where: str, uid: str, text: str) -> list[MinimalPair]:
    pairs = []
    for number, item in json_lines(where, text):
        item = _typed_item(f"{where}:{number}", item, {})
        if item["UID"] != uid:
            raise CorpusError(f"{where}:{number}: UID {item['UID']!r} in the file of {uid!r}")
        ids = {"UID": uid, "phenomenon": phenomenon(item["linguistics_term"]),
               "pairID": item["pairID"]}
        pairs.append(MinimalPair(ids, item["sentence_good"], (item["sentence_bad"],)))
    return pairs


def paper_average(per_paradigm: Mapping[str, float | None],
                  phenomenon_of: Mapping[str, str]) -> tuple[float | None, dict[str, float | None]]:
    """The paper's aggregates of per-paradigm numbers: the unweighted mean over the paradigms,
    and for each phenomenon the unweighted mean over its paradigms (None values are left out;
    None when nothing is left). Unrounded."""
    groups: dict[str, list[float]] = {}
    for uid, value in per_paradigm.items():
        groups.setdefault(phenomenon_of[uid], [])
        if value is not None:
            groups[phenomenon_of[uid]].append(value)
    values = [value for value in per_paradigm.values() if value is not None]
    return (fmean(values) if values else None,
            {name: fmean(group) if group else None for name, group in groups.items()})


def summarize_blimp(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``paradigms``: ``summarize`` of each paradigm; ``phenomena`` and ``overall``: the
    paper's averages (``paper_average``) of the paradigms' ``accuracy``,
    ``in_vocabulary_accuracy`` (over the paradigms that have in-vocabulary pairs) and
    ``unknown_share``, with the numbers of paradigms and pairs behind them (a paradigm
    whose every pair has no parse, ``no_parse_pairs``, is left out of the averages)."""
    paradigms = {uid: summarize(group) for uid, group in group_by(records, _uid).items()}
    phenomenon_of = {record["UID"]: record["phenomenon"] for record in records}
    averages = {measure: paper_average(values, phenomenon_of)
                for measure, values in _paradigm_measures(paradigms).items()}
    members: dict[str, list[dict[str, Any]]] = {}
    for uid, summary in paradigms.items():
        members.setdefault(phenomenon_of[uid], []).append(summary)
    return {
        "overall": _averaged({m: overall for m, (overall, _) in averages.items()},
                             list(paradigms.values())),
        "phenomena": {name: _averaged({m: by[name] for m, (_, by) in averages.items()}, group)
                      for name, group in sorted(members.items())},
        "paradigms": paradigms,
    }


def _paradigm_measures(paradigms: Mapping[str, Mapping[str, Any]]
                       ) -> dict[str, dict[str, float | None]]:
    """Each paradigm's accuracy, in-vocabulary accuracy and unknown share, unrounded."""
    return {
        "accuracy": {u: s["correct"] / s["pairs"] if s["pairs"] else None
                     for u, s in paradigms.items()},
        "in_vocabulary_accuracy": {
            u: s["in_vocabulary_correct"] / s["in_vocabulary_pairs"]
            if s["in_vocabulary_pairs"] else None for u, s in paradigms.items()},
        "unknown_share": {u: 1 - s["in_vocabulary_pairs"] / s["pairs"] if s["pairs"] else None
                          for u, s in paradigms.items()},
    }


def _averaged(values: Mapping[str, float | None],
              summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Averaged measures, rounded, with the counts of the paradigms they average."""
    return {**{m: None if v is None else round(v, DIGITS) for m, v in values.items()},
            "paradigms": len(summaries),
            "pairs": sum(s["pairs"] for s in summaries),
            "in_vocabulary_pairs": sum(s["in_vocabulary_pairs"] for s in summaries),
            "same_words_pairs": sum(s["same_words_pairs"] for s in summaries),
            "no_parse_pairs": sum(s["no_parse_pairs"] for s in summaries)}


def _uid(record: Mapping[str, Any]) -> str:
    return record["UID"]


@dataclass(frozen=True)
class PublishedBlimp:
    """The paper's results (``models_summary.jsonl``), fractions in [0, 1], by model
    (``PUBLISHED_MODELS``): each paradigm's accuracy, and the phenomenon and overall
    averages as the file reports them."""

    paradigm_accuracy: dict[str, dict[str, float]]
    phenomenon_of: dict[str, str]
    phenomenon_accuracy: dict[str, dict[str, float]]
    overall_accuracy: dict[str, float]


def read_published(path: str | Path | None = None, data_dir: str | Path | None = None,
                   download: bool = False) -> PublishedBlimp:
    """Read ``models_summary.jsonl`` (by default ``data_dir/blimp/models_summary.jsonl``,
    fetched when missing and ``download``). Its rows are the 67 paradigms, then one row per
    phenomenon and one overall, both with ``UID`` ``overall``."""
    path = Path(path) if path else data_file(MODELS_SUMMARY, data_dir, download)
    if not path.is_file():
        raise CorpusError(f"BLiMP: missing {path}, the paper's models_summary.jsonl")
    paradigms: dict[str, dict[str, float]] = {m: {} for m in PUBLISHED_MODELS}
    phenomena: dict[str, dict[str, float]] = {m: {} for m in PUBLISHED_MODELS}
    overall: dict[str, float] = {}
    phenomenon_of: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
            uid, term = row["UID"], row["linguistics_term"]
            scores = {m: float(row[m]) for m in PUBLISHED_MODELS}
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise CorpusError(f"{path}:{number}: not a models_summary row ({err})") from None
        if uid != "overall":
            phenomenon_of[uid] = term
        for model, score in scores.items():
            if uid != "overall":
                paradigms[model][uid] = score
            elif term == "overall":
                overall[model] = score
            else:
                phenomena[model][term] = score
    return PublishedBlimp(paradigms, phenomenon_of, phenomena, overall)
