"""Target builders on hand-made trees (exact arrays, both layouts), heads, caching."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from synlm.syntax import (
    Sentence,
    build_targets,
    cached_targets,
    project_heads,
    tree_to_distances,
    tree_to_heads,
)

DOG = Tree.fromstring("(S (NP (DT a) (JJ big) (NN dog)) (VP (VBD ran)))")  # [[a [big dog]] ran]
# [it [saw [the cat]]]
CAT = Tree.fromstring("(S (NP (PRP it)) (VP (VBD saw) (NP (DT the) (NN cat))))")


def sent(tree: Tree) -> Sentence:
    return Sentence(tree.leaves(), tree=tree)


def test_collins_heads():
    assert tree_to_heads(DOG) == [3, 3, 4, 0]
    assert tree_to_heads(CAT) == [2, 0, 4, 2]
    assert tree_to_heads(Tree.fromstring("(X (Y a b) c)")) == [0, 1, 1]  # unknown labels: left


def test_distances_one_unit():
    t = build_targets([sent(DOG)], span_window=4)
    assert t.offsets.tolist() == [0, 5]
    # rows: <eos> (root), a (boundary), big: d(a,big), dog: d(big,dog), ran: d(dog,ran)
    assert t.distances.tolist() == [5, 5, 3, 2, 4]
    assert t.boundary == 5 and t.distance_mask.all()


def test_spans_stream_and_sentence_layouts():
    # CAT's spans [the cat] and [saw the cat] end at its last word: stream mode puts them on the
    # next unit's row 0 (its <eos> input follows "cat"), sentence mode drops them.
    stream = build_targets([sent(CAT), sent(DOG)], mode="stream", span_window=4)
    sentence = build_targets([sent(CAT), sent(DOG)], mode="sentence", span_window=4)
    expected = np.zeros((10, 3), np.float32)
    expected[9] = [0.6, 0.4, 0.0]  # DOG row 4 (input "ran"): [a big dog] (3 words), [big dog]
    np.testing.assert_allclose(sentence.spans, expected)
    expected[5] = [0.6, 0.4, 0.0]  # DOG row 0: [saw the cat], [the cat] of CAT
    np.testing.assert_allclose(stream.spans, expected)
    assert stream.span_mask.tolist() == [False] * 5 + [True, False, False, False, True]
    assert sentence.span_mask.tolist() == [False] * 9 + [True]
    # the last unit's final spans have no next row in stream mode either
    alone = build_targets([sent(CAT)], mode="stream", span_window=4)
    assert not alone.span_mask.any()
    # ... unless the stream ends with a closing <eos> input
    closed = build_targets([sent(CAT)], mode="stream", span_window=4, closing_eos=True)
    assert closed.span_mask.tolist() == [False] * 5 + [True]
    np.testing.assert_allclose(closed.spans[5], [0.6, 0.4, 0.0])
    assert closed.distances.tolist() == [5, 5, 4, 3, 2, 5] and closed.distance_mask.all()
    assert closed.dep_targets.shape == (6, 1) and not closed.dep_row_mask[5]


def test_span_window_truncates_long_spans():
    t = build_targets([sent(DOG)], span_window=3)  # K = 2: [a big dog] does not fit
    np.testing.assert_allclose(t.spans[4], [1.0, 0.0])


def test_dependency_targets():
    t = build_targets([sent(DOG), Sentence(["x", "y", "z"], heads=[0, 1, 1])], span_window=4)
    # DOG heads [3, 3, 4, 0]: row 0 -> ran (+4); a -> dog (+2); big -> dog (+1); dog -> ran
    # (+1); ran -> final <eos> (+1). Second unit: row 0 -> x (+1); x -> y, z (+1, +2); z -> <eos>
    assert t.dep_targets.tolist() == [[4, 0], [2, 0], [1, 0], [1, 0], [1, 0],
                                      [1, 0], [1, 2], [0, 0], [1, 0]]
    assert t.dep_mask.sum(1).tolist() == [1, 1, 1, 1, 1, 1, 2, 0, 1]
    assert t.dep_row_mask.all()
    no_syntax = build_targets([Sentence(["a", "b"]), sent(DOG)], span_window=4)
    assert no_syntax.dep_row_mask.tolist() == [False] * 3 + [True] * 5
    assert not no_syntax.distance_mask[:3].any() and no_syntax.distance_mask[3:].all()


def test_unit_view_and_options():
    t = build_targets([sent(DOG), sent(CAT)], span_window=4, boundary=9)
    assert t.unit(1)["distances"].tolist() == [9, 9, 4, 3, 2]
    with pytest.raises(ValueError, match="mode"):
        build_targets([sent(DOG)], mode="batch")


def test_project_heads_to_subwords():
    # words: w0 -> w1, w1 root, w2 -> w1; w0 and w2 split in two subwords
    assert project_heads([2, 0, 2], [0, 0, 1, 2, 2]).tolist() == [3, 1, 0, 3, 4]


def test_cache_round_trip(tmp_path):
    sents = [sent(DOG), sent(CAT)]
    a = cached_targets(sents, tmp_path, key="k", mode="stream", span_window=4)
    files = list(tmp_path.glob("targets-*.npz"))
    assert len(files) == 1
    b = cached_targets([], tmp_path, key="k", mode="stream", span_window=4)  # read back
    for name in ("distances", "spans", "dep_targets", "dep_mask", "offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert b.boundary == a.boundary
    cached_targets(sents, tmp_path, key="k", mode="sentence", span_window=4)
    assert len(list(tmp_path.glob("targets-*.npz"))) == 2


leaf = st.sampled_from(["a", "b", "c"])
trees = st.recursive(leaf, lambda kids: st.lists(kids, min_size=1, max_size=4).map(
    lambda ks: Tree("X", ks)), max_leaves=25)


@settings(max_examples=60, deadline=None)
@given(st.lists(trees, min_size=1, max_size=6), st.integers(2, 8))
def test_targets_agree_with_the_per_sentence_definitions(raw, window):
    sents = [sent(t if isinstance(t, Tree) else Tree("X", [t])) for t in raw]
    out = build_targets(sents, mode="stream", span_window=window)
    for u, s in enumerate(sents):
        a, n = int(out.offsets[u]), len(s.words)
        assert out.distances[a + 2:a + n + 1].tolist() == tree_to_distances(s.tree)
        assert (out.distances[a:a + 2] == out.boundary).all()
        rows, slots = np.nonzero(out.dep_mask[a:a + n + 1])
        targets = rows + out.dep_targets[a:a + n + 1][rows, slots]
        assert (targets > rows).all() and (targets <= n + 1).all()
        assert (rows == n).sum() >= 1  # the final <eos>
    np.testing.assert_allclose(out.spans[out.span_mask].sum(1), 1.0, rtol=1e-5)
    assert not out.spans[~out.span_mask].any()
