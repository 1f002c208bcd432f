"""Resuming from last.ckpt continues bit for bit, wherever training stopped: at a
validation, between validations (``max_steps``), at an epoch's end, by ``max_time``, after
an exception, and by SIGTERM (also tests/test_preemption.py, with a real process)."""

from __future__ import annotations

import csv
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Checkpoint

from conftest import TINY_OVERRIDES, send_self_sigterm
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.data.batching import ShuffledLoader
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.runtime.run_folders import resolve_checkpoint
from synlm.runtime.runs import best_in_run

#: The quickstart's ON-LSTM at a tiny size (kept by the other backbones where they share
#: the argument).
SMALL_MODEL = ["--model.backbone.init_args.input_size=16",
               "--model.backbone.init_args.hidden_size=24",
               "--model.backbone.init_args.chunk_size=4"]
SMALL_CORPUS = ["--data.corpus.init_args.n_train=60"]
NT_ASGD = ["--trainer.callbacks+=NTASGD", "--trainer.callbacks.finetune_epoch=0"]
CASES = {
    "stream": [],
    "sentence": ["--data.mode=sentence"],
    "nt-asgd-averaging": NT_ASGD,
    "awd-lstm": ["--model.backbone=AWDLSTM", "--model.heads=[]"],
    "prpn": ["--model.backbone=PRPN", "--model.backbone.init_args.n_slots=5",
             "--model.heads=[]"],
    "transformer-token-budget": [
        "--model.backbone=Transformer", "--model.backbone.init_args.num_layers=2",
        "--model.backbone.init_args.num_heads=2", "--model.backbone.init_args.ffn_size=32",
        "--model.heads=[]", "--data.mode=sentence", "--data.max_tokens=128",
        "--optimizer=AdamW", "--lr_scheduler=InverseSqrtWarmup",
        "--lr_scheduler.warmup_steps=3"],
}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models gain nothing from more threads, and on a busy CPU waking them costs
    more than the work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def fit(root: Path, max_steps: int, *extra: str) -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY_OVERRIDES,
            *SMALL_MODEL, f"--trainer.max_steps={max_steps}", "--trainer.val_check_interval=2",
            "--trainer.limit_val_batches=2", "--trainer.log_every_n_steps=1",
            f"--trainer.default_root_dir={root}", *extra]
    assert main(args) == 0


def logged(root: Path) -> list[tuple[int, str, str]]:
    """(step, metric, value) of every per-step training loss and validation metric of the
    run in ``root``, in file order. ``*_epoch`` training means are left out: a process
    stopped mid-epoch logs the mean of the part it trained, as Lightning closes its epoch."""
    (metrics,) = root.glob("version_*/metrics.csv")  # a resumed run continues its folder
    return [(int(row["step"]), key, value) for row in csv.DictReader(metrics.open())
            for key, value in row.items()
            if value and (key == "train/loss_step" or key.startswith("val/"))]


def last(root: Path) -> dict[str, Any]:
    return torch.load(resolve_checkpoint(root, best_in_run), weights_only=False)


def assert_identical(a: Any, b: Any, where: str) -> None:
    """Nested dicts, sequences and tensors equal bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def assert_same_runs(straight: Path, resumed: Path, steps: int,
                     stop_validation: int | None = None) -> None:
    """The same weights, optimiser state, carried state, RNG and NT-ASGD state bit for bit,
    and one metrics.csv with the same training losses and validation metrics at every step
    (identical strings, none twice). ``stop_validation``: a step whose validation
    Lightning ran only because training stopped there, unless one was due (in the log, not
    in the checkpoint)."""
    a, b = last(straight), last(resumed)
    assert a["global_step"] == b["global_step"] == steps
    for key in ("state_dict", "optimizer_states", "lr_schedulers", "synlm"):
        assert_identical(a[key], b[key], key)
    for key in (k for k in a["callbacks"] if k.startswith("NTASGD")):
        assert_identical(a["callbacks"][key], b["callbacks"][key], key)
    rows = logged(straight)
    assert [step for step, key, _ in rows if key == "train/loss_step"] == list(range(steps))
    extra = [r for r in logged(resumed)
             if r[0] == stop_validation and r[1].startswith("val/") and r not in rows]
    assert [r for r in logged(resumed) if r not in extra] == rows


def resume_chain(tmp_path: Path, stops: list[int], steps: int, *extra: str) -> None:
    """``stops`` runs, each resuming the last, then one to ``steps``, against one run."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, steps, *extra)
    for i, stop in enumerate(stops):
        fit(resumed, stop, *extra, *(["--ckpt_path=last"] if i else []))
        assert last(resumed)["global_step"] == stop
    fit(resumed, steps, "--ckpt_path=last", *extra)
    assert_same_runs(straight, resumed, steps)


@pytest.mark.parametrize("extra", [[], NT_ASGD], ids=["sgd", "nt-asgd-averaging"])
def test_resume_after_a_stop_at_a_validation(tmp_path: Path, extra: list[str]) -> None:
    """With NT-ASGD averaging, validation (and the checkpoint at step 2) use the averaged
    weights while training goes on from the raw ones: the resume must restore both."""
    resume_chain(tmp_path, [2], 4, *extra)


@pytest.mark.parametrize("extra", list(CASES.values()), ids=list(CASES))
def test_resume_after_a_stop_between_validations(tmp_path: Path, extra: list[str]) -> None:
    """Stopped by max_steps at step 3 (validations at 2 and 4): the checkpoint is the end
    of step 3 in its epoch, not an epoch Lightning has closed (which resumed in the next
    epoch, with other windows and a fresh carried state)."""
    resume_chain(tmp_path, [3], 5, *extra)


def test_resume_across_epoch_ends(tmp_path: Path) -> None:
    """Stops mid-epoch, at the last step of an epoch (no validation there), at the first
    step after a resume and mid-way through the next epoch, with fixed windows (built
    once, the loader kept epoch 0 and a later epoch's position was dropped)."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=60, n_valid=60, n_test=60), batch_size=4,
                         bptt=12, variable_bptt=False)  # as TINY_OVERRIDES + SMALL_CORPUS
    epoch = len(dm.train_dataloader())
    assert epoch % 3  # no validation at its last step
    resume_chain(tmp_path, [4, epoch, epoch + 1, epoch + 3], epoch + 5, *SMALL_CORPUS,
                 "--data.variable_bptt=false", "--trainer.val_check_interval=3")


def test_resume_after_max_time(tmp_path: Path) -> None:
    """``max_time`` stops at some step k and validates there (Lightning); the checkpoint is
    that of step k before that validation, which an uninterrupted run does not have (NT-ASGD
    would count it)."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    extra = [*SMALL_CORPUS, *NT_ASGD, "--trainer.callbacks.stop_when_nonmono=false"]
    fit(resumed, -1, "--trainer.max_time=00:00:00:01", *extra)
    stop = last(resumed)["global_step"]
    fit(resumed, stop + 3, "--ckpt_path=last", *extra)
    fit(straight, stop + 3, *extra)
    assert_same_runs(straight, resumed, stop + 3, stop_validation=stop - 1)


class RaiseAt(pl.Callback):
    """Raises at the start of the step after ``step`` optimiser steps."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"boom at {self.step}")


def test_resume_after_an_exception(tmp_path: Path) -> None:
    """An exception writes nothing (it may come from the middle of a step): last.ckpt is
    that of the last validation, and continues from there exactly."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, 6)
    with pytest.raises(RuntimeError, match="boom at 3"):
        fit(resumed, 6, f"--trainer.callbacks+={__name__}.RaiseAt",
            "--trainer.callbacks.step=3")
    assert last(resumed)["global_step"] == 2
    fit(resumed, 6, "--ckpt_path=last")
    assert_same_runs(straight, resumed, 6)


class InterruptAt(pl.Callback):
    """Ctrl-C at the start of the step after ``step`` optimiser steps, once in this
    process (the command that continues the run carries this callback too)."""

    done = False

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step and not InterruptAt.done:
            InterruptAt.done = True
            raise KeyboardInterrupt


@pytest.fixture
def sigint_kept() -> Iterator[None]:
    """Lightning ignores SIGINT once it has handled a KeyboardInterrupt: put the session's
    handler back."""
    handler = signal.getsignal(signal.SIGINT)
    InterruptAt.done = False
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.mark.usefixtures("sigint_kept")
def test_ctrl_c_names_the_command_that_resumes_exactly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C at step 3 (validations at 2, 4) exits with status 1 and one line on stderr
    naming last.ckpt (step 2) and the command; run as it says, the run continues in its
    folder to the same weights and log as an uninterrupted one."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, 6)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        fit(resumed, 6, f"--trainer.callbacks+={__name__}.InterruptAt",
            "--trainer.callbacks.step=3")
    assert stopped.value.code == 1
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("synlm:")]
    saved = resumed / "version_0" / "checkpoints" / "last.ckpt"
    assert line.startswith(f"synlm: interrupted at step 3; {saved} holds the run's last "
                           "saved state; continue from it exactly: synlm fit ")
    assert last(resumed)["global_step"] == 2
    command = shlex.split(line.split("exactly: ", 1)[1])
    assert command[-2:] == ["--ckpt_path", "last"]
    assert main(command[1:]) == 0
    assert_same_runs(straight, resumed, 6)


@pytest.mark.usefixtures("sigint_kept")
def test_ctrl_c_before_a_checkpoint_says_there_is_nothing_to_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        fit(tmp_path, 6, f"--trainer.callbacks+={__name__}.InterruptAt",
            "--trainer.callbacks.step=1")
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("synlm:")]
    assert line == (f"synlm: interrupted at step 1, before {tmp_path / 'version_0'} saved a "
                    "checkpoint: nothing to resume; the same command starts the run again")


class SigtermAt(pl.Callback):
    """Sends this process SIGTERM after ``step`` optimiser steps: in ``on_train_batch_end``
    (before checkpoint callbacks run) or in the validation of that step."""

    def __init__(self, step: int, during: str = "train") -> None:
        self.step, self.during = step, during

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.during == "train" and trainer.global_step == self.step:
            send_self_sigterm()

    def on_validation_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.during == "validation" and trainer.global_step == self.step \
                and not trainer.sanity_checking:
            send_self_sigterm()


class LateSigtermAt(Checkpoint):
    """SIGTERM after the checkpoint callbacks' ``on_train_batch_end`` (a ``Checkpoint``
    runs after the others, in order): Lightning still finishes the step and raises
    ``SIGTERMException``, which RunCheckpoint.on_exception saves."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            send_self_sigterm()


@pytest.mark.parametrize(("callback", "options", "saved"), [
    ("SigtermAt", ["--trainer.callbacks.step=3"], 3),
    ("LateSigtermAt", ["--trainer.callbacks.step=3"], 3),
    ("SigtermAt", ["--trainer.callbacks.step=4", "--trainer.callbacks.during=validation"], 2),
], ids=["at-step-end", "after-checkpoint-callbacks", "during-validation"])
def test_resume_after_sigterm(tmp_path: Path, callback: str, options: list[str],
                              saved: int) -> None:
    """SIGTERM ends fit with Lightning's ``SIGTERMException`` (a ``SystemExit`` without
    code: exit status 0) once the step is done, and last.ckpt holds that step (validations
    at 2, 4, 6). One that comes during a validation, which Lightning leaves midway, leaves
    last.ckpt at the previous validation."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, 7)
    with pytest.raises(SystemExit) as stopped:
        fit(resumed, 7, f"--trainer.callbacks+={__name__}.{callback}", *options)
    assert stopped.value.code is None
    assert last(resumed)["global_step"] == saved
    fit(resumed, 7, "--ckpt_path=last")
    assert_same_runs(straight, resumed, 7)


def test_shuffled_sentence_batches_resume_and_split_over_ranks() -> None:
    """Sentence mode's training order comes from (seed, epoch): a loader given another's
    position continues it; ranks get disjoint shares of one padded order."""
    dataset = [({"tokens": np.array([i, i]), "targets": np.array([i, i])}, None)
               for i in range(10)]

    def units(loader: ShuffledLoader) -> list[int]:
        return [int(i) for batch in loader for i in batch.tokens[:, 0]]

    one = ShuffledLoader(dataset, batch_size=3, seed=1)
    assert len(one) == 4 and sorted(units(one)) == list(range(10))
    assert units(one) != units(ShuffledLoader(dataset, batch_size=3, seed=1, epoch=1))
    next(iter(one))
    resumed = ShuffledLoader(dataset, batch_size=3, seed=1)
    resumed.load_state_dict(one.state_dict())
    assert units(resumed) == units(one)[3:]
    shares = [units(ShuffledLoader(dataset, 3, seed=1, rank=r, world_size=4)) for r in range(4)]
    assert [len(s) for s in shares] == [3] * 4  # 10 padded to 12
    assert {i for s in shares for i in s} == set(range(10))


def test_resume_on_a_busy_machine_goes_on_with_the_recorded_threads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Nobody chose a count: a run saved at step 2 with the one thread its cgroup's quota
    allowed continues on four cores without a quota, two and a half of them busy (a fresh
    run would take two threads, one per idle core), with one thread again and
    the numbers of a run without the stop. (One thread: the tiny model runs many times
    slower with more on a shared machine; test_threads.py has the warnings.)"""
    from synlm.runtime import threads
    from synlm.runtime.run_callbacks import THREADS_KEY

    for name in (threads.THREADS_ENV, *threads.CHOSEN):
        monkeypatch.delenv(name, raising=False)

    def machine(affinity: int, quota: tuple[int, int] | None, busy: float) -> None:
        monkeypatch.setattr(threads, "affinity_cores", lambda: affinity)
        monkeypatch.setattr(threads, "cgroup_quota", lambda: quota)
        monkeypatch.setattr(threads, "busy_cores", lambda cores: busy)

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    machine(4, (100000, 100000), 0.0)
    fit(straight, 4)
    fit(resumed, 2)
    assert last(resumed)[THREADS_KEY] == 1
    assert "threads   1 (default: 0.0 of 4 cores busy with other work, cgroup CPU quota " \
        "100000/100000 = 1 CPU, 4 cores in the CPU affinity)" in capfd.readouterr().out.splitlines()
    machine(4, None, 2.4)
    fit(resumed, 4, "--ckpt_path=last")
    out = capfd.readouterr()
    assert last(resumed)[THREADS_KEY] == 1  # torch's count when step 4 was saved
    assert "threads   1 (recorded in the checkpoint)" in out.out.splitlines()
    assert "synlm:" not in out.err  # one thread waits on nobody: nothing to warn of
    assert_same_runs(straight, resumed, 4)
