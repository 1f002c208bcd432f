"""The RNNG family's search stacks as shared nodes (``synlm.transition.stack_pool``), for the
top-down and in-order RNNG and the CAG: the same values as the fixed-layout ``RNNGState``
(every stack position's state) and the same beam search (n-best lists identical) to 1e-12 in
float64 (the pooled search runs the stack reader on the acting rows only, and a product over
fewer rows may round otherwise), and a pool whose size after compaction is the live stacks'
nodes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from synlm.transition import beam as beam_module
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.cag import CAG
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import NO_ACTION, Limits
from synlm.transition.rnng import RNNG
from synlm.transition.stack_pool import SENTINEL, PooledState, compact, stack_nodes
from synlm.transition.types import SearchResult

V, LABELS = 20, 4  # words, nonterminals


def random_model(kind: type[RNNG], seed: int = 0) -> RNNG:
    """A tiny float64 model of ``kind`` in eval mode, weights from U(-0.5, 0.5) (far from
    uniform distributions, so that the beams differ from step to step)."""
    torch.manual_seed(seed)
    if kind is CAG:
        model = CAG(V, 2 + LABELS, input_size=8, num_layers=2, num_heads=2, dropout=0.0,
                    embedding_dropout=0.0)
    else:
        model = kind(V, 2 + LABELS, input_size=8, hidden_size=8, num_layers=2, dropout=0.0)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.5, 0.5)
    return model.double().eval()


def sentences(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([6, 2, 9, 4])
    return torch.randint(1, V, (4, 9), generator=generator), lengths


def fixed_layout(model: TransitionModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Search ``model`` on ``initial_state``'s fixed-layout stacks."""
    monkeypatch.setattr(model, "search_state", model.initial_state)


def assert_same_search(pooled: list[SearchResult], fixed: list[SearchResult]) -> None:
    """The same parses in the same order, the numbers to 1e-12."""
    for a, b in zip(pooled, fixed, strict=True):
        assert a.parsed == b.parsed and a.unbounded_stack == b.unbounded_stack
        assert [p for p, _ in a.parses] == [p for p, _ in b.parses]
        assert [s for _, s in a.parses] == pytest.approx([s for _, s in b.parses], abs=1e-12)
        if a.parsed:
            assert a.word_log_probs == pytest.approx(b.word_log_probs, abs=1e-12)
            assert a.end_log_prob == pytest.approx(b.end_log_prob, abs=1e-12)


@pytest.mark.parametrize("kind", [RNNG, InOrderRNNG, CAG])
@pytest.mark.parametrize("sizes", [(8, 4, 1), (24, 6, 2)])
def test_search_equals_the_fixed_layout(kind: type[RNNG], sizes: tuple[int, int, int],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Also with a stack bound small enough that beams empty and are searched again."""
    model = random_model(kind)
    words, lengths = sentences()
    for max_stack in (100, 8):
        settings = BeamSettings(*sizes, max_stack=max_stack)
        pooled = search_sentences(model, words, lengths, settings)
        with monkeypatch.context() as patch:
            fixed_layout(model, patch)
            fixed = search_sentences(model, words, lengths, settings)
        assert_same_search(pooled, fixed)
        assert all(len(r.parses) == sizes[1] for r in fixed if r.parsed)


def pieces() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``sentences(1)`` as pieces: words, lengths and which piece ends its word (the last
    of each sentence does)."""
    words, lengths = sentences(1)
    ends = torch.rand(words.shape, generator=torch.Generator().manual_seed(2)) < 0.6
    ends[torch.arange(4), lengths - 1] = True
    return words, lengths, ends


def assert_same_search_over_pieces(
        monkeypatch: pytest.MonkeyPatch,
        change: Callable[[TransitionModel, pytest.MonkeyPatch], None]) -> None:
    """The search over ``pieces()`` of the top-down and in-order RNNG at 12/4/1 equals the
    search after ``change(model, patch)``."""
    words, lengths, ends = pieces()
    for kind in (RNNG, InOrderRNNG):
        model = random_model(kind, 3)
        settings = BeamSettings(12, 4, 1)
        searched = search_sentences(model, words, lengths, settings, ends)
        with monkeypatch.context() as patch:
            change(model, patch)
            assert_same_search(searched, search_sentences(model, words, lengths, settings,
                                                          ends))


def test_subword_search_equals_the_fixed_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over pieces (``word_ends``), where an in-order ``NT`` takes a word's pieces as its
    first child."""
    assert_same_search_over_pieces(monkeypatch, fixed_layout)


def random_walk(model: RNNG, rows: int, steps: int, seed: int) -> tuple[list, list]:
    """The pooled and the fixed-layout state of ``rows`` rows after the same ``steps`` random
    legal actions (a row with none legal, or at random, takes none)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.full((rows,), 6)
    S = 16
    limits = Limits(stack_size=S)
    words = torch.randint(1, V, (rows, 6), generator=generator)
    pooled, fixed = model.search_state(rows, S), model.initial_state(rows, S)
    for _ in range(steps):
        legal = fixed.parser.legal_actions(lengths, model.n_actions, limits)
        weights = legal.double() + 1e-12 * ~legal
        actions = torch.multinomial(weights, 1, generator=generator)[:, 0]
        idle = ~legal.any(1) | (torch.rand(rows, generator=generator) < 0.2)
        actions = torch.where(idle, NO_ACTION, actions)
        word = words.gather(1, fixed.parser.pointer.clamp(max=5)[:, None])[:, 0]
        with torch.no_grad():
            pooled = model.advance(pooled, actions, word)
            fixed = model.advance(fixed, actions, word)
    return pooled, fixed


def assert_same_stacks(pooled: PooledState, fixed, rows: torch.Tensor) -> None:
    """The stack LSTM's state at every stack position, the top output and the parser state
    of ``rows`` equal."""
    top = pooled.parser.top[rows]
    span = int(top.max()) + 1
    nodes = stack_nodes(pooled.pool, pooled.node[rows], torch.zeros_like(top), span)
    on_stack = torch.arange(span) <= top[:, None]
    close = {"rtol": 0.0, "atol": 1e-12}
    torch.testing.assert_close(pooled.pool.values[nodes][on_stack],
                               fixed.lstm[rows, :span][on_stack], **close)
    torch.testing.assert_close(pooled.top[rows], fixed.top[rows], **close)
    for name in ("pointer", "top", "n_open", "n_actions", "last_action"):
        assert torch.equal(getattr(pooled.parser, name)[rows], getattr(fixed.parser, name)[rows])


@pytest.mark.parametrize("kind", [RNNG, InOrderRNNG])
def test_each_stack_position_holds_the_fixed_layouts_values(kind: type[RNNG]) -> None:
    pooled, fixed = random_walk(random_model(kind, 1), rows=12, steps=25, seed=int(kind is RNNG))
    assert_same_stacks(pooled, fixed, torch.arange(12))


def test_compaction_keeps_the_live_stacks_and_only_their_nodes() -> None:
    """After 25 steps of 12 rows and a selection that shares stacks, compaction keeps
    exactly the nodes on the live rows' stacks (each once, the sentinel besides), the live
    rows' values unchanged, and the dead rows at the sentinel."""
    model = random_model(RNNG, 2)
    pooled, fixed = random_walk(model, rows=12, steps=25, seed=5)
    index = torch.tensor([3, 3, 7, 0, 11, 7, 2, 2, 9, 1, 5, 5])  # shared stacks
    pooled, fixed = pooled.select(index), fixed.select(index)
    live = torch.tensor([True, True, True, False, True, True, False, True, False, True, True,
                         False])
    before = pooled.pool.size
    compact([(pooled, live)], spare=10)
    rows = live.nonzero()[:, 0]
    assert_same_stacks(pooled, fixed, rows)
    top = pooled.parser.top[rows]
    nodes = stack_nodes(pooled.pool, pooled.node[rows], torch.zeros_like(top),
                        int(top.max()) + 1)
    on_stack = nodes[torch.arange(nodes.size(1)) <= top[:, None]]
    assert pooled.pool.size == on_stack.unique().numel() + 1 < before
    assert pooled.pool.capacity == pooled.pool.size + 10
    assert (pooled.node[~live] == SENTINEL).all() and (pooled.open_nodes[~live] == SENTINEL).all()


def test_a_searchs_pool_follows_its_live_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """After each compaction the pool holds at most the live items' stack positions (one
    node each, however many items share them), not the nodes of every step taken."""
    model = random_model(RNNG, 4)
    words, lengths = sentences(4)
    kept: list[tuple[int, int]] = []  # (pool size after, bound from the live items)
    pushed = [0]
    original_compact, original_push = beam_module.compact, type(
        model.search_state(1, 8).pool).push

    def counting_push(pool, below, *args):
        pushed[0] += below.size(0)
        return original_push(pool, below, *args)

    def recording(states, spare=0):
        live = sum(int((state.parser.top[alive] + 1).sum()) for state, alive in states)
        original_compact(states, spare)
        kept.append((states[0][0].pool.size, live + 1))

    monkeypatch.setattr(beam_module, "compact", recording)
    monkeypatch.setattr(type(model.search_state(1, 8).pool), "push", counting_push)
    search_sentences(model, words, lengths, BeamSettings(24, 6, 2))
    assert len(kept) >= int(lengths.max()) + 1
    assert all(size <= bound for size, bound in kept)
    assert max(size for size, _ in kept) < pushed[0] / 4
