"""synlm.runtime.threads: one torch thread per core this process may use (CPU affinity capped by the
cgroup CPU quota), whatever the load, unless the user chose; a busy machine is one warning
line; a continued fit goes on with its checkpoint's count; a bad choice is one line."""

from __future__ import annotations

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
    (16, None, 16, "default: 16 cores in the CPU affinity, no cgroup CPU quota"),
    (16, (150000, 100000), 2,
     "default: cgroup CPU quota 150000/100000 = 1.5 CPUs, 16 cores in the CPU affinity"),
    (2, (400000, 100000), 2, "default: 2 cores in the CPU affinity, cgroup CPU quota 4 CPUs"),
    (8, (50000, 100000), 1,
     "default: cgroup CPU quota 50000/100000 = 0.5 CPUs, 8 cores in the CPU affinity"),
    (1, None, 1, "default: 1 core in the CPU affinity, no cgroup CPU quota"),
])
def test_the_default_is_the_cores_this_process_may_use(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], affinity: int,
        quota: tuple[int, int] | None, expected: int, why: str) -> None:
    _machine(monkeypatch, affinity, quota, busy=0.0)
    chosen = threads.configure_threads({})
    assert (chosen.count, chosen.why) == (expected, why)
    assert torch.get_num_threads() == expected
    assert capsys.readouterr().err == ""


def test_a_busy_machine_warns_and_keeps_the_count(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Two cores, 1.3 of them busy: still two threads, and one line on stderr says so."""
    _machine(monkeypatch, 2, None, busy=1.3)
    assert threads.configure_threads({})[:2] == (2, "default: 2 cores in the CPU affinity, "
                                                    "no cgroup CPU quota")
    assert torch.get_num_threads() == 2
    assert capsys.readouterr().err.splitlines() == [
        "synlm: warning: 1.3 of 2 cores look busy with other work; this run uses 2 threads "
        "anyway, so that its numbers do not depend on the load. SYNLM_THREADS=N chooses N "
        "(SYNLM_THREADS=1, one per idle core, waits less on the other work)"]
    _machine(monkeypatch, 2, None, busy=0.4)  # less than a core: no warning
    assert threads.configure_threads({}).count == 2
    threads.configure_threads({}, warn=False)
    _machine(monkeypatch, 2, None, busy=1.3)
    assert threads.configure_threads({}, warn=False).count == 2  # a fit reports later
    assert capsys.readouterr().err == ""


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


def test_wait_passively_leaves_a_loaded_torch_and_a_chosen_policy_alone() -> None:
    environ: dict[str, str] = {}
    assert threads.wait_passively(environ) is None and environ == {}  # torch is loaded here
    chosen = {threads.WAIT_POLICY_ENV: "ACTIVE"}
    assert threads.wait_passively(chosen) == "ACTIVE"
