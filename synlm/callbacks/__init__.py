"""Training callbacks."""

from synlm.callbacks.nt_asgd import NTASGD
from synlm.callbacks.progress import SynLMProgressBar
from synlm.callbacks.throughput import TokensPerSecond

__all__ = ["NTASGD", "SynLMProgressBar", "TokensPerSecond"]
