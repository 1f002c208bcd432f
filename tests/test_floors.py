"""The package floors (docs/design.md): each floor imports nothing of synlm above it, so there
is no import circle, and no model file imports Lightning."""

from __future__ import annotations

import ast
from graphlib import TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "synlm"

#: floor (a subpackage or a module) -> the synlm floors it may import, besides itself
ALLOWED = {
    "errors": set(),
    "syntax": set(),
    "modules": set(),
    "kernels": set(),
    "outputs": set(),
    "optim": set(),
    "metrics": {"syntax"},
    "data": {"syntax", "outputs", "errors"},
    "backbones": {"modules", "outputs", "kernels", "errors"},
    "heads": {"modules", "outputs", "backbones.base"},
    "callbacks": {"metrics", "syntax", "viz", "tse"},
    "runs": set(),
    "lm": {"backbones", "heads", "data", "metrics", "modules", "optim", "outputs", "runs"},
    "registry": {"backbones", "heads", "callbacks", "data"},
    "catalog": set(),
    "lightning_cli": {"lm", "data", "registry", "catalog", "runs", "callbacks", "usage",
                      "errors", "run_summary", "checks"},
    "run_summary": set(),
    "checks": {"errors"},
    "cli": {"lightning_cli", "parse", "annotate", "generate", "plot", "catalog", "usage",
            "evaluate_syntax", "threads"},
    "viz": {"syntax"},
    "usage": {"catalog"},
    "plot": {"arguments", "runs"},
    "annotate": {"arguments", "data"},
    "generation": {"lm", "outputs"},
    "generate": {"arguments", "lm", "data", "generation", "metrics", "parse", "catalog"},
    "config": {"lightning_cli", "lm"},
    "parse": {"arguments", "lm", "data", "metrics", "syntax", "runs", "viz"},
    "tse": {"data"},
    "arguments": set(),
    "threads": set(),
    "evaluate_syntax": {"arguments", "tse", "parse", "data", "runs"},
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def floor_files(floor: str) -> list[Path]:
    module = PACKAGE / f"{floor}.py"
    return [module] if module.exists() else sorted((PACKAGE / floor).rglob("*.py"))


def test_every_module_has_a_floor() -> None:
    tops = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.glob("*")
            if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert tops - {"__init__"} == set(ALLOWED)


def test_floors_form_no_circle() -> None:
    graph = {floor: {a.split(".")[0] for a in allowed} for floor, allowed in ALLOWED.items()}
    tuple(TopologicalSorter(graph).static_order())  # raises CycleError on a circle


@pytest.mark.parametrize("floor", sorted(ALLOWED))
def test_floor_imports_nothing_above_it(floor: str) -> None:
    files = floor_files(floor)
    assert files, floor
    for path in files:
        for name in imports(path):
            if not name.startswith("synlm."):
                continue  # ``import synlm`` / ``from synlm import __version__``: the package
            target = name.removeprefix("synlm.")
            ok = target.split(".")[0] == floor or any(
                target == a or target.startswith(a + ".") for a in ALLOWED[floor])
            assert ok, f"{path.relative_to(PACKAGE)} imports {name}"


@pytest.mark.parametrize("floor", ["backbones", "heads", "modules", "syntax", "optim"])
def test_model_files_do_not_import_lightning(floor: str) -> None:
    for path in floor_files(floor):
        assert not any(n.split(".")[0] in ("lightning", "pytorch_lightning")
                       for n in imports(path)), path
