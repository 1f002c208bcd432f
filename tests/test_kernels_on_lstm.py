"""The fused Triton ON-LSTM recurrence equals the PyTorch one.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (conftest sets
TRITON_INTERPRET=1); with one, the same tests run the compiled kernels on CUDA tensors.
"""

from __future__ import annotations

import pytest
import torch

from conftest import KERNEL_DEVICE as DEVICE
from synlm.backbones.on_lstm import ONLSTM
from synlm.kernels import check_kernel, use_triton
from synlm.kernels.on_lstm import TritonRecurrence
from synlm.kernels.on_lstm_torch import TorchRecurrence

# chunk counts and sizes that are not powers of two exercise the masked lanes
SHAPES = [(5, 3, 5, 3), (4, 2, 3, 4)]  # (T, B, n, k)


def random_window(T, B, n, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    H, G = n * k, 2 * n + 4 * n * k

    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g, dtype=dtype)).to(DEVICE).requires_grad_()

    return rand(T, B, G), rand(B, H), rand(B, n, k), rand(G, H, scale=0.3)


def run(recurrence, inputs, seed=1):
    """Outputs and the gradients of every input under random output gradients."""
    outputs = recurrence.apply(*inputs)
    g = torch.Generator().manual_seed(seed)
    grad_out = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(DEVICE) for o in outputs]
    return [o.detach() for o in outputs], torch.autograd.grad(outputs, inputs, grad_out)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_outputs_state_and_every_gradient_equal(shape, dtype, tol):
    inputs = random_window(*shape, dtype)
    want_out, want_grad = run(TorchRecurrence, inputs)
    got_out, got_grad = run(TritonRecurrence, inputs)
    names = ["hs", "h_T", "c_T", "h^f", "d xi", "d h0", "d c0", "d W_hh"]
    for name, got, want in zip(names, got_out + list(got_grad), want_out + list(want_grad)):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol / 10, msg=name)


def test_saturated_master_gates_equal():
    """Logits of ±30 put the softmaxes at one-hot: cumax of 0 and 1 and their gradients."""
    inputs = random_window(3, 2, 4, 3, torch.float64)
    with torch.no_grad():
        inputs[0][..., :8] *= 30.0
    want_out, want_grad = run(TorchRecurrence, inputs)
    got_out, got_grad = run(TritonRecurrence, inputs)
    for got, want in zip(got_out + list(got_grad), want_out + list(want_grad)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def backbone(kernel, **kw):
    torch.manual_seed(0)
    args = dict(input_size=8, hidden_size=12, num_layers=2, chunk_size=4, dropout_input=0.2,
                dropout_hidden=0.2, dropout_output=0.2, weight_drop=0.3)
    return ONLSTM(**args, kernel=kernel, **kw).double().to(DEVICE)


@pytest.mark.parametrize("training", [True, False])
def test_backbone_two_windows_equal(training):
    """DropConnect, locked dropout and the carried state behave identically: two windows with
    the state carried, same seed, give the same outputs, distances and parameter gradients."""
    results = []
    for kernel in ("torch", "triton"):
        model = backbone(kernel).train(training)
        x = torch.randn(3, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        x = x.to(DEVICE)
        torch.manual_seed(5)
        first = model(x)
        second = model(x.flip(1), first.state)
        loss = (second.hidden.square().sum() + first.hidden.sum()
                + second.distances.sum() + second.distance_features.square().sum())
        loss.backward()
        results.append((first, second, [p.grad for p in model.parameters()]))
    (f0, s0, g0), (f1, s1, g1) = results
    for a, b in [(f0.hidden, f1.hidden), (s0.hidden, s1.hidden), (s0.distances, s1.distances),
                 (s0.distance_features, s1.distance_features)]:
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)
    for a, b in zip(s0.state.layers, s1.state.layers):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


def test_bf16_autocast_runs_the_recurrence_in_float32():
    model = ONLSTM(8, 12, 1, chunk_size=4, kernel="triton").to(DEVICE)
    x = torch.randn(2, 3, 8, device=DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = model(x)
    assert out.state.layers[0][1].dtype == torch.float32  # the cell c_T


def test_kernel_choice(monkeypatch):
    cpu = torch.zeros(1)
    assert not use_triton("auto", cpu)  # the CPU path stays PyTorch
    assert not use_triton("torch", cpu)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert use_triton("triton", cpu)  # interpreted
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA tensors, or on the CPU under TRITON_INTERPRET"):
        use_triton("triton", cpu)
    with pytest.raises(ValueError, match="kernel must be one of auto, torch, triton; got 'cuda'"):
        check_kernel("cuda")
