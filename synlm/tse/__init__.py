"""Targeted syntactic evaluation: BLiMP, SyntaxGym and Marvin & Linzen through one
sentence-scoring API (docs/syntactic-evaluation.md)."""
