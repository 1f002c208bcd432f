"""What an in-order (left-corner) transition LM tracks besides its network state, and which
of its actions are legal next (Liu & Zhang 2017, with the bounds of the released batched
in-order RNNG, aistairc/rnng-pytorch ``FixedStackInOrderRNNG.invalid_action_mask``).

In-order actions are those of ``synlm.syntax.actions`` (``SHIFT`` 0, ``REDUCE`` 1, ``NT(X)``
from 2) and ``FINISH``, which ends a parse: its id is the last one (``finish``, the action
vocabulary's size). ``NT(X)`` takes the completed item on top of the stack as the first
child of a new constituent; ``REDUCE`` closes the innermost open one. Per row, with n the
sentence's words:

- ``SHIFT`` only while words remain, and, with no constituent open, only as the first
  action (every later word joins an open constituent); the stack needs room for one more
  item (two with none open);
- ``NT(X)`` only over a completed item (not on an empty stack, not right after ``NT``), with
  one free stack slot, with room in the action budget for the remaining words, the open
  constituents' ``REDUCE``, ``FINISH`` and 3 more, and, after the last word, only while
  fewer than ``max_open`` constituents are open and ``consecutive_nts < max_consecutive``;
- ``REDUCE`` only with a constituent open (right after ``NT`` too: a unary constituent),
  and, while words remain, only while fewer than ``max_open`` are open and
  ``consecutive_nts < max_consecutive``;
- ``FINISH`` only when every word is generated, none is open and one item is left; after
  it nothing.

Over subwords (rnng-pytorch's ``subword_end_mask``) a word is its pieces' ``SHIFT`` in a row:
inside a word only ``SHIFT`` is legal (with none open too: the first word's later pieces),
and ``NT(X)`` takes every piece of the word on top as its first child (``corner``).

``consecutive_nts`` counts the ``NT`` of a unary chain: ``SHIFT`` resets it, ``REDUCE``
resets it unless it closes a constituent just opened (``NT`` ``REDUCE`` ``NT`` ``REDUCE``
... counts on). The bound is what stops a chain of unary constituents while words remain
(the released search sets it to 3, the longest unary chain of the PTB).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from synlm.syntax.actions import ActionError
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, SHIFT, Limits, ParserState


@dataclass
class InOrderParserState(ParserState):
    """``ParserState``'s fields, counted the in-order way (module docstring); ``finish``:
    the ``FINISH`` action's id, the same for every row.

    Attributes:
        corner: (R,) long, the stack position (1-based) of the first item of the completed
            unit on top, which an ``NT`` takes as its first child: the top word's first
            piece, or the constituent a ``REDUCE`` closed (rnng-pytorch's
            ``last_subword_begin_idx``).
        inside: (R,) bool, the last ``SHIFT`` generated a piece that does not end its word.
    """

    finish: int = -1
    corner: Tensor | None = None
    inside: Tensor | None = None

    @classmethod
    def initial(cls, rows: int, device: torch.device | str | None = None,
                finish: int = -1) -> InOrderParserState:
        state = super().initial(rows, device)
        state.finish = finish
        state.corner = torch.zeros_like(state.top)
        state.inside = torch.zeros_like(state.top, dtype=torch.bool)
        return state

    def after(self, actions: Tensor, top: Tensor,
              piece_ends: Tensor | None = None) -> InOrderParserState:
        """The state after each row's action (R,) (-1: the row stays), the stack holding
        ``top`` items; ``piece_ends`` (R,): whether the piece a ``SHIFT`` generates ends
        its word (None: words)."""
        acted = actions != NO_ACTION
        shift, reduce = actions == SHIFT, actions == REDUCE
        opened = (actions >= FIRST_NT) & (actions != self.finish)
        closes_unary = reduce & (self.last_action >= FIRST_NT) & (self.last_action != self.finish)
        return InOrderParserState(
            pointer=self.pointer + shift.long(),
            top=torch.where(acted, top, self.top),
            n_open=self.n_open + opened.long() - reduce.long(),
            consecutive_nts=torch.where(opened, self.consecutive_nts + 1,
                                        torch.where(shift | (reduce & ~closes_unary), 0,
                                                    self.consecutive_nts)),
            last_action=torch.where(acted, actions, self.last_action),
            n_actions=self.n_actions + acted.long(),
            finish=self.finish,
            corner=torch.where((shift & ~self.inside) | reduce, top, self.corner),
            inside=self.inside if piece_ends is None else torch.where(
                shift, ~piece_ends, self.inside),
        )

    def finished(self, lengths: Tensor) -> Tensor:
        """(R,) bool: the row's last action was ``FINISH``."""
        return self.last_action == self.finish

    def legal_actions(self, lengths: Tensor, n_actions: int, limits: Limits) -> Tensor:
        """(R, n_actions) bool: which actions each row may take next (module docstring);
        ``lengths`` (R,): the words of each row's sentence; ``FINISH`` is the last action."""
        words_left = self.pointer < lengths
        none_open = self.n_open == 0
        bounded = (self.n_open >= limits.max_open) | \
            (self.consecutive_nts >= limits.max_consecutive)
        after_nt = (self.last_action >= FIRST_NT) & (self.last_action != self.finish)
        over = self.last_action == self.finish
        reduce_ok = ~none_open & ~(bounded & words_left) & ~self.inside
        finish_ok = ~words_left & none_open & (self.top == 1)
        shift_ok = words_left & ~((self.pointer > 0) & none_open & ~self.inside)
        nt_ok = ~after_nt & (self.top > 0) & ~(bounded & ~words_left) & ~self.inside
        legal = self.within_limits(lengths, n_actions, limits, shift_ok, reduce_ok, nt_ok,
                                   shift_slots=torch.where(none_open, 2, 1), nt_slots=1,
                                   reserve=4, finish_ok=finish_ok)
        return legal & ~over[:, None]


def in_order_stack_depth(actions: Tensor, finish: int) -> int:
    """The most items any row's stack holds while its in-order ``actions`` (B, A) run (-1
    or ``finish`` ends a row): the stack a teacher-forced batch needs, at least 1."""
    deepest = 1
    for b, row in enumerate(actions.tolist()):
        top, opened = 0, []
        for t, action in enumerate(row):
            if action in (NO_ACTION, finish):
                break
            if action == REDUCE:
                if not opened:
                    raise ActionError(f"row {b}, action {t} (REDUCE): no open constituent; "
                                      "expected in-order actions from synlm.syntax.actions")
                top = opened.pop()
            elif action >= FIRST_NT:
                if top == 0 or (t > 0 and row[t - 1] >= FIRST_NT):
                    raise ActionError(f"row {b}, action {t} (NT): no completed item to take "
                                      "as its first child")
                opened.append(top)
                top += 1
            else:
                top += 1
            deepest = max(deepest, top)
    return deepest
