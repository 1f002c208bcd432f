"""Two gloo processes on CPU: disjoint columns, and the same result as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("ddp_probe.py")


def run_probe(tmp_path: Path, devices: int) -> dict:
    """Both probes' results with ``devices`` processes, from one launch (each launch costs
    seconds of imports per process)."""
    out = tmp_path / f"ddp{devices}.json"
    env = {**os.environ, "PYTHONPATH": str(PROBE.parent.parent)}
    done = subprocess.run([sys.executable, str(PROBE), str(out), str(devices), "columns",
                           "budget"], env=env, cwd=tmp_path, timeout=300, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """The probes' results on one process and on two gloo ranks."""
    tmp_path = tmp_path_factory.mktemp("ddp")
    return {devices: run_probe(tmp_path, devices) for devices in (1, 2)}


@pytest.mark.ddp
def test_ddp_ranks_see_disjoint_columns_and_log_the_same_perplexity(
        probes: dict[int, dict]) -> None:
    single, double = probes[1]["columns"], probes[2]["columns"]
    assert double["world_size"] == 2
    rank0, rank1 = double["columns"]
    assert not set(rank0) & set(rank1)  # each rank has its own columns ...
    assert rank0 + rank1 == single["columns"][0]  # ... of the same cut as one process
    assert double["val_ppl"] == pytest.approx(single["val_ppl"], rel=1e-5)
    assert double["weight_sum"] == pytest.approx(single["weight_sum"], rel=1e-5)


@pytest.mark.ddp
def test_ddp_token_budget_batches_cover_the_epoch_in_equal_steps(
        probes: dict[int, dict]) -> None:
    """Each rank takes every other token-budget batch; both run the same number of steps
    (the list is padded with repeated batches) and together see every sentence."""
    single, double = probes[1]["budget"], probes[2]["budget"]
    ((steps, seen),) = single["ranks"]
    (steps0, seen0), (steps1, seen1) = double["ranks"]
    assert sorted(seen) == list(range(single["sentences"]))
    assert steps0 == steps1 == -(-steps // 2)
    assert set(seen0) | set(seen1) == set(seen)
    repeated = len(seen0) + len(seen1) - len(seen)  # rows of the padding batch, if any
    assert (repeated > 0) == (steps % 2 == 1)
