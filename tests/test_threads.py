"""synlm.threads: one torch thread per idle core unless the user chose, and the choice is
one line when it is bad."""

from __future__ import annotations

import pytest
import torch

from synlm import threads


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("cores", "busy", "expected"), [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 5.0, 1), (16, 3.2, 13),
    (16, 0.0, 16), (1, 0.0, 1)])
def test_one_thread_per_idle_core(cores: int, busy: float, expected: int) -> None:
    assert threads.pick_threads(cores, busy) == expected


def test_a_loaded_machine_gets_fewer_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores, one kept busy by another process: one thread, and the reason says so."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda cores: 1.3)
    assert threads.configure_threads({}) == (1, "1.3 of 2 cores busy")
    assert torch.get_num_threads() == 1
    monkeypatch.setattr(threads, "busy_cores", lambda cores: 0.1)
    assert threads.configure_threads({})[0] == 2 == torch.get_num_threads()


def test_the_users_choice_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "busy_cores", lambda cores: 9.0)
    assert threads.configure_threads({"SYNLM_THREADS": "3"}) == (3, "SYNLM_THREADS=3")
    assert torch.get_num_threads() == 3
    torch.set_num_threads(2)
    assert threads.configure_threads({"OMP_NUM_THREADS": "4"}) == (2, "OMP_NUM_THREADS=4")
    with pytest.raises(ValueError, match=r"^SYNLM_THREADS='two': expected a whole number"):
        threads.configure_threads({"SYNLM_THREADS": "two"})


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
    ticks = (after[1] - before[1]) / threads.usable_cores() / elapsed  # jiffies a core-second
    assert (after[0] - before[0]) / ticks / elapsed >= 0.8  # at least the spinning core
