"""Benchmark: how long the ``synlm`` command takes to answer what needs no model (``--help``,
``--version``, ``ls``, an unknown command, a missing config file, ``fit --help``, a missing
checkpoint or run folder, ``best`` of a config with no run, an unknown suite, a wrong flag)
against a bare ``python -c pass`` on the same machine, and, for scale, what imports the
training stack (``synlm fit --help-all``). Each is the median of ``--repeat`` fresh
processes. (A file that is no checkpoint stands for one where a check must pass:
``benchmarks/startup.py``.)

    python benchmarks/startup.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from synlm.cli import entry_point; sys.argv[0] = 'synlm'; entry_point()"

#: what is timed: name -> the command's arguments (None: the bare interpreter)
COMMANDS: dict[str, list[str] | None] = {
    "python -c pass (baseline)": None,
    "synlm --version": ["--version"],
    "synlm --help": ["--help"],
    "synlm ls": ["ls"],
    "synlm fitt (unknown command)": ["fitt"],
    "synlm fit --config nope.yaml": ["fit", "--config", "nope.yaml"],
    "synlm fit --help": ["fit", "--help"],
    "synlm fit --ckpt_path nope": ["fit", "--config", "quickstart.yaml", "--ckpt_path", "nope"],
    "synlm test --ckpt_path nope": ["test", "--ckpt_path", "nope"],
    "synlm test --config quickstart.yaml --ckpt_path best (no run)": [
        "test", "--config", "quickstart.yaml", "--ckpt_path", "best",
        "--trainer.default_root_dir", "benchmarks/no_runs"],
    "synlm evaluate-syntax --ckpt_path nope": ["evaluate-syntax", "--ckpt_path", "nope"],
    "synlm evaluate-syntax --suites subordinationn": [
        "evaluate-syntax", "--ckpt_path", "benchmarks/startup.py", "--benchmark", "syntaxgym",
        "--suites", "subordinationn"],
    "synlm parse --ckpt_path nope": ["parse", "--ckpt_path", "nope", "--treebank", "nope"],
    "synlm generate --ckpt_path nope": ["generate", "--ckpt_path", "nope"],
    "synlm parse --bogus": ["parse", "--bogus"],
    "synlm generate --bogus": ["generate", "--bogus"],
    "synlm fit --trainer.max_epoch=3 (a mistyped flag)": [
        "fit", "--config", "quickstart.yaml", "--trainer.max_epoch=3"],
    "synlm test --trainer.limit_test_batchs=1 (a mistyped flag)": [
        "test", "--ckpt_path", "nope", "--trainer.limit_test_batchs=1"],
    "synlm fit --data.batch_size=0 (imports Lightning)": ["fit", "--config", "quickstart.yaml",
                                                          "--data.batch_size=0"],
    "synlm fit --help-all (imports Lightning)": ["fit", "--help-all"],
}


def seconds(args: list[str] | None, repeat: int) -> float:
    command = [sys.executable, "-c", "pass" if args is None else CLI, *(args or [])]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    measured = {name: seconds(command, args.repeat) for name, command in COMMANDS.items()}
    if args.json:
        print(json.dumps(measured))
        return
    baseline = measured["python -c pass (baseline)"]
    print(f"| command | seconds (median of {args.repeat}) | x python -c pass |")
    print("|---|---|---|")
    for name, value in measured.items():
        print(f"| `{name}` | {value:.2f} | {value / baseline:.1f} |")


if __name__ == "__main__":
    main()
