"""``synlm parse``: baselines on a treebank, model-induced trees (fake model), raw text."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from nltk import Tree
from tokenizers import Tokenizer, models

from conftest import tiny_palm_config
from synlm import viz
from synlm.cli import main as cli_main
from synlm.commands import parse
from synlm.data.subwords import SubwordVocab
from synlm.errors import InputError
from synlm.metrics.parsing import evaluation_tree
from synlm.outputs import Structure
from synlm.parsing import check_structure
from synlm.syntax import baseline_tree, read_trees
from synlm.syntax.trees import to_bracket

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"
SVG = "{http://www.w3.org/2000/svg}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert parse.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_baseline_on_a_file(capsys):
    out = run(capsys, "--baseline", "right-branching", "--treebank", str(FIXTURES / "sample.mrg"))
    assert out["n_sentences"] == 10
    assert out["uf1_sentence"] == 60.07 and out["uf1_corpus"] == 42.11
    for key in ("recall_NP", "recall_VP", "recall_PP", "depth", "rl_ratio", "left_splits_pct",
                "right_splits_pct"):
        assert key in out
    short = run(capsys, "--baseline", "left-branching", "--treebank", str(FIXTURES / "wsj"),
                "--max-length", "2")
    assert short["n_sentences"] == 6 and short["uf1_sentence"] == 100.0


def test_bad_treebank_is_one_line_error(capsys, tmp_path):
    bad = tmp_path / "bad.mrg"
    bad.write_text("(S (NP a)")
    assert parse.main(["--baseline", "balanced", "--treebank", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"synlm parse: --treebank: {bad}:1: expected ')' to close this " \
                          "bracket, found end of file"


class FakeVocab:
    eos_id, unk_id = 0, 1

    def encode(self, words: list[str]) -> list[int]:
        return [0 if w == "<eos>" else 1 + len(w) for w in words]

    def is_unknown(self, token: int) -> bool:
        return token == self.unk_id


class FakeLM:
    """Distances decreasing along the row (right-branching trees) for "lm", increasing
    (left-branching) for "syd"; 3 layers, the middle one is used by default."""

    vocab = FakeVocab()
    normalization = "ptb"
    structures = {"syd": Structure("syd", "distances"), "lm": Structure("lm", "distances")}

    def induce(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> dict[str, torch.Tensor]:
        B, T = tokens.shape
        down = -torch.arange(T, dtype=torch.float).expand(3, B, T).clone()
        down[0] = 0  # layer 0 is flat: picking it would give other trees
        return {"lm": down, "syd": -down}


def test_checkpoint_trees_match_the_baselines(capsys, monkeypatch):
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    bank = str(FIXTURES / "sample.mrg")
    lm = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", "lm")
    right = run(capsys, "--baseline", "right-branching", "--treebank", bank)
    assert lm["uf1_sentence"] == right["uf1_sentence"]
    assert lm["trees"].endswith("lm:middle:unbiased")
    syd = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--layer", "2")
    assert syd["trees"].endswith("syd:2:unbiased")  # the head's structure by default
    left = run(capsys, "--baseline", "left-branching", "--treebank", bank)
    assert syd["uf1_corpus"] == left["uf1_corpus"]
    biased = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", "lm",
                 "--biased")
    assert biased["uf1_sentence"] == right["uf1_sentence"]


def test_structures_are_listed_and_an_unknown_one_names_the_valid(capsys, monkeypatch):
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    assert run(capsys, "--ckpt_path", "x.ckpt", "--list-structures") == {
        "lm": "distances", "syd": "distances"}
    assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURES / "sample.mrg"),
                       "--structure", "span"]) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: the model has no structure " \
        "'span'; it has: lm (distances), syd (distances)"
    with pytest.raises(InputError, match=r"no structure 'span'.*lm \(distances\), syd"):
        check_structure(FakeLM(), "span")  # a library function: a typed error


def test_particle_filtering_needs_a_model_that_searches_its_trees(capsys, monkeypatch):
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    flags = ["--treebank", str(FIXTURES / "sample.mrg"), "--search", "particles",
             "--particles", "5"]
    assert parse.main(["--ckpt_path", "x.ckpt", *flags]) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: --search particles: the model " \
        "(FakeLM) has no search over trees (Searches)"
    assert parse.main(["--baseline", "balanced", *flags]) == 2
    assert capsys.readouterr().err.strip().endswith("give its --ckpt_path")


def test_input_text_to_bracketed_trees(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n\nit rained all day\n")
    out_file = tmp_path / "trees.txt"
    out = run(capsys, "--ckpt_path", "x.ckpt", "--structure", "lm", "--input", str(text),
              "--output", str(out_file))
    assert out["n_sentences"] == 2
    assert out_file.read_text().splitlines() == ["(X the (X cat sat))",
                                                 "(X it (X rained (X all day)))"]


def test_untrained_models_give_mean_and_std_over_seeds(capsys, tmp_path):
    """PaLM Table 4's first row: the split percentages of randomly initialised models,
    mean and std over seeds; one seed reproduces the same model."""
    config = tiny_palm_config(tmp_path)
    args = ["--config", str(config), "--treebank", str(FIXTURES / "sample.mrg"),
            "--protocol", "palm"]
    assert cli_main(["parse", *args, "--seeds", "3"]) == 0
    three = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert three["n_models"] == 3 and three["n_sentences"] == 10
    assert three["left_splits_pct_std"] > 0  # the seeds give different trees
    assert 0 <= three["left_splits_pct"] + three["right_splits_pct"] <= 100
    assert cli_main(["parse", *args, "--seeds", "1"]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["uf1_sentence_std"] is None  # a sample standard deviation needs two seeds
    assert first["left_splits_pct"] != three["left_splits_pct"]


def test_a_subword_model_is_refused_in_one_line(capsys, monkeypatch):
    class SubwordLM(FakeLM):
        vocab = SubwordVocab(Tokenizer(models.WordLevel({"<eos>": 0}, unk_token="<eos>")),
                             "<eos>")

    monkeypatch.setattr("synlm.loading.load_model", lambda path: SubwordLM())
    assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURES / "sample.mrg"),
                       "--structure", "lm"]) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: trees are induced over words, by " \
        "a word-level model; this model's vocabulary is subwords (data.subwords)"


def trees_printed(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What a successful ``synlm parse`` printed on stdout."""
    assert parse.main(list(argv)) == 0
    return capsys.readouterr().out


def test_input_without_output_prints_the_trees(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n\nit rained all day\n")
    model = ["--ckpt_path", "x.ckpt", "--structure", "lm", "--input", str(text)]
    printed = trees_printed(capsys, *model)
    assert printed.splitlines() == ["(X the (X cat sat))", "(X it (X rained (X all day)))"]
    out_file = tmp_path / "trees.txt"
    run(capsys, *model, "--output", str(out_file))
    assert out_file.read_text() == printed
    balanced = ["--baseline", "balanced", "--input", str(text)]
    assert trees_printed(capsys, *balanced).splitlines() == [
        "(X (X the cat) sat)", "(X (X it rained) (X all day))"]


def test_json_and_pretty_formats_hold_the_same_trees(capsys, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\nit rained all day\n")
    args = ["--baseline", "balanced", "--input", str(text)]
    brackets = trees_printed(capsys, *args).splitlines()
    records = [json.loads(line) for line in
               trees_printed(capsys, *args, "--format", "json").splitlines()]
    assert [r["tree"] for r in records] == brackets
    assert [r["words"] for r in records] == [["the", "cat", "sat"], ["it", "rained", "all", "day"]]
    pretty = trees_printed(capsys, *args, "--format", "pretty")
    trees = [Tree.fromstring(b) for b in brackets]
    assert pretty == "".join(viz.pretty(t) + "\n\n" for t in trees)
    out_file = tmp_path / "trees.json"
    run(capsys, *args, "--format", "json", "--output", str(out_file))
    assert [json.loads(line) for line in out_file.read_text().splitlines()] == records


def test_svg_format_writes_one_picture_per_sentence(capsys, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\nit rained all day\n")
    folder = tmp_path / "pictures"
    args = ["--baseline", "balanced", "--input", str(text), "--format", "svg"]
    assert run(capsys, *args, "--output", str(folder)) == {"n_sentences": 2,
                                                            "output": str(folder)}
    assert sorted(p.name for p in folder.iterdir()) == ["0001.svg", "0002.svg"]
    words = [e.text for e in ET.parse(folder / "0002.svg").iter(f"{SVG}text")]
    assert [w for w in words if w != "X"] == ["it", "rained", "all", "day"]
    assert parse.main(args) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: --format svg writes one picture " \
                                              "per sentence: give --output FOLDER"


def test_show_prints_predictions_beside_gold_before_the_scores(capsys):
    bank = ["--baseline", "right-branching", "--treebank", str(FIXTURES / "sample.mrg")]
    scores = run(capsys, *bank)
    lines = trees_printed(capsys, *bank, "--show", "2", "--format", "json").splitlines()
    assert len(lines) == 3 and json.loads(lines[-1]) == scores
    golds = [evaluation_tree(t, "onlstm") for t, _ in read_trees(FIXTURES / "sample.mrg")]
    for line, gold in zip(lines[:2], golds, strict=False):
        record = json.loads(line)
        assert record["words"] == gold.leaves()
        assert record["gold"] == to_bracket(gold)
        assert Tree.fromstring(record["tree"]) == baseline_tree(gold.leaves(),
                                                                "right-branching")
    pretty = trees_printed(capsys, *bank, "--show", "2", "--format", "pretty").splitlines()
    assert pretty.count("predicted:") == 2 and pretty.count("gold:") == 2
    assert json.loads(pretty[-1]) == scores
    bracket = trees_printed(capsys, *bank, "--show", "1").splitlines()
    assert bracket[:2] == [f"predicted: {json.loads(lines[0])['tree']}",
                           f"gold: {to_bracket(golds[0])}"]


def test_show_in_svg_writes_the_first_pictures_beside_gold(capsys, tmp_path):
    folder = tmp_path / "pictures"
    bank = ["--baseline", "balanced", "--treebank", str(FIXTURES / "sample.mrg")]
    assert run(capsys, *bank, "--show", "2", "--format", "svg", "--output", str(folder))[
        "n_sentences"] == 10
    assert sorted(p.name for p in folder.iterdir()) == ["0001.svg", "0002.svg"]
    gold = evaluation_tree(next(iter(read_trees(FIXTURES / "sample.mrg")))[0], "onlstm")
    words = [e.text for e in ET.parse(folder / "0001.svg").iter(f"{SVG}text")]
    for word in gold.leaves():
        assert words.count(word) >= 2  # the prediction's and the gold tree's leaves


def test_show_needs_a_treebank(capsys, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n")
    assert parse.main(["--baseline", "balanced", "--input", str(text), "--show", "1"]) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: --show N shows predicted beside " \
        "gold trees: give --treebank PATH with --baseline or --ckpt_path, without --input"


def test_a_treebank_outside_the_vocabulary_is_counted_and_warned(capsys, monkeypatch):
    """Every word read as <unk>: the share is in the JSON and one warning is on stderr;
    a vocabulary that covers the words gives 0 and no warning."""
    class NoWords(FakeVocab):
        def encode(self, words: list[str]) -> list[int]:
            return [self.unk_id] * len(words)

    class UnknownLM(FakeLM):
        vocab = NoWords()

    bank = str(FIXTURES / "sample.mrg")
    monkeypatch.setattr("synlm.loading.load_model", lambda path: UnknownLM())
    assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", "lm"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["unknown_share"] == 1.0
    assert captured.err.strip() == ("synlm parse: warning: 100% of the treebank's words are "
                                    "outside the model's vocabulary (read as <unk>): it was "
                                    "trained on other text")
    monkeypatch.setattr("synlm.loading.load_model", lambda path: FakeLM())
    known = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", "lm")
    assert known["unknown_share"] == 0.0


def test_the_protocols_offered_are_the_metrics_own() -> None:
    """``--protocol``'s choices are named without importing the metrics (torch)."""
    from synlm.metrics.parsing import PROTOCOLS

    assert tuple(sorted(PROTOCOLS)) == parse.PROTOCOLS
