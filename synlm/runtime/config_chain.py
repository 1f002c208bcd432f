"""A config and the bases it names (its ``config:`` key, ``usage.with_bases``), as the
parser reads them: each file of the chain applies like a ``--config`` given before the next
one (``synlm.lightning_cli.ConfigChain``). A mapping merges into what the files before it
set, a list or a value replaces it, a class named anew (another ``class_path``) keeps the
arguments of the old one that it takes. ``flattened`` is the chain as one file (``synlm
cp``), which imports a class only to learn what it takes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synlm.runtime.usage import BASE_KEY, class_parameters, with_bases

#: An interpolation that reaches a recipe's argument without the ``init_args`` level
#: (``${model.backbone.init_args.pretrained}``), as a config names it in ``model:``.
_RECIPE_INTERPOLATION = re.compile(r"\$\{model\.(?!class_path\b|init_args\b)")
_SUBCLASS_KEYS = ("class_path", "init_args")


def recipe_arguments_under_init_args(config: dict[str, Any]) -> dict[str, Any]:
    """A config file's keys with the recipe's arguments where the parser holds them, under
    ``model.init_args``: a ``model:`` block without ``class_path`` or ``init_args`` (the
    default recipe's arguments, as a config writes them), a dotted ``model.heads:``, and
    each interpolation ``${model.X...}`` that names them so (jsonargparse makes an
    interpolation relative to where it stands, so it must stand where the parser puts it)."""

    def interpolations(tree: Any) -> Any:
        if isinstance(tree, dict):
            return {key: interpolations(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [interpolations(value) for value in tree]
        return _RECIPE_INTERPOLATION.sub("${model.init_args.", tree) \
            if isinstance(tree, str) else tree

    placed: dict[str, Any] = {}
    for key, value in config.items():
        head, dot, rest = str(key).partition(".")
        if head == "model" and dot and rest.split(".")[0] not in _SUBCLASS_KEYS:
            key = f"model.init_args.{rest}"
        elif key == "model" and isinstance(value, dict) and value \
                and not set(value) & set(_SUBCLASS_KEYS):
            value = {"init_args": value}
        placed[key] = interpolations(value)
    return placed


def chain(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """``path`` and its bases, the deepest first, each file's keys without its ``config:``
    and with the recipe's arguments under ``model.init_args``."""
    return [(file, recipe_arguments_under_init_args(
        {key: value for key, value in loaded.items() if key != BASE_KEY}))
        for file, loaded in with_bases(path)]


def nested(config: dict[str, Any]) -> dict[str, Any]:
    """A file's keys with each dotted key (``trainer.max_epochs: 3``) written as blocks, in
    the order the file gives them."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        *parents, leaf = str(key).split(".")
        merge(out, _wrapped(parents, {leaf: value}))
    return out


def _wrapped(parents: list[str], value: dict[str, Any]) -> dict[str, Any]:
    for parent in reversed(parents):
        value = {parent: value}
    return value


def merge(into: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``config`` applied over ``into`` (changed in place, and returned): mappings merge,
    anything else replaces; a block that names another ``class_path`` than the one it
    replaces keeps those of the old class's ``init_args`` that the new class takes, as the
    parser does."""
    for key, value in config.items():
        before = into.get(key)
        if not (isinstance(value, dict) and isinstance(before, dict)):
            into[key] = value
            continue
        if "class_path" in value and value["class_path"] != before.get("class_path"):
            takes = class_parameters(value["class_path"])
            kept = {name: setting for name, setting in (before.get("init_args") or {}).items()
                    if takes is None or name in takes}
            before = into[key] = {"class_path": value["class_path"],
                                  **({"init_args": kept} if kept else {})}
        merge(before, value)
    return into


def flattened(path: Path) -> dict[str, Any]:
    """The config file ``path`` with its chain of bases applied, as one mapping that the
    parser reads as it reads the chain; the default recipe's arguments directly under
    ``model:`` (no ``init_args`` level), as configs write them."""
    merged: dict[str, Any] = {}
    for _, config in chain(path):
        merge(merged, nested(config))
    model = merged.get("model")
    if isinstance(model, dict) and set(model) == {"init_args"}:
        merged["model"] = model["init_args"]
    return merged
