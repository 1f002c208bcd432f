"""Recurrent neural network grammar (Dyer et al. 2016), batched as Noji & Oseki 2021.

A generative RNNG models a sentence x and its tree y together, as the top-down action
sequence a_1..a_n of y (``synlm.syntax.actions``)::

    log p(x, y) = Σ_t log p(a_t | a_<t) + Σ_{t: a_t = SHIFT} log p(x_{ptr(t)} | a_<t)

    u_t = ReLU(W_u · drop(h_t^top) + b_u)          (W)    h_t: the stack LSTM at the stack top
    p(a_t | a_<t) = softmax(A u_t + b_A)           over the actions (Dyer et al. 2016 eq. 2)
    p(x | a_<t)   = softmax(E u_t + b_E)            E: the word embedding (tied)

The stack holds the words, the open nonterminals and the closed constituents; a stack LSTM
reads it bottom to top (an initial item first), so h_t summarises the stack. ``SHIFT``
pushes the next word's embedding, ``NT(X)`` pushes X's embedding, and ``REDUCE`` pops the
children c_1..c_m of the innermost open X and pushes their composition (§4.1)::

    f = LSTM_fwd(X, c_1, ..., c_m)[-1]   b = LSTM_bwd(X, c_m, ..., c_1)[-1]
    comp = ReLU(W_c · drop([f; b]) + b_c)                     (W)

The stack is a fixed-size tensor (``RNNGState``): every row's action is one indexed write,
and the LSTM state of every stack position is kept, so a ``REDUCE`` resumes the stack LSTM
from the state below the reopened position, as the stack LSTM of Dyer et al. 2015 pops. In
search the same values sit in shared nodes instead, each item a pointer to its top
(``search_state``, ``synlm.transition.stack_pool``), so that keeping an item copies no stack.
Teacher forcing, where the whole tree is known, computes the same numbers without running the
actions one at a time: the compositions by tree height, then the stack LSTM by stack position
(``synlm.transition.rnng_levels``).

The released code (aistairc/rnng-pytorch, ``fixed_stack_models.FixedStackRNNG``) normalises
the action softmax in training over every action (``legal_softmax=False``, the default,
which with the released recipe produced its numbers) and over the legal ones in beam search;
Dyer et al. 2016 normalise over the legal actions in both (``legal_softmax=True``). Its
action and word softmaxes also hold a ``<pad>`` entry, never a target, which this model
does not have (docs/reference-implementations.md).

One module because the RNNG's state, its three ways of running (teacher forcing by level,
action by action, search over shared nodes) and its composition are one model whose numbers
must stay equal across them; the level schedule and the node pool live beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.modules.recorded import RecordsInit
from synlm.transition.beam import only_shift_inside_words
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import (
    FIRST_NT,
    NO_ACTION,
    REDUCE,
    SHIFT,
    Limits,
    ParserState,
    stack_depth,
)
from synlm.transition.rnng_levels import parser_before, stack_tops
from synlm.transition.stack_pool import SENTINEL, NodePool, PooledState, advance_top_down
from synlm.transition.trace import Trace
from synlm.transition.types import RNNGOutput, derived, full_precision


@dataclass
class RNNGStep:
    """A search step's log-probabilities in two parts (``synlm.transition.types.SplitStep``,
    ``RNNG.split_log_probs``).

    Attributes:
        actions: (R, A) log p(action), the ``SHIFT`` column without the word; -inf where not
            legal.
        contexts: (C, W) u of the rows with a legal action.
        at: (R,) each row's position in ``contexts`` (-1: no legal action).
        words: (R,) the word each row generates next.
        decoder: the word softmax's layer, E u + b_E.
        mean_row: (W + 1,) the mean of E's rows, then of b_E (``RNNG.mean_word_row``).
    """

    #: Added to each bound, which must stay above the word's log-probability whatever the
    #: float32 rounding of either (a logit's, about 1e-6 of its size).
    MARGIN: ClassVar[float] = 1e-3

    actions: Tensor
    contexts: Tensor
    at: Tensor
    words: Tensor
    decoder: nn.Linear
    mean_row: Tensor

    def word_log_probs(self, rows: Tensor) -> Tensor:
        """(R',) log p(word | u) of ``rows`` (R',): the word softmax of those rows alone."""
        logits = full_precision(self.decoder(self.contexts[self.at[rows]]))  # (R', V)
        return -F.cross_entropy(logits, self.words[rows].clamp(min=0), reduction="none")

    def word_bounds(self, rows: Tensor) -> Tensor:
        """(R',) float64, at least ``word_log_probs(rows)``, at the cost of two dot products
        a row: the log-sum-exp of V logits is at least log V plus their mean (Jensen), so

            log p(w | u) = l_w - logsumexp_j l_j ≤ l_w - mean_j l_j - log V,  l = E u + b_E

        and the mean logit is u · mean_j E_j + mean_j b_j (``mean_row``); tight where the
        word distribution is flat (a nearly random model's), looser the more it peaks."""
        u = full_precision(self.contexts[self.at[rows]])  # (R', W)
        word = self.words[rows].clamp(min=0)
        weight, bias = self.decoder.weight, self.decoder.bias
        logit = (u * full_precision(weight[word])).sum(-1) + bias[word]  # (R',)
        mean = u @ self.mean_row[:-1] + self.mean_row[-1]  # (R',)
        return (logit - mean).double() - math.log(weight.size(0)) + self.MARGIN


@dataclass
class RNNGState:
    """The stacks of R rows. Stack item k (1-based) is ``items[:, k - 1]``; ``hidden[:, k]``
    and ``cell[:, k]`` are the stack LSTM's state after reading items 1..k (``[:, 0]``: after
    the initial item alone). Position ``S + 1`` of ``hidden``/``cell`` and ``S`` of ``items``
    are scratch: rows without an action write there.

    Attributes:
        parser: pointer, open constituents, ... (``ParserState``).
        lstm: (R, S + 2, 2, L, H) the stack LSTM's output and cell per position and layer,
            one tensor so that a step reads and writes the state once (a CAG's stack
            Transformer keeps its keys and values here, ``synlm.transition.cag``).
        items: (R, S + 1, W) the stack items' embeddings.
        open_at: (R, S) the stack position of each open nonterminal, innermost last
            (``parser.n_open`` of them).
        top: (R, H) the top layer's output at the stack top (what the next action is
            predicted from), kept beside ``lstm`` so that reading it costs no indexing.
        trace: in teacher forcing with gradients, what reads and writes ``lstm`` and
            ``items`` so that the backward touches only their rows (``synlm.transition
            .trace``); None: plain indexing (search).
    """

    parser: ParserState
    lstm: Tensor
    items: Tensor
    open_at: Tensor
    top: Tensor
    trace: Trace | None = None

    #: The fields that hold a row per stack (``select``, ``assign``).
    ROWS = ("lstm", "items", "open_at", "top")

    @property
    def hidden(self) -> Tensor:
        """(R, S + 2, L, H): the stack LSTM's outputs (a view of ``lstm``)."""
        return self.lstm[:, :, 0]

    @property
    def cell(self) -> Tensor:
        """(R, S + 2, L, H): its cells (a view of ``lstm``)."""
        return self.lstm[:, :, 1]

    @property
    def stack_size(self) -> int:
        return self.items.size(1) - 1

    def select(self, index: Tensor, out: RNNGState | None = None) -> RNNGState:
        """The rows ``index`` (R',), in that order: new tensors, or written into ``out`` (a
        state of R' rows and this stack size) and ``out`` returned."""
        if out is None:
            return RNNGState(self.parser.select(index),
                             *(getattr(self, name).index_select(0, index) for name in self.ROWS))
        self.parser.select(index, out=out.parser)
        for name in self.ROWS:
            torch.index_select(getattr(self, name), 0, index, out=getattr(out, name))
        return out

    def assign(self, rows: Tensor, source: RNNGState, source_rows: Tensor) -> None:
        """``self[rows] = source[source_rows]``, in place."""
        self.parser.assign(rows, source.parser, source_rows)
        for name in self.ROWS:
            getattr(self, name)[rows] = getattr(source, name)[source_rows]

    def read(self, values: Tensor, index: tuple[Tensor, ...]) -> Tensor:
        """``values[index]`` (``lstm`` or ``items``), through the trace if there is one."""
        return values[index] if self.trace is None else self.trace.read(values, index)

    def write(self, values: Tensor, index: tuple[Tensor, ...], value: Tensor) -> None:
        """``values[index] = value`` in place, through the trace if there is one."""
        if self.trace is None:
            values[index] = value
        else:
            self.trace.write(values, index, value)


class StackLSTM(nn.Module):
    """An L-layer LSTM read one item at a time, dropout between layers (the released
    ``MultiLayerLSTMCell``)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int,
                 dropout: float) -> None:
        super().__init__()
        self.cells = nn.ModuleList(
            nn.LSTMCell(input_size if i == 0 else hidden_size, hidden_size)
            for i in range(num_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, hidden: Tensor, cell: Tensor) -> tuple[Tensor, Tensor]:
        """x (R, W), state (R, L, H) -> the next state (R, L, H) twice."""
        hs, cs = [], []
        for layer, lstm in enumerate(self.cells):
            h, c = lstm(x if layer == 0 else self.dropout(hs[-1]),
                        (hidden[:, layer], cell[:, layer]))
            hs.append(h)
            cs.append(c)
        return torch.stack(hs, 1), torch.stack(cs, 1)


class Composition(nn.Module):
    """A closed constituent's embedding from its label and children (Dyer et al. 2016
    §4.1): a forward LSTM over (X, c_1..c_m) and a backward one over (X, c_m..c_1), their
    last outputs through ReLU(W · drop(·) + b). Rows are left-aligned and padded after the
    end, so each direction is a plain unidirectional LSTM read at index m."""

    def __init__(self, size: int, dropout: float) -> None:
        super().__init__()
        self.forward_lstm = nn.LSTM(size, size, batch_first=True)
        self.backward_lstm = nn.LSTM(size, size, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(2 * size, size)

    def forward(self, label: Tensor, children: Tensor, n_children: Tensor) -> Tensor:
        """label (C, W), children (C, M, W) left-aligned, n_children (C,) -> (C, W)."""
        M = children.size(1)
        steps = torch.arange(M, device=children.device)  # (M,)
        # c_m .. c_1 then padding: index m - 1 - j for j < m
        reverse = (n_children[:, None] - 1 - steps).clamp(min=0)  # (C, M)
        backward = children.gather(1, reverse[..., None].expand_as(children))
        last = n_children.view(-1, 1, 1).expand(-1, 1, label.size(1))  # index m of (1 + M)
        f = self.forward_lstm(torch.cat([label[:, None], children], 1))[0].gather(1, last)
        b = self.backward_lstm(torch.cat([label[:, None], backward], 1))[0].gather(1, last)
        both = torch.cat([f[:, 0], b[:, 0]], -1)  # (C, 2W)
        return F.relu(self.output(self.dropout(both)))


class RNNG(RecordsInit, TransitionModel):
    """A batched generative top-down RNNG (module docstring).

    Args:
        vocab_size: V, the word vocabulary (the DataModule's).
        n_actions: the action vocabulary (``ActionVocab``: SHIFT, REDUCE, NT(X)...).
        input_size: W, word, nonterminal and composed-item width (the reference: 256).
        hidden_size: H, the stack LSTM's (256).
        num_layers: L, the stack LSTM's (2).
        dropout: on embeddings, between stack LSTM layers, before the output and
            composition layers (the reference's one rate; its PTB recipe 0.3).
        legal_softmax: normalise the action softmax over the legal actions in training
            too (Dyer et al. 2016); False: over every action, as the released code trains.
        max_open: most constituents open at once in search (``Limits``).
        max_consecutive: most ``NT`` in a row in search.
    """

    #: The action orders it decodes (``synlm.syntax.actions.ORDERS``): its stack runs
    #: top-down actions, and beam search and parsing decode them.
    action_orders: ClassVar[tuple[str, ...]] = ("top_down",)
    #: Its search's released convention (``synlm.transition.types.CONVENTIONS``): the
    #: released beam search renormalises over the legal actions.
    search_convention: ClassVar[str] = "renormalised_given_length"
    #: After the last word only ``REDUCE`` is legal (``TransitionModel``).
    closes_without_choice: ClassVar[bool] = True

    def __init__(self, vocab_size: int, n_actions: int, input_size: int = 256,
                 hidden_size: int = 256, num_layers: int = 2, dropout: float = 0.3,
                 legal_softmax: bool = False, max_open: int = 100,
                 max_consecutive: int = 8) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("input_size", input_size),
                            ("hidden_size", hidden_size), ("num_layers", num_layers),
                            ("max_open", max_open), ("max_consecutive", max_consecutive)):
            errors.at_least(name, value)
        errors.at_least("n_actions", n_actions, FIRST_NT + 1)
        errors.probability("dropout", dropout)
        self.n_actions = n_actions
        self.legal_softmax = legal_softmax
        self.limits = Limits(max_open, max_consecutive)
        self.dropout = nn.Dropout(dropout)
        #: The dropout on the stack's items: words, nonterminals, the initial item.
        self.embedding_dropout = self.dropout
        #: A stack position's state in ``RNNGState.lstm``: (2, L, H).
        self.position_state = (2, num_layers, hidden_size)
        self.embedding = nn.Embedding(vocab_size, input_size)
        self.nt_embedding = nn.Embedding(n_actions - FIRST_NT, input_size)
        self.initial_item = nn.Parameter(torch.empty(input_size).normal_())
        self.stack_lstm = StackLSTM(input_size, hidden_size, num_layers, dropout)
        self.composition = Composition(input_size, dropout)
        self.output = nn.Linear(hidden_size, input_size)
        self.action_decoder = nn.Linear(input_size, n_actions)
        self.word_decoder = nn.Linear(input_size, vocab_size)
        self.word_decoder.weight = self.embedding.weight

    # ------------------------------------------------------------------ the stack
    def initial_state(self, rows: int, stack_size: int, max_actions: int | None = None,
                      traced: bool = False) -> RNNGState:
        """R empty stacks of ``stack_size`` items, the initial item read; ``traced``: their
        reads and writes go through a ``Trace`` (teacher forcing with gradients).
        ``max_actions`` (the search's action budget) changes nothing: the stack bounds an
        RNNG's memory."""
        W = self.embedding.embedding_dim
        weight = self.embedding.weight
        lstm = weight.new_zeros(rows, stack_size + 2, *self.position_state)
        first = self.embedding_dropout(self.initial_item.expand(rows, W))
        state = RNNGState(ParserState.initial(rows, weight.device), lstm,
                          weight.new_zeros(rows, stack_size + 1, W),
                          torch.zeros(rows, stack_size, dtype=torch.long, device=weight.device),
                          weight.new_zeros(rows, self.position_state[-1]),
                          Trace(weight.device) if traced else None)
        everyone = torch.arange(rows, device=weight.device)
        # position 0, read on the zero state of the scratch position (index -1)
        state.top = self.read_item(state, everyone, torch.zeros_like(everyone), first)
        return state

    def search_state(self, rows: int, stack_size: int, max_actions: int | None = None
                     ) -> PooledState:
        """R empty stacks for search as pointers into one shared pool of nodes
        (``synlm.transition.stack_pool``), the initial item read: ``initial_state``'s
        values, without a copy of a stack per row. ``stack_size`` bounds the open
        constituents; ``max_actions`` changes nothing."""
        W = self.embedding.embedding_dim
        weight = self.embedding.weight
        pool = NodePool.empty(self.position_state, W, weight, capacity=4 * rows + 1)
        first = self.embedding_dropout(self.initial_item.expand(rows, W))
        bottom = torch.full((rows,), SENTINEL, dtype=torch.long, device=weight.device)
        zero = torch.zeros_like(bottom)
        top, values = self.read_node(pool, bottom, zero, first)
        node = pool.push(bottom, zero, values, first)
        opened = torch.zeros(rows, stack_size, dtype=torch.long, device=weight.device)
        return PooledState(ParserState.initial(rows, weight.device), node, opened,
                           opened.clone(), top, pool)

    def read_node(self, pool: NodePool, below: Tensor, position: Tensor, item: Tensor
                  ) -> tuple[Tensor, Tensor]:
        """``read_item`` on pooled stacks: the stack LSTM reads ``item`` (R, W) on the
        state of the nodes ``below`` (R,) (``position`` (R,), the new item's, changes
        nothing here); the top layer's output (R, H) and the new position's state
        (R, 2, L, H)."""
        state = pool.values[below]  # (R, 2, L, H)
        h, c = self.stack_lstm(item, state[:, 0], state[:, 1])
        return h[:, -1], torch.stack([h, c], 1)

    def read_item(self, state: RNNGState, rows: Tensor, position: Tensor, item: Tensor) -> Tensor:
        """The stack LSTM reads ``item`` (R, W) at stack ``position`` (R,) on the state
        below it (``position - 1``): that position's state written into ``state.lstm``, the
        top layer's output (R, H) returned."""
        below = state.read(state.lstm, (rows, position - 1))  # (R, 2, L, H)
        h, c = self.stack_lstm(item, below[:, 0], below[:, 1])
        state.write(state.lstm, (rows, position), torch.stack([h, c], 1))
        return h[:, -1]

    def advance(self, state: RNNGState | PooledState, actions: Tensor, words: Tensor,
                piece_ends: Tensor | None = None) -> RNNGState | PooledState:
        """Every row's action (R,) (-1: none) on its stack, in place, and the new state;
        ``words`` (R,): the word a ``SHIFT`` of each row generates. ``piece_ends`` (R,),
        over subwords whether that piece ends its word, changes nothing here: a top-down
        stack treats every piece as a word (the in-order one reads it). A search's
        ``PooledState`` (``search_state``) advances the same way on shared nodes."""
        if isinstance(state, PooledState):
            return advance_top_down(self, state, actions, words)
        p = state.parser
        R = actions.size(0)
        rows = torch.arange(R, device=actions.device)
        acted = actions != NO_ACTION
        opened, reduce = actions >= FIRST_NT, actions == REDUCE
        innermost = state.open_at[rows, (p.n_open - 1).clamp(min=0)]  # (R,) its position
        # the position the new item takes: one above the top, or the reduced NT's
        position = torch.where(reduce, innermost, p.top + 1)
        position = torch.where(acted, position, state.stack_size + 1)  # scratch
        item = self.pushed_items(actions, words)
        if reduce.any():
            item = item.clone()
            reduced = reduce.nonzero()[:, 0]  # (C,)
            item[reduced] = self._compose(state, reduced, innermost[reduced])
        state.write(state.items, (rows, position - 1), item)
        top = self.read_item(state, rows, position, item)  # (R, H)
        slot = p.n_open.clamp(max=state.stack_size - 1)
        state.open_at[rows, slot] = torch.where(opened, position, state.open_at[rows, slot])
        state.top = torch.where(acted[:, None], top, state.top)
        state.parser = p.after(actions, position)
        return state

    def pushed_items(self, actions: Tensor, words: Tensor) -> Tensor:
        """(R, W) the item each row's ``SHIFT`` (of ``words`` (R,)) or ``NT`` pushes (the
        ``NT`` embedding's first for other ``actions`` (R,))."""
        drop = self.embedding_dropout
        return torch.where((actions == SHIFT)[:, None], drop(self.embedding(words.clamp(min=0))),
                           drop(self.nt_embedding((actions - FIRST_NT).clamp(min=0))))

    def _compose(self, state: RNNGState, rows: Tensor, at: Tensor) -> Tensor:
        """The composition of each reduced row's innermost open constituent, whose ``NT``
        item sits at stack position ``at`` (C,); its children fill the positions above."""
        n_children = state.parser.top[rows] - at  # (C,)
        M = int(n_children.max())
        slots = (at[:, None] + torch.arange(M, device=at.device)).clamp(
            max=state.stack_size - 1)  # (C, M) item indices of the children
        children = state.read(state.items, (rows[:, None], slots))  # (C, M, W)
        label = state.read(state.items, (rows, at - 1))  # (C, W)
        return self.composition(label, children, n_children)

    # ------------------------------------------------------------------ distributions
    def contexts(self, top_hidden: Tensor) -> Tensor:
        """u = ReLU(W_u drop(h) + b_u): (..., H) -> (..., W)."""
        return F.relu(self.output(self.dropout(top_hidden)))

    def next_log_probs(self, state: RNNGState, words: Tensor, legal: Tensor,
                       renormalise: bool = True) -> Tensor:
        """(R, A): log p(action) of each row, the ``SHIFT`` column joint with its word
        ``words`` (R,), -inf where not ``legal`` (R, A): normalised over the legal actions
        (``renormalise``, the released search) or over every action. Only the rows with
        a legal action are computed (a search's empty slots and finished sentences have
        none), and the word softmax, the largest product, only where ``SHIFT`` is legal."""
        step = self.split_log_probs(state, words, legal, renormalise)
        shifts = legal[:, SHIFT].nonzero()[:, 0]  # (R',)
        step.actions[shifts, SHIFT] += step.word_log_probs(shifts)
        return step.actions

    def split_log_probs(self, state: RNNGState, words: Tensor, legal: Tensor,
                        renormalise: bool = True) -> RNNGStep:
        """``next_log_probs`` in two parts (``RNNGStep``): the action softmax of every row
        with a legal action, and the word softmax of the rows a search asks for."""
        rows = legal.any(1).nonzero()[:, 0]  # (C,)
        legal_rows = legal[rows]  # (C, A)
        u = self.contexts(state.top[rows])  # (C, W)
        logits = full_precision(self.action_decoder(u))
        if renormalise:
            logits = logits.masked_fill(~legal_rows, float("-inf"))
        log_probs = logits.log_softmax(-1).masked_fill(~legal_rows, float("-inf"))
        actions = log_probs.new_full(legal.shape, float("-inf"))
        actions[rows] = log_probs
        at = torch.full(legal.shape[:1], -1, dtype=torch.long, device=legal.device)
        at[rows] = torch.arange(rows.numel(), device=legal.device)
        return RNNGStep(actions, u, at, words, self.word_decoder, self.mean_word_row())

    def mean_word_row(self) -> Tensor:
        """(W + 1,) float32: the mean of the word softmax's rows, then of its bias, kept until
        the weights change (an optimiser step, ``load_state_dict``, ``to``)."""
        weight, bias = self.word_decoder.weight, self.word_decoder.bias
        return derived(self, "_mean_row", (weight, bias), lambda: torch.cat(
            [full_precision(weight).mean(0), full_precision(bias).mean()[None]]))

    # ------------------------------------------------------------------ teacher forcing
    def stack_depth(self, actions: Tensor) -> int:
        """The stack a teacher-forced batch of ``actions`` (B, A) needs (``stack_depth``)."""
        return stack_depth(actions)

    def runs_by_level(self) -> bool:
        """Whether teacher forcing runs the stack by stack level and tree height
        (``synlm.transition.rnng_levels``), as this class's stack allows; a subclass that
        reads or moves the stack otherwise (``advance``, ``read_item``: the in-order RNNG,
        the CAG) runs it one action at a time."""
        cls = type(self)
        return cls.advance is RNNG.advance and cls.read_item is RNNG.read_item

    def forward(self, words: Tensor, actions: Tensor, word_lengths: Tensor,
                word_ends: Tensor | None = None) -> RNNGOutput:
        """Teacher-forced log-probabilities of gold ``actions`` (B, A) (-1 padded) over
        ``words`` (B, N) (``word_lengths`` (B,)): the stack runs by level
        (``runs_by_level``) or action by action, every row at once; the last action (the
        root's ``REDUCE``) is scored, not run.

        Over subwords (``word_ends`` (B, N), rnng-pytorch's ``subword_end_mask``),
        ``words`` are pieces, each its own ``SHIFT`` and stack item, and ``word_log_probs``
        is per piece (a word's: the sum over its pieces, ``per_word``); with
        ``legal_softmax`` only ``SHIFT`` is legal inside a word."""
        B, A = actions.shape
        if self.runs_by_level():
            top, plan = stack_tops(self, words, actions)  # (B, A, H)
            legal = None
            if self.legal_softmax:
                parser = parser_before(actions, plan.top_position)  # B·A rows
                legal = only_shift_inside_words(
                    parser.legal_actions(word_lengths.repeat_interleave(A), self.n_actions,
                                         self.limits),
                    parser.pointer,
                    None if word_ends is None else word_ends.repeat_interleave(A, 0))
                legal = legal.view(B, A, -1)
        else:
            top, legal = self.tops_by_actions(words, actions, word_lengths, word_ends)
        u = self.contexts(top)  # (B, A, W)
        logits = full_precision(self.action_decoder(u))  # (B, A, n_actions)
        if legal is not None:
            logits = logits.masked_fill(~legal, float("-inf"))
        gold = actions.clamp(min=0)
        action_lp = logits.log_softmax(-1).gather(2, gold[..., None])[..., 0]
        action_lp = action_lp.masked_fill(actions == NO_ACTION, 0.0)
        # the context of each word: the step of its SHIFT
        shifts = actions == SHIFT  # (B, A)
        order = torch.where(shifts, shifts.long().cumsum(1) - 1, words.size(1))  # word index
        step_of_word = torch.zeros(B, words.size(1) + 1, dtype=torch.long,
                                   device=actions.device)
        step_of_word.scatter_(1, order, torch.arange(A, device=actions.device).expand(B, A))
        step_of_word = step_of_word[:, :-1]  # (B, N)
        u_words = u.gather(1, step_of_word[..., None].expand(-1, -1, u.size(-1)))  # (B, N, W)
        in_sentence = torch.arange(words.size(1), device=words.device) < word_lengths[:, None]
        # the word softmax over the sentences' words only (K,), none of the padding
        word_lp = -F.cross_entropy(full_precision(self.word_decoder(u_words[in_sentence])),
                                   words[in_sentence], reduction="none")
        word_lp = torch.zeros_like(words, dtype=word_lp.dtype).masked_scatter(in_sentence,
                                                                              word_lp)
        return RNNGOutput(action_lp, word_lp, action_lp.sum(1) + word_lp.sum(1))

    def tops_by_actions(self, words: Tensor, actions: Tensor, word_lengths: Tensor,
                        word_ends: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``forward``'s stack run one action at a time (``advance``): the stack top each
        action is predicted from (B, A, H) and, with ``legal_softmax``, its legal actions
        (B, A, n_actions)."""
        B, A = actions.shape
        state = self.initial_state(B, self.stack_depth(actions), traced=torch.is_grad_enabled())
        tops, legal = [], []  # before each action: the stack top, the legal actions
        for t in range(A):
            tops.append(state.top)
            if self.legal_softmax:
                legal.append(only_shift_inside_words(
                    state.parser.legal_actions(word_lengths, self.n_actions, self.limits),
                    state.parser.pointer, word_ends))
            if t < A - 1:
                pointer = state.parser.pointer.clamp(max=words.size(1) - 1)[:, None]
                ends = None if word_ends is None else word_ends.gather(1, pointer)[:, 0]
                state = self.advance(state, actions[:, t], words.gather(1, pointer)[:, 0], ends)
        return torch.stack(tops, 1), torch.stack(legal, 1) if legal else None


def per_word(piece_log_probs: Tensor, word_ends: Tensor) -> Tensor:
    """(B, N) per-piece log-probabilities summed over each word's pieces: (B, N), word j of
    row b at ``[b, j]``, 0 past a row's words; ``word_ends`` (B, N) marks the piece that ends
    each word (False at padding)."""
    word = (word_ends.long().cumsum(1) - word_ends.long()).clamp(max=word_ends.size(1) - 1)
    out = torch.zeros_like(piece_log_probs)
    return out.scatter_add(1, word, piece_log_probs)
