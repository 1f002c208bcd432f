"""The attention of Transformer Grammars (Sartran et al. 2022, "Transformer Grammars:
Augmenting Transformer Language Models with Syntactic Inductive Biases at Scale", TACL, §2):
its masks and relative positions, with no absolute positions and post-norm layers.

An action Transformer (``synlm.transition.action_transformer``) reads a sentence's top-down actions
as tokens. For Transformer Grammars, position 0 is the start token (TG's ``<s>``), then one
token per action, except that a ``REDUCE`` is two tokens: the closing bracket ``X)`` (COMPOSE
attention; it predicts nothing) and its copy (STACK attention). This is the Choe-Charniak
sequence without part-of-speech tags: ``NT(X)`` is the opening bracket ``(X``, ``SHIFT`` the
word, ``REDUCE`` the closing bracket.

Every token is a node of the tree; its depth is its parent's plus one, the parent being the
innermost open constituent (the start token has depth 0, a root ``NT`` depth 1, both copies
of a closing bracket the depth of their opening bracket). A stack of tokens is kept, the
start token on it from the beginning:

- **STACK attention** (the start token, ``(X``, a word, the closing bracket's copy): the
  token attends to the tokens on the stack and to itself, then is pushed (the copy is not);
- **COMPOSE attention** (the first closing bracket): the token attends to its opening
  bracket and that constituent's children still on the stack (everything on the stack from
  the opening bracket up), pops them, is pushed in their place and attends to itself.

The relative position of query i and key j is depth(i) − depth(j) wherever i attends j (the
model clips it, to [−1, 62] in the paper's configuration). This is the rule
``StackComposeDoubleClosingNT`` of the released deepmind/transformer_grammars
(``masking_rules.cc``) with the paper's settings (``configs/config_tg.py``: relative
positions ``delta_depth``, one attention function, no transparency): tests/fixtures/tg
holds the released code's masks of sentences read as one chunk, tests/fixtures/tg_memory its
chunks of documents read with the "smart" Transformer-XL memory (``gather_into_new_memory``).

``tg_layout`` lays out a batch of action sequences at once: a token is popped by the first
later COMPOSE token at the depth of its parent's closing bracket (an opening bracket: at its
own), which one reverse running minimum per depth finds for every token, and the mask
follows from the pop times. ``tg_chunks`` cuts the tokens into chunks read with memory, as
the released ``MakeChunks``: a chunk's rows of the mask alone, the memory the top of the
stack at each boundary (``synlm.transition.attention.memory`` reads them). ``TGState`` gives
the rows of one chunk one action at a time, for beam search. ``TGPolicy`` is the policy
(``synlm.transition.attention.base``; ``attention: tg``).

One module because TG's masks, relative positions and search state come from one pass over a
sentence's actions and must agree token for token; the chunked reading with memory is in
``memory.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.errors import InputError, SettingError, at_least
from synlm.syntax.actions import ActionError
from synlm.transition.attention.base import (
    AttentionPolicy,
    BatchMasks,
    ChunkedMasks,
    MemoryChunk,
    StepMasks,
    opened_by,
)
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, SHIFT
from synlm.transition.structure import RowState, check_actions

#: Slots of a ``TGState.step``: the COMPOSE copy of a ``REDUCE``, then the action's token.
COMPOSE_SLOT, TOKEN_SLOT = 0, 1


@dataclass(frozen=True)
class TGLayout:
    """The Transformer Grammars tokens of a batch of action sequences (``tg_layout``), T the
    longest row's tokens (start token included).

    Attributes:
        source: (B, T) long: the index, in the row's action sequence, of the action each
            token stands for (both copies of a ``REDUCE`` stand for it); -1 for the start
            token and padding.
        compose: (B, T) bool: the first copy of a closing bracket (COMPOSE attention; it
            predicts nothing).
        opening: (B, T) long: for both copies of a closing bracket, the position of its
            opening bracket's token; -1 otherwise.
        depth: (B, T) long: the token's depth in the tree (start token and padding 0).
        mask: (B, T, T) bool: query i may attend key j; a real token attends at least
            itself, a padding query attends key 0 only (None: not computed).
        relative: (B, T, T) long: depth(i) − depth(j) where ``mask`` holds, 0 elsewhere
            (None: not computed).
        lengths: (B,) long: the row's tokens, the start token included.
        popped_at: (B, T) long: the token that pops each token off the stack (T: none);
            a token never pushed (a closing bracket's copy, padding) its own position. After
            token t the stack holds the tokens j <= t with ``popped_at[j] > t``.
    """

    source: Tensor
    compose: Tensor
    opening: Tensor
    depth: Tensor
    mask: Tensor | None
    relative: Tensor | None
    lengths: Tensor
    popped_at: Tensor


def _name(action: int) -> str:
    """How an error message names an action id."""
    return {SHIFT: "SHIFT", REDUCE: "REDUCE"}.get(action, f"NT id {action}")


def _raise_for(actions: Tensor, before: Tensor, after: Tensor) -> None:
    """Raise the first problem of ``actions`` (B, A), if any, as a one-line ``ActionError``
    naming the row, the action's index and what was expected; ``before``/``after``: the
    constituents open before and after each action."""
    valid = actions != NO_ACTION
    index = torch.arange(actions.size(1), device=actions.device)
    below = actions < NO_ACTION
    after_padding = F.pad(valid[:, 1:] & ~valid[:, :-1], (1, 0))
    unopened = valid & (actions < FIRST_NT) & (before == 0)  # SHIFT or REDUCE, nothing open
    closed = (actions >= FIRST_NT) & (before == 0) & (index > 0)  # NT after the root closed
    empty = (actions == REDUCE) & F.pad(actions[:, :-1] >= FIRST_NT, (1, 0))
    problem = below | after_padding | unopened | closed | empty
    n_actions = valid.sum(1)
    left_open = after[:, -1] > 0
    if not bool((problem.any(1) | left_open).any().item()):
        return
    row = int((problem.any(1) | left_open).nonzero()[0, 0])
    if not bool(problem[row].any()):
        n, k = int(n_actions[row]), int(after[row, -1])
        raise ActionError(f"row {row}: {k} constituent(s) left open after the last action "
                          f"({n - 1}); expected {k} more REDUCE")
    i = int(problem[row].nonzero()[0, 0])
    a = int(actions[row, i])
    where = f"row {row}, action {i} ({_name(a)})"
    if bool(below[row, i]):
        raise ActionError(f"row {row}, action {i}: unknown action id {a}; expected -1 (no "
                          "action), 0 (SHIFT), 1 (REDUCE) or an NT id >= 2")
    if bool(after_padding[row, i]):
        raise ActionError(f"{where} follows padding (-1); expected padding only at the end")
    if bool(empty[row, i]):
        raise ActionError(f"{where} would close an empty constituent (opened by action "
                          f"{i - 1}); expected SHIFT or NT(X)")
    if i == 0:
        raise ActionError(f"{where}: no constituent is open; expected NT(X) first")
    raise ActionError(f"{where}: the tree is complete (its root closed at action {i - 1}); "
                      "expected padding (-1)")


def tg_layout(actions: Tensor, attention: bool = True) -> TGLayout:
    """(B, A) top-down action ids, padded with -1 -> the Transformer Grammars tokens of each
    row with their attention mask and relative positions (``TGLayout``; module docstring;
    without ``attention``, no (B, T, T) mask and relative positions: ``tg_chunks`` computes
    a chunk's rows).

    Each row must build one tree: ``NT(X)`` first, every ``REDUCE`` closing a constituent
    that is open and not empty, nothing after the root's ``REDUCE`` but padding, nothing
    left open (a row of padding alone is the start token alone). Otherwise a one-line
    ``ActionError`` names the row, the action's index and what was expected."""
    check_actions(actions)
    if actions.size(1) == 0:  # no actions: one column of padding
        actions = F.pad(actions, (0, 1), value=NO_ACTION)
    device = actions.device
    batch, n = actions.shape
    valid = actions != NO_ACTION
    opens, closes = actions >= FIRST_NT, actions == REDUCE
    step = opens.long() - closes.long()
    after = step.cumsum(1)
    before = after - step
    _raise_for(actions, before, after)

    index = torch.arange(n, device=device)
    width = valid.long() + closes.long()  # tokens per action
    last = width.cumsum(1)  # position of each action's (last) token
    lengths = 1 + width.sum(1)
    tokens = int(lengths.max()) if batch else 1
    depth_of = before + 1 - closes.long()  # (B, A): the closing bracket's depth is its NT's
    opening_of = torch.where(closes, last.gather(1, opened_by(actions)), -1)  # (B, A)

    # scatter the actions onto their tokens; column ``tokens`` takes what is not a token
    dump = torch.full_like(last, tokens)
    at = torch.where(valid, last, dump)
    first_copy = torch.where(closes, last - 1, dump)
    source = torch.full((batch, tokens + 1), NO_ACTION, dtype=torch.long, device=device)
    source.scatter_(1, at, index.expand(batch, n)).scatter_(1, first_copy,
                                                            index.expand(batch, n))
    compose = torch.zeros(batch, tokens + 1, dtype=torch.bool, device=device)
    compose.scatter_(1, first_copy, True)
    source, compose = source[:, :tokens], compose[:, :tokens]
    real_action = source >= 0
    at_action = source.clamp(min=0)
    depth = torch.where(real_action, depth_of.gather(1, at_action), 0)
    opening = torch.where(real_action, opening_of.gather(1, at_action), -1)

    pos = torch.arange(tokens, device=device)
    real = pos[None, :] < lengths[:, None]  # (B, T)
    pushed = real & ~(real_action & (opening >= 0) & ~compose)  # all but the copies
    # a token is popped by the first later COMPOSE token at the depth of its parent's
    # closing bracket (an opening bracket: its own constituent's)
    level = depth - 1 + (real_action & (opening < 0) & opens.gather(1, at_action)).long()
    popped_at = torch.full_like(source, tokens)
    for d in range(int(level.max()) + 1 if tokens else 0):
        closing = torch.where(compose & (depth == d), pos, tokens)  # (B, T)
        following = F.pad(closing[:, 1:], (0, 1), value=tokens).flip(1).cummin(1).values.flip(1)
        popped_at = torch.where(level == d, following, popped_at)
    popped_at = torch.where(pushed, popped_at, pos[None, :])
    placed = TGLayout(source=source, compose=compose, opening=opening, depth=depth,
                      lengths=lengths, popped_at=popped_at, mask=None, relative=None)
    if not attention:
        return placed
    mask, relative = attention_rows(placed, 0, tokens)
    return replace(placed, mask=mask, relative=relative)


def attention_rows(layout: TGLayout, start: int, end: int, keys: Tensor | None = None
                   ) -> tuple[Tensor, Tensor]:
    """The mask (B, n, K) and relative positions (B, n, K) of ``layout``'s queries
    ``start`` .. ``end`` − 1 over the K tokens at positions ``keys`` (B, K) (None: all T,
    ``TGLayout.mask`` and ``relative``): a STACK token attends the tokens on the stack
    before it (pushed earlier, not popped yet), a COMPOSE token those it pops, each itself;
    over all tokens a padding query attends key 0."""
    B, T = layout.source.shape
    pos = torch.arange(T, device=layout.source.device)
    every = keys is None
    keys = pos.expand(B, T) if every else keys
    query = pos[start:end][None, :, None]  # (1, n, 1)
    real_query = (query < layout.lengths[:, None, None])  # (B, n, 1)
    key = keys[:, None, :]  # (B, 1, K)
    popped_at = layout.popped_at.gather(1, keys)[:, None, :]  # (B, 1, K)
    earlier = (key < query) & (popped_at > key)
    stays = torch.where(layout.compose[:, start:end, None], popped_at == query,
                        popped_at > query)
    mask = ((earlier & stays) | (key == query)) & real_query
    if every:
        mask[..., 0] |= ~real_query[..., 0]
    depth = layout.depth.gather(1, keys)[:, None, :]  # (B, 1, K)
    relative = torch.where(mask, layout.depth[:, start:end, None] - depth, 0)
    return mask, relative


def tg_chunks(layout: TGLayout, sequence_length: int, memory_length: int
              ) -> tuple[MemoryChunk, ...]:
    """``layout``'s tokens cut into chunks of L = ``sequence_length`` read with M =
    ``memory_length`` memory slots, as the released ``StackComposeDoubleClosingNT`` with
    ``gather_into_new_memory`` (the "smart" memory, ``masking_rules.cc`` ``MakeChunks``)
    cuts a sequence:

    - chunk k holds tokens kL .. kL + L − 1; a query attends what ``TGLayout.mask`` allows
      among the chunk's tokens and the tokens the memory holds (a key in neither is lost);
    - after chunk k, the memory is the stack after its last real token, from the top:
      slot M − 1 the top of the stack, then down, each stack token taken from the chunk or
      from the memory that holds it (one in neither is skipped), until the slots are full.

    Relative positions are the depth differences (``TGLayout.relative``). ``layout`` needs
    no mask (``tg_layout(actions, attention=False)``): a chunk's rows are computed alone."""
    at_least("sequence_length", sequence_length, 1)
    at_least("memory_length", memory_length, 1)
    B, T = layout.source.shape
    M, device = memory_length, layout.source.device
    pos = torch.arange(T, device=device)
    memory = torch.full((B, M), -1, dtype=torch.long, device=device)
    slots = torch.arange(M, device=device).expand(B, M)
    chunks = []
    for start in range(0, T, sequence_length):
        end = min(start + sequence_length, T)
        n = end - start
        held = memory >= 0  # (B, M)
        keys = torch.cat([memory.clamp(min=0), pos[start:end].expand(B, n)], 1)  # (B, M + n)
        rows, relative = attention_rows(layout, start, end, keys)  # (B, n, M + n) each
        padding = (pos[start:end][None, :] >= layout.lengths[:, None])[:, :, None]  # (B, n, 1)
        from_memory = rows[:, :, :M] & held[:, None, :] & ~padding  # (B, n, M)
        own = torch.where(padding, torch.eye(n, dtype=torch.bool, device=device),
                          rows[:, :, M:])  # (B, n, n)
        allowed = torch.cat([from_memory, own], 2)
        relative = torch.where(allowed, relative, 0)
        # the next memory: the top M of the stack after the last real token so far
        last = torch.minimum(layout.lengths, torch.tensor(end, device=device)) - 1  # (B,)
        on_stack = (pos[None, :] <= last[:, None]) & (layout.popped_at > last[:, None])
        slot_of = torch.full((B, T + 1), -1, dtype=torch.long, device=device)
        slot_of.scatter_(1, torch.where(held, memory, T), slots)  # (B, T + 1)
        in_chunk = (pos >= start) & (pos < end)
        kept = on_stack & (in_chunk[None, :] | (slot_of[:, :T] >= 0))  # (B, T)
        from_top = kept.flip(1).cumsum(1).flip(1)  # 1 for the top of the stack
        kept &= from_top <= M
        new = torch.full((B, M + 1), -1, dtype=torch.long, device=device)
        new.scatter_(1, torch.where(kept, M - from_top, M), pos.expand(B, T))
        new = new[:, :M]
        update = torch.where(new >= start, M + new - start, slot_of.gather(1, new.clamp(min=0)))
        chunks.append(MemoryChunk(start=start, allowed=allowed[:, None], relative=relative,
                                  memory=memory, update=torch.where(new >= 0, update, -1)))
        memory = new
    return tuple(chunks)


@dataclass
class TGState(RowState):
    """What Transformer Grammars tracks per row while actions are fed one at a time, over
    S = ``capacity`` cache positions.

    Attributes:
        depth: (R, S) long: each token's depth (0 past the row's tokens).
        on_stack: (R, S) bool: the tokens on the stack.
        open: (R, S) bool: the opening brackets of the constituents still open.
        length: (R,) long: tokens so far, the start token included (the next position).
        n_open: (R,) long: constituents open.
        n_actions: (R,) long: actions read.
        capacity: S.
        sequence_length: the most tokens a row may hold (teacher forcing's chunk: search
            reads a sentence as one chunk); None: ``capacity``.
    """

    depth: Tensor
    on_stack: Tensor
    open: Tensor
    length: Tensor
    n_open: Tensor
    n_actions: Tensor
    capacity: int
    sequence_length: int | None = None

    @classmethod
    def initial(cls, rows: int, capacity: int, device: torch.device | str | None = None,
                sequence_length: int | None = None) -> TGState:
        """``rows`` rows holding the start token at position 0 (on the stack, depth 0), with
        room for ``capacity`` tokens (the start token included), at most
        ``sequence_length`` of them filled."""
        at_least("capacity", capacity, 1)

        def zeros(*shape: int, dtype: torch.dtype = torch.long) -> Tensor:
            return torch.zeros(rows, *shape, dtype=dtype, device=device)

        on_stack = zeros(capacity, dtype=torch.bool)
        on_stack[:, 0] = True
        return cls(depth=zeros(capacity), on_stack=on_stack,
                   open=zeros(capacity, dtype=torch.bool), length=zeros() + 1,
                   n_open=zeros(), n_actions=zeros(), capacity=capacity,
                   sequence_length=sequence_length)

    def step(self, actions: Tensor) -> StepMasks:
        """Read one action a row (R,) (-1: none; the row keeps its state), in place. Two
        slots a row at p, the row's token count before the step: slot 0 the COMPOSE copy of
        a ``REDUCE`` (at p), slot 1 the action's token (the copy at p + 1 for a ``REDUCE``,
        else at p); ``allowed`` (R, 1, 2, S) and ``relative`` (R, 2, S) are those rows of
        ``tg_layout`` over the S cache positions, key 0 only and 0 for an absent slot.
        An action that builds no tree (as for ``tg_layout``) or a row past ``capacity``
        tokens raises a one-line error naming the row, a row past ``sequence_length`` one
        naming it."""
        actions = actions.to(self.length.device)
        if actions.shape != self.length.shape:
            raise InputError(f"expected one action a row, shape {tuple(self.length.shape)}; "
                             f"found {tuple(actions.shape)}")
        active = actions != NO_ACTION
        opens, closes = actions >= FIRST_NT, actions == REDUCE
        p = self.length.clone()
        keys = torch.arange(self.capacity, device=p.device)
        after_nt = self.open.gather(1, (p - 1)[:, None])[:, 0]  # the last token opened one
        problems = (actions < NO_ACTION, active & (p + 1 + closes.long() > self.capacity),
                    active & ~opens & (self.n_open == 0),
                    opens & (self.n_open == 0) & (self.n_actions > 0), closes & after_nt)
        if bool(torch.stack(problems).any().item()):
            self._raise(actions, *problems)

        # slot 0, REDUCE rows: the innermost open NT and what is on the stack above it
        innermost = torch.where(self.open, keys, -1).amax(1)  # (R,)
        popped = self.on_stack & (keys >= innermost[:, None]) & closes[:, None]
        here = (keys == p[:, None]) & active[:, None]  # the slot-0 or only token
        compose_keys = popped | (here & closes[:, None])
        new_depth = torch.where(closes, self.n_open, self.n_open + 1)  # (R,)
        self.on_stack &= ~popped
        self.on_stack |= here
        self.open &= ~((keys == innermost[:, None]) & closes[:, None])
        self.open |= here & opens[:, None]
        second = (keys == (p + 1)[:, None]) & closes[:, None]
        self.depth.copy_(torch.where(here | second, new_depth[:, None], self.depth))
        # slot 1: the stack (the token just pushed, or the COMPOSE copy) and the token
        token_keys = self.on_stack & active[:, None] | second

        present = torch.stack([closes, active], 1)  # (R, 2)
        first_key = keys == 0
        allowed = torch.where(present[:, :, None], torch.stack([compose_keys, token_keys], 1),
                              first_key)  # (R, 2, S)
        relative = torch.where(allowed & present[:, :, None],
                               new_depth[:, None, None] - self.depth[:, None, :], 0)
        positions = torch.stack([p, p + closes.long()], 1).clamp(max=self.capacity - 1)
        self.length += active.long() + closes.long()
        self.n_open += opens.long() - closes.long()
        self.n_actions += active.long()
        longest = int(self.length.max())
        if self.sequence_length is not None and longest > self.sequence_length:
            raise SettingError(
                "sequence_length", self.sequence_length,
                f"at least {longest}, or unset: search reads a sentence as one chunk, and this "
                f"one needs {longest} tokens (teacher forcing would read it in chunks)")
        return StepMasks(positions=positions, present=present, allowed=allowed[:, None],
                         relative=relative)

    def _raise(self, actions: Tensor, below: Tensor, full: Tensor, unopened: Tensor,
               closed: Tensor, empty: Tensor) -> None:
        """Raise the problem of the first row with one (``step``'s checks, each (R,))."""
        row = int((below | full | unopened | closed | empty).nonzero()[0, 0])
        a, i = int(actions[row]), int(self.n_actions[row])
        where = f"row {row}, action {i} ({_name(a)})"
        if bool(below[row]):
            raise ActionError(f"row {row}, action {i}: unknown action id {a}; expected -1 (no "
                              "action), 0 (SHIFT), 1 (REDUCE) or an NT id >= 2")
        if bool(full[row]):
            raise InputError(f"{where}: the row holds {int(self.length[row])} tokens and "
                             f"capacity={self.capacity}; a {_name(a)} needs "
                             f"{1 + (a == REDUCE)} more")
        if bool(empty[row]):
            raise ActionError(f"{where} would close an empty constituent (opened by action "
                              f"{i - 1}); expected SHIFT or NT(X)")
        if i == 0:
            raise ActionError(f"{where}: no constituent is open; expected NT(X) first")
        raise ActionError(f"{where}: the tree is complete (its root closed at action "
                          f"{i - 1}); expected no action (-1)")


class TGPolicy(AttentionPolicy):
    """Transformer Grammars' attention (Sartran et al. 2022 §2): STACK and COMPOSE attention,
    relative positions by tree depth and, for documents, chunks with Transformer-XL memory.

    Each ``REDUCE`` is read as its closing bracket twice (module docstring), relative
    positions are the depth differences clipped to [``min_relative``, ``max_relative``]
    (the paper's configuration: [−1, 62]); no absolute positions, post-norm layers
    (Transformer-XL's).

    With ``sequence_length`` (documents, as the released document-level models: 256)
    teacher forcing reads each row in chunks of that many tokens with ``memory_length``
    slots of Transformer-XL memory (default ``sequence_length``, the released code's only
    setting), which carry the top of the stack across a chunk boundary (``tg_chunks``,
    ``synlm.transition.attention.memory``); search reads a sentence as one chunk, and one of
    more tokens is a one-line ``SettingError``. None: a row is one chunk."""

    name = "tg"
    pre_norm = False
    absolute_positions = False
    closing_brackets = True

    def __init__(self, min_relative: int = -1, max_relative: int = 62,
                 sequence_length: int | None = None, memory_length: int | None = None
                 ) -> None:
        if max_relative < min_relative:
            raise SettingError("max_relative", max_relative,
                               f"at least min_relative={min_relative}")
        at_least("sequence_length", sequence_length)
        at_least("memory_length", memory_length)
        if sequence_length is None and memory_length is not None:
            raise SettingError("memory_length", memory_length,
                               "unset: memory needs a sequence_length to cut chunks")
        self.relative_range = (min_relative, max_relative)
        self.sequence_length = sequence_length
        self.memory_length = memory_length or sequence_length

    def masks(self, actions: Tensor, num_heads: int) -> BatchMasks | ChunkedMasks:
        """The whole rows' masks (``tg_layout``), or with ``sequence_length`` their chunks
        with the smart memory of the released code (``tg_chunks``)."""
        if self.sequence_length is None:
            layout = tg_layout(actions)
            return BatchMasks(source=layout.source, predicts=~layout.compose,
                              allowed=layout.mask[:, None], relative=layout.relative)
        layout = tg_layout(actions, attention=False)
        return ChunkedMasks(source=layout.source, predicts=~layout.compose,
                            chunks=tg_chunks(layout, self.sequence_length, self.memory_length))

    def initial_state(self, rows: int, capacity: int, num_heads: int,
                      device: torch.device | str | None = None) -> TGState:
        return TGState.initial(rows, capacity, device, self.sequence_length)

    def cache_positions(self, max_actions: int) -> int:
        """The start token, one per action and one more per ``REDUCE``: at most half the
        actions (each closes a constituent an ``NT`` opened)."""
        return 1 + max_actions + max_actions // 2 + 1
