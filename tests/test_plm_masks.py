"""PLM-mask's attention masks (``synlm.transition.attention.plm_mask``): hand-drawn trees, the masks
IBM/transformers-struct-guidance ``src/plm-gen.py`` gives every tree of
``tests/fixtures/plm/masks.json`` (``benchmarks/plm_reference.py masks``), causality, row
independence, and the one-step form beam search uses against the whole-sequence form."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from nltk import Tree
from torch import Tensor

from synlm.errors import InputError, SettingError
from synlm.syntax.actions import ActionError
from synlm.syntax.plm import PLM_REDUCE, plm_tokens
from synlm.syntax.readers import read_trees
from synlm.syntax.trees import clean_tree
from synlm.transition.attention.plm_mask import PLMMaskState, innermost_open, plm_mask_attention

FIXTURES = Path(__file__).parent / "fixtures"
MASKS = json.loads((FIXTURES / "plm" / "masks.json").read_text())
SAMPLE = FIXTURES / "syntax" / "sample.mrg"
N, S, R = -1, 0, 1  # no action, SHIFT, REDUCE
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a GPU"))]


def picture(rows: str) -> Tensor:
    """A mask drawn one query row a line, ``#`` allowed, ``.`` not."""
    return torch.tensor([[c == "#" for c in line.strip()] for line in rows.strip().split("\n")])


def causal(t: int) -> Tensor:
    """(t, t) bool: key j <= query i."""
    return torch.ones(t, t, dtype=torch.bool).tril()


def masks(actions: list[int], n_heads: int = 3) -> Tensor:
    """(H, T, T) masks of one row."""
    return plm_mask_attention(torch.tensor([actions]), n_heads)[0]


# (S (NP The cat) (VP sat)): [START] NT(S) NT(NP) The cat REDUCE NT(VP) sat REDUCE REDUCE
CAT = [2, 3, S, S, R, 4, S, R, R]
CAT_BUFFER = picture("""
    #.........
    #.........
    ##........
    ##........
    ##........
    #.........
    ######....
    ######....
    #.........
    ##########
""")
CAT_STACK = picture("""
    #.........
    .#........
    ..#.......
    ..##......
    ..###.....
    .#####....
    ......#...
    ......##..
    .########.
    ##########
""")


def test_a_three_word_sentence() -> None:
    """An NT token sees what precedes it (buffer) and itself (stack); a word its open
    constituent from its NT on; a REDUCE the parent; after the root, every head is causal."""
    got = masks(CAT)
    assert torch.equal(got[0], CAT_BUFFER) and torch.equal(got[1], CAT_STACK)
    assert torch.equal(got[2], causal(10))
    assert innermost_open(torch.tensor([CAT])).tolist() == [[-1, 1, 2, 2, 2, 1, 6, 6, 1, -1]]


def test_a_unary_chain() -> None:
    """(S (VP (NP it))): each NT opens inside the last; the REDUCEs step back out."""
    got = masks([2, 3, 4, S, R, R, R])
    assert torch.equal(got[0], picture("""
        #.......
        #.......
        ##......
        ###.....
        ###.....
        ##......
        #.......
        ########
    """))
    assert torch.equal(got[1], picture("""
        #.......
        .#......
        ..#.....
        ...#....
        ...##...
        ..####..
        .######.
        ########
    """))


def test_a_deeply_right_branching_tree() -> None:
    """(A a (B b (C c d))): the buffer head of a word deep inside sees every earlier
    constituent's tokens, the stack head only its own constituent."""
    got = masks([2, S, 3, S, 4, S, S, R, R, R])
    assert torch.equal(got[0], picture("""
        #..........
        #..........
        #..........
        ###........
        ###........
        #####......
        #####......
        #####......
        ###........
        #..........
        ###########
    """))
    assert torch.equal(got[1], picture("""
        #..........
        .#.........
        .##........
        ...#.......
        ...##......
        .....#.....
        .....##....
        .....###...
        ...######..
        .#########.
        ###########
    """))


def test_other_heads_are_causal_and_the_heads_can_be_chosen() -> None:
    got = plm_mask_attention(torch.tensor([CAT]), 4, buffer_head=3, stack_head=1)[0]
    assert torch.equal(got[3], CAT_BUFFER) and torch.equal(got[1], CAT_STACK)
    assert torch.equal(got[0], causal(10)) and torch.equal(got[2], causal(10))


def _expected(tree: dict[str, Any]) -> Tensor:
    """(12, T, T) bool: the reference's mask described by a fixture tree, with the causal
    mask GPT-2 applies on top of it."""
    t = len(tree["actions"]) + 1
    mask = causal(t).repeat(MASKS["n_heads"], 1, 1)
    keys = torch.arange(t)
    for head in (MASKS["buffer_head"], MASKS["stack_head"]):
        bounds = torch.tensor(tree[f"head{head}"]).view(t, 2)
        mask[head] &= (keys >= bounds[:, :1]) & (keys <= bounds[:, 1:])
    return mask


def _padded(rows: list[list[int]], width: int | None = None) -> Tensor:
    width = max(map(len, rows)) if width is None else width
    return torch.tensor([row + [N] * (width - len(row)) for row in rows])


def test_every_fixture_tree_as_the_reference_masks_it() -> None:
    """Each tree alone: the reference's mask (heads 0 and 1 restricted, the other ten causal)
    and its buffer/stack settings."""
    assert (MASKS["n_heads"], MASKS["buffer_head"], MASKS["stack_head"]) == (12, 0, 1)
    assert len(MASKS["trees"]) == 64
    assert max(len(tree["actions"]) for tree in MASKS["trees"]) == 573
    for tree in MASKS["trees"]:
        got = plm_mask_attention(torch.tensor([tree["actions"]]), 12)[0]
        assert torch.equal(got, _expected(tree)), (tree["source"], tree["index"])


@pytest.mark.parametrize("device", DEVICES)
def test_every_fixture_tree_in_one_padded_batch(device: str) -> None:
    trees = MASKS["trees"]
    actions = _padded([tree["actions"] for tree in trees]).to(device)
    got = plm_mask_attention(actions, 12).cpu()
    assert got.shape == (len(trees), 12, actions.size(1) + 1, actions.size(1) + 1)
    for b, tree in enumerate(trees):
        t = len(tree["actions"]) + 1
        assert torch.equal(got[b, :, :t, :t], _expected(tree)), (tree["source"], tree["index"])
        assert not got[b, :, :t, t:].any()  # no key past the row's tokens
        assert got[b, :, t:, 0].all() and not got[b, :, t:, 1:].any()  # padding: key 0


def _synlm_ids(tokens: list[str]) -> list[int]:
    labels = MASKS["nt_labels"]
    return [R if t == PLM_REDUCE else 2 + labels.index(t[3:-1]) if t.startswith("NT(") else S
            for t in tokens]


def test_the_fixture_actions_are_synlms_for_the_bundled_sample() -> None:
    """The bundled sample's fixture rows hold the ids of synlm's own PLM tokens."""
    trees = [tree for tree, _ in read_trees(SAMPLE)]
    fixture = {(t["source"], t["index"]): t["actions"] for t in MASKS["trees"]}
    for i, tree in enumerate(trees):
        assert _synlm_ids(plm_tokens(clean_tree(tree))) == fixture["sample", i]
        assert _synlm_ids(plm_tokens(Tree("", [tree]))) == fixture["sample_raw", i]


def random_actions(rng: random.Random, words: int, labels: int = 5) -> list[int]:
    """The top-down actions of a random tree over ``words`` words (NT ids 2 to 1 +
    ``labels``): every constituent non-empty, the root closed last."""
    out: list[int] = []

    def build(n: int) -> None:
        out.append(2 + rng.randrange(labels))
        left = n
        while left:
            size = rng.randint(1, left)
            if size == n:  # a unary child, then stop
                size = n if rng.random() < 0.2 else max(1, n - 1)
            if size == 1 and rng.random() < 0.7:
                out.append(S)
            else:
                build(size)
            left -= size
        out.append(R)

    build(words)
    return out


def _random_rows(seed: int, rows: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [random_actions(rng, rng.randint(1, 8)) for _ in range(rows)]


def test_causal_and_never_empty() -> None:
    for seed in range(20):
        rows = _random_rows(seed, 5)
        got = plm_mask_attention(_padded(rows), 6, buffer_head=4, stack_head=2)
        t = got.size(-1)
        assert not (got & ~causal(t)).any()
        assert got.any(-1).all()


def test_row_independence() -> None:
    """A row's mask is the same alone, beside other rows, and with more padding."""
    rows = _random_rows(7, 6)
    together = plm_mask_attention(_padded(rows, max(map(len, rows)) + 4), 12)
    for b, row in enumerate(rows):
        alone = plm_mask_attention(torch.tensor([row]), 12)[0]
        t = len(row) + 1
        assert torch.equal(together[b, :, :t, :t], alone)
        changed = [list(r) for r in rows]
        for other in range(len(rows)):
            if other != b:
                changed[other] = random_actions(random.Random(other), 3)
        again = plm_mask_attention(_padded(changed), 12)
        assert torch.equal(again[b, :, :t, :t], alone)


def _schedule(rows: list[list[int]], seed: int) -> list[list[int]]:
    """Per step, each row's next action or -1 (rows pause at random and finish at different
    times)."""
    rng = random.Random(seed)
    queues = [list(row) for row in rows]
    steps = []
    while any(queues):
        steps.append([q.pop(0) if q and rng.random() < 0.7 else N for q in queues])
    return steps


@pytest.mark.parametrize("device", DEVICES)
def test_steps_match_the_whole_sequence(device: str) -> None:
    rows = [*_random_rows(3, 7), MASKS["trees"][0]["actions"]]
    capacity = max(map(len, rows)) + 3
    whole = plm_mask_attention(_padded(rows, capacity - 1), 12).to(device)
    state = PLMMaskState.initial(len(rows), capacity, 12, device=device)
    counts = [1] * len(rows)
    for step in _schedule(rows, 11):
        out = state.step(torch.tensor(step, device=device))
        assert out.relative is None and out.allowed.shape == (len(rows), 12, 1, capacity)
        assert out.positions.tolist() == [[c] for c in counts]
        assert out.present.tolist() == [[a != N] for a in step]
        for b, action in enumerate(step):
            if action == N:
                assert out.allowed[b, :, 0, 0].all() and not out.allowed[b, :, 0, 1:].any()
            else:
                assert torch.equal(out.allowed[b, :, 0], whole[b, :, counts[b]])
                counts[b] += 1
    assert state.length.tolist() == counts == [len(row) + 1 for row in rows]
    assert state.depth.tolist() == [0] * len(rows)


def _run(state: PLMMaskState, steps: list[list[int]]) -> list[Tensor]:
    return [state.step(torch.tensor(step)).allowed for step in steps]


def test_select_and_assign_keep_rows() -> None:
    rows = _random_rows(5, 3)
    capacity = max(map(len, rows)) + 1
    steps = [[row[i] if i < len(row) else N for row in rows] for i in range(capacity - 1)]
    full = _run(PLMMaskState.initial(3, capacity, 4), steps)
    for cut in (1, 3, 5):
        state = PLMMaskState.initial(3, capacity, 4)
        _run(state, steps[:cut])
        index = torch.tensor([2, 0, 2])
        picked = state.select(index)
        assert (picked.n_heads, picked.capacity, picked.buffer_head) == (4, capacity, 0)
        into = PLMMaskState.initial(3, capacity, 4)
        assert state.select(index, out=into) is into
        rest = [[step[i] for i in index.tolist()] for step in steps[cut:]]
        want = [m[index] for m in full[cut:]]
        for other in (picked, into):
            assert all(torch.equal(a, b) for a, b in zip(_run(other, rest), want, strict=True))
        target = PLMMaskState.initial(3, capacity, 4)
        _run(target, [[rows[1][0], N, N]])  # row 0 of the target holds something else
        target.assign(torch.tensor([0, 2]), state, torch.tensor([1, 1]))
        rest = [[step[1], N, step[1]] for step in steps[cut:]]
        got = _run(target, rest)
        for a, b in zip(got, full[cut:], strict=True):
            assert torch.equal(a[0], b[1]) and torch.equal(a[2], b[1])


def one_line(err: pytest.ExceptionInfo[BaseException], *words: str) -> None:
    """The error's message is one line naming each of ``words``."""
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_bad_heads() -> None:
    actions = torch.tensor([CAT])
    with pytest.raises(SettingError) as err:
        plm_mask_attention(actions, 12, buffer_head=1, stack_head=1)
    one_line(err, "stack_head=1", "buffer_head=1")
    with pytest.raises(SettingError) as err:
        plm_mask_attention(actions, 12, buffer_head=12)
    one_line(err, "buffer_head=12", "[0, 12)")
    with pytest.raises(SettingError) as err:
        plm_mask_attention(actions, 4, stack_head=-1)
    one_line(err, "stack_head=-1")
    with pytest.raises(SettingError) as err:
        PLMMaskState.initial(2, 8, 1)
    one_line(err, "stack_head=1", "[0, 1)")
    with pytest.raises(SettingError) as err:
        PLMMaskState.initial(2, 8, 12, buffer_head=3, stack_head=3)
    one_line(err, "stack_head=3")


def test_bad_actions() -> None:
    with pytest.raises(ActionError) as err:
        plm_mask_attention(torch.tensor([CAT, [2, S, R, R, N, N, N, N, N]]), 12)
    one_line(err, "row 1", "action 3", "REDUCE", "none is open")
    with pytest.raises(ActionError) as err:
        plm_mask_attention(torch.tensor([[2, S, N, R]]), 12)
    one_line(err, "row 0", "action 3", "padding")
    with pytest.raises(ActionError) as err:
        plm_mask_attention(torch.tensor([[2, -2, R]]), 12)
    one_line(err, "row 0", "action 1", "id -2")
    with pytest.raises(InputError) as err:
        plm_mask_attention(torch.tensor([CAT], dtype=torch.float), 12)
    one_line(err, "integer")
    with pytest.raises(InputError) as err:
        plm_mask_attention(torch.tensor(CAT), 12)
    one_line(err, "(batch, actions)")


def test_bad_steps() -> None:
    state = PLMMaskState.initial(2, 3, 12)
    with pytest.raises(ActionError) as err:
        state.step(torch.tensor([2, R]))
    one_line(err, "row 1", "REDUCE", "none is open")
    state.step(torch.tensor([2, 2]))
    state.step(torch.tensor([S, N]))
    with pytest.raises(InputError) as err:
        state.step(torch.tensor([R, S]))
    one_line(err, "row 0", "capacity=3")
    with pytest.raises(InputError) as err:
        state.step(torch.tensor([N]))
    one_line(err, "one action a row")
    deep = PLMMaskState.initial(1, 10, 12, max_open=2)
    deep.step(torch.tensor([2]))
    deep.step(torch.tensor([3]))
    with pytest.raises(InputError) as err:
        deep.step(torch.tensor([4]))
    one_line(err, "row 0", "max_open=2")
    assert deep.length.tolist() == [3]  # a refused step changes nothing
