"""The time loops of the recurrent backbones, apart from the models' equations.

A backbone's model file (``synlm.backbones.on_lstm``, ``synlm.backbones.prpn``) states its
equations one time step at a time in plain PyTorch: that per-step code is the specification,
run as ``kernel="reference"`` and differentiated by autograd. The fast loops that compute the
same thing live here, each tested against it:

- ``on_lstm_torch``, ``prpn_torch`` (``kernel="torch"``): the CPU-speed loops, custom
  autograd functions with hand-written backwards; the private PyTorch ops they call are
  named, with the reason, and guarded in ``private_ops``;
- ``on_lstm``, ``prpn`` (``kernel="triton"``, docs/performance.md): the same loops with the
  per-step elementwise work fused into one Triton kernel each way, so a step costs one
  cuBLAS product plus one fused kernel. Under ``TRITON_INTERPRET=1`` the same kernels run on
  CPU tensors (NumPy), which is how the tests compare them with the torch loops on machines
  without a GPU.

``kernel`` arguments of the backbones take ``"auto"`` (Triton on CUDA tensors when Triton is
installed, the torch loop otherwise), ``"torch"``, ``"triton"`` or ``"reference"``. Before its
first use in a process a fused recurrence is checked against the torch loop
(``synlm.kernels.self_check``): with ``auto`` a failure falls back to the loop with a warning,
with ``triton`` it raises.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Literal

from torch import Tensor

from synlm.errors import InputError

Kernel = Literal["auto", "torch", "triton", "reference"]
#: The loops meant for training; ``"reference"`` (the model file's per-step equations, slow)
#: is accepted too, for tests and as a benchmark's baseline.
KERNELS: tuple[str, ...] = ("auto", "torch", "triton")


@functools.cache
def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """Whether Triton kernels run in its CPU interpreter. Triton reads the variable when a
    kernel is defined, its own helpers included (at its first import): set it before then."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_kernel(kernel: str) -> Kernel:
    """Validate a backbone's ``kernel`` argument; a one-line error names the choices."""
    if kernel not in (*KERNELS, "reference"):
        raise InputError(f"kernel must be one of {', '.join(KERNELS)}; got {kernel!r} "
                         "('reference', the per-step equations, is for tests and baselines)")
    if kernel == "triton" and not triton_installed():
        raise InputError("kernel='triton' needs the triton package: pip install triton "
                         "(or kernel='auto', which falls back to PyTorch)")
    return kernel  # type: ignore[return-value]


def use_triton(kernel: Kernel, like: Tensor) -> bool:
    """Whether a recurrence over tensors like ``like`` runs the Triton kernels."""
    if kernel in ("torch", "reference"):
        return False
    if kernel == "triton":
        if not (like.is_cuda or interpreting()):
            raise InputError("kernel='triton' runs on CUDA tensors, or on the CPU under "
                               "TRITON_INTERPRET=1; use kernel='auto' to fall back to PyTorch")
        return True
    return like.is_cuda and triton_installed()
