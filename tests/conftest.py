"""Shared fixtures: hermetic caches, offline wandb, tiny models and corpora."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "offline")
# the benchmarks' baselines (e.g. prpn_naive.NaivePRPN) are checked against the fast models
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNLM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.getbasetemp()))


#: CLI overrides that shrink any config to a model and corpus that run in seconds.
TINY_OVERRIDES = [
    "--data.corpus=SyntheticTreebank",
    "--data.corpus.init_args.n_train=300",
    "--data.corpus.init_args.n_valid=60",
    "--data.corpus.init_args.n_test=60",
    "--data.batch_size=4",
    "--data.eval_batch_size=4",
    "--data.test_batch_size=4",
    "--data.bptt=12",
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]
