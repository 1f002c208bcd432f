"""Syntactic-distance ranking head of ONLSTM-SYD (Du et al. 2020, §3.3-3.4, eq. 14-19).

Predicted distances d^ (B, T), one per input token (the gap before it), are trained to
rank like the gold distances y with the hinge ranking loss of eq. 18 as released
(wenyudu/SDLM utils.py:26-37): over ordered pairs with y_i > y_j,

    L_syd = sum relu(margin - (d^_i - d^_j)) / #pairs.

Summing over ordered pairs with y_i > y_j is eq. 18's sum over i < j with sign(y_i - y_j)
(gold ties only add a constant there); the division by the number of pairs is the
released code's (the paper sums). With d^ in [0, 1) and margin 1 the hinge never closes,
so every pair keeps pushing, as in the released model.

Where the distances come from (``mode``):

- ``split``: the paper's split head (SDLM ``fwh``). A separate master forget gate re-reads
  the layer's master-forget logits h^f (eq. 14): f~^w = cumax(W_s h^f + b_s) (eq. 16),
  d^ = 1 - mean(f~^w) (eq. 17). W_s may get ON-LSTM DropConnect.
- ``shared``: rank the backbone's own distances (Table 4, "one set of trees").
- ``hidden``: an MLP on hidden states -> sigmoid (Table 4, "vanilla multitasking"); works
  on any backbone.

Which pairs (``pairing``):

- ``sentence``: word pairs inside one sentence of one row (the paper's eq. 18).
- ``stream``: pairs across the batch columns at the same time step, as the released code
  does with its (T, B) inputs (docs/reference-implementations.md §2.3).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.errors import InputError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.modules import cumax, drop_connect
from synlm.outputs import BackboneOutput, Batch, HeadOutput

Mode = Literal["split", "shared", "hidden"]
Pairing = Literal["sentence", "stream"]


def ranking_pairs(
    gold: Tensor, valid: Tensor, pairing: Pairing, sentence_ids: Tensor | None = None
) -> Tensor:
    """Bool mask of the ordered pairs (i, j) with gold_i > gold_j that the loss counts.

    gold, valid, sentence_ids: (B, T). ``sentence``: (B, T, T) pairs inside a row, and
    inside one sentence when ``sentence_ids`` is given. ``stream``: (T, B, B) pairs across
    rows at the same step.
    """
    if pairing == "stream":
        gold, valid = gold.t(), valid.t()  # (T, B)
    pos = (gold.unsqueeze(-1) > gold.unsqueeze(-2)) & valid.unsqueeze(-1) & valid.unsqueeze(-2)
    if pairing == "sentence" and sentence_ids is not None:
        pos &= sentence_ids.unsqueeze(-1) == sentence_ids.unsqueeze(-2)
    return pos


def ranking_loss(
    pred: Tensor, pairs: Tensor, pairing: Pairing, margin: float = 1.0
) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. 18 as released: mean of relu(margin - (pred_i - pred_j)) over ``pairs``.

    pred (B, T); pairs from ``ranking_pairs``. Returns the loss, the number of pairs and
    the number of them ``pred`` orders correctly (pred_i > pred_j).
    """
    if pairing == "stream":
        pred = pred.t()  # (T, B)
    diff = pred.unsqueeze(-1) - pred.unsqueeze(-2)  # same layout as pairs
    n_pairs = pairs.sum()
    loss = (F.relu(margin - diff) * pairs).sum() / n_pairs.clamp_min(1)
    correct = ((diff > 0) & pairs).sum()
    return loss, n_pairs, correct


class DistanceRankingHead(SyntaxHead):
    """Rank predicted syntactic distances like the gold ones (ONLSTM-SYD).

    Args:
        mode: ``split`` (eq. 14-17), ``shared`` or ``hidden`` (see the module docstring).
        layer: backbone layer(s) to supervise; a list averages the loss over them.
            ``hidden`` mode with ``layer=None`` reads ``out.hidden`` instead of
            ``out.layers``. Default -1, the last layer (SDLM ``--l4d 2``).
        pairing: ``sentence`` (the paper) or ``stream`` (the released code).
        margin: hinge margin, 1.0 as released.
        weight: alpha of eq. 19.
        weight_drop: DropConnect on the split head's W_s (SDLM passes ``--wdrop``).
        mlp_size: hidden width of the ``hidden``-mode MLP.
        name: metric prefix (``train/{name}_loss``, ``train/{name}_rank_acc``); give two
            heads of this class different names.

    ``requires`` is set per instance from ``mode`` (it shadows the class attribute):
    ``split`` reads ``distance_features``, ``shared`` reads ``distances``, ``hidden`` reads
    ``layers`` unless ``layer=None``.

    ``forward`` returns the loss, ``structure`` = the predicted distances (L_sel, B, T)
    (the ``distances`` structure named ``name``, decoded into trees for parsing), and metrics
    ``{name}_rank_acc`` (share of gold-ordered pairs predicted in order, strictly) and
    ``{name}_rank_pairs`` (pairs counted). Without gold distances it returns no loss.
    """

    def __init__(
        self,
        mode: Mode = "split",
        layer: int | list[int] | None = -1,
        pairing: Pairing = "sentence",
        margin: float = 1.0,
        weight: float = 0.75,
        weight_drop: float = 0.0,
        mlp_size: int = 256,
        name: str = "syd",
    ) -> None:
        reads = {"split": {"distance_features"}, "shared": {"distances"},
                 "hidden": set() if layer is None else {"layers"}}
        super().__init__(name, weight, requires=reads.get(mode, ()), needs_gold={"distances"},
                         structure_kind="distances")
        if mode not in ("split", "shared", "hidden"):
            raise InputError(f"mode must be split, shared or hidden, not {mode!r}")
        if pairing not in ("sentence", "stream"):
            raise InputError(f"pairing must be sentence or stream, not {pairing!r}")
        if layer is None and mode != "hidden":
            raise InputError(f"layer=None (read out.hidden) needs mode='hidden', not {mode!r}")
        self.mode = mode
        self.layer = layer
        self.pairing = pairing
        self.margin = margin
        self.weight_drop = weight_drop
        self.mlp_size = mlp_size
        indices = [] if layer is None else [layer] if isinstance(layer, int) else list(layer)
        self.layer_indices: list[int] = indices  # made non-negative by bind() where sizes are known
        self.proj = nn.ModuleList()  # split: W_s per layer (n, n); hidden: an MLP per layer

    def bind(self, context: HeadContext) -> None:
        """Build the per-layer W_s (split) or MLP (hidden) from the backbone's spec."""
        spec = context.backbone
        if self.mode == "shared":
            return
        if self.layer is None:  # hidden mode on out.hidden
            self.proj = nn.ModuleList([self._mlp(spec.output_size)])
            return
        sizes = spec.distance_feature_sizes if self.mode == "split" else spec.layer_sizes
        for l in self.layer_indices:
            if not -len(sizes) <= l < len(sizes):
                raise InputError(f"{type(self).__name__}(layer={self.layer}): layer {l} out of "
                                 f"range for the {len(sizes)} backbone layers")
        self.layer_indices = [l % len(sizes) for l in self.layer_indices]
        if self.mode == "split":
            self.proj = nn.ModuleList(nn.Linear(sizes[l], sizes[l]) for l in self.layer_indices)
        else:
            self.proj = nn.ModuleList(self._mlp(sizes[l]) for l in self.layer_indices)

    def _mlp(self, size: int) -> nn.Module:
        return nn.Sequential(nn.Linear(size, self.mlp_size), nn.ReLU(), nn.Linear(self.mlp_size, 1))

    def distances(self, out: BackboneOutput) -> Tensor:
        """Predicted distances (L_sel, B, T) of the selected layers, d^_t for the gap before t."""
        if self.mode == "shared":
            return out.distances[self.layer_indices]  # (L_sel, B, T)
        if not self.proj:
            raise RuntimeError(f"{type(self).__name__}: call bind(context) before forward")
        if self.layer is None:  # hidden mode on the decoder input
            return torch.sigmoid(self.proj[0](out.hidden)).squeeze(-1).unsqueeze(0)
        preds = []
        for l, proj in zip(self.layer_indices, self.proj, strict=True):
            if self.mode == "split":
                hf = out.distance_features[l, :, :, : proj.in_features]  # (B, T, n) eq. 14
                w = drop_connect(proj.weight, self.weight_drop, self.training)
                preds.append(1.0 - cumax(F.linear(hf, w, proj.bias)).mean(-1))  # eq. 16-17
            else:
                preds.append(torch.sigmoid(proj(out.layers[l])).squeeze(-1))  # (B, T)
        return torch.stack(preds)

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor) -> HeadOutput:
        pred = self.distances(out)  # (L_sel, B, T)
        if batch.distances is None:
            return HeadOutput(structure=pred)
        valid = batch.mask
        if batch.distance_mask is not None:
            valid = valid & batch.distance_mask
        pairs = ranking_pairs(batch.distances, valid, self.pairing, batch.sentence_ids)
        losses, n_pairs, correct = zip(
            *(ranking_loss(p, pairs, self.pairing, self.margin) for p in pred), strict=True
        )
        n_pairs = torch.stack(n_pairs).sum()
        rank_acc = torch.stack(correct).sum() / n_pairs.clamp_min(1)
        return HeadOutput(
            loss=torch.stack(losses).mean(),
            metrics={f"{self.name}_rank_acc": rank_acc.float(),
                     f"{self.name}_rank_pairs": n_pairs.float()},
            structure=pred,
        )

    def extra_repr(self) -> str:
        return (
            f"mode={self.mode}, layer={self.layer}, pairing={self.pairing}, "
            f"margin={self.margin}, weight={self.weight}"
        )
