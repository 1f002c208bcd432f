"""Build what a config describes, from Python (notebooks, scripts)."""

from __future__ import annotations

from collections.abc import Sequence

from synlm.cli import SynLMCLI
from synlm.lm import SyntaxLM


def from_config(path: str, overrides: Sequence[str] = ()) -> SyntaxLM:
    """The model the CLI builds from ``path`` plus ``--key=value`` overrides; the
    DataModule it would train on is ``model.datamodule``."""
    cli = SynLMCLI(args=["--config", str(path), *overrides], run=False)
    model = cli.model
    model.datamodule = cli.datamodule
    return model
