"""The package floors (docs/design.md): each floor imports nothing of synlm above it, so there
is no import circle between floors, nor between modules (any import a module runs, in a
function too), and no model file imports Lightning."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "synlm"

#: The bottom floor: every floor may import it (synlm's exception types, and how it gives the
#: files it writes the umask's mode).
BOTTOM = ("errors", "runtime.files")

#: floor (a subpackage or a module) -> the synlm floors it may import, besides itself and
#: ``BOTTOM``
ALLOWED = {
    "errors": set(),
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
           "outputs", "runtime.runs", "capabilities"},
    "transition": {"errors", "modules", "syntax", "data", "metrics", "lm", "outputs",
                   "runtime.runs"},
    "registry": {"backbones", "heads", "callbacks", "data", "lm", "transition", "catalog"},
    "lightning_cli": {"lm", "transition", "data", "registry", "catalog", "runtime", "modules",
                      "callbacks", "errors"},
    "viz": {"syntax"},
    "generation": {"lm", "outputs", "data", "capabilities"},
    "tse": {"data", "capabilities", "runtime", "hf_export.tokenizer"},
    "hf_export": {"backbones", "data", "model"},
    "loading": {"lm", "transition", "registry", "runtime.runs", "runtime.run_folders"},
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


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): a block Python never runs."""
    return isinstance(node, ast.If) and "TYPE_CHECKING" in (
        getattr(node.test, "id", None), getattr(node.test, "attr", None))


def _nodes(tree: ast.AST, runtime: bool) -> Iterator[ast.AST]:
    """Every node of ``tree`` (``ast.walk``), without ``if TYPE_CHECKING:`` bodies when
    ``runtime``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        children = list(ast.iter_child_nodes(node))
        if runtime and _is_type_checking(node):
            children = [c for c in children if c not in node.body]  # type: ignore[attr-defined]
        stack.extend(children)


def _is_module(name: str) -> bool:
    """Whether the dotted ``name`` is a module or package of the checkout."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path, runtime: bool = False) -> set[str]:
    """Every module ``path`` imports, in any form and anywhere in it (a function's body too):
    ``import a.b``, ``from a.b import c`` (``a.b.c`` where it is a submodule), ``from synlm
    import x`` (a submodule or a lazy export), relative imports, and
    ``importlib.import_module("...")`` with a literal name; ``runtime``: not the imports
    under ``if TYPE_CHECKING:``, which never run."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]
    names = set()
    for node in _nodes(ast.parse(path.read_text()), runtime):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[:len(package) - node.level + 1], node.module or ""]
                            ).strip(".") if node.level else node.module
            if base == "synlm":
                names.update(_package_name(alias.name) for alias in node.names)
            elif base:
                submodules = {f"{base}.{alias.name}" for alias in node.names
                              if _is_module(f"{base}.{alias.name}")}
                names.update(submodules)  # ``from synlm.runtime import runs``: that module
                if len(submodules) < len(node.names):
                    names.add(base)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
    return names


def test_every_import_form_is_seen(tmp_path: Path) -> None:
    """The forms above, on a file written for the purpose: a function's import counts, an
    import under ``if TYPE_CHECKING:`` does for the floors but not at run time."""
    probe = PACKAGE / "heads" / "_floors_probe.py"
    probe.write_text("import synlm.data.vocab\nfrom synlm import SyntaxLM, errors, __version__\n"
                     "from ..outputs import Batch\nfrom . import base\n"
                     "from synlm.transition import attention\n"
                     "import importlib\nimportlib.import_module('synlm.tse')\n"
                     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    import synlm.model\n"
                     "def later():\n    from synlm.viz import tree_text\n")
    try:
        run = {"synlm.data.vocab", "synlm.lm", "synlm.errors", "synlm", "synlm.outputs",
               "synlm.heads.base", "synlm.transition.attention", "importlib", "synlm.tse",
               "typing", "synlm.viz"}
        assert imports(probe, runtime=True) == run
        assert imports(probe) == run | {"synlm.model"}
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
            ok = target.split(".")[0] == floor or any(
                target == a or target.startswith(a + ".") for a in (*BOTTOM, *ALLOWED[floor]))
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


def module_name(path: Path) -> str:
    """``synlm.runtime.runs`` for ``synlm/runtime/runs.py``; a package for its
    ``__init__.py``."""
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts
                    ).removesuffix(".__init__")


def module_edges() -> set[tuple[str, str]]:
    """(importer, imported) for every import a module of synlm makes of another: a lazy
    import in a function too (it closes a circle when it runs), and one under ``if
    TYPE_CHECKING:`` (a reader of the types follows it as a reader of the code does), but
    in ``synlm/__init__.py``, whose type-only imports name its lazy exports for type
    checkers. A package is its ``__init__.py``; importing a submodule runs its parents' too,
    which every package's own imports would make circles of, so those are not edges."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {(module_name(p), name) for p in paths
            for name in imports(p, runtime=p == PACKAGE / "__init__.py") if name in modules}


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def circles(edges: Iterable[tuple[str, str]]) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The circles of the graph of ``edges`` (importer, imported): each set of nodes that
    reach each other (a node that imports itself too), sorted, -> one cycle through them as
    graphlib's ``CycleError`` names it (the first node again at the end)."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    found = {}
    for component in _components(graph):
        inside = {n: graph.get(n, set()) & component for n in sorted(component)}
        try:
            TopologicalSorter(inside).prepare()
        except CycleError as err:
            found[tuple(sorted(component))] = tuple(err.args[1])
    return found


def named_circles(edges: Iterable[tuple[str, str]]) -> list[str]:
    """``circles``, each named by its modules and a cycle through them."""
    return [f"{', '.join(modules)} ({' -> '.join(cycle)})"
            for modules, cycle in sorted(circles(edges).items())]


def test_circles_are_found_on_a_small_graph() -> None:
    two = circles([("a", "b"), ("b", "a")])
    assert list(two) == [("a", "b")] and two[("a", "b")] in (("a", "b", "a"), ("b", "a", "b"))
    assert circles([("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]) == {}
    assert circles([("a", "a")]) == {("a",): ("a", "a")}
    assert named_circles([("c", "d"), ("d", "c"), ("a", "b")]) == ["c, d (c -> d -> c)"]
    # a third module joined to a circle makes one circle of the three
    assert [c.split(" (")[0] for c in named_circles(
        [("a", "b"), ("b", "a"), ("b", "c"), ("c", "a")])] == ["a, b, c"]


def test_modules_form_no_circle() -> None:
    """No module of synlm imports, directly or through others, one that imports it back.
    ``synlm``'s lazy exports (``__getattr__`` over
    ``_EXPORTS``) are no import of the package's: ``from synlm import SyntaxLM`` imports
    ``synlm.lm``."""
    edges = module_edges()
    assert ("synlm.lm", "synlm.model") in edges  # the graph is read
    assert not {target for source, target in edges if source == "synlm"} & set(
        EXPORTS.values())
    found = named_circles(edges)
    assert not found, "import circles: " + "; ".join(found)


#: The most modules the package's root holds: each other module lives in the folder of what
#: it serves.
ROOT_MODULES = 16
#: The length over which a module says at its top why it is one room: its docstring holds a
#: paragraph that begins with ``LONG_BECAUSE``.
MAX_LINES = 450
LONG_BECAUSE = "One module because"


def test_the_root_holds_few_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= ROOT_MODULES, root


def test_a_long_module_says_why_it_is_one() -> None:
    """No module over ``MAX_LINES`` lines without a reason at its top."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > MAX_LINES and f"\n\n{LONG_BECAUSE} " not in f"\n\n{doc}":
            long.append(f"{path.relative_to(PACKAGE)} ({text.count(chr(10))} lines)")
    assert not long, f"over {MAX_LINES} lines with no '{LONG_BECAUSE} ...' paragraph: {long}"


def test_no_module_passes_on_another_modules_names() -> None:
    """A name is imported from the module that defines it: no module but a package's
    ``__init__`` (its public face) re-exports another's (``from x import y as y``)."""
    passed_on = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                passed_on += [f"{path.relative_to(PACKAGE)}: {alias.name}" for alias in node.names
                              if alias.asname == alias.name]
    assert not passed_on, passed_on
