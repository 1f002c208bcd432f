"""Transformer Grammars' attention (synlm.transition.attention.tg): the masks and relative
positions of small trees written out by hand; equality with the released masking code of
deepmind/transformer_grammars on the trees of tests/fixtures/tg (made by
benchmarks/tg_reference.py); causality; a row's layout independent of the other rows and
of padding; ``TGState.step`` giving the rows of ``tg_layout`` one action at a time, also
after row selection; one-line errors for action sequences that build no tree."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import torch
from torch import Tensor

from synlm.errors import InputError, SettingError
from synlm.syntax.actions import ActionError
from synlm.transition.attention.tg import TGLayout, TGState, tg_layout

FIXTURE = Path(__file__).parent / "fixtures" / "tg" / "reference.json"
S, R, A, B, C = 0, 1, 2, 3, 4  # SHIFT, REDUCE and three NT ids


@cache
def reference() -> dict:
    """The released code's fixture (benchmarks/tg_reference.py)."""
    return json.loads(FIXTURE.read_text())


def records() -> list[dict]:
    """Every tree of the fixture: the NLTK sample's, then the hand-drawn ones."""
    return reference()["nltk"] + reference()["hand"]


def grid(text: str) -> tuple[Tensor, Tensor]:
    """A mask and its relative positions written one query row a line, one column a key:
    ``.`` not attended, a number the relative position of an attended key."""
    rows = [line.split() for line in text.strip().splitlines()]
    mask = torch.tensor([[c != "." for c in row] for row in rows])
    relative = torch.tensor([[0 if c == "." else int(c) for c in row] for row in rows])
    return mask, relative


def padded(sequences: list[list[int]], width: int | None = None) -> Tensor:
    """Action sequences right-padded with -1 to ``width`` (default: the longest)."""
    width = max(map(len, sequences), default=0) if width is None else width
    return torch.tensor([s + [-1] * (width - len(s)) for s in sequences],
                        dtype=torch.long).reshape(len(sequences), width)


def check_hand(actions: list[int], text: str, depth: list[int]) -> TGLayout:
    """The layout of one action sequence has the mask and relative positions of ``text``
    (``grid``) and the depths ``depth``."""
    layout = tg_layout(torch.tensor([actions]))
    mask, relative = grid(text)
    assert layout.lengths.tolist() == [len(depth)]
    assert torch.equal(layout.mask[0], mask)
    assert torch.equal(layout.relative[0], relative)
    assert layout.depth[0].tolist() == depth
    return layout


# --- small trees by hand -----------------------------------------------------------------------

def test_a_three_word_sentence() -> None:
    """(A (B the cat) (C meows)): tokens <s> (A (B the cat B) B) (C meows C) C) A) A)."""
    layout = check_hand([A, B, S, S, R, C, S, R, R], """
        0  .  .  .  .  .  .  .  .  .  .  .  .
        1  0  .  .  .  .  .  .  .  .  .  .  .
        2  1  0  .  .  .  .  .  .  .  .  .  .
        3  2  1  0  .  .  .  .  .  .  .  .  .
        3  2  1  0  0  .  .  .  .  .  .  .  .
        .  .  0 -1 -1  0  .  .  .  .  .  .  .
        2  1  .  .  .  0  0  .  .  .  .  .  .
        2  1  .  .  .  0  .  0  .  .  .  .  .
        3  2  .  .  .  1  .  1  0  .  .  .  .
        .  .  .  .  .  .  .  0 -1  0  .  .  .
        2  1  .  .  .  0  .  .  .  0  0  .  .
        .  0  .  .  .  -1 .  .  .  -1 .  0  .
        1  .  .  .  .  .  .  .  .  .  .  0  0
    """, depth=[0, 1, 2, 3, 3, 2, 2, 2, 3, 2, 2, 1, 1])
    assert layout.source[0].tolist() == [-1, 0, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 8]
    assert layout.compose[0].nonzero()[:, 0].tolist() == [5, 9, 11]
    assert layout.opening[0].tolist() == [-1, -1, -1, -1, -1, 2, 2, -1, -1, 7, 7, 1, 1]


def test_a_unary_chain() -> None:
    """(A (B (B run))): each COMPOSE reads its opening bracket and the one child left."""
    check_hand([A, B, B, S, R, R, R], """
        0  .  .  .  .  .  .  .  .  .  .
        1  0  .  .  .  .  .  .  .  .  .
        2  1  0  .  .  .  .  .  .  .  .
        3  2  1  0  .  .  .  .  .  .  .
        4  3  2  1  0  .  .  .  .  .  .
        .  .  .  0 -1  0  .  .  .  .  .
        3  2  1  .  .  0  0  .  .  .  .
        .  .  0  .  .  -1 .  0  .  .  .
        2  1  .  .  .  .  .  0  0  .  .
        .  0  .  .  .  .  .  -1 .  0  .
        1  .  .  .  .  .  .  .  .  0  0
    """, depth=[0, 1, 2, 3, 4, 3, 3, 2, 2, 1, 1])


def test_a_right_branching_tree() -> None:
    """(A a (B b (C c d))): the stack grows to the deepest word, then each constituent
    folds into its closing bracket."""
    check_hand([A, S, B, S, C, S, S, R, R, R], """
        0  .  .  .  .  .  .  .  .  .  .  .  .  .
        1  0  .  .  .  .  .  .  .  .  .  .  .  .
        2  1  0  .  .  .  .  .  .  .  .  .  .  .
        2  1  0  0  .  .  .  .  .  .  .  .  .  .
        3  2  1  1  0  .  .  .  .  .  .  .  .  .
        3  2  1  1  0  0  .  .  .  .  .  .  .  .
        4  3  2  2  1  1  0  .  .  .  .  .  .  .
        4  3  2  2  1  1  0  0  .  .  .  .  .  .
        .  .  .  .  .  0 -1 -1  0  .  .  .  .  .
        3  2  1  1  0  .  .  .  0  0  .  .  .  .
        .  .  .  0 -1  .  .  .  -1 .  0  .  .  .
        2  1  0  .  .  .  .  .  .  .  0  0  .  .
        .  0 -1  .  .  .  .  .  .  .  -1 .  0  .
        1  .  .  .  .  .  .  .  .  .  .  .  0  0
    """, depth=[0, 1, 2, 2, 3, 3, 4, 4, 3, 3, 2, 2, 1, 1])


def test_relative_positions_are_not_clipped() -> None:
    """A right-branching tree 70 constituents deep: a word reads the start token at its
    full depth difference (the model clips, not the layout)."""
    deep = 70
    layout = tg_layout(torch.tensor([[A, S] * deep + [R] * deep]))
    word = 2 * deep  # the last word's position
    assert int(layout.depth[0, word]) == deep + 1
    assert int(layout.relative[0, word, 0]) == deep + 1
    assert int(layout.relative[0].max()) == deep + 1 and int(layout.relative[0].min()) == -1


def test_a_row_without_actions_is_the_start_token() -> None:
    """A row of padding alone (or no action column at all) is the start token alone."""
    layout = tg_layout(padded([[], [A, S, R]]))
    assert layout.lengths.tolist() == [1, 5]
    assert layout.mask[0].nonzero().tolist() == [[i, 0] for i in range(5)]
    assert not layout.relative[0].any()
    assert tg_layout(torch.zeros(2, 0, dtype=torch.long)).mask.shape == (2, 1, 1)


# --- the released code -------------------------------------------------------------------------

def test_the_fixture_is_the_released_rule_with_the_papers_settings() -> None:
    """The fixture ran the paper's settings and holds long and deep trees."""
    ref = reference()["reference"]
    assert ref["rule"] == "StackComposeDoubleClosingNT"
    assert ref["relative_pos"] == "delta_depth" and ref["transparency_prob"] == 0.0
    assert ref["transparency_depth_threshold"] == -1 and not ref["use_different_attn_fns"]
    nltk = reference()["nltk"]
    longest = max(len(r["types"]) for r in nltk)
    assert len(nltk) > 50 and longest > 700 and max(max(r["depth"]) for r in nltk) > 25


@pytest.mark.parametrize("index", range(len(records())),
                         ids=[r["source"].rsplit("/", 1)[-1] for r in records()])
def test_masks_and_relative_positions_equal_the_released_codes(index: int) -> None:
    """Per tree: the tokens (their types), depths, attended keys and relative positions of
    the released StackComposeDoubleClosingNT; every token attends only earlier keys and
    itself."""
    record = records()[index]
    types = reference()["token_types"]
    layout = tg_layout(torch.tensor([record["actions"]]))
    tokens = len(record["types"])
    assert layout.lengths.tolist() == [tokens] and layout.mask.shape == (1, tokens, tokens)
    actions = torch.tensor(record["actions"])
    source = layout.source[0]
    kind = torch.where(source < 0, types["SOS"], torch.where(
        actions[source.clamp(min=0)] == S, types["TERMINAL"], types["OPENING_NT"]))
    kind = torch.where(layout.opening[0] >= 0, types["CLOSING_NT_2"], kind)
    kind = torch.where(layout.compose[0], types["CLOSING_NT"], kind)
    assert kind.tolist() == record["types"]
    assert layout.opening[0].tolist() == openings(record["types"], types)
    assert layout.depth[0].tolist() == record["depth"]
    attend = [row.nonzero()[:, 0].tolist() for row in layout.mask[0]]
    assert attend == record["attend"]
    assert [layout.relative[0, i, keys].tolist() for i, keys in enumerate(attend)] == \
        record["relative"]
    assert not layout.relative[0][~layout.mask[0]].any()
    assert torch.equal(layout.mask[0], layout.mask[0].tril())
    assert layout.mask[0].diagonal().all()


def openings(token_types: list[int], types: dict[str, int]) -> list[int]:
    """The position of the opening bracket of each closing bracket's copies; -1 elsewhere."""
    out, stack = [], []
    for i, t in enumerate(token_types):
        if t == types["OPENING_NT"]:
            stack.append(i)
        out.append(stack[-1] if t in (types["CLOSING_NT"], types["CLOSING_NT_2"]) else -1)
        if t == types["CLOSING_NT_2"]:
            stack.pop()
    return out


# --- batches -----------------------------------------------------------------------------------

def batch_sequences() -> list[list[int]]:
    """Rows of different lengths: the hand-drawn trees and some short NLTK trees."""
    short = sorted((r["actions"] for r in reference()["nltk"]), key=len)[:5]
    return [r["actions"] for r in reference()["hand"]] + short + [[]]


def test_a_rows_layout_does_not_depend_on_the_other_rows_or_padding() -> None:
    sequences = batch_sequences()
    width = max(map(len, sequences))
    for extra in (0, 3):
        layout = tg_layout(padded(sequences, width + extra))
        tokens = layout.mask.size(1)
        assert tokens == int(layout.lengths.max())
        for row, actions in enumerate(sequences):
            alone = tg_layout(padded([actions]))
            n = int(alone.lengths[0])
            assert int(layout.lengths[row]) == n
            for name in ("source", "compose", "opening", "depth"):
                ours = getattr(layout, name)[row]
                assert torch.equal(ours[:n], getattr(alone, name)[0]), name
                assert not ours[n:].any() if name in ("compose", "depth") else \
                    (ours[n:] == -1).all()
            assert torch.equal(layout.mask[row, :n, :n], alone.mask[0])
            assert torch.equal(layout.relative[row, :n, :n], alone.relative[0])
            assert not layout.mask[row, :n, n:].any()
            padding = torch.zeros(tokens - n, tokens, dtype=torch.bool)
            padding[:, 0] = True
            assert torch.equal(layout.mask[row, n:], padding)
            assert not layout.relative[row, n:].any()
        assert torch.equal(layout.mask, layout.mask.tril())


# --- one action at a time ----------------------------------------------------------------------

def schedule(sequences: list[list[int]], seed: int) -> Tensor:
    """(R, steps): each row's actions in order, with -1 steps (no action) at random places
    and at different times for different rows, and -1 after the row's last action."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for actions in sequences:
        row: list[int] = []
        for a in actions:
            row += [-1] * int(torch.randint(0, 3, (), generator=gen)) + [a]
        rows.append(row)
    return padded(rows)


def replay(state: TGState, steps: Tensor, layout: TGLayout, rows: list[int]) -> None:
    """Step ``state`` through ``steps`` (R, n); each step's masks must be the rows of
    ``layout`` (its rows ``rows``) at the new tokens' positions."""
    capacity = state.capacity
    for t in range(steps.size(1)):
        out = state.step(steps[:, t])
        assert out.allowed.shape == (len(rows), 1, 2, capacity)
        assert out.relative is not None and out.relative.shape == (len(rows), 2, capacity)
        for i, row in enumerate(rows):
            action = int(steps[i, t])
            assert out.present[i].tolist() == [action == R, action != -1]
            for slot in range(2):
                allowed, relative = out.allowed[i, 0, slot], out.relative[i, slot]
                if not out.present[i, slot]:
                    assert allowed.nonzero().tolist() == [[0]] and not relative.any()
                    continue
                q = int(out.positions[i, slot])
                n = layout.mask.size(1)
                assert torch.equal(allowed[:n], layout.mask[row, q]), (row, t, slot)
                assert not allowed[n:].any()
                assert torch.equal(relative[:n], layout.relative[row, q])
            if action == R:
                assert out.positions[i].tolist()[1] == out.positions[i].tolist()[0] + 1


@pytest.mark.parametrize("seed", [0, 1])
def test_steps_give_the_rows_of_the_layout(seed: int) -> None:
    """Rows of different lengths, each idling (-1) at its own times: every step's masks and
    relative positions are the layout's rows; the state ends as the layout (tokens, depths,
    only the start token and the root's closing bracket on the stack)."""
    sequences = batch_sequences()
    layout = tg_layout(padded(sequences))
    steps = schedule(sequences, seed)
    capacity = int(layout.lengths.max())  # exactly enough for the longest row
    state = TGState.initial(len(sequences), capacity)
    replay(state, steps, layout, list(range(len(sequences))))
    assert torch.equal(state.length, layout.lengths)
    n = layout.depth.size(1)
    assert torch.equal(state.depth[:, :n], layout.depth)
    assert state.n_open.eq(0).all() and not state.open.any()
    for row, actions in enumerate(sequences):
        expected = [0] if not actions else [0, int(layout.lengths[row]) - 2]
        assert state.on_stack[row].nonzero()[:, 0].tolist() == expected


def test_a_fixture_tree_step_by_step_on_a_larger_cache() -> None:
    """The deepest NLTK tree of the fixture, stepped with spare cache positions."""
    deepest = max(reference()["nltk"], key=lambda r: max(r["depth"]))["actions"]
    layout = tg_layout(padded([deepest]))
    state = TGState.initial(1, int(layout.lengths[0]) + 7)
    replay(state, padded([deepest]), layout, [0])


def test_select_and_assign_keep_rows_intact() -> None:
    """Half way through, rows selected (repeated, reordered; new tensors or into ``out``) and
    rows assigned from another state go on exactly as the rows they copy."""
    sequences = batch_sequences()[:6]
    layout = tg_layout(padded(sequences))
    steps = padded(sequences)
    half = steps.size(1) // 2
    capacity = int(layout.lengths.max()) + 2
    state = TGState.initial(len(sequences), capacity)
    replay(state, steps[:, :half], layout, list(range(len(sequences))))

    picked = [2, 0, 2, 5]
    index = torch.tensor(picked)
    chosen = state.select(index)
    into = state.select(index, out=TGState.initial(len(picked), capacity))
    assert into.capacity == capacity
    for copy in (chosen, into):
        replay(copy, steps[index, half:], layout, picked)
    replay(state, steps[:, half:], layout, list(range(len(sequences))))  # not disturbed

    other = TGState.initial(2, capacity)
    replay(other, steps[[4, 1], :half], layout, [4, 1])
    target = TGState.initial(3, capacity)
    target.assign(torch.tensor([0, 2]), other, torch.tensor([1, 0]))
    rest = steps[[1, 0, 4], half:].clone()
    rest[1] = -1  # row 1 is still fresh: it only waits
    replay(target, rest, layout, [1, 0, 4])


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("actions", "message"), [
    ([R], r"^row 1, action 0 \(REDUCE\): no constituent is open; expected NT\(X\) first$"),
    ([S, R], r"^row 1, action 0 \(SHIFT\): no constituent is open"),
    ([A, S, R, B, S, R], r"^row 1, action 3 \(NT id 3\): the tree is complete \(its root "
                         r"closed at action 2\); expected padding \(-1\)$"),
    ([A, S, R, S], r"^row 1, action 3 \(SHIFT\): the tree is complete"),
    ([A, S, R, R], r"^row 1, action 3 \(REDUCE\): the tree is complete"),
    ([A, B, R], r"^row 1, action 2 \(REDUCE\) would close an empty constituent \(opened by "
                r"action 1\); expected SHIFT or NT\(X\)$"),
    ([A, B, S, R], r"^row 1: 1 constituent\(s\) left open after the last action \(3\); "
                   r"expected 1 more REDUCE$"),
    ([A, -1, S, R], r"^row 1, action 2 \(SHIFT\) follows padding \(-1\); expected padding "
                    r"only at the end$"),
    ([A, S, -2, R], r"^row 1, action 2: unknown action id -2; expected -1 \(no action\)"),
])
def test_bad_sequences_are_one_line_errors(actions: list[int], message: str) -> None:
    """A row that builds no tree: the error names the row, the action and what was expected."""
    with pytest.raises(ActionError, match=message) as err:
        tg_layout(padded([[A, S, R], actions]))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("before", "action", "message"), [
    ([], R, r"^row 1, action 0 \(REDUCE\): no constituent is open; expected NT\(X\) first$"),
    ([A, S, R], B, r"^row 1, action 3 \(NT id 3\): the tree is complete \(its root closed "
                   r"at action 2\)"),
    ([A, S, R], S, r"^row 1, action 3 \(SHIFT\): the tree is complete"),
    ([A, B], R, r"^row 1, action 2 \(REDUCE\) would close an empty constituent"),
    ([A], -3, r"^row 1, action 1: unknown action id -3"),
])
def test_bad_steps_are_one_line_errors(before: list[int], action: int, message: str) -> None:
    """The same for a step: the action's index is the row's count of actions read."""
    state = TGState.initial(2, 10)
    for a in before:
        state.step(torch.tensor([-1, a]))
    with pytest.raises(ActionError, match=message) as err:
        state.step(torch.tensor([A, action]))
    assert "\n" not in str(err.value)


def test_capacity_bounds_the_tokens() -> None:
    """A step past the cache's positions is a one-line error; a REDUCE needs two."""
    state = TGState.initial(2, 4)
    for a in (A, S):
        state.step(torch.tensor([a, -1]))
    state.step(torch.tensor([S, -1]))  # position 3, the last one
    with pytest.raises(InputError, match=r"^row 0, action 3 \(REDUCE\): the row holds 4 "
                                         r"tokens and capacity=4; a REDUCE needs 2 more$"):
        state.step(torch.tensor([R, -1]))
    state = TGState.initial(1, 4)
    for a in (A, S):
        state.step(torch.tensor([a]))
    with pytest.raises(InputError, match="a REDUCE needs 2 more"):
        state.step(torch.tensor([R]))  # one position left, a REDUCE takes two
    with pytest.raises(SettingError, match="capacity"):
        TGState.initial(1, 0)


def test_bad_tensors_are_one_line_errors() -> None:
    """Tensors of the wrong shape or type are one-line errors."""
    with pytest.raises(InputError, match=r"expected actions as a \(batch, actions\) integer"):
        tg_layout(torch.tensor([A, S, R]))
    with pytest.raises(InputError, match=r"expected actions as a \(batch, actions\) integer"):
        tg_layout(torch.tensor([[2.0, 0.0, 1.0]]))
    with pytest.raises(InputError, match="expected one action a row, shape"):
        TGState.initial(2, 5).step(torch.tensor([A]))
