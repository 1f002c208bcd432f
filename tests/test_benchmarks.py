"""The benchmarks run end to end on small models on the CPU: throughput.py's table (inside
the GPU report's smoke run) with each ratio the row's throughput over the row it names, the
scoring, threads and GPU-report scripts. Speed itself is never asserted here
(docs/results.md has the measured numbers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "throughput.py"


@pytest.mark.slow
def test_the_scoring_benchmark_times_scorer_and_forward_on_the_same_tokens(tmp_path) -> None:
    """benchmarks/tse_speed.py on a tiny untrained model and one BLiMP pair a paradigm: the
    ratio is the forward passes' time over the scorer's, for the same token count."""
    from conftest import tiny_palm_config
    from staged import staged

    data = staged("blimp", "BLiMP.zip").parent.parent
    out = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("tse_speed.py")), "--config",
         str(tiny_palm_config(tmp_path)), "--pairs", "1", "--repeats", "1", "--threads", "1"],
        capture_output=True, text=True, timeout=600, check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "SYNLM_DATA_DIR": str(data)}).stdout
    row = json.loads(out.strip().splitlines()[-1])
    assert row["sentences"] == 2 * 67 and row["tokens"] > row["sentences"]
    assert row["ratio"] == pytest.approx(row["scorer_tokens_per_s"] / row["forward_tokens_per_s"],
                                         rel=0.01)


@pytest.mark.slow
def test_the_gpu_report_runs_every_step_and_writes_one_markdown_file(tmp_path) -> None:
    """benchmarks/gpu_report.py's smoke run on the CPU: a section per step, each with its
    command and exit status 0, both kernel steps, the quickstart and the structure models'
    steps inside; and its speed tables (throughput.py's and the report's own rows, printed
    as JSON rows in the smoke run) time every row, each ratio the row's throughput over the
    row it names."""
    report = tmp_path / "reports" / "report.md"  # a folder the report makes
    subprocess.run([sys.executable, str(SCRIPT.with_name("gpu_report.py")), "--device", "cpu",
                    "--small", "--out", str(report), "--runs", str(tmp_path / "runs")],
                   capture_output=True, text=True, timeout=900, check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    text = report.read_text()
    assert text.count("## ") == 9 and text.count(": exit 0,") == 9, text
    assert "PyTorch loop:" in text and "passed" in text
    assert "last validation" in text and "val/ppl" in text
    # the structure models: each policy in fp32 and bf16-mixed beside the plain LM's; the
    # RNNG's search at both settings; each action Transformer's beside the RNNG's
    for policy in ("PLM", "PLM-mask", "TG"):
        assert f"| {policy} (unfused) | " in text and f"| {policy} (unfused) bf16-mixed | " in text
        assert f"| 10/5/1 | {policy} | " in text
    assert "| Transformer LM bf16-mixed | " in text
    assert "| 10/5/1 | synlm | " in text and "| 100/10/1 | synlm | " in text
    assert not report.with_name("report.md.partial").exists()

    rows = {r["name"]: r for r in map(json.loads, (line for line in text.splitlines()
                                                   if line.startswith("{")))}
    assert list(rows) == ["plain LSTM LM, B20 T70", "AWD-LSTM", "ON-LSTM", "ONLSTM-SYD",
                          "ONLSTM-SYD, PyTorch loop", "plain LSTM LM, B64 T35", "PRPN",
                          "PRPN, PyTorch loop", "PRPN-SYD", "AWD-LSTM bf16", "ONLSTM-SYD bf16",
                          "PRPN bf16", "plain LSTM LM, PaLM sizes", "PaLM-U", "PaLM-S",
                          "plain LSTM LM, DM-LSTM sizes", "DM-LSTM phase 2",
                          "Transformer, bare loop", "Transformer", "Transformer bf16",
                          "GPT-2, bare loop", "GPT-2", "GPT-2 bf16"]
    for row in rows.values():
        assert row["device"].startswith("cpu, 1 threads") and row["tokens_per_s"] > 0
        if row["against"] is not None:
            against = rows[row["against"]]["tokens_per_s"]
            assert row["ratio"] == pytest.approx(row["tokens_per_s"] / against)
    assert {r["precision"] for n, r in rows.items() if n.endswith("bf16")} == {"bf16-mixed"}
    assert rows["PRPN"]["against"] == "plain LSTM LM, B64 T35"
    assert rows["GPT-2"]["backbone"] == "GPT2" and rows["GPT-2"]["against"] == "GPT-2, bare loop"


@pytest.mark.slow
def test_the_threads_benchmark_times_the_quiet_run_and_each_busy_variant() -> None:
    """benchmarks/threads_hog.py with one short epoch: every run finishes and each ratio is
    its busy time over the quiet one. (Its figures are in docs/training.md, not asserted.)"""
    out = subprocess.run([sys.executable, str(SCRIPT.with_name("threads_hog.py")), "--epochs",
                          "1", "--batches", "2", "--hogs", "1", "--settle", "0", "--json"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    assert row["hogs"] == 1 and row["quiet_s"] > 0
    quiet = row["quiet_s"]
    for name in ("as_written", "fixed_cores", "openmp_spin", "one_thread"):
        busy = row[f"{name}_s"]  # the times to 0.1 s, the ratio (of the exact ones) to 0.01
        assert (busy - 0.05) / (quiet + 0.05) - 0.005 <= row[f"{name}_ratio"] \
            <= (busy + 0.05) / (quiet - 0.05) + 0.005, name
    cores = row["cores"]
    assert row["fixed_cores_threads"] == f"{cores} (SYNLM_THREADS={cores})"
    assert row["one_thread_threads"] == "1 (SYNLM_THREADS=1)"
    assert row["as_written_threads"].split(" (default: ")[0].isdigit()  # the count it chose
