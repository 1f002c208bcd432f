"""Live progress: the progress bar (on by default) shows the training loss, tokens/s,
val/ppl and val/uf1; the learning rate and NT-ASGD's events are logged; TensorBoard logs
beside metrics.csv on request."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import synlm.callbacks.throughput as throughput
import synlm.runtime.runs
from conftest import TINY_OVERRIDES, run_cli
from synlm.callbacks import ProgressLines, TokensPerSecond
from synlm.catalog import REPO_CONFIGS
from synlm.lightning_cli import SynLMCLI

QUICKSTART = ["--config", str(REPO_CONFIGS / "quickstart.yaml"),
              *(o for o in TINY_OVERRIDES if "progress_bar" not in o),
              "--data.corpus.init_args.n_train=60", "--trainer.limit_val_batches=2",
              "--trainer.num_sanity_val_steps=0", "--trainer.log_every_n_steps=1"]


def test_the_quickstart_shows_loss_speed_and_validation_on_its_progress_bar(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = SynLMCLI(args=[*QUICKSTART, "--trainer.max_steps=4", "--trainer.val_check_interval=4",
                         f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert cli.trainer.progress_bar_callback is not None
    cli.trainer.fit(cli.model, cli.datamodule)
    shown = cli.trainer.progress_bar_metrics
    assert {"train/loss_step", "train/tokens_per_s", "val/ppl", "val/uf1"} <= set(shown)
    assert shown["train/tokens_per_s"] > 0
    drawn = capsys.readouterr().out  # the rich bar's last picture, short names
    assert all(f"{name}:" in drawn for name in ("loss", "tok/s", "val ppl", "val uf1"))
    assert "v_num" not in drawn and "train/" not in drawn


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Recorder(SimpleNamespace):
    def log(self, name: str, value: float, **kwargs: Any) -> None:
        self.logged = (name, value, kwargs)


def test_tokens_per_second_is_the_loss_tokens_over_the_last_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(throughput.time, "perf_counter", clock)
    callback, module = TokensPerSecond(window=2), Recorder()
    callback.on_train_epoch_start(None, module)
    for tokens, seconds in ((100, 1.0), (300, 3.0), (50, 0.5)):
        clock.now += seconds
        batch = SimpleNamespace(n_targets=tokens, mask=None)
        callback.on_train_batch_end(None, module, None, batch, 0)
    name, value, kwargs = module.logged
    assert name == "train/tokens_per_s" and kwargs["prog_bar"]
    assert value == pytest.approx((300 + 50) / (3.0 + 0.5))  # the last two steps only
    clock.now += 60.0  # a validation: not training time
    callback.on_validation_end(None, module)
    clock.now += 1.0
    mask = torch.tensor([[True, True, False]])  # a batch built by hand: counted from its mask
    callback.on_train_batch_end(None, module, None, SimpleNamespace(n_targets=0, mask=mask), 0)
    assert module.logged[1] == pytest.approx(2.0)


def test_learning_rate_and_nt_asgd_events_reach_metrics_csv(tmp_path: Path) -> None:
    """NT-ASGD's fine-tuning at epoch 1 is one row, ``nt_asgd/finetuning = 1``, at the
    step the epoch starts; the learning rate is logged at every step, before and after
    the switch to ASGD."""
    assert run_cli(["fit", *QUICKSTART, "--trainer.enable_progress_bar=false",
                    "--trainer.max_epochs=2", "--trainer.limit_train_batches=3",
                    "--trainer.callbacks+=NTASGD", "--trainer.callbacks.finetune_epoch=1",
                    f"--trainer.default_root_dir={tmp_path}"]) == 0
    rows = list(csv.DictReader((tmp_path / "version_0" / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows if r.get("nt_asgd/finetuning")] == [3]
    assert all(float(r["nt_asgd/finetuning"]) == 1.0 for r in rows if r["nt_asgd/finetuning"])
    lr_columns = [c for c in rows[0] if c.startswith("lr-")]
    lrs = {int(r["step"]): float(r[c]) for r in rows for c in lr_columns if r[c]}
    assert sorted(lrs) == list(range(6)) and set(lrs.values()) == {10.0}


def test_tensorboard_logs_beside_metrics_csv(tmp_path: Path) -> None:
    assert run_cli(["fit", *QUICKSTART, "--trainer.max_steps=2", "--tensorboard=true",
                    f"--trainer.default_root_dir={tmp_path}"]) == 0
    run = tmp_path / "version_0"
    assert (run / "metrics.csv").is_file()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


def test_tensorboard_without_the_package_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synlm.runtime.runs, "tensorboard_available", lambda: False)
    assert run_cli(["fit", *QUICKSTART, "--trainer.max_steps=1", "--tensorboard=true",
                    f"--trainer.default_root_dir={tmp_path}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "pip install 'synlm[tensorboard]'" in line
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_log_file_gets_a_line_every_tenth_of_an_epoch_and_at_every_validation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = SynLMCLI(args=[*QUICKSTART, "--trainer.max_epochs=2",
                         f"--trainer.default_root_dir={tmp_path}"], run=False)
    lines = [c for c in cli.trainer.callbacks if isinstance(c, ProgressLines)]
    assert len(lines) == 1  # pytest's captured stderr is no terminal
    cli.trainer.fit(cli.model, cli.datamodule)
    printed = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("synlm fit: ")]
    batches = [line for line in printed if ", batch " in line]
    validations = [line for line in printed if ": validation at " in line]
    for epoch in (0, 1):  # a line as each tenth of the epoch's n batches is passed: ten
        done = [line.split(", batch ")[1].split(" ")[0].split("/") for line in batches
                if line.startswith(f"synlm fit: epoch {epoch},")]
        n = int(done[0][1])  # the stream's batches (its offset varies from epoch to epoch)
        assert n >= 10 and [int(k) for k, _ in done] == \
            [k for k in range(1, n + 1) if k * 10 // n > (k - 1) * 10 // n]
        assert len(done) == 10
    assert all(", loss " in line and ", tok/s " in line for line in batches)
    assert len(validations) == 2 and all("val ppl " in line and "val uf1 " in line
                                         for line in validations)
    assert printed.index(validations[0]) == 10  # after the first epoch's ten lines


def test_progress_lines_in_a_log_file_with_or_without_a_bar_and_none_on_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch job that turns the bar off (``enable_progress_bar=false``, as the benchmark
    scripts do) still logs its progress; a terminal has the bar (or nothing) instead."""
    def callbacks(*extra: str) -> list[Any]:
        cli = SynLMCLI(args=[*QUICKSTART, *extra, f"--trainer.default_root_dir={tmp_path}"],
                       run=False)
        return [c for c in cli.trainer.callbacks if isinstance(c, ProgressLines)]

    assert len(callbacks("--trainer.enable_progress_bar=false")) == 1
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert callbacks() == [] and callbacks("--trainer.enable_progress_bar=false") == []
