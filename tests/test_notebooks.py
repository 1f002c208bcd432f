"""Every notebook runs top to bottom (code cells executed in one namespace, no Jupyter needed),
and its results are checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from synlm.generation import sample
from synlm.metrics.generation import distinct
from synlm.metrics.parsing import sentence_f1
from synlm.syntax import spans

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(autouse=True)
def _threads_kept() -> Iterator[None]:
    """Notebooks set torch's thread count; the other tests keep theirs."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def check_compose_and_parse(ns: dict[str, Any]) -> None:
    assert ns["metrics"]["val/uf1"] > 50  # percent; right-branching scores 41 here
    assert ns["tree"].leaves() == ns["words"]


def check_parse_and_visualise(ns: dict[str, Any]) -> None:
    sentences, golds, scores = ns["sentences"], ns["golds"], ns["scores"]
    for name in ("trees", "palm_trees"):
        assert [tree.leaves() for tree in ns[name]] == sentences, name
    for name, trees in (("syd", ns["trees"]), ("span_attention", ns["palm_trees"])):
        f1 = np.mean([sentence_f1(spans(t), spans(g)) for t, g in zip(trees, golds, strict=True)])
        assert scores[name] == pytest.approx(f1, abs=5e-4), name
    assert scores["syd"] > scores["right-branching"] + 0.05
    n = len(ns["words"])
    assert len(ns["bars"].axes[0].patches) == n - 1  # a bar per gap
    assert ns["heat"].axes[0].images[0].get_array().shape == (n, n)


def check_generate(ns: dict[str, Any]) -> None:
    model, prompts, samples = ns["model"], ns["prompts"], ns["samples"]
    options = {"max_new_tokens": 20, "top_p": 0.9}
    assert sample(model, prompts, seed=0, **options) == samples
    assert sample(model, prompts, seed=1, **options) != samples
    words = {w for s in samples for w in s}
    assert words and words <= set(model.vocab.stoi) - {model.vocab.eos}
    assert all(len(s) <= 20 for s in samples)
    assert ns["diversity"]["distinct-2"] == pytest.approx(distinct(samples[:6], 2), abs=0.05)


CHECKS = {"compose_and_parse.ipynb": check_compose_and_parse,
          "parse_and_visualise.ipynb": check_parse_and_visualise,
          "generate.ipynb": check_generate}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path) -> None:
    assert path.name in CHECKS, f"{path.name}: add what it must show to CHECKS"
    notebook = json.loads(path.read_text())
    assert all(not cell.get("outputs") for cell in notebook["cells"]), "outputs not cleared"
    namespace: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    CHECKS[path.name](namespace)
