"""synlm.runtime.threads: one torch thread per idle core this process may use (CPU affinity
capped by the cgroup CPU quota, less the cores other work keeps busy), unless the user chose;
a continued fit goes on with its checkpoint's count; a bad choice is one line; the
quickstart's weights do not depend on the count."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from synlm.runtime import threads


@pytest.fixture(autouse=True)
def _keep_torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _machine(monkeypatch: pytest.MonkeyPatch, affinity: int, quota: tuple[int, int] | None,
             busy: float) -> None:
    """This process may run on ``affinity`` cores under ``quota``; ``busy`` cores look busy."""
    monkeypatch.setattr(threads, "affinity_cores", lambda: affinity)
    monkeypatch.setattr(threads, "cgroup_quota", lambda: quota)
    monkeypatch.setattr(threads, "busy_cores", lambda cores: busy)


def _write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


def test_cgroup_v2_quota(tmp_path: Path) -> None:
    """``cpu.max``: ``max`` is no limit; 150000/100000 is 1.5 CPUs; a quota on a cgroup above
    this process's holds too, the tightest wins."""
    root, own = tmp_path / "cgroup", tmp_path / "self_cgroup"
    own.write_text("0::/\n")
    _write(root, cpu_max="max 100000")
    assert threads.cgroup_quota(root, own) is None
    _write(root, cpu_max="150000 100000")
    assert threads.cgroup_quota(root, own) == (150000, 100000)
    own.write_text("0::/user.slice/job.scope\n")  # nested: its folder and those above it
    _write(root / "user.slice", cpu_max="400000 100000")
    _write(root / "user.slice" / "job.scope", cpu_max="max 100000")
    assert threads.cgroup_quota(root, own) == (150000, 100000)
    _write(root / "user.slice" / "job.scope", cpu_max="50000 100000")
    assert threads.cgroup_quota(root, own) == (50000, 100000)
    assert threads.cgroup_quota(tmp_path / "none", tmp_path / "none") is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    """``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in the cpu controller's folder: -1 is
    no limit; the path in /proc/self/cgroup need not exist below the mount (a container
    without a cgroup namespace)."""
    root, own = tmp_path / "cgroup", tmp_path / "self_cgroup"
    own.write_text("4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n0::/\n")
    _write(root / "cpu,cpuacct", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    _write(root / "unified", cpu_pressure="")  # hybrid: v2 without the cpu controller
    assert threads.cgroup_quota(root, own) is None
    _write(root / "cpu,cpuacct", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")
    assert threads.cgroup_quota(root, own) == (150000, 100000)
    _write(root / "cpu,cpuacct" / "docker" / "abc", cpu_cfs_quota_us="300000",
           cpu_cfs_period_us="100000")
    assert threads.cgroup_quota(root, own) == (150000, 100000)


@pytest.mark.parametrize(("affinity", "quota", "expected", "why"), [
    (16, None, 16, "default: 0.0 of 16 cores busy with other work, 16 cores in the CPU affinity, "
     "no cgroup CPU quota"),
    (16, (150000, 100000), 2,
     "default: 0.0 of 16 cores busy with other work, cgroup CPU quota 150000/100000 = 1.5 "
     "CPUs, 16 cores in the CPU affinity"),
    (2, (400000, 100000), 2, "default: 0.0 of 2 cores busy with other work, 2 cores in the "
     "CPU affinity, cgroup CPU quota 4 CPUs"),
    (8, (50000, 100000), 1,
     "default: 0.0 of 8 cores busy with other work, cgroup CPU quota 50000/100000 = 0.5 "
     "CPUs, 8 cores in the CPU affinity"),
    (1, None, 1, "default: 0.0 of 1 core busy with other work, 1 core in the CPU affinity, "
     "no cgroup CPU quota"),
])
def test_on_a_quiet_machine_the_default_is_the_cores_this_process_may_use(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], affinity: int,
        quota: tuple[int, int] | None, expected: int, why: str) -> None:
    _machine(monkeypatch, affinity, quota, busy=0.0)
    chosen = threads.configure_threads({})
    assert (chosen.count, chosen.why) == (expected, why)
    assert torch.get_num_threads() == expected
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("affinity", "quota", "busy", "expected"), [
    (2, None, 1.3, 1),  # 2 - round(1.3)
    (2, None, 0.4, 2),  # less than half a core busy: all cores
    (2, None, 5.0, 1),  # a load above the cores: at least one
    (16, None, 5.6, 10),
    (16, (400000, 100000), 5.6, 4),  # 10 idle cores, but a quota of 4 CPUs
    (16, (400000, 100000), 14.0, 2),
])
def test_the_default_follows_the_load_at_the_start(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], affinity: int,
        quota: tuple[int, int] | None, busy: float, expected: int) -> None:
    """One thread per idle core of those this process may use, at least one; no warning:
    the count already leaves the busy cores to the other work."""
    _machine(monkeypatch, affinity, quota, busy=busy)
    chosen = threads.configure_threads({})
    assert chosen.count == torch.get_num_threads() == expected
    assert chosen.why.startswith(f"default: {min(busy, affinity):.1f} of {affinity} cores busy "
                                 "with other work, ")
    assert capsys.readouterr().err == ""


def test_the_why_names_the_load_and_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, 2, None, busy=1.3)
    assert threads.load_following(1.3) == (
        1, "default: 1.3 of 2 cores busy with other work, 2 cores in the CPU affinity, "
           "no cgroup CPU quota", 2, 2)
    assert threads.Threads(1, "x", busy=1.3, cores=2, default=2).messages() == []


def test_the_users_choice_wins(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, 2, None, busy=9.0)
    assert threads.configure_threads({"SYNLM_THREADS": "3"})[:2] == (3, "SYNLM_THREADS=3")
    assert torch.get_num_threads() == 3
    torch.set_num_threads(2)
    assert threads.configure_threads({"OMP_NUM_THREADS": "4"})[:2] == (2, "OMP_NUM_THREADS=4")
    assert capsys.readouterr().err == ""  # nothing measured, nothing to warn of
    with pytest.raises(ValueError, match=r"^SYNLM_THREADS='two': expected a whole number"):
        threads.configure_threads({"SYNLM_THREADS": "two"})


def test_a_resume_goes_on_with_the_recorded_count(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The checkpoint's count, whatever the cores now, with a note when it is more than
    they are; a user's choice stays, with a note when it differs."""
    _machine(monkeypatch, 4, None, busy=0.0)
    resumed = threads.configure_threads({}).resume(2)
    assert resumed[:2] == (2, "recorded in the checkpoint") and torch.get_num_threads() == 2
    assert threads.configure_threads({}).resume(None).count == 4  # an older checkpoint
    resumed.report()
    assert capsys.readouterr().err == ""
    _machine(monkeypatch, 4, (100000, 100000), busy=3.0)
    resumed = threads.configure_threads({}, warn=False).resume(2)
    assert resumed.count == torch.get_num_threads() == 2
    resumed.report()
    assert capsys.readouterr().err.splitlines() == [
        "synlm: the checkpoint's run used 2 threads, more than the 1 this process may use "
        "here; it goes on with them to continue exactly as it ran (SYNLM_THREADS=1 is "
        "faster, its numbers may differ slightly)",
        "synlm: warning: 3.0 of 4 cores look busy with other work; this run uses 2 threads "
        "anyway, as its checkpoint recorded, to continue exactly. SYNLM_THREADS=N chooses N "
        "(SYNLM_THREADS=1, one per idle core, waits less on the other work)"]
    chosen = threads.configure_threads({"SYNLM_THREADS": "3"}).resume(2)
    assert chosen.count == torch.get_num_threads() == 3
    chosen.report()
    assert capsys.readouterr().err.splitlines() == [
        "synlm: SYNLM_THREADS=3 gives 3 threads, the checkpoint's run used 2: it may not "
        "continue exactly as it ran (without SYNLM_THREADS it goes on with 2)"]
    threads.configure_threads({"SYNLM_THREADS": "2"}).resume(2).report()
    assert capsys.readouterr().err == ""


def test_a_busy_process_is_seen_in_the_cpu_times() -> None:
    """/proc/stat's busy time grows by about one core's worth while a process spins."""
    import subprocess
    import sys
    import time

    if threads._cpu_times() is None:
        pytest.skip("no /proc/stat on this system")  # macOS, Windows: the load average only
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before, start = threads._cpu_times(), time.monotonic()
        time.sleep(0.5)
        after, elapsed = threads._cpu_times(), time.monotonic() - start
    finally:
        spin.kill()
    ticks = (after[1] - before[1]) / threads.affinity_cores() / elapsed  # jiffies a core-second
    assert (after[0] - before[0]) / ticks / elapsed >= 0.8  # at least the spinning core


def test_the_cpu_times_are_those_of_the_cores_this_process_may_use(tmp_path: Path) -> None:
    """A cpuset of CPUs 2 and 3 reads their lines only: two busy cores of eight are its
    whole share, not a quarter of the machine's."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  500 0 100 1400 0 0 0 0 0 0\n"
                    "cpu0 0 0 0 350 0 0 0 0 0 0\ncpu1 0 0 0 350 0 0 0 0 0 0\n"
                    "cpu2 250 0 50 40 10 0 0 0 0 0\ncpu3 200 50 50 50 0 0 0 0 0 0\n"
                    "cpu10 0 0 0 350 0 0 0 0 0 0\nintr 1 2 3\n")
    assert threads._cpu_times(None, stat) == (600, 2000)  # user + system, all idle lines
    assert threads._cpu_times({2, 3}, stat) == (600, 700)  # nice is busy, iowait idle
    assert threads._cpu_times({1}, stat) == (0, 350)
    assert threads._cpu_times({7}, stat) is None  # no line: no measure
    assert threads._cpu_times(None, tmp_path / "none") is None


def _openmp_spin_count(**env: str) -> str:
    """GOMP_SPINCOUNT as torch's OpenMP runtime reports it (OMP_DISPLAY_ENV) after
    ``synlm --version`` ran in the same process: 0 when waiting threads sleep at once."""
    import os
    import subprocess
    import sys

    code = ("import sys; from synlm.cli import main; main(['--version']); import torch; "
            "torch.ones(8).sum()")
    base = {k: v for k, v in os.environ.items() if k != threads.WAIT_POLICY_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**base, "OMP_DISPLAY_ENV": "VERBOSE", **env}, check=True)
    return next(line.split("=")[1].strip(" '") for line in out.stderr.splitlines()
                if line.strip().startswith("GOMP_SPINCOUNT"))


def test_synlm_makes_waiting_threads_sleep_at_once_unless_the_user_chose() -> None:
    assert _openmp_spin_count() == "0"
    assert _openmp_spin_count(OMP_WAIT_POLICY="ACTIVE") != "0"  # the user's choice stays


def test_synlm_asks_mkl_for_the_same_sums_whatever_the_thread_count_unless_the_user_chose(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from synlm.cli import main

    monkeypatch.setenv(threads.SUMS_ENV, "")  # restored after the test, whatever main sets
    monkeypatch.delenv(threads.SUMS_ENV)
    assert main(["--version"]) == 0 and os.environ[threads.SUMS_ENV] == "AUTO,STRICT"
    chosen = {threads.SUMS_ENV: "COMPATIBLE"}
    assert threads.sum_alike(chosen) == "COMPATIBLE" and chosen == {threads.SUMS_ENV: "COMPATIBLE"}


def test_wait_passively_leaves_a_loaded_torch_and_a_chosen_policy_alone() -> None:
    environ: dict[str, str] = {}
    assert threads.wait_passively(environ) is None and environ == {}  # torch is loaded here
    chosen = {threads.WAIT_POLICY_ENV: "ACTIVE"}
    assert threads.wait_passively(chosen) == "ACTIVE"


#: The quickstart (configs/quickstart.yaml at its own size) trained for ``STEPS`` steps with
#: each thread count in turn; prints each count's losses, the count torch ran them with and
#: a digest of the trained weights' bytes.
QUICKSTART_LOSSES = """
import hashlib, json, sys, tempfile
import lightning.pytorch as pl
import torch
from synlm.lightning_cli import build_run

class Losses(pl.Callback):
    def __init__(self):
        self.losses, self.threads = [], set()
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].item())
        self.threads.add(torch.get_num_threads())

runs = {}
for count in json.loads(sys.argv[2]):
    torch.set_num_threads(count)
    with tempfile.TemporaryDirectory() as root:
        trainer, model, data = build_run([
            "--config", "configs/quickstart.yaml", "--trainer.max_epochs=1",
            f"--trainer.limit_train_batches={sys.argv[1]}", "--trainer.limit_val_batches=0",
            "--trainer.enable_progress_bar=false", "--trainer.logger=false",
            "--trainer.enable_checkpointing=false", "--trainer.enable_model_summary=false",
            f"--trainer.default_root_dir={root}"])
        losses = Losses()
        trainer.callbacks.append(losses)
        trainer.fit(model, datamodule=data)
    weights = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        weights.update(name.encode() + tensor.numpy().tobytes())
    runs[count] = {"losses": losses.losses, "threads": sorted(losses.threads),
                   "weights": weights.hexdigest()}
print(json.dumps(runs))
"""


@pytest.mark.slow
def test_the_quickstarts_weights_are_bit_identical_with_one_and_two_threads() -> None:
    """The thread count follows the load, so it must not move the numbers: 30 steps of the
    quickstart at its own size (batches of 20 x 35 tokens, hidden size 192, where torch runs
    the GEMMs, dropout's draws and the embedding's backward on both threads; a tiny model
    stays under torch's parallel threshold and proves nothing) give the same weights, bit
    for bit, with one thread and with two, and the same losses to float32 rounding (a sum
    over more than 32,768 values to one number, as the ranking loss's, adds each thread's
    share apart, so its last bit may differ; its gradient does not)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", threads.THREADS_ENV)}
    env[threads.WAIT_POLICY_ENV] = "PASSIVE"  # as synlm runs: no spinning on a busy machine
    env[threads.SUMS_ENV] = threads.SUMS_ALIKE  # and MKL's sums alike whatever the count
    done = subprocess.run([sys.executable, "-c", QUICKSTART_LOSSES, "30", "[1, 2]"],
                          cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs["1"]["threads"] == [1] and runs["2"]["threads"] == [2]
    assert len(runs["1"]["losses"]) == 30
    assert runs["1"]["weights"] == runs["2"]["weights"]
    assert runs["2"]["losses"] == pytest.approx(runs["1"]["losses"], rel=1e-6, abs=0)
    assert len(set(runs["1"]["losses"])) == 30  # and it trains: every step's loss differs
