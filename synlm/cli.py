"""The `synlm` command: LightningCLI (fit, validate, test, predict) plus `parse`, `ls`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import jsonargparse
import lightning.pytorch as pl
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.loggers import WandbLogger

# Imported for their side effect too: jsonargparse resolves short class names
# (``class_path: AWDLSTM``) among the subclasses that have been imported.
import synlm
import synlm.backbones
import synlm.callbacks
import synlm.data.synthetic
import synlm.data.treebanks
import synlm.heads
from synlm.data.corpora import Corpus, CorpusError
from synlm.data.datamodule import SynLMDataModule
from synlm.lm import NonFiniteLossError, SyntaxLM

jsonargparse.set_parsing_settings(omegaconf_absolute_to_relative_paths=True)

REPO_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


class RunCheckpoint(ModelCheckpoint):
    """``epoch{epoch:03d}-step{step:06d}.ckpt`` (best by ``val/ppl``) plus ``last.ckpt``
    (at every validation and when training ends), in ``<default_root_dir>/checkpoints``
    so ``--ckpt_path last`` finds the previous run."""

    def __init__(self) -> None:
        super().__init__(filename="epoch{epoch:03d}-step{step:06d}", monitor="val/ppl",
                         mode="min", save_last=True, auto_insert_metric_name=False,
                         enable_version_counter=False)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Also write ``last.ckpt`` when training stops between validations (max_steps)."""
        if trainer.global_step != self._last_global_step_saved:
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))


class SaveRunConfig(SaveConfigCallback):
    """Save the resolved config in the run directory (overwriting a previous one) and
    push it to wandb when wandb is the logger."""

    def save_config(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                    stage: str) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                config = yaml.safe_load(self.parser.dump(self.config, skip_none=False))
                logger.experiment.config.update(config, allow_val_change=True)


class SynLMArgumentParser(LightningArgumentParser):
    """Names the valid classes when a ``class_path`` cannot be resolved."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if "import path" in message:
            known = "; ".join(f"{kind}: {', '.join(names)}"
                              for kind, names in list_components().items() if kind != "configs")
            message = f"{message.rstrip()}\nvalid short class names: {known}"
        super().error(message, ex)


class SynLMCLI(LightningCLI):
    """LightningCLI in ``omegaconf+`` mode: ``${...}`` interpolations see dotted overrides."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parser_kwargs", {"parser_mode": "omegaconf+"})
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("trainer_defaults", {"callbacks": [RunCheckpoint()]})
        kwargs.setdefault("auto_configure_optimizers", False)
        super().__init__(SyntaxLM, SynLMDataModule, *args, **kwargs)

    def init_parser(self, **kwargs: Any) -> SynLMArgumentParser:
        kwargs.setdefault("dump_header", [f"synlm {synlm.__version__}"])
        parser = SynLMArgumentParser(**kwargs)
        parser.add_argument("-c", "--config", action=jsonargparse.ActionConfigFile,
                            help="Path to a YAML config; repeat to stack several.")
        return parser

    def add_arguments_to_parser(self, parser: jsonargparse.ArgumentParser) -> None:
        parser.link_arguments("data.bptt", "model.bptt")
        parser.link_arguments("data", "model.vocab_size", compute_fn=lambda dm: dm.vocab_size,
                              apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        trainer = config.trainer
        if trainer.default_root_dir is None:
            stem = Path(str(config.config[0])).stem if config.get("config") else "default"
            trainer.default_root_dir = str(Path("runs") / stem)
        if trainer.logger in (None, True):
            # No logger configured: <root>/logs/version_N/metrics.csv, no service needed.
            trainer.logger = jsonargparse.Namespace(
                class_path="lightning.pytorch.loggers.CSVLogger",
                init_args=jsonargparse.Namespace(save_dir=trainer.default_root_dir,
                                                 name="logs"))


    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        trainer = super().instantiate_trainer(**kwargs)
        # Known before fit starts, so that ``--ckpt_path last`` can find the last run.
        for callback in trainer.checkpoint_callbacks:
            if isinstance(callback, RunCheckpoint) and callback.dirpath is None:
                callback.dirpath = str(Path(trainer.default_root_dir) / "checkpoints")
        return trainer


def build_from_config(path: str, overrides: Sequence[str] = ()
                      ) -> tuple[SyntaxLM, SynLMDataModule]:
    """The model and DataModule the CLI builds from a config (used by notebooks)."""
    cli = SynLMCLI(args=["--config", str(path), *overrides], run=False)
    return cli.model, cli.datamodule


def subclasses(base: type) -> list[type]:
    """Every imported subclass of ``base``, at any depth, by name."""
    found, stack = set(), list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        found.add(cls)
    return sorted(found, key=lambda c: c.__name__)


def list_components() -> dict[str, list[str]]:
    """Backbones, heads, corpora and shipped configs, by short name."""
    from synlm.backbones.base import Backbone
    from synlm.heads.base import SyntaxHead

    configs = sorted(str(p.relative_to(REPO_CONFIGS)) for p in REPO_CONFIGS.rglob("*.yaml"))
    return {
        "backbones": [c.__name__ for c in subclasses(Backbone)],
        "heads": [c.__name__ for c in subclasses(SyntaxHead)],
        "corpora": [c.__name__ for c in subclasses(Corpus) if "name" in vars(c)],
        "configs": configs,
    }


def _ls() -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table("kind", "names")
    for kind, names in list_components().items():
        table.add_row(kind, "\n".join(names) or "-")
    Console().print(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["ls"]:
        return _ls()
    if args[:1] == ["parse"]:
        from synlm.parse import main as parse_main

        return parse_main(args[1:])
    try:
        SynLMCLI(args=None if argv is None else args)
    except (CorpusError, NonFiniteLossError, ValueError) as err:
        print(f"synlm: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
