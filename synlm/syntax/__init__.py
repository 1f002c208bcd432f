"""Trees, targets, decoders. Imports nothing of synlm above this floor."""

from synlm.syntax.sentence import Sentence

__all__ = ["Sentence"]
