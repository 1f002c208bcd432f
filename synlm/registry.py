"""The components themselves: importing this module imports every component package, which
registers their classes for short ``class_path`` names in configs (jsonargparse resolves
among imported subclasses). What they are by name, without importing them, is
``synlm.catalog``."""

from __future__ import annotations

import synlm.backbones
import synlm.callbacks
import synlm.data.generation_corpora
import synlm.data.synthetic
import synlm.data.treebanks
import synlm.heads


def subclasses(base: type) -> list[type]:
    """Every imported subclass of ``base``, at any depth, by name."""
    found, stack = set(), list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        found.add(cls)
    return sorted(found, key=lambda c: c.__name__)


def backbone_classes() -> list[type]:
    """Every backbone synlm defines (the base classes in ``backbones.base`` excluded)."""
    return [c for c in subclasses(synlm.backbones.Backbone)
            if c.__module__.startswith("synlm.backbones.")
            and c.__module__ != "synlm.backbones.base"]
