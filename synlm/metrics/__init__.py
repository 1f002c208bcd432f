"""Metrics: perplexity, parsing (UF1 and tree statistics)."""

from synlm.metrics.parsing import PROTOCOLS, ParsingF1, Protocol, evaluation_tree, sentence_f1
from synlm.metrics.perplexity import Perplexity

__all__ = ["PROTOCOLS", "ParsingF1", "Perplexity", "Protocol", "evaluation_tree", "sentence_f1"]
