"""Resuming from last.ckpt continues bit for bit: 2 steps + resume + 2 steps == 4 steps."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from conftest import TINY_OVERRIDES
from synlm.cli import main
from synlm.registry import REPO_CONFIGS


def fit(root: Path, max_steps: int, *extra: str) -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY_OVERRIDES,
            f"--trainer.max_steps={max_steps}", "--trainer.val_check_interval=2",
            "--trainer.limit_val_batches=2", "--trainer.log_every_n_steps=1",
            f"--trainer.default_root_dir={root}", *extra]
    assert main(args) == 0


def step_losses(root: Path) -> dict[int, str]:
    losses = {}
    for metrics in sorted(root.glob("logs/version_*/metrics.csv")):
        for row in csv.DictReader(metrics.open()):
            if row.get("train/loss_step"):
                losses[int(row["step"])] = row["train/loss_step"]
    return losses


@pytest.mark.parametrize(
    "optimiser",
    [[], ["--trainer.callbacks+=NTASGD", "--trainer.callbacks.finetune_epoch=0"],
     ["--model.backbone=PRPN", "--model.backbone.init_args.input_size=16",
      "--model.backbone.init_args.hidden_size=24", "--model.heads=[]"],
     ["--model.backbone=Transformer", "--model.backbone.init_args.input_size=16",
      "--model.backbone.init_args.num_layers=2", "--model.backbone.init_args.num_heads=2",
      "--model.backbone.init_args.ffn_size=32", "--model.heads=[]", "--data.mode=sentence",
      "--data.max_tokens=128", "--optimizer=AdamW", "--lr_scheduler=InverseSqrtWarmup",
      "--lr_scheduler.warmup_steps=3"]],
    ids=["sgd", "nt-asgd-averaging", "prpn-state", "transformer-token-budget"],
)
def test_resume_equals_uninterrupted(tmp_path: Path, optimiser: list[str]) -> None:
    """With NT-ASGD averaging, validation (and the checkpoint at step 2) use the averaged
    weights while training goes on from the raw ones: the resume must restore both."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, 4, *optimiser)
    fit(resumed, 2, *optimiser)
    fit(resumed, 4, "--ckpt_path=last", *optimiser)

    a = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=False)
    b = torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=False)
    assert a["global_step"] == b["global_step"] == 4
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name
    losses = step_losses(straight)
    assert len(losses) == 4
    assert step_losses(resumed) == losses  # identical strings: bit for bit
