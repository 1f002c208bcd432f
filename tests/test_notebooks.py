"""Every notebook runs top to bottom (code cells executed in one namespace, no Jupyter needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path) -> None:
    namespace: dict = {}
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    if path.name == "compose_and_parse.ipynb":
        assert namespace["metrics"]["val/uf1"] > 0.5  # right-branching scores 0.41 here
        assert namespace["tree"].leaves() == namespace["words"]
