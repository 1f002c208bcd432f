"""Memory autograd keeps for the backward of one backbone forward, PyTorch loop against the
fused Triton kernels, at PTB sizes (ON-LSTM B 20 x T 70, PRPN B 64 x T 35).

    python benchmarks/saved_memory.py

Without a GPU the kernels run in Triton's interpreter, which takes minutes at these sizes
but saves exactly what the compiled kernels save. It is switched on before anything imports
triton (importing synlm may, through transformers), or triton's own helpers stay compiled.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from synlm.backbones import ONLSTM, PRPN
from timing import saved_megabytes

CASES = [
    ("ONLSTM 400/1150x3, B20 T70", lambda k: ONLSTM(400, 1150, 3, 10, kernel=k), (20, 70, 400)),
    ("PRPN 800/1200x2, B64 T35", lambda k: PRPN(800, 1200, 2, kernel=k), (64, 35, 800)),
]


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name, make, shape in CASES:
        x = torch.randn(*shape, device=device)
        sizes = {}
        for kernel in ("torch", "triton"):
            torch.manual_seed(0)
            model = make(kernel).to(device).train()
            sizes[kernel] = saved_megabytes(lambda model=model, x=x: model(x))
        print(f"{name}: PyTorch loop {sizes['torch']:.1f} MB, Triton {sizes['triton']:.1f} MB, "
              f"ratio {sizes['triton'] / sizes['torch']:.3f}", flush=True)


if __name__ == "__main__":
    main()
