"""The JSON kinds a benchmark or results file's values must have, checked where a value is
first read so that a malformed file is a one-line error naming where it is (file, line or
record, key) and what was expected, never a ``TypeError`` or ``KeyError`` further on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from synlm.errors import InputError

#: The kinds a value may be asked to have, by the words an error says them in.
KINDS: dict[str, tuple[type, ...]] = {
    "a string": (str,), "true or false": (bool,), "a whole number": (int,),
    "a number": (int, float), "a list": (list,), "an object": (dict,)}


def shown(value: Any) -> str:
    """``value`` as JSON writes it, cut to 60 characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_kind(value: Any, kind: str) -> bool:
    """Whether ``value`` is of ``kind`` (a key of ``KINDS``); true or false is no number."""
    return isinstance(value, KINDS[kind]) and (kind == "true or false"
                                               or not isinstance(value, bool))


def typed(value: Any, kind: str, where: str, error: type[InputError] = InputError) -> Any:
    """``value`` when it is of ``kind``; else a one-line ``error``: ``{where} is {value};
    expected {kind}``."""
    if not is_kind(value, kind):
        raise error(f"{where} is {shown(value)}; expected {kind}")
    return value


def field(obj: Mapping[str, Any], key: str, kind: str, where: str,
          error: type[InputError] = InputError) -> Any:
    """``obj[key]``, there and of ``kind``; else a one-line ``error`` naming ``where`` and
    the key."""
    if key not in obj:
        raise error(f"{where}: no {key!r} ({kind})")
    return typed(obj[key], kind, f"{where}: {key!r}", error)
