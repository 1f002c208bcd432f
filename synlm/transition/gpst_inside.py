"""GPST's pruned inside-outside pass (Hu et al. 2024, §3.1, the R2D2 composition model of
Hu et al. 2021/2022; the released StructuredLM_RTDT ``InsideOutsideModule``), over the chart
``synlm.transition.gpst_chart`` builds.

Inside (Eq. 1–2 of §3.1): a word's representation is ``down(E x)``; a span (i, j) with
split points K composes each pair of children and weighs them by their split scores::

    s_k = ⟨f_l(e_ik), f_r(e_k+1,j)⟩ / sqrt(d_s)          (the released left/right_linear)
    a = softmax(s / τ)                                    (τ the temperature)
    e_ij = N(Σ_k a_k Compose(e_ik, e_k+1,j))              (N: layer norm without weights)
    h_ij = Σ_k a_k (max(h_ik, h_k+1,j) + 1)               (the height, 0 at a word)

The induced tree takes each span's best split (argmax_k s_k) from the root down.

Outside (§3.1, "pruned outside"): the root starts from a learned vector; in reverse step
order each span's (parent, sibling) pairs give its children an outside representation and
score by an outside Transformer over (parent, sibling) with role ids (0, 1) for a left
child, (0, 2) for a right child::

    o = N(Σ rows of Layers([p; sibling]))     t = ⟨g_p(p), g_c(sibling)⟩ / sqrt(d_s)

each child keeping the softmax-weighted average of the o it receives (a running log-sum
of the t; a child met twice in one step keeps the last, as the released scatter does).

The weighted sum Σ_k a_k c_k is the released ``WeightedSumFunc``: with its gate closed
(``InsideOutside.gate``, the released ``a_ij_require_grad = False``) it passes no gradient
to the weights a, as the GPST-small training script does for the generative losses.

Losses the released training sums (``FastGenerativeR2D2.forward``):
``inside_outside`` (each word predicted from its outside representation, through an MLP
and the tied embedding: cross-entropy), ``height`` (each root's expected height above 15
over its length above 15; 0 for shorter sentences), ``parser`` (the parser's scores fit
each induced split among its span's split points: cross-entropy).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.syntax.binary_actions import Span, postorder
from synlm.transition.gpst_chart import Chart
from synlm.transition.gpst_compose import Composition, CompositionLayer, normalise

#: The released height threshold (``DEFAULT_HEIGHT_THRESHOLD``).
HEIGHT_THRESHOLD = 15
#: The released outside log-sum's start (no score yet).
NO_SCORE = -1e20


def _scorer(size: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(size, size), nn.GELU(), nn.Linear(size, out))


@dataclass
class Inside:
    """The inside pass's results: ``table`` (nodes, d) every node's representation (node
    ids of ``Chart``), ``heights`` (nodes,), ``best`` each span's best split point index,
    by node id (words: -1)."""

    table: Tensor
    heights: Tensor
    best: list[int]

    def trees(self, chart: Chart) -> list[list[Span]]:
        """Each sentence's induced tree as post-order spans (``binary_actions.postorder``)."""
        def split_of(b: int):
            return lambda i, j: chart.tables[b][i, j].splits[
                self.best[chart.tables[b][i, j].node]]
        return [postorder(n, split_of(b)) for b, n in enumerate(chart.lengths)]


class Gate:
    """Whether the weighted sums pass a gradient to their split weights."""

    def __init__(self) -> None:
        self.open = True


class WeightedSum(torch.autograd.Function):
    """Σ_k a_k c_k: a (M, S), c (M, S, d) -> (M, d), its gradient to a behind ``gate``."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, c: Tensor, gate: Gate) -> Tensor:
        ctx.save_for_backward(a, c)
        ctx.gate = gate
        return torch.einsum("ms,msd->md", a, c)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor, None]:
        a, c = ctx.saved_tensors
        grad_a = torch.einsum("md,msd->ms", grad, c) if ctx.gate.open else None
        return grad_a, torch.einsum("ms,md->msd", a, grad), None


def _keep_last(index: Tensor) -> Tensor:
    """Positions of ``index`` (K,) not repeated later (a sequential scatter's survivors)."""
    unique, inverse = index.unique(return_inverse=True)
    positions = torch.arange(index.numel(), device=index.device)
    last = torch.full_like(unique, -1).scatter_reduce(0, inverse, positions, "amax")
    return last


class InsideOutside(nn.Module):
    """The split scorers, the outside encoder and root (module docstring); the composition
    is the generative model's (``GPST.compose``), passed to ``inside``.

    Args:
        size: the composition's width d (``hidden_size``).
        score_size: d_s (``const_size``).
        n_heads, ffn_size, outside_layers: the outside Transformer's heads, feed-forward
            width and depth (``decoder_num_hidden_layers``).
        dropout: the outside layers' dropout.
    """

    def __init__(self, size: int = 256, score_size: int = 128, n_heads: int = 8,
                 ffn_size: int = 1024, outside_layers: int = 1, dropout: float = 0.1,
                 roles: int = 4) -> None:
        super().__init__()
        self.score_size = score_size
        self.left_score, self.right_score = _scorer(size, score_size), _scorer(size, score_size)
        self.parent_out = _scorer(size, score_size)
        self.left_out, self.right_out = _scorer(size, score_size), _scorer(size, score_size)
        self.outside_layers = nn.ModuleList(
            CompositionLayer(size, n_heads, ffn_size, dropout, roles)
            for _ in range(outside_layers))
        self.root = nn.Parameter(torch.rand(size))
        self.gate = Gate()

    @contextmanager
    def weights_frozen(self) -> Iterator[None]:
        """Backward passes run inside give the split weights no gradient (module
        docstring)."""
        self.gate.open = False
        try:
            yield
        finally:
            self.gate.open = True

    def inside(self, compose: Composition, words: Tensor, chart: Chart,
               temperature: float = 1.0) -> Inside:
        """The inside pass from the words' representations ``words`` (nodes of words, d)."""
        table, heights = words, words.new_zeros(words.size(0))
        best = [-1] * words.size(0)
        for step in chart.steps:
            children = step.children.to(words.device)  # (M, S, 2)
            M, S, _ = children.shape
            pairs = table[children]  # (M, S, 2, d)
            scores = (self.left_score(pairs[:, :, 0]) * self.right_score(pairs[:, :, 1])
                      ).sum(-1) / math.sqrt(self.score_size)  # (M, S)
            a = F.softmax(scores / temperature, -1)
            composed = compose(pairs[:, :, 0].flatten(0, 1), pairs[:, :, 1].flatten(0, 1))
            spans = normalise(WeightedSum.apply(a, composed.view(M, S, -1), self.gate))
            below = heights[children].max(-1).values + 1  # (M, S)
            table = torch.cat([table, spans])
            heights = torch.cat([heights, (a * below).sum(-1)])
            best.extend(scores.argmax(-1).tolist())
        return Inside(table, heights, best)

    def _outside_pairs(self, parents: Tensor, pairs: Tensor) -> tuple[Tensor, Tensor]:
        """Outside scores (M, S, 2) and representations (M, S, 2, d) of the (left, right)
        children ``pairs`` (M, S, 2, d) of ``parents`` (M, d)."""
        M, S, _, d = pairs.shape
        parent = parents[:, None, None].expand(M, S, 2, d)
        rows = torch.stack([parent, pairs.flip(2)], 3).reshape(M * S * 2, 2, d)
        p = self.parent_out(rows[:, 0])  # (M S 2, d_s)
        left = (p[0::2] * self.right_out(rows[0::2, 1])).sum(-1)  # the left child's
        right = (p[1::2] * self.left_out(rows[1::2, 1])).sum(-1)
        roles = torch.tensor([[0, 1], [0, 2]], device=pairs.device).repeat(M * S, 1)
        for layer in self.outside_layers:
            rows = layer(rows, roles)
        scores = torch.stack([left, right], -1).view(M, S, 2) / math.sqrt(self.score_size)
        return scores, normalise(rows.sum(1)).view(M, S, 2, d)

    def outside(self, inside: Inside, chart: Chart) -> Tensor:
        """(nodes, d) each node's outside representation (module docstring)."""
        table = inside.table
        nodes, d = table.shape
        roots = chart.roots.to(table.device)
        state = table.new_zeros(nodes, d).index_put((roots,), self.root.expand(len(roots), d))
        logsum = table.new_full((nodes,), NO_SCORE).index_put(
            (roots,), table.new_zeros(len(roots)))
        for step in reversed(chart.steps):
            children = step.children.to(table.device)  # (M, S, 2)
            scores, reprs = self._outside_pairs(state[step.targets.to(table.device)],
                                                table[children])
            for side in (0, 1):
                index = children[:, :, side].flatten()
                stacked = torch.stack([logsum[index], scores[:, :, side].flatten()], -1)
                w = F.softmax(stacked, -1)  # (M S, 2)
                mixed = w[:, :1] * state[index] + w[:, 1:] * reprs[:, :, side].flatten(0, 1)
                keep = _keep_last(index)
                state = state.index_put((index[keep],), mixed[keep])
                logsum = logsum.index_put((index[keep],), stacked.logsumexp(-1)[keep])
        return state


def height_loss(inside: Inside, chart: Chart) -> Tensor:
    """The released ``l_height``: mean over sentences of max(h_root − 15, 0) over
    max(n − 15, 1)."""
    h = inside.heights[chart.roots.to(inside.heights.device)]
    n = torch.tensor(chart.lengths, device=h.device, dtype=h.dtype)
    above = torch.where(h > HEIGHT_THRESHOLD, h - HEIGHT_THRESHOLD, torch.zeros_like(h))
    return (above / torch.where(n > HEIGHT_THRESHOLD, n - HEIGHT_THRESHOLD,
                                torch.ones_like(n))).mean()


def parser_loss(scores: Tensor, trees: list[list[Span]]) -> Tensor:
    """Cross-entropy of each induced split among its span's split points under the
    parser's scores (B, N − 1), averaged over the batch's binary nodes (``trees``: post-order
    spans, a node's right child (k + 1, j) just before it)."""
    rows, lows, highs, targets = [], [], [], []
    for b, spans in enumerate(trees):
        for t, (i, j) in enumerate(spans):
            if i < j:
                rows.append(b), lows.append(i), highs.append(j)
                targets.append(spans[t - 1][0] - 1)
    if not rows:
        return scores.sum() * 0.0
    device = scores.device
    at = torch.arange(scores.size(1), device=device)
    low = torch.tensor(lows, device=device)[:, None]
    high = torch.tensor(highs, device=device)[:, None]
    logits = scores[torch.tensor(rows, device=device)]  # (nodes, N − 1)
    logits = logits.masked_fill((at < low) | (at >= high), float("-inf"))
    return F.cross_entropy(logits, torch.tensor(targets, device=device))
