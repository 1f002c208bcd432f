"""A checkpoint's weights drawn again, the same on every machine, for a benchmark that runs in
parts on several machines (a full BLiMP run, one paradigm a command):

    python benchmarks/portable_weights.py RUN OUT [--seed 0]

``RUN``: a Lightning checkpoint (a file, or a run folder's ``last.ckpt``); ``OUT``: the file
written, the same checkpoint with each floating-point tensor of its ``state_dict`` replaced.
A model made by a training step differs in its last bits from one CPU to another (the order of
its sums follows the CPU's vector width), so the same command gives other weights elsewhere.
These are drawn from integers alone: each tensor, in the order of its name, becomes ``c + a *
k / 2**20`` with ``k`` uniform on ``[-2**20, 2**20]`` (``torch.randint`` from one generator
seeded ``--seed``), its centre ``c`` the tensor's mean on a grid of ``2**-10`` and its
half-width ``a`` the power of two nearest ``sqrt(3)`` times its standard deviation (a uniform
draw of about the same spread), in float64 and rounded once to the tensor's dtype: every step
IEEE-exact, so any machine gives the same bytes. A tensor whose values are all equal (a
LayerNorm's ones, a zero bias) is kept. Prints the sha256 of the weights written (over the
sorted names and bytes).
"""

from __future__ import annotations

import argparse
import hashlib
import math
from pathlib import Path

import torch

#: The draws' resolution: ``k / 2**STEPS`` for integers ``k`` in ``[-2**STEPS, 2**STEPS]``.
STEPS = 20
#: The grid of each tensor's centre.
CENTRE_GRID = 2.0 ** -10


def portable(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``tensor`` drawn again from integers (the module docstring), or itself if constant."""
    values = tensor.detach().double()
    if values.numel() < 2 or bool((values == values.flatten()[0]).all()):
        return tensor
    centre = round(values.mean().item() / CENTRE_GRID) * CENTRE_GRID
    half_width = 2.0 ** round(math.log2(math.sqrt(3) * values.std().item()))
    k = torch.randint(-2 ** STEPS, 2 ** STEPS + 1, tensor.shape, generator=generator)
    return (centre + k.double() * (half_width / 2 ** STEPS)).to(tensor.dtype)


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """The sha256 of ``state``'s tensors, over their sorted names and bytes."""
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode() + state[name].detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a Lightning checkpoint or a run folder")
    parser.add_argument("out", type=Path, help="the checkpoint to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    source = args.run
    if source.is_dir():
        source = next(source.rglob("last.ckpt"), None) or parser.error(
            f"{args.run}: no last.ckpt under this folder; expected a run folder or a .ckpt file")
    checkpoint = torch.load(source, map_location="cpu", weights_only=False)
    generator = torch.Generator().manual_seed(args.seed)
    state = checkpoint["state_dict"]
    for name in sorted(state):
        if state[name].is_floating_point():
            state[name] = portable(state[name], generator)
    checkpoint.pop("optimizer_states", None)  # moments of the old weights: not these
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, args.out)
    print(weights_digest(state))


if __name__ == "__main__":
    main()
