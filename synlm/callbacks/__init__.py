"""Training callbacks."""

from synlm.callbacks.nt_asgd import NTASGD
from synlm.callbacks.progress import ParameterSummary, ProgressLines, SynLMProgressBar
from synlm.callbacks.syntactic import SyntacticEvaluation
from synlm.callbacks.throughput import TokensPerSecond
from synlm.callbacks.trees import TreeSamples

__all__ = ["NTASGD", "ParameterSummary", "ProgressLines", "SynLMProgressBar",
           "SyntacticEvaluation", "TokensPerSecond", "TreeSamples"]
