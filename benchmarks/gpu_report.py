"""The GPU report in one command: the kernel tests on the device, the kernels' self-check,
the throughput table in fp32 and bf16-mixed with peak memory, the kernel step benchmark
(PyTorch loop against the fused kernels) for ON-LSTM and PRPN, and the quickstart trained on
the device; one markdown report whose figures go into docs/performance.md.

    python benchmarks/gpu_report.py --out $OUT/gpu_report.md          # on a GPU, < 10 minutes
    python benchmarks/gpu_report.py --device cpu --small --out r.md    # the smoke run (CI)

Each step runs in its own process with its own time limit (``STEPS``, scaled by
``--budget``), so one that hangs or fails costs only its share: the report says, per step,
the command, its wall time, its exit status and its output (the tail when long). On a GPU
machine without the CLI's extra packages, prefix the command as ``../shared/gpu/prepare.sh``
prints. Needs ``SYNLM_DATA_DIR`` with PTB for the full-size throughput table.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
#: Lines of a step's stderr kept in the report.
TAIL = 60


@dataclass(frozen=True)
class Step:
    """One section of the report: a title, the command (full size, then the smoke run's) and
    its share of the time budget, in seconds."""

    title: str
    full: tuple[str, ...]
    small: tuple[str, ...]
    seconds: int


#: The smoke run's corpus: 600 synthetic training sentences instead of 4000 (which every
#: row would build), enough for the warm-up and timed batch of the largest row, B64 T35.
SMALL_CORPUS = tuple(f"--override=--data.corpus.init_args.{split}={n}"
                     for split, n in (("n_train", 600), ("n_valid", 20), ("n_test", 20)))


def steps(device: str, runs: str) -> list[Step]:
    py, bench = sys.executable, str(ROOT / "benchmarks")
    tests = ("tests/test_kernels_on_lstm.py", "tests/test_kernels_prpn.py",
             "tests/test_kernel_self_check.py")
    pytest = (py, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    cli = (py, "-c", "import sys; from synlm.cli import main; sys.exit(main())")
    accelerator = "gpu" if device.startswith("cuda") else "cpu"
    return [
        Step("Kernel tests on the device", (*pytest, *tests), (*pytest, tests[-1]), 120),
        Step("Throughput table, fp32 and bf16-mixed, peak memory",
             (py, f"{bench}/throughput.py", "--table", "--device", device),
             (py, f"{bench}/throughput.py", "--table", "--small", "--steps", "1", "--warmup",
              "1", "--device", device, "--json", *SMALL_CORPUS), 210),
        Step("ON-LSTM step: PyTorch loop vs fused kernels",
             (py, f"{bench}/kernel_step.py", "--backbone", "onlstm", "--device", device),
             (py, f"{bench}/kernel_step.py", "--backbone", "onlstm", "--device", device,
              "--batch", "2", "--bptt", "4", "--input", "8", "--hidden", "12", "--chunk", "4",
              "--repeats", "1"), 60),
        Step("PRPN step: PyTorch loop vs fused kernels",
             (py, f"{bench}/kernel_step.py", "--backbone", "prpn", "--device", device,
              "--batch", "64", "--bptt", "35", "--input", "800", "--hidden", "1200",
              "--layers", "2"),
             (py, f"{bench}/kernel_step.py", "--backbone", "prpn", "--device", device,
              "--batch", "2", "--bptt", "4", "--input", "8", "--hidden", "12", "--layers", "2",
              "--repeats", "1"), 60),
        Step("Quickstart on the device",
             (*cli, "fit", "--config", "configs/quickstart.yaml",
              f"--trainer.accelerator={accelerator}", "--trainer.enable_progress_bar=false",
              f"--trainer.default_root_dir={runs}"),
             (*cli, "fit", "--config", "configs/quickstart.yaml",
              f"--trainer.accelerator={accelerator}", "--trainer.enable_progress_bar=false",
              "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
              "--trainer.limit_val_batches=1",
              f"--trainer.default_root_dir={runs}"), 90),
    ]


def describe(device: str) -> str:
    parts = [f"python {platform.python_version()}", f"torch {torch.__version__}"]
    try:
        import triton
        parts.append(f"triton {triton.__version__}")
    except ImportError:
        parts.append("no triton")
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        parts.insert(0, f"{torch.cuda.get_device_name(index)} (CUDA {torch.version.cuda})")
    else:
        parts.insert(0, f"{platform.processor() or platform.machine()}, "
                        f"{os.cpu_count()} cores")
    return ", ".join(parts)


def run_step(step: Step, small: bool, budget: float, env: dict[str, str]) -> str:
    """The step's section: command, wall time, exit status, its stdout (the result) and the
    last ``TAIL`` lines of its stderr (logs and tracebacks)."""
    command = step.small if small else step.full
    limit = step.seconds * budget
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=limit)
        status, out, err = f"exit {done.returncode}", done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        status = f"stopped after its {limit:.0f} s"
        out, err = (part.decode() if isinstance(part, bytes) else (part or "")
                    for part in (expired.stdout, expired.stderr))
    elapsed = time.perf_counter() - start
    shown = " ".join(c if " " not in c else repr(c) for c in command)
    section = [f"## {step.title}", "", f"`{shown.replace(str(ROOT) + '/', '')}`: {status}, "
               f"{elapsed:.1f} s", ""]
    if out.strip():
        section += ["```", out.strip(), "```", ""]
    lines = [line for line in err.splitlines() if line.strip()]
    if lines:
        section += [f"stderr, the last {min(TAIL, len(lines))} of {len(lines)} lines:", "",
                    "```", *lines[-TAIL:], "```", ""]
    return "\n".join(section)


def last_validation(runs: Path) -> str:
    """The last validation row of the newest ``metrics.csv`` under ``runs``, as markdown."""
    files = sorted(runs.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    if not files:
        return "no metrics.csv was written\n"
    rows = [r for r in csv.DictReader(files[-1].open()) if r.get("val/ppl")]
    if not rows:
        return f"{files[-1]}: no validation row\n"
    keys = [k for k in ("epoch", "step", "val/ppl", "val/uf1") if rows[-1].get(k)]
    return (f"last validation ({files[-1]}): "
            + ", ".join(f"{k} {rows[-1][k]}" for k in keys) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="the smoke run: tiny sizes")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="scales every step's time limit (1: 540 s in all)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                      "gpu_report.md"))
    parser.add_argument("--runs", default="runs/gpu_report", help="the quickstart's run folder")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if not args.device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"  # kernels run interpreted on the CPU
    sections = [f"# GPU report ({'smoke run' if args.small else 'full'})", "",
                f"device: {describe(args.device)}", ""]
    out = Path(args.out)
    partial = out.with_name(out.name + ".partial")  # what a cut-off run leaves, so named
    for step in steps(args.device, args.runs):
        section = run_step(step, args.small, args.budget, env)
        print(section.splitlines()[2], flush=True)  # the command, its status and time
        if step.title.startswith("Quickstart"):
            section += last_validation(Path(args.runs))
        sections.append(section)
        partial.write_text("\n".join(sections), encoding="utf-8")
    partial.replace(out)
    print(f"report: {out}")


if __name__ == "__main__":
    main()
