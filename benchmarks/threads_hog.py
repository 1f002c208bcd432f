"""Benchmark: the quickstart as the README writes it against the same with
``OMP_NUM_THREADS=1``, each beside a CPU hog (processes spinning on ``--hogs`` cores), on
this machine; the ratio of their wall times (as written / one thread) is what synlm's
load-independent default costs beside other work (synlm.runtime.threads takes one thread per
core the process may use and warns on a busy machine, where ``SYNLM_THREADS=1`` is the
choice the warning names).

    python benchmarks/threads_hog.py [--hogs 1] [--epochs 2] [--batches N] [--all-cores] [--json]

``--all-cores`` also times the quickstart with ``SYNLM_THREADS`` set to every core, torch's
own default before synlm chose: what a newcomer's run cost beside other work.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=1, help="cores kept busy beside the runs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=None,
                        help="training and validation batches per epoch (default: all)")
    parser.add_argument("--all-cores", action="store_true",
                        help="also time SYNLM_THREADS=<every core> (the old default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "SYNLM_THREADS")}
    base["WANDB_MODE"] = "offline"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    try:
        time.sleep(2.0)  # the hogs show in the CPU times (and start to in the load average)
        with tempfile.TemporaryDirectory() as tmp:
            as_written = quickstart_seconds(base, args.epochs, f"{tmp}/a", args.batches)
            one_thread = quickstart_seconds({**base, "OMP_NUM_THREADS": "1"}, args.epochs,
                                            f"{tmp}/b", args.batches)
            every_core = quickstart_seconds({**base, "SYNLM_THREADS": str(os.cpu_count())},
                                            args.epochs, f"{tmp}/c", args.batches
                                            ) if args.all_cores else None
    finally:
        for hog in hogs:
            hog.kill()
    row = {"cores": os.cpu_count(), "hogs": args.hogs, "epochs": args.epochs,
           "as_written_s": round(as_written, 1), "omp_1_s": round(one_thread, 1),
           "ratio": round(as_written / one_thread, 3)}
    if every_core is not None:
        row["all_cores_s"] = round(every_core, 1)
    print(json.dumps(row) if args.json else
          f"quickstart, {args.epochs} epochs, {args.hogs} hog(s) on {os.cpu_count()} cores: "
          f"as written {as_written:.1f} s, OMP_NUM_THREADS=1 {one_thread:.1f} s, "
          f"ratio {as_written / one_thread:.2f}"
          + ("" if every_core is None else f"; every core (the old default) {every_core:.1f} s"))


if __name__ == "__main__":
    main()
