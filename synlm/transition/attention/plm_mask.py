"""PLM-mask's attention (Qian et al. 2021, "Structural Guidance for Transformer Language
Models", ACL, §3.2): two heads of an action Transformer see either side of the innermost
open constituent; the other heads, the positions and the layers are PLM's.

An action Transformer (``synlm.transition.action_transformer``) reads a sentence's top-down actions
as tokens: position 0 is the start token (``[START]``), then one token per action, a
``SHIFT`` standing for its word. After each token, the constituents opened and not yet closed
form a stack; the innermost one was opened by an ``NT(X)`` token at some position p. As in
IBM/transformers-struct-guidance ``src/plm-gen.py`` (``get_attention_mask_from_actions``, run
with ``--buffer_head 0 --stack_head 1``), the token at position t, once it has been read:

- on the **buffer head**, attends to the keys before p (what precedes the open constituent);
- on the **stack head**, attends to the keys from p to t (the open constituent so far);
- with no constituent open (the start token; after the root's ``REDUCE``) attends to every
  key up to t on both heads, as every other head always does.

So an ``NT(X)`` token sees only itself on the stack head and everything before it on the
buffer head; a word sees its constituent's tokens from its ``NT(X)`` on; a ``REDUCE``, read
after its constituent is closed, sees the parent constituent (the closed one included) on
the stack head. Every head is causal. The reference applies the same mask in every layer.

The reference reads GPT-2 subword tokens (a word may be several), synlm one token a word;
the mask depends only on which tokens are ``NT(X)`` and ``REDUCE``, so it is the same
function. The reference's mask is 1/0, turned by GPT-2 into -10000 added to the masked
scores; here it is boolean (allowed or not). Where the reference pads a batch, a padding
query row attends to every real key; here it attends to key 0 only (its output is unused).

``plm_mask_attention`` gives the masks of a batch of action sequences; ``PLMMaskState``
gives the same rows one step at a time, for beam search; ``PLMMaskPolicy`` is the policy
(``synlm.transition.attention.base``; ``attention: plm_mask``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from synlm.errors import InputError, SettingError, at_least
from synlm.syntax.actions import ActionError
from synlm.transition.attention.base import AttentionPolicy, BatchMasks, StepMasks, causal_masks
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE
from synlm.transition.structure import RowState, check_actions

#: The heads the reference restricts (``--buffer_head 0 --stack_head 1``).
BUFFER_HEAD, STACK_HEAD = 0, 1


def check_heads(n_heads: int, buffer_head: int, stack_head: int) -> None:
    """Two different head indices in ``[0, n_heads)``; otherwise a one-line
    ``SettingError`` naming the setting."""
    for name, head in (("buffer_head", buffer_head), ("stack_head", stack_head)):
        if not 0 <= head < n_heads:
            raise SettingError(name, head, f"a head index in [0, {n_heads})")
    if buffer_head == stack_head:
        raise SettingError("stack_head", stack_head,
                           f"a head other than buffer_head={buffer_head}")


def _depths(actions: Tensor) -> Tensor:
    """(B, A + 1) long: the constituents open after each token (the start token first)."""
    step = (actions >= FIRST_NT).long() - (actions == REDUCE).long()
    return torch.nn.functional.pad(step.cumsum(1), (1, 0))


def _raise_for(actions: Tensor, depths: Tensor) -> None:
    """Raise the first problem of ``actions`` (B, A), if any, as a one-line error naming
    the row and the action's index."""
    below = actions < NO_ACTION
    after_padding = torch.nn.functional.pad(
        (actions[:, 1:] != NO_ACTION) & (actions[:, :-1] == NO_ACTION), (1, 0))
    unopened = depths[:, 1:] < 0
    if not bool((below.any() | after_padding.any() | unopened.any()).item()):
        return
    for problem, say in (
        (below, "expected -1 (no action), 0 (SHIFT), 1 (REDUCE) or an NT id >= 2"),
        (after_padding, "follows padding (-1); padding must come last"),
        (unopened, "a REDUCE that closes no constituent: none is open"),
    ):
        if bool(problem.any()):
            row, index = (int(v) for v in problem.nonzero()[0])
            raise ActionError(f"row {row}, action {index} (id {int(actions[row, index])}): "
                              f"{say}")


def innermost_open(actions: Tensor) -> Tensor:
    """(B, A) top-down action ids, padded with -1 -> (B, T) long, T = A + 1 (the start
    token at position 0): for each token, the position of the ``NT(X)`` token of the
    innermost constituent open once the token has been read; -1 where none is open (the
    start token, after the root's ``REDUCE``) and at padding.

    The innermost open constituent after token t is the last ``NT`` token s <= t that left
    as many constituents open as there are after t: every later one at that depth or deeper
    was closed again. One (B, T, T) comparison finds it for every token at once. A
    ``REDUCE`` with no constituent open raises a one-line ``ActionError``."""
    check_actions(actions)
    depths = _depths(actions)
    _raise_for(actions, depths)
    tokens = actions.size(1) + 1
    pos = torch.arange(tokens, device=actions.device)
    opens = torch.nn.functional.pad(actions >= FIRST_NT, (1, 0))
    match = opens[:, None, :] & (depths[:, None, :] == depths[:, :, None]) \
        & (pos[None, :] <= pos[:, None])
    inner = torch.where(match, pos, -1).amax(-1)
    real = pos[None, :] <= (actions != NO_ACTION).sum(1, keepdim=True)
    return torch.where(real, inner, -1)


def _restrict(allowed: Tensor, keys: Tensor, query: Tensor, inner: Tensor, buffer_head: int,
              stack_head: int) -> None:
    """Write the buffer and stack heads' rows into ``allowed`` (..., H, Q, S) in place: the
    queries at positions ``query`` (..., Q, 1) whose innermost open ``NT`` is at ``inner``
    (..., Q, 1) (-1: none), over the keys at positions ``keys`` (S,)."""
    causal = keys <= query
    allowed[..., buffer_head, :, :] = causal & ((inner < 0) | (keys < inner))
    allowed[..., stack_head, :, :] = causal & (keys >= inner)


def plm_mask_attention(actions: Tensor, n_heads: int, buffer_head: int = BUFFER_HEAD,
                       stack_head: int = STACK_HEAD) -> Tensor:
    """(B, A) actions padded with -1 -> (B, H, T, T) bool, T = A + 1 (start token first):
    query i may attend key j.

    Causal (j <= i) for every head, the reference's buffer/stack restriction (module
    docstring) on the heads ``buffer_head`` and ``stack_head``, keys past a row's tokens
    disallowed, a padding query row attends key 0 only. Bad heads raise a one-line
    ``SettingError``; a ``REDUCE`` with nothing open, an id below -1 or an action after
    padding a one-line ``ActionError`` naming the row and the action's index."""
    check_heads(n_heads, buffer_head, stack_head)
    inner = innermost_open(actions)
    batch, tokens = inner.shape
    pos = torch.arange(tokens, device=actions.device)
    allowed = (pos[None, :] <= pos[:, None]).expand(batch, n_heads, tokens, tokens).clone()
    _restrict(allowed, pos, pos[:, None], inner[:, :, None], buffer_head, stack_head)
    real = pos[None, :] <= (actions != NO_ACTION).sum(1, keepdim=True)  # (B, T)
    allowed &= real[:, None, :, None]
    allowed[..., 0] |= ~real[:, None, :]
    return allowed


@dataclass
class PLMMaskState(RowState):
    """What PLM-mask tracks per row while actions are fed one at a time: the positions of
    the open constituents' ``NT`` tokens and the tokens so far.

    Attributes:
        open_positions: (R, D) long: the position of each open constituent's ``NT`` token,
            outermost first; entries at and past ``depth`` are stale.
        depth: (R,) long: constituents open.
        length: (R,) long: tokens so far, the start token included (the next position).
        capacity: cache positions S (tokens a row may hold, the start token included).
        n_heads, buffer_head, stack_head: as for ``plm_mask_attention``.
    """

    open_positions: Tensor
    depth: Tensor
    length: Tensor
    capacity: int
    n_heads: int
    buffer_head: int
    stack_head: int

    @classmethod
    def initial(cls, rows: int, capacity: int, n_heads: int, buffer_head: int = BUFFER_HEAD,
                stack_head: int = STACK_HEAD, device: torch.device | str | None = None,
                max_open: int | None = None) -> PLMMaskState:
        """``rows`` rows holding the start token at position 0, with room for ``capacity``
        tokens (the start token included) and ``max_open`` constituents open at once
        (default: as many as there are positions after the start token)."""
        at_least("capacity", capacity, 1)
        at_least("max_open", max_open, 1)
        check_heads(n_heads, buffer_head, stack_head)
        deepest = max_open if max_open is not None else max(capacity - 1, 1)
        return cls(
            open_positions=torch.zeros(rows, deepest, dtype=torch.long, device=device),
            depth=torch.zeros(rows, dtype=torch.long, device=device),
            length=torch.ones(rows, dtype=torch.long, device=device),
            capacity=capacity, n_heads=n_heads, buffer_head=buffer_head,
            stack_head=stack_head,
        )

    def step(self, actions: Tensor) -> StepMasks:
        """Read one action a row (R,) (-1: the row has none and keeps its state): one slot
        a row, at the row's token count before the step, whose ``allowed`` row (R, H, 1, S)
        is that of ``plm_mask_attention`` for the position over the S = ``capacity`` cache
        positions (key 0 only for a row without an action). A ``REDUCE`` with nothing open,
        a row past ``capacity`` tokens or past D open constituents raises a one-line error
        naming the row."""
        actions = actions.to(self.length.device)
        if actions.shape != self.length.shape:
            raise InputError(f"expected one action a row, shape {tuple(self.length.shape)}; "
                             f"found {tuple(actions.shape)}")
        deepest = self.open_positions.size(1)
        active = actions != NO_ACTION
        opens, closes = actions >= FIRST_NT, actions == REDUCE
        position = self.length.clone()
        full = active & (position >= self.capacity)
        unopened = closes & (self.depth == 0)
        too_deep = opens & (self.depth >= deepest)
        below = actions < NO_ACTION
        if bool((full | unopened | too_deep | below).any().item()):
            self._raise(actions, below, full, unopened, too_deep)

        column = self.depth.clamp(max=deepest - 1)[:, None]
        kept = self.open_positions.gather(1, column)
        self.open_positions.scatter_(1, column, torch.where(opens[:, None], position[:, None],
                                                            kept))
        self.depth += opens.long() - closes.long()
        top = self.open_positions.gather(1, (self.depth - 1).clamp(min=0)[:, None])
        inner = torch.where(self.depth[:, None] > 0, top, -1)  # (R, 1)

        keys = torch.arange(self.capacity, device=self.length.device)
        rows = actions.size(0)
        causal = keys[None, :] <= position[:, None]  # (R, S)
        allowed = causal[:, None, None, :].expand(rows, self.n_heads, 1, self.capacity).clone()
        _restrict(allowed, keys, position[:, None, None], inner[:, :, None], self.buffer_head,
                  self.stack_head)
        allowed = torch.where(active[:, None, None, None], allowed, keys == 0)
        self.length += active.long()
        return StepMasks(positions=position[:, None], present=active[:, None],
                         allowed=allowed, relative=None)

    def _raise(self, actions: Tensor, below: Tensor, full: Tensor, unopened: Tensor,
               too_deep: Tensor) -> None:
        row = int(((below | full | unopened | too_deep).nonzero())[0, 0])
        what = f"row {row}, action id {int(actions[row])}"
        if bool(below[row]):
            raise ActionError(f"{what}: expected -1 (no action), 0 (SHIFT), 1 (REDUCE) or "
                              "an NT id >= 2")
        if bool(full[row]):
            raise InputError(f"{what}: the row already holds capacity={self.capacity} tokens")
        if bool(unopened[row]):
            raise ActionError(f"{what}: a REDUCE that closes no constituent: none is open")
        raise InputError(f"{what} (NT) opens more than max_open="
                         f"{self.open_positions.size(1)} constituents")


class PLMMaskPolicy(AttentionPolicy):
    """PLM-mask's attention (Qian et al. 2021 §3.2): PLM's, with a buffer head and a stack
    head that read either side of the innermost open constituent.

    PLM's tokens, positions and layers, the heads ``buffer_head`` and ``stack_head``
    restricted as the released ``plm-gen.py`` (module docstring)."""

    name = "plm_mask"

    def __init__(self, buffer_head: int = BUFFER_HEAD, stack_head: int = STACK_HEAD) -> None:
        self.buffer_head, self.stack_head = buffer_head, stack_head

    def check(self, num_heads: int) -> None:
        check_heads(num_heads, self.buffer_head, self.stack_head)

    def masks(self, actions: Tensor, num_heads: int) -> BatchMasks:
        allowed = plm_mask_attention(actions, num_heads, self.buffer_head, self.stack_head)
        return replace(causal_masks(actions), allowed=allowed)

    def initial_state(self, rows: int, capacity: int, num_heads: int,
                      device: torch.device | str | None = None) -> PLMMaskState:
        return PLMMaskState.initial(rows, capacity, num_heads, self.buffer_head,
                                    self.stack_head, device)
