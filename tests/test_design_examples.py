"""The examples in docs/design.md run as written, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def test_design_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DESIGN.read_text(), flags=re.S)
    assert len(blocks) == 5  # backbone, three kinds of head, composition
    namespace: dict = {}
    for block in blocks:
        assert len(block.splitlines()) <= 30, block.splitlines()[0]
        exec(compile(block, str(DESIGN), "exec"), namespace)
    model, batch = namespace["model"], namespace["batch"]
    result = model(batch)
    # the replacing head's distribution is the one the loss uses
    assert result.target_log_probs is result.heads["unigram"].target_log_probs
    assert result.heads["dreg"].loss is not None and result.heads["dreg"].loss > 0
