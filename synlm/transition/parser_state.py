"""What every top-down transition LM tracks besides its own network state: where the word
pointer is, how many constituents are open, and which actions are legal next.

Actions are ``synlm.syntax.actions.ActionVocab`` ids: ``SHIFT`` 0, ``REDUCE`` 1, ``NT(X)``
from 2; -1 is "no action" (a padded step, an inactive beam item). Every field is a tensor
over R rows (sentences, or sentences × beam items), so a step of every row is one tensor
operation.

The legal actions are those of Dyer et al. 2016 (§3.1 and its generative variant, §4), with
the bounds of the released batched RNNG (aistairc/rnng-pytorch, ``invalid_action_mask``):

- ``NT(X)`` only while fewer than ``max_open`` constituents are open, after fewer than
  ``max_consecutive`` ``NT`` in a row, while the stack has room for two more items and the
  action budget room for the rest of the sentence;
- ``SHIFT`` only while words remain, a constituent is open and the stack has room;
- ``REDUCE`` only with a constituent open that is not the one just opened (no empty
  constituent) and, while words remain, not the last open one (the root closes last);
- with no constituent open, only ``NT``; after the last word, only ``REDUCE``; a finished
  row (every word generated, every constituent closed) has no legal action.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from synlm.syntax.actions import ActionError
from synlm.transition.structure import RowState

SHIFT, REDUCE, FIRST_NT = 0, 1, 2
#: "No action": the padding of action sequences and the action of an inactive row.
NO_ACTION = -1


@dataclass(frozen=True)
class Limits:
    """Bounds on what a row may do next (``legal_actions``).

    Attributes:
        max_open: most constituents open at once (the reference: 100).
        max_consecutive: most ``NT`` actions in a row (the reference: 8).
        stack_size: stack slots; ``NT`` needs two free, ``SHIFT`` one (None: unbounded).
        max_actions: the action budget of a sentence of n words, ``max(100, 5 n)`` in the
            reference (there n is the batch's longest sentence); ``NT`` needs room for the
            remaining words, the open constituents' ``REDUCE`` and 3 more (None: unbounded).
    """

    max_open: int = 100
    max_consecutive: int = 8
    stack_size: int | None = None
    max_actions: Tensor | None = None  # (R,) long


@dataclass
class ParserState(RowState):
    """Per row (R,) long tensors.

    Attributes:
        pointer: words generated so far.
        top: items on the stack (words, open ``NT``, closed constituents).
        n_open: open constituents.
        consecutive_nts: ``NT`` actions since the last ``SHIFT`` or ``REDUCE``.
        last_action: the previous action (-1 before the first).
        n_actions: actions taken.
    """

    pointer: Tensor
    top: Tensor
    n_open: Tensor
    consecutive_nts: Tensor
    last_action: Tensor
    n_actions: Tensor

    @classmethod
    def initial(cls, rows: int, device: torch.device | str | None = None) -> ParserState:
        def zeros() -> Tensor:  # one tensor a field: ``assign`` writes in place
            return torch.zeros(rows, dtype=torch.long, device=device)

        return cls(zeros(), zeros(), zeros(), zeros(), zeros() + NO_ACTION, zeros())

    def after(self, actions: Tensor, top: Tensor) -> ParserState:
        """The state after each row's action (R,) (-1: the row stays), the stack holding
        ``top`` items (the model's count after a ``REDUCE``)."""
        acted = actions != NO_ACTION
        shift, reduce, opened = actions == SHIFT, actions == REDUCE, actions >= FIRST_NT
        return ParserState(
            pointer=self.pointer + shift.long(),
            top=torch.where(acted, top, self.top),
            n_open=self.n_open + opened.long() - reduce.long(),
            consecutive_nts=torch.where(opened, self.consecutive_nts + 1,
                                        torch.where(acted, 0, self.consecutive_nts)),
            last_action=torch.where(acted, actions, self.last_action),
            n_actions=self.n_actions + acted.long(),
        )

    def finished(self, lengths: Tensor) -> Tensor:
        """(R,) bool: every word generated and every constituent closed."""
        return (self.pointer == lengths) & (self.n_open == 0) & (self.n_actions > 0)

    def legal_actions(self, lengths: Tensor, n_actions: int, limits: Limits) -> Tensor:
        """(R, n_actions) bool: which actions each row may take next (module docstring);
        ``lengths`` (R,): the words of each row's sentence."""
        words_left = self.pointer < lengths
        none_open = self.n_open == 0
        nt_ok = (self.n_open < limits.max_open) & \
            (self.consecutive_nts < limits.max_consecutive) & words_left
        shift_ok = words_left & ~none_open
        reduce_ok = ~none_open & (self.last_action < FIRST_NT) & (self.top >= 2) & \
            ~((self.n_open == 1) & words_left)
        return self.within_limits(lengths, n_actions, limits, shift_ok, reduce_ok, nt_ok,
                                  shift_slots=1, nt_slots=2, reserve=3)

    def within_limits(self, lengths: Tensor, n_actions: int, limits: Limits, shift_ok: Tensor,
                      reduce_ok: Tensor, nt_ok: Tensor, shift_slots: Tensor | int,
                      nt_slots: int, reserve: int, finish_ok: Tensor | None = None) -> Tensor:
        """(R, n_actions) bool: the actions an order allows (``shift_ok``, ``reduce_ok``,
        ``nt_ok``, and ``finish_ok`` for a last column ``FINISH``; (R,) each) within
        ``limits``: a ``SHIFT`` only while the stack has more than ``shift_slots`` free
        slots, an ``NT`` more than ``nt_slots`` and, in the action budget, room for the
        remaining words, the open constituents' ``REDUCE`` and ``reserve`` more."""
        if limits.stack_size is not None:
            nt_ok = nt_ok & (self.top < limits.stack_size - nt_slots)
            shift_ok = shift_ok & (self.top < limits.stack_size - shift_slots)
        if limits.max_actions is not None:
            nt_ok = nt_ok & (limits.max_actions - self.n_actions
                             >= lengths - self.pointer + self.n_open + reserve)
        legal = torch.empty(self.pointer.size(0), n_actions, dtype=torch.bool,
                            device=self.pointer.device)
        legal[:, SHIFT] = shift_ok
        legal[:, REDUCE] = reduce_ok
        legal[:, FIRST_NT:n_actions - (finish_ok is not None)] = nt_ok[:, None]
        if finish_ok is not None:
            legal[:, -1] = finish_ok
        return legal


def stack_depth(actions: Tensor) -> int:
    """The most items any row's stack holds while its top-down ``actions`` (B, A) run (-1
    ends a row): the stack a teacher-forced batch needs, at least 1."""
    deepest = 1
    for b, row in enumerate(actions.tolist()):
        top, opened = 0, []
        for t, action in enumerate(row):
            if action == NO_ACTION:
                break
            if action == REDUCE:
                if not opened:
                    raise ActionError(f"row {b}, action {t} (REDUCE): no open constituent; "
                                      "expected top-down actions from synlm.syntax.actions")
                top = opened.pop()
            else:
                top += 1
                if action >= FIRST_NT:
                    opened.append(top)
            deepest = max(deepest, top)
    return deepest
