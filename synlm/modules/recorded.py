"""Components that remember how they were built: ``{"class_path", "init_args"}``, the form a
config file gives them in. A model built in Python thus saves a config that rebuilds it
(``SyntaxLM`` puts its backbone's and heads' in its hyperparameters), and ``build`` turns
such a config back into the component, also nested (a backbone's ``inserts``)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from synlm.errors import InputError

#: What a config may hold as a value: these as they are, lists and dicts of them.
PLAIN = (str, int, float, bool, type(None))


class RecordsInit:
    """Mixin: the arguments of the constructor call, defaults filled in, as ``init_config``.

    Recorded in ``__new__``, before any ``__init__`` runs, so subclasses need do nothing and
    their signatures (what the CLI reads) stay as written; turned into a config when read.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        try:
            bound = inspect.signature(cls.__init__).bind(self, *args, **kwargs)
        except TypeError:  # copy and pickle call __new__ bare, then restore the recorded dict
            return self  # (a bad call of the constructor itself fails in __init__)
        bound.apply_defaults()
        self.__dict__["_init_args"] = dict(list(bound.arguments.items())[1:])  # without self
        return self

    @classmethod
    def upgraded(cls, init_args: dict[str, Any]) -> dict[str, Any]:
        """``init_args`` saved by an earlier synlm (a checkpoint's hyperparameters, a run's
        ``config.yaml``) as this class takes them today: as they are, unless a class whose
        arguments changed says how (``upgraded_config`` applies it)."""
        return init_args

    @property
    def init_config(self) -> dict[str, Any]:
        """``{"class_path", "init_args"}`` that ``build`` turns into an equal component."""
        cls = type(self)
        return {"class_path": f"{cls.__module__}.{cls.__qualname__}",
                "init_args": {name: plain(value, f"{cls.__name__}.{name}")
                              for name, value in self.__dict__["_init_args"].items()}}


def plain(value: Any, where: str) -> Any:
    """``value`` as a config value: recorded components as their config, dataclasses as dicts,
    tuples as lists, sets as sorted lists."""
    if isinstance(value, RecordsInit):
        return value.init_config
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), where) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v, where) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v, where) for v in value)
    if isinstance(value, Mapping):
        return {k: plain(v, where) for k, v in value.items()}
    if isinstance(value, PLAIN):
        return value
    raise InputError(f"{where}: a {type(value).__name__} cannot be saved in a config; give "
                     "a number, a string, a list, a dict or a synlm component")


def upgraded_config(tree: Any) -> Any:
    """``tree`` (a config, a checkpoint's hyperparameters) with each component's
    ``init_args`` as its class takes them today (``RecordsInit.upgraded``); what names no
    importable synlm component is left as it is."""
    if isinstance(tree, list):
        return [upgraded_config(value) for value in tree]
    if not isinstance(tree, Mapping):
        return tree
    tree = {key: upgraded_config(value) for key, value in tree.items()}
    cls = _component_class(tree.get("class_path"))
    if cls is not None and isinstance(tree.get("init_args"), Mapping):
        tree["init_args"] = cls.upgraded(dict(tree["init_args"]))
    return tree


def _component_class(class_path: Any) -> type[RecordsInit] | None:
    module, _, name = class_path.rpartition(".") if isinstance(class_path, str) else ("", "", "")
    try:
        cls = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError, ValueError):
        return None
    return cls if isinstance(cls, type) and issubclass(cls, RecordsInit) else None


def build(config: Any) -> Any:
    """The component a ``{"class_path", "init_args"}`` config describes, components among its
    arguments built first; anything else is returned as it is."""
    if isinstance(config, list):
        return [build(c) for c in config]
    if not (isinstance(config, Mapping) and "class_path" in config):
        return config
    module, _, name = config["class_path"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise InputError(f"class_path {config['class_path']!r}: no such class") from None
    if not (isinstance(cls, type) and issubclass(cls, RecordsInit)):
        raise InputError(f"class_path {config['class_path']!r}: not a synlm component")
    init_args = cls.upgraded(dict(config.get("init_args", {})))
    return cls(**{k: build(v) for k, v in init_args.items()})
