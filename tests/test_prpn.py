"""PRPN and PRPN-SYD: the gates of eq. 5-6, equality with the per-step reference
(``kernel="reference"``, forward and gradients), state carry, causality, gradients, and the
two distance sets of PRPN-SYD."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from synlm.backbones.prpn import PRPN, _keep_mask, parsing_gates
from synlm.heads import DistanceRankingHead
from synlm.kernels.prpn_torch import TorchReadingRecurrence
from synlm.lm import SyntaxLM

E, H, N, L = 6, 10, 4, 3  # embedding, hidden, slots, look-back
B, T = 3, 7


def _model(cls: type[PRPN] = PRPN, **kwargs) -> PRPN:
    """A tiny float64 model whose distances spread over the gates' sensitive range."""
    torch.manual_seed(0)
    args = dict(input_size=E, hidden_size=H, num_layers=2, n_slots=N, n_lookback=L, tau=2.0)
    model = cls(**(args | kwargs)).double()
    with torch.no_grad():
        last = model.parser.ff_lm[2] if model.syd else model.parser.out
        last.weight.mul_(30.0 if model.syd else 3.0)
        last.bias.fill_(0.5)
    return model


def _inputs(seed: int = 0, t: int = T) -> torch.Tensor:
    return torch.randn(B, t, E, generator=torch.Generator().manual_seed(seed)).double()


def _pair(**kwargs) -> tuple[PRPN, PRPN]:
    fast = _model(**kwargs).eval()
    naive = _model(kernel="reference", **kwargs).eval()
    naive.load_state_dict(fast.state_dict())
    return fast, naive


# ---- gates -------------------------------------------------------------------------------


@pytest.mark.parametrize("hard", [True, False])
def test_gates_are_monotone_in_slots_and_in_distance(hard: bool) -> None:
    g = torch.Generator().manual_seed(0)
    d = torch.rand(B, T, generator=g, dtype=torch.float64)
    past = torch.rand(B, N, generator=g, dtype=torch.float64)
    past[:, :2] = math.inf  # the start of the stream
    gates = parsing_gates(d, d, past, tau=10.0, hard=hard)  # (B, T, N)
    assert gates.shape == (B, T, N)
    assert ((gates >= 0) & (gates <= 1)).all()
    assert (gates[..., 1:] <= gates[..., :-1]).all()  # non-increasing over slots
    wider = parsing_gates(d + 0.05, d, past, tau=10.0, hard=hard)  # a larger d_t opens more
    assert (wider >= gates).all() and (wider > gates).any()


def test_soft_gates_by_hand() -> None:
    """α = σ((d_t − d_{t−k})/res·10 + 5), res = 1/τ = 0.1, cumulative product over slots."""
    past = torch.tensor([[math.inf, 0.30, 0.10]], dtype=torch.float64)  # d_{−3}, d_{−2}, d_{−1}
    d = torch.tensor([[0.15]], dtype=torch.float64)  # d_0
    g = parsing_gates(d, d, past, tau=10.0, hard=False)[0, 0]
    s5, s10, s_10 = 0.9933071490757153, 0.9999546021312976, 4.5397868702434395e-05  # σ(5, ±10)
    expected = [s5, s5 * s10, s5 * s10 * s_10]  # Δ = 0, 0.05, −0.15 against slots 0, 1, 2
    assert g.tolist() == pytest.approx(expected, rel=1e-9)


def test_hard_gates_by_hand() -> None:
    """α = (hardtanh((d_t − d_{t−k})/res·2 + 1) + 1)/2: 1 for Δ ≥ 0, 0 for Δ ≤ −res/2."""
    past = torch.tensor([[0.0, 0.40, 0.175]], dtype=torch.float64)
    d = torch.tensor([[0.15]], dtype=torch.float64)
    g = parsing_gates(d, d, past, tau=10.0, hard=True)[0, 0]
    # Δ = 0 -> 1; Δ = −0.025 -> (hardtanh(0.5) + 1)/2 = 0.75; Δ = −0.25 -> 0
    assert g.tolist() == pytest.approx([1.0, 0.75, 0.0], abs=1e-12)


@pytest.mark.parametrize("hard", [True, False])
def test_gates_match_the_reference_construction(hard: bool) -> None:
    """yikangshen/PRPN ParsingNetwork.forward, with its ``resolution`` = 1/τ."""
    g = torch.Generator().manual_seed(1)
    d, d_next = torch.rand(2, B, T, generator=g, dtype=torch.float64)
    past = torch.rand(B, N, generator=g, dtype=torch.float64)
    res = 0.1
    cum_gate = torch.cat([past, d], dim=1)
    gate_hat = torch.stack([cum_gate[:, i : i + T] for i in range(N, 0, -1)], dim=2)
    expected = []
    for query in (d, d_next):
        if hard:
            alpha = (F.hardtanh((query[:, :, None] - gate_hat) / res * 2 + 1) + 1) / 2
        else:
            alpha = torch.sigmoid((query[:, :, None] - gate_hat) / res * 10 + 5)
        expected.append(torch.cumprod(alpha, dim=2))
    gates = parsing_gates(torch.stack([d, d_next]), d, past, tau=1 / res, hard=hard)
    torch.testing.assert_close(gates, torch.stack(expected), rtol=0, atol=1e-12)


def test_slots_before_the_start_are_closed() -> None:
    model = _model().eval()
    x = _inputs()
    state = model.initial_state(x)
    assert torch.isinf(state.distances).all()
    d = model.parser(x, state.parser)[0][..., 0]
    gates = parsing_gates(d, d, state.distances, model.tau, model.hard)
    for t in range(N - 1):
        assert (gates[:, t, t + 1 :] == 0).all()


# ---- the fast model equals the per-step reference ----------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(hard=False), dict(norm="layer"), dict(syd=True), dict(syd=True, hard=False)],
    ids=["hard", "soft", "layernorm", "syd", "syd-soft"],
)
def test_matches_naive_over_two_windows(kwargs: dict) -> None:
    fast, naive = _pair(**kwargs)
    x = _inputs(t=2 * T)
    fast_state = naive_state = None
    for window in (x[:, :T], x[:, T:]):
        a, b = fast(window, fast_state), naive(window, naive_state)
        for got, want in [(a.hidden, b.hidden), (a.distances, b.distances),
                          *zip(a.layers, b.layers, strict=True)]:
            torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
        for got, want in zip(a.state.readers, b.state.readers, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
        torch.testing.assert_close(a.state.predictor, b.state.predictor, rtol=0, atol=1e-10)
        fast_state, naive_state = a.state, b.state
    d = torch.cat([fast(x[:, :T]).distances[0], a.distances[0]], dim=1)
    gates = parsing_gates(d, d, fast.initial_state(x).distances, fast.tau, fast.hard)
    assert ((gates > 0.01) & (gates < 0.99)).float().mean() > 0.1  # the gates do gate


@pytest.mark.parametrize("syd", [False, True])
def test_gradients_match_naive(syd: bool) -> None:
    fast, naive = _pair(syd=syd, hard=False)
    grads = []
    for model in (fast, naive):
        x = _inputs().requires_grad_()
        first = model(x[:, :4])
        second = model(x[:, 4:], first.state)
        weights = torch.linspace(-1, 1, E, dtype=torch.float64)
        loss = (first.hidden * weights).sum() + second.hidden.pow(2).sum()
        loss = loss + second.distances[-1].sum()
        loss.backward()
        grads.append({"x": x.grad} | {n: p.grad for n, p in model.named_parameters()})
    for name, want in grads[1].items():
        torch.testing.assert_close(grads[0][name], want, rtol=1e-8, atol=1e-10, msg=name)


def test_reading_recurrence_gradcheck_with_dropout_masks() -> None:
    t, b, h, n = 4, 2, 3, 3
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()

    one = torch.ones((), dtype=torch.float64)
    inputs = (
        rand(t, b, 4 * h), rand(t, b, h),
        torch.rand(t, b, n, generator=g, dtype=torch.float64).requires_grad_(),
        rand(b, n, 2 * h), rand(h, h), rand(4 * h, h), rand(4 * h), rand(4 * h), rand(4 * h),
        rand(h), rand(h), _keep_mask(one, (2, t, b, h), 0.3), _keep_mask(one, (h,), 0.3),
        1e-5, 1e-5,
    )
    assert torch.autograd.gradcheck(TorchReadingRecurrence.apply, inputs, fast_mode=True)


# ---- backbone behaviour --------------------------------------------------------------------


@pytest.mark.parametrize("syd", [False, True])
@pytest.mark.parametrize("split", [T, 2])  # 2 < n_slots: windows shorter than the memory
def test_state_carry(syd: bool, split: int) -> None:
    model = _model(syd=syd).eval()
    x = _inputs(t=2 * T)
    whole = model(x)
    parts, state = [], None
    for start in range(0, 2 * T, split):
        out = model(x[:, start : start + split], state)
        parts.append(out)
        state = out.state
    torch.testing.assert_close(torch.cat([p.hidden for p in parts], 1), whole.hidden)
    torch.testing.assert_close(torch.cat([p.distances for p in parts], 2), whole.distances)


@pytest.mark.parametrize("kwargs", [dict(), dict(syd=True), dict(norm="layer")])
def test_causal(kwargs: dict) -> None:
    model = _model(**kwargs).eval()
    x, t = _inputs(), 3
    y = x.clone()
    y[:, t + 1 :] = _inputs(seed=1)[:, t + 1 :]
    a, b = model(x), model(y)
    torch.testing.assert_close(a.hidden[:, : t + 1], b.hidden[:, : t + 1], rtol=0, atol=1e-12)
    torch.testing.assert_close(a.distances[..., : t + 1], b.distances[..., : t + 1])
    assert not torch.allclose(a.hidden[:, t + 1 :], b.hidden[:, t + 1 :])


def test_layernorm_is_causal_in_training_too() -> None:
    model = _model(norm="layer", dropout=0.0, idropout=0.0, rdropout=0.0).train()
    x, t = _inputs(), 3
    y = x.clone()
    y[:, t + 1 :] = _inputs(seed=1)[:, t + 1 :]
    torch.testing.assert_close(model(x).hidden[:, : t + 1], model(y).hidden[:, : t + 1])


@pytest.mark.parametrize("syd", [False, True])
def test_every_parameter_gets_a_gradient(syd: bool) -> None:
    model = _model(syd=syd, hard=False).train()
    out = model(_inputs())
    (out.hidden.pow(2).sum() + out.distances[-1].sum()).backward()
    missing = [n for n, p in model.named_parameters()
               if p.grad is None or not torch.isfinite(p.grad).all() or p.grad.abs().sum() == 0]
    assert not missing


def test_syd_exposes_both_distance_sets() -> None:
    model = _model(syd=True).train()
    assert model.distance_names == ("lm", "syd")
    out = model(_inputs())
    assert out.distances.shape == (2, B, T)
    assert (out.distances[0] >= 0).all()  # d_lm is ReLU'd as PRPN's d
    # the LM path does not read d_syd ...
    out.hidden.pow(2).sum().backward(retain_graph=True)
    assert all(p.grad is None or (p.grad == 0).all() for p in model.parser.ff_syd.parameters())
    # ... a ranking loss on distances[-1] reaches FF_syd and the shared encoder
    out.distances[-1].pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in model.parser.ff_syd.parameters())
    assert model.parser.word_rnn.weight_ih_l0.grad.abs().sum() > 0


def test_prpn_syd_metrics_name_what_they_measure() -> None:
    """The backbone's ``lm`` structure is d_lm alone (``val/uf1_lm``); d_syd is the ranking
    head's ``syd`` (``val/uf1_syd``), not a second layer of ``lm``."""
    torch.manual_seed(0)
    model = SyntaxLM(_model(syd=True).float(), [DistanceRankingHead(mode="shared", layer=-1)],
                     vocab_size=20)
    tokens = torch.randint(20, (B, T))
    out = model.model.evaluate(tokens).backbone
    induced = model.induce(tokens)
    assert list(induced) == ["syd", "lm"]
    torch.testing.assert_close(induced["lm"], out.distances[:1])  # (1, B, T): d_lm
    torch.testing.assert_close(induced["syd"], out.distances[1:])  # (1, B, T): d_syd


def test_plain_prpn_provides_one_distance_set_and_reading_layers() -> None:
    model = _model().eval()
    out = model(_inputs())
    assert model.distance_names == ("lm",)
    assert out.distances.shape == (1, B, T)
    assert [layer.shape for layer in out.layers] == [(B, T, H)] * 2
    assert out.hidden.shape == (B, T, E)


def test_runs_under_autocast() -> None:
    """The reading loop runs in float32 inside a bfloat16 autocast region."""
    model = PRPN(input_size=E, hidden_size=H, n_slots=N, n_lookback=L).train()
    x = torch.randn(B, T, E)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first = model(x)
        second = model(x, first.state)
    loss = first.hidden.float().sum() + second.hidden.float().sum()
    loss.backward()
    assert torch.isfinite(second.hidden.float()).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
