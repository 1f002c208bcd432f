"""Benchmark: the quickstart on a shared machine. One run times the quickstart as the README
writes it on a quiet machine, then beside ``--hogs`` busy processes (each spinning on a
core) three ways: as written (synlm's defaults: one thread per core, waiting threads sleep at
once), with OpenMP's own wait policy (spin a while first: ``GOMP_SPINCOUNT=300000``, what
torch does without synlm) and with one thread (``SYNLM_THREADS=1``). Each busy time is given
as a ratio to the quiet run of the same invocation (goal for the defaults: at most 2).

    python benchmarks/threads_hog.py [--hogs 2] [--epochs 2] [--batches N] [--json]

The quiet run is only as quiet as the machine: run it with nothing else on the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from synlm.cli import main; sys.exit(main())"
#: The ways the quickstart is timed beside the busy processes: environment changes.
BUSY_VARIANTS = {
    "as_written": {},
    "openmp_spin": {"GOMP_SPINCOUNT": "300000"},  # OpenMP's default: spin, then sleep
    "one_thread": {"SYNLM_THREADS": "1"},
}


def quickstart_seconds(env: dict[str, str], epochs: int, root: str,
                       batches: int | None = None) -> float:
    command = [sys.executable, "-c", CLI, "fit", "--config", "configs/quickstart.yaml",
               f"--trainer.max_epochs={epochs}", "--trainer.enable_progress_bar=false",
               f"--trainer.default_root_dir={root}"]
    if batches is not None:  # a shorter epoch (the smoke run of the tests)
        command += [f"--trainer.limit_train_batches={batches}",
                    f"--trainer.limit_val_batches={batches}"]
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def busy_seconds(hogs: int, run: dict[str, dict[str, str]], time_one) -> dict[str, float]:
    """Each of ``run``'s variants timed by ``time_one(name, env)`` beside ``hogs`` processes
    spinning on a core each."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(hogs)]
    try:
        time.sleep(2.0)  # the hogs show in the CPU times (and start to in the load average)
        return {name: time_one(name, env) for name, env in run.items()}
    finally:
        for hog in spinning:
            hog.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=None,
                        help="training and validation batches per epoch (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "SYNLM_THREADS", "OMP_WAIT_POLICY",
        "GOMP_SPINCOUNT")}
    base["WANDB_MODE"] = "offline"
    with tempfile.TemporaryDirectory() as tmp:
        def time_one(name: str, env: dict[str, str]) -> float:
            return quickstart_seconds({**base, **env}, args.epochs, f"{tmp}/{name}",
                                      args.batches)

        quiet = time_one("quiet", {})
        busy = busy_seconds(args.hogs, BUSY_VARIANTS, time_one)
    row = {"cores": os.cpu_count(), "hogs": args.hogs, "epochs": args.epochs,
           "batches": args.batches, "quiet_s": round(quiet, 1),
           **{f"{name}_s": round(seconds, 1) for name, seconds in busy.items()},
           **{f"{name}_ratio": round(seconds / quiet, 2) for name, seconds in busy.items()}}
    if args.json:
        print(json.dumps(row))
        return
    print(f"quickstart, {args.epochs} epochs, on {os.cpu_count()} cores: quiet {quiet:.1f} s; "
          f"beside {args.hogs} busy process(es): "
          + ", ".join(f"{name} {seconds:.1f} s ({seconds / quiet:.2f}x)"
                      for name, seconds in busy.items()))


if __name__ == "__main__":
    main()
