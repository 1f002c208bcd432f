"""The package floors (docs/design.md): each floor imports nothing of synlm above it, so there
is no import circle, and no model file imports Lightning."""

from __future__ import annotations

import ast
from graphlib import TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "synlm"

#: The bottom floor: every floor may import it (synlm's exception types, and how it gives the
#: files it writes the umask's mode).
BOTTOM = ("errors", "files")

#: floor (a subpackage or a module) -> the synlm floors it may import, besides itself and
#: ``BOTTOM``
ALLOWED = {
    "errors": set(),
    "files": set(),
    "syntax": set(),
    "modules": set(),
    "kernels": set(),
    "outputs": set(),
    "optim": set(),
    "catalog": set(),
    "capabilities": set(),
    "runtime": {"catalog"},
    "metrics": {"syntax", "tse"},
    "data": {"syntax", "outputs", "errors"},
    "backbones": {"modules", "outputs", "kernels", "errors"},
    "heads": {"modules", "outputs", "backbones.base"},
    "model": {"backbones", "heads", "data.vocab", "errors", "modules", "outputs"},
    "callbacks": {"metrics", "syntax", "viz", "tse", "runtime.lightning_internals"},
    "lm": {"model", "backbones", "heads", "data", "errors", "metrics", "modules", "optim",
           "outputs", "runtime.runs"},
    "transition": {"errors", "modules", "syntax", "data", "metrics", "lm", "outputs",
                   "runtime.runs"},
    "registry": {"backbones", "heads", "callbacks", "data", "lm", "transition", "catalog"},
    "lightning_cli": {"lm", "transition", "data", "registry", "catalog", "runtime",
                      "callbacks", "errors"},
    "viz": {"syntax"},
    "generation": {"lm", "outputs", "data"},
    "config": {"lightning_cli", "lm"},
    "tse": {"data", "capabilities", "runtime"},
    "hf_export": {"backbones", "data", "model"},
    "loading": {"lm", "transition", "registry", "runtime.runs"},
    "parsing": {"data", "metrics", "syntax", "tse", "capabilities"},
    "lm_eval_model": {"tse", "loading", "capabilities", "transition.particles",
                      "runtime.threads"},
    "commands": {"runtime", "lm", "data", "metrics", "syntax", "viz", "tse", "generation",
                 "catalog", "loading", "parsing", "hf_export", "capabilities", "heads",
                 "transition"},
    "cli": {"lightning_cli", "commands", "catalog", "runtime", "lm_eval_model"},
}


def _exports() -> dict[str, str]:
    """``synlm/__init__``'s lazy names -> the module that defines each."""
    for node in ast.walk(ast.parse((PACKAGE / "__init__.py").read_text())):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS":
            return ast.literal_eval(node.value)
    raise AssertionError("synlm/__init__.py has no _EXPORTS")


EXPORTS = _exports()


def _package_name(name: str) -> str:
    """What ``from synlm import name`` reaches: a lazy export's module, a submodule, or the
    package itself (``__version__``)."""
    if name in EXPORTS:
        return EXPORTS[name]
    if (PACKAGE / f"{name}.py").exists() or (PACKAGE / name / "__init__.py").exists():
        return f"synlm.{name}"
    return "synlm"


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, in any form: ``import a.b``, ``from a.b import c``,
    ``from synlm import x`` (a submodule or a lazy export), relative imports, and
    ``importlib.import_module("...")`` with a literal name."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[:len(package) - node.level + 1], node.module or ""]
                            ).strip(".") if node.level else node.module
            if base == "synlm":
                names.update(_package_name(alias.name) for alias in node.names)
            elif base:
                folder = PACKAGE.parent.joinpath(*base.split("."))
                submodules = {f"{base}.{alias.name}" for alias in node.names
                              if (folder / f"{alias.name}.py").exists()}
                names.update(submodules)  # ``from synlm.runtime import runs``: that module
                if len(submodules) < len(node.names):
                    names.add(base)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
    return names


def test_every_import_form_is_seen(tmp_path: Path) -> None:
    """The forms above, on a file written for the purpose."""
    probe = PACKAGE / "heads" / "_floors_probe.py"
    probe.write_text("import synlm.data.vocab\nfrom synlm import SyntaxLM, errors, __version__\n"
                     "from ..outputs import Batch\nfrom . import base\n"
                     "import importlib\nimportlib.import_module('synlm.tse')\n")
    try:
        assert imports(probe) == {"synlm.data.vocab", "synlm.lm", "synlm.errors", "synlm",
                                  "synlm.outputs", "synlm.heads.base", "importlib",
                                  "synlm.tse"}
    finally:
        probe.unlink()


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
            ok = target.split(".")[0] in (floor, *BOTTOM) or any(
                target == a or target.startswith(a + ".") for a in ALLOWED[floor])
            assert ok, f"{path.relative_to(PACKAGE)} imports {name}"


def test_only_the_dispatcher_imports_a_command() -> None:
    """A command is a leaf: no library module, no other command, imports one; ``cli.py``
    dispatches to them."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "cli.py":
            continue
        own = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for name in imports(path):
            assert not name.startswith("synlm.commands.") or name == own, (
                f"{path.relative_to(PACKAGE)} imports {name}")


@pytest.mark.parametrize("floor", ["backbones", "heads", "model", "modules", "syntax", "optim"])
def test_model_files_do_not_import_lightning(floor: str) -> None:
    for path in floor_files(floor):
        assert not any(n.split(".")[0] in ("lightning", "pytorch_lightning")
                       for n in imports(path)), path
