"""Readers: PTB/CTB brackets, zips, LDC section dirs, CoNLL-U, Malt-TAB; one-line errors."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from synlm.syntax import ReaderError, read_brackets, read_conllu, read_malt_zip, read_trees
from synlm.syntax.trees import TreeFormatError, binarize, clean_tree, labeled_spans, spans

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"


def test_reads_ptb_file_with_wrapper_and_lines():
    trees = read_trees(FIXTURES / "sample.mrg")
    assert len(trees) == 10
    first, source = trees[0]
    assert first.label() == "S" and source.endswith("sample.mrg:1")
    assert trees[1][1].endswith("sample.mrg:10")
    assert first.leaves()[:3] == ["The", "old", "miller"]


def test_reads_ldc_sections_and_zip(tmp_path):
    assert len(read_trees(FIXTURES / "wsj", sections=[0])) == 4
    assert len(read_trees(FIXTURES / "wsj", sections=[21, 22])) == 3
    assert len(read_trees(FIXTURES / "wsj")) == 20  # recursive
    archive = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(FIXTURES / "sample.mrg", "treebank/combined/wsj_0001.mrg")
        z.writestr("treebank/combined/README", "not a tree")
    trees = read_trees(archive)
    assert len(trees) == 10 and "treebank.zip/treebank/combined/wsj_0001.mrg:1" in trees[0][1]


def test_ctb_markup_and_gb_encoding(tmp_path):
    text = "<S ID=1>\n( (IP (NP (NR 上海)) (VP (VV 开发)) (PU 。)) )\n</S>\n"
    path = tmp_path / "chtb_0001.fid"
    path.write_bytes(text.encode("gb18030"))
    (tree, source), = read_trees(path)
    assert tree.leaves() == ["上海", "开发", "。"] and source.endswith(":2")


@pytest.mark.parametrize(("text", "message"), [
    ("(S (NP a)\n(VP b)", ":1: expected ')' to close this bracket, found end of file"),
    ("(S (NP a))\n)", ":2: unexpected ')' with no open bracket"),
    ("(S (NP a))\nword", ":2: expected '(' before 'word'"),
    ("(S\n ( ) )", ":2: expected a label or a subtree after '(', found ')'"),
    ("(S (NP ) )", ":1: expected children in '(NP', found ')'"),
])
def test_malformed_brackets_give_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(ReaderError) as err:
        read_trees(path)
    assert str(err.value) == f"{path}{message}"
    assert "\n" not in str(err.value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="() ab\n", max_size=40))
def test_bracket_reader_fuzz(text):
    try:
        trees = [t for t, _ in read_brackets(text, "fuzz")]
    except TreeFormatError as e:
        assert str(e).startswith("fuzz:") and "\n" not in str(e)
    else:
        assert all(isinstance(t, Tree) for t in trees)


def test_conllu_skips_multiword_and_empty_nodes():
    s1, s2 = read_conllu(FIXTURES / "sample.conllu")
    assert s1.words == ["The", "cat", "sat", "down", "."] and s1.heads == [2, 3, 0, 3, 3]
    assert s2.words == ["Do", "n't", "go", "."] and s2.heads == [3, 3, 0, 3]
    assert s1.source.endswith("sample.conllu:1") and s2.source.endswith("sample.conllu:9")


def test_truncated_conllu_gives_one_line_error(tmp_path):
    text = (FIXTURES / "sample.conllu").read_text()
    path = tmp_path / "cut.conllu"
    path.write_text(text[: text.index("3\tgo") + 8])  # cut inside the row of "go"
    with pytest.raises(ReaderError) as err:
        read_conllu(path)
    assert str(err.value).startswith(f"{path}:9: expected") and "\n" not in str(err.value)
    path.write_text("1\ta\ta\tX\tX\t_\t5\tdep\t_\t_\n")
    with pytest.raises(ReaderError, match=r":1: expected word ids 1..n and integer heads in 0..1"):
        read_conllu(path)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 400))
def test_conllu_fuzz_truncation(cut):
    text = (FIXTURES / "sample.conllu").read_text()[:cut]
    try:
        sentences = read_conllu("fuzz.conllu", text=text)
    except ReaderError as e:
        assert str(e).startswith("fuzz.conllu:") and "\n" not in str(e)
    else:
        assert all(len(s.heads) == len(s.words) for s in sentences)


def test_malt_zip(tmp_path):
    archive = tmp_path / "dependency_treebank.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("dependency_treebank/wsj_0001.dp", "A\tDT\t2\ndog\tNN\t0\n\nIt\tPRP\t0\n")
    a, b = read_malt_zip(archive)
    assert a.heads == [2, 0] and b.words == ["It"] and a.source.endswith("wsj_0001.dp:1")
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("dependency_treebank/wsj_0002.dp", "A\tDT\n")
    with pytest.raises(ReaderError, match=r"wsj_0002.dp:1: expected 'word<TAB>tag<TAB>head'"):
        read_malt_zip(archive)


def test_clean_spans_and_binarize():
    tree = read_trees(FIXTURES / "sample.mrg")[1][0]  # She wanted to buy a red bicycle .
    gold = clean_tree(tree, frozenset({"PRP", "VBD", "TO", "VB", "DT", "JJ", "NN"}))
    assert gold.leaves() == ["She", "wanted", "to", "buy", "a", "red", "bicycle"]
    assert (gold.label(), gold[1].label()) == ("S", "VP")
    assert spans(gold) == {(1, 7), (2, 7), (3, 7), (4, 7)}
    assert (2, 7, "S") in labeled_spans(gold) and (2, 7, "VP") in labeled_spans(gold)
    expected = "(X She (X wanted (X to (X buy (X a (X red bicycle))))))"
    assert binarize(gold) == Tree.fromstring(expected)
