"""benchmarks/portable_weights.py: a checkpoint's weights drawn again from integers, so that
weights differing in their last bits (one training step on another CPU) become the same bytes,
each tensor of about its spread, constants kept, and the digest it prints that of the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from portable_weights import CENTRE_GRID, STEPS, weights_digest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "portable_weights.py"


def checkpoint(path: Path, jitter: float) -> Path:
    """A checkpoint as Lightning writes it: an embedding ~N(0, 1), LSTM-like weights ~U(±1/16)
    moved by ``jitter`` times another draw (a step on another CPU), a LayerNorm's ones, a
    zero bias, an integer buffer and optimizer moments."""
    torch.manual_seed(0)
    state = {"model.embedding.weight": torch.randn(50, 16),
             "model.lstm.weight": (torch.rand(64, 16) - 0.5) / 8,
             "model.norm.weight": torch.ones(16), "model.norm.bias": torch.zeros(16),
             "model.steps": torch.tensor([3, 4])}
    torch.manual_seed(1)
    for name in ("model.embedding.weight", "model.lstm.weight"):
        state[name] = state[name] + jitter * torch.randn(state[name].shape)
    torch.save({"state_dict": state, "optimizer_states": [{"state": {}}], "epoch": 0}, path)
    return path


def drawn(tmp_path: Path, source: Path, name: str) -> tuple[dict[str, torch.Tensor], str]:
    out = tmp_path / name
    printed = subprocess.run([sys.executable, str(SCRIPT), str(source), str(out)],
                             capture_output=True, text=True, check=True).stdout.strip()
    return torch.load(out, weights_only=False), printed


def test_weights_a_rounding_apart_become_the_same_bytes(tmp_path: Path) -> None:
    here, printed = drawn(tmp_path, checkpoint(tmp_path / "a.ckpt", 0.0), "a.out")
    there, _ = drawn(tmp_path, checkpoint(tmp_path / "b.ckpt", 1e-6), "b.out")
    assert weights_digest(here["state_dict"]) == weights_digest(there["state_dict"]) == printed
    # and the bytes pinned: integer draws and exact arithmetic, the same on every CPU
    assert printed.startswith("fbeb1ab1dd6ec6b5"), printed


def test_each_tensor_keeps_its_spread_on_the_grid_and_constants_stay(tmp_path: Path) -> None:
    source = checkpoint(tmp_path / "a.ckpt", 0.0)
    old = torch.load(source, weights_only=False)["state_dict"]
    new, _ = drawn(tmp_path, source, "a.out")
    state = new["state_dict"]
    assert "optimizer_states" not in new and new["epoch"] == 0
    for name in ("model.norm.weight", "model.norm.bias", "model.steps"):
        assert torch.equal(state[name], old[name]), name
    for name, half_width in (("model.embedding.weight", 2.0), ("model.lstm.weight", 1 / 16)):
        values = state[name]
        assert values.dtype == torch.float32 and not torch.equal(values, old[name])
        centre = round(old[name].double().mean().item() / CENTRE_GRID) * CENTRE_GRID
        assert (values.double() - centre).abs().max() <= half_width
        steps = (values.double() - centre) * 2 ** STEPS / half_width
        assert torch.equal(steps, steps.round()), name
        assert values.std() / old[name].std() == pytest.approx(1.0, abs=0.2), name
