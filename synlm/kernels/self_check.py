"""The fused kernels check themselves before they are trusted (docs/performance.md, "Safe by
default").

The first time a process would run a fused recurrence on a device and dtype, it runs it and
the PyTorch loop on one small random problem (a few steps, a batch of two), forward and
backward under the same random output gradients, and compares every output and every input
gradient. The verdict is kept for the process: with ``kernel: auto`` a mismatch, or any error
while compiling or launching the kernels, sends that recurrence back to the PyTorch loop with
one warning that names the cause; with ``kernel: triton`` it is an error instead. On a GPU
the check costs the kernels' compilation, which their first real use would pay anyway, plus
a few milliseconds.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from synlm.errors import RunError, SynLMWarning

#: rtol of the comparison, and atol as a share of the reference tensor's largest entry
#: (at least 1): float32 allows for the two paths' different rounding over a few steps.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8}

#: The cause (None: agreed) by (recurrence, device, dtype), for this process.
_VERDICTS: dict[tuple[str, str, torch.dtype], str | None] = {}


class KernelCheckError(RunError):
    """``kernel: triton`` and the fused kernels failed their check (one line)."""


class KernelCheckWarning(SynLMWarning, RuntimeWarning):
    """``kernel: auto`` and the fused kernels failed their check: the PyTorch loop is used."""


def pick_recurrence(kernel: str, use_fused: bool, loop: type[torch.autograd.Function],
                    fused_module: str, device: torch.device, dtype: torch.dtype
                    ) -> type[torch.autograd.Function]:
    """The recurrence to run: ``loop`` (the torch loop, ``synlm.kernels.*_torch``) unless
    ``use_fused`` (``synlm.kernels.use_triton``) and the fused one of
    ``synlm.kernels.<fused_module>`` passes its check on ``device`` and ``dtype``."""
    if not use_fused:
        return loop
    module = importlib.import_module(f"synlm.kernels.{fused_module}")
    cause = verdict(fused_module, module.FUSED, loop, module.check_problem, device, dtype)
    if cause is None:
        return module.FUSED
    if kernel == "triton":
        raise KernelCheckError(f"kernel='triton': the fused {fused_module} recurrence failed "
                               f"its check against the PyTorch loop on {device} ({dtype}): "
                               f"{cause}; use kernel='torch' (or 'auto', which falls back)")
    return loop


def verdict(name: str, fused: type[torch.autograd.Function],
            reference: type[torch.autograd.Function],
            problem: Callable[[torch.device, torch.dtype], tuple[list[Tensor], list[Any]]],
            device: torch.device, dtype: torch.dtype) -> str | None:
    """The kept verdict for (``name``, device, dtype), checking once; the first failure warns."""
    key = (name, str(device), dtype)
    if key not in _VERDICTS:
        # the real call may sit under no_grad, inference_mode or autocast: the check may not
        with torch.inference_mode(False), torch.enable_grad(), \
                torch.autocast(device.type, enabled=False):
            grads, rest = problem(device, dtype)
            _VERDICTS[key] = compare(fused, reference, grads, rest)
        if _VERDICTS[key] is not None:
            warnings.warn(f"the fused {name} recurrence failed its check against the "
                          f"PyTorch loop on {device} ({dtype}): {_VERDICTS[key]}; using the "
                          f"PyTorch loop (kernel: torch silences this, kernel: triton raises)",
                          KernelCheckWarning, stacklevel=3)
    return _VERDICTS[key]


def compare(fused: type[torch.autograd.Function], reference: type[torch.autograd.Function],
            grads: Sequence[Tensor], rest: Sequence[Any]) -> str | None:
    """None when ``fused`` computes what ``reference`` does on ``(*grads, *rest)``: every
    output, and the gradient of every input of ``grads``, within ``TOLERANCE``; else the
    cause, in a few words (the first mismatch, or the error the fused one raised)."""
    try:
        got = _outputs_and_gradients(fused, grads, rest)
    except Exception as err:  # a compile or launch failure is a failed check, not a crash
        message = str(err).strip().splitlines()
        return f"{type(err).__name__}{': ' + message[0] if message else ''}"
    want = _outputs_and_gradients(reference, grads, rest)
    rtol = TOLERANCE[grads[0].dtype]
    for name, g, w in zip(_names(len(got) - len(grads), len(grads)), got, want, strict=True):
        atol = rtol * max(1.0, w.abs().max().item())
        if not torch.isfinite(g).all() and torch.isfinite(w).all():
            return f"{name} is not finite"
        if not torch.allclose(g, w, rtol=rtol, atol=atol):
            error = (g - w).abs().max().item()
            return f"{name} differs by up to {error:.2e} (tolerance {atol:.1e})"
    return None


def _names(n_outputs: int, n_inputs: int) -> list[str]:
    return [f"output {i}" for i in range(n_outputs)] + \
           [f"the gradient of input {i}" for i in range(n_inputs)]


def _outputs_and_gradients(fn: type[torch.autograd.Function], grads: Sequence[Tensor],
                           rest: Sequence[Any]) -> list[Tensor]:
    leaves = [g.detach().clone().requires_grad_() for g in grads]
    outputs = fn.apply(*leaves, *rest)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    generator = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=o.dtype).to(o.device)
                  for o in outputs]
    gradients = torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)
    return [o.detach() for o in outputs] + [
        torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, gradients)]
