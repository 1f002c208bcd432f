"""Teacher forcing's attention on the batch's rows grouped by length (``action_layers.Buckets``)
equals it on the padded (B, T) rows (``Packing``, ``scaled_dot_product_attention``) in
float64, outputs and gradients, under a causal mask, a mask per head and a mask with
relative positions, on random rows and masks (a real query may read a padding key); the
groups are those of least cost."""

from __future__ import annotations

import pytest
import torch

from synlm.transition.action_layers import (
    ActionLayer,
    Buckets,
    Packing,
    length_groups,
    relative_encodings,
)

B, T, C, HEADS, N_REL = 7, 13, 8, 4, 9


def test_length_groups_are_those_of_least_cost():
    assert length_groups([10, 10, 9, 3, 3], group_cost=0) == [2, 1, 2]
    assert length_groups([10, 10, 9, 3, 3], group_cost=10**9) == [5]
    # 10² + 9² + 2·50 = 281 against 2·10² + 50 = 250
    assert length_groups([10, 9], group_cost=50) == [2]
    assert length_groups([10, 9], group_cost=10) == [1, 1]
    assert length_groups([12, 11, 4, 4, 4, 3], group_cost=30) == [2, 4]
    assert length_groups([5]) == [1]


def random_rows(kind: str, seed: int) -> tuple[torch.Tensor, torch.Tensor | None,
                                                torch.Tensor | None]:
    """``real`` (B, T): each row's first tokens (one row full, one of a token alone); the
    mask (None: causal), random over a row's tokens, key 0 always, and row 2's first query
    reading a padding key; for ``relative``, each key's row of the encodings."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=generator)
    lengths[0], lengths[1], lengths[2] = T, 1, 4
    real = torch.arange(T) < lengths[:, None]
    if kind == "causal":
        return real, None, None
    heads = HEADS if kind == "per head" else 1
    allowed = (torch.rand(B, heads, T, T, generator=generator) < 0.4) & real[:, None, None]
    allowed[..., 0] = True  # every query reads key 0 at least
    allowed[2, :, 0, 6] = True
    relative = torch.randint(0, N_REL, (B, T, T), generator=generator) \
        if kind == "relative" else None
    return real, allowed, relative


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("kind", ["causal", "per head", "relative"])
def test_buckets_equal_the_padded_rows(kind, pre_norm):
    real, allowed, relative = random_rows(kind, seed=len(kind))
    torch.manual_seed(0)
    layer = ActionLayer(C, HEADS, 2 * C, 0.0, kind == "relative", pre_norm).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.uniform_(-0.7, 0.7)
    encodings = relative_encodings(-1, N_REL - 2, C).double()
    n = int(real.sum())
    x = torch.randn(n, C, dtype=torch.float64)
    weight = torch.randn(n, C, dtype=torch.float64)
    index = real.flatten().nonzero()[:, 0]
    padded = Packing(index, B, T)
    found = []
    for packed in (padded, *(Buckets.of(real, allowed, relative, torch.float64, cost)
                             for cost in (0, 10**9))):
        layer.zero_grad()
        h = x.clone().requires_grad_()
        out = layer(h, allowed, relative, encodings, packed=packed)  # (N, C)
        (out * weight).sum().backward()
        found.append((out, h.grad, [p.grad.clone() for p in layer.parameters()
                                    if p.grad is not None]))
    assert len(Buckets.of(real, allowed, relative, torch.float64, 0).shapes) > 2
    expected_out, expected_grad, expected_params = found[0]
    for out, grad, params in found[1:]:
        torch.testing.assert_close(out, expected_out, rtol=0, atol=1e-10)
        torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-10)
        assert len(params) == len(expected_params)
        for p, q in zip(params, expected_params, strict=True):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-10)


def test_buckets_cut_each_row_to_what_its_real_queries_read():
    """A row's group is as long as its last real token, or the last key a real query reads
    past it; a padding query attends key 0 alone."""
    real = torch.tensor([[True, True, False, False, False],
                         [True, True, True, False, False],
                         [True, False, False, False, False]])
    allowed = torch.eye(5, dtype=torch.bool).expand(3, 1, 5, 5).clone()
    allowed[..., 0] = True
    allowed[2, 0, 0, 3] = True  # row 2's only real query reads the padding key 3
    buckets = Buckets.of(real, allowed, None, torch.float64, group_cost=0)
    assert buckets.shapes == ((1, 4), (1, 3), (1, 2))
    first = buckets.biases[0][0, 0]  # row 2: its query 0 reads keys 0 and 3
    assert first[0].tolist() == [0.0, float("-inf"), float("-inf"), 0.0]
    assert bool((first[1:, 1:] == float("-inf")).all()) and bool((first[1:, 0] == 0).all())
