"""Training callbacks."""

from synlm.callbacks.nt_asgd import NTASGD

__all__ = ["NTASGD"]
