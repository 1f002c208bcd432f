"""``synlm fit|validate|test|predict``: LightningCLI with synlm's run folders, checkpoints
and errors, and the builders other commands and notebooks use (``from_config``,
``build_run``).
``synlm.cli`` imports this module only for these commands (Lightning takes seconds to
import).

One module because it is one ``LightningCLI`` subclass whose hooks share the run's state
(its folder, the checkpoint it continues, the thread count); the run-folder callbacks are in
``synlm.runtime.run_callbacks``, the config chain in ``synlm.runtime.config_chain``."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import shutil
import sys
import traceback
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol

import jsonargparse
import lightning.pytorch as pl
import torch
import yaml
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import (
    LearningRateMonitor,
    ModelSummary,
    RichModelSummary,
    RichProgressBar,
)
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, LRSchedulerTypeTuple
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch.optim import Optimizer

import synlm.registry  # noqa: F401  (importing it registers the short class names)
from synlm import __version__
from synlm.callbacks import ParameterSummary, ProgressLines, SynLMProgressBar, TokensPerSecond
from synlm.data.datamodule import SynLMDataModule
from synlm.errors import InputError, SettingError, SynLMError, report, show_traceback
from synlm.lm import SyntaxLM
from synlm.modules.recorded import upgraded_config
from synlm.runtime import checks, config_chain, run_folders, runs, usage
from synlm.runtime import lightning_internals as internals
from synlm.runtime.inputs import LIGHTNING_CKPT_NAMES
from synlm.runtime.run_callbacks import THREADS_KEY, RunCheckpoint, SaveRunConfig
from synlm.runtime.run_summary import Saved, evaluation_summary, fit_summary, interrupted_line
from synlm.transition.lm import TransitionLM

jsonargparse.set_parsing_settings(omegaconf_absolute_to_relative_paths=True)


class _Without(logging.Filter):
    """Drops Lightning's lines that begin with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


# a run's console keeps what concerns the run: not Lightning's "💡 Tip" lines, which
# advertise its services (litlogger, litmodels), nor "Seed set to N" (config.yaml has it),
# nor the absence of accelerators nobody here has (TPU, HPU)
for _prefix in ("💡 Tip", "TPU available: False", "HPU available: False"):
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_Without(_prefix))
logging.getLogger("lightning.fabric.utilities.seed").addFilter(_Without("Seed set to"))

# main() hands LightningCLI the command line itself (after with_saved_config)
warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter")
# Lightning 2.6 under torch >= 2.10, once per run, nothing a user can act on
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


class ThreadChoice(Protocol):
    """The thread count a command runs with (``synlm.runtime.threads.Threads``, handed in by
    ``synlm.cli``): how many, why, the count a continued fit goes on with, and the lines
    the choice is worth on stderr."""

    @property
    def count(self) -> int: ...

    @property
    def why(self) -> str: ...

    def resume(self, recorded: int | None) -> ThreadChoice: ...

    def report(self) -> None: ...


class SynLMArgumentParser(LightningArgumentParser):
    """Errors in one line instead of the usage: where the value was set (the flag, or the
    config file and line), what is expected, and the closest flag, class argument or class
    name ("did you mean"); ``args``: the command line, to find where. With ``raises`` (a
    parser built for Python, ``from_config``), that line is an ``InputError`` instead of
    an exit."""

    args: Sequence[str] = ()
    raises = False

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # jsonargparse trying alternatives: not for the user
            super().error(message, ex)
        if show_traceback():
            raise jsonargparse.ArgumentError(None, message) from ex
        parser = internals.subcommand_parser(ex) or self
        options = internals.option_strings(parser)
        said = usage.parser_error(message, options, self.args)
        if self.raises:
            raise InputError(said) from ex
        prog = parser.prog.replace(" [options]", "")
        sys.stderr.write(f"{prog}: error: {said} ({prog} {usage.FULL_HELP} lists every option)\n")
        self.exit(2)


#: The recipe a config's ``model:`` configures when it names none by ``class_path``: every
#: backbone and head trains under it.
DEFAULT_RECIPE = "synlm.lm.SyntaxLM"

#: The argument of a transition recipe that the data's action vocabulary sets.
ACTIONS_LINK = "n_actions"

#: The DataModule's mode a transition recipe trains on.
ACTIONS_MODE = "actions"

#: What ``fit|validate|test|predict`` return: the recipe a config names.
Recipe = SyntaxLM | TransitionLM


class ConfigChain(jsonargparse.ActionConfigFile):
    """``--config FILE``, with the bases FILE names applied first, each as a config file of
    its own (``synlm.runtime.config_chain``: the deepest base first, each file without its
    ``config:`` key), so that a file's keys merge into its base's exactly as a second
    ``--config`` would (a block ``model: {embedding_dropout: 0.2}`` keeps every other value
    of the base's ``model``; a list replaces the base's list). jsonargparse never reads a
    config inside a config (it would parse the inner file against the outer's keys). A
    component a file names by its full ``class_path`` (a run's ``config.yaml``) is read in
    today's form (``upgraded_config``). YAML given inline is applied as it is."""

    def __call__(self, parser: Any, cfg: Any, values: Any, option_string: str | None = None
                 ) -> None:
        if not usage.is_config_file(values):
            self.apply_config(parser, cfg, self.dest, values)
            return
        for _, config in config_chain.chain(Path(values)):
            text = yaml.safe_dump(upgraded_config(config), sort_keys=False)
            self.apply_config(parser, cfg, self.dest, text)


class SynLMCLI(LightningCLI):
    """LightningCLI in ``omegaconf+`` mode (``${...}`` interpolations see dotted overrides),
    with one shape for every recipe: ``model`` is Lightning's subclass mode over
    ``LightningModule``, ``SyntaxLM`` by default, so a config's ``model:`` without
    ``class_path`` holds ``SyntaxLM``'s arguments and ``class_path: TransitionLM`` (or
    ``--model=TransitionLM``) chooses the transition recipe, as jsonargparse resolves it."""

    def __init__(self, *args: Any, threads: ThreadChoice | None = None,
                 **kwargs: Any) -> None:
        self._threads = threads  # as synlm.runtime.threads chose them: resume, the log, the summary
        self._args = list(kwargs.get("args") or [])  # to say where a bad value was set
        self._raises = kwargs.get("run", True) is False  # built for Python: errors raise
        kwargs.setdefault("parser_kwargs", {"parser_mode": "omegaconf+"})
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("auto_configure_optimizers", False)
        kwargs.setdefault("subclass_mode_model", True)
        try:
            super().__init__(pl.LightningModule, SynLMDataModule, *args, **kwargs)
        except BaseException:
            self._remove_unused_run_folder()
            self._say_how_to_resume()
            raise

    def _run_checkpoint(self) -> RunCheckpoint | None:
        """The trainer's ``RunCheckpoint`` (a fit that saves checkpoints has one)."""
        trainer = getattr(self, "trainer", None)
        return next((c for c in trainer.callbacks if isinstance(c, RunCheckpoint)), None) \
            if trainer is not None else None

    def _say_how_to_resume(self) -> None:
        """After Ctrl-C, which Lightning turns into a graceful stop of the fit, one line on
        stderr: the command that continues the run exactly
        (``run_summary.interrupted_line``)."""
        checkpoint = self._run_checkpoint()
        if checkpoint is None or checkpoint.dirpath is None or not self.trainer.is_global_zero \
                or not isinstance(checkpoint.stopped_by, KeyboardInterrupt):
            return
        line = interrupted_line(self._args, Path(checkpoint.dirpath).parent, self._root,
                                self.trainer.global_step)
        sys.stderr.write(line + "\n")

    def _remove_unused_run_folder(self) -> None:
        """A start that failed before its first step leaves no run folder behind: the
        ``version_N`` this command made (without a checkpoint), and ``runs/<config>`` if it
        made that too and left it empty."""
        root, before = getattr(self, "_root", None), getattr(self, "_versions_before", None)
        trainer = getattr(self, "trainer", None)
        if root is None or before is None or (trainer is not None and trainer.global_step):
            return
        for version in set(run_folders.versions(root)) - set(before):
            folder = run_folders.version_dir(root, version)
            if not any(folder.rglob("*.ckpt")):
                shutil.rmtree(folder, ignore_errors=True)
        if not before and root.is_dir() and not any(root.iterdir()):
            root.rmdir()

    def _located(self, err: SettingError) -> InputError:
        """``err`` as one line naming the flag or the config file and line that set it: a
        library's parameter name (``batch_size``) is found among the parsed keys
        (``data.batch_size``) by its value."""
        key = err.name
        if "." not in key:
            subcommand = self.config.get("subcommand")
            config = self.config[subcommand] if subcommand else self.config
            found = [k for k, v in config.items() if k.split(".")[-1] == key
                     and str(v) == str(err.value)]  # several with links (data.bptt, model.bptt)
            given = [k for k in found if usage.set_by(k, err.value, self._args)]
            key = (given or found or [key])[0]
        return InputError(f"{usage.where_set(key, err.value, self._args)}: expected "
                          f"{err.expected}")

    def instantiate_classes(self) -> None:
        """As Lightning, with a bad value a constructor refuses (``SettingError``: placed on
        its flag or config line) or any other of synlm's errors (a corpus it cannot read,
        ``CorpusError``), also from inside a link's computation, which jsonargparse wraps,
        raised as it is; any other exception as Lightning raises it."""
        try:
            super().instantiate_classes()
        except Exception as err:
            cause = _input_cause(err)
            if isinstance(cause, SettingError):
                raise self._located(cause) from cause
            if cause is not None and cause is not err:
                raise cause from None
            raise
        # Lightning records every instantiation link's value among the recipe's
        # hyperparameters, also one the chosen recipe does not take (SyntaxLM: no actions);
        # a checkpoint's hyperparameters must rebuild the recipe
        if ACTIONS_LINK not in inspect.signature(type(self.model)).parameters:
            self.model.hparams.pop(ACTIONS_LINK, None)

    def _parse_ckpt_path(self) -> None:
        """As Lightning: the hyperparameters of the checkpoint ``--ckpt_path`` names are read
        over the config, as the arguments of the recipe they record (``_class_path``) or,
        where a checkpoint records none (a ``TransitionLM`` saved before it did), of the
        recipe the config names; components saved in an earlier form are read in today's
        (``RecordsInit.upgraded``). Unlike Lightning, a recipe argument given as a flag
        (``--model.beam_size=2``, ``--model.max_memory_mb=8192``) is the command line's, not
        the checkpoint's: what a test searches with changes without a new checkpoint."""
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        config = self.config[subcommand]
        hparams = dict(self._checkpoint_hparams)  # as parse_arguments read them
        hparams.pop("_instantiator", None)
        hparams = {key: value for key, value in hparams.items()
                   if not usage.flag_given(f"model.init_args.{key}", self._args)}
        if not hparams:
            return
        recipe = {"class_path": hparams.pop("_class_path", config.model.class_path),
                  "dict_kwargs": upgraded_config(hparams)}
        self.config = self.parser.parse_object({subcommand: {"model": recipe}}, self.config)

    def init_parser(self, **kwargs: Any) -> SynLMArgumentParser:
        kwargs.setdefault("dump_header", [f"synlm {__version__}"])
        kwargs.setdefault("allow_abbrev", False)  # --trainer.max_epoch is a typo, not a prefix
        kwargs.setdefault("prog", "synlm")
        parser = SynLMArgumentParser(**kwargs)
        parser.args, parser.raises = self._args, self._raises
        parser.add_argument("-c", "--config", action=ConfigChain,
                            help="Path to a YAML config (after the bases its config: key "
                                 "names); repeat to stack several.")
        return parser

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.set_defaults({"model": {"class_path": DEFAULT_RECIPE}})
        # top-level ``optimizer:``/``lr_scheduler:`` (``--optimizer=AdamW --optimizer.lr=5e-4``),
        # handed to the model, which builds them over its parameter groups
        parser.add_optimizer_args((Optimizer,), link_to="model.init_args.optimizer")
        parser.add_lr_scheduler_args(LRSchedulerTypeTuple, link_to="model.init_args.lr_scheduler")
        # what the data decides, for the recipes that take it: the vocabulary's size (every
        # recipe); SyntaxLM's window, on parsing (a recipe without one skips the link); a
        # transition LM's action vocabulary, once the data is built
        parser.link_arguments("data", "model.init_args.vocab_size",
                              compute_fn=lambda dm: dm.vocab_size, apply_on="instantiate")
        parser.link_arguments("data.bptt", "model.init_args.bptt")
        parser.link_arguments("data", f"model.init_args.{ACTIONS_LINK}",
                              compute_fn=lambda dm: len(dm.action_vocab)
                              if dm.mode == ACTIONS_MODE else 0, apply_on="instantiate")
        parser.add_argument("--tensorboard", type=bool, default=False,
                            help="Also log to TensorBoard, in the run's tensorboard/ folder.")

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """Then the run's folder: ``trainer.default_root_dir`` (``runs/<config>`` by
        default) holds one ``version_N`` per run; ``--ckpt_path last`` continues the newest
        run that saved one, in its folder; any other ``--ckpt_path`` may name a run folder
        and is checked here (before Lightning reads its hyperparameters), so that a missing
        or damaged checkpoint is one line."""
        super().parse_arguments(parser, args)
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        trainer = config.trainer
        if trainer.default_root_dir is None:
            given = [value for _, _, value in usage.flag_values(self._args, *usage.CONFIG_FLAGS)]
            trainer.default_root_dir = str(Path("runs") / run_folders.run_name(given))
        self._continued: tuple[int, int] | None = None  # (version, global step)
        root, fit = Path(trainer.default_root_dir), subcommand == "fit"
        ckpt_path, version = config.get("ckpt_path"), None
        if fit and ckpt_path == "best":
            raise run_folders.best_to_fit(root)
        if ckpt_path in run_folders.WHICH:
            found = run_folders.latest(root, ckpt_path, runs.best_in_run)
            if found is None:
                if not fit:
                    raise run_folders.none_under(root, ckpt_path)
                rank_zero_info(f"--ckpt_path last: no run under {root} saved a checkpoint "
                               "yet; starting a new run")
                config.ckpt_path = None
            else:
                version, config.ckpt_path = found[0], str(found[1])
        elif ckpt_path is not None and ckpt_path not in LIGHTNING_CKPT_NAMES:
            config.ckpt_path = str(run_folders.resolve_checkpoint(
                ckpt_path, runs.best_in_run, folder="last" if fit else "best"))
        ckpt_path = config.get("ckpt_path")
        recorded = None  # the thread count of the run a fit continues
        #: the checkpoint's hyperparameters, read over the config next (``_parse_ckpt_path``)
        self._checkpoint_hparams: dict[str, Any] = {}
        if ckpt_path is not None and ckpt_path not in LIGHTNING_CKPT_NAMES:
            saved = runs.read_checkpoint(ckpt_path)  # readable?
            self._checkpoint_hparams = dict(saved.get("hyper_parameters") or {})
            if fit and version is not None:
                self._continued = (version, saved["global_step"])
            if fit and isinstance(saved.get(THREADS_KEY), int):
                recorded = saved[THREADS_KEY]
        init_from = config.model.init_args.get("init_from") if "model" in config else None
        if fit and init_from and ckpt_path is None:
            runs.read_checkpoint(init_from, "model.init_from")  # before the run's folder
        self._root, self._versions_before = root, run_folders.versions(root)
        try:
            checks.check_trainer(trainer)
            _check_recipe_data(config.model.class_path, config.data.mode)
            optimizer = config.get("optimizer")
            if fit and optimizer is not None:
                checks.check_optimizer(optimizer.class_path, optimizer.init_args.as_dict())
        except SettingError as err:
            raise self._located(err) from err
        if self._threads is not None:  # the count (a continued fit's: its checkpoint's), warnings
            self._threads = self._threads.resume(recorded)
            if rank_zero_only.rank == 0:
                self._threads.report()

    def _threads_line(self) -> tuple[int, str] | None:
        """(count, why) for the run's summary, as synlm.runtime.threads chose them."""
        return (self._threads.count, self._threads.why) if self._threads else None

    def after_fit(self) -> None:
        """The run's summary: its folder, best and last checkpoints, the next commands."""
        checkpoint = self._run_checkpoint()
        best, last = (checkpoint.saved("best"), checkpoint.saved("last")) if checkpoint \
            else (None, None)
        unchanged = self._continued is not None and \
            self._continued[1] == self.trainer.global_step
        self._summary(fit_summary(Path(self.trainer.log_dir or "."), best, last,
                                  finished_before=self._continued[1] if unchanged else None,
                                  threads=self._threads_line()))

    def after_validate(self) -> None:
        self._evaluation_summary("validate")

    def after_test(self) -> None:
        self._evaluation_summary("test")

    def _evaluation_summary(self, subcommand: str) -> None:
        path = self.config_init[subcommand].get("ckpt_path")
        saved = None
        if path:
            checkpoint = runs.read_checkpoint(path)
            saved = Saved(Path(path), checkpoint["global_step"], runs.validation(checkpoint))
        self._summary(evaluation_summary(subcommand, saved, Path(self.trainer.log_dir or "."),
                                         threads=self._threads_line()))

    def _summary(self, lines: list[str]) -> None:
        if self.trainer.is_global_zero:
            print("\n".join(lines), flush=True)

    def _evaluation_folder(self, ckpt_path: str | None) -> tuple[Path, str] | None:
        """Where ``validate|test|predict`` of one of a run's checkpoints log: in that run's
        folder (``run_folders.evaluation_folder``), unless ``--trainer.default_root_dir``
        says where; ``None``: a new ``version_N`` under the root."""
        if self.subcommand in (None, "fit") or ckpt_path in (None, *LIGHTNING_CKPT_NAMES) \
                or usage.flag_values(self._args, "--trainer.default_root_dir"):
            return None
        return run_folders.evaluation_folder(Path(str(ckpt_path)), self.subcommand)

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        """The run's loggers: ``metrics.csv`` always (``RunCSVLogger``, first, so that the
        checkpoints and ``config.yaml`` go to its ``version_N``; ``validate|test|predict`` of
        a run's checkpoint log in that run's folder, ``_evaluation_folder``), the configured logger
        (wandb, ...) beside it, TensorBoard with ``--tensorboard``, and the learning rate
        among the logged values (``LearningRateMonitor``); ``logger: false`` logs nothing
        and keeps only the checkpoints in the next ``version_N``. Callbacks: the configured
        ones, ``RunCheckpoint`` (fit only, unless ``enable_checkpointing: false``) and
        ``TokensPerSecond``; Lightning's default progress bar becomes ``SynLMProgressBar``, and
        with stderr not a terminal (a log file) ``ProgressLines`` prints, with a bar or without."""
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        root = Path(config.trainer.default_root_dir)
        configured = config.trainer.logger
        if configured is False:  # Lightning then writes in default_root_dir: make it the run's
            version = self._continued[0] if self._continued else run_folders.next_version(root)
            kwargs["default_root_dir"] = str(run_folders.version_dir(root, version))
        else:
            version, step = self._continued or (None, None)
            evaluated = self._evaluation_folder(config.get("ckpt_path"))
            csv = runs.RunCSVLogger(*evaluated) if evaluated else \
                runs.RunCSVLogger(root, version, resume_step=step)
            extra = [] if configured in (None, True) else (
                list(configured) if isinstance(configured, Iterable) else [configured])
            if config.get("tensorboard"):
                extra.append(runs.run_tensorboard_logger(csv))
            kwargs["logger"] = [csv, *extra]
        callbacks = config.trainer.callbacks or []
        checkpointing = self.subcommand in (None, "fit") \
            and config.trainer.enable_checkpointing is not False
        if not checkpointing:  # validate/test/predict save nothing
            kwargs["enable_checkpointing"] = False
        kwargs["callbacks"] = [*(callbacks if isinstance(callbacks, list) else [callbacks]),
                               *([RunCheckpoint()] if checkpointing else []),
                               TokensPerSecond()]
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (MisconfigurationException, ValueError) as err:  # Lightning's, on a value
            raise InputError(f"--trainer: {str(err).strip().splitlines()[0]}") from err
        if trainer.loggers and not any(isinstance(c, LearningRateMonitor)
                                       for c in trainer.callbacks):
            trainer.callbacks.append(LearningRateMonitor())
        bar = trainer.progress_bar_callback
        if type(bar) is RichProgressBar:  # Lightning's default, not one configured
            trainer.callbacks[trainer.callbacks.index(bar)] = SynLMProgressBar()
        if not sys.stderr.isatty():  # a log file, bar or not: lines it can show
            trainer.callbacks.append(ProgressLines())
        for i, callback in enumerate(trainer.callbacks):
            if type(callback) in (ModelSummary, RichModelSummary):  # Lightning's default too
                trainer.callbacks[i] = ParameterSummary()
        if isinstance(trainer.accelerator, CPUAccelerator):
            why = f" ({self._threads.why})" if self._threads else ""
            threads = torch.get_num_threads()
            rank_zero_info(f"torch uses {threads} thread{'s' * (threads != 1)}{why} on "
                           f"{os.cpu_count()} CPUs; SYNLM_THREADS=N chooses")
        return trainer


def from_config(path: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """The model the CLI builds from the config ``path`` plus ``--key=value`` overrides,
    untrained (``synlm.from_config``, for notebooks and scripts); the DataModule it would
    train on is ``model.datamodule``. ``path`` may name a shipped config (``awd_lstm.yaml``).
    A bad value is an ``InputError``."""
    args = [*usage.resolve_configs(["--config", str(path)]), *overrides]
    problem = usage.config_error(args)  # a missing or broken config, as the CLI says it
    if problem:
        raise InputError(problem)
    cli = SynLMCLI(args=args, run=False)
    model = cli.model
    model.datamodule = cli.datamodule
    return model


def build_run(args: Sequence[str]) -> tuple[pl.Trainer, Recipe, SynLMDataModule]:
    """The trainer, model and DataModule the CLI builds from ``args`` (``fit``'s options
    without the subcommand), not yet run: ``synlm generate``'s reverse LM. A bad value is
    an ``InputError``."""
    problem = usage.config_error(list(args))
    if problem:
        raise InputError(problem)
    cli = SynLMCLI(args=list(args), run=False)
    return cli.trainer, cli.model, cli.datamodule


def with_saved_config(args: list[str]) -> list[str]:
    """``validate|test|predict --ckpt_path CKPT`` without ``--config``: the config the
    checkpoint's run was trained with goes first, the other flags override it."""
    if args[:1] not in (["validate"], ["test"], ["predict"]):
        return args
    ckpts = usage.flag_values(args, "--ckpt_path")
    if usage.flag_values(args, *usage.CONFIG_FLAGS) or not ckpts:
        return args
    ckpt = ckpts[-1][2]
    if ckpt in run_folders.WHICH:  # checked before torch loads too (synlm.runtime.inputs)
        raise run_folders.unnamed_run(ckpt)
    if ckpt in LIGHTNING_CKPT_NAMES:
        return args
    saved = upgraded_config(yaml.safe_load(runs.saved_config(ckpt)))
    return [args[0], "--config", yaml.safe_dump(saved, sort_keys=False), *args[1:]]


def _check_recipe_data(class_path: str, mode: str) -> None:
    """A recipe that reads action sequences (it takes ``n_actions``) trains on the data's
    ``mode: actions``, and only it does: a ``SettingError`` on ``data.mode`` otherwise."""
    module, _, name = class_path.rpartition(".")
    recipe = getattr(importlib.import_module(module), name)
    takes_actions = ACTIONS_LINK in inspect.signature(recipe).parameters
    if takes_actions != (mode == ACTIONS_MODE):
        expected = ACTIONS_MODE if takes_actions else f"a mode other than {ACTIONS_MODE}"
        raise SettingError("data.mode", mode, f"{expected} for the recipe {name}")


def _input_cause(err: BaseException) -> SynLMError | None:
    """The first of ``err`` and its causes that is an error synlm raised on purpose."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, SynLMError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def run(args: list[str], threads: ThreadChoice | None = None) -> int:
    """Run ``fit|validate|test|predict`` with ``args`` (the subcommand first); ``threads``
    is the thread count ``synlm.runtime.threads.configure_threads`` chose and why (a continued fit
    goes on with its checkpoint's), for the log and the summary; the
config files are checked already (``usage.config_error``)."""
    try:
        try:
            SynLMCLI(args=with_saved_config(usage.resolve_configs(args)), threads=threads)
        except (MisconfigurationException, ValueError) as err:
            if isinstance(err, SynLMError) or not _raised_by_lightning(err):
                raise
            message = " ".join(str(err).split())  # Lightning's, on a value: one line
            raise InputError(f"Lightning: {message}") from err
    except SynLMError as err:  # any other exception keeps its traceback
        return report(err, "synlm: error")
    return 0


def _raised_by_lightning(err: BaseException) -> bool:
    """Whether Lightning's own code raised ``err`` (a value it refuses once the run starts,
    e.g. a ``val_check_interval`` above the epoch's batches), not code it called."""
    frames = traceback.extract_tb(err.__traceback__)
    root = os.path.dirname(pl.__file__).rsplit(os.sep, 1)[0]  # site-packages/lightning
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(root + os.sep)
