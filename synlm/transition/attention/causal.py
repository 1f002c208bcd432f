"""PLM's attention (Qian et al. 2021, "Structural Guidance for Transformer Language Models",
ACL, §3.1): every token reads itself and every earlier one, a GPT-2 over the action
sequence, with learned absolute positions and pre-norm layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from synlm import errors
from synlm.transition.attention.base import AttentionPolicy, BatchMasks, StepMasks, causal_masks
from synlm.transition.parser_state import NO_ACTION
from synlm.transition.structure import RowState


@dataclass
class CausalState(RowState):
    """PLM's incremental attention: each new token reads every earlier one.

    Attributes:
        length: (R,) tokens so far (the start token included).
        capacity: the cache positions.
    """

    length: Tensor
    capacity: int

    @classmethod
    def initial(cls, rows: int, capacity: int, device: torch.device | str | None = None
                ) -> CausalState:
        """R rows holding the start token at position 0."""
        return cls(torch.ones(rows, dtype=torch.long, device=device), capacity)

    def step(self, actions: Tensor) -> StepMasks:
        """One token per row with an action (R,) (-1: none), at the next position."""
        present = actions != NO_ACTION  # (R,)
        if bool((self.length[present] >= self.capacity).any()):
            raise errors.InputError(f"an action sequence is longer than the cache's "
                                    f"{self.capacity - 1} actions")
        keys = torch.arange(self.capacity, device=actions.device)  # (S,)
        allowed = torch.where(present[:, None], keys <= self.length[:, None], keys == 0)
        masks = StepMasks(self.length[:, None].clone(), present[:, None],
                          allowed[:, None, None, :])
        self.length += present.long()
        return masks


class CausalPolicy(AttentionPolicy):
    """PLM's attention (Qian et al. 2021 §3.1): every token reads itself and every earlier
    one, with learned absolute positions and pre-norm layers."""

    name = "causal"

    def masks(self, actions: Tensor, num_heads: int) -> BatchMasks:
        return causal_masks(actions)

    def initial_state(self, rows: int, capacity: int, num_heads: int,
                      device: torch.device | str | None = None) -> CausalState:
        return CausalState.initial(rows, capacity, device)
