"""synlm.viz: text and SVG trees, distance bars and heat maps, checked on their values."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from nltk import Tree

from synlm import viz
from synlm.syntax.distances import distances_to_tree, tree_to_distances

SVG = "{http://www.w3.org/2000/svg}"
PRED = Tree.fromstring("(X the (X cat (X sat <unk>)))")
GOLD = Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat) (NN <unk>)))")


def texts(svg: str) -> list[str]:
    """The text elements of an SVG document, in document order (it must be well-formed)."""
    return [e.text or "" for e in ET.fromstring(svg).iter(f"{SVG}text")]


def test_pretty_draws_the_words_in_order_under_the_tree():
    lines = viz.pretty(PRED).splitlines()
    assert len(lines) == 7  # the root, two lines per level below it, the words
    assert lines[-1].split() == ["the", "cat", "sat", "<unk>"]
    assert lines[0].strip() == "X" and all(line == line.rstrip() for line in lines)


def test_pretty_keeps_a_word_beside_a_subtree_in_place():
    """nltk draws (X (X the cat) sat) as "sat the cat" when given the words as leaves."""
    lines = viz.pretty(Tree.fromstring("(X (X the cat) sat)")).splitlines()
    assert lines[-1].split() == ["the", "cat", "sat"]


def test_pretty_puts_gold_under_the_prediction():
    text = viz.pretty(PRED, GOLD)
    predicted, gold = text.split("\ngold:\n")
    assert predicted == "predicted:\n" + viz.pretty(PRED)
    assert gold == viz.pretty(GOLD)


def test_svg_is_well_formed_and_holds_every_word():
    words = texts(viz.svg(PRED))
    assert [w for w in words if w != "X"] == PRED.leaves()


def test_svg_beside_gold_shades_the_spans_the_prediction_misses():
    document = viz.svg(PRED, GOLD)
    words = texts(document)
    for word in PRED.leaves():
        assert words.count(word) == 2
    assert "predicted" in words and any(w.startswith("gold") for w in words)
    # pred spans: (1, 4), (2, 4); gold's NP (0, 2) is missed, its VP (2, 4) is found
    assert viz.missed_paths(PRED, GOLD) == [(0,)]
    boxes = {tuple(sorted(e.attrib.items())) for e in ET.fromstring(document).iter(f"{SVG}rect")}
    assert len(boxes) == 1  # (svgling 0.5 writes each box twice, the same)


def test_missed_paths_marks_the_top_of_a_unary_chain():
    gold = Tree.fromstring("(S (S (VP (V a) (N b))) (C c))")
    pred = Tree.fromstring("(X a (X b c))")
    assert viz.missed_paths(pred, gold) == [(0,)]  # S over VP over (0, 2): the S
    assert viz.missed_paths(gold, gold) == []


def test_show_is_svg_in_jupyter_and_text_in_a_terminal():
    view = viz.show(PRED, gold=GOLD)
    assert view._repr_svg_() == viz.svg(PRED, GOLD)
    assert repr(view) == str(view) == viz.pretty(PRED, GOLD)
    assert repr(viz.show(PRED)) == viz.pretty(PRED)


def test_distance_bars_has_one_bar_per_gap_with_the_distances():
    words = ["the", "cat", "sat", "down"]
    fig = viz.distance_bars(words, [0.5, 2.0, 1.0])
    ax = fig.axes[0]
    assert [bar.get_height() for bar in ax.patches] == [0.5, 2.0, 1.0]
    centres = [bar.get_x() + bar.get_width() / 2 for bar in ax.patches]
    assert centres == pytest.approx([0.5, 1.5, 2.5])  # between words 0-1, 1-2, 2-3
    assert [t.get_text() for t in ax.get_xticklabels()] == words
    assert len(fig.axes) == 1


def test_distance_bars_reads_per_word_values_and_a_gold_tree():
    words = PRED.leaves()
    fig = viz.distance_bars(words, [9.0, 3.0, 2.0, 1.0], gold=GOLD)  # the first is dropped
    assert [bar.get_height() for bar in fig.axes[0].patches] == [3.0, 2.0, 1.0]
    gold_line = fig.axes[1].lines[0]
    assert list(gold_line.get_ydata()) == tree_to_distances(GOLD) == [2, 3, 2]
    # the bars decode to the predicted tree
    assert distances_to_tree(words, [3.0, 2.0, 1.0]) == PRED


def test_distance_bars_names_a_wrong_length():
    with pytest.raises(ValueError, match=r"distances: expected 3 gap values \(or 4 per-word "
                                         r"values\) for 4 words, got 2"):
        viz.distance_bars(["a", "b", "c", "d"], [1.0, 2.0])
    with pytest.raises(ValueError, match="gold: expected 3 gap values"):
        viz.distance_bars(["a", "b", "c", "d"], [1.0, 2.0, 3.0], gold=[1.0])


def test_span_heatmap_shows_the_scores_with_words_on_both_axes():
    words = ["a", "b", "c"]
    scores = np.arange(9, dtype=float).reshape(3, 3)
    scores[2, 0] = -np.inf  # an impossible span: left blank
    fig = viz.span_heatmap(words, scores)
    ax = fig.axes[0]
    image = ax.images[0].get_array()
    assert bool(image.mask[2, 0]) and int(image.mask.sum()) == 1
    np.testing.assert_array_equal(image.filled(-np.inf), scores)
    assert [t.get_text() for t in ax.get_xticklabels()] == words
    assert [t.get_text() for t in ax.get_yticklabels()] == words
    with pytest.raises(ValueError, match=r"scores: expected an \(3, 3\) matrix for 3 words, "
                                         r"got shape \(2, 3\)"):
        viz.span_heatmap(words, scores[:2])


def test_span_matrix_places_the_window_of_spans_ending_at_each_word():
    n, width = 4, 3
    rows = np.arange(n + 2)[:, None] * 10 + np.arange(width)[None, :]  # row r, slot v: 10r + v
    matrix = viz.span_matrix(rows, n)
    # as palm_tree reads them: the span of L words ending at word j is row j + 2, slot K - L
    assert matrix[2, 2] == 42  # one word (w2): row 2 + 2, slot K - 1
    assert matrix[1, 3] == 50  # w1..w3, three words: row 3 + 2, slot K - 3
    assert matrix[0, 1] == 31  # w0..w1: row 1 + 2, slot K - 2
    assert np.isnan(matrix[0, 3])  # four words: longer than the window
    assert np.isnan(matrix[np.tril_indices(n, -1)]).all()
    with pytest.raises(ValueError, match=r"span_scores: expected \(6, K\) scores for 4 words"):
        viz.span_matrix(rows[:5], n)


@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_pictures_save_without_a_window(fmt, magic):
    buffer = io.BytesIO()
    viz.distance_bars(["a", "b", "c"], [1.0, 2.0], gold=[2.0, 1.0]).savefig(buffer, format=fmt)
    assert buffer.getvalue().startswith(magic)
