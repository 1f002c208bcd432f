"""``synlm parse --predicted``: another system's trees scored as a model's are, checked against
the gold sentences before torch; and the ``kim`` protocol, equal to Kim et al. 2019's
``compare_trees.py`` on the trees of ``fixtures/kim_compare_trees`` (its numbers, computed by
that code, in ``reference.json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from synlm.commands import parse
from synlm.metrics.parsing import ParsingF1, evaluation_tree
from synlm.syntax import read_trees

KIM = Path(__file__).parent / "fixtures" / "kim_compare_trees"
SAMPLE = Path(__file__).parent / "fixtures" / "syntax" / "sample.mrg"
REFERENCE = json.loads((KIM / "reference.json").read_text())
#: Figures that depend on the trees' source rather than their scores.
NAMES = ("treebank", "trees")


def scores(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert parse.main(list(argv)) == 0
    out = json.loads(capsys.readouterr().out)
    return {k: v for k, v in out.items() if k not in NAMES}


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line ``synlm parse`` answers ``argv`` with (exit code 2; its flag parser
    exits)."""
    try:
        code = parse.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_kim_protocol_equals_compare_trees_unrounded() -> None:
    golds = [g for g in (evaluation_tree(t, "kim") for t, _ in read_trees(KIM / "gold.mrg"))
             if g is not None]
    preds = [t for t, _ in read_trees(KIM / "predicted.txt")]
    labels = tuple(REFERENCE["label_recall"])
    metric = ParsingF1(labels=labels, protocol="kim")
    metric.update(preds, golds)
    out = metric.compute()
    assert int(out["n_sentences"]) == REFERENCE["n_sentences"] == 43
    assert 100 * float(out["uf1_sentence"]) == pytest.approx(REFERENCE["sentence_f1"], rel=1e-12)
    assert 100 * float(out["uf1_corpus"]) == pytest.approx(REFERENCE["corpus_f1"], rel=1e-12)
    for label, recall in REFERENCE["label_recall"].items():
        assert 100 * float(out[f"recall_{label}"]) == pytest.approx(recall, rel=1e-12), label


def test_kim_protocol_on_the_command_line(capsys) -> None:
    out = scores(capsys, "--predicted", str(KIM / "predicted.txt"), "--treebank",
                 str(KIM / "gold.mrg"), "--protocol", "kim")
    assert out["n_sentences"] == REFERENCE["n_sentences"]
    assert out["uf1_sentence"] == round(REFERENCE["sentence_f1"], 2) == 45.68
    assert out["uf1_corpus"] == round(REFERENCE["corpus_f1"], 2) == 36.91
    assert out["recall_NP"] == round(REFERENCE["label_recall"]["NP"], 2)
    # urnng leaves out every whole-sentence span (kim keeps one below a unary root) and
    # adds 1e-8 to the corpus F1's denominator: the same trees score otherwise
    urnng = scores(capsys, "--predicted", str(KIM / "predicted.txt"), "--treebank",
                   str(KIM / "gold.mrg"), "--protocol", "urnng")
    assert urnng["n_sentences"] == 43 and urnng["uf1_corpus"] == 37.23


@pytest.mark.parametrize("protocol", ["onlstm", "palm", "urnng", "kim"])
def test_predicted_equals_the_baseline_it_was_written_by(capsys, tmp_path, protocol) -> None:
    written = tmp_path / "right.txt"
    common = ("--treebank", str(SAMPLE), "--protocol", protocol)
    baseline = scores(capsys, "--baseline", "right-branching", *common, "--output", str(written))
    assert written.read_text().count("\n") == baseline["n_sentences"] > 0
    assert scores(capsys, "--predicted", str(written), *common) == baseline


@pytest.fixture
def predicted(tmp_path: Path) -> tuple[Path, list[str]]:
    """Where a predicted file goes, and the lines of the fixture's good one."""
    return tmp_path / "pred.txt", (KIM / "predicted.txt").read_text().splitlines()


def test_other_words_name_the_line(capsys, predicted) -> None:
    path, lines = predicted
    lines[8] = lines[8].replace("(T Investors)", "(T Analysts)")
    path.write_text("\n".join(lines) + "\n")
    err = refused(capsys, "--predicted", str(path), "--treebank", str(KIM / "gold.mrg"),
                  "--protocol", "kim")
    assert f"{path}:9: the tree's words differ from {KIM / 'gold.mrg'}'s sentence 9:" in err
    assert "'Analysts bought bonds that paid well' against 'Investors bought" in err


@pytest.mark.parametrize(("keep", "line", "count"), [(-1, 43, 42), (None, 44, 44)])
def test_another_number_of_trees_names_the_line(capsys, predicted, keep, line, count) -> None:
    path, lines = predicted
    lines = lines[:keep] if keep else [*lines, lines[0]]
    path.write_text("\n".join(lines) + "\n")
    err = refused(capsys, "--predicted", str(path), "--treebank", str(KIM / "gold.mrg"),
                  "--protocol", "kim")
    assert f"{path}:{line}: {count} trees for the 43 sentences of" in err


def test_a_line_that_is_not_one_tree_is_named(capsys, predicted) -> None:
    path, lines = predicted
    for bad, expected in ((lines[2][:-1], "2: expected ')' to close this bracket"),
                          ("(T", "2: expected ')' to close this bracket"),
                          (lines[1] + " " + lines[1], "2: expected one bracketed tree, found 2")):
        path.write_text("\n".join([lines[0], bad, *lines[2:]]) + "\n")
        err = refused(capsys, "--predicted", str(path), "--treebank", str(KIM / "gold.mrg"),
                      "--protocol", "kim")
        assert f"{path}:{expected}" in err


def test_an_empty_line_is_a_sentence_without_a_tree(capsys, tmp_path) -> None:
    """An empty line (what ``synlm parse --output`` writes for a sentence whose beam found
    no tree) leaves that sentence out of the scores and counts it as ``no_parse``."""
    written = tmp_path / "right.txt"
    common = ("--treebank", str(KIM / "gold.mrg"), "--protocol", "kim")
    scores(capsys, "--baseline", "right-branching", *common, "--output", str(written))
    lines = written.read_text().splitlines()
    (tmp_path / "gap.txt").write_text("\n".join(["", *lines[1:]]) + "\n")
    assert parse.main(["--predicted", str(tmp_path / "gap.txt"), *common]) == 0
    out, err = capsys.readouterr()
    assert "1 of 43 sentences have no tree in --predicted (an empty line) (sentences 1)" in err
    gap = {k: v for k, v in json.loads(out).items() if k not in NAMES}
    kept = [t for t, _ in read_trees(KIM / "gold.mrg") if evaluation_tree(t, "kim") is not None]
    assert len(kept) == 43
    rest = tmp_path / "rest.mrg"
    rest.write_text("\n".join(t.pformat(margin=10**9) for t in kept[1:]) + "\n")
    (tmp_path / "rest.txt").write_text("\n".join(lines[1:]) + "\n")
    alone = scores(capsys, "--predicted", str(tmp_path / "rest.txt"), "--treebank", str(rest),
                   "--protocol", "kim")
    assert gap.pop("no_parse") == 1
    assert gap == alone


def test_a_file_that_is_not_utf8_is_named(capsys, predicted) -> None:
    path, lines = predicted
    path.write_bytes(("\n".join(lines[:2]) + "\n").encode() + b"(T caf\xe9)\n")
    err = refused(capsys, "--predicted", str(path), "--treebank", str(KIM / "gold.mrg"))
    assert f"--predicted: {path}:3: not UTF-8 (byte 0xe9)" in err


def test_predicted_is_one_source_of_trees(capsys) -> None:
    for other in (("--baseline", "balanced"), ("--ckpt_path", "x.ckpt"), ("--config", "x.yaml")):
        err = refused(capsys, "--predicted", str(KIM / "predicted.txt"), "--treebank",
                      str(KIM / "gold.mrg"), *other)
        assert "not allowed with argument --predicted" in err
    err = refused(capsys, "--predicted", str(KIM / "predicted.txt"))
    assert "--predicted FILE scores its trees against a treebank: give --treebank" in err


def test_the_trees_are_checked_before_torch(tmp_path) -> None:
    bad = tmp_path / "pred.txt"
    bad.write_text("(X (T a) (T b))\n")
    code = ("import sys; from synlm.commands import parse; "
            f"rc = parse.main(['--predicted', {str(bad)!r}, '--treebank', {str(SAMPLE)!r}]); "
            "print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["2", "False"]
    assert f"{bad}:1: the tree's words differ from" in done.stderr
