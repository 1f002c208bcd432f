"""Minimal-pair benchmarks: BLiMP (Warstadt et al. 2020) and Marvin & Linzen (2018).

A unigram scorer with a hand-set table stands in for a model, so every accuracy below is
computed by hand; the readers are checked on the staged data (``$SYNLM_DATA_DIR``).
"""

from __future__ import annotations

import json
import pickle
import string
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import pytest

from staged import staged
from synlm.data.files import CorpusError, RemoteFile, git_blob_of
from synlm.errors import InputError
from synlm.tse import blimp, marvin_linzen
from synlm.tse.minimal_pairs import (
    MinimalPair,
    differing_words,
    evaluate_pairs,
    summarize,
)
from synlm.tse.scores import ScoredSentence


def blimp_zip() -> Path:
    return staged("blimp", "BLiMP.zip")


def ml_jsonl() -> Path:
    return staged("marvin_linzen", "marvin_linzen.jsonl.gz")


UNKNOWN = -20.0
EOS = -1.0  # counted only with eos=True
TABLE = {"the": -1.0, "author": -5.0, "authors": -6.0, "laughs": -3.0, "laugh": -4.0,
         "smiles": -2.0, "smile": -2.0, "swims": -3.0, "no": -4.0, "most": -5.0, "few": -6.0,
         "have": -2.0, "ever": -3.0, "been": -2.0, "popular": -7.0}


class UnigramScorer:
    """A ``Scorer``: each word's log-probability from ``TABLE``; a word outside it is
    unknown and gets ``UNKNOWN``; every sentence ends with ``EOS``."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, ...]]] = []

    def words(self, text: str) -> list[str]:
        return text.lower().translate(str.maketrans("", "", string.punctuation)).split()

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        self.calls.append([tuple(s) for s in sentences])
        out = []
        for words in sentences:
            probs = tuple(TABLE.get(w, UNKNOWN) for w in words)
            unknown = tuple(w not in TABLE for w in words)
            tokens = tuple("<unk>" if u else w for w, u in zip(words, unknown))
            out.append(ScoredSentence(tuple(words), probs, unknown, EOS, tokens, probs))
        return out


def pair(name: str, good: str, *bad: str) -> MinimalPair:
    return MinimalPair({"name": name}, good, tuple(bad))


NPI = "authors have ever been popular"
HAND_PAIRS = [
    pair("agree", "The author laughs.", "The author laugh."),  # -10 > -11: right
    pair("tie", "the author smiles", "the author smile"),  # -9 = -9: wrong
    pair("npi-one-beaten", f"no {NPI}", f"the {NPI}", f"most {NPI}"),  # beats most only
    pair("npi-both-beaten", f"no {NPI}", f"most {NPI}", f"few {NPI}"),  # right
    pair("unknown-differs", "the author swims", "the author swim"),  # right, swim unknown
    pair("unknown-shared", "Zelda laughs!", "Zelda laugh!"),  # right, zelda aligned
    pair("same-words", "the author laughs", "the author laugh"),  # = agree, new text
    pair("punctuation", "The author laughs.", "The author laughs!"),  # one word list: a tie
]


def test_differing_words_align_both_sides() -> None:
    assert differing_words(["the", "author", "laughs"], ["the", "author", "laugh"]) \
        == ["laughs", "laugh"]
    assert differing_words(["a", "b", "c"], ["a", "c"]) == ["b"]
    good = ["no", "authors", "that", "the", "guards", "like"]
    bad = ["the", "authors", "that", "no", "guards", "like"]
    assert differing_words(good, bad) == ["no", "the", "the", "no"]
    assert differing_words(good, good) == []


def test_hand_made_pairs_scored_once_and_judged_strictly() -> None:
    scorer = UnigramScorer()
    records = evaluate_pairs(HAND_PAIRS, scorer)
    by_name = {r["name"]: r for r in records}
    assert [r["name"] for r in records] == [p.ids["name"] for p in HAND_PAIRS]
    # the words' log-probabilities, no end of sentence (the reference scorers' sums)
    assert by_name["agree"]["good_log_prob"] == -9.0
    assert by_name["agree"]["bad_log_probs"] == [-10.0]
    assert by_name["agree"]["differing_words"] == ["laughs", "laugh"]
    assert by_name["tie"]["good_log_prob"] == by_name["tie"]["bad_log_probs"][0] == -8.0
    assert by_name["npi-one-beaten"]["good_log_prob"] == -24.0
    assert by_name["npi-one-beaten"]["bad_log_probs"] == [-21.0, -25.0]
    assert by_name["npi-one-beaten"]["differing_words"] == ["no", "the", "most"]
    assert {n: r["correct"] for n, r in by_name.items()} == {
        "agree": True, "tie": False, "npi-one-beaten": False, "npi-both-beaten": True,
        "unknown-differs": True, "unknown-shared": True, "same-words": True,
        "punctuation": False}
    assert [n for n, r in by_name.items() if r["unknown"]] == ["unknown-differs"]
    assert [n for n, r in by_name.items() if r["same_words"]] == ["punctuation"]
    # One score call; each distinct word list once: 2 + 2 + 3 + 1 + 2 + 2 + 0 + 0 = 12.
    assert len(scorer.calls) == 1
    assert len(scorer.calls[0]) == len(set(scorer.calls[0])) == 12
    assert ("the", "author", "laughs") in scorer.calls[0]
    assert summarize(records) == {
        "accuracy": round(5 / 8, 4), "in_vocabulary_accuracy": round(4 / 7, 4),
        "unknown_share": round(1 / 8, 4), "pairs": 8, "correct": 5,
        "in_vocabulary_pairs": 7, "in_vocabulary_correct": 4, "same_words_pairs": 1,
        "no_parse_pairs": 0}


def test_eos_adds_the_end_and_no_known_pair_gives_none() -> None:
    records = evaluate_pairs(HAND_PAIRS[4:5], UnigramScorer(), eos=True)
    assert records[0]["good_log_prob"] == -10.0 and records[0]["bad_log_probs"] == [-27.0]
    summary = summarize(records)
    assert summary["accuracy"] == 1.0
    assert summary["in_vocabulary_accuracy"] is None
    assert summary["unknown_share"] == 1.0


def blimp_record(uid: str, phenomenon: str, correct: bool, unknown: bool = False) -> dict:
    return {"UID": uid, "phenomenon": phenomenon, "correct": correct, "unknown": unknown}


def test_blimp_summary_averages_paradigms_as_the_paper_does() -> None:
    records = ([blimp_record("a", "x", True)] * 2
               + [blimp_record("b", "x", True)] + [blimp_record("b", "x", False)] * 3
               + [blimp_record("c", "y", True, unknown=True)])
    summary = blimp.summarize_blimp(records)
    # Paradigms a = 1, b = 1/4, c = 1: their mean 0.75, not the pooled 4/7.
    assert summary["overall"] == {"accuracy": 0.75, "in_vocabulary_accuracy": 0.625,
                                  "unknown_share": 0.3333, "paradigms": 3, "pairs": 7,
                                  "in_vocabulary_pairs": 6, "same_words_pairs": 0,
                                  "no_parse_pairs": 0}
    assert summary["phenomena"]["x"]["accuracy"] == 0.625  # pooled would be 0.5
    assert summary["phenomena"]["y"]["in_vocabulary_accuracy"] is None
    assert summary["paradigms"]["b"]["accuracy"] == 0.25


def test_blimp_folder_reader_subset_and_end_to_end(tmp_path: Path) -> None:
    def line(uid: str, number: int, good: str, bad: str) -> str:
        return json.dumps({"sentence_good": good, "sentence_bad": bad, "field": "morphology",
                           "linguistics_term": "s-selection", "UID": uid,
                           "pairID": str(number)}) + "\n"
    (tmp_path / "p1.jsonl").write_text(
        line("p1", 0, "The author laughs.", "The author laugh.")
        + line("p1", 1, "The author smiles.", "The author smile."))
    (tmp_path / "p2.jsonl").write_text(line("p2", 0, "The author swims.", "The author swim."))
    pairs = blimp.read_blimp(tmp_path)
    assert [(p.ids["UID"], p.ids["pairID"]) for p in pairs] == [("p1", "0"), ("p1", "1"),
                                                                ("p2", "0")]
    assert {p.ids["phenomenon"] for p in pairs} == {"argument_structure"}
    assert len(blimp.read_blimp(tmp_path, subset=1)) == 2
    assert [p.ids["UID"] for p in blimp.read_blimp(tmp_path, paradigms=["p2"])] == ["p2"]
    with pytest.raises(InputError, match=r"unknown BLiMP paradigm 'p22'; did you mean p2\? "
                                         r"\(expected the UID of one of the 2 in .*, e\.g\. p1\)"):
        blimp.read_blimp(tmp_path, paradigms=["p2", "p22"])
    records = evaluate_pairs(blimp.read_blimp(tmp_path), UnigramScorer())
    summary = blimp.summarize_blimp(records)
    assert [r["correct"] for r in records] == [True, False, True]
    assert summary["paradigms"]["p1"]["accuracy"] == 0.5
    assert summary["overall"]["accuracy"] == 0.75  # mean of 0.5 and 1
    assert summary["overall"]["in_vocabulary_accuracy"] == 0.5  # p2 has no known pair
    (tmp_path / "p3.jsonl").write_text(line("other", 0, "a", "b"))
    with pytest.raises(CorpusError, match="p3.jsonl:1: UID 'other'"):
        blimp.read_blimp(tmp_path)


@pytest.fixture(scope="module")
def blimp_pairs() -> list[MinimalPair]:
    return blimp.read_blimp(blimp_zip())


@pytest.fixture(scope="module")
def published() -> blimp.PublishedBlimp:
    return blimp.read_published(staged("blimp", "models_summary.jsonl"))


def test_blimp_zip_has_67_paradigms_of_1000_pairs(blimp_pairs, published) -> None:
    counts = Counter(p.ids["UID"] for p in blimp_pairs)
    assert len(counts) == 67 and set(counts.values()) == {1000}
    assert all(len(p.bad) == 1 for p in blimp_pairs)
    phenomenon_of = {p.ids["UID"]: p.ids["phenomenon"] for p in blimp_pairs}
    assert len(set(phenomenon_of.values())) == 12
    assert phenomenon_of == published.phenomenon_of
    assert len(blimp.read_blimp(blimp_zip(), subset=3)) == 201


def test_paper_average_reproduces_the_published_means(published) -> None:
    overall = {}
    for model in blimp.PUBLISHED_MODELS:
        mean, phenomena = blimp.paper_average(published.paradigm_accuracy[model],
                                              published.phenomenon_of)
        overall[model] = round(100 * mean, 1)
        assert mean == pytest.approx(published.overall_accuracy[model], abs=1e-9)
        assert phenomena == pytest.approx(published.phenomenon_accuracy[model], abs=1e-9)
    assert overall == {"ngram": 61.2, "lstm": 69.8, "txl": 69.6, "gpt2": 83.0}


@pytest.fixture(scope="module")
def ml_pairs() -> list[MinimalPair]:
    return marvin_linzen.read_marvin_linzen(ml_jsonl())


def test_marvin_linzen_has_22_templates_and_163124_items(ml_pairs) -> None:
    assert len(ml_pairs) == 163_124
    templates = Counter(p.ids["template"] for p in ml_pairs)
    table1 = [t for _, _, names in marvin_linzen.TABLE1 for t in names]
    assert set(templates) == set(table1) == set(marvin_linzen.TEMPLATES)
    assert len(table1) == len(set(table1)) == 22
    assert templates["reflexives_across"] == 22_400 and templates["simple_agrmt"] == 140
    assert len({(p.ids["template"], p.ids["case"]) for p in ml_pairs}) == 72
    assert {len(p.bad) for p in ml_pairs if "npi" in p.ids["template"]} == {2}
    assert {len(p.bad) for p in ml_pairs if "npi" not in p.ids["template"]} == {1}
    assert sum("npi" in p.ids["template"] for p in ml_pairs) == 120 + 144 + 4800 + 5760
    assert len(marvin_linzen.read_marvin_linzen(ml_jsonl(), subset=2)) == 144


def test_marvin_linzen_table1_pools_pairs() -> None:
    records = ([{"template": "prep_anim", "case": "s", "correct": True, "unknown": False}]
               + [{"template": "prep_inanim", "case": c, "correct": False, "unknown": False}
                  for c in ("s", "s", "p")])
    summary = marvin_linzen.summarize_marvin_linzen(records)
    row = summary["table1"]["Subject-verb agreement"]["Across a prepositional phrase"]
    assert row["accuracy"] == 0.25 and row["pairs"] == 4  # not the templates' mean, 0.5
    assert list(summary["table1"]) == ["Subject-verb agreement"]
    assert summary["templates"]["prep_anim"]["accuracy"] == 1.0
    assert summary["cases"]["prep_inanim"]["s"]["pairs"] == 2


def npi_record(template: str, good: float, intrusive: float, ungrammatical: float,
               unknown: bool = False) -> dict:
    return {"template": template, "case": "past", "good_log_prob": good,
            "bad_log_probs": [intrusive, ungrammatical],
            "correct": good > max(intrusive, ungrammatical), "unknown": unknown}


def test_marvin_linzen_npi_rows_report_the_three_pairwise_accuracies() -> None:
    """As the released ``analyze_results.py``: grammatical > intrusive, grammatical >
    ungrammatical, intrusive > ungrammatical, each pooled over the row's templates and
    cases; beating both is synlm's own summary."""
    records = [npi_record("simple_npi_anim", -10, -12, -11),   # g > i, g > u, i < u
               npi_record("simple_npi_inanim", -10, -9, -11),  # g < i, g > u, i > u
               npi_record("simple_npi_inanim", -10, -10, -13, unknown=True),  # tie g = i
               npi_record("npi_across_anim", -5, -6, -7)]      # all three
    summary = marvin_linzen.summarize_marvin_linzen(marvin_linzen.with_npi_comparisons(records))
    simple = summary["table1"]["Negative polarity items"]["Simple"]
    assert {k: simple[k] for k in marvin_linzen.NPI_COMPARISONS} == {
        "grammatical_gt_intrusive": round(1 / 3, 4), "grammatical_gt_ungrammatical": 1.0,
        "intrusive_gt_ungrammatical": round(2 / 3, 4)}
    assert simple["pairs"] == 3 and simple["in_vocabulary_pairs"] == 2
    assert simple["in_vocabulary"] == {"grammatical_gt_intrusive": 0.5,
                                       "grammatical_gt_ungrammatical": 1.0,
                                       "intrusive_gt_ungrammatical": 0.5}
    assert simple["synlm_beats_both"]["accuracy"] == round(1 / 3, 4)
    assert "accuracy" not in simple  # no unnamed "beats both" figure in the row
    across = summary["table1"]["Negative polarity items"]["Across a relative clause"]
    assert across["intrusive_gt_ungrammatical"] == 1.0

def test_converter_reads_plain_pickles(tmp_path: Path) -> None:
    npi = {"past": [("no x ever", "the x ever", "most x ever")]}
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        assert marvin_linzen.records_from_pickle(pickle.dumps(npi, protocol),
                                                 "simple_npi_anim") == [
            {"template": "simple_npi_anim", "case": "past", "index": 0, "good": "no x ever",
             "bad": ["the x ever", "most x ever"]}]
    for name in marvin_linzen.TEMPLATES:
        item = ("g", "b1", "b2") if name in marvin_linzen.NPI_TEMPLATES else ("g", "b")
        (tmp_path / f"{name}.pickle").write_bytes(pickle.dumps({"c": [item, item]}, 0))
    pairs = marvin_linzen.read_marvin_linzen(tmp_path)
    assert len(pairs) == 44
    assert pairs[1].ids == {"template": "long_vp_coord", "case": "c", "index": 1}
    with pytest.raises(CorpusError, match="expected 2 or 3 sentences"):
        marvin_linzen.records_from_pickle(pickle.dumps({"c": [("only one",)]}), "vp_coord")


class _Eval:
    def __reduce__(self):
        return (eval, ("1 + 1",))


@pytest.mark.parametrize(("payload", "refused"), [
    (Fraction(1, 2), "fractions.Fraction"), (_Eval(), "builtins.eval")])
def test_unpickler_refuses_every_class(payload: object, refused: str) -> None:
    data = pickle.dumps({"c": [payload]})
    with pytest.raises(CorpusError, match=f"refused to load {refused}"):
        marvin_linzen.unpickle_plain(data)


@pytest.mark.parametrize(("read", "where"), [
    (blimp.read_blimp, "blimp/BLiMP.zip"),
    (blimp.read_published, "blimp/models_summary.jsonl"),
    (marvin_linzen.read_marvin_linzen, "marvin_linzen/marvin_linzen.jsonl.gz")])
def test_missing_file_is_one_line_naming_the_fix(read, where, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path))
    with pytest.raises(CorpusError) as error:
        read()
    message = str(error.value)
    assert "\n" not in message
    assert str(tmp_path / where) in message
    assert "SYNLM_DATA_DIR" in message and "--download" in message


def test_download_fetches_and_checks(tmp_path, monkeypatch) -> None:
    """``download=True`` through ``RemoteFile`` (file URLs: no network in tests)."""
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path / "data"))
    remote = blimp.BLIMP_ZIP
    monkeypatch.setattr(blimp, "BLIMP_ZIP",
                        RemoteFile(remote.name, blimp_zip().as_uri(), remote.sha256))
    assert len(blimp.read_blimp(subset=1, download=True)) == 67  # the pinned sha256 holds
    assert (tmp_path / "data" / "blimp" / "BLiMP.zip").exists()
    source = tmp_path / "source"
    source.mkdir()
    remotes = {}
    for name in marvin_linzen.TEMPLATES:
        item = ("g", "b1", "b2") if name in marvin_linzen.NPI_TEMPLATES else ("g", "b")
        file = source / f"{name}.pickle"
        file.write_bytes(pickle.dumps({"c": [item]}, 0))
        remotes[name] = RemoteFile(file.name, file.as_uri(), git_blob=git_blob_of(file))
    monkeypatch.setattr(marvin_linzen, "TEMPLATES", remotes)
    assert len(marvin_linzen.read_marvin_linzen(download=True)) == 22
    assert (tmp_path / "data" / "marvin_linzen" / "templates" / "vp_coord.pickle").exists()
