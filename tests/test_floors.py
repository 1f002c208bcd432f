"""The package floors of DESIGN.md: lower floors import nothing of synlm above them, and
no model file imports Lightning."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "synlm"

#: floor -> the synlm subpackages it may import (besides itself)
ALLOWED = {
    "syntax": set(),
    "modules": set(),
    "metrics": {"syntax"},
    "data": {"syntax", "outputs"},
    "backbones": {"modules", "outputs"},
    "heads": {"modules", "outputs", "backbones.base"},
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("floor", sorted(ALLOWED))
def test_floor_imports_nothing_above_it(floor: str) -> None:
    for path in (PACKAGE / floor).rglob("*.py"):
        for name in imports(path):
            if not name.startswith("synlm."):
                continue
            target = name.removeprefix("synlm.")
            ok = target.split(".")[0] == floor or any(
                target == a or target.startswith(a + ".") for a in ALLOWED[floor])
            assert ok, f"{path.relative_to(PACKAGE)} imports {name}"


@pytest.mark.parametrize("floor", ["backbones", "heads", "modules", "syntax"])
def test_model_files_do_not_import_lightning(floor: str) -> None:
    for path in (PACKAGE / floor).rglob("*.py"):
        assert not any(n.split(".")[0] in ("lightning", "pytorch_lightning")
                       for n in imports(path)), path
