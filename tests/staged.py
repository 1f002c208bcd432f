"""The staged corpora and benchmarks the tests read: files under ``$SYNLM_DATA_DIR``, or a
skip that names what is missing (a user's clone has none; ``.ci/run`` points the variable at
the staged copy when there is one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The staged data folder, None when ``SYNLM_DATA_DIR`` is unset.
DATA: Path | None = Path(os.environ["SYNLM_DATA_DIR"]) if os.environ.get("SYNLM_DATA_DIR") \
    else None


def staged(*parts: str) -> Path:
    """``$SYNLM_DATA_DIR/<parts>``; skips the calling test, saying why, when it is absent."""
    relative = Path(*parts)
    if DATA is None:
        pytest.skip(f"needs {relative} of the staged data: set SYNLM_DATA_DIR")
    path = DATA / relative
    if not path.exists():
        pytest.skip(f"needs {path} (SYNLM_DATA_DIR={DATA})")
    return path


def staged_glob(folder: str, pattern: str) -> list[Path]:
    """The staged files matching ``pattern`` in ``folder`` (none when the data is absent: a
    test parametrised over them is then skipped by pytest as an empty parameter set)."""
    return sorted((DATA / folder).glob(pattern)) if DATA is not None else []
