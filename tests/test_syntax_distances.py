"""Distances <-> trees (Du et al. 2020 Algorithms 1-3), PaLM decoding, baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from synlm.syntax import (
    baseline_tree,
    binarize,
    distances_to_tree,
    palm_tree,
    read_trees,
    spans,
    tree_to_distances,
)
from synlm.syntax.trees import WORD_TAGS, clean_tree

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"

words = st.sampled_from(["a", "b", "c", "d"])
trees = st.recursive(words, lambda kids: st.lists(kids, min_size=1, max_size=4).map(
    lambda ks: Tree("X", ks)), max_leaves=30)


def as_tree(t: Tree | str) -> Tree:
    return t if isinstance(t, Tree) else Tree("X", [t])


def onlstm_build_tree(depth: list[float], sen: list[str]):
    """Ordered-Neurons test_phrase_grammar.build_tree, verbatim logic (nested lists)."""
    if len(depth) == 1:
        return sen[0]
    i = int(np.argmax(depth))
    parse_tree = []
    if len(sen[:i]) > 0:
        parse_tree.append(onlstm_build_tree(depth[:i], sen[:i]))
    tree1 = sen[i]
    if len(sen[i + 1:]) > 0:
        tree1 = [tree1, onlstm_build_tree(depth[i + 1:], sen[i + 1:])]
    if parse_tree == []:
        return tree1
    parse_tree.append(tree1)
    return parse_tree


def to_lists(t: Tree | str):
    return t if isinstance(t, str) else [to_lists(c) for c in t]


def test_algorithm1_on_a_hand_tree():
    t = Tree.fromstring("(S (NP (DT a) (JJ big) (NN dog)) (VP (VBD ran)))")
    assert tree_to_distances(t) == [3, 2, 4]  # [[a [big dog]] ran]
    assert binarize(t) == Tree.fromstring("(X (X a (X big dog)) ran)")


def test_round_trip_on_fixture_sample():
    for tree, _ in read_trees(FIXTURES / "sample.mrg"):
        gold = clean_tree(tree, WORD_TAGS)
        d = tree_to_distances(gold)
        assert len(d) == len(gold.leaves()) - 1
        assert distances_to_tree(gold.leaves(), d) == binarize(gold)
        # per-word convention: a leading value (gap <eos>-w1) is ignored by the unbiased decoder
        assert distances_to_tree(gold.leaves(), [99, *d]) == binarize(gold)


@settings(max_examples=200, deadline=None)
@given(trees)
def test_round_trip_hypothesis(t):
    t = as_tree(t)
    assert distances_to_tree(t.leaves(), tree_to_distances(t)) == binarize(t)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=20))
def test_biased_matches_onlstm_build_tree(values):
    sen = [f"w{i}" for i in range(len(values))]
    expected = onlstm_build_tree([float(v) for v in values], sen)
    got = distances_to_tree(sen, values, biased=True)
    assert to_lists(got) == (expected if isinstance(expected, list) else [expected])


def test_distance_length_is_checked():
    with pytest.raises(ValueError, match="expected 2 gaps or 3"):
        distances_to_tree(["a", "b", "c"], [1.0])


def oracle_scores(tree: Tree, width: int) -> np.ndarray:
    """0/1 PaLM scores (1 for every span of the tree, single words included): rows = inputs
    [<eos>, w1..wn, <eos>], slot v = span of width - v words ending before the row's input."""
    n = len(tree.leaves())
    scores = np.zeros((n + 2, width))
    for i, j in spans(tree, trivial=True) | {(i, i + 1) for i in range(n)}:
        if j - i <= width:
            scores[j + 1, width - (j - i)] = 1.0
    return scores


@settings(max_examples=200, deadline=None)
@given(trees)
def test_palm_recovers_any_binary_tree_from_oracle_scores(t):
    b = binarize(as_tree(t))
    n = len(b.leaves())
    assert palm_tree(b.leaves(), oracle_scores(b, max(n, 1))) == b


def test_palm_decodes_sentences_longer_than_the_window():
    words = [f"w{i}" for i in range(12)]
    left = baseline_tree(words, "left-branching")  # right children are single words
    assert palm_tree(words, oracle_scores(left, 3)) == left
    balanced = baseline_tree(words[:8], "balanced")  # right children of <= 4 words
    assert palm_tree(words[:8], oracle_scores(balanced, 4)) == balanced
    out = palm_tree(words, np.random.default_rng(0).normal(size=(14, 4)))
    assert out.leaves() == words


def test_baselines():
    w = list("abcde")
    assert baseline_tree(w, "left-branching") == Tree.fromstring("(X (X (X (X a b) c) d) e)")
    assert baseline_tree(w, "right-branching") == Tree.fromstring("(X a (X b (X c (X d e))))")
    assert baseline_tree(w, "balanced") == Tree.fromstring("(X (X (X a b) c) (X d e))")
    r1 = baseline_tree(w, "random", np.random.default_rng(3))
    r2 = baseline_tree(w, "random", np.random.default_rng(3))
    assert r1 == r2 and r1.leaves() == w
    assert baseline_tree(["a"], "balanced") == Tree("X", ["a"])
    with pytest.raises(ValueError, match="unknown baseline"):
        baseline_tree(w, "zigzag")
