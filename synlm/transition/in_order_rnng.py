"""In-order recurrent neural network grammar (Liu & Zhang 2017, "In-Order Transition-based
Constituent Parsing"), generative and batched as Noji & Oseki 2021 (their released
``fixed_stack_in_order_models.FixedStackInOrderRNNG``).

The model is the top-down ``RNNG`` (``synlm.transition.rnng``: stack LSTM, composition,
action and word softmaxes, the same parameters) run on the in-order action sequence of a
tree, ``synlm.syntax.actions.oracle(tree, "in_order")``, closed by ``FINISH``::

    log p(x, y) = Σ_t log p(a_t | a_<t) + log p(FINISH | a) + Σ_{SHIFT} log p(x_i | a_<t)

A constituent's first child is built first; ``NT(X)`` then projects X over it: the item on
top of the stack becomes X's first child, X's embedding taking its stack position and the
child moving one up; the stack LSTM reads X's embedding on top of the state that has read the
child (it reads the items in the order of the actions, not of the stack). ``REDUCE`` pops
X's children c_1..c_m (c_1 the left corner) and pushes their composition, as top-down::

    comp = ReLU(W_c · drop([LSTM_fwd(X, c_1..c_m); LSTM_bwd(X, c_m..c_1)]) + b_c)

which the stack LSTM reads on the state below X. ``FINISH`` (the last action id,
``n_actions - 1``) ends a parse with one closed constituent left; its probability counts in
log p(x, y) as the released code counts it. The legal actions and the bound on consecutive
``NT`` (3, as the released search sets it for in-order models) are
``synlm.transition.in_order_state``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor, nn

from synlm.transition.in_order_state import InOrderParserState, in_order_stack_depth
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, SHIFT
from synlm.transition.rnng import RNNG, RNNGOutput, RNNGState
from synlm.transition.stack_pool import PooledState, advance_in_order


class InOrderRNNG(RNNG):
    """A batched generative in-order RNNG (module docstring).

    Args:
        vocab_size: V, the word vocabulary (the DataModule's).
        n_actions: the action vocabulary (``ActionVocab``: SHIFT, REDUCE, NT(X)...);
            the model adds ``FINISH`` after them.
        input_size: W, as ``RNNG``'s.
        hidden_size: H, as ``RNNG``'s.
        num_layers: L, as ``RNNG``'s.
        dropout: as ``RNNG``'s.
        legal_softmax: as ``RNNG``'s (the released code trains over every action).
        max_open: most constituents open at once in search.
        max_consecutive: most ``NT`` of a unary chain (``in_order_state``; the released
            search's 3).
    """

    #: The action order it reads (``data.action_order``).
    action_orders: ClassVar[tuple[str, ...]] = ("in_order",)
    #: ``FINISH``, which ends every sentence's actions (the released ``train.py`` counts it).
    closing_actions: ClassVar[int] = 1
    #: After the last word ``NT``, ``REDUCE`` and ``FINISH`` compete (``TransitionModel``).
    closes_without_choice: ClassVar[bool] = False

    def __init__(self, vocab_size: int, n_actions: int, input_size: int = 256,
                 hidden_size: int = 256, num_layers: int = 2, dropout: float = 0.3,
                 legal_softmax: bool = False, max_open: int = 100,
                 max_consecutive: int = 3) -> None:
        super().__init__(vocab_size, n_actions, input_size, hidden_size, num_layers, dropout,
                         legal_softmax, max_open, max_consecutive)
        self.n_actions = n_actions + 1
        self.finish_action = n_actions
        self.action_decoder = nn.Linear(input_size, self.n_actions)

    def tree_actions(self, actions: Sequence[int]) -> list[int]:
        """A parse's actions without its ``FINISH``."""
        return [a for a in actions if a != self.finish_action]

    def initial_state(self, rows: int, stack_size: int, max_actions: int | None = None,
                      traced: bool = False) -> RNNGState:
        """``RNNG.initial_state`` with an in-order parser state."""
        state = super().initial_state(rows, stack_size, traced=traced)
        state.parser = InOrderParserState.initial(rows, state.lstm.device, self.finish_action)
        return state

    def pushed_items(self, actions: Tensor, words: Tensor) -> Tensor:
        """``RNNG.pushed_items`` with the dropout of every item (the released in-order
        model's), ``FINISH`` taken as the last ``NT``."""
        return torch.where((actions == SHIFT)[:, None],
                           self.dropout(self.embedding(words.clamp(min=0))),
                           self.dropout(self.nt_embedding((actions - FIRST_NT).clamp(
                               min=0, max=self.nt_embedding.num_embeddings - 1))))

    def search_state(self, rows: int, stack_size: int, max_actions: int | None = None
                     ) -> PooledState:
        """``RNNG.search_state`` with an in-order parser state."""
        state = super().search_state(rows, stack_size)
        state.parser = InOrderParserState.initial(rows, state.top.device, self.finish_action)
        return state

    def advance(self, state: RNNGState | PooledState, actions: Tensor, words: Tensor,
                piece_ends: Tensor | None = None) -> RNNGState | PooledState:
        """Every row's action (R,) (-1: none) on its stack, in place, and the new state;
        ``words`` (R,): the word a ``SHIFT`` of each row generates; ``piece_ends`` (R,):
        over subwords, whether that piece ends its word. ``FINISH`` changes nothing but the
        parser state. A search's ``PooledState`` advances the same way on shared nodes
        (``synlm.transition.stack_pool.advance_in_order``)."""
        if isinstance(state, PooledState):
            return advance_in_order(self, state, actions, words, piece_ends)
        p = state.parser
        R, S = actions.size(0), state.stack_size
        rows = torch.arange(R, device=actions.device)
        finish = actions == self.finish_action
        acted = (actions != NO_ACTION) & ~finish
        reduce = actions == REDUCE
        opened = (actions >= FIRST_NT) & ~finish
        innermost = state.open_at[rows, (p.n_open - 1).clamp(min=0)]  # (R,) its position
        # the new top: one above the top, or the reduced NT's position; the stack LSTM
        # reads the new item on the state at the position below it
        position = torch.where(reduce, innermost, p.top + 1)
        position = torch.where(acted, position, S + 1)  # scratch
        item = self.pushed_items(actions, words)
        if reduce.any():
            item = item.clone()
            reduced = reduce.nonzero()[:, 0]  # (C,)
            item[reduced] = self._compose(state, reduced, innermost[reduced])
        # NT(X): the top unit (X's first child: an item, or a word's pieces from stack
        # position ``corner`` up) moves one up, X takes its first slot
        k = torch.where(opened, p.top - p.corner + 1, 0)  # (R,) items in the unit
        longest = 1 if piece_ends is None else max(int(k.max()), 1)  # words: one item
        steps = torch.arange(longest, device=actions.device)  # (M,)
        within = steps < k[:, None]  # (R, M)
        source = torch.where(within, p.corner[:, None] - 1 + steps, S)  # item indices
        left_corner = state.read(state.items, (rows[:, None], source))  # (R, M, W)
        state.write(state.items, (rows[:, None], torch.where(within, source + 1, S)),
                    left_corner)
        slot = torch.where(opened, p.corner, position) - 1  # the item index X or the item takes
        state.write(state.items, (rows, slot.clamp(min=0)), item)
        below = state.read(state.lstm, (rows, position - 1))  # (R, 2, L, H)
        h, c = self.stack_lstm(item, below[:, 0], below[:, 1])
        state.write(state.lstm, (rows, position), torch.stack([h, c], 1))
        open_slot = p.n_open.clamp(max=S - 1)
        state.open_at[rows, open_slot] = torch.where(opened, p.corner,
                                                     state.open_at[rows, open_slot])
        state.top = torch.where(acted[:, None], h[:, -1], state.top)
        state.parser = p.after(actions, torch.where(finish, p.top, position), piece_ends)
        return state

    def stack_depth(self, actions: Tensor) -> int:
        """The stack a teacher-forced batch of in-order ``actions`` needs."""
        return in_order_stack_depth(actions, self.finish_action)

    def forward(self, words: Tensor, actions: Tensor, word_lengths: Tensor,
                word_ends: Tensor | None = None) -> RNNGOutput:
        """Teacher-forced log-probabilities of gold in-order ``actions`` (B, A) (-1 padded,
        without ``FINISH``) over ``words`` (B, N) (``word_lengths`` (B,)): ``FINISH`` is
        appended to each row, so ``action_log_probs`` is (B, A + 1), each row's gold actions
        then its ``FINISH``; the joint counts it. Over subwords (``word_ends``), as
        ``RNNG.forward``; an ``NT`` takes every piece of its first word."""
        closed = torch.cat([actions, actions.new_full((actions.size(0), 1), NO_ACTION)], 1)
        ends = (actions != NO_ACTION).sum(1)  # (B,) each row's FINISH goes there
        closed[torch.arange(actions.size(0), device=actions.device), ends] = self.finish_action
        return super().forward(words, closed, word_lengths, word_ends)
