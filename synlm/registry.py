"""What synlm defines, by short name: backbones, heads, corpora and shipped configs.

Importing this module imports every component package, which also registers their classes
for short ``class_path`` names in configs (jsonargparse resolves among imported subclasses).
"""

from __future__ import annotations

import re
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


def _first_sentence(text: str | None) -> str:
    """The first sentence of a text's first paragraph, on one line (a period followed by a
    capital ends it, so "et al. 2019" does not)."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", paragraph)[0]


def config_summary(path: Path) -> str:
    """A shipped config's opening comment's first sentence (what it trains), or ``""``."""
    comment = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    return _first_sentence("\n".join(comment))


def component_summaries() -> dict[str, list[tuple[str, str]]]:
    """``list_components`` with one line each: a class's docstring's first sentence, a
    config's first comment line."""
    classes = {c.__name__: c for kind in (backbone_classes(), subclasses(LayerInsert),
                                          subclasses(synlm.heads.SyntaxHead),
                                          subclasses(Corpus), subclasses(Subwords))
               for c in kind}
    out: dict[str, list[tuple[str, str]]] = {}
    for kind, names in list_components().items():
        if kind == "configs":
            out[kind] = [(n, config_summary(REPO_CONFIGS / n)) for n in names]
        else:
            out[kind] = [(n, _first_sentence(classes[n].__doc__)) for n in names]
    return out


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
