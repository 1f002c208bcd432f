"""synlm: a PyTorch Lightning model zoo of syntax-aware language models."""

__version__ = "0.1.0"

from typing import Any

from synlm.backbones.base import Backbone, BackboneSpec, LayerInsert
from synlm.data.datamodule import SynLMDataModule
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.lm import SyntaxLM
from synlm.outputs import BackboneOutput, Batch, HeadOutput, LMOutput, Structure

__all__ = ["Backbone", "BackboneOutput", "BackboneSpec", "Batch", "HeadContext", "HeadOutput",
           "LMOutput", "LayerInsert", "Structure", "SynLMDataModule", "SyntaxHead", "SyntaxLM",
           "__version__", "from_config"]


def __getattr__(name: str) -> Any:
    """``synlm.from_config`` is imported on first use: it needs the CLI, which imports
    this package."""
    if name == "from_config":
        from synlm.config import from_config

        return from_config
    raise AttributeError(f"module 'synlm' has no attribute {name!r}")
