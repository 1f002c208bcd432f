"""The flags ``synlm fit|validate|test|predict`` take, read from the source of what they
configure (Lightning's ``Trainer`` and its subcommand methods, synlm's DataModule and
recipes) without importing it: a mistyped flag is one line before torch loads, as the
command line would say it seconds later. What lies deeper than a class's own arguments
(``--model.backbone.init_args.hidden_size``: the backbone a config names) is left to the
command line."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path

from synlm.catalog import PACKAGE
from synlm.runtime.usage import FULL_HELP, config_files, did_you_mean, flag_values, with_bases

#: LightningCLI's own top-level keys (``config``, ``print_config``) and those synlm's command
#: line adds (``synlm.lightning_cli.SynLMCLI``).
CLI_KEYS = ("config", "print_config", "seed_everything", "trainer", "model", "data",
            "optimizer", "lr_scheduler", "tensorboard")
#: What LightningCLI takes of a ``Trainer`` method's arguments as flags: not these, which it
#: passes itself.
PASSED_BY_THE_CLI = {"self", "model", "train_dataloaders", "val_dataloaders", "dataloaders",
                     "datamodule"}
#: Keys of a subclass argument that are no argument of the class.
SUBCLASS_KEYS = {"class_path", "init_args", "dict_kwargs", "help"}


def _arguments(path: Path, cls: str, method: str = "__init__") -> set[str]:
    """The argument names of ``cls.method`` as the source file ``path`` defines it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    arguments = item.args
                    return {a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                            *arguments.kwonlyargs)} - {"self"}
    raise LookupError(f"{path}: no {cls}.{method}")


def _trainer_file() -> Path:
    spec = importlib.util.find_spec("lightning")  # found, not imported
    if spec is None or spec.origin is None:
        raise LookupError("lightning is not installed")
    return Path(spec.origin).parent / "pytorch" / "trainer" / "trainer.py"


@functools.cache
def _trainer(method: str) -> frozenset[str]:
    return frozenset(_arguments(_trainer_file(), "Trainer", method))


@functools.cache
def _data() -> frozenset[str]:
    return frozenset(_arguments(PACKAGE / "data" / "datamodule.py", "SynLMDataModule"))


#: A class statement on one line: its name and its bases.
_CLASS = re.compile(r"^class (\w+)\(([^)]*)\):", re.MULTILINE)


@functools.cache
def _recipe_sources() -> tuple[tuple[str, Path], ...]:
    """synlm's recipes (the classes deriving from ``LightningModule``), each with its file,
    found by their class statements (``synlm.catalog`` parses every module: slower)."""
    statements = [(name, {base.split(".")[-1].strip() for base in bases.split(",")}, path)
                  for path in sorted(PACKAGE.rglob("*.py"))
                  for name, bases in _CLASS.findall(path.read_text(encoding="utf-8"))]
    found: dict[str, Path] = {}
    parents = {"LightningModule"}
    while parents:
        new = {name: path for name, bases, path in statements
               if bases & parents and name not in found}
        found.update(new)
        parents = set(new)
    return tuple(sorted(found.items()))


@functools.cache
def _recipes() -> frozenset[str]:
    """The arguments of every recipe synlm defines (a config may choose any)."""
    found: set[str] = set()
    for name, path in _recipe_sources():
        found |= _arguments(path, name)
    return frozenset(found)


def _top(command: str) -> frozenset[str]:
    return frozenset({*CLI_KEYS, *(_trainer(command) - PASSED_BY_THE_CLI)})


def unknown_flag(command: str, args: Sequence[str]) -> str | None:
    """The first flag of ``args`` that ``synlm COMMAND`` does not take, as the one line it
    says (``--trainer.max_epoch=3: not an option; did you mean --trainer.max_epochs?``);
    None when each flag's name is known as far as the source tells. Unreadable sources
    leave every flag to the command line."""
    try:
        top, trainer, data, recipes = _top(command), _trainer("__init__"), _data(), _recipes()
    except (LookupError, OSError, SyntaxError):
        return None
    for arg in args:
        if not arg.startswith("--") or arg.split("=")[0] in ("--help", FULL_HELP):
            continue
        parts = arg[2:].split("=", 1)[0].removesuffix("+").split(".")
        if parts[0] not in top:
            return _said(command, arg, parts[0], sorted(top))
        known = {"trainer": trainer, "data": data,
                 "model": None if _another_recipe(args) else recipes}.get(parts[0])
        nested = len(parts) > 2 and parts[1] == "init_args"
        name = parts[2 if nested else 1] if len(parts) > 1 else None
        if known is not None and name is not None and name not in known | SUBCLASS_KEYS:
            prefix = f"{parts[0]}.init_args" if nested else parts[0]
            return _said(command, arg, f"{prefix}.{name}",
                         [f"{prefix}.{k}" for k in sorted(known)])
    return None


def _another_recipe(args: Sequence[str]) -> bool:
    """Whether the command line or a config it reads (with its bases) names a recipe that is
    not synlm's (a LightningModule of the user's), whose arguments only the command line can
    tell."""
    ours = {name for recipe, path in _recipe_sources()
            for name in (recipe, ".".join(("synlm", *path.relative_to(PACKAGE).with_suffix(
                "").parts, recipe)))}
    named = [value for _, _, value in flag_values(args, "--model", "--model.class_path")]
    for path in config_files(args):  # each file of each chain
        loaded = next(iter(with_bases(path)[-1:]), (path, {}))[1]
        model = loaded.get("model")
        named += [model["class_path"]] if isinstance(model, dict) and "class_path" in model \
            else []
        named += [loaded["model.class_path"]] if "model.class_path" in loaded else []
    return any(isinstance(name, str) and "\n" not in name and not name.startswith("{")
               and name not in ours for name in named)


def _said(command: str, arg: str, name: str, options: list[str]) -> str:
    """``arg`` refused: ``name``, the part of it that names nothing, among ``options``."""
    hint = did_you_mean("--" + name, ["--" + o for o in options])
    return f"{arg}: not an option{hint} (synlm {command} {FULL_HELP} lists every option)"
