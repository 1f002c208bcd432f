"""synlm: a PyTorch Lightning model zoo of syntax-aware language models."""

__version__ = "0.1.0"

from synlm.backbones.base import Backbone
from synlm.data.datamodule import SynLMDataModule
from synlm.heads.base import SyntaxHead
from synlm.lm import SyntaxLM
from synlm.outputs import BackboneOutput, Batch, HeadOutput, LMOutput

__all__ = ["Backbone", "BackboneOutput", "Batch", "HeadOutput", "LMOutput", "SynLMDataModule",
           "SyntaxHead", "SyntaxLM", "__version__"]
