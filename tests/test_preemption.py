"""Preemption: a real ``synlm fit`` process sent SIGTERM (what ``timeout`` and cluster
schedulers send) mid-epoch exits with status 0, leaves last.ckpt at the step it reached,
and ``--ckpt_path last`` continues bit for bit (here, in this process: another process than
the one that saved, as a resumed job is, without the seconds each ``synlm`` process spends
on its imports)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import TINY_OVERRIDES
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from test_resume import SMALL_CORPUS, SMALL_MODEL, assert_same_runs, last

#: Written beside the runs and imported by them: the steps done, after every batch
#: (replaced atomically, so a reader never sees a partial number).
STEP_MARKER = '''
from pathlib import Path

import lightning.pytorch as pl


class StepMarker(pl.Callback):
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_end(self, trainer: pl.Trainer, *args: object) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(str(trainer.global_step))
        partial.replace(self.path)
'''
SIGNAL_AFTER = 20  # steps: past the first epoch (15 steps), at whatever step it lands
TIMEOUT = 300  # seconds for any one process (far above what they take)


def fit_args(root: Path, max_steps: int, *extra: str) -> list[str]:
    """``synlm fit`` on the tiny quickstart without validation (a signal during a
    validation leaves last.ckpt as it was; tests/test_resume.py covers that)."""
    return ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY_OVERRIDES,
            *SMALL_MODEL, *SMALL_CORPUS, f"--trainer.max_steps={max_steps}",
            "--trainer.limit_val_batches=0", "--trainer.log_every_n_steps=1",
            f"--trainer.default_root_dir={root}", *extra]


def synlm_fit(tmp_path: Path, root: Path, max_steps: int, *extra: str) -> subprocess.Popen:
    """``python -m synlm.cli fit`` (``fit_args``), on one thread as the tests' own runs
    (conftest), so that all compute alike."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "synlm.cli",
                             *fit_args(root, max_steps, *extra)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> str:
    """Its stderr, once it has exited with status 0."""
    _, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err[-3000:]
    return err


def wait_for_step(process: subprocess.Popen, marker: Path, step: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not (marker.exists() and int(marker.read_text()) >= step):
        if process.poll() is not None:
            raise AssertionError(f"exited early: {process.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no step {step} in {TIMEOUT} s")
        time.sleep(0.05)


def test_sigterm_mid_epoch_saves_the_step_and_resumes_bit_for_bit(tmp_path: Path) -> None:
    (tmp_path / "step_marker.py").write_text(STEP_MARKER)
    straight, resumed, marker = tmp_path / "straight", tmp_path / "resumed", tmp_path / "step"
    training = synlm_fit(tmp_path, resumed, 100_000, "--trainer.callbacks+=step_marker.StepMarker",
                         f"--trainer.callbacks.path={marker}")
    wait_for_step(training, marker, SIGNAL_AFTER)
    training.send_signal(signal.SIGTERM)
    err = finish(training)
    saved = last(resumed)["global_step"]
    assert saved >= SIGNAL_AFTER
    assert f"SIGTERM after step {saved}: saved last.ckpt" in err

    steps = saved + 3
    assert main(fit_args(resumed, steps, "--ckpt_path=last")) == 0
    assert main(fit_args(straight, steps)) == 0
    assert_same_runs(straight, resumed, steps)
