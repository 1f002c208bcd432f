"""Trees, targets, decoders. Imports nothing of synlm above this floor.

The names below are imported on first use (PEP 562): importing a light submodule
(``synlm.syntax.shapes``) or ``synlm.syntax`` itself loads neither nltk nor numpy, so that the
command lines answer ``--help`` and a wrong flag at once."""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and the submodule that defines it.
_SOURCES = {
    "BASELINES": "shapes",
    "ReaderError": "readers",
    "Sentence": "sentence",
    "SyntaxTargets": "targets",
    "baseline_tree": "distances",
    "binarize": "trees",
    "build_targets": "targets",
    "cached_targets": "targets",
    "distances_to_tree": "distances",
    "max_distance": "targets",
    "palm_tree": "distances",
    "project_heads": "heads",
    "read_brackets": "trees",
    "read_conllu": "readers",
    "read_malt_zip": "readers",
    "read_trees": "readers",
    "skeleton": "trees",
    "spans": "trees",
    "to_bracket": "trees",
    "tree_to_distances": "distances",
    "tree_to_heads": "heads",
}
__all__ = sorted(_SOURCES)


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_SOURCES[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
