"""The private PyTorch operations the CPU-speed loops call, each guarded.

Each op is named below with the reason it is used. Each is probed once per process on a tiny
input; if a PyTorch release drops it or changes its signature, the probe fails and a public
equivalent runs instead: slower, the same result up to float rounding
(tests/test_reference_kernel.py runs both).

- ``torch._C._nn.mkldnn_linear`` (with ``Tensor.to_mkldnn``): oneDNN's linear on a weight
  reordered once into its blocked layout. In ON-LSTM's CPU loop every step multiplies by
  the same W_hh with a small batch, and reordering it once per window makes those products
  about 1.5x faster than ``addmm`` at H = 1150. Fallback: ``x @ weight.T``.
- ``torch.native_layer_norm``: LayerNorm that also returns the mean and 1/std it computed,
  which PRPN's hand-written backward needs (``F.layer_norm`` returns only the output).
  Fallback: the mean and 1/std computed by hand, then the affine map.
- ``torch.ops.aten.native_layer_norm_backward``: LayerNorm's fused backward kernel, from the
  saved mean and 1/std: the input, weight and bias gradients in one call per step.
  Fallback: the same three gradients written out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

#: What a probe may raise when an op is gone or has changed.
_GONE = (AttributeError, RuntimeError, TypeError, NotImplementedError)


@functools.cache
def onednn_linear_works() -> bool:
    """Whether this CPU build runs oneDNN's linear (probed once on a 1x1 product)."""
    try:
        one = torch.ones(1, 1).to_mkldnn()
        torch._C._nn.mkldnn_linear(one, one, None)
    except _GONE:
        return False
    return True


@functools.cache
def native_layer_norm_works() -> bool:
    """Whether ``torch.native_layer_norm`` and its backward run (probed once, 1 x 2)."""
    try:
        x, w = torch.ones(1, 2), torch.ones(2)
        _, mean, rstd = torch.native_layer_norm(x, (2,), w, w, 1e-5)
        torch.ops.aten.native_layer_norm_backward(x, x, (2,), mean, rstd, w, w,
                                                  [True, True, True])
    except _GONE:
        return False
    return True


def step_matmul(weight: Tensor) -> Callable[[Tensor], Tensor]:
    """x (B, in) -> x @ weight.T (B, out) for every step of a window, weight prepared once.

    On CPU in float32, for weights of a million entries or more, oneDNN reorders the weight
    once into its blocked layout (``mkldnn_linear``, above); for small weights it is no
    faster and slows the steps around it, so they take the public product.
    """
    if (weight.device.type == "cpu" and weight.dtype == torch.float32
            and weight.numel() >= 2**20 and onednn_linear_works()):
        packed = weight.contiguous().to_mkldnn()
        return lambda x: torch._C._nn.mkldnn_linear(x.to_mkldnn(), packed, None).to_dense()
    w_t = weight.t()
    return lambda x: x @ w_t


def layer_norm_with_stats(x: Tensor, weight: Tensor, bias: Tensor, eps: float
                          ) -> tuple[Tensor, Tensor, Tensor]:
    """LayerNorm over the last dimension of x (B, N) -> (output (B, N), mean (B, 1),
    rstd (B, 1)), rstd = 1/sqrt(var + eps) with the biased variance."""
    if native_layer_norm_works():
        return torch.native_layer_norm(x, (x.size(-1),), weight, bias, eps)
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return torch.addcmul(bias, (x - mean) * rstd, weight), mean, rstd


def layer_norm_backward(grad: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor,
                        bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of LayerNorm (``layer_norm_with_stats``) from the output's ``grad``
    (B, N): d x (B, N), d weight and d bias (N,) summed over the batch."""
    if native_layer_norm_works():
        return torch.ops.aten.native_layer_norm_backward(
            grad, x, (x.size(-1),), mean, rstd, weight, bias, [True, True, True])
    x_hat = (x - mean) * rstd
    d_hat = grad * weight
    dx = rstd * (d_hat - d_hat.mean(-1, keepdim=True)
                 - x_hat * (d_hat * x_hat).mean(-1, keepdim=True))
    return dx, (grad * x_hat).sum(0), grad.sum(0)
