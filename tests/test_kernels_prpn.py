"""The fused Triton reading recurrence of PRPN against the PyTorch one (forward and backward).

Without a GPU the kernels run in Triton's interpreter on CPU tensors (conftest switches it on);
with one, the same tests run the compiled kernels on CUDA tensors.
"""

import pytest
import torch

from conftest import KERNEL_DEVICE as DEVICE
from synlm.backbones.prpn import parsing_gates
from synlm.kernels import prpn as kernels
from synlm.kernels.prpn import TritonReadingRecurrence
from synlm.kernels.prpn_torch import TorchReadingRecurrence

NAMES = ("ih", "kx", "gates", "memory", "w_key", "w_hh", "b_hh",
         "ln_w", "ln_b", "lnc_w", "lnc_b")
# float32: atol relative to the tensor's largest entry. Both paths round differently, each
# about 1e-6 of the largest entry away from the float64 result: gradients summed over (T, B)
# cancel, and those of a closed window scale as 1/1e-8.
# float64: the sums with the most cancellation on these inputs, the bias gradient's over the
# T·B = 15 steps and rows (condition number Σ|x|/|Σx| up to 388), bound the rounding at
# κ·N·2^-53 <= 6.5e-13, well inside rtol 1e-9; rounding every kernel operation otherwise
# (benchmarks/prpn_float64.py) uses at most 3.3% of the tolerance. An eps off by float32
# rounding (2.5e-8 relative) moves those sums by up to 4e-9: the tolerance catches it.
RTOL = {torch.float64: 1e-9, torch.float32: 1e-5}
ATOL = {torch.float64: 1e-12, torch.float32: 1e-5}


def _inputs(T, B, H, n, dtype, masks, seed=0, start=False, ties=False):
    """Random inputs as ReadingLayer builds them; ``start``: gates of the start of a corpus
    (past distances +inf: closed slots, exact zeros) and a zero memory (tied logits);
    ``ties``: memory slots with equal h (tied maximal logits) and a fully closed gate row."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)

    dist = torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    past = torch.rand(B, n, generator=g, dtype=torch.float64) * 3
    if start:
        past[:] = float("inf")
    gates = parsing_gates(dist, dist, past, tau=1.0, hard=False)  # (B, T, n) slot order
    gates = gates.flip(-1).transpose(0, 1).contiguous().to(dtype)  # (T, B, n) window order
    memory = rand(B, n, 2 * H)
    if start:
        memory.zero_()
    if ties:
        memory[:, 1:, :H] = memory[:, :1, :H]  # equal h: all memory logits tie at t = 0
        gates[1, 0] = 0.0  # a fully closed window: s = 0, Σ + 1e-8 = 1e-8
        gates[0, 1, :-1] = 0.0  # ties among closed slots
    args = [
        rand(T, B, 4 * H), rand(T, B, H), gates, memory, rand(H, H, scale=0.5),
        rand(4 * H, H, scale=0.5), rand(4 * H, scale=0.1), 1 + rand(4 * H, scale=0.1),
        rand(4 * H, scale=0.1), 1 + rand(H, scale=0.1), rand(H, scale=0.1),
    ]
    key_masks = rmask = None
    if masks:
        keep = torch.rand(2, T, B, H, generator=g) >= 0.3
        key_masks = (keep / 0.7).to(dtype)
        rmask = ((torch.rand(H, generator=g) >= 0.25) / 0.75).to(dtype)
    args = [a.to(DEVICE).requires_grad_() for a in args]
    extra = [m if m is None else m.to(DEVICE) for m in (key_masks, rmask)]
    d_tape = rand(B, n + T, 2 * H).to(DEVICE)
    return args, extra, d_tape


def _run(fn, args, extra, d_tape):
    leaves = [a.detach().clone().requires_grad_() for a in args]
    tape = fn.apply(*leaves, *extra, 1e-5, 1e-5)
    tape.backward(d_tape)
    return tape.detach(), [a.grad for a in leaves]


def _compare(T, B, H, n, dtype, masks, **kw):
    args, extra, d_tape = _inputs(T, B, H, n, dtype, masks, **kw)
    ref_tape, ref_grads = _run(TorchReadingRecurrence, args, extra, d_tape)
    tape, grads = _run(TritonReadingRecurrence, args, extra, d_tape)
    for name, out, ref in zip(("tape", *NAMES), [tape, *grads], [ref_tape, *ref_grads],
                              strict=True):
        atol = ATOL[dtype] * (1.0 if dtype == torch.float64 else max(1.0, ref.abs().max().item()))
        torch.testing.assert_close(out, ref, rtol=RTOL[dtype], atol=atol,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("masks", [False, True], ids=["no_masks", "masks"])
@pytest.mark.parametrize("case", ["random", "start", "ties"])
def test_matches_pytorch(case, masks, dtype):
    """``start``: closed slots (gates with exact zeros) and a zero memory, whose logits all
    tie; ``ties``: tied maximal logits, ties among closed slots and a fully closed window."""
    _compare(5, 3, 8, 4, dtype, masks, start=case == "start", ties=case == "ties")


def test_chunks_and_padding(monkeypatch):
    """H and n not powers of two, and H walked in several chunks by kernels A and A'."""
    monkeypatch.setattr(kernels, "MAX_TILE", 16)  # BLOCK_N 4 -> chunks of 4 over H = 10
    _compare(4, 2, 10, 3, torch.float64, True)
    _compare(3, 2, 6, 1, torch.float64, False)


def test_no_python_float_reaches_a_kernel(monkeypatch):
    """A Python float argument reaches a compiled kernel as float32 while the interpreter
    keeps it exact, so only a GPU would show one: the LayerNorm eps passed so moved float64
    gradients by up to 4e-9 relative (docs/performance.md). Every launch passes tensors,
    ints and flags."""
    passed = []

    class Recorded:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                passed.extend((*args, *kwargs.values()))
                return self.kernel[grid](*args, **kwargs)

            return launch

    for name in ("_attend", "_attend_backward", "_cell", "_cell_backward"):
        monkeypatch.setattr(kernels, name, Recorded(getattr(kernels, name)))
    _run(TritonReadingRecurrence, *_inputs(2, 2, 8, 3, torch.float64, True))
    assert passed and not [a for a in passed if isinstance(a, float)]


def test_masks_are_not_modified():
    """The kernels mask the key in a buffer of their own, not the inputs."""
    args, (key_masks, rmask), d_tape = _inputs(3, 2, 8, 4, torch.float64, True)
    before = [a.detach().clone() for a in args], key_masks.clone(), rmask.clone()
    _run(TritonReadingRecurrence, args, (key_masks, rmask), d_tape)
    for a, b in zip(args, before[0], strict=True):
        assert torch.equal(a, b)
    assert torch.equal(key_masks, before[1]) and torch.equal(rmask, before[2])


@pytest.mark.parametrize("training", [True, False])
def test_backbone_two_windows_equal(training):
    """The whole PRPN with the fused reading layers: dropouts, rdropout and key masks drawn
    from the same seed, the state carried into a second window; the same outputs, state and
    parameter gradients as with the PyTorch loop."""
    from synlm.backbones import PRPN

    results = []
    for kernel in ("torch", "triton"):
        torch.manual_seed(0)
        model = PRPN(6, 8, 2, n_slots=3, n_lookback=2, kernel=kernel).double().to(DEVICE)
        model.train(training)
        x = torch.randn(3, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        x = x.to(DEVICE)
        torch.manual_seed(5)
        first = model(x)
        second = model(x.flip(1), first.state)
        (second.hidden.square().sum() + first.hidden.sum()
         + sum(h.square().sum() for h in second.layers)).backward()
        results.append((first, second, [p.grad for p in model.parameters()]))
    (f0, s0, g0), (f1, s1, g1) = results
    close = dict(rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(f1.hidden, f0.hidden, **close)
    torch.testing.assert_close(s1.hidden, s0.hidden, **close)
    for a, b in zip(s0.state.readers, s1.state.readers, strict=True):
        torch.testing.assert_close(b, a, **close)
    for a, b in zip(g0, g1, strict=True):
        torch.testing.assert_close(b, a, **close)
