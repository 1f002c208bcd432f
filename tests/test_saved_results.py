"""``synlm evaluate-syntax --results``: the tables of finished evaluations, each scored by its
own command, equal the tables of one command that scores them all; a config's untrained
seeds come back as seeds; a file that cannot be read back, or a flag that would score, is a
one-line error (``synlm.tse.saved``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_evaluate_syntax import toy_data, unigram_model
from test_export_hf import save_checkpoint

from conftest import local_gpt2, run_cli, tiny_palm_config

BENCHMARKS = ["--benchmark", "blimp", "syntaxgym", "--suites", "number_src"]


def evaluate(capsys: pytest.CaptureFixture, *args: str) -> tuple[dict, str]:
    assert run_cli(["evaluate-syntax", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


def saved(capsys: pytest.CaptureFixture, folder: Path, name: str, *args: str) -> Path:
    """One model scored alone with --output; its printed JSON saved as ``name.json``."""
    out, _ = evaluate(capsys, *args, "--output", str(folder / f"{name}.jsonl"))
    path = folder / f"{name}.json"
    path.write_text(json.dumps(out))
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A unigram checkpoint and a local GPT-2, each scored on the toy benchmarks."""
    root = tmp_path_factory.mktemp("saved")
    return {"root": root, "data": toy_data(root / "data"),
            "ckpt": save_checkpoint(unigram_model(), root / "unigram.ckpt"),
            "gpt2": local_gpt2()}


def test_tables_from_saved_evaluations_equal_the_tables_of_one_command(capsys, scored):
    """Three models scored in three commands (the checkpoint twice: two seeds of one label),
    then tabled with --results: the same headline and unit tables (Markdown and LaTeX), the
    same per-label JSON entries and paired tests as one command scoring all three; the
    report's provenance names each file with its sha256 and the provenance it was scored
    with."""
    root, ckpt, gpt2 = scored["root"], str(scored["ckpt"]), str(scored["gpt2"])
    common = ["--data-dir", str(scored["data"]), *BENCHMARKS]
    files = [saved(capsys, root, "u1", "--ckpt_path", ckpt, *common),
             saved(capsys, root, "gpt2", "--hf", gpt2, *common),
             saved(capsys, root, "u2", "--ckpt_path", ckpt, *common)]
    labels = ["--label", "unigram", "GPT-2", "unigram"]
    one, _ = evaluate(capsys, "--ckpt_path", ckpt, "--hf", gpt2, "--ckpt_path", ckpt, *labels,
                      "--report", str(root / "one"), "--units", "paradigm", "suite", *common)
    again, err = evaluate(capsys, "--results", *map(str, files), *labels,
                          "--report", str(root / "again"), "--units", "paradigm", "suite")
    for table in ("headline.md", "headline.tex", "unit.md", "unit.csv"):
        again_text = (root / "again" / table).read_text()  # labelled by its folder
        assert again_text.replace(r"\label{tab:again-", r"\label{tab:one-") == \
            (root / "one" / table).read_text()
    assert "| unigram (2 seeds) | GPT-2 |" in (root / "again" / "headline.md").read_text()
    assert again["models"] == one["models"]
    assert again["report"]["paired"] == one["report"]["paired"]
    assert again["benchmarks"] == one["benchmarks"] and again["subset"] == one["subset"]
    assert "unigram" in err and "GPT-2" in err  # the stderr table
    record = json.loads((root / "again" / "provenance.json").read_text())
    assert [r["label"] for r in record["results"]] == ["unigram", "GPT-2", "unigram"]
    first = record["results"][0]
    assert first["file"]["path"] == str(files[0].resolve()) and len(first["file"]["sha256"]) == 64
    assert first["records"]["path"] == str((root / "u1.jsonl").resolve())
    assert first["scored"]["models"][0]["files"][0]["path"] == str(Path(ckpt).resolve())
    # a folder moved whole: the records are found beside their JSON
    moved = root / "moved"
    moved.mkdir()
    for name in ("u1.json", "u1.jsonl"):
        shutil.copy(root / name, moved / name)
    (root / "u1.jsonl").rename(root / "u1.jsonl.away")
    try:
        alone, _ = evaluate(capsys, "--results", str(moved / "u1.json"), "--benchmark", "blimp")
    finally:
        (root / "u1.jsonl.away").rename(root / "u1.jsonl")
    assert alone["label"] == "unigram" and alone["benchmarks"] == ["blimp"]
    assert alone["headline"] == {k: v for k, v in one["models"]["unigram"]["per_seed"][0].items()
                                 if k.startswith("blimp/")}


def test_a_configs_untrained_seeds_come_back_as_seeds(capsys, scored, tmp_path):
    """``--config C --seeds 2`` saved: two runs under its label, whose mean and spread are
    those the scoring command printed."""
    root = scored["root"]
    common = ["--data-dir", str(scored["data"]), *BENCHMARKS]
    config = saved(capsys, tmp_path, "untrained", "--config", str(tiny_palm_config(tmp_path)),
                   "--seeds", "2", *common)
    model = saved(capsys, tmp_path, "unigram", "--ckpt_path", str(scored["ckpt"]), *common)
    printed = json.loads(config.read_text())
    out, _ = evaluate(capsys, "--results", str(model), str(config), "--report",
                      str(root / "config"))
    chance = out["models"][printed["label"]]
    assert len(chance["models"]) == 2 and chance["headline"] == printed["headline"]
    assert chance["per_seed"] == printed["per_seed"]
    assert f"{printed['label']} (2 seeds)" in (root / "config" / "headline.md").read_text()


def test_the_parts_of_a_run_join_into_the_whole_run(capsys, scored, tmp_path):
    """One checkpoint scored in two parts (BLiMP's paradigms and SyntaxGym's suites divided
    between them with --paradigms and --suites): --results joins them into one run whose
    JSON equals that of the run scoring both at once, and whose provenance names each part;
    a part that scores a unit another part scored, and parts scored otherwise, are one-line
    errors."""
    data, ckpt = scored["data"], str(scored["ckpt"])
    suite = data / "syntaxgym" / "test_suites" / "number_src.json"
    mine = tmp_path / "my_suite.json"
    mine.write_text(suite.read_text().replace('"number_src"', '"my_suite"'))
    common = ["--ckpt_path", ckpt, "--data-dir", str(data), "--benchmark", "blimp", "syntaxgym"]
    whole = saved(capsys, tmp_path, "whole", *common, "--suites", "number_src", str(mine))
    first = saved(capsys, tmp_path, "first", *common, "--paradigms", "toy_length", "--suites",
                  str(mine))
    second = saved(capsys, tmp_path, "second", *common, "--paradigms", "toy_agreement",
                   "--suites", "number_src")
    alone, _ = evaluate(capsys, "--results", str(whole))
    joined, _ = evaluate(capsys, "--results", str(first), str(second),
                         "--report", str(tmp_path / "report"))
    assert joined["headline"] == alone["headline"] == json.loads(whole.read_text())["headline"]
    for name in ("blimp", "syntaxgym"):
        assert joined[name] == alone[name], name
    assert joined["headline"]["blimp/accuracy"] == 0.625  # the mean of both parts' paradigms
    record = json.loads((tmp_path / "report" / "provenance.json").read_text())
    (entry,) = record["results"]
    assert [part["file"]["path"] for part in entry["parts"]] == [str(first.resolve()),
                                                                 str(second.resolve())]
    assert run_cli(["evaluate-syntax", "--results", str(first), str(whole)]) == 2
    err = capsys.readouterr().err.strip()
    assert "both scored blimp 'toy_length' of one model under 'unigram'" in err
    printed = json.loads(second.read_text())
    provenance = printed["provenance"]
    other = _edited(second, tmp_path / "other.json", provenance={
        **provenance, "models": [{**provenance["models"][0], "dtype": "float64"}]},
        output=str(tmp_path / "second.jsonl"))
    assert run_cli(["evaluate-syntax", "--results", str(first), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert "parts of one run under 'unigram', were scored with other 'dtype'" in err
    assert len(err.splitlines()) == 1


def _edited(path: Path, target: Path, **changes: object) -> Path:
    summary = json.loads(path.read_text())
    summary.update(changes)
    target.write_text(json.dumps({k: v for k, v in summary.items() if v is not None}))
    return target


@pytest.mark.parametrize(("case", "message"), [
    ("not_json", "is not JSON"),
    ("no_headline", "is not the JSON `synlm evaluate-syntax` prints (no 'headline')"),
    ("several", "holds 2 models' results; give each model's own evaluation"),
    ("no_output", "was scored without --output; the tables need its per-item records"),
    ("no_records", "names its records nowhere.jsonl, which is neither there nor beside it"),
    ("subset", "was scored with subset 3, "),
    ("other_benchmarks", "was scored on blimp, "),
    ("benchmark", "--benchmark marvin-linzen: "),
    ("with_ckpt", "--results makes tables from finished evaluations"),
    ("with_subset", "--subset: how models are scored; --results scores nothing"),
    ("with_no_eos", "--eos/--no-eos: how models are scored"),
    ("labels", "--label: 1 labels for 2 models (2 --results)"),
])
def test_files_and_flags_it_cannot_honour_are_one_line(capsys, scored, tmp_path, case, message):
    good = saved(capsys, tmp_path, "good", "--ckpt_path", str(scored["ckpt"]), "--data-dir",
                 str(scored["data"]), *BENCHMARKS)
    bad = tmp_path / "bad.json"
    files, extra = [str(good), str(bad)], []
    if case == "not_json":
        bad.write_text("{")
    elif case == "no_headline":
        bad.write_text("{}")
    elif case == "several":
        bad.write_text(json.dumps({"headline": {}, "models": {"a": {}, "b": {}}}))
    elif case == "no_output":
        _edited(good, bad, output=None)
    elif case == "no_records":
        _edited(good, bad, output="nowhere.jsonl")
    elif case == "subset":
        _edited(good, bad, subset=3)
    elif case == "other_benchmarks":
        _edited(good, bad, benchmarks=["blimp"])
    else:
        files = [str(good)]
        extra = {"benchmark": ["--benchmark", "marvin-linzen"],
                 "with_ckpt": ["--ckpt_path", str(scored["ckpt"])],
                 "with_subset": ["--subset", "2"], "with_no_eos": ["--no-eos"],
                 "labels": ["--label", "one"]}[case]
        if case == "labels":
            files = [str(good), str(good)]
    assert run_cli(["evaluate-syntax", "--results", *files, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_benchmark_keeps_those_every_file_was_scored_on(capsys, scored, tmp_path):
    """A file scored on BLiMP alone beside one scored on BLiMP and SyntaxGym: refused as they
    are (above), tabled on BLiMP with ``--benchmark blimp``."""
    good = saved(capsys, tmp_path, "good", "--ckpt_path", str(scored["ckpt"]), "--data-dir",
                 str(scored["data"]), *BENCHMARKS)
    blimp = _edited(good, tmp_path / "blimp.json", benchmarks=["blimp"])
    out, _ = evaluate(capsys, "--results", str(good), str(blimp), "--label", "a", "b",
                      "--benchmark", "blimp")
    assert out["benchmarks"] == ["blimp"]
    assert list(out["models"]["b"]["headline"]) == [
        "blimp/accuracy", "blimp/in_vocabulary_accuracy", "blimp/unknown_share"]


def test_what_it_prints_is_recomputed_from_the_records(capsys, scored, tmp_path):
    """A file whose stored headline and summaries were edited (BLiMP's accuracy 0.99, the SG
    score 0.01): the JSON --results prints has the headline and summaries recomputed from
    the records, those the scoring command printed, never the stored figures; a SyntaxGym
    record whose 'correct' was edited against its predictions is a one-line error."""
    good = saved(capsys, tmp_path, "good", "--ckpt_path", str(scored["ckpt"]), "--data-dir",
                 str(scored["data"]), "--benchmark", "blimp", "syntaxgym", "marvin-linzen",
                 "--suites", "number_src")
    printed = json.loads(good.read_text())
    edited = _edited(good, tmp_path / "edited.json",
                     headline={**printed["headline"], "blimp/accuracy": 0.99},
                     blimp={**printed["blimp"], "overall": {}},
                     syntaxgym={**printed["syntaxgym"], "sg_score": 0.01},
                     output=str(tmp_path / "good.jsonl"))
    out, err = evaluate(capsys, "--results", str(edited))
    assert printed["headline"]["blimp/accuracy"] == 0.625
    assert out["headline"] == printed["headline"]
    for name in ("blimp", "syntaxgym", "marvin_linzen"):
        assert out[name] == printed[name], name
    assert "0.9900" not in err and "0.6250" in err  # the stderr table: the records'
    lines = (tmp_path / "good.jsonl").read_text().splitlines()
    first = next(k for k, line in enumerate(lines) if '"syntaxgym"' in line)
    record = json.loads(lines[first])
    record["correct"] = not record["correct"]
    lines[first] = json.dumps(record)
    (tmp_path / "good.jsonl").write_text("\n".join(lines) + "\n")
    assert run_cli(["evaluate-syntax", "--results", str(edited)]) == 2
    message = capsys.readouterr().err.strip()
    assert "syntaxgym item number_src 1: 'correct' is" in message
    assert "the records were edited" in message and len(message.splitlines()) == 1
