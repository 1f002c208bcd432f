"""The reference RNNG's own unit tests (aistairc/rnng-pytorch f30c0ed,
``test_fixed_stack_models.py``), top-down, ported onto synlm's RNNG, parser state and beam
search.

Translation: synlm has no ``<pad>`` id, so every reference action id is one less (SHIFT 0,
REDUCE 1, NT(S) 2, NT(NP) 3, no action -1 for the reference's pad 0) and so is every word
id (reference word 1 is synlm word 0); mask columns drop the pad column and flip
(``legal = ~invalid``). Stack positions are 1-based as ``RNNGState`` documents them, so an
open nonterminal's ``open_at`` is the reference's ``nt_index`` (``top`` after its push) and
``n_open`` is its ``nt_index_pos + 1``. The test model has the reference's sizes (words
1..5, NTs S and NP, w 4, h 6, 2 layers), in float64 with weights far from uniform.

Ported:

- ``_test_transition_batch_2`` (via ``test_top_down_rnng_transition``):
  ``test_transition_batch_2``, every action of both rows checked (top, pointer, open count,
  open positions, open labels through the stack items: the reference test asserts them after
  some actions; the others are what its stack holds when run on the same actions), and
  the composed item and the stack LSTM state the REDUCE writes checked by formula where the
  reference asserts only that the state changed.
- ``test_rnng_cell_with_beam_dim`` and ``test_beam_items_do_action``:
  ``test_transitions_with_a_beam_dimension`` (batch × beam rows flattened; the action history
  that ``BeamItems.actions`` keeps shows as ``last_action``/``n_actions`` after each step).
- ``test_beam_items_reconstruct``: ``test_select_copies_rows`` (``RNNGState.select``, the
  operation the search reconstructs its beam with: row j of the result is source row
  ``index[j]``, a copy that later steps do not share).
- ``test_invalid_action_mask``: ``test_invalid_action_mask`` through ``legal_actions``
  (the first step's empty beam slot through the search's ``active`` mask).
- ``test_scores_to_successors`` (three steps of successors, the fast track, the masks after
  each step, ``finalize_word_completed_beam``): ``test_scores_to_successors`` runs
  ``search_batch`` on a model that returns the reference test's scores and records which
  items the search expands, in which slot, with which legal actions; the word beam shows as
  the items expanded after the word and as the word's log-probability (the log-sum of their
  scores). The reference stops after its third step; here a fourth step ends the word
  (every action of the two remaining items scored -inf, as its finished row).
- ``move_items_from``'s capacity and ``shrink`` (``test_beam_move_items``,
  ``test_beam_shrink``) have no counterpart object in synlm (the search keeps its word beam
  in private tensors); their observable behaviour is tested instead: the word beam holds
  ``min(2K, K + 5S)`` items, later ones dropped first come first kept
  (``test_word_beam_capacity``), and the word keeps its ``word_beam_size`` best items by
  score, whatever their order of arrival (``test_word_beam_capacity``, ``test_fast_track``).
- The fast track beyond the reference's one case (``test_fast_track``: shift_size 0, 1, 2).
- ``test_beam_search`` and ``test_beam_search_different_length``:
  ``test_beam_search_different_lengths`` (5 distinct parses per sentence, one word
  log-probability per word, surprisals finite and > 0, the right number of SHIFT per parse),
  plus: each sentence's result in the batch equals its result alone. synlm sizes the stack
  and action budget per sentence, so this holds (same parses, scores equal to 1e-12); the
  reference sizes them by the batch's longest sentence and can differ
  (docs/reference-implementations.md §11.3). Each parse's score is also its teacher-forced joint
  with ``legal_softmax=True`` (the search normalises over the legal actions).

The expansions, legal actions and word beams expected in the three scripted tests are those
the reference's ``word_sync_beam_search`` computes when its ``get_successors`` is handed the
same scores before the first word (checked by running it on each script).

Left out: the in-order, subword and particle-filter (variable beam) tests, which are not
about top-down search, and ``BeamItems.reconstruct``'s ``beam_widths`` bookkeeping (synlm
has no beam widths: an empty slot is a -inf score).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from synlm.transition.beam import BeamSettings, search_batch, stack_slots
from synlm.transition.parser_state import NO_ACTION, Limits
from synlm.transition.rnng import RNNG, RNNGState

INF = float("inf")
SH, R, S, NP = 0, 1, 2, 3  # synlm ids: the reference's 1, 2, 3, 4
NAMES = {SH: "SHIFT", R: "REDUCE", S: "NT(S)", NP: "NT(NP)"}
#: the reference's x = [[2, 3, 4], [1, 2, 5]], one less
X = torch.tensor([[1, 2, 3], [0, 1, 4]])


def random_rnng(seed: int = 0, **kwargs) -> RNNG:
    """The reference test's model (``_get_simple_top_down_model``: vocab 6 with <pad>, w 4,
    h 6, 2 layers, NTs S and NP), float64, eval mode, weights uniform in [-1, 1]."""
    torch.manual_seed(seed)
    model = RNNG(5, 4, input_size=4, hidden_size=6, num_layers=2, dropout=0.0,
                 **kwargs).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-1.0, 1.0)
    return model


def tree_actions(tree: str) -> list[int]:
    """The reference's ``_trees_to_actions`` (a token per action), as synlm ids."""
    ids = {"(S": S, "(NP": NP, ")": R}
    return [ids.get(token, SH) for token in tree.split()]


def reference_mask_to_legal(mask: list[int]) -> list[bool]:
    """A row of the reference's invalid-action mask [pad, SHIFT, REDUCE, NT(S), NT(NP)]
    (1 = invalid) as synlm's legal actions [SHIFT, REDUCE, NT(S), NT(NP)]."""
    return [not bool(v) for v in mask[1:]]


# ---------------------------------------------------------------- the stack, batch of 2
def test_transition_batch_2():
    """``_test_transition_batch_2``: the stack of both rows after each action."""
    model = random_rnng()
    trees = ["(S  (NP (NP 2 3 ) ) (NP 4 ) )", "(NP (NP 1   ) 2 5 )"]
    rows = [tree_actions(t) for t in trees]
    A = max(map(len, rows))
    actions = torch.tensor([r + [NO_ACTION] * (A - len(r)) for r in rows])
    reference_ids = [[3, 4, 4, 1, 1, 2, 2, 4, 1, 2, 2], [4, 4, 1, 2, 1, 1, 2, 0, 0, 0, 0]]
    assert actions.tolist() == [[a - 1 for a in r] for r in reference_ids]

    state = model.initial_state(2, stack_size=A)
    head = state.top  # what action 0 is predicted from: the initial item read
    assert head.shape == (2, 6)
    assert torch.equal(head, state.hidden[:, 0, -1])
    assert torch.equal(head[0], head[1])
    # after each action: top, pointer, open positions (innermost last), their labels
    expected = [
        ([1, 1], [0, 0], [[1], [1]], [[S], [NP]]),
        ([2, 2], [0, 0], [[1, 2], [1, 2]], [[S, NP], [NP, NP]]),
        ([3, 3], [0, 1], [[1, 2, 3], [1, 2]], [[S, NP, NP], [NP, NP]]),
        ([4, 2], [1, 1], [[1, 2, 3], [1]], [[S, NP, NP], [NP]]),  # (SHIFT, REDUCE)
        ([5, 3], [2, 2], [[1, 2, 3], [1]], [[S, NP, NP], [NP]]),  # (SHIFT, SHIFT)
        ([3, 4], [2, 3], [[1, 2], [1]], [[S, NP], [NP]]),  # (REDUCE, SHIFT)
        ([2, 1], [2, 3], [[1], []], [[S], []]),  # (REDUCE, REDUCE): row 1 done
        ([3, 1], [2, 3], [[1, 3], []], [[S, NP], []]),  # (NT(NP), -)
        ([4, 1], [3, 3], [[1, 3], []], [[S, NP], []]),  # (SHIFT, -)
        ([3, 1], [3, 3], [[1], []], [[S], []]),  # (REDUCE, -)
        ([1, 1], [3, 3], [[], []], [[], []]),  # (REDUCE, -)
    ]
    nt_rows = model.nt_embedding.weight
    for t, (top, pointer, opened, labels) in enumerate(expected):
        before = state.hidden.clone(), state.cell.clone(), state.items.clone()
        parser_before = state.parser
        words = X.gather(1, state.parser.pointer.clamp(max=2)[:, None])[:, 0]
        state = model.advance(state, actions[:, t], words)
        p = state.parser
        assert p.top.tolist() == top, t
        assert p.pointer.tolist() == pointer, t
        assert p.n_open.tolist() == [len(o) for o in opened], t  # nt_index_pos + 1
        for r in range(2):
            n = len(opened[r])
            assert state.open_at[r, :n].tolist() == opened[r], (t, r)
            # the open labels: the items at the open positions are the NT embeddings
            for position, label in zip(opened[r], labels[r]):
                assert torch.equal(state.items[r, position - 1], nt_rows[label - 2]), (t, r)
            if actions[r, t] == NO_ACTION:  # a padded step changes nothing of the row
                k = int(p.top[r])
                assert torch.equal(state.hidden[r, :k + 1], before[0][r, :k + 1])
                assert torch.equal(state.items[r, :k], before[2][r, :k])
                assert int(parser_before.n_actions[r]) == int(p.n_actions[r])
        if t == 3:
            # row 1's REDUCE closes (NP 1): the item at position 2 becomes
            # ReLU(W [fwd(NP, w); bwd(NP, w)] + b) and the state there changes
            nt_item, word = before[2][1, 1], before[2][1, 2]
            assert torch.equal(word, model.embedding.weight[0])
            seq = torch.stack([nt_item, word])[None]
            f = model.composition.forward_lstm(seq)[0][0, -1]
            b = model.composition.backward_lstm(seq)[0][0, -1]
            composed = torch.relu(model.composition.output(torch.cat([f, b])))
            torch.testing.assert_close(state.items[1, 1], composed, rtol=0, atol=1e-12)
            h, c = model.stack_lstm(composed[None], before[0][1, 1][None], before[1][1, 1][None])
            torch.testing.assert_close(state.hidden[1, 2], h[0], rtol=0, atol=1e-12)
            torch.testing.assert_close(state.cell[1, 2], c[0], rtol=0, atol=1e-12)
            assert not torch.allclose(state.hidden[1, 2], before[0][1, 2])
            # row 0's SHIFT pushed word x[0][0] on top
            assert torch.equal(state.items[0, 3], model.embedding.weight[1])


# ---------------------------------------------------------------- batch × beam rows
def test_transitions_with_a_beam_dimension():
    """``test_rnng_cell_with_beam_dim`` and ``test_beam_items_do_action``: 2 sentences × 2
    beam items, flattened to 4 rows."""
    model = random_rnng()
    words = X.repeat_interleave(2, 0)  # row r reads sentence r // 2

    def run(reference_actions: list[list[list[int]]]):
        acts = torch.tensor(reference_actions).view(4, -1) - 1
        state = model.initial_state(4, stack_size=8)
        assert state.parser.last_action.tolist() == [NO_ACTION] * 4
        for i in range(acts.size(1)):
            w = words.gather(1, state.parser.pointer.clamp(max=2)[:, None])[:, 0]
            state = model.advance(state, acts[:, i], w)
            assert state.parser.last_action.tolist() == acts[:, i].tolist()
            assert state.parser.n_actions.tolist() == [i + 1] * 4
        return state.parser

    p = run([[[3, 4, 1, 1, 2], [4, 4, 1, 1, 2]], [[3, 1, 1, 1, 2], [3, 4, 4, 1, 2]]])
    assert p.top.view(2, 2).tolist() == [[2, 2], [1, 3]]
    assert (p.n_open - 1).view(2, 2).tolist() == [[0, 0], [-1, 1]]  # nt_index_pos
    p = run([[[3, 4, 1, 1, 2], [4, 4, 1, 1, 2]], [[3, 1, 1, 1, 2], [3, 4, 4, 4, 4]]])
    assert p.n_actions.view(2, 2).tolist() == [[5, 5], [5, 5]]  # actions_pos
    assert p.consecutive_nts.view(2, 2).tolist() == [[0, 0], [0, 5]]  # ncons_nts
    assert p.n_open.view(2, 2).tolist() == [[1, 1], [0, 5]]  # nopen_parens
    assert p.pointer.view(2, 2).tolist() == [[2, 2], [3, 0]]


def test_select_copies_rows():
    """``test_beam_items_reconstruct``'s observable behaviour: ``select(index)`` makes row j
    a copy of row ``index[j]``; copies given the same action stay equal, different actions
    part them, and the source is not changed by steps on the copy."""
    model = random_rnng()

    def equal(a: RNNGState, i: int, b: RNNGState, j: int) -> bool:
        return (torch.equal(a.hidden[i], b.hidden[j]) and torch.equal(a.items[i], b.items[j])
                and torch.equal(a.open_at[i], b.open_at[j])
                and all(int(getattr(a.parser, f)[i]) == int(getattr(b.parser, f)[j])
                        for f in ("pointer", "top", "n_open", "last_action", "n_actions")))

    # sentences 0 and 1, 3 slots each; give the slots different histories first
    source = model.initial_state(6, stack_size=8)
    words = X.repeat_interleave(3, 0)
    source = model.advance(source, torch.tensor([S, NP, S, NP, S, NP]), words[:, 0])
    source = model.advance(source, torch.tensor([SH, S, NP, SH, NP, S]), words[:, 0])
    snapshot = source.select(torch.arange(6))
    # the reference's (batch [0, 0, 0, 1, 1], beam [0, 0, 0, 0, 0]): slot (b, k) = row 3b + k
    state = source.select(torch.tensor([0, 0, 0, 3, 3]))
    for j, i in enumerate([0, 0, 0, 3, 3]):
        assert equal(state, j, source, i)
    # [[S, NP, NP], [S, NP]]
    state = model.advance(state, torch.tensor([S, NP, NP, S, NP]),
                          torch.tensor([2, 2, 2, 1, 1]))
    assert equal(state, 1, state, 2)
    assert not equal(state, 0, state, 1)
    assert not equal(state, 3, state, 4)
    for i in range(6):  # the source is untouched
        assert equal(source, i, snapshot, i)
    # the reference's second reconstruction: (batch [0, 0, 0, 1, 1, 1], beam [2, 2, 0, 1, 1, 1])
    index = torch.tensor([2, 2, 0, 4, 4, 4])
    again = source.select(index)
    for j, i in enumerate(index.tolist()):
        assert equal(again, j, source, i)
    assert not equal(again, 0, again, 2)


# ---------------------------------------------------------------- legal actions
def test_invalid_action_mask():
    """``test_invalid_action_mask`` (max_open_nts 5, max_cons_nts 3, x [[2, 3], [1, 2]],
    beam 2): the legal actions of each (sentence, slot) after each step, the reference's
    masks translated. The first check has one item per sentence (the other slot empty);
    then both slots start from it."""
    model = random_rnng()
    words = torch.tensor([[1, 2], [0, 1]]).repeat_interleave(2, 0)
    lengths = torch.tensor([2, 2, 2, 2])
    slots = stack_slots(2, 100)
    limits = Limits(max_open=5, max_consecutive=3, stack_size=slots,
                    max_actions=torch.full((4,), 100))
    state = model.initial_state(4, stack_size=slots)

    def legal() -> list[list[list[bool]]]:
        return state.parser.legal_actions(lengths, 4, limits).view(2, 2, 4).tolist()

    def translate(masks: list[list[list[int]]]) -> list[list[list[bool]]]:
        return [[reference_mask_to_legal(m) for m in row] for row in masks]

    active = torch.tensor([True, False, True, False])  # the search's empty slots
    first = state.parser.legal_actions(lengths, 4, limits) & active[:, None]
    assert first.view(2, 2, 4).tolist() == translate(
        [[[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]])
    steps = [  # the reference's actions (0: pad) and the masks after them
        ([[3, 3], [3, 3]], [[[1, 0, 1, 0, 0], [1, 0, 1, 0, 0]],
                            [[1, 0, 1, 0, 0], [1, 0, 1, 0, 0]]]),
        ([[3, 3], [3, 1]], [[[1, 0, 1, 0, 0], [1, 0, 1, 0, 0]],
                            [[1, 0, 1, 0, 0], [1, 0, 1, 0, 0]]]),
        ([[3, 1], [3, 1]], [[[1, 0, 1, 1, 1], [1, 0, 0, 0, 0]],
                            [[1, 0, 1, 1, 1], [1, 1, 0, 1, 1]]]),
        ([[1, 2], [1, 2]], [[[1, 0, 0, 0, 0], [1, 0, 1, 0, 0]],
                            [[1, 0, 0, 0, 0], [1, 1, 1, 1, 1]]]),
        ([[3, 1], [1, 0]], [[[1, 0, 1, 0, 0], [1, 1, 0, 1, 1]],
                            [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]]),
        ([[3, 2], [2, 0]], [[[1, 0, 1, 1, 1], [1, 1, 1, 1, 1]],
                            [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]]),
        ([[1, 0], [2, 0]], [[[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]],
                            [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]]),
        ([[2, 0], [2, 0]], [[[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]],
                            [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]]),
    ]
    for i, (reference_actions, masks) in enumerate(steps):
        acts = torch.tensor(reference_actions).view(-1) - 1
        w = words.gather(1, state.parser.pointer.clamp(max=1)[:, None])[:, 0]
        state = model.advance(state, acts, w)
        assert legal() == translate(masks), i


# ---------------------------------------------------------------- the search, scripted
@dataclass
class Tracked:
    """An RNNG state that also knows each row's sentence and action history."""

    inner: RNNGState
    sentence: Tensor
    history: Tensor

    @property
    def parser(self):
        return self.inner.parser

    def select(self, index: Tensor, out: Tracked | None = None) -> Tracked:
        return Tracked(self.inner.select(index, None if out is None else out.inner),
                       self.sentence[index], self.history[index])

    def assign(self, rows: Tensor, source: Tracked, source_rows: Tensor) -> None:
        self.inner.assign(rows, source.inner, source_rows)
        self.sentence[rows] = source.sentence[source_rows]
        self.history[rows] = source.history[source_rows]


class Scripted:
    """A transition LM for ``search_batch`` whose scores before the first word are given:
    ``totals[(sentence, history)]`` is the total score (the item's plus the action's) of
    each action [SHIFT, REDUCE, NT(S), NT(NP)] of the item with that action history, as the
    reference's ``scores_to_successors`` test gives them; after the first word a random
    RNNG scores. Every call records the items it was asked about (``queries``)."""

    finish_action = None  # the root's REDUCE ends a parse

    def __init__(self, totals: dict[tuple[int, tuple[int, ...]], list[float]], batch: int,
                 limits: Limits) -> None:
        self.model = random_rnng()
        self.n_actions = 4
        self.limits = limits
        self.totals = totals
        self.batch = batch
        self.queries: list[list[tuple[int, int, tuple[int, ...], tuple[bool, ...]]]] = []

    def initial_state(self, rows: int, stack_size: int, max_actions: int) -> Tracked:
        return Tracked(self.model.initial_state(rows, stack_size),
                       torch.arange(rows) // (rows // self.batch),
                       torch.full((rows, 64), NO_ACTION))

    def advance(self, state: Tracked, actions: Tensor, words: Tensor) -> Tracked:
        acted = (actions != NO_ACTION).nonzero()[:, 0]
        state.history[acted, state.parser.n_actions[acted]] = actions[acted]
        state.inner = self.model.advance(state.inner, actions, words)
        return state

    def item_score(self, b: int, history: tuple[int, ...]) -> float:
        if not history:
            return 0.0
        return self.totals[(b, history[:-1])][history[-1]]

    def next_log_probs(self, state: Tracked, words: Tensor, legal: Tensor) -> Tensor:
        out = self.model.next_log_probs(state.inner, words, legal)
        K = legal.size(0) // self.batch
        asked = []
        for r in range(legal.size(0)):
            if not legal[r].any():
                continue  # an empty slot or a finished sentence
            b = int(state.sentence[r])
            history = tuple(state.history[r, :int(state.parser.n_actions[r])].tolist())
            asked.append((b, r % K, history, tuple(legal[r].tolist())))
            if int(state.parser.pointer[r]) == 0:
                totals = torch.tensor(self.totals[(b, history)], dtype=torch.float64)
                assert legal[r][totals > -INF].all(), (b, history)  # scores legal actions
                out[r] = totals - self.item_score(b, history)
        self.queries.append(asked)
        return out


def names(history: tuple[int, ...]) -> str:
    return " ".join(NAMES[a] for a in history)


def expanded(model: Scripted, step: int) -> list[tuple[int, int, str]]:
    """The items the search expanded at a step: (sentence, slot, actions)."""
    return [(b, k, names(h)) for b, k, h, _ in model.queries[step]]


def first_after_word(model: Scripted) -> int:
    """The first step that expanded items past the first word."""
    return next(i for i, q in enumerate(model.queries) if any(SH in h for _, _, h, _ in q))


def ref(row: list[float]) -> list[float]:
    """A row of the reference's scores [pad, SHIFT, REDUCE, NT(S), NT(NP)] without pad."""
    assert row[0] == -INF
    return row[1:]


def test_scores_to_successors():
    """``test_scores_to_successors`` (K 2, S 1, x [[2, 3], [1, 2]], max_open_nts 5,
    max_cons_nts 3), then ``finalize_word_completed_beam`` with word beam 2."""
    i = -INF
    totals = {
        # step 1: each sentence's one item
        (0, ()): ref([i, i, i, -0.3, -0.5]),
        (1, ()): ref([i, i, i, -0.6, -0.2]),
        # step 2: the reference's slot 0 and slot 1 of each sentence
        (0, (S,)): ref([i, -0.4, i, -0.6, -0.8]),  # this SHIFT is in the top 2
        (0, (NP,)): ref([i, -1.1, i, -0.7, -0.9]),  # no fast track: one SHIFT is in
        (1, (NP,)): ref([i, -0.9, i, -0.8, -0.6]),  # this SHIFT is fast-tracked
        (1, (S,)): ref([i, -1.4, i, -0.7, -0.4]),  # this SHIFT is not kept
        # step 3
        (0, (S, S)): ref([i, -1.2, i, -0.8, -1.0]),  # SHIFT fast-tracked
        (1, (S, NP)): ref([i, i, i, i, i]),  # sentence 1 has nothing left
        (1, (NP, NP)): ref([i, i, i, i, i]),
        # step 4 (past the reference test): sentence 0 has nothing left either
        (0, (S, S, S)): ref([i, i, i, i, i]),
        (0, (S, S, NP)): ref([i, i, i, i, i]),
    }
    model = Scripted(totals, batch=2, limits=Limits(max_open=5, max_consecutive=3))
    words, lengths = torch.tensor([[1, 2], [0, 1]]), torch.tensor([2, 2])
    results = search_batch(model, words, lengths, BeamSettings(2, 2, 1))
    only_nt = tuple(reference_mask_to_legal([1, 1, 1, 0, 0]))
    no_reduce = tuple(reference_mask_to_legal([1, 0, 1, 0, 0]))
    only_shift = tuple(reference_mask_to_legal([1, 0, 1, 1, 1]))
    # step 1: one item a sentence, only NT legal (the empty slots are not asked)
    assert model.queries[0] == [(0, 0, (), only_nt), (1, 0, (), only_nt)]
    # successors (row, slot) [(0,0),(0,0),(1,0),(1,0)], actions [S, NP, NP, S] in rank
    # order; no word completions; all four masks [1, 0, 1, 0, 0]
    assert model.queries[1] == [(0, 0, (S,), no_reduce), (0, 1, (NP,), no_reduce),
                                (1, 0, (NP,), no_reduce), (1, 1, (S,), no_reduce)]
    # successors rows [0, 1, 1], source slots [0, 1, 0], actions [S, NP, NP]; sentence 0's
    # SHIFT (-0.4) and sentence 1's fast-tracked SHIFT (-0.9) go to the word beam; the
    # masks: sentence 0 [1, 0, 1, 0, 0] and an empty slot, sentence 1 [1, 0, 1, 0, 0] twice
    assert model.queries[2] == [(0, 0, (S, S), no_reduce), (1, 0, (S, NP), no_reduce),
                                (1, 1, (NP, NP), no_reduce)]
    # successors [S, NP] of sentence 0 (-0.8, -1.0), its SHIFT (-1.2) fast-tracked;
    # sentence 1 expands nothing. The word continues for sentence 0 (2 completions, 1
    # forced); after three NT in a row (max_cons_nts 3) only SHIFT is legal
    assert model.queries[3] == [(0, 0, (S, S, S), only_shift), (0, 1, (S, S, NP), only_shift)]
    # the word beams: [-0.4, -1.2] and [-0.9] generate the word and are the next beam
    first = first_after_word(model)
    assert first == 4
    assert expanded(model, first) == [(0, 0, "NT(S) SHIFT"), (0, 1, "NT(S) NT(S) SHIFT"),
                                      (1, 0, "NT(NP) SHIFT")]
    assert results[0].word_log_probs[0] == pytest.approx(
        math.log(math.exp(-0.4) + math.exp(-1.2)), abs=1e-12)
    assert results[1].word_log_probs[0] == pytest.approx(-0.9, abs=1e-12)
    prefixes = [("NT(S) SHIFT", "NT(S) NT(S) SHIFT"), ("NT(NP) SHIFT",)]
    for result, allowed in zip(results, prefixes):
        assert result.parses
        for actions, _ in result.parses:
            assert actions.count(SH) == 2
            assert any(names(tuple(actions)).startswith(p + " ") for p in allowed)


@pytest.mark.parametrize(("shift_size", "word_beam"), [
    (0, ["NT(S) NT(S) SHIFT", "NT(S) NT(NP) SHIFT"]),
    (1, ["NT(NP) SHIFT", "NT(S) NT(S) SHIFT"]),
    (2, ["NT(NP) SHIFT", "NT(S) SHIFT"]),
])
def test_fast_track(shift_size, word_beam):
    """Beam 2: the second step's best two successors both open a constituent, and its two
    SHIFTs (-0.7, -0.9) rank below them. The fast track keeps the best ``shift_size`` of
    them all the same, and they do not count towards the K completions that end the word:
    the third step's two SHIFTs (-2.0, -2.5, both in its top 2) join them, then the word
    keeps its best 2."""
    i = -INF
    totals = {
        (0, ()): [i, i, -0.1, -0.2],
        (0, (S,)): [-0.9, i, -0.5, -0.6],
        (0, (NP,)): [-0.7, i, -1.5, -1.6],
        (0, (S, S)): [-2.0, i, i, i],
        (0, (S, NP)): [-2.5, i, i, i],
    }
    model = Scripted(totals, batch=1, limits=Limits())
    settings = BeamSettings(2, 2, shift_size)
    assert settings.done_size == min(4, 2 + 5 * shift_size)
    result = search_batch(model, torch.tensor([[1, 2]]), torch.tensor([2]), settings)[0]
    assert expanded(model, 2) == [(0, 0, "NT(S) NT(S)"), (0, 1, "NT(S) NT(NP)")]
    first = first_after_word(model)
    assert first == 3  # the word ends after the third step in every case
    assert [h for _, _, h in expanded(model, first)] == word_beam
    scores = {"NT(NP) SHIFT": -0.7, "NT(S) SHIFT": -0.9, "NT(S) NT(S) SHIFT": -2.0,
              "NT(S) NT(NP) SHIFT": -2.5}
    assert result.word_log_probs[0] == pytest.approx(
        math.log(sum(math.exp(scores[h]) for h in word_beam)), abs=1e-12)


def test_word_beam_capacity():
    """Beam 2, shift_size 1: the word beam holds min(2·2, 2 + 5) = 4 items. Three steps
    add a SHIFT each (one in the top 2, two fast-tracked), so the word goes on; the fifth
    step's two SHIFTs are both in its top 2, and only the first fits. The word then keeps
    its best 2 by score (-1.1, then -5.0, which came first): the dropped SHIFT (-1.2) would
    have been second."""
    i = -INF
    totals = {
        (0, ()): [i, i, -0.1, -0.2],
        (0, (S,)): [-5.0, i, -0.4, -6.0],
        (0, (NP,)): [-7.0, i, -6.5, -6.6],
        (0, (S, S)): [-8.0, i, -0.5, -0.6],
        (0, (S, S, S)): [-8.5, i, -0.7, -0.8],
        (0, (S, S, NP)): [-8.6, i, -0.9, -1.0],
        (0, (S, S, S, S)): [-1.1, i, -9.0, -9.2],
        (0, (S, S, S, NP)): [-1.2, i, -9.1, -9.3],
    }
    model = Scripted(totals, batch=1, limits=Limits())
    settings = BeamSettings(2, 2, 1)
    assert settings.done_size == 4
    assert BeamSettings(10, 5, 1).done_size == 15
    assert BeamSettings(100, 10, 1).done_size == 105
    assert BeamSettings(3, 3, 0).done_size == 3
    result = search_batch(model, torch.tensor([[1, 2]]), torch.tensor([2]), settings)[0]
    first = first_after_word(model)
    assert first == 5
    assert expanded(model, 1) == [(0, 0, "NT(S)"), (0, 1, "NT(NP)")]
    assert expanded(model, 2) == [(0, 0, "NT(S) NT(S)")]  # SHIFT (-5.0) set aside
    assert expanded(model, 3) == [(0, 0, "NT(S) NT(S) NT(S)"), (0, 1, "NT(S) NT(S) NT(NP)")]
    assert expanded(model, 4) == [(0, 0, "NT(S) NT(S) NT(S) NT(S)"),
                                  (0, 1, "NT(S) NT(S) NT(S) NT(NP)")]
    assert [h for _, _, h in expanded(model, first)] == [
        "NT(S) NT(S) NT(S) NT(S) SHIFT", "NT(S) SHIFT"]
    assert result.word_log_probs[0] == pytest.approx(
        math.log(math.exp(-1.1) + math.exp(-5.0)), abs=1e-12)


# ---------------------------------------------------------------- the search, a model
def test_beam_search_different_lengths():
    """``test_beam_search`` (x [[2, 3, 4], [1, 2, 5]]) and
    ``test_beam_search_different_length`` (x [[2, 3, 4, 1, 3], [1, 2, 5]]) at (8, 5, 1)."""
    model = random_rnng(seed=1, legal_softmax=True)
    settings = BeamSettings(8, 5, 1)
    for words, lengths in [(X, [3, 3]), (torch.tensor([[1, 2, 3, 0, 2], [0, 1, 4, 0, 0]]),
                                         [5, 3])]:
        lengths = torch.tensor(lengths)
        results = search_batch(model, words, lengths, settings)
        for b, (result, n) in enumerate(zip(results, lengths.tolist())):
            assert len(result.parses) == 5
            assert len({actions for actions, _ in result.parses}) == 5
            assert len(result.word_log_probs) == n
            assert all(0 < s < INF for s in result.surprisals)
            assert math.isfinite(result.end_log_prob) and result.end_log_prob <= 0
            scores = [score for _, score in result.parses]
            assert scores == sorted(scores, reverse=True)
            for actions, score in result.parses:
                assert actions.count(SH) == n
                # the score is log p(x, y) with the action softmax over the legal actions
                joint = model(words[b:b + 1, :n], torch.tensor([actions]),
                              torch.tensor([n])).joint
                assert score == pytest.approx(joint.item(), abs=1e-10)
            # in a batch as alone: stacks and budgets follow each sentence's own length
            alone = search_batch(model, words[b:b + 1, :n], lengths[b:b + 1], settings)[0]
            assert [a for a, _ in alone.parses] == [a for a, _ in result.parses]
            assert [s for _, s in alone.parses] == pytest.approx(scores, abs=1e-12)
            assert alone.word_log_probs == pytest.approx(result.word_log_probs, abs=1e-12)
            assert alone.end_log_prob == pytest.approx(result.end_log_prob, abs=1e-12)

