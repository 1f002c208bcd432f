"""The measurement scripts of docs/results.md (``benchmarks/*_budget.sh``,
``rnng_variants.sh``) run against a stand-in ``synlm`` that records each command and writes
what the real one would (a checkpoint, a JSON summary): every ``fit`` they issue parses with
synlm's own CLI (``--print_config``), seeds go to their own folders, a finished step is not
run again, and the last command tables every finished evaluation with ``--results``. The
scripts run for hours; this is what can be checked of them in seconds."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]

#: A ``synlm`` that logs its arguments as a JSON line and leaves what the scripts look for.
STAND_IN = r"""#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["SYNLM_STAND_IN_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
if args[0] == "fit":
    root = next(a.split("=", 1)[1] for a in args if a.startswith("--trainer.default_root_dir="))
    (Path(root) / "version_0" / "checkpoints").mkdir(parents=True, exist_ok=True)
    (Path(root) / "version_0" / "checkpoints" / "last.ckpt").write_text("")
elif args[0] == "evaluate-syntax":
    print(json.dumps({"headline": {}}))
elif args[0] == "test":
    print("test/joint_ppl 1.0")
"""


def run_script(tmp_path: Path, script: str, *args: str) -> list[list[str]]:
    """``benchmarks/<script>`` with ``args`` against the stand-in: the commands it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "synlm"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    log = tmp_path / "commands.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "SYNLM_STAND_IN_LOG": str(log)}
    subprocess.run(["bash", str(ROOT / "benchmarks" / script), *args], cwd=ROOT, env=env,
                   check=True, capture_output=True, text=True, timeout=120)
    return [json.loads(line) for line in log.read_text().splitlines()]


def fits_parse(commands: list[list[str]]) -> None:
    """Each ``fit`` command parses with synlm's CLI, run from the repository as the scripts
    are (the config files and every flag accepted); ``--model.init_from`` and ``--ckpt_path
    last``, checkpoints the stand-in did not write as Lightning would, are left out."""
    for command in commands:
        if command[0] != "fit":
            continue
        flags = [a for a in command if not a.startswith("--model.init_from=")]
        if "--ckpt_path" in flags:
            at = flags.index("--ckpt_path")
            del flags[at:at + 2]
        code = run_cli([*flags, "--print_config"])
        assert code == 0, shlex.join(command)


def run_folder(command: list[str]) -> str:
    """The run folder a ``fit`` writes or an ``evaluate-syntax`` scores."""
    if command[0] == "fit":
        return next(a for a in command if a.startswith("--trainer.default_root_dir=")
                    ).split("=", 1)[1]
    return command[command.index("--ckpt_path") + 1]


@pytest.mark.parametrize("seeds", ["", "1 2"])
def test_tse_budget_runs_each_seed_once_and_tables_them(tmp_path, monkeypatch, seeds) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "runs"
    commands = run_script(tmp_path, "tse_budget.sh", str(out), "8", "3", seeds)
    fits = [c for c in commands if c[0] == "fit"]
    folders = [out] if not seeds else [out / f"seed_{s}" for s in seeds.split()]
    assert len(fits) == 6 * len(folders)
    for folder, seed in zip(folders, seeds.split() or [None]):
        mine = [c for c in fits if f"--trainer.default_root_dir={folder}/awd_lstm" in c]
        assert len(mine) == 1
        assert (f"--seed_everything={seed}" in mine[0]) == (seed is not None)
        assert "--trainer.limit_train_batches=8" in mine[0]
    evaluations = [c for c in commands if c[0] == "evaluate-syntax" and "--results" not in c]
    assert len(evaluations) == 1 + 5 * len(folders)  # the untrained row, then each model
    assert all(c[c.index("--subset") + 1] == "3" for c in evaluations)
    each = ["awd_lstm", "onlstm", "onlstm_syd", "palm_s"]  # each scored as soon as trained
    order = [f"{c[0]} {Path(run_folder(c)).name}" for c in commands[1:-1]]
    assert order == len(folders) * [*(f"{step} {name}" for name in each
                                      for step in ("fit", "evaluate-syntax")),
                                    "fit dm_lstm_dep", "fit dm_lstm", "evaluate-syntax dm_lstm"]
    report = commands[-1]
    assert report[:2] == ["evaluate-syntax", "--results"]
    files = report[2:report.index("--label")]
    labels = report[report.index("--label") + 1:report.index("--report")]
    assert len(files) == len(labels) == 1 + 5 * len(folders)
    assert labels[0] == "AWD-LSTM" and labels[-1] == "untrained AWD-LSTM"
    assert labels.count("PaLM-S") == len(folders)
    fits_parse(fits[:6])
    again = run_script(tmp_path, "tse_budget.sh", str(out), "8", "3", seeds)
    assert [c[:2] for c in again] == [["evaluate-syntax", "--results"]]  # all kept


def test_rnng_budget_and_variants_issue_commands_that_parse(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    budget = run_script(tmp_path, "rnng_budget.sh", str(tmp_path / "rb"), str(tmp_path / "tse"),
                        "4", "2", "10 5 1", "rnng plm plm_mask tg", "1")
    fits = [c for c in budget if c[0] == "fit"]
    assert [Path(c[2]).stem for c in fits] == ["rnng", "plm", "plm_mask", "tg"]
    assert all("--seed_everything=1" in c for c in fits)
    assert budget[0][budget[0].index("--ckpt_path") + 1] == str(tmp_path / "tse/seed_1/awd_lstm")
    assert budget[-1][budget[-1].index("--label") + 1:budget[-1].index("--report")] == [
        "awd_lstm", "rnng", "plm", "plm_mask", "tg"]
    variants = run_script(tmp_path, "rnng_variants.sh", str(tmp_path / "rv"), "4", "2",
                          "10 5 1", "rnng rnng_in_order rnng_bpe plm_mask plm_mask_bpe")
    fits_parse(fits + [c for c in variants if c[0] == "fit"])


def test_a_stopped_step_goes_on_and_a_finished_one_is_kept(tmp_path, monkeypatch) -> None:
    """Lightning writes last.ckpt at every validation, so a run folder holding one may be a
    stopped run: without its ``finished`` mark the script continues it (``--ckpt_path last``,
    its log appended) instead of scoring it; a run stopped before any checkpoint starts again
    in an emptied folder; a stopped evaluation (its ``.partial``) runs again; what finished
    is not run again (benchmarks/once.sh)."""
    monkeypatch.chdir(ROOT)
    out, args = tmp_path / "rb", (str(tmp_path / "tse"), "4", "2", "10 5 1", "rnng plm", "1")
    first = run_script(tmp_path, "rnng_budget.sh", str(out), *args)
    assert all(c[-2:] == ["--ckpt_path", "last"] for c in first if c[0] == "fit")
    seed = out / "seed_1"
    assert (seed / "rnng" / "finished").exists() and (seed / "plm" / "finished").exists()
    (seed / "rnng" / "finished").unlink()  # stopped after its first checkpoint
    (seed / "rnng.tse.json").unlink()
    shutil.rmtree(seed / "plm")  # stopped before any checkpoint, leaving a folder behind
    (seed / "plm" / "version_0").mkdir(parents=True)
    (seed / "plm" / "version_0" / "metrics.csv").write_text("step\n0\n")
    (seed / "plm.tse.json").unlink()
    (seed / "awd_lstm.tse.json").rename(seed / "awd_lstm.tse.json.partial")
    again = run_script(tmp_path, "rnng_budget.sh", str(out), *args)
    assert [f"{c[0]} {Path(run_folder(c)).name}" for c in again[:-1]] == [
        "evaluate-syntax awd_lstm", "fit rnng", "evaluate-syntax rnng", "fit plm",
        "evaluate-syntax plm"]
    assert (seed / "awd_lstm.tse.json").exists()
    assert not (seed / "awd_lstm.tse.json.partial").exists()
    assert len((seed / "rnng.log").read_text().splitlines()) == 2  # both parts timed
    assert len((seed / "plm.log").read_text().splitlines()) == 1  # started again
    assert not (seed / "plm" / "version_0" / "metrics.csv").exists()
    last = run_script(tmp_path, "rnng_budget.sh", str(out), *args)
    assert [c[:2] for c in last] == [["evaluate-syntax", "--results"]]


#: A ``torchrun`` that logs its arguments, then runs the command it launches once.
TORCHRUN_STAND_IN = r"""#!/usr/bin/env python3
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SYNLM_STAND_IN_LOG"], "a") as log:
    log.write(json.dumps(["torchrun", *args[:3]]) + "\n")
sys.exit(subprocess.run(args[2:]).returncode)
"""


def test_blimp_parts_scores_each_paradigm_once_and_joins_them(tmp_path, monkeypatch) -> None:
    """benchmarks/blimp_parts.sh: one ``evaluate-syntax --paradigms UID`` a paradigm, in UID
    order, each journaled in its own folder, the search's flags passed on; the parts joined by
    ``--results``; run again, only a part that did not finish runs; with two processes each
    part goes through ``torchrun``."""
    import zipfile

    data = tmp_path / "data"
    (data / "blimp").mkdir(parents=True)
    with zipfile.ZipFile(data / "blimp" / "BLiMP.zip", "w") as archive:
        for uid in ("b_paradigm", "a_paradigm"):
            archive.writestr(f"data/{uid}.jsonl", "{}\n")
    monkeypatch.setenv("SYNLM_DATA_DIR", str(data))
    monkeypatch.chdir(ROOT)
    out = tmp_path / "parts"
    flags = ("--beam-size", "100", "--word-beam-size", "10")
    commands = run_script(tmp_path, "blimp_parts.sh", "RUN", str(out), "1", *flags)
    assert [c[c.index("--paradigms") + 1] for c in commands[:-1]] == ["a_paradigm",
                                                                      "b_paradigm"]
    for command, uid in zip(commands, ("a_paradigm", "b_paradigm")):
        assert command[:3] == ["evaluate-syntax", "--ckpt_path", "RUN"]
        assert command[command.index("--journal") + 1] == str(out / "journal" / uid)
        assert command[command.index("--output") + 1] == str(out / f"{uid}.jsonl")
        assert command[-4:] == list(flags)
        assert (out / f"{uid}.log").read_text().startswith(f"{uid} ")  # its time
    report = commands[-1]
    assert report[:2] == ["evaluate-syntax", "--results"]
    assert report[2:4] == [str(out / "a_paradigm.json"), str(out / "b_paradigm.json")]
    (out / "b_paradigm.json").unlink()  # stopped part way: its summary never written
    again = run_script(tmp_path, "blimp_parts.sh", "RUN", str(out), "1", *flags)
    assert [c[c.index("--paradigms") + 1] for c in again[:-1]] == ["b_paradigm"]
    assert again[-1][:2] == ["evaluate-syntax", "--results"]
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path / "elsewhere"))  # no BLiMP there
    refused = subprocess.run(["bash", str(ROOT / "benchmarks" / "blimp_parts.sh"), "RUN",
                              str(tmp_path / "none")], capture_output=True, text=True)
    assert refused.returncode != 0 and not (tmp_path / "none").exists()
    assert refused.stderr.startswith("blimp_parts.sh: ") and refused.stderr.count("\n") == 1
    assert "BLiMP.zip" in refused.stderr
    monkeypatch.setenv("SYNLM_DATA_DIR", str(data))
    (tmp_path / "bin" / "torchrun").write_text(TORCHRUN_STAND_IN)
    (tmp_path / "bin" / "torchrun").chmod(0o755)
    two = run_script(tmp_path, "blimp_parts.sh", "RUN", str(tmp_path / "two"), "2", *flags)
    launched, parts = two[:-1:2], two[1:-1:2]
    assert [c[:3] for c in launched] == 2 * [["torchrun", "--nproc_per_node", "2"]]
    assert all(Path(c[3]).name == "synlm" for c in launched)
    assert [c[c.index("--paradigms") + 1] for c in parts] == ["a_paradigm", "b_paradigm"]
