"""Training callbacks."""

from synlm.callbacks.nt_asgd import NTASGD
from synlm.callbacks.progress import ParameterSummary, SynLMProgressBar
from synlm.callbacks.syntactic import SyntacticEvaluation
from synlm.callbacks.throughput import TokensPerSecond
from synlm.callbacks.trees import TreeSamples

__all__ = ["NTASGD", "ParameterSummary", "SynLMProgressBar", "SyntacticEvaluation",
           "TokensPerSecond", "TreeSamples"]
