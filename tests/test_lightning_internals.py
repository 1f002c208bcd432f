"""The private members of Lightning (and of the parser under its CLI) that synlm relies on,
each through one function of ``synlm.runtime.lightning_internals``: each test fails if its member
is renamed, changes kind or signature, or stops behaving as synlm relies on. A failure
here after a Lightning or jsonargparse upgrade names what to look at before a resumed run
goes wrong."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path
from typing import Any

import jsonargparse
import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger
from lightning.pytorch.loops.fetchers import _DataFetcher
from torch.utils.data import DataLoader, TensorDataset

from synlm.callbacks import ParameterSummary, SynLMProgressBar, TokensPerSecond
from synlm.callbacks.nt_asgd import NTASGD
from synlm.callbacks.syntactic import SyntacticEvaluation
from synlm.callbacks.trees import TreeSamples
from synlm.data.datamodule import SynLMDataModule
from synlm.lightning_cli import SynLMArgumentParser, SynLMCLI
from synlm.runtime import lightning_internals as internals
from synlm.runtime.arguments import CommandParser
from synlm.runtime.run_callbacks import RunCheckpoint, SaveRunConfig
from synlm.runtime.runs import RunCSVLogger, _RunTensorBoardLogger


class Tiny(pl.LightningModule):
    """A linear model on random data: ``batches`` training batches of two rows."""

    def __init__(self, batches: int = 6) -> None:
        super().__init__()
        self.batches = batches
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self.layer(batch[0]).pow(2).mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.randn(2 * self.batches, 2)), batch_size=2)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)


def trainer(tmp_path: Path, callbacks: list[Callback], **kwargs: Any) -> pl.Trainer:
    options: dict[str, Any] = {
        "max_epochs": 1, "logger": False, "enable_checkpointing": False,
        "enable_progress_bar": False, "enable_model_summary": False,
        "num_sanity_val_steps": 0, "accelerator": "cpu", "default_root_dir": tmp_path}
    return pl.Trainer(callbacks=callbacks, **{**options, **kwargs})


# ------------------------------------------------------------------- the members exist


def test_the_loop_members_have_their_kind_and_signature(tmp_path: Path) -> None:
    fit_loop = trainer(tmp_path, []).fit_loop
    loop = fit_loop.epoch_loop
    assert isinstance(inspect.getattr_static(type(loop), "_is_training_done"), property)
    for name in ("_num_ready_batches_reached", "_should_accumulate"):
        assert list(inspect.signature(getattr(loop, name)).parameters) == [], name
    assert list(inspect.signature(loop._should_check_val_fx).parameters) == ["data_fetcher"]
    assert loop._batches_that_stepped == 0
    assert fit_loop._data_fetcher is None  # set while a fit runs
    assert isinstance(inspect.getattr_static(type(fit_loop), "restarted_mid_epoch"), property)
    assert list(inspect.signature(fit_loop.reset_restart_stage).parameters) == []
    current = fit_loop.epoch_progress.current
    assert (current.completed, current.ready) == (0, 0)


# ---------------------------------------------------------- and behave as synlm relies on


class Probe(Callback):
    """Records the internals at each training batch's end and each validation's end."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.validations: list[int] = []

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        row = {"accumulating": internals.accumulating(trainer),
               "last": internals.last_batch_of_epoch(trainer),
               "done": internals.training_done(trainer),
               "validation": internals.validation_due(trainer),
               "fetcher": internals.data_fetcher(trainer)}
        stop, trainer.should_stop = trainer.should_stop, True  # validates when stopping
        row["validation_on_stop"] = internals.validation_due(trainer)
        trainer.should_stop = stop
        self.rows.append(row)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.validations.append(internals.batches_that_stepped(trainer))


class Steps(Logger):
    """The step each logged value was logged at."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return "steps"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.logged += [(name, int(step or 0)) for name in metrics]


def test_the_loop_says_where_a_batch_stands(tmp_path: Path) -> None:
    """Six batches, a step every two, a validation every three: which batches only
    accumulate, which ends the epoch (and training), which a validation follows; with
    ``should_stop`` set every batch is followed by one (callers clear it to ask for the
    schedule alone); the step a validation's values are logged at."""
    probe, steps = Probe(), Steps()
    trainer(tmp_path, [probe], accumulate_grad_batches=2, val_check_interval=3,
            logger=steps, log_every_n_steps=1).fit(Tiny())
    column = {key: [row[key] for row in probe.rows] for key in probe.rows[0]}
    assert column["accumulating"] == [True, False, True, False, True, False]
    assert column["last"] == column["done"] == [False] * 5 + [True]
    assert column["validation"] == [False, False, True, False, False, True]
    assert column["validation_on_stop"] == [True] * 6
    assert all(isinstance(f, _DataFetcher) for f in column["fetcher"])
    assert probe.validations == [1, 2]  # batches that stepped before (batch 6's counts after)
    assert [step for name, step in steps.logged if name == "val_loss"] == probe.validations


def test_max_steps_ends_training_inside_an_epoch(tmp_path: Path) -> None:
    probe = Probe()
    trainer(tmp_path, [probe], max_steps=2).fit(Tiny())
    assert [row["done"] for row in probe.rows] == [False, True]
    assert [row["last"] for row in probe.rows] == [False, False]


class SaveAtLastBatch(Callback):
    """Saves a checkpoint at the end of the epoch's last batch, as RunCheckpoint does."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if internals.last_batch_of_epoch(trainer):
            trainer.save_checkpoint(self.path)


class Restart(Callback):
    """At the start of a resumed fit: the restart stage and the epoch counts, then reset;
    the epochs whose start hook ran."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        self.epochs_started: list[int] = []

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.seen["restarted"] = internals.restarted_mid_epoch(trainer)
        self.seen["epochs"] = internals.epochs_completed_and_ready(trainer)
        internals.reset_restart_stage(trainer)
        self.seen["after_reset"] = internals.restarted_mid_epoch(trainer)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.epochs_started.append(trainer.current_epoch)


def test_a_fit_resumed_from_an_epochs_last_batch(tmp_path: Path) -> None:
    """Saved at the end of epoch 0's last batch: the resumed fit restarts mid-epoch with
    that epoch counted as both started and completed; once the stage is reset, epoch 1
    starts with its start hook (what ``RunCheckpoint.on_train_start`` relies on)."""
    path = tmp_path / "end.ckpt"
    trainer(tmp_path, [SaveAtLastBatch(path)], max_epochs=1).fit(Tiny(4))
    restart = Restart()
    trainer(tmp_path, [restart], max_epochs=2).fit(Tiny(4), ckpt_path=path)
    assert restart.seen == {"restarted": True, "epochs": (1, 1), "after_reset": False}
    assert restart.epochs_started == [1]


# ------------------------------------------------------------------- the CLI's parser


class _Raising(jsonargparse.ArgumentParser):
    def error(self, message: str, ex: Exception | None = None) -> Any:
        raise RuntimeError(self, ex)


def test_an_argument_error_carries_its_subcommands_parser() -> None:
    parser, fit = _Raising(allow_abbrev=False), _Raising(allow_abbrev=False)
    fit.add_argument("--max_epochs", type=int)
    parser.add_subcommands().add_subcommand("fit", fit)
    with pytest.raises(RuntimeError) as raised:
        parser.parse_string("fit:\n  max_epoch: 3\n")
    who, ex = raised.value.args
    assert who is parser and internals.subcommand_parser(ex) is fit
    assert internals.subcommand_parser(None) is None
    assert "--max_epochs" in internals.option_strings(fit)


def test_option_strings_lists_every_option() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--number")
    assert internals.option_strings(parser) == ["-h", "--help", "-n", "--number"]


def test_option_strings_lists_the_options_of_groups_as_command_parser_relies_on() -> None:
    """The options of argument groups and mutually exclusive groups are the parser's too:
    ``CommandParser`` adds no spelling one of them already took, and proposes them for a
    mistyped flag."""
    parser = argparse.ArgumentParser()
    parser.add_mutually_exclusive_group().add_argument("--ckpt_path", "--ckpt-path")
    parser.add_argument_group("output").add_argument("--out")
    assert internals.option_strings(parser) == ["-h", "--help", "--ckpt_path", "--ckpt-path",
                                                "--out"]
    command = CommandParser("synlm t")
    command.add_mutually_exclusive_group().add_argument("--top-k")
    assert command.add_argument("--top_k", dest="k").option_strings == ["--top_k"]
    assert command.parse_args(["--top-k", "1", "--top_k", "2"]) == argparse.Namespace(
        top_k="1", k="2")


# ------------------------------------------------------------------ for the LightningModule


def test_an_unattached_module_says_so(tmp_path: Path) -> None:
    """``SyntaxLM`` asks the public ``trainer`` property, which raises ``RuntimeError``
    without a trainer, instead of reading the private ``_trainer``."""
    module = Tiny()
    with pytest.raises(RuntimeError, match="not attached to a `Trainer`"):
        module.trainer  # noqa: B018
    fitting = trainer(tmp_path, [])
    module.trainer = fitting
    assert module.trainer is fitting


# --------------------------------------------- synlm's own members shadow none of Lightning's

#: synlm's subclasses of Lightning's (and jsonargparse's) classes
SUBCLASSES = [RunCheckpoint, SaveRunConfig, SynLMArgumentParser, SynLMCLI, RunCSVLogger,
              _RunTensorBoardLogger, TreeSamples, SyntacticEvaluation, TokensPerSecond, NTASGD,
              SynLMProgressBar, ParameterSummary, SynLMDataModule]


#: public names synlm adds (its public overrides of Lightning's hooks are not listed)
ADDED = {RunCheckpoint: {"validation", "last_step_written", "write_last", "saved"},
         RunCSVLogger: {"resume_step"}}


#: Lightning's private methods a synlm subclass replaces (its docstring says why): each
#: kept only while the class it extends defines it and calls it where synlm expects
#: (``test_a_replaced_private_method_is_still_called``)
REPLACED = {SynLMCLI: {"_parse_ckpt_path": "__init__"}}


def _theirs(cls: type) -> list[type]:
    return [base for base in cls.__mro__[1:]
            if base.__module__.split(".")[0] in ("lightning", "jsonargparse", "argparse")]


@pytest.mark.parametrize("cls", SUBCLASSES, ids=[c.__name__ for c in SUBCLASSES])
def test_synlms_private_names_are_its_own(cls: type) -> None:
    """Every ``self._name`` a subclass uses (and the public names it adds) is its own:
    neither the Lightning class it extends nor any base defines or assigns it. synlm reads
    Lightning's private members only through ``synlm.runtime.lightning_internals``; a Lightning
    release that started using one of these names would otherwise be overridden
    silently."""
    names = set(re.findall(r"\bself\.(_[a-z]\w*)", inspect.getsource(cls)))
    names |= {n for n in vars(cls) if n.startswith("_") and not n.startswith("__")}
    names |= ADDED.get(cls, set())
    names -= {"_abc_impl", *REPLACED.get(cls, {})}  # Python's, on every abstract class
    theirs = _theirs(cls)
    assert theirs, cls
    sources = "\n".join(inspect.getsource(inspect.getmodule(b)) for b in theirs)
    clashes = sorted(n for n in names if any(hasattr(b, n) for b in theirs)
                     or re.search(rf"\bself\.{n}\b", sources))
    assert clashes == []


@pytest.mark.parametrize("cls", sorted(REPLACED, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_a_replaced_private_method_is_still_called(cls: type) -> None:
    """A Lightning release that renames or stops calling a method synlm replaces would
    leave synlm's version unused: each is defined by the class synlm extends and called
    from the method named in ``REPLACED``."""
    for name, caller in REPLACED[cls].items():
        (base,) = [b for b in _theirs(cls) if name in vars(b)]
        assert f"self.{name}(" in inspect.getsource(getattr(base, caller)), (name, caller)


def test_tree_samples_keeps_lightnings_form_of_state_keys() -> None:
    """Checkpoints saved when ``TreeSamples`` used Lightning's private
    ``_generate_state_key`` still find its state."""
    samples = TreeSamples(n=2, structure="syd", every_n_validations=3)
    assert samples.state_key == samples._generate_state_key(
        n=2, structure="syd", every_n_validations=3, protocol="onlstm")
