"""Run by test_kernels_compile.py as ``python kernel_compile_probe.py``, without
TRITON_INTERPRET: compiles every Triton kernel of synlm.kernels to H100 machine code (sm_90,
through the ptxas that ships with triton) at the paper sizes, with the launch constants the
recurrences use, and prints one ``name dtype bytes`` line per kernel. No GPU is needed."""

from __future__ import annotations

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from synlm.kernels import on_lstm, prpn

H100 = GPUTarget("cuda", 90, 32)


def compile_kernel(fn, dtype: str, constants: dict) -> int:
    """Bytes of ``fn``'s cubin; pointers (``*_ptr``) of ``dtype``, ``eps*`` float32, other
    runtime arguments int32, constexprs and ``num_warps`` from ``constants``."""
    names = fn.arg_names
    signature, constexprs = {}, {}
    for i, name in enumerate(names):
        if name in constants:
            signature[name] = "constexpr"
            constexprs[(i,)] = constants[name]
        elif name.endswith("_ptr"):
            signature[name] = f"*{dtype}"
        else:
            signature[name] = "fp32" if name.startswith("eps") else "i32"
    options = {"num_warps": constants["num_warps"]} if "num_warps" in constants else {}
    compiled = triton.compile(ASTSource(fn, signature, constexprs), target=H100,
                              options=options)
    return len(compiled.asm["cubin"])


def main() -> None:
    onlstm = on_lstm._blocks(115, 10)  # PTB: H 1150, chunk 10
    attend, cell = prpn._blocks(15, 1200)  # PTB: H 1200, 15 slots
    jobs = [(on_lstm._forward_step, onlstm), (on_lstm._backward_step, onlstm)]
    for key_mask in (False, True):
        flags = {"KEY_MASK": key_mask}
        jobs += [(prpn._attend, {**attend, **flags, "RMASK": key_mask}),
                 (prpn._attend_backward, {**attend, **flags, "RMASK": key_mask}),
                 (prpn._cell, {**cell, **flags}),
                 (prpn._cell_backward, {**cell, **flags})]
    for fn, constants in jobs:
        for dtype in ("fp32", "fp64"):
            print(fn.__name__, dtype, compile_kernel(fn, dtype, constants), flush=True)


if __name__ == "__main__":
    main()
