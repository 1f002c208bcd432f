"""What synlm ships, read from its source files without importing them: the components by
kind (short class names and what each is) and the shipped configs. The kinds are what a
config may name by ``class_path``: the recipes (the LightningModules: ``SyntaxLM``, which
takes a backbone and heads, and ``TransitionLM``, which takes a transition model), the
backbones, layer inserts and heads, the transition models and the action Transformer's
attention policies, the corpora and subword vocabularies. ``synlm ls``, the CLI's "did you
mean" and its choice of the recipe a config names (``recipe``) answer from here at once,
before torch or Lightning are imported (``synlm.registry`` imports the classes themselves,
for jsonargparse and the loader; a test checks that the two agree)."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from synlm.errors import InputError

T = TypeVar("T")

PACKAGE = Path(__file__).resolve().parent
#: The shipped configs, inside the package (``configs/`` in a checkout links here), so that
#: ``--config quickstart.yaml`` and ``synlm ls`` work after a wheel install too.
REPO_CONFIGS = PACKAGE / "configs"


@dataclass(frozen=True)
class ClassSource:
    """A class as its source states it: its module, the names of its bases, its docstring
    and whether its body sets ``name`` (a corpus's registered name)."""

    name: str
    module: str
    bases: tuple[str, ...]
    doc: str
    sets_name: bool


def _sets_name(node: ast.ClassDef) -> bool:
    for statement in node.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "name" for t in targets):
            return True
    return False


def _base_name(node: ast.expr) -> str:
    """``Backbone`` for ``Backbone``, ``base.Backbone`` and ``Backbone[T]``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


@cache
def classes() -> list[ClassSource]:
    """Every top-level class in synlm's modules, module by module (a name that two modules
    define is there twice, once with each module)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("synlm", *path.relative_to(PACKAGE).with_suffix("").parts))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found.append(ClassSource(
                    node.name, module.removesuffix(".__init__"),
                    tuple(_base_name(b) for b in node.bases),
                    ast.get_docstring(node) or "", _sets_name(node)))
    return found


def descendants(base: str) -> list[ClassSource]:
    """The classes deriving from ``base``, at any depth, by name."""
    known = classes()
    found: dict[str, ClassSource] = {}
    stack = [base]
    while stack:
        parent = stack.pop()
        for cls in known:
            if parent in cls.bases and cls.name not in found:
                found[cls.name] = cls
                stack.append(cls.name)
    return sorted(found.values(), key=lambda c: c.name)


def first_sentence(text: str | None) -> str:
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
    return first_sentence("\n".join(comment))


def shipped_configs() -> list[str]:
    """The shipped configs, relative to ``REPO_CONFIGS`` (``data/ptb.yaml``)."""
    return sorted(str(p.relative_to(REPO_CONFIGS)) for p in REPO_CONFIGS.rglob("*.yaml"))


def _recipes() -> list[ClassSource]:
    """Every LightningModule synlm defines."""
    return [c for c in descendants("LightningModule") if c.module.startswith("synlm.")]


def recipe(name: str | None) -> ClassSource:
    """The recipe a config's ``model.class_path`` or a checkpoint's ``synlm.model_class``
    names (``recipe_named``), as its source states it."""
    return recipe_named(name, {c.name: c for c in _recipes()})


def recipe_named(name: str | None, recipes: Mapping[str, T]) -> T:
    """The one of ``recipes`` (by short class name) that ``name`` names, by short or full
    name (``TransitionLM`` or ``synlm.transition.lm.TransitionLM``); None names
    ``SyntaxLM``. An unknown name is an ``InputError`` listing the recipes, with the
    closest. (``synlm.registry.recipe_class`` asks the same of the imported classes.)"""
    if name is None:
        return recipes["SyntaxLM"]
    short = name.rpartition(".")[2]
    if short in recipes and (short == name or name.startswith("synlm.")):
        return recipes[short]
    listed = sorted(recipes)
    closest = difflib.get_close_matches(short, listed, n=1)
    raise InputError(f"model.class_path {name}: expected one of {', '.join(listed)}"
                     + (f"; did you mean {closest[0]}?" if closest else ""))


def _component_classes() -> dict[str, list[ClassSource]]:
    """The components by kind; a private class (``_Trained``, a shared base) is none."""
    found = {
        "recipes": _recipes(),
        "backbones": [c for c in descendants("Backbone")
                      if c.module.startswith("synlm.backbones.")
                      and c.module != "synlm.backbones.base"],
        "inserts": descendants("LayerInsert"),
        "heads": descendants("SyntaxHead"),
        "transition_models": descendants("TransitionModel"),
        "attention_policies": descendants("AttentionPolicy"),
        "corpora": [c for c in descendants("Corpus") if c.sets_name],
        "subwords": descendants("Subwords"),
    }
    return {kind: [c for c in classes if not c.name.startswith("_")]
            for kind, classes in found.items()}


def list_components() -> dict[str, list[str]]:
    """Recipes, backbones, layer inserts, heads, transition models, attention policies,
    corpora, subword vocabularies and shipped configs, by short name."""
    names = {kind: [c.name for c in found] for kind, found in _component_classes().items()}
    return {**names, "configs": shipped_configs()}


def component_summaries() -> dict[str, list[tuple[str, str]]]:
    """``list_components`` with one line each: a class's docstring's first sentence, a
    config's opening comment's."""
    out = {kind: [(c.name, first_sentence(c.doc)) for c in found]
           for kind, found in _component_classes().items()}
    out["configs"] = [(n, config_summary(REPO_CONFIGS / n)) for n in shipped_configs()]
    return out
