"""The fused kernels check themselves against the PyTorch loop before their first use
(synlm.kernels.self_check): the real kernels pass, a faulty or failing one is caught, ``auto``
falls back with one warning naming the cause, ``triton`` raises. Without a GPU the kernels
run in Triton's interpreter (conftest switches it on)."""

from __future__ import annotations

import warnings

import pytest
import torch

from conftest import KERNEL_DEVICE as DEVICE
from synlm.backbones import ONLSTM
from synlm.backbones import on_lstm as on_lstm_backbone
from synlm.kernels import on_lstm, prpn, self_check
from synlm.kernels.on_lstm_torch import TorchRecurrence
from synlm.kernels.prpn_torch import TorchReadingRecurrence
from synlm.kernels.self_check import KernelCheckError, compare, pick_recurrence

CASES = {"on_lstm": (on_lstm, TorchRecurrence), "prpn": (prpn, TorchReadingRecurrence)}


@pytest.fixture(autouse=True)
def _fresh_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(self_check, "_VERDICTS", {})


def faulty(fused: type[torch.autograd.Function], error: float = 1e-2
           ) -> type[torch.autograd.Function]:
    """``fused`` with its first output off by ``error``, as a wrong kernel would be."""
    class Faulty(fused):  # type: ignore[valid-type, misc]
        @staticmethod
        def forward(ctx, *args):  # type: ignore[override]
            out = fused.forward(ctx, *args)
            if isinstance(out, tuple):
                return (out[0] + error, *out[1:])
            return out + error
    return Faulty


def broken(message: str) -> type[torch.autograd.Function]:
    class Broken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):  # type: ignore[override]
            raise RuntimeError(message)
    return Broken


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_real_kernels_pass(name: str, dtype: torch.dtype) -> None:
    module, reference = CASES[name]
    grads, rest = module.check_problem(torch.device(DEVICE), dtype)
    assert compare(module.FUSED, reference, grads, rest) is None
    chosen = pick_recurrence("auto", True, reference, name, torch.device(DEVICE), dtype)
    assert chosen is module.FUSED


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_wrong_kernel_falls_back_once_with_a_warning_or_raises(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, reference = CASES[name]
    monkeypatch.setattr(module, "FUSED", faulty(module.FUSED))
    device, dtype = torch.device(DEVICE), torch.float32
    with pytest.warns(RuntimeWarning, match=rf"fused {name} recurrence failed its check .*"
                      r"output 0 differs by up to 1\.0\de-02.*using the PyTorch loop"):
        assert pick_recurrence("auto", True, reference, name, device, dtype) is reference
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the verdict is kept: no second check, no warning
        assert pick_recurrence("auto", True, reference, name, device, dtype) is reference
    with pytest.raises(KernelCheckError, match=r"^kernel='triton': .* differs by up to"):
        pick_recurrence("triton", True, reference, name, device, dtype)


def test_an_error_in_the_kernels_is_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile or launch failure is a failed check, named in one line, not a crash."""
    monkeypatch.setattr(on_lstm, "FUSED", broken("triton.compiler.CompilationError: at 3:4\n"
                                                 "a long traceback"))
    with pytest.warns(RuntimeWarning, match="RuntimeError: triton.compiler.CompilationError: "
                                            "at 3:4; using the PyTorch loop"):
        pick_recurrence("auto", True, TorchRecurrence, "on_lstm", torch.device(DEVICE),
                        torch.float32)


def test_a_backbone_with_a_wrong_kernel_computes_the_pytorch_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ON-LSTM with ``kernel: auto`` where the fused path would run (forced here on the
    CPU): the faulty kernel is caught at the first window, under no_grad too, and the
    outputs are the PyTorch loop's."""
    monkeypatch.setattr(on_lstm, "FUSED", faulty(on_lstm.FUSED))
    monkeypatch.setattr(on_lstm_backbone, "use_triton", lambda kernel, like: True)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    torch.manual_seed(0)
    auto = ONLSTM(8, 12, 2, chunk_size=4, kernel="auto").to(DEVICE).eval()
    torch.manual_seed(0)
    loop = ONLSTM(8, 12, 2, chunk_size=4, kernel="torch").to(DEVICE).eval()
    with pytest.warns(RuntimeWarning, match="fused on_lstm recurrence failed"), \
            torch.no_grad():
        got = auto(x)
    torch.testing.assert_close(got.hidden, loop(x).hidden, rtol=0, atol=0)
