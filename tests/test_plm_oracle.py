"""synlm's PLM token sequences against IBM/transformers-struct-guidance ``get_oracle.py --gen``
(tests/fixtures/plm/README.md): the bundled sample, every tree of the NLTK WSJ sample, and a
hand-written example."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.actions import ActionError, without_preterminals
from synlm.syntax.plm import (
    MAX_TOKENS,
    NT_CATEGORIES,
    plm_line,
    plm_lines,
    plm_tokens,
    plm_tree,
)
from synlm.syntax.readers import read_trees
from synlm.syntax.trees import clean_tree
from tests.staged import staged

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE = FIXTURES / "syntax" / "sample.mrg"
CAT = Tree.fromstring("(S (NP (DT The) (NN cat)) (VP (VBD sat)))")


def cleaned(path: Path) -> list[Tree]:
    """The trees as synlm's corpora read them: wrapper unwrapped, ``clean_tree`` applied."""
    return [clean_tree(tree) for tree, _ in read_trees(path)]


def test_a_three_word_sentence() -> None:
    tokens = ["NT(S)", "NT(NP)", "The", "cat", "REDUCE()", "NT(VP)", "sat", "REDUCE()",
              "REDUCE()"]
    assert plm_tokens(CAT) == tokens
    assert plm_tokens(CAT, root=True) == ["[START]", *tokens]
    assert plm_line(CAT) == " ".join(tokens)
    assert plm_tree(tokens) == plm_tree(" ".join(["[START]", *tokens])) \
        == without_preterminals(CAT)


def test_the_bundled_sample_as_synlm_reads_it() -> None:
    trees = cleaned(SAMPLE)
    assert "\n".join(plm_lines(trees)) + "\n" == (FIXTURES / "plm" / "sample.gen").read_text()
    assert [plm_tree(plm_tokens(t)) for t in trees] == [without_preterminals(t) for t in trees]


def test_the_bundled_sample_as_written() -> None:
    """Uncleaned, the reference keeps the wrapper (``NT()``), traces and function tags."""
    trees = [Tree("", [tree]) for tree, _ in read_trees(SAMPLE)]
    raw = (FIXTURES / "plm" / "sample_raw.gen").read_text()
    assert "\n".join(plm_lines(trees)) + "\n" == raw
    assert raw.startswith("NT() NT(S) NT(NP-SBJ) The") and " *-1 " in raw


def test_every_tree_of_the_nltk_sample() -> None:
    trees = cleaned(staged("nltk_treebank", "treebank.zip"))
    rows = (FIXTURES / "plm" / "nltk.sha256").read_text().split("\n")[:-1]
    whole = rows[0].split()[1]
    expected = [row.split()[1] for row in rows[1:]]
    assert len(trees) == len(expected) == 3914
    got = []
    for tree in trees:
        line = plm_line(tree)
        got.append("-" if line is None else hashlib.sha256(line.encode()).hexdigest()[:16])
    assert [i for i, (a, b) in enumerate(zip(got, expected)) if a != b] == []
    assert expected.count("-") == 1  # one tree over MAX_TOKENS
    text = "".join(line + "\n" for line in plm_lines(trees))
    assert hashlib.sha256(text.encode()).hexdigest() == whole
    labels = {t[3:-1] for line in plm_lines(trees) for t in line.split() if t.startswith("NT(")}
    assert labels - set(NT_CATEGORIES) == {"ADVP|PRT"}


def test_the_length_filter() -> None:
    assert plm_line(CAT, max_tokens=9) is not None and plm_line(CAT, max_tokens=8) is None
    assert plm_line(CAT, root=True, max_tokens=9) is not None and MAX_TOKENS == 500


def test_a_preterminal_is_its_word() -> None:
    assert plm_tokens(Tree("NN", ["cat"])) == ["cat"]


@pytest.mark.parametrize(("tree", "message"), [
    (Tree("S", ["cat", Tree("VP", [Tree("VBD", ["sat"])])]), "'cat' under \\(S ...\\) has no"),
    (Tree("S", [Tree("NN", ["a cat"])]), "word 'a cat'"),
    (Tree("S", [Tree("NP", [])]), r"an empty constituent \(NP\)"),
    (Tree("S(", [Tree("NN", ["cat"])]), "label 'S\\('"),
    ("cat", "expected a tree"),
])
def test_bad_trees_are_one_line_errors(tree: Tree, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        plm_tokens(tree)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("tokens", "message"), [
    ("NT(S) The cat", "1 constituents left open"),
    ("The cat REDUCE()", r"action 0 \(SHIFT\): no open constituent"),
    ("NT() NT(S) cat REDUCE() REDUCE()", r"unknown action 'NT\(\)'"),
])
def test_bad_sequences_are_one_line_errors(tokens: str, message: str) -> None:
    with pytest.raises(ActionError, match=message) as info:
        plm_tree(tokens)
    assert "\n" not in str(info.value)
