"""The end of every fit, validate and test: the run folder, the best and last checkpoints
with the metrics of the validation they carry, the metrics file and the next commands;
``--ckpt_path best`` and ``FOLDER/best|last`` wherever a checkpoint is read; a finished
run given ``--ckpt_path last`` says so; Lightning's banners give way to one line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from conftest import TINY_OVERRIDES, run_cli
from synlm.runtime import run_folders, runs
from synlm.runtime.run_summary import Saved, evaluation_summary, fit_summary, interrupted_line

TINY = ["--config", "quickstart.yaml", *TINY_OVERRIDES, "--data.corpus.init_args.n_train=60",
        "--model.backbone.init_args.hidden_size=20", "--model.backbone.init_args.chunk_size=4",
        "--model.backbone.init_args.input_size=16", "--trainer.enable_model_summary=true",
        "--trainer.limit_val_batches=2", "--trainer.num_sanity_val_steps=0"]
RUN = Path("runs/quickstart/version_0")


@pytest.fixture
def trained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capfd: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Two epochs of a tiny quickstart in ``tmp_path``: (stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    assert run_cli(["fit", *TINY, "--trainer.max_epochs=2"]) == 0
    out = capfd.readouterr()
    return out.out, out.err


def _validation_rows() -> dict[int, float]:
    with (RUN / "metrics.csv").open() as file:
        return {int(row["step"]): float(row["val/ppl"]) for row in csv.DictReader(file)
                if row.get("val/ppl")}


def test_fit_ends_with_the_run_its_checkpoints_and_the_next_commands(
        trained: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    out, _ = trained
    # Lightning's console lines, logged while the fixture trained (pytest holds the handler)
    logged = "\n".join(r.getMessage() for r in caplog.get_records("setup"))
    best = next((RUN / "checkpoints").glob("epoch*.ckpt"))
    saved = runs.read_checkpoint(best)
    metrics = runs.validation(saved)
    # the best carries the validation that chose it, as metrics.csv logged it
    assert metrics["val/ppl"] == pytest.approx(min(_validation_rows().values()), rel=1e-6)
    assert set(metrics) >= {"val/ppl", "val/uf1", "val/loss"}
    lines = out.splitlines()[-6:]
    assert lines[0] == f"run       {RUN}  (config.yaml, metrics.csv)"
    assert lines[1].startswith(f"best      {best}  (step {saved['global_step']}: val/ppl ")
    assert lines[2].startswith(f"last      {RUN}/checkpoints/last.ckpt  (step ")
    assert lines[3] == "threads   1 (SYNLM_THREADS=1)"  # tests/conftest.py chooses one
    assert lines[4] == f"next      synlm test --ckpt_path {RUN}/best"
    assert lines[5].endswith(f"synlm parse --ckpt_path {RUN}/best --input - --format pretty")
    # one line for the model's size; no Lightning tip, FLOPs table, seed or TPU line
    assert "parameters: " in logged and "all trainable" in logged
    assert all(noise not in logged + out for noise in ("Tip", "FLOPs", "Seed set", "TPU"))


def test_test_reads_the_best_and_says_where_its_metrics_went(
        trained: tuple[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    """A test of a run's checkpoint logs in that run's folder, under test/<checkpoint>/
    (each test of it replacing the previous), and makes no new version_N."""
    best = next((RUN / "checkpoints").glob("epoch*.ckpt"))
    for ckpt in ("runs/quickstart", "runs/quickstart/best", str(RUN / "best")):
        assert run_cli(["test", "--ckpt_path", ckpt, "--trainer.enable_progress_bar=false"]) == 0
        lines = capfd.readouterr().out.splitlines()
        assert lines[-3].startswith(f"tested    {best} (step ")
        assert lines[-2] == "threads   1 (SYNLM_THREADS=1)"
        metrics = RUN / "test" / best.stem / "metrics.csv"
        assert lines[-1] == f"metrics   {metrics}"
        header, *rows = metrics.read_text().splitlines()
        assert "test/ppl" in header.split(",") and len(rows) == 1
    assert run_cli(["test", "--ckpt_path", "runs/quickstart/last",
                    "--trainer.enable_progress_bar=false"]) == 0
    out = capfd.readouterr().out
    assert f"tested    {RUN}/checkpoints/last.ckpt" in out
    assert out.splitlines()[-1] == f"metrics   {RUN}/test/last/metrics.csv"
    assert run_cli(["test", *TINY, "--ckpt_path", "best"]) == 0  # with --config: its runs/
    assert f"tested    {best}" in capfd.readouterr().out
    assert run_cli(["validate", "--ckpt_path", "runs/quickstart",
                    "--trainer.enable_progress_bar=false"]) == 0
    assert "val/ppl" in (RUN / "validate" / best.stem / "metrics.csv").read_text()
    assert [p.name for p in Path("runs/quickstart").iterdir()] == ["version_0"]
    assert sorted(p.name for p in (RUN / "test").iterdir()) == sorted([best.stem, "last"])


def test_best_without_a_run_is_one_line_with_the_way_to_name_one(
        trained: tuple[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["test", "--ckpt_path", "best"]) == 2
    assert capfd.readouterr().err.strip() == (
        "synlm: error: --ckpt_path best: which run's? name its folder (--ckpt_path "
        "runs/NAME/best, runs/NAME/version_N/best) or give the run's --config (its "
        "trainer.default_root_dir holds the runs)")


def test_a_finished_run_continued_says_there_is_nothing_to_train(
        trained: tuple[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    step = runs.read_checkpoint(RUN / "checkpoints" / "last.ckpt")["global_step"]
    assert run_cli(["fit", *TINY, "--trainer.max_epochs=2", "--ckpt_path", "last"]) == 0
    out = capfd.readouterr().out
    assert f"nothing to train: the run in {RUN} had already reached its end at step {step}" \
        in out
    assert not Path("runs/quickstart/version_1").exists()  # it continued version_0
    assert run_cli(["fit", *TINY, "--trainer.max_epochs=3", "--ckpt_path", "last"]) == 0
    assert "nothing to train" not in capfd.readouterr().out


def _checkpoint(path: Path, ppl: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = {"state_dict": {}, "global_step": 1}
    if ppl is not None:
        saved[runs.VALIDATION_KEY] = {"step": 1, "metrics": {"val/ppl": ppl}}
    torch.save(saved, path)
    return path


def test_a_folder_names_its_best_or_its_last(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "x"
    last0 = _checkpoint(root / "version_0" / "checkpoints" / "last.ckpt")
    worse = _checkpoint(root / "version_0" / "checkpoints" / "epoch000-step000001.ckpt", 9.0)
    better = _checkpoint(root / "version_0" / "checkpoints" / "epoch001-step000002.ckpt", 7.0)
    last1 = _checkpoint(root / "version_1" / "checkpoints" / "last.ckpt")  # no validation yet
    def resolve(path: Path, folder: run_folders.Which = "last") -> Path:
        return run_folders.resolve_checkpoint(path, runs.best_in_run, folder=folder)

    assert resolve(root, folder="best") == better  # the newest with a best
    assert resolve(root / "best") == better
    assert resolve(root, folder="last") == last1
    assert resolve(root / "last") == last1
    assert resolve(root / "version_0" / "last") == last0
    assert resolve(root / "version_1", folder="best") == last1  # no best: last
    with pytest.raises(run_folders.CheckpointError, match="version_1 holds no best checkpoint"):
        resolve(root / "version_1" / "best")
    assert worse.is_file()


def test_summaries_read_as_documented() -> None:
    best = Saved(Path("r/checkpoints/epoch001-step000010.ckpt"), 10,
                 {"val/ppl": 9.3712, "val/uf1": 82.14, "train/loss": 1.0})
    last = Saved(Path("r/checkpoints/last.ckpt"), 12, {"val/ppl": 9.5}, validated_step=10)
    assert fit_summary(Path("r"), best, last) == [
        "run       r",
        "best      r/checkpoints/epoch001-step000010.ckpt  (step 10: val/ppl 9.371, "
        "val/uf1 82.14)",
        "last      r/checkpoints/last.ckpt  (step 12, validated at step 10: val/ppl 9.5)",
        "next      synlm test --ckpt_path r/best",
        "          echo 'a sentence to parse' | synlm parse --ckpt_path r/best --input - "
        "--format pretty"]
    assert fit_summary(Path("r"), None, None)[1:] == ["best      none saved (no validation ran)",
                                                      "last      none saved"]
    assert fit_summary(Path("r"), None, last, threads=(2, "recorded in the checkpoint"))[3] \
        == "threads   2 (recorded in the checkpoint)"
    assert evaluation_summary("test", None, Path("r")) == [
        "tested    the untrained model (no --ckpt_path)",
        "metrics   r (logger: false writes no metrics.csv)"]
    why = "default: 2 cores in the CPU affinity, no cgroup CPU quota"
    assert evaluation_summary("validate", None, Path("r"), threads=(2, why))[1] == \
        f"threads   2 ({why})"


def test_an_interrupted_run_that_is_not_the_newest_is_continued_from_its_file(
        tmp_path: Path) -> None:
    """Ctrl-C's line continues its run with ``--ckpt_path last`` (replacing the one given)
    while it is the newest under its root with a last.ckpt; once a newer one has saved,
    ``last`` would continue that one, so the line names the file."""
    root = tmp_path / "runs" / "quickstart"
    args = ["fit", "--config", "quickstart.yaml", "--ckpt_path", "last", "--seed_everything=3"]
    runs_saved = []
    for version in (0, 1):
        checkpoints = root / f"version_{version}" / run_folders.CHECKPOINTS
        checkpoints.mkdir(parents=True)
        (checkpoints / run_folders.LAST).write_bytes(b"")
        runs_saved.append(checkpoints / run_folders.LAST)
    newest = interrupted_line(args, root / "version_1", root, 7)
    assert newest == (f"synlm: interrupted at step 7; {runs_saved[1]} holds the run's last "
                      "saved state; continue from it exactly: synlm fit --config quickstart.yaml "
                      "--seed_everything=3 --ckpt_path last")
    older = interrupted_line(args, root / "version_0", root, 7)
    assert older.endswith(f"continue from it exactly in a new run folder: synlm fit --config "
                          f"quickstart.yaml --seed_everything=3 --ckpt_path {runs_saved[0]}")
