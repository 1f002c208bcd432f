"""Contract tests run on every backbone: shapes, causality (a bidirectional backbone: padding
unseen), state carry, gradients."""

from __future__ import annotations

import pytest
import torch

from backbone_cases import CASES, CAUSAL, EMB, all_backbones, build, run
from synlm.backbones.base import OPTIONAL_FIELDS, STRUCTURE_FIELDS, BackboneSpec

NAMES = sorted(CASES)
B, T = 3, 10


def test_every_backbone_has_a_case() -> None:
    covered = {type(build(name)).__name__ for name in CASES}
    assert set(all_backbones()) <= covered, "add a case to tests/backbone_cases.py"


def _inputs(seed: int = 0, t: int = T) -> torch.Tensor:
    return torch.randn(B, t, EMB, generator=torch.Generator().manual_seed(seed)).double()


@pytest.mark.parametrize("name", NAMES)
def test_output_matches_the_declared_spec(name: str) -> None:
    """What a backbone returns is what its spec declares: every promised field and no
    other, one ``layers`` entry per declared width, its structures in their fields."""
    backbone = build(name).double()
    spec = backbone.spec
    assert isinstance(spec, BackboneSpec) and spec.input_size == EMB
    out = run(backbone, _inputs())
    assert out.hidden.shape == (B, T, spec.output_size)
    assert spec.provides <= OPTIONAL_FIELDS and "layers" in spec.provides
    for field in OPTIONAL_FIELDS:
        value = getattr(out, field)
        assert (value is not None) == (field in spec.provides), field
    assert [layer.shape for layer in out.layers] == [(B, T, w) for w in spec.layer_sizes]
    for structure in spec.structures:
        assert getattr(out, STRUCTURE_FIELDS[structure.kind]) is not None, structure
    if out.distances is not None:
        assert out.distances.dim() == 3 and out.distances.shape[1:] == (B, T)
    if out.distance_features is not None:
        assert out.distance_features.shape[:3] == (len(spec.distance_feature_sizes), B, T)
    assert (out.state is not None) == (spec.recurrent or spec.incremental)
    assert spec.incremental or not spec.recurrent
    assert not spec.bidirectional or not (spec.recurrent or spec.incremental)


@pytest.mark.parametrize("name", NAMES)
def test_causal(name: str) -> None:
    """Changing inputs after position t leaves every output at positions <= t unchanged; for
    a bidirectional backbone, when they lie past every row's length (padding)."""
    backbone = build(name).double().eval()
    x = _inputs()
    t = 4
    y = x.clone()
    y[:, t + 1 :] = _inputs(seed=1)[:, t + 1 :]
    lengths = torch.full((B,), t + 1)
    a, b = run(backbone, x, lengths), run(backbone, y, lengths)
    torch.testing.assert_close(a.hidden[:, : t + 1], b.hidden[:, : t + 1])
    assert not torch.allclose(a.hidden[:, t + 1 :], b.hidden[:, t + 1 :])
    if a.distances is not None:
        torch.testing.assert_close(a.distances[:, :, : t + 1], b.distances[:, :, : t + 1])
    if a.span_scores is not None:
        torch.testing.assert_close(a.span_scores[:, : t + 1], b.span_scores[:, : t + 1])
    if a.attention is not None:  # rows <= t unchanged, and no weight on later positions
        torch.testing.assert_close(a.attention[:, : t + 1], b.attention[:, : t + 1])
        unseen = a.attention[..., t + 1 :] if backbone.spec.bidirectional else a.attention.triu(1)
        assert torch.all(unseen == 0)
    if backbone.spec.bidirectional:  # a position reads later ones within the row
        c = run(backbone, y, torch.full((B,), T))
        assert not torch.allclose(a.hidden[:, :t], c.hidden[:, :t])


@pytest.mark.parametrize("name", sorted(set(NAMES) - set(CAUSAL)))
def test_a_bidirectional_backbone_carries_no_state(name: str) -> None:
    """A backbone that attends both ways reads whole sentences: it declares no recurrence and
    no incremental state, and returns none."""
    backbone = build(name).double().eval()
    assert not backbone.spec.recurrent and not backbone.spec.incremental
    assert run(backbone, _inputs(), torch.full((B,), T)).state is None


@pytest.mark.parametrize("name", CAUSAL)
def test_state_carry(name: str) -> None:
    """One window of 2T equals two windows of T with the carried state (eval mode): a
    recurrent state, or a Transformer's key/value cache."""
    backbone = build(name).double().eval()
    assert backbone.spec.incremental, "every causal backbone continues a sequence from its state"
    x = _inputs(t=2 * T)
    whole = backbone(x)
    first = backbone(x[:, :T])
    second = backbone(x[:, T:], first.state)
    torch.testing.assert_close(torch.cat([first.hidden, second.hidden], 1), whole.hidden)
    if whole.distances is not None:
        torch.testing.assert_close(
            torch.cat([first.distances, second.distances], 2), whole.distances)
    if whole.span_scores is not None:
        torch.testing.assert_close(
            torch.cat([first.span_scores, second.span_scores], 1), whole.span_scores)
    if whole.attention is not None:  # (B, T, S): the second window's rows see S = 2T keys
        torch.testing.assert_close(second.attention, whole.attention[:, T:])
        torch.testing.assert_close(first.attention, whole.attention[:, :T, :T])


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_gets_a_gradient(name: str) -> None:
    torch.manual_seed(0)
    backbone = build(name).double().train()
    out = run(backbone, _inputs())
    loss = out.hidden.pow(2).sum()
    for extra in (out.distances, out.distance_features, out.span_scores, out.aux_loss):
        if extra is not None:
            loss = loss + extra.sum()
    loss.backward()
    missing = [n for n, p in backbone.named_parameters()
               if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient reaches {missing}"
