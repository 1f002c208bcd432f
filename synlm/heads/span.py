"""Span cross-entropy head of PaLM-S (Peng et al. 2019 §2.2, eq. 5; Appendix A).

The span attention's distribution ω_t = softmax(s_t) over the K spans ending at the word
before input t is trained towards the gold distribution y_t, the normalised indicator of the
gold spans among them (``synlm.syntax.targets``: right-aligned slots, weight ∝ length as the
released targets):

    L_span = Σ_t H(y_t, ω_t) / N,    H(y, ω) = −Σ_v y_v log ω_v,

added to the language-model loss with λ = 0.01 (``weight``). ``reduction`` picks N:

- ``gold_rows`` (default): the rows with gold spans (a sentence with a tree, a word that
  ends a constituent); rows without any are masked out;
- ``all_rows``: every input of the batch, rows without gold counting zero, as the released
  soft cross-entropy helper averages over all (T, B) rows.

log ω is the log-softmax of the scores (the released helper takes log(ω + 1e-6)).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor

from synlm.errors import InputError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.outputs import BackboneOutput, Batch, HeadOutput

Reduction = Literal["gold_rows", "all_rows"]


class SpanHead(SyntaxHead):
    """Supervise a backbone's span attention with gold spans (PaLM-S).

    Args:
        weight: λ of eq. 5 (0.01 in the paper).
        reduction: ``gold_rows`` or ``all_rows`` (module docstring).

    Logs ``{stage}/span_loss`` and ``{stage}/span_top_acc``: the share of gold rows whose
    highest-scoring span is a gold one. It asks the data for span targets over the
    backbone's window (``gold_options``), so ``data.span_window`` follows the model.
    """

    def __init__(self, weight: float = 0.01, reduction: Reduction = "gold_rows") -> None:
        super().__init__("span", weight, requires={"span_scores"}, needs_gold={"spans"})
        if reduction not in ("gold_rows", "all_rows"):
            raise InputError(f"SpanHead reduction must be 'gold_rows' or 'all_rows', "
                             f"not {reduction!r}")
        self.reduction = reduction
        self.slots = 0

    def bind(self, context: HeadContext) -> None:
        self.slots = context.backbone.span_slots

    def gold_options(self) -> dict[str, Any]:
        return {"span_window": self.slots + 1}

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor) -> HeadOutput:
        if batch.spans is None:
            return HeadOutput()
        scores = out.span_scores  # (B, T, K)
        if batch.spans.size(-1) != scores.size(-1):
            raise InputError(
                f"SpanHead: the span targets have {batch.spans.size(-1)} slots but the span "
                f"attention scores {scores.size(-1)}; set data.span_window to "
                f"{scores.size(-1) + 1} (the attention's window)")
        log_weights = torch.log_softmax(scores.float(), -1)  # log ω (B, T, K)
        cross_entropy = -(batch.spans * log_weights).sum(-1)  # (B, T)
        gold = batch.mask & batch.span_mask
        rows = gold if self.reduction == "gold_rows" else batch.mask
        loss = (cross_entropy * gold).sum() / rows.sum().clamp_min(1)
        top = batch.spans.gather(-1, scores.argmax(-1, keepdim=True)).squeeze(-1) > 0
        top_acc = (top & gold).sum() / gold.sum().clamp_min(1)
        return HeadOutput(loss=loss, metrics={f"{self.name}_top_acc": top_acc.float()})

    def extra_repr(self) -> str:
        return f"weight={self.weight}, reduction={self.reduction}, slots={self.slots}"
