"""Targeted syntactic evaluation: BLiMP, SyntaxGym and Marvin & Linzen through one
sentence-scoring API (docs/syntactic-evaluation.md)."""

from synlm.tse.benchmarks import (
    BENCHMARKS,
    BenchmarkResult,
    evaluate_benchmarks,
    load_benchmarks,
    score_benchmarks,
)
from synlm.tse.scores import ScoredSentence, Scorer
from synlm.tse.scoring import ModelScorer

__all__ = ["BENCHMARKS", "BenchmarkResult", "ModelScorer", "ScoredSentence", "Scorer",
           "evaluate_benchmarks", "load_benchmarks", "score_benchmarks"]
