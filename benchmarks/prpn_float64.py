"""How far the PRPN kernel tests' float64 comparisons are from their tolerance, and why a
float32 LayerNorm eps fails them (docs/performance.md, "Float64 on a GPU").

    python benchmarks/prpn_float64.py [--rounding 5]

On the inputs of ``tests/test_kernels_prpn.py::test_matches_pytorch`` (each case, with and
without masks) and of ``test_backbone_two_windows_equal``, the PyTorch loop runs with
eps = 1e-5 and with eps = float32(1e-5) = 1e-5·(1 − 2.5e-8), what a compiled kernel got when
eps was passed as a Python float; the script prints how many elements then fail the tests'
tolerance (rtol 1e-9, atol 1e-12), the smallest LayerNorm variance + eps of the recurrent
gates z (rstd = 1/√(var + eps) moves by δ/(2(var + eps)), δ = 2.5e-13) and the condition
number κ = Σ|x|/|Σx| of the bias gradient's sums over the T·B steps and rows, with the rounding
bound κ·N·u (u = 2^-53) and what δ does to the worst of them.

``--rounding K`` then runs the fused kernels under Triton's interpreter K times with every
float64 operation rounded one ulp up, down or not at all (chosen from the result's bits, so
equal inputs still give equal results and ties stay ties) and every sum taken in a shuffled
order, as a stand-in for a GPU's other rounding and summation order, and prints the largest
|difference| / tolerance against the PyTorch loop (the test passes below 1).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
EPS = 1e-5
EPS32 = float(np.float32(EPS))
RTOL, ATOL = 1e-9, 1e-12
U = 2.0**-53
CASES = [(case, masks) for case in ("random", "start", "ties") for masks in (False, True)]
T, B, H, N = 5, 3, 8, 4  # test_matches_pytorch's steps, rows, width and slots


def tolerance_used(out: Tensor, ref: Tensor) -> Tensor:
    """|out − ref| / (atol + rtol·|ref|) elementwise: the test fails where it exceeds 1."""
    return (out - ref).abs() / (ATOL + RTOL * ref.abs())


def run(fn: type[torch.autograd.Function], args: list[Tensor], extra: list, d_tape: Tensor,
        eps: float) -> list[Tensor]:
    """The tape and every input gradient, as the test's ``_run`` with both eps = ``eps``."""
    leaves = [a.detach().clone().requires_grad_() for a in args]
    tape = fn.apply(*leaves, *extra, eps, eps)
    tape.backward(d_tape)
    return [tape.detach(), *(a.grad for a in leaves)]


def failing(out: list[Tensor], ref: list[Tensor], names: tuple[str, ...]) -> str:
    """The tensors with elements over the tolerance, each with their count."""
    over = [(name, int((tolerance_used(o, r) > 1).sum()), o.numel())
            for name, o, r in zip(names, out, ref, strict=True)]
    return ", ".join(f"{name} {k}/{n}" for name, k, n in over if k) or "none"


def eps_sensitivity() -> None:
    """The PyTorch loop at eps against itself and the fused kernels at float32(eps) on each
    test case."""
    import test_kernels_prpn as t

    import synlm.kernels.prpn_torch as loop
    from synlm.kernels.prpn import TritonReadingRecurrence

    variances: list[float] = []
    d_z: list[Tensor] = []
    stats, backward = loop.layer_norm_with_stats, loop.layer_norm_backward

    def spy_stats(x: Tensor, w: Tensor, b: Tensor, eps: float):
        y, mean, rstd = stats(x, w, b, eps)
        if x.size(-1) == 4 * H:
            variances.append(float(rstd.pow(-2).min()))  # var + eps of LN_hh
        return y, mean, rstd

    def spy_backward(dy: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, w: Tensor, b: Tensor):
        out = backward(dy, x, mean, rstd, w, b)
        if x.size(-1) == 4 * H:
            d_z.append(out[0].clone())  # d z of LN_hh (B, 4H), steps in reverse
        return out

    loop.layer_norm_with_stats, loop.layer_norm_backward = spy_stats, spy_backward
    print(f"δ = eps − float32(eps) = {EPS - EPS32:.3e} ({(EPS - EPS32) / EPS:.2e} relative)\n")
    print("| case | masks | over the tolerance at float32 eps: loop; fused kernels "
          "| min var + eps (z) | δ/(2(var+eps)) | max κ of d b_hh | κ·N·u "
          "| d b_hh moved (rel.) |\n|---|---|---|---|---|---|---|---|")
    for case, masks in CASES:
        args, extra, d_tape = t._inputs(T, B, H, N, torch.float64, masks,
                                        start=case == "start", ties=case == "ties")
        variances.clear()
        d_z.clear()
        ref = run(loop.TorchReadingRecurrence, args, extra, d_tape, EPS)
        terms = torch.stack(d_z).flatten(0, 1)  # (T·B, 4H): d b_hh = their sum
        kappa = terms.abs().sum(0) / terms.sum(0).abs()
        out = run(loop.TorchReadingRecurrence, args, extra, d_tape, EPS32)
        fused = run(TritonReadingRecurrence, args, extra, d_tape, EPS32)
        names = ("tape", *t.NAMES)
        bias = names.index("b_hh")
        moved = float(((out[bias] - ref[bias]).abs() / ref[bias].abs()).max())
        var = min(variances)
        print(f"| {case} | {masks} | {failing(out, ref, names)}; {failing(fused, ref, names)} "
              f"| {var:.4f} | "
              f"{(EPS - EPS32) / (2 * var):.1e} | {float(kappa.max()):.0f} | "
              f"{float(kappa.max()) * terms.size(0) * U:.1e} | {moved:.1e} |")
    loop.layer_norm_with_stats, loop.layer_norm_backward = stats, backward


def backbone_at_float32_eps() -> None:
    """test_backbone_two_windows_equal's PRPN, the PyTorch loop at eps and float32(eps)."""
    from synlm.backbones import PRPN
    from synlm.kernels.prpn_torch import TorchReadingRecurrence

    forward = TorchReadingRecurrence.forward

    def rounded(ctx, *args):
        *args, eps, eps_c = args
        return forward(ctx, *args, float(np.float32(eps)), float(np.float32(eps_c)))

    for training in (True, False):
        results = []
        for patch in (forward, rounded):
            TorchReadingRecurrence.forward = staticmethod(patch)
            torch.manual_seed(0)
            model = PRPN(6, 8, 2, n_slots=3, n_lookback=2, kernel="torch").double()
            model.train(training)
            x = torch.randn(3, 4, 6, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(2))
            torch.manual_seed(5)
            first = model(x)
            second = model(x.flip(1), first.state)
            (second.hidden.square().sum() + first.hidden.sum()
             + sum(h.square().sum() for h in second.layers)).backward()
            results.append([p.grad for p in model.parameters()])
        TorchReadingRecurrence.forward = staticmethod(forward)
        names = tuple(name for name, _ in model.named_parameters())
        print(f"backbone, {'train' if training else 'eval'}: parameter gradients over the "
              f"tolerance at float32 eps (loop): {failing(results[1], results[0], names)}")


def _other_rounding(x: np.ndarray, seed: int) -> np.ndarray:
    """float64 ``x`` moved one ulp up, down or not, by a hash of its bits and ``seed``."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float64:
        return x
    key = np.uint64(seed * 0x632BE59BD9B4E019 % 2**64)
    pick = ((x.view(np.uint64) ^ key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(62)
    moved = np.where(pick == 0, np.nextafter(x, np.inf),
                     np.where(pick == 1, np.nextafter(x, -np.inf), x))
    return np.where(np.isfinite(x) & (x != 0), moved, x)


def other_rounding(samples: int) -> None:
    """The fused kernels under the interpreter with ``_other_rounding`` at every float64
    operation and shuffled sums, against the PyTorch loop."""
    import test_kernels_prpn as t
    from triton.runtime import interpreter

    from synlm.kernels.prpn import TritonReadingRecurrence
    from synlm.kernels.prpn_torch import TorchReadingRecurrence

    seed = [0]

    def rounded(op):
        def run_op(self, *args):
            out = op(self, *args)
            return interpreter.TensorHandle(_other_rounding(out.data, seed[0]), out.dtype)

        return run_op

    builder = interpreter.InterpreterBuilder
    for name in ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_exp",
                 "create_sqrt", "create_precise_sqrt", "create_precise_divf", "create_fma"):
        setattr(builder, name, rounded(getattr(builder, name)))

    def shuffled_sum(self, input):
        x = input.handle.data
        if x.dtype != np.float64:
            return self.to_tensor(np.sum(x, axis=self.axis, keepdims=self.keep_dims),
                                  input.dtype)
        x = np.moveaxis(x, self.axis, 0)
        order = np.random.default_rng(seed[0]).permutation(x.shape[0])
        total = x[order[0]].copy()
        for i in order[1:]:
            total = _other_rounding(total + x[i], seed[0])
        if self.keep_dims:
            total = np.expand_dims(total, self.axis)
        return self.to_tensor(total, input.dtype)

    interpreter.ReduceOps.sum = shuffled_sum
    worst = {key: 0.0 for key in CASES}
    for sample in range(samples):
        seed[0] = sample + 1
        for case, masks in CASES:
            args, extra, d_tape = t._inputs(T, B, H, N, torch.float64, masks,
                                            start=case == "start", ties=case == "ties")
            ref = run(TorchReadingRecurrence, args, extra, d_tape, EPS)
            out = run(TritonReadingRecurrence, args, extra, d_tape, EPS)
            used = max(float(tolerance_used(o, r).max()) for o, r in zip(out, ref, strict=True))
            worst[case, masks] = max(worst[case, masks], used)
    print(f"\nfused kernels, other rounding ({samples} samples): largest |difference| / "
          "tolerance: " + ", ".join(f"{case}{' masks' if masks else ''} {used:.3f}"
                                     for (case, masks), used in worst.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounding", type=int, default=0,
                        help="samples of the fused kernels under other rounding (0: none)")
    args = parser.parse_args()
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported (by the tests)
    sys.path.insert(0, str(ROOT / "tests"))
    torch.set_num_threads(1)
    eps_sensitivity()
    backbone_at_float32_eps()
    if args.rounding:
        other_rounding(args.rounding)


if __name__ == "__main__":
    main()
