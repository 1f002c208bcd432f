"""Training callbacks."""

from synlm.callbacks.nt_asgd import NTASGD
from synlm.callbacks.progress import SynLMProgressBar
from synlm.callbacks.syntactic import SyntacticEvaluation
from synlm.callbacks.throughput import TokensPerSecond
from synlm.callbacks.trees import TreeSamples

__all__ = ["NTASGD", "SynLMProgressBar", "SyntacticEvaluation", "TokensPerSecond",
           "TreeSamples"]
