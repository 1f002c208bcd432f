"""The examples in docs/design.md run as written: the Python blocks in order in one namespace,
and the titled files (a backbone, a head, a config) as a newcomer's folder that ``synlm fit``
trains from, touching nothing in synlm."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from synlm.lm import SyntaxLM

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
BLOCK = re.compile(r'```(python|yaml|bash)(?: title="([^"]+)")?\n(.*?)```', flags=re.S)


def blocks() -> list[tuple[str, str | None, str]]:
    """(language, title or None, text) of every code block of the page."""
    return BLOCK.findall(DESIGN.read_text())


def test_design_examples_run() -> None:
    python = [text for language, _, text in blocks() if language == "python"]
    assert len(python) == 5  # backbone, three kinds of head, composition
    namespace: dict = {}
    for block in python:
        assert len(block.splitlines()) <= 30, block.splitlines()[0]
        exec(compile(block, str(DESIGN), "exec"), namespace)
    model, batch = namespace["model"], namespace["batch"]
    result = model(batch)
    # the replacing head's distribution is the one the loss uses
    assert result.target_log_probs is result.heads["unigram"].target_log_probs
    assert result.heads["dreg"].loss is not None and result.heads["dreg"].loss > 0


def test_a_new_backbone_and_head_train_from_their_own_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {title: text for _, title, text in blocks() if title}
    assert set(files) == {"gru_stack.py", "distance_regression.py", "gru_dreg.yaml"}
    [command] = [text.strip() for language, _, text in blocks()
                 if language == "bash" and "gru_dreg.yaml" in text]
    assert command == "synlm fit --config gru_dreg.yaml"
    folder = tmp_path / "mine"
    folder.mkdir()
    for title, text in files.items():
        (folder / title).write_text(text)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds the folder
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    args = [*command.split()[1:],
            "--trainer.max_steps=6", "--trainer.limit_val_batches=2",
            "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", "--data.corpus.init_args.n_train=80",
            "--data.corpus.init_args.n_valid=16", "--data.corpus.init_args.n_test=16"]
    assert run_cli(args) == 0
    [last] = (folder / "runs").rglob("last.ckpt")
    model = SyntaxLM.load_from_checkpoint(last)  # rebuilt from the configs it saved
    assert type(model.backbone).__module__ == "gru_stack"
    assert [h.name for h in model.heads] == ["dreg"]
    metrics = (last.parent.parent / "metrics.csv").read_text()
    assert "train/dreg_loss" in metrics and "val/ppl" in metrics
