"""Targeted syntactic evaluation: BLiMP, SyntaxGym and Marvin & Linzen through one
sentence-scoring API (docs/syntactic-evaluation.md).

The names below are imported on first use, so that the benchmarks' readers and the
``evaluate-syntax`` command's ``--help`` do not pull in torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module that defines it
_EXPORTS = {
    "BENCHMARKS": "synlm.tse.benchmarks",
    "BenchmarkResult": "synlm.tse.benchmarks",
    "evaluate_benchmarks": "synlm.tse.benchmarks",
    "load_benchmarks": "synlm.tse.benchmarks",
    "score_benchmarks": "synlm.tse.benchmarks",
    "HFScorer": "synlm.tse.hf_scoring",
    "ModelScorer": "synlm.tse.scoring",
    "ScoredSentence": "synlm.tse.scores",
    "Scorer": "synlm.tse.scores",
}

__all__ = ["BENCHMARKS", "BenchmarkResult", "HFScorer", "ModelScorer", "ScoredSentence",
           "Scorer", "evaluate_benchmarks", "load_benchmarks", "score_benchmarks"]

if TYPE_CHECKING:
    from synlm.tse.benchmarks import (
        BENCHMARKS,
        BenchmarkResult,
        evaluate_benchmarks,
        load_benchmarks,
        score_benchmarks,
    )
    from synlm.tse.hf_scoring import HFScorer
    from synlm.tse.scores import ScoredSentence, Scorer
    from synlm.tse.scoring import ModelScorer


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'synlm.tse' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
