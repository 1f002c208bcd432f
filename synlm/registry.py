"""The components themselves: importing this module imports every component package, which
registers their classes for short ``class_path`` names in configs (jsonargparse resolves
among imported subclasses), and ``recipe_class`` finds the recipe a config or checkpoint
names among them. What they are by name, without importing them, is ``synlm.catalog``."""

from __future__ import annotations

import lightning.pytorch as pl

import synlm.backbones
import synlm.callbacks
import synlm.data.generation_corpora
import synlm.data.synthetic
import synlm.data.treebanks
import synlm.heads
import synlm.lm
import synlm.transition.action_transformer
import synlm.transition.cag
import synlm.transition.gpst_lm
import synlm.transition.in_order_rnng
import synlm.transition.lm
import synlm.transition.pushdown_lm
import synlm.transition.rnng
from synlm import catalog


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


def recipe_class(name: str | None) -> type:
    """The LightningModule ``name`` names (``catalog.recipe_named``: short or full; None:
    ``SyntaxLM``) among the imported ones, as the catalog finds it in the source (a test
    checks they agree) without reading every file at each start."""
    imported = [c for c in subclasses(pl.LightningModule) if c.__module__.startswith("synlm.")]
    return catalog.recipe_named(name, {c.__name__: c for c in imported})
