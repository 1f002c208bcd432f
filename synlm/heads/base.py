"""The syntax-head contract: read a backbone's output (and gold syntax), return a loss."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from synlm.backbones.base import Backbone
from synlm.outputs import BackboneOutput, Batch, HeadOutput


class SyntaxHead(nn.Module):
    """Base class of every syntax head.

    ``requires`` names the ``BackboneOutput`` fields the head reads (checked against
    ``Backbone.provides`` when ``SyntaxLM`` is built); ``needs_gold`` names the ``Batch``
    fields it reads (checked against the data at setup; empty means unsupervised).
    ``replaces_distribution`` heads return ``log_probs``/``target_log_probs`` that
    replace the tied decoder's next-token distribution; at most one per model.
    """

    requires: ClassVar[frozenset[str]] = frozenset()
    needs_gold: ClassVar[frozenset[str]] = frozenset()
    replaces_distribution: ClassVar[bool] = False
    #: Short name used in metric keys: ``train/{name}_loss``.
    name: ClassVar[str] = "head"

    def __init__(self, weight: float = 1.0) -> None:
        super().__init__()
        self.weight = weight

    def bind(self, backbone: Backbone) -> None:
        """Build layers whose sizes depend on the backbone. Called once by SyntaxLM."""

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor) -> HeadOutput:
        raise NotImplementedError  # pragma: no cover
