"""Benchmark: the quickstart on a shared machine. One run times the quickstart as the README
writes it on a quiet machine, then beside ``--hogs`` busy processes (each spinning on a
core) four ways: as written (synlm's defaults: one thread per idle core, waiting threads
sleep at once), with one thread per core whatever the load (``SYNLM_THREADS=<cores>``),
that fixed count with OpenMP's own wait policy (spin a while first: ``GOMP_SPINCOUNT=
300000``, what torch does without synlm) and with one thread (``SYNLM_THREADS=1``). Each
busy time is given as a ratio to the quiet run of the same invocation (goal for the
defaults: at most 2), with the thread count the run chose (its summary's ``threads`` line)
and the one-minute load average at its start.

    python benchmarks/threads_hog.py [--hogs 2] [--epochs 2] [--batches N] [--rounds 1]
                                     [--variants as_written fixed_cores ...] [--json]

An untimed quickstart runs first (the first start after a while reads its files from disk:
30 s against 14 s warm), and each round's quiet run waits up to ``--settle`` seconds for the
one-minute load average to fall below a quarter of the cores after the previous round's busy
processes, so that its default thread count sees a quiet machine. The quiet run is only as
quiet as the machine: run it with nothing else on the cores.
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
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from synlm.cli import main; sys.exit(main())"
CORES = str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1)
#: The ways the quickstart is timed beside the busy processes: environment changes.
BUSY_VARIANTS = {
    "as_written": {},
    "fixed_cores": {"SYNLM_THREADS": CORES},  # one thread per core whatever the load
    "openmp_spin": {"SYNLM_THREADS": CORES, "GOMP_SPINCOUNT": "300000"},  # spin, then sleep
    "one_thread": {"SYNLM_THREADS": "1"},
}


class Timed(NamedTuple):
    seconds: float
    threads: str  # the summary's threads line: the count and why
    load: float  # the one-minute load average at the start


def quickstart_seconds(env: dict[str, str], epochs: int, root: str,
                       batches: int | None = None) -> Timed:
    command = [sys.executable, "-c", CLI, "fit", "--config", "configs/quickstart.yaml",
               f"--trainer.max_epochs={epochs}", "--trainer.enable_progress_bar=false",
               f"--trainer.default_root_dir={root}"]
    if batches is not None:  # a shorter epoch (the smoke run of the tests)
        command += [f"--trainer.limit_train_batches={batches}",
                    f"--trainer.limit_val_batches={batches}"]
    load, start = os.getloadavg()[0], time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    threads = next((line.split(None, 1)[1] for line in done.stdout.splitlines()
                    if line.startswith("threads ")), "?")
    return Timed(seconds, threads, load)


def busy_seconds(hogs: int, run: dict[str, dict[str, str]], time_one) -> dict[str, Timed]:
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


def settle(seconds: float) -> None:
    """Wait up to ``seconds`` for the one-minute load average to fall below a quarter of the
    cores (it lags the busy processes of a previous round by about a minute)."""
    end = time.monotonic() + seconds
    while os.getloadavg()[0] >= int(CORES) / 4 and time.monotonic() < end:
        time.sleep(5.0)


def one_round(args: argparse.Namespace, time_one) -> dict:
    """The quiet run, then each variant beside the busy processes: one JSON row."""
    settle(args.settle)
    quiet = time_one("quiet", {})
    busy = busy_seconds(args.hogs, {name: BUSY_VARIANTS[name] for name in args.variants},
                        time_one)
    runs = {"quiet": quiet, **busy}
    return {"cores": int(CORES), "hogs": args.hogs, "epochs": args.epochs,
            "batches": args.batches,
            **{f"{name}_s": round(run.seconds, 1) for name, run in runs.items()},
            **{f"{name}_ratio": round(run.seconds / quiet.seconds, 2)
               for name, run in busy.items()},
            **{f"{name}_threads": run.threads for name, run in runs.items()},
            **{f"{name}_load": round(run.load, 2) for name, run in runs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=None,
                        help="training and validation batches per epoch (default: all)")
    parser.add_argument("--variants", nargs="+", choices=list(BUSY_VARIANTS),
                        default=list(BUSY_VARIANTS), help="the busy runs (default: all)")
    parser.add_argument("--rounds", type=int, default=1, help="the whole sequence, repeated")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds the quiet run waits at most for a quiet load average")
    parser.add_argument("--json", action="store_true", help="one JSON line per round")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "SYNLM_THREADS", "OMP_WAIT_POLICY",
        "GOMP_SPINCOUNT")}
    base["WANDB_MODE"] = "offline"
    with tempfile.TemporaryDirectory() as tmp:
        def time_one(name: str, env: dict[str, str]) -> Timed:
            return quickstart_seconds({**base, **env}, args.epochs, f"{tmp}/{name}",
                                      args.batches)

        time_one("warm_up", {})
        rows = [one_round(args, time_one) for _ in range(args.rounds)]
    if args.json:
        print("\n".join(json.dumps(row) for row in rows))
        return
    print(f"quickstart, {args.epochs} epoch(s), on {CORES} cores; "
          f"beside {args.hogs} busy process(es) but the quiet run:")
    for number, row in enumerate(rows, 1):
        print(f"round {number}")
        for name in ("quiet", *args.variants):
            ratio = row.get(f"{name}_ratio", 1.0)
            print(f"  {name}: {row[f'{name}_s']:.1f} s ({ratio:.2f}x), load "
                  f"{row[f'{name}_load']:.2f} at the start, threads {row[f'{name}_threads']}")

if __name__ == "__main__":
    main()
