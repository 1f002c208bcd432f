"""Every malformed file a command reads is one line from it (``synlm <command>: ...``, exit
code 2), naming the file, the line or record where there is one, and what was expected, never
a traceback: the ``--results`` files of ``synlm evaluate-syntax`` (the JSON and its records),
its ``--pairs`` files, BLiMP's and Marvin & Linzen's data files, SyntaxGym suites, the
treebank ``synlm parse --treebank`` scores, and the rnng-pytorch checkpoints ``synlm
convert`` reads. One case a test id: (what is changed, the
start of the line expected)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from test_convert import FIXTURES, released_checkpoint
from test_evaluate_syntax import blimp_line, toy_data, unigram_model
from test_export_hf import save_checkpoint

from conftest import run_cli

SCORE = "synlm evaluate-syntax: "


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A unigram checkpoint, the toy data, and its evaluation on the three benchmarks as
    ``--results`` reads it: the printed JSON and the records it wrote."""
    root = tmp_path_factory.mktemp("malformed")
    data = toy_data(root / "data")
    ckpt = save_checkpoint(unigram_model(), root / "unigram.ckpt")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert run_cli(["evaluate-syntax", "--ckpt_path", str(ckpt), "--data-dir", str(data),
                        "--benchmark", "blimp", "syntaxgym", "marvin_linzen", "--suites",
                        "number_src", "--output", str(root / "good.jsonl")]) == 0
    summary = json.loads(printed.getvalue().strip().splitlines()[-1])
    records = [json.loads(line) for line in (root / "good.jsonl").read_text().splitlines()]
    return {"ckpt": ckpt, "data": data, "summary": summary, "records": records}


def one_line(args: list[str], capsys: pytest.CaptureFixture, start: str) -> None:
    """``synlm args`` exits with 2 and says one line on stderr, starting with ``start``."""
    capsys.readouterr()
    assert run_cli(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(start), err


def _first(benchmark: str, test: Callable[[dict], bool] = lambda r: True
           ) -> Callable[[list[dict]], None]:
    """An edit of the records: ``change`` applied to the first record of ``benchmark``."""

    def edit(change: Callable[[dict], Any]) -> Callable[[list[dict]], None]:
        def apply(records: list[dict]) -> None:
            change(next(r for r in records if r["benchmark"] == benchmark and test(r)))

        return apply

    return edit


_BLIMP, _GYM = _first("blimp"), _first("syntaxgym")
_NPI = _first("marvin_linzen", lambda r: "npi" in r["template"])

#: (id, the change to the printed JSON, the line expected after ``--results: {json}: ``).
SUMMARY_CASES = [
    ("per_seed_a_number", {"per_seed": 5}, "'per_seed' is 5; expected a list"),
    ("per_seed_empty", {"per_seed": []}, "'per_seed' is []; expected one headline a seed"),
    ("per_seed_of_numbers", {"per_seed": [5]}, "per_seed[0] is 5; expected an object"),
    ("headline_a_list", {"headline": [1]}, "'headline' is [1]; expected an object"),
    ("headline_text", {"headline": {"blimp/accuracy": "high"}},
     'headline["blimp/accuracy"] is "high"; expected a number or null'),
    ("benchmarks_a_string", {"benchmarks": "blimp"}, "'benchmarks' is \"blimp\"; expected a list"),
    ("benchmarks_missing", {"benchmarks": None}, "no 'benchmarks' (a list)"),
    ("benchmark_unknown", {"benchmarks": ["blimp", "cola"]},
     "benchmarks[1] is \"cola\"; expected one of blimp, syntaxgym, marvin_linzen, pairs"),
    ("subset_text", {"subset": "3"}, "'subset' is \"3\"; expected a whole number"),
    ("eos_text", {"eos": "yes"}, "'eos' is \"yes\"; expected true or false"),
    ("output_a_number", {"output": 5}, "'output' is 5; expected a string"),
    ("label_a_number", {"label": 5}, "'label' is 5; expected a string"),
    ("summary_a_list", {"blimp": [1]}, "'blimp' is [1]; expected an object"),
    ("convention_text", {"conventions": {"blimp": "none"}},
     "'conventions.blimp' is \"none\"; expected an object"),
    ("provenance_a_list", {"provenance": []}, "'provenance' is []; expected an object"),
]

#: (id, the change to the records, the line expected after ``--results: {jsonl}:``).
RECORD_CASES = [
    ("record_without_uid", _BLIMP(lambda r: r.pop("UID")), "1: blimp record: no 'UID' (a string)"),
    ("uid_a_number", _BLIMP(lambda r: r.update(UID=5)),
     "1: blimp record: 'UID' is 5; expected a string"),
    ("correct_text", _BLIMP(lambda r: r.update(correct="yes")),
     "1: blimp record: 'correct' is \"yes\"; expected true or false"),
    ("unknown_missing", _BLIMP(lambda r: r.pop("unknown")),
     "1: blimp record: no 'unknown' (true or false)"),
    ("no_benchmark", _BLIMP(lambda r: r.pop("benchmark")), "1: no 'benchmark' (a string)"),
    ("record_of_an_unknown_benchmark", _BLIMP(lambda r: r.update(benchmark="cola")),
     "1: a record of \"cola\"; expected one of blimp, pairs, syntaxgym, marvin_linzen"),
    ("item_text", _GYM(lambda r: r.update(item="1")),
     "6: syntaxgym record: 'item' is \"1\"; expected a whole number"),
    ("surprisals_a_list", _GYM(lambda r: r.update(surprisals=[1])),
     "6: syntaxgym record: 'surprisals' is [1]; expected an object"),
    ("surprisal_text", _GYM(lambda r: r["surprisals"]["match"].update({"2": "x"})),
     "6: syntaxgym record: surprisals[\"match\"][\"2\"] is \"x\"; expected a number"),
    ("region_not_a_number", _GYM(lambda r: r["surprisals"]["match"].update(verb=1.0)),
     "6: syntaxgym record: surprisals[\"match\"][\"verb\"] is 1.0; expected a number under"),
    ("predictions_missing", _GYM(lambda r: r.pop("predictions")),
     "6: syntaxgym record: no 'predictions' (a list)"),
    ("template_unknown", _first("marvin_linzen")(lambda r: r.update(template="agreement")),
     "8: marvin_linzen record: 'template' is \"agreement\"; expected one of the 22"),
    ("case_a_number", _first("marvin_linzen")(lambda r: r.update(case=1)),
     "8: marvin_linzen record: 'case' is 1; expected a string"),
    ("npi_comparison_missing", _NPI(lambda r: r.pop("grammatical_gt_intrusive")),
     "10: marvin_linzen record: no 'grammatical_gt_intrusive' (true or false)"),
]


def saved_files(folder: Path, evaluation: dict[str, Any], summary: dict[str, Any],
                records: bytes) -> Path:
    """The printed JSON (changed by ``summary``; a None value drops the key) and its records,
    written to ``folder``; the JSON's path."""
    (folder / "bad.jsonl").write_bytes(records)
    changed = {**evaluation["summary"], "output": str(folder / "bad.jsonl"), **summary}
    (folder / "bad.json").write_text(json.dumps({k: v for k, v in changed.items()
                                                 if v is not None}))
    return folder / "bad.json"


def _lines(records: list[dict]) -> bytes:
    return "\n".join(json.dumps(record) for record in records).encode()


@pytest.mark.parametrize(("change", "start"), [c[1:] for c in SUMMARY_CASES],
                         ids=[c[0] for c in SUMMARY_CASES])
def test_a_results_json_of_another_shape_is_one_line(evaluation, tmp_path, capsys, change,
                                                       start):
    path = saved_files(tmp_path, evaluation, change, _lines(evaluation["records"]))
    one_line(["evaluate-syntax", "--results", str(path)], capsys,
             f"{SCORE}--results: {path}: {start}")


@pytest.mark.parametrize(("edit", "start"), [c[1:] for c in RECORD_CASES],
                         ids=[c[0] for c in RECORD_CASES])
def test_a_results_record_of_another_shape_is_one_line(evaluation, tmp_path, capsys, edit,
                                                         start):
    records = json.loads(json.dumps(evaluation["records"]))
    edit(records)
    path = saved_files(tmp_path, evaluation, {}, _lines(records))
    one_line(["evaluate-syntax", "--results", str(path)], capsys,
             f"{SCORE}--results: {tmp_path / 'bad.jsonl'}:{start}")


@pytest.mark.parametrize(("records", "start"), [
    (lambda good: good + b"\n\xff\xfe", "12: not UTF-8 (byte 0xff)"),
    (lambda good: b"[1]\n" + good, "1 is [1]; expected an object"),
    (lambda good: good + b"\n{", "12: not JSON"),
], ids=["not_utf8", "a_list", "not_json"])
def test_records_that_are_not_json_objects_are_one_line(evaluation, tmp_path, capsys, records,
                                                        start):
    path = saved_files(tmp_path, evaluation, {}, records(_lines(evaluation["records"]) + b"\n"))
    one_line(["evaluate-syntax", "--results", str(path)], capsys,
             f"{SCORE}--results: {tmp_path / 'bad.jsonl'}:{start}")


def test_a_multi_model_json_without_a_count_is_one_line(evaluation, tmp_path, capsys):
    path = saved_files(tmp_path, evaluation, {"models": 5}, b"")
    one_line(["evaluate-syntax", "--results", str(path)], capsys,
             f"{SCORE}--results: {path} holds several models' results")


def test_the_unchanged_files_make_their_tables(evaluation, tmp_path, capsys):
    """The cases above fail for their change alone."""
    path = saved_files(tmp_path, evaluation, {}, _lines(evaluation["records"]))
    assert run_cli(["evaluate-syntax", "--results", str(path)]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------------ --pairs files

_PAIR = {"sentence_good": "The cat sleeps.", "sentence_bad": "The cat sleep."}

#: (id, the file's bytes, the line expected after ``{file}``).
PAIRS_CASES = [
    ("not_json", b"{", ":1: not JSON"),
    ("a_list", b"[1]", ":1 is [1]; expected an object"),
    ("a_number", b"5", ":1 is 5; expected an object"),
    ("no_bad", json.dumps({"sentence_good": "a"}).encode(), ":1: no 'sentence_bad' (a string)"),
    ("good_a_number", json.dumps({**_PAIR, "sentence_good": 5}).encode(),
     ":1: 'sentence_good' is 5; expected a string"),
    ("uid_a_list", json.dumps({**_PAIR, "UID": ["a"]}).encode(),
     ":1: 'UID' is [\"a\"]; expected a string"),
    ("pair_id_a_float", json.dumps({**_PAIR, "pairID": 1.5}).encode(),
     ":1: 'pairID' is 1.5; expected a string or a whole number"),
    ("term_a_number", json.dumps({**_PAIR, "linguistics_term": 5}).encode(),
     ":1: 'linguistics_term' is 5; expected a string"),
    ("not_utf8", json.dumps(_PAIR).encode() + b"\n\xff", ":2: not UTF-8 (byte 0xff)"),
    ("empty", b"\n", ": no pairs"),
]


@pytest.mark.parametrize(("content", "start"), [c[1:] for c in PAIRS_CASES],
                         ids=[c[0] for c in PAIRS_CASES])
def test_a_pairs_file_of_another_shape_is_one_line(evaluation, tmp_path, capsys, content,
                                                   start):
    path = tmp_path / "mine.jsonl"
    path.write_bytes(content)
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--pairs", str(path)],
             capsys, f"{SCORE}{path}{start}")


# ------------------------------------------------------------- BLiMP, Marvin & Linzen

_BLIMP_ITEM = json.loads(blimp_line("toy", "agreement", 0, "The cat sleeps.",
                                    "The cat sleep."))

#: (id, the paradigm file's bytes in BLiMP.zip, the line expected after ``{zip}:data/toy.jsonl``).
BLIMP_CASES = [
    ("a_number", b"5", ":1 is 5; expected an object"),
    ("no_pair_id", json.dumps({k: v for k, v in _BLIMP_ITEM.items() if k != "pairID"}).encode(),
     ":1: no 'pairID' (a string)"),
    ("good_a_list", json.dumps({**_BLIMP_ITEM, "sentence_good": ["a"]}).encode(),
     ":1: 'sentence_good' is [\"a\"]; expected a string"),
    ("other_uid", json.dumps({**_BLIMP_ITEM, "UID": "other"}).encode(),
     ":1: UID 'other' in the file of 'toy'"),
    ("not_utf8", b"\xff", ":1: not UTF-8 (byte 0xff)"),
    ("not_json", b"{", ":1: not JSON"),
]


@pytest.mark.parametrize(("content", "start"), [c[1:] for c in BLIMP_CASES],
                         ids=[c[0] for c in BLIMP_CASES])
def test_a_blimp_file_of_another_shape_is_one_line(evaluation, tmp_path, capsys, content, start):
    archive = tmp_path / "blimp" / "BLiMP.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("data/toy.jsonl", content)
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--data-dir",
              str(tmp_path), "--benchmark", "blimp"], capsys,
             f"{SCORE}{archive}:data/toy.jsonl{start}")


_ML_ITEM = {"template": "simple_agrmt", "case": "sing_MS_MV", "index": 0,
            "good": "the cat sleeps", "bad": "the cat sleep"}

#: (id, the record on line 1 of marvin_linzen.jsonl.gz (or its bytes), the line expected
#: after ``{file}``).
MARVIN_LINZEN_CASES = [
    ("a_list", [1], ":1 is [1]; expected an object"),
    ("no_bad", {k: v for k, v in _ML_ITEM.items() if k != "bad"},
     ":1: no 'bad' (a string or a list of strings)"),
    ("bad_a_number", {**_ML_ITEM, "bad": 5},
     ":1: 'bad' is 5; expected a string or a list of strings"),
    ("bad_holds_a_number", {**_ML_ITEM, "bad": ["a", 5]},
     ":1: 'bad' is [\"a\", 5]; expected a string or a list of strings"),
    ("template_a_list", {**_ML_ITEM, "template": ["simple_agrmt"]},
     ":1: 'template' is [\"simple_agrmt\"]; expected a string"),
    ("template_unknown", {**_ML_ITEM, "template": "agreement"},
     ":1: 'template' is \"agreement\"; expected one of the 22 templates"),
    ("index_text", {**_ML_ITEM, "index": "0"}, ":1: 'index' is \"0\"; expected a whole number"),
    ("case_a_list", {**_ML_ITEM, "case": ["x"]}, ":1: 'case' is [\"x\"]; expected a string"),
    ("not_utf8", b"\xff\n", ":1: not UTF-8 (byte 0xff); expected UTF-8 text"),
    ("not_utf8_on_line_2", json.dumps(_ML_ITEM).encode() + b"\n\"caf\xe9\"\n",
     ":2: not UTF-8 (byte 0xe9); expected UTF-8 text"),
    ("not_json", b"{\n", ":1: not JSON"),
    ("two_bad_for_agreement", {**_ML_ITEM, "bad": ["a", "b"]},
     ": item 1: simple_agrmt wants a sentence and 1 ungrammatical one(s)"),
]


@pytest.mark.parametrize(("record", "start"), [c[1:] for c in MARVIN_LINZEN_CASES],
                         ids=[c[0] for c in MARVIN_LINZEN_CASES])
def test_a_marvin_linzen_file_of_another_shape_is_one_line(evaluation, tmp_path, capsys,
                                                           record, start):
    path = tmp_path / "marvin_linzen" / "marvin_linzen.jsonl.gz"
    path.parent.mkdir()
    with gzip.open(path, "wb") as out:
        out.write(record if isinstance(record, bytes) else json.dumps(record).encode() + b"\n")
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--data-dir",
              str(tmp_path), "--benchmark", "marvin-linzen"], capsys, f"{SCORE}{path}{start}")


#: (id, the bytes of vp_coord.pickle among the 22, the line expected after ``{file}: ``).
PICKLE_CASES = [
    ("a_list", pickle.dumps([("a", "b")]), "a list, expected a dict of cases"),
    ("case_a_dict", pickle.dumps({"c": {"a": "b"}}),
     "case \"c\" holds a dict, expected a case name and a list of items"),
    ("four_sentences", pickle.dumps({"c": [("a", "b", "c", "d")]}),
     "c[0] is [\"a\", \"b\", \"c\", \"d\"], expected 2 or 3 sentences"),
    ("a_number_for_a_sentence", pickle.dumps({"c": [("a", 5)]}),
     "c[0] is [\"a\", 5], expected 2 or 3 sentences"),
    ("a_class", pickle.dumps({"c": [Path("a")]}), "refused to load pathlib"),
    ("cut_short", pickle.dumps({"c": [("a", "b")]})[:-3], "pickle data was truncated"),
]


@pytest.mark.parametrize(("content", "start"), [c[1:] for c in PICKLE_CASES],
                         ids=[c[0] for c in PICKLE_CASES])
def test_a_marvin_linzen_pickle_of_another_shape_is_one_line(evaluation, tmp_path, capsys,
                                                             content, start):
    from synlm.tse.marvin_linzen import NPI_TEMPLATES, TEMPLATES

    folder = tmp_path / "marvin_linzen" / "templates"
    folder.mkdir(parents=True)
    for name in TEMPLATES:
        item = ("g", "b1", "b2") if name in NPI_TEMPLATES else ("g", "b")
        (folder / f"{name}.pickle").write_bytes(pickle.dumps({"c": [item]}))
    (folder / "vp_coord.pickle").write_bytes(content)
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--data-dir",
              str(tmp_path), "--benchmark", "marvin-linzen"], capsys,
             f"{SCORE}{folder / 'vp_coord.pickle'}: {start}")


# ------------------------------------------------------------------ parse --treebank

_TREE = b"(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)))\n"
_CONLLU_ROW = b"1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"

#: (id, the --treebank file's name and bytes, the line expected after ``synlm parse:
#: --treebank: {file}``), each said before the checkpoint is read.
TREEBANK_CASES = [
    ("empty", "t.mrg", b"\n  \n", ": nothing in it; expected bracketed trees"),
    ("not_utf8", "t.mrg", _TREE + b"(S (NN caf\xff))\n",
     ":2: not UTF-8 (byte 0xff); expected UTF-8 (or GB18030) text"),
    ("unclosed", "t.mrg", _TREE + b"(S (NP the cat)\n",
     ":2: expected ')' to close this bracket, found end of file"),
    ("words_not_brackets", "t.mrg", b"the cat sleeps\n", ":1: expected '(' before 'the'"),
    ("not_a_zip", "t.zip", b"PK", ": not a zip archive"),
    ("conllu_empty", "t.conllu", b"", ": nothing in it; expected CoNLL-U sentences"),
    ("conllu_not_utf8", "t.conllu", b"# text\n" + _CONLLU_ROW.replace(b"the", b"th\xe9", 1),
     ":2: not UTF-8 (byte 0xe9); expected UTF-8 text"),
    ("conllu_two_columns", "t.conllu", b"1\tthe\n", ":1: expected 10 tab-separated CoNLL-U"),
]


@pytest.mark.parametrize(("name", "content", "start"), [c[1:] for c in TREEBANK_CASES],
                         ids=[c[0] for c in TREEBANK_CASES])
def test_a_treebank_to_score_is_read_before_the_model(tmp_path, capsys, name, content, start):
    """The checkpoint is an empty file: any attempt to load it would fail otherwise."""
    (tmp_path / "model.ckpt").write_bytes(b"")
    path = tmp_path / name
    path.write_bytes(content)
    one_line(["parse", "--ckpt_path", str(tmp_path / "model.ckpt"), "--treebank", str(path)],
             capsys, f"synlm parse: --treebank: {path}{start}")


# ------------------------------------------------------------------------------ suites


def _suite_edit(change: Callable[[dict], Any]) -> Callable[[dict], dict]:
    def apply(suite: dict) -> dict:
        change(suite)
        return suite

    return apply


#: (id, the change to the toy suite, the line expected after ``{file}: ``).
SUITE_CASES = [
    ("a_list", lambda s: [1], "top level: expected dict, found [1]"),
    ("name_a_number", _suite_edit(lambda s: s["meta"].update(name=5)),
     "meta.name: expected str, found 5"),
    ("prediction_a_number", _suite_edit(lambda s: s.update(predictions=[5])),
     "number_src: predictions[0]: expected an object, found 5"),
    ("formula_cut_short",
     _suite_edit(lambda s: s["predictions"][0].update(formula="(2;%match%) <")),
     "number_src: predictions[0], column "),
    ("region_number_text", _suite_edit(
        lambda s: s["items"][0]["conditions"][0]["regions"][0].update(region_number="1")),
     "items[0].conditions[0].regions[0].region_number: expected int, found \"1\""),
    ("content_a_number", _suite_edit(
        lambda s: s["items"][0]["conditions"][0]["regions"][1].update(content=5)),
     "items[0].conditions[0].regions[1].content: expected str, found 5"),
    ("no_items", _suite_edit(lambda s: s.update(items=[])),
     "expected at least one item, found none"),
    ("region_meta_keys", _suite_edit(lambda s: s.update(region_meta={"verb": "x"})),
     "region_meta: expected region numbers as keys"),
    ("missing_region", _suite_edit(
        lambda s: s["items"][1]["conditions"][1]["regions"].pop(1)),
     "predictions[0] reads region 2 of condition 'mismatch', which item 2 lacks"),
]


@pytest.mark.parametrize(("change", "start"), [c[1:] for c in SUITE_CASES],
                         ids=[c[0] for c in SUITE_CASES])
def test_a_suite_of_another_shape_is_one_line(evaluation, tmp_path, capsys, change, start):
    suite = json.loads((evaluation["data"] / "syntaxgym" / "test_suites" /
                        "number_src.json").read_text())
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(change(suite)))
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--benchmark",
              "syntaxgym", "--suites", str(path)], capsys, f"{SCORE}{path}: {start}")


@pytest.mark.parametrize(("content", "start"), [(b"{", "not a JSON suite"),
                                                (b"\xff", "not a JSON suite")],
                         ids=["not_json", "not_utf8"])
def test_a_suite_that_is_not_json_is_one_line(evaluation, tmp_path, capsys, content, start):
    path = tmp_path / "mine.json"
    path.write_bytes(content)
    one_line(["evaluate-syntax", "--ckpt_path", str(evaluation["ckpt"]), "--benchmark",
              "syntaxgym", "--suites", str(path)], capsys, f"{SCORE}{path}: {start}")


# ----------------------------------------------------------- rnng-pytorch checkpoints


def _args(**changes: Any) -> Callable[[dict], None]:
    return lambda checkpoint: checkpoint["args"].update(changes)


def _i2a(value: Any) -> Callable[[dict], None]:
    return lambda checkpoint: setattr(checkpoint["action_dict"], "i2a", value)


def _action(value: Any) -> Callable[[dict], None]:
    return lambda checkpoint: checkpoint["action_dict"].i2a.__setitem__(3, value)


def _weight(value: Any) -> Callable[[dict], None]:
    return lambda checkpoint: checkpoint["model_state_dict"].update(
        {"rnng.output.1.bias": value})


#: (id, the change to a released train.py checkpoint, the line expected after ``{file}: ``).
CONVERT_CASES = [
    ("strategy_a_list", _args(strategy=["top_down"]),
     "args.strategy is ['top_down']; expected a string"),
    ("w_dim_text", _args(w_dim="abc"), "args.w_dim is 'abc'; expected a whole number >= 1"),
    ("h_dim_a_float", _args(h_dim=8.5), "args.h_dim is 8.5; expected a whole number >= 1"),
    ("num_layers_zero", _args(num_layers=0), "args.num_layers is 0; expected a whole number >= 1"),
    ("dropout_text", _args(dropout="x"), "args.dropout is 'x'; expected a number in [0, 1)"),
    ("seed_a_float", _args(seed=1.5), "args.seed is 1.5; expected a whole number"),
    ("sp_model_a_number", _args(sp_model=5), "args.sp_model is 5; expected a string or null"),
    ("composition_a_list", _args(composition=["lstm"]),
     "args.composition is ['lstm']; expected a string"),
    ("i2a_a_number", _i2a(5), "action_dict.i2a is a int; expected a list of strings"),
    ("action_a_number", _action(7), "action_dict.i2a holds 7; expected strings only"),
    ("action_twice", _action("SHIFT"), "action_dict.i2a holds 'SHIFT' twice"),
    ("prepro_args_a_list", lambda c: c.update(prepro_args=["lowercase"]),
     "prepro_args is a list; preprocess.py saves a dict of its flags"),
    ("i2w_a_number", lambda c: setattr(c["vocab"], "i2w", 3),
     "vocab.i2w is a int; expected a list of strings"),
    ("word_a_number", lambda c: c["vocab"].i2w.__setitem__(2, 4),
     "vocab.i2w holds 4; expected strings only"),
    ("unkmethod_a_list", lambda c: setattr(c["vocab"], "unkmethod", ["unk"]),
     "vocab.unkmethod is ['unk']; expected 'unk'"),
    ("weight_of_integers", _weight(torch.zeros(8, dtype=torch.long)),
     "model_state_dict['rnng.output.1.bias'] is a torch.int64; expected a floating-point"),
    ("weight_text", _weight("zeros"),
     "model_state_dict['rnng.output.1.bias'] is a str; expected a floating-point tensor"),
    ("args_a_list", lambda c: c.update(args=[1]), "args is a list; train.py saves a dict"),
    ("weights_a_list", lambda c: c.update(model_state_dict=[1]), "model_state_dict is a list"),
    ("weight_under_a_number", lambda c: c["model_state_dict"].update({3: torch.zeros(1)}),
     "model_state_dict has the key 3; expected parameter names"),
    ("vocab_a_dict", lambda c: c.update(vocab={"i2w": ["<pad>"]}),
     "vocab is a dict, not a pickled data.Vocabulary"),
    ("action_dict_a_string", lambda c: c.update(action_dict="top_down"),
     "action_dict is a str with actions []"),
]


@pytest.mark.parametrize(("edit", "start"), [c[1:] for c in CONVERT_CASES],
                         ids=[c[0] for c in CONVERT_CASES])
def test_a_released_checkpoint_of_another_shape_is_one_line(tmp_path, capsys, edit, start):
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)
    released = released_checkpoint(reference, tmp_path / "model.pt", "top_down", edit)
    one_line(["convert", "--from", "rnng-pytorch", str(released), "--out",
              str(tmp_path / "run")], capsys, f"synlm convert: {released}: {start}")
    assert not (tmp_path / "run").exists()


def test_the_unchanged_checkpoint_converts(tmp_path):
    """The cases above fail for their change alone."""
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)
    released = released_checkpoint(reference, tmp_path / "model.pt", "top_down")
    assert run_cli(["convert", "--from", "rnng-pytorch", str(released), "--out",
                    str(tmp_path / "run")]) == 0

