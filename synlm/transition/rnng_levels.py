"""Teacher forcing of the top-down RNNG by stack level and tree height (``RNNG.forward``).

With the gold actions known, the stack's work need not run one action at a time:

- a closed constituent's composition reads its label's item and its children's items (word
  and nonterminal embeddings, lower compositions), never a stack LSTM state (Dyer et al. 2016
  §4.1; rnng-pytorch's ``LSTMComposition`` leaves its ``stack_state`` unused): the
  compositions run bottom-up by tree height, the two LSTMs of every constituent of a height
  in the batch stepping together over their children (``compose_by_heights``);
- every item the stack LSTM reads is then known, and an item pushed at stack position p is
  read on the state of the item below it at that moment, pushed at position p - 1 before
  it: the stack LSTM's states depend on each other along chains as long as the deepest
  stack, not the number of actions. One cell call per layer reads every item pushed at
  position p (``stack_by_levels``), each layer's input products of every item in one
  matrix product;
- an action is predicted from the stack top after the action before it: the state of the
  item that action pushed (of the initial item before the first action).

Both run through ``synlm.transition.level_lstm``, an LSTM over a tree of steps with a
backward of its own. The bookkeeping of the tree (which push reads on which state, each
constituent's children and height) is integer work on the actions, done once a batch on the
CPU (``schedule``), as ``stack_depth``'s. Dropout draws a mask per item, per pushed state
between layers and per composition, as the run action by action does: the same
distribution; without dropout the two compute the same numbers (tests/test_rnng_levels.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.syntax.actions import ActionError
from synlm.transition.level_lstm import lstm_by_levels
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, SHIFT, ParserState


@dataclass
class Schedule:
    """Where a teacher-forced batch's stack work runs (module docstring). An item row is k
    for the item of the k-th ``SHIFT`` or ``NT`` of the batch (its word or nonterminal; row
    by row, action by action), K + k for the k-th composition (by height, then as
    ``heights`` orders them), K the batch's ``SHIFT`` and ``NT``; a state row is ``b`` for
    row b's initial item, ``B + k`` for the k-th push (by stack position, then row, then
    action).

    Attributes:
        heights: per tree height 1, 2, ...: its constituents, most children first, as
            ``compose_by_heights`` reads them: the item rows (2, Σ_j n_j) of the forward
            and backward LSTMs' inputs step by step (step 0 the labels, step j the j-th
            child from the left and from the right of the n_j constituents with at least j
            children) and the counts n_j (a Python list).
        pushes: (P,) the item row each push reads, in state-row order.
        below: per stack position 1, 2, ...: for each push there, the state it reads on
            among those of the position below (n_p,) (position 0: the initial items).
        tops: (B, A) the state row each action is predicted from.
        top_position: (B, A) its stack position (the parser's ``top`` before the action).
    """

    heights: list[tuple[Tensor, list[int]]]
    pushes: Tensor
    below: list[Tensor]
    tops: Tensor
    top_position: Tensor


def schedule(actions: Tensor) -> Schedule:
    """The ``Schedule`` of top-down ``actions`` (B, A) (-1: none). As teacher forcing runs
    them, the last column (the longest rows' root ``REDUCE``) is scored, not run."""
    B, A = actions.shape
    compositions: dict[int, list[tuple[int, int, list[int]]]] = {}  # height: (at, label, children)
    pushes: dict[int, list[tuple[int, int]]] = {}  # stack position: (item, state below)
    height: dict[int, int] = {}  # what a REDUCE composes (b·A + t): its height
    item_row: dict[int, int] = {}  # b·A + t: the item row of what action t of row b pushes
    tops = [[0] * A for _ in range(B)]
    top_position = [[0] * A for _ in range(B)]
    for b, row in enumerate(actions.tolist()):
        stack = [-1 - b]  # what pushed each stack position; position 0: the initial item
        opened: list[int] = []  # the stack positions of the open nonterminals
        for t, action in enumerate(row):
            tops[b][t], top_position[b][t] = stack[-1], len(stack) - 1
            if action == NO_ACTION:
                continue
            at = b * A + t
            if action == REDUCE:
                if not opened:
                    raise ActionError(f"row {b}, action {t} (REDUCE): no open constituent; "
                                      "expected top-down actions from synlm.syntax.actions")
                position = opened.pop()
                children = stack[position + 1:]
                height[at] = 1 + max((height.get(c, 0) for c in children), default=0)
                if t < A - 1:
                    compositions.setdefault(height[at], []).append(
                        (at, stack[position], children))
                del stack[position:]
            else:
                item_row[at] = len(item_row)
                if action >= FIRST_NT:
                    opened.append(len(stack))
            if t < A - 1:
                pushes.setdefault(len(stack), []).append((at, stack[-1]))
            stack.append(at)
    for level in compositions.values():
        level.sort(key=lambda c: -len(c[2]))  # most children first
    for at, _, _ in (c for h in sorted(compositions) for c in compositions[h]):
        item_row[at] = len(item_row)
    state_row = {-1 - b: b for b in range(B)}
    first_row = [0, B]  # the first state row of each stack position
    below, pushed = [], []
    for position in range(1, len(pushes) + 1):
        level = pushes[position]
        below.append([state_row[under] - first_row[-2] for _, under in level])
        for at, _ in level:
            state_row[at] = len(state_row)
            pushed.append(item_row[at])
        first_row.append(len(state_row))

    def long(values: list) -> Tensor:
        return torch.tensor(values, dtype=torch.long, device=actions.device)

    heights = []
    for h in sorted(compositions):
        forward, backward, active = [], [], []
        for j in range(len(compositions[h][0][2]) + 1):
            steps = [(label, children) for _, label, children in compositions[h]
                     if len(children) >= j]
            forward += [children[j - 1] if j else label for label, children in steps]
            backward += [children[-j] if j else label for label, children in steps]
            active.append(len(steps))
        heights.append((long([[item_row[i] for i in forward],
                              [item_row[i] for i in backward]]), active))
    return Schedule(heights, long(pushed), [long(rows) for rows in below],
                    long([[state_row[s] for s in row] for row in tops]), long(top_position))


def stack_tops(model: nn.Module, words: Tensor, actions: Tensor) -> tuple[Tensor, Schedule]:
    """The top layer's stack LSTM output each gold action of ``actions`` (B, A) is predicted
    from, (B, A, H), over ``words`` (B, N), and the batch's ``Schedule``: ``model`` a
    top-down ``RNNG`` (its embeddings, ``composition`` and ``stack_lstm``)."""
    B = actions.size(0)
    plan = schedule(actions)
    shift = actions == SHIFT
    pointer = (shift.long().cumsum(1) - shift.long()).clamp(max=words.size(1) - 1)  # (B, A)
    pushes = shift | (actions >= FIRST_NT)  # the K actions that push an item of their own
    shift, word, nt = shift[pushes], words.gather(1, pointer)[pushes], actions[pushes]  # (K,)
    items = torch.where(shift[:, None], model.embedding(word),
                        model.nt_embedding((nt - FIRST_NT).clamp(min=0)))  # (K, W)
    items = model.embedding_dropout(items)
    items = compose_by_heights(model.composition, items, plan.heights)  # (K + comps, W)
    first = model.embedding_dropout(model.initial_item.expand(B, -1))  # (B, W)
    outputs = stack_by_levels(model.stack_lstm, first, items[plan.pushes], plan.below)
    return outputs[plan.tops], plan


def stack_by_levels(stack: nn.Module, first: Tensor, items: Tensor,
                    below: list[Tensor]) -> Tensor:
    """Every push of a teacher-forced batch through the ``stack`` LSTM (an RNNG's
    ``StackLSTM``), stack position by stack position: ``first`` (B, W) the initial items,
    read on the zero state; ``items`` (P, W) the items pushed, those at position 1 first,
    then 2...; ``below[p - 1]`` (n_p,): for each push at position p, the row of the state
    it reads on among those at p - 1 (at 0: ``first``'s) -> (B + P, H): the top layer's
    output after each, ``first``'s then ``items``' order. Dropout between layers as
    ``StackLSTM.forward``'s."""
    sizes = [first.size(0), *map(len, below)]
    x = torch.cat([first, items])  # (B + P, W)
    for layer, lstm in enumerate(stack.cells):
        if layer:
            x = stack.dropout(x)
        # the layer's input products of every push at once, both biases folded in
        gates_in = F.linear(x, lstm.weight_ih, lstm.bias_ih + lstm.bias_hh)  # (B + P, 4H)
        x = lstm_by_levels(gates_in[None], lstm.weight_hh[None], sizes, below)[0]
    return x


def compose_by_heights(composition: nn.Module, items: Tensor,
                       heights: list[tuple[Tensor, list[int]]]) -> Tensor:
    """``composition`` (an RNNG's ``Composition``) of a batch's constituents height by
    height, each height's in one pass with no padding: ``items`` (K, W) the words' and
    labels' items; ``heights`` as ``Schedule.heights`` (a row past K: the composition of a
    lower height) -> (K + Σ C, W): ``items`` then the compositions, equal to
    ``Composition.forward``'s."""
    lstms = (composition.forward_lstm, composition.backward_lstm)
    w_ih = torch.stack([lstm.weight_ih_l0 for lstm in lstms]).transpose(1, 2)  # (2, W, 4W)
    w_hh = torch.stack([lstm.weight_hh_l0 for lstm in lstms])  # (2, 4W, W)
    bias = torch.stack([lstm.bias_ih_l0 + lstm.bias_hh_l0 for lstm in lstms])[:, None]
    for rows, active in heights:
        gates_in = torch.baddbmm(bias, items[rows], w_ih)  # (2, Σ n_j, 4W)
        steps = [torch.arange(n, device=items.device) for n in active[1:]]  # prefixes
        h = lstm_by_levels(gates_in, w_hh, active, steps)  # (2, Σ n_j, W)
        # each constituent's last step: step j ends the rows n_{j+1}..n_j - 1
        start = [0, *itertools.accumulate(active)]
        last = [start[j] + r for j in reversed(range(len(active)))
                for r in range(active[j + 1] if j + 1 < len(active) else 0, active[j])]
        f, b = h[:, torch.tensor(last, device=items.device)]  # (C, W) each, row order
        composed = F.relu(composition.output(composition.dropout(torch.cat([f, b], -1))))
        items = torch.cat([items, composed])
    return items


def parser_before(actions: Tensor, top_position: Tensor) -> ParserState:
    """The parser state before each action of ``actions`` (B, A) (-1: none), as running them
    one at a time leaves it, flattened to B·A rows; ``top_position`` (B, A): the stack's
    items then (``Schedule.top_position``)."""
    acted, opened = actions != NO_ACTION, actions >= FIRST_NT

    def before(counted: Tensor) -> Tensor:  # how many before each action
        return counted.long().cumsum(1) - counted.long()

    steps = torch.arange(actions.size(1), device=actions.device)
    last = torch.where(acted, steps, -1).cummax(1).values  # (B, A) the last acted so far
    last = torch.cat([last.new_full((actions.size(0), 1), -1), last[:, :-1]], 1)
    last_action = torch.where(last >= 0, actions.gather(1, last.clamp(min=0)), NO_ACTION)
    nts = opened.long().cumsum(1)  # NT so far, then back to the last SHIFT or REDUCE
    run = nts - torch.where(acted & ~opened, nts, 0).cummax(1).values
    consecutive = torch.cat([run.new_zeros(actions.size(0), 1), run[:, :-1]], 1)
    fields = {"pointer": before(actions == SHIFT), "top": top_position,
              "n_open": before(opened) - before(actions == REDUCE),
              "consecutive_nts": consecutive, "last_action": last_action,
              "n_actions": before(acted)}
    return ParserState(**{name: field.flatten() for name, field in fields.items()})
