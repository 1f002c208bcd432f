"""synlm: a PyTorch Lightning model zoo of syntax-aware language models.

The names below are imported on first use (``synlm.SyntaxLM``, ``from synlm import X``), so
that ``import synlm`` and its light modules (``synlm.syntax``, the ``synlm`` command's
``--help``) do not pull in torch and Lightning."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "Backbone": "synlm.backbones.base",
    "BackboneSpec": "synlm.backbones.base",
    "LayerInsert": "synlm.backbones.base",
    "SynLMDataModule": "synlm.data.datamodule",
    "HeadContext": "synlm.heads.base",
    "SyntaxHead": "synlm.heads.base",
    "SyntaxLM": "synlm.lm",
    "SyntaxModel": "synlm.model",
    "BackboneOutput": "synlm.outputs",
    "Batch": "synlm.outputs",
    "HeadOutput": "synlm.outputs",
    "LMOutput": "synlm.outputs",
    "Structure": "synlm.outputs",
    "from_config": "synlm.lightning_cli",
}

__all__ = ["Backbone", "BackboneOutput", "BackboneSpec", "Batch", "HeadContext", "HeadOutput",
           "LMOutput", "LayerInsert", "Structure", "SynLMDataModule", "SyntaxHead", "SyntaxLM",
           "SyntaxModel", "__version__", "from_config"]

if TYPE_CHECKING:
    from synlm.backbones.base import Backbone, BackboneSpec, LayerInsert
    from synlm.data.datamodule import SynLMDataModule
    from synlm.heads.base import HeadContext, SyntaxHead
    from synlm.lightning_cli import from_config
    from synlm.lm import SyntaxLM
    from synlm.model import SyntaxModel
    from synlm.outputs import BackboneOutput, Batch, HeadOutput, LMOutput, Structure


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'synlm' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
