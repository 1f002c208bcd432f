"""Sampling: nucleus and top-k filtering on hand-set distributions, seeded reproducibility,
and the same tokens with and without the backbone's incremental state."""

from __future__ import annotations

import math

import pytest
import torch

from backbone_cases import build
from synlm.generation import filter_log_probs, generate
from synlm.heads import DependencyMixtureHead
from synlm.lm import SyntaxLM

V = 30
PROBS = torch.tensor([0.5, 0.3, 0.15, 0.05])


def kept(p: float | None = None, k: int | None = None) -> list[int]:
    lp = filter_log_probs(PROBS.log(), top_p=p, top_k=k)
    return torch.isfinite(lp).nonzero()[:, 0].tolist()


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p() -> None:
    assert kept(p=0.45) == [0]  # 0.5 reaches 0.45
    assert kept(p=0.7) == [0, 1]  # 0.5 < 0.7 <= 0.8
    assert kept(p=0.81) == [0, 1, 2]
    assert kept(p=1.0) == [0, 1, 2, 3]
    torch.testing.assert_close(filter_log_probs(PROBS.log(), top_p=0.7).exp(),
                               torch.tensor([0.625, 0.375, 0.0, 0.0]))


def test_top_k_and_temperature() -> None:
    assert kept(k=3) == [0, 1, 2]
    hot = filter_log_probs(PROBS.log(), temperature=2.0).exp()
    expected = PROBS.sqrt() / PROBS.sqrt().sum()  # p^(1/T), renormalised
    torch.testing.assert_close(hot, expected)
    with pytest.raises(ValueError, match="temperature must be positive"):
        filter_log_probs(PROBS.log(), temperature=0.0)


def lm(name: str, heads=()) -> SyntaxLM:
    torch.manual_seed(0)
    return SyntaxLM(build(name), heads=list(heads), vocab_size=V).eval()


def sample(model: SyntaxLM, seed: int, **kw) -> torch.Tensor:
    prompts = torch.tensor([[0, 3, 4], [0, 5, 6]])
    return generate(model, prompts, 12, generator=torch.Generator().manual_seed(seed), **kw)


@pytest.mark.parametrize("name", ["AWDLSTM", "Transformer", "GPT2", "PRPN"])
def test_cached_and_uncached_generation_agree_and_seeds_reproduce(name: str) -> None:
    model = lm(name)
    cached = sample(model, 1, top_p=0.9)
    assert cached.size(0) == 2 and cached.size(1) <= 12
    assert torch.equal(cached, sample(model, 1, top_p=0.9, use_cache=False))
    assert torch.equal(cached, sample(model, 1, top_p=0.9))  # same seed, same samples
    assert not torch.equal(cached, sample(model, 2, top_p=0.9))


@pytest.mark.parametrize("name", ["AWDLSTM", "Transformer", "GPT2"])
def test_a_mixture_head_samples_the_same_from_its_state_and_by_rerunning(name: str) -> None:
    """DM's mixture continues from its own state (the past p_dep, window 4 < 3 + 12 tokens)
    and gives the tokens of re-running the whole sequence at every step."""
    model = lm(name, heads=[DependencyMixtureHead("mixture", context=4)])
    assert torch.equal(sample(model, 1), sample(model, 1, use_cache=False))


def test_rows_stop_at_eos() -> None:
    model = lm("AWDLSTM")
    with torch.no_grad():
        model.decoder.bias.fill_(-50.0)
        model.decoder.bias[0] = 50.0  # <eos> (id 0) almost surely first
    out = sample(model, 1)
    assert torch.equal(out, torch.zeros(2, 1, dtype=torch.long))  # every row done: stop
    assert math.isclose(float(model.step(torch.tensor([[0]]))[0].exp().sum()), 1.0,
                        rel_tol=1e-5)
