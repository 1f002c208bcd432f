"""The test session stops at the first SIGTERM (tests/conftest.py), also while a test is
inside a Lightning fit, whose own handler would otherwise take the signal for a
preemption and let the session run on, and also after an earlier test replaced the
handler: a real pytest process is signalled once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

WAITS = {
    # a process of the test's own, which must not outlive the session
    "sleep": """\
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (started.parent / "child").write_text(str(child.pid))
    started.write_text("1")
    time.sleep(60)
""",
    "fit": """\
    import lightning.pytorch as pl
    from lightning.pytorch.demos.boring_classes import BoringModel

    class Stall(pl.Callback):
        def on_train_batch_end(self, *args):
            started.write_text("1")
            time.sleep(60)

    pl.Trainer(max_steps=5, callbacks=[Stall()], logger=False, enable_checkpointing=False,
               enable_progress_bar=False, enable_model_summary=False).fit(BoringModel())
""",
}


def gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has ended (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("where", list(WAITS))
def test_the_first_sigterm_ends_the_session(where: str, tmp_path: Path) -> None:
    started, later = tmp_path / "started", tmp_path / "later_test_ran"
    (tmp_path / "test_waits.py").write_text(
        "import signal\nimport subprocess\nimport sys\nimport time\nfrom pathlib import Path"
        f"\n\nstarted = Path({str(started)!r})\n\n\n"
        # what a test or library may leave behind: here the worst, SIGTERM ignored
        "def test_replaces_the_handler():\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\n\n"
        f"def test_waits():\n{WAITS[where]}\n\n"
        f"def test_later():\n    Path({str(later)!r}).write_text('1')\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_waits.py")],
        env={**os.environ, "PYTHONPATH": str(TESTS)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        output, _ = process.communicate(timeout=10)
    finally:  # a session that ignored the SIGTERM does not run on
        process.kill()
    assert time.monotonic() - sent < 10, output
    assert process.returncode == 128 + signal.SIGTERM, output
    assert "SIGTERM: the test session stops" in output
    assert "1 passed" in output  # pytest's summary: the first test's
    assert not later.exists()  # the session stopped: the next test did not run
    if where == "sleep":
        assert gone(int((tmp_path / "child").read_text()), 5)
