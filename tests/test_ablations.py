"""Ablations are deltas: each configs/ablations/*.yaml stacks on the base its ``# base:``
comment names and differs from it only in the keys it names."""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import TINY_OVERRIDES, run_cli
from synlm.catalog import REPO_CONFIGS

REPO = REPO_CONFIGS.parent
ABLATIONS = sorted(str(p.relative_to(REPO_CONFIGS)) for p in REPO_CONFIGS.glob("ablations/*.yaml"))
BASE_COMMENT = re.compile(r"#\s*base:\s*(\S+)\s*")

KeyPath = tuple[str | int, ...]


def base_of(name: str) -> Path:
    """The base named by the ``# base: configs/X.yaml`` line among the leading comments."""
    lines = (REPO_CONFIGS / name).read_text().splitlines()
    header = itertools.takewhile(lambda line: not line.strip() or line.startswith("#"), lines)
    bases = [m.group(1) for line in header if (m := BASE_COMMENT.fullmatch(line))]
    assert len(bases) == 1, f"{name}: one '# base: configs/X.yaml' line before the YAML body"
    base = REPO / bases[0]
    assert base.is_file(), f"{name}: base {bases[0]} not found"
    return base


@functools.cache
def resolve(*configs: Path) -> dict[str, Any]:
    """The config the CLI resolves from ``--config`` files stacked in order."""
    out = io.StringIO()
    args = ["fit", *(a for c in configs for a in ("--config", str(c))), "--print_config"]
    with contextlib.redirect_stdout(out):
        assert run_cli(args) == 0
    return yaml.safe_load(out.getvalue())


def flatten(tree: Any, prefix: KeyPath = ()) -> dict[KeyPath, Any]:
    """Leaf paths of nested dicts and lists (lists by index); empty ones are leaves."""
    if isinstance(tree, dict) and tree:
        items: Any = tree.items()
    elif isinstance(tree, list) and tree:
        items = enumerate(tree)
    else:
        return {prefix: tree}
    return {path: leaf for key, value in items
            for path, leaf in flatten(value, (*prefix, key)).items()}


def differing(a: dict[str, Any], b: dict[str, Any]) -> set[KeyPath]:
    flat_a, flat_b = flatten(a), flatten(b)
    missing = object()
    return {p for p in flat_a.keys() | flat_b.keys()
            if flat_a.get(p, missing) != flat_b.get(p, missing)}


def dotted(path: KeyPath) -> str:
    return ".".join(map(str, path))


def test_every_ablation_is_found() -> None:
    assert len(ABLATIONS) >= 7


@pytest.mark.parametrize("name", ABLATIONS)
def test_delta_changes_its_base_only_where_it_says(name: str) -> None:
    delta = REPO_CONFIGS / name
    base = base_of(name)
    diffs = differing(resolve(base), resolve(base, delta))
    named = set(flatten(yaml.safe_load(delta.read_text())))
    in_base = {p[:i] for p in flatten(resolve(base)) for i in range(len(p) + 1)}
    assert diffs, f"{name} changes nothing in {base.name}"

    # every difference is named: the delta names the path, one of its prefixes or one of
    # its keys (a list the base has empty); or it lies in the init_args of a class the
    # delta changes (they reset to that class's defaults), or in a list item the base does
    # not have (its unnamed keys are the class defaults)
    def covered(p: KeyPath) -> bool:
        if any(p[:len(q)] == q or q[:len(p)] == p for q in named):
            return True
        for i, key in enumerate(p):
            new_class = (*p[:i], "class_path")
            if key == "init_args" and new_class in named and new_class in diffs:
                return True
        items = [p[:i + 1] for i, key in enumerate(p) if isinstance(key, int)]
        return any(item not in in_base and any(q[:len(item)] == item for q in named)
                   for item in items)

    unnamed = {p for p in diffs if not covered(p)}
    assert not unnamed, f"{name} changes keys it does not name: {sorted(map(dotted, unnamed))}"

    # every named key changes something, or restates a key of a list item that changes
    # (a list of the base's length merges with it item by item, so an item is restated
    # with its class_path); unchanged keys outside lists (trainer, seed_everything, ...)
    # are not repeated
    def needed(q: KeyPath) -> bool:
        if any(p[:len(q)] == q or q[:len(p)] == p for p in diffs):
            return True
        items = [q[:i + 1] for i, key in enumerate(q) if isinstance(key, int)]
        return any(p[:len(item)] == item for item in items for p in diffs)

    idle = sorted(dotted(q) for q in named if not needed(q))
    assert not idle, f"{name} restates keys it leaves as in {base.name}: {idle}"


@pytest.mark.parametrize("name", ABLATIONS)
def test_fast_dev_run_stacked(name: str, tmp_path: Path) -> None:
    args = ["fit", "--config", str(base_of(name)), "--config", str(REPO_CONFIGS / name),
            *TINY_OVERRIDES, "--trainer.fast_dev_run=true",
            f"--trainer.default_root_dir={tmp_path}"]
    assert run_cli(args) == 0
