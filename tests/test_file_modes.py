"""What synlm writes follows the umask, as an ordinary ``open()`` and ``mkdir`` would: a run
folder with its checkpoints, an export-hf folder, the report's tables and plots, the records,
token surprisals and region tables, under umask 022 (others may read) and 077 (only the
owner)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fsspec.implementations.local import get_umask
from test_evaluate_syntax import evaluate, toy_data, unigram_model
from test_runs import fit

from conftest import fake_models, run_cli
from synlm.runtime.files import current_umask

MASKS = [0o022, 0o077]


@pytest.fixture(params=MASKS, ids=["umask022", "umask077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The umask set for the test; fsspec (Lightning's checkpoint writer) reads a process's
    umask once, so its cache is cleared on either side (a command's umask does not change)."""
    before = os.umask(request.param)
    get_umask.cache_clear()
    try:
        yield request.param
    finally:
        os.umask(before)
        get_umask.cache_clear()


def modes(root: Path) -> dict[str, int]:
    """Every file and folder under ``root`` (itself included) -> its permission bits."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return found


def assert_follow(root: Path, mask: int) -> None:
    wrong = {name: oct(mode) for name, mode in modes(root).items()
             if mode != (0o777 if (root / name).is_dir() else 0o666) & ~mask}
    assert not wrong, f"not as the umask {mask:03o} gives: {wrong}"


def test_the_umask_is_read_as_set(umask: int) -> None:
    assert current_umask() == umask


def test_a_run_folder_and_its_export(umask: int, tmp_path: Path) -> None:
    assert fit(tmp_path / "runs", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2") == 0
    run = tmp_path / "runs" / "version_0"
    assert list(run.glob("checkpoints/*.ckpt")) and (run / "config.yaml").exists()
    assert_follow(tmp_path / "runs", umask)
    export = tmp_path / "export"
    assert run_cli(["export-hf", "--ckpt_path", str(run), "--out", str(export)]) == 0
    assert (export / "config.json").exists()
    assert_follow(export, umask)


def test_report_tables_plots_records_surprisals_and_regions(umask: int, capsys, monkeypatch,
                                                           tmp_path: Path) -> None:
    fake_models(monkeypatch, lambda path: unigram_model())
    data = toy_data(tmp_path / "data")
    out = tmp_path / "out"
    out.mkdir()
    summary, _ = evaluate(capsys, "--ckpt_path", "a.ckpt", "b.ckpt", "--data-dir", str(data),
                          "--benchmark", "blimp", "syntaxgym", "--suites", "number_src",
                          "--report", str(out / "report"), "--output", str(out / "r.jsonl"))
    names = {Path(path).suffix for path in summary["report"]["files"]}
    assert {".md", ".csv", ".tex", ".png", ".svg"} <= names
    evaluate(capsys, "--ckpt_path", "a.ckpt", "--data-dir", str(data), "--benchmark",
             "syntaxgym", "--suites", "number_src", "--regions", str(out / "regions.tsv"))
    (tmp_path / "s.txt").write_text("The cat sleeps.\n")
    evaluate(capsys, "--ckpt_path", "a.ckpt", "--sentences", str(tmp_path / "s.txt"),
             "--surprisals", str(out / "s.tsv"))
    assert {"r.jsonl", "regions.tsv", "s.tsv"} <= {p.name for p in out.iterdir()}
    assert_follow(out, umask)
