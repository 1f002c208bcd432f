"""The RNNG's teacher forcing by stack level and tree height (synlm.transition.rnng_levels)
computes what the stack run one action at a time (``RNNG.tops_by_actions``) computes: in
float64 without dropout, the action and word log-probabilities and every parameter's
gradient to 1e-10, on random models and trees (padded rows, unary chains, subwords, legal
softmax) and on the released model's fixture (tests/fixtures/rnng/reference.pt). Also: the
packed composition equals the padded one; the schedule by hand; a tiny model trained so with
dropout learns ten trees."""

from __future__ import annotations

import random

import pytest
import torch
from nltk import Tree

from synlm.syntax.actions import ActionVocab
from synlm.transition.rnng import RNNG
from synlm.transition.rnng_levels import compose_by_heights, parser_before, schedule
from tests.test_rnng import TREES, assert_learns_ten_trees, encoded, random_rnng
from tests.test_rnng_reference import FIXTURE, batch, transplanted


def random_tree(rng: random.Random, words: list[str], labels: list[str], depth: int = 0) -> Tree:
    """A random tree over a few of ``words``: unary chains, flat and deep constituents."""
    n = rng.choice([1, 1, 2, 3]) if depth < 4 else 1
    children = [rng.choice(words) if rng.random() < 0.5 or depth >= 4
                else random_tree(rng, words, labels, depth + 1) for _ in range(n)]
    return Tree(rng.choice(labels), [Tree("X", [c]) if isinstance(c, str) else c
                                     for c in children])


def trees_and_grammar(n: int, seed: int) -> tuple[list[Tree], ActionVocab, dict[str, int]]:
    rng = random.Random(seed)
    words = ["a", "b", "c", "d", "e"]
    trees = [Tree.fromstring(t) for t in TREES]
    trees += [random_tree(rng, words, ["S", "NP", "VP", "PP"]) for _ in range(n)]
    return trees, ActionVocab.from_trees(trees), {w: i for i, w in enumerate(
        sorted({w for t in trees for w in t.leaves()}))}


def both_ways(model: RNNG, *batch_args: torch.Tensor, word_ends: torch.Tensor | None = None
              ) -> list[tuple[torch.Tensor, ...]]:
    """(action log-probs, word log-probs, gradients...) by level and by action."""
    params = [p for p in model.parameters() if p.requires_grad]
    results = []
    for by_level in (True, False):
        model.runs_by_level = lambda by_level=by_level: by_level  # this instance only
        out = model(*batch_args, word_ends=word_ends)
        grads = torch.autograd.grad(out.joint.sum(), params, allow_unused=True)
        results.append((out.action_log_probs, out.word_log_probs, *grads))
    del model.runs_by_level
    return results


def assert_equal(pair: list[tuple[torch.Tensor, ...]]) -> None:
    (ours, theirs) = pair
    for a, b in zip(ours, theirs, strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    assert any(g is not None and g.abs().sum() > 0 for g in ours[2:])


@pytest.mark.parametrize("legal_softmax", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_levels_equal_actions_on_random_trees(seed, legal_softmax):
    trees, vocab, words = trees_and_grammar(12, seed)
    model = random_rnng(len(words), len(vocab), seed=seed, legal_softmax=legal_softmax)
    w, a, n = encoded(trees, vocab, words)
    assert_equal(both_ways(model, w, a, n))


def test_levels_equal_actions_over_subwords():
    """Pieces as words (``word_ends``), the legal softmax allowing only ``SHIFT`` inside a
    word."""
    trees, vocab, words = trees_and_grammar(6, 2)
    model = random_rnng(len(words), len(vocab), seed=2, legal_softmax=True)
    w, a, n = encoded(trees, vocab, words)
    torch.manual_seed(2)
    ends = torch.rand(w.shape) < 0.6
    ends[torch.arange(len(n)), n - 1] = True
    ends &= torch.arange(w.size(1)) < n[:, None]
    assert_equal(both_ways(model, w, a, n, word_ends=ends))


def test_levels_equal_actions_on_the_released_models_fixture():
    """The fixture's float64 weights (aistairc/rnng-pytorch f30c0ed, made by
    benchmarks/rnng_reference.py) and sentences."""
    model, vocab = transplanted(torch.load(FIXTURE, weights_only=True))
    words, actions, lengths = batch(torch.load(FIXTURE, weights_only=True), vocab)
    assert_equal(both_ways(model, words, actions, lengths))


def test_packed_composition_equals_the_padded_one():
    """``compose_by_heights`` over one height of constituents of 0-4 children, most
    first, equals ``Composition.forward`` over the same constituents padded."""
    torch.manual_seed(0)
    composition = RNNG(5, 4, input_size=6, hidden_size=5, dropout=0.0).composition.double()
    counts = torch.tensor([4, 3, 3, 1, 0])
    labels, children = torch.randn(5, 6).double(), torch.randn(5, 4, 6).double()
    items = torch.cat([labels, children.flatten(0, 1)])  # child j of c: row 5 + 4c + j
    active = [int((counts >= j).sum()) for j in range(5)]
    forward = [torch.arange(5)] + [5 + 4 * torch.arange(n) + j - 1 for j, n in
                                   enumerate(active) if j]
    backward = [torch.arange(5)] + [5 + 4 * torch.arange(n) + counts[:n] - j for j, n in
                                    enumerate(active) if j]
    rows = torch.stack([torch.cat(forward), torch.cat(backward)])
    packed = compose_by_heights(composition, items, [(rows, active)])[len(items):]
    torch.testing.assert_close(packed, composition(labels, children, counts), rtol=0,
                               atol=1e-12)


def test_schedule_by_hand():
    """(S (NP the dog) (VP barks)) and (S (NP it) (VP is)), the first padded by nothing:
    compositions by height, pushes by stack position, the state each action reads."""
    trees = [Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"),
             Tree.fromstring("(S (NP (PRP it)) (VP (VBZ is)))")]
    vocab = ActionVocab.from_trees(trees)
    _, a, _ = encoded(trees, vocab, {w: i for i, w in enumerate(["barks", "dog", "is",
                                                                   "it", "the"])})
    # row 0: NT(S) NT(NP) SHIFT SHIFT REDUCE NT(VP) SHIFT REDUCE REDUCE       (A = 9)
    # row 1: NT(S) NT(NP) SHIFT REDUCE NT(VP) SHIFT REDUCE REDUCE -1
    plan = schedule(a)
    (rows, active), (root, root_active) = plan.heights  # row 1's root REDUCE is run, row 0's not
    # items 0-5: row 0's S NP the dog VP barks, 6-10: row 1's S NP it VP is; the NP and VP of
    # row 0, of row 1 (items 11-14): labels, then children from the left (forward) and from
    # the right (backward), the NP of two children last
    assert rows.tolist() == [[1, 4, 7, 9, 2, 5, 8, 10, 3], [1, 4, 7, 9, 3, 5, 8, 10, 2]]
    assert active == [4, 4, 1]
    assert root.tolist() == [[6, 13, 14], [6, 14, 13]]  # row 1's S over its NP and VP
    assert root_active == [1, 1, 1]
    assert [len(b) for b in plan.below] == [3, 4, 6, 3]  # pushes at stack positions 1-4
    assert plan.top_position.tolist() == [[0, 1, 2, 3, 4, 2, 3, 4, 3],
                                          [0, 1, 2, 3, 2, 3, 4, 3, 1]]
    # the items pushed at position 1: row 0's S, row 1's S, row 1's root composition
    assert plan.pushes[:3].tolist() == [0, 6, 15]
    parser = parser_before(a, plan.top_position)
    assert parser.pointer.view(2, 9)[0].tolist() == [0, 0, 0, 1, 2, 2, 2, 3, 3]
    assert parser.consecutive_nts.view(2, 9)[0].tolist() == [0, 1, 2, 0, 0, 0, 1, 0, 0]
    assert parser.last_action.view(2, 9)[1, -2:].tolist() == [1, 1]


def test_a_tiny_rnng_with_dropout_learns_ten_trees():
    """Trained by level with dropout between its two layers, searched action by action."""
    assert RNNG(3, 3).runs_by_level()
    assert_learns_ten_trees(lambda v, a: RNNG(v, a, input_size=24, hidden_size=24,
                                              num_layers=2, dropout=0.1), lr=0.01)
