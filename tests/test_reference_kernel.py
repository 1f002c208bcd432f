"""``kernel="reference"`` (the model files' per-step equations, differentiated by autograd)
computes what the default kernel computes, in training and evaluation, forward and
gradients; and the guarded private ops of the CPU loops (synlm.kernels.private_ops) equal
their public fallbacks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from synlm.backbones import ONLSTM, PRPN
from synlm.kernels import check_kernel, private_ops, use_triton
from synlm.kernels.on_lstm_torch import TorchRecurrence
from synlm.kernels.prpn_torch import TorchReadingRecurrence

DT = torch.float64
CLOSE = dict(rtol=1e-9, atol=1e-11)


def _two_windows(model: torch.nn.Module, x: torch.Tensor, seed: int = 5):
    """Two windows with the state carried, under one seed (the same dropout masks for every
    kernel); the outputs, the second state, and the gradients of x and of every parameter."""
    x = x.clone().requires_grad_()
    torch.manual_seed(seed)
    first = model(x)
    second = model(x.flip(1), first.state)
    loss = (first.hidden.sum() + second.hidden.square().sum() + second.distances.sum()
            + sum(h.square().sum() for h in second.layers))
    loss.backward()
    grads = {"x": x.grad} | {n: p.grad for n, p in model.named_parameters()}
    return first, second, grads


def _assert_same(a, b) -> None:
    (f0, s0, g0), (f1, s1, g1) = a, b
    for got, want in [(f1.hidden, f0.hidden), (s1.hidden, s0.hidden),
                      (s1.distances, s0.distances), *zip(s1.layers, s0.layers, strict=True)]:
        torch.testing.assert_close(got, want, **CLOSE)
    assert g1.keys() == g0.keys()
    for name, want in g0.items():
        torch.testing.assert_close(g1[name], want, **CLOSE, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_onlstm_reference_equals_the_default_kernel(training: bool) -> None:
    """With DropConnect, locked dropout and a carried state."""
    results = []
    for kernel in ("auto", "reference"):
        torch.manual_seed(0)
        model = ONLSTM(6, 8, 2, chunk_size=2, dropout_input=0.2, dropout_hidden=0.2,
                       dropout_output=0.2, weight_drop=0.3, kernel=kernel).to(DT)
        x = torch.randn(3, 5, 6, dtype=DT, generator=torch.Generator().manual_seed(1))
        results.append(_two_windows(model.train(training), x))
    _assert_same(*results)
    (_, s0, _), (_, s1, _) = results
    torch.testing.assert_close(s1.distance_features, s0.distance_features, **CLOSE)
    for (h0, c0), (h1, c1) in zip(s0.state.layers, s1.state.layers, strict=True):
        torch.testing.assert_close(h1, h0, **CLOSE)
        torch.testing.assert_close(c1, c0, **CLOSE)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("syd", [False, True], ids=["prpn", "syd"])
def test_prpn_reference_equals_the_default_kernel(syd: bool, training: bool) -> None:
    """With every dropout (key masks and rdropout included), soft gates in their sensitive
    range and a carried state shorter than the memory."""
    results = []
    for kernel in ("auto", "reference"):
        torch.manual_seed(0)
        model = PRPN(6, 8, 2, n_slots=4, n_lookback=2, tau=2.0, hard=False, dropout=0.2,
                     idropout=0.2, rdropout=0.2, syd=syd, kernel=kernel).to(DT)
        with torch.no_grad():
            last = model.parser.ff_lm[2] if syd else model.parser.out
            last.weight.mul_(3.0)
            last.bias.fill_(0.5)
        x = torch.randn(3, 3, 6, dtype=DT, generator=torch.Generator().manual_seed(1))
        results.append(_two_windows(model.train(training), x))
    _assert_same(*results)
    (_, s0, _), (_, s1, _) = results
    for a, b in zip(s0.state.readers, s1.state.readers, strict=True):
        torch.testing.assert_close(b, a, **CLOSE)
    torch.testing.assert_close(s1.state.predictor, s0.state.predictor, **CLOSE)


def test_the_reference_kernel_keeps_the_parameters() -> None:
    """A checkpoint of either kernel loads into the other: the same state-dict keys."""
    for make in (lambda k: ONLSTM(6, 8, 2, chunk_size=2, kernel=k),
                 lambda k: PRPN(6, 8, 2, n_slots=4, kernel=k),
                 lambda k: PRPN(6, 8, 2, n_slots=4, syd=True, kernel=k)):
        assert list(make("auto").state_dict()) == list(make("reference").state_dict())
    assert check_kernel("reference") == "reference"
    assert not use_triton("reference", torch.zeros(1))


# ---- the private ops and their public fallbacks -------------------------------------------


def _outputs_and_grads(fn, inputs, rest=()):
    leaves = [a.detach().clone().requires_grad_() for a in inputs]
    out = fn.apply(*leaves, *rest)
    out = out if isinstance(out, tuple) else (out,)
    g = torch.Generator().manual_seed(3)
    cotangents = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in out]
    return [o.detach() for o in out] + list(torch.autograd.grad(out, leaves, cotangents))


def test_layer_norm_fallbacks_equal_the_public_layer_norm(monkeypatch) -> None:
    g = torch.Generator().manual_seed(0)
    x, grad = torch.randn(2, 5, 12, generator=g, dtype=DT)
    w, b = torch.randn(2, 12, generator=g, dtype=DT)
    monkeypatch.setattr(private_ops, "native_layer_norm_works", lambda: False)
    y, mean, rstd = private_ops.layer_norm_with_stats(x, w, b, 1e-5)
    assert mean.shape == rstd.shape == (5, 1)
    torch.testing.assert_close(y, F.layer_norm(x, (12,), w, b, 1e-5), **CLOSE)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    want = torch.autograd.grad(F.layer_norm(leaves[0], (12,), *leaves[1:], 1e-5), leaves, grad)
    got = private_ops.layer_norm_backward(grad, x, mean, rstd, w, b)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, **CLOSE)


def test_prpn_loop_without_the_private_layer_norm_ops(monkeypatch) -> None:
    g = torch.Generator().manual_seed(0)
    T, B, H, n = 4, 2, 5, 3

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=g, dtype=DT)

    inputs = [rand(T, B, 4 * H), rand(T, B, H), torch.rand(T, B, n, generator=g, dtype=DT),
              rand(B, n, 2 * H), rand(H, H, scale=0.5), rand(4 * H, H, scale=0.5),
              rand(4 * H), 1 + rand(4 * H, scale=0.1), rand(4 * H), 1 + rand(H, scale=0.1),
              rand(H)]
    rest = (None, None, 1e-5, 1e-5)
    assert private_ops.native_layer_norm_works()  # this PyTorch has them
    want = _outputs_and_grads(TorchReadingRecurrence, inputs, rest)
    monkeypatch.setattr(private_ops, "native_layer_norm_works", lambda: False)
    got = _outputs_and_grads(TorchReadingRecurrence, inputs, rest)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, **CLOSE)


def test_onlstm_loop_without_onednn(monkeypatch) -> None:
    """float32 with a W_hh of a million entries: oneDNN's linear where it runs, else (and
    when it is gone) the public product; the two agree to float32 rounding."""
    g = torch.Generator().manual_seed(0)
    T, B, n, k = 3, 2, 128, 4
    H, G = n * k, 2 * n + 4 * n * k
    inputs = [torch.randn(T, B, G, generator=g), torch.randn(B, H, generator=g),
              torch.randn(B, n, k, generator=g), 0.05 * torch.randn(G, H, generator=g)]
    assert inputs[3].numel() >= 2**20  # big enough for step_matmul to pick oneDNN
    want = _outputs_and_grads(TorchRecurrence, inputs)
    monkeypatch.setattr(private_ops, "onednn_linear_works", lambda: False)
    got = _outputs_and_grads(TorchRecurrence, inputs)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
