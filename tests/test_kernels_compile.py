"""Every fused kernel compiles to H100 machine code at the paper sizes, in float32 and
float64, on a machine without a GPU: what the interpreter-run tests cannot show (Triton's
compiler rejects constructs its interpreter accepts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).with_name("kernel_compile_probe.py")


def test_every_kernel_compiles_for_sm90() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True,
                         timeout=300, check=True, env=env).stdout
    lines = [line.split() for line in out.splitlines()]
    compiled = {(name, dtype) for name, dtype, size in lines if int(size) > 0}
    kernels = {"_forward_step", "_backward_step", "_attend", "_attend_backward", "_cell",
               "_cell_backward"}
    assert compiled == {(k, d) for k in kernels for d in ("fp32", "fp64")}
    assert len(lines) == 20  # ON-LSTM's 2, PRPN's 4 with and without key masks; 2 dtypes
