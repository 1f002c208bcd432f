"""Micro-benchmark: one backbone training step (forward + backward) with the PyTorch time
loop against the fused Triton kernels (synlm.kernels), same weights, on one device.

    python benchmarks/kernel_step.py --backbone onlstm --device cuda
    python benchmarks/kernel_step.py --backbone prpn --device cuda --batch 64 --bptt 35

On the CPU the kernels only run interpreted (TRITON_INTERPRET=1), which says nothing of
their speed: the comparison is meant for a GPU.
"""

from __future__ import annotations

import torch

from synlm.backbones import ONLSTM, PRPN
from timing import report_pair, step_inputs, step_parser


def main() -> None:
    parser = step_parser(__doc__.splitlines()[0], hidden=1150)
    parser.add_argument("--backbone", choices=["onlstm", "prpn"], default="onlstm")
    parser.add_argument("--chunk", type=int, default=10, help="ON-LSTM's chunk size")
    args = parser.parse_args()
    x = step_inputs(args)

    def build(kernel: str) -> ONLSTM | PRPN:
        torch.manual_seed(0)  # the same weights for both
        if args.backbone == "onlstm":
            model = ONLSTM(args.input, args.hidden, args.layers, args.chunk, kernel=kernel)
        else:
            model = PRPN(args.input, args.hidden, args.layers, kernel=kernel)
        return model.to(args.device).train()

    torch_loop, fused = build("torch"), build("triton")
    print(f"{args.backbone} on {args.device}: B={args.batch} T={args.bptt} "
          f"sizes={args.input}/{args.hidden}x{args.layers}")
    report_pair(torch_loop, fused, x, args.repeats, ("PyTorch loop", "Triton"))


if __name__ == "__main__":
    main()
