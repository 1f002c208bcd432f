"""Build what a config describes, from Python (notebooks, scripts)."""

from __future__ import annotations

from collections.abc import Sequence

from synlm.lightning_cli import build_model
from synlm.lm import SyntaxLM


def from_config(path: str, overrides: Sequence[str] = ()) -> SyntaxLM:
    """The model the CLI builds from ``path`` plus ``--key=value`` overrides; the
    DataModule it would train on is ``model.datamodule``."""
    return build_model(path, overrides)
