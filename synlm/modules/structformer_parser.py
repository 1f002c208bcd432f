"""StructFormer's parser and the dependency distributions it implies (Shen et al. 2021,
"StructFormer: Joint Unsupervised Induction of Dependency and Constituency Structure from
Masked Language Modeling", §4.1-4.2), as google-research's ``structformer/structformer.py``
computes them (``parse``, ``compute_block``, ``compute_head``, ``generate_mask``).

Shapes: B rows, T inputs; ``words`` (B, T) bool marks the inputs that are words of the
sentence (the rest, a row's ``<eos>`` in front and its padding, take no part). Distances are
kept here in the released layout, ``distance[b, i]`` the gap between input i and input i + 1.

    parse     s = tanh(LN(conv(... tanh(LN(conv(e))))))           §4.1, n_parser_layers convs
              δ_i = w_δ·tanh(LN(conv₂(s)_i)) + b_δ     the gap after word i (kernel 2: s_i, s_{i+1})
              τ_i = w_τ·tanh(LN(W s_i + b)) + b_τ      the height of word i
              δ ← δ − m, m the calibration margin below (one number per sentence)
    block     γ_ij = σ((τ_i − δ_j)·exp(c_0))         p(the constituent of x_i reaches past gap j)
              p(l | i) = Π_{l≤k<i} γ_ik − Π_{l−1≤k<i} γ_ik      (cumulative minimum, as released)
              p(r | i) = Π_{i≤k<r} γ_ik − Π_{i≤k≤r} γ_ik
              p(l, r | i) = p(l | i) p(r | i)                      §4.2, the smallest legal
                                                                   constituent C(x_i)
    head      p(j | l, r) = softmax_{l≤j≤r}(τ_j·exp(c_1))          §4.2, its head
    parent    p_p(j | i) = Σ_{l,r} p(l, r | i) p(j | l, r), j ≠ i  §4.2, the parent distribution
    dependent p_d(j | i) = p_p(i | j)                              §4.2

"Π" is the released code's cumulative minimum (``cummin``), not a product: the
probability that the constituent reaches past gaps k..j is the smallest of the γ's.
The calibration margin m is the largest ``min(relu(δ_{i−1} − max τ_{i..j}),
relu(δ_j − max τ_{i..j}))`` over the spans i..j of the sentence (``parse``); the released
code takes one maximum over the whole batch, here each sentence takes its own (the same
numbers at batch size 1, as the released parsing evaluation runs; a row does not depend on
the other rows of its batch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: What stands for an infinite gap (after a sentence's last word) or an absent height, as
#: in the released code; finite, so that no 0 · inf becomes NaN.
FAR = 1e9


class SentenceConv(nn.Module):
    """A 1-D convolution over time that keeps the length (B, T, H) -> (B, T, H) (the
    released ``layers.Conv1d``): output t of an odd kernel k reads inputs t − (k − 1)/2 ..
    t + (k − 1)/2; of an even one, inputs t + 1 − k/2 .. t + k/2 (padding k/2, the first
    output dropped), so kernel 2 reads inputs t and t + 1. Zeros stand outside the row."""

    def __init__(self, size: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(size, size, kernel_size, padding=kernel_size // 2)
        self.shift = kernel_size % 2 == 0

    def forward(self, x: Tensor) -> Tensor:
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)  # (B, T + shift, H)
        return y[:, 1:] if self.shift else y


def _norm_tanh(x: Tensor) -> Tensor:
    """tanh(LayerNorm(x)) without an affine transform (the parser's nonlinearity)."""
    return torch.tanh(F.layer_norm(x, x.shape[-1:]))


class StructFormerParser(nn.Module):
    """§4.1: convolutions over the embeddings, then a distance δ for every gap between two
    words and a height τ for every word (the released ``parser_layers``, ``distance_ff``,
    ``height_ff``).

    Args:
        size: the embedding width H.
        num_layers: convolution layers (the released ``n_parser_layers``).
        conv_size: their kernel size.
    """

    def __init__(self, size: int, num_layers: int, conv_size: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(SentenceConv(size, conv_size) for _ in range(num_layers))
        self.distance_conv = SentenceConv(size, 2)
        self.distance_out = nn.Linear(size, 1)
        self.height_in = nn.Linear(size, size)
        self.height_out = nn.Linear(size, 1)

    def forward(self, x: Tensor, words: Tensor) -> tuple[Tensor, Tensor]:
        """``x`` (B, T, H) embeddings, ``words`` (B, T) bool -> the calibrated distances
        (B, T), ``distance[b, i]`` the gap after input i (``FAR`` − margin where input i + 1
        is no word), and the heights (B, T) (−``FAR`` at non-words)."""
        h = x
        for conv in self.convs:
            h = _norm_tanh(conv(h.masked_fill(~words[..., None], 0.0)))  # (B, T, H)
        height = self.height_out(_norm_tanh(self.height_in(h))).squeeze(-1)  # (B, T)
        height = height.masked_fill(~words, -FAR)
        distance = self.distance_out(_norm_tanh(self.distance_conv(h))).squeeze(-1)  # (B, T)
        next_is_word = F.pad(words[:, 1:], (0, 1), value=False)
        gap = words & next_is_word  # (B, T) gaps between two words
        distance = distance.masked_fill(~gap, FAR)
        return distance - calibration_margin(distance, height, words, gap)[:, None], height


def calibration_margin(distance: Tensor, height: Tensor, words: Tensor, gap: Tensor
                       ) -> Tensor:
    """The released ``parse``'s margin, per sentence (B,): over the spans i..j of words,
    the largest ``min(relu(δ_{i−1} − max τ_{i..j}), relu(δ_j − max τ_{i..j}))``, where the gap
    before the first word and after the last are ``FAR``; a span from the first word counts
    only if it ends before the last word (else both sides are ``FAR``). ``gap`` (B, T):
    the gaps between two words, where ``distance`` is not ``FAR``."""
    T = distance.size(1)
    # running maximum of the heights over i..j: (B, i, j), −FAR where j < i
    upper = torch.ones(T, T, dtype=torch.bool, device=distance.device).triu()
    spans = height[:, None, :].expand(-1, T, -1).masked_fill(~upper, -FAR)
    height_max = spans.cummax(-1).values.masked_fill(~upper, 0.0)  # (B, T, T)
    before = F.pad(distance[:, :-1], (1, 0), value=FAR)  # δ_{i−1}, (B, T)
    left = torch.relu(before[:, :, None] - height_max)
    right = torch.relu(distance[:, None, :] - height_max)
    margin = torch.minimum(left, right)  # (B, i, j)
    first = words & ~F.pad(words[:, :-1], (1, 0), value=False)  # (B, T) the first word
    counted = upper & words[:, :, None] & words[:, None, :] & (
        ~first[:, :, None] | gap[:, None, :])
    return margin.masked_fill(~counted, 0.0).flatten(1).amax(1)  # (B,)


def constituent_probabilities(distance: Tensor, height: Tensor, scale: Tensor) -> Tensor:
    """p(l, r | i) (B, i, l, r): the span [l, r] is the smallest legal constituent of input
    i (§4.2; the released ``compute_block``). ``distance`` (B, T) in the released layout,
    ``height`` (B, T), ``scale`` exp(c_0)."""
    T = distance.size(1)
    gamma = torch.sigmoid((height[:, :, None] - distance[:, None, :]) * scale)  # (B, i, j)
    upper = torch.ones(T, T, dtype=torch.bool, device=gamma.device).triu()
    # left: reach[i, l] = min_{l≤k<i} γ_ik (1 for l ≥ i), the constituent reaches l or further
    left_reach = gamma.masked_fill(upper, 1.0).flip(-1).cummin(-1).values.flip(-1)
    p_left = (left_reach - F.pad(left_reach[..., :-1], (1, 0), value=0.0)).tril()
    # right: reach[i, r] = min_{i≤k<r} γ_ik (1 for r ≤ i), it reaches r or further
    right_gamma = gamma.masked_fill(~upper, 1.0)
    right_reach = F.pad(right_gamma[..., :-1], (1, 0), value=1.0).cummin(-1).values
    p_right = (right_reach - F.pad(right_reach[..., 1:], (0, 1), value=0.0)).triu()
    return p_left[:, :, :, None] * p_right[:, :, None, :]  # (B, i, l, r)


def head_probabilities(height: Tensor, scale: Tensor) -> Tensor:
    """p(j | l, r) (B, l, r, j): the head of span [l, r] (§4.2; the released
    ``compute_head``), a softmax of the scaled heights over l ≤ j ≤ r (uniform over an empty
    span l > r, which no constituent takes)."""
    B, T = height.shape
    index = torch.arange(T, device=height.device)
    inside = (index[:, None, None] <= index) & (index <= index[None, :, None])  # (l, r, j)
    logits = (height * scale)[:, None, None, :].expand(B, T, T, T)
    return logits.masked_fill(~inside, -FAR).softmax(-1)  # (B, l, r, j)


def parent_distribution(distance: Tensor, height: Tensor, scales: Tensor, words: Tensor
                        ) -> Tensor:
    """p_p(j | i) (B, i, j), the parent distribution of §4.2 (the released ``head``):
    Σ_{l,r} p(l, r | i) p(j | l, r), with j = i left out, so a row sums to one minus the
    probability that x_i heads its own constituent; 0 where i or j is not a word (the
    released rows of padding are not, but no loss reads them). ``scales`` (2,): exp(c_0),
    exp(c_1); ``words`` (B, T) bool."""
    B, T = height.shape
    block = constituent_probabilities(distance, height, scales[0])  # (B, i, l, r)
    head = head_probabilities(height, scales[1])  # (B, l, r, j)
    parent = torch.bmm(block.reshape(B, T, T * T), head.reshape(B, T * T, T))  # (B, i, j)
    eye = torch.eye(T, dtype=torch.bool, device=parent.device)
    pairs = words[:, :, None] & words[:, None, :] & ~eye
    return parent.masked_fill(~pairs, 0.0)
