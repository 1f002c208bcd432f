"""RNNG action sequences (synlm.syntax.actions): the top-down and in-order oracles on a tree
worked by hand, round trips over treebanks (the bundled sample, and every tree of the NLTK
WSJ sample when the staged data is there), the action vocabulary, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from nltk import Tree

from staged import staged
from synlm.syntax.actions import (
    ORDERS,
    REDUCE,
    SHIFT,
    ActionError,
    ActionVocab,
    oracle,
    tree_of,
    without_preterminals,
)
from synlm.syntax.readers import read_trees
from synlm.syntax.trees import clean_tree

CAT = Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat)))")
WORDS = ["the", "cat", "sat"]


def test_the_top_down_oracle_of_a_three_word_tree() -> None:
    """Dyer et al. 2016: each constituent's NT before its children, REDUCE after them."""
    assert oracle(CAT) == ["NT(S)", "NT(NP)", SHIFT, SHIFT, REDUCE, "NT(VP)", SHIFT, REDUCE,
                           REDUCE]


def test_the_in_order_oracle_of_a_three_word_tree() -> None:
    """Liu & Zhang 2017: the first child, then NT, then the other children, then REDUCE."""
    assert oracle(CAT, "in_order") == [SHIFT, "NT(NP)", SHIFT, REDUCE, "NT(S)", SHIFT,
                                       "NT(VP)", REDUCE, REDUCE]


@pytest.mark.parametrize("order", ORDERS)
def test_actions_build_the_tree_back_without_its_tags(order: str) -> None:
    assert tree_of(oracle(CAT, order), WORDS, order) == Tree.fromstring(
        "(S (NP the cat) (VP sat))")
    assert tree_of(oracle(CAT, order), WORDS, order) == without_preterminals(CAT)


def round_trips(trees: list[Tree], order: str) -> int:
    count = 0
    for tree in trees:
        words = tree.leaves()
        actions = oracle(tree, order)
        assert actions.count(SHIFT) == len(words)
        assert actions.count(REDUCE) == sum(a.startswith("NT(") for a in actions)
        assert tree_of(actions, words, order) == without_preterminals(tree)
        count += 1
    return count


def cleaned(path: Path) -> list[Tree]:
    """The treebank's trees without traces and function tags, an unlabelled root removed."""
    out = []
    for tree, _ in read_trees(path):
        tree = clean_tree(tree)
        while tree is not None and tree.label() == "" and len(tree) == 1:
            tree = tree[0]
        out.append(tree)
    return out


@pytest.mark.parametrize("order", ORDERS)
def test_round_trips_on_the_bundled_sample(order: str) -> None:
    trees = cleaned(Path(__file__).parent / "fixtures" / "syntax" / "sample.mrg")
    assert round_trips(trees, order) == len(trees) > 0


@pytest.mark.parametrize("order", ORDERS)
def test_round_trips_on_every_tree_of_the_nltk_sample(order: str) -> None:
    trees = cleaned(staged("nltk_treebank", "treebank.zip"))
    assert round_trips(trees, order) == 3914


def test_the_action_vocabulary() -> None:
    vocab = ActionVocab.from_trees([CAT])
    assert vocab.itos == [SHIFT, REDUCE, "NT(NP)", "NT(S)", "NT(VP)"]
    assert vocab.labels == ["NP", "S", "VP"]
    ids = vocab.encode(oracle(CAT))
    assert ids == [3, 2, 0, 0, 1, 4, 0, 1, 1] and vocab.decode(ids) == oracle(CAT)
    with pytest.raises(ActionError, match=r"unknown action NT\(PP\).*NP, S, VP"):
        vocab.encode(["NT(PP)"])


@pytest.mark.parametrize(("actions", "order", "message"), [
    (["SHIFT"], "top_down", r"action 0 \(SHIFT\): no open constituent"),
    (["NT(S)", "REDUCE"], "top_down", r"action 1 \(REDUCE\): an empty constituent"),
    (["NT(S)", "SHIFT", "SHIFT"], "top_down", r"1 constituents left open"),
    (["NT(S)", "SHIFT", "REDUCE", "SHIFT"], "top_down", r"the tree is already complete"),
    (["NT(S)", "SHIFT", "SHIFT", "SHIFT", "SHIFT", "REDUCE"], "top_down", r"no word left"),
    (["NT(S)", "SHIFT", "REDUCE"], "top_down", r"generate 1 of the 3 words"),
    (["NT(S)"], "in_order", r"action 0 \(NT\(S\)\): no completed first child"),
    (["SHIFT", "REDUCE"], "in_order", r"action 1 \(REDUCE\): no open constituent"),
    (["SHIFT", "SHIFT", "SHIFT"], "in_order", r"leave 3 items"),
    (["SHIFT", "POP"], "in_order", r"unknown action 'POP'"),
])
def test_bad_sequences_are_one_line_errors(actions: list[str], order: str,
                                           message: str) -> None:
    with pytest.raises(ActionError, match=message) as info:
        tree_of(actions, WORDS, order)
    assert "\n" not in str(info.value)


def test_bad_orders_and_trees_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown action order 'bottom_up'"):
        oracle(CAT, "bottom_up")
    with pytest.raises(ValueError, match=r"expected a constituent over words"):
        oracle(Tree.fromstring("(DT the)"))
