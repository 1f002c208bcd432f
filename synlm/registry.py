"""What synlm defines, by short name: backbones, heads, corpora and shipped configs.

Importing this module imports every component package, which also registers their classes
for short ``class_path`` names in configs (jsonargparse resolves among imported subclasses).
"""

from __future__ import annotations

from pathlib import Path

import synlm.backbones
import synlm.callbacks
import synlm.data.generation_corpora
import synlm.data.synthetic
import synlm.data.treebanks
import synlm.heads
from synlm.backbones.base import LayerInsert
from synlm.data.corpora import Corpus
from synlm.data.subwords import Subwords

#: The shipped configs, inside the package (``configs/`` in a checkout links here), so that
#: ``--config quickstart.yaml`` and ``synlm ls`` work after a wheel install too.
REPO_CONFIGS = Path(__file__).resolve().parent / "configs"


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


def list_components() -> dict[str, list[str]]:
    """Backbones, layer inserts, heads, corpora, subword vocabularies and shipped configs, by
    short name."""
    configs = sorted(str(p.relative_to(REPO_CONFIGS)) for p in REPO_CONFIGS.rglob("*.yaml"))
    return {
        "backbones": [c.__name__ for c in backbone_classes()],
        "inserts": [c.__name__ for c in subclasses(LayerInsert)
                    if c.__module__.startswith("synlm.")],
        "heads": [c.__name__ for c in subclasses(synlm.heads.SyntaxHead)],
        "corpora": [c.__name__ for c in subclasses(Corpus) if "name" in vars(c)],
        "subwords": [c.__name__ for c in subclasses(Subwords)],
        "configs": configs,
    }
