"""Shared building blocks. Imports nothing of synlm above this floor."""

from synlm.modules.cumax import cumax
from synlm.modules.dropout import LockedDropout, dropout_mask, embedding_dropout
from synlm.modules.weight_drop import WeightDropLSTM, drop_connect

__all__ = [
    "LockedDropout",
    "WeightDropLSTM",
    "cumax",
    "drop_connect",
    "dropout_mask",
    "embedding_dropout",
]
