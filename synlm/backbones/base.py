"""The backbone contract: embeddings in, hidden states (and optional syntax) out."""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from synlm.outputs import BackboneOutput

#: Optional ``BackboneOutput`` fields a backbone may promise in ``provides``.
OPTIONAL_FIELDS = frozenset(
    {"layers", "raw_last", "distances", "distance_features", "span_scores", "attention",
     "aux_loss"}
)


class Backbone(nn.Module):
    """Base class of every backbone.

    A backbone maps embedded inputs ``x`` (B, T, input_size) and a carried ``state`` to
    a ``BackboneOutput`` whose ``hidden`` is (B, T, output_size). ``SyntaxLM`` owns the
    token embedding and the tied decoder, so ``output_size`` must equal ``input_size``
    for weight tying. ``provides`` names the optional output fields it fills; heads
    declare what they read in ``requires`` and ``SyntaxLM`` checks the two match.
    """

    provides: ClassVar[frozenset[str]] = frozenset()
    #: True when the backbone carries a recurrent state across windows (stream mode).
    recurrent: ClassVar[bool] = True

    input_size: int
    output_size: int

    def forward(self, x: Tensor, state: Any = None) -> BackboneOutput:  # pragma: no cover
        raise NotImplementedError
