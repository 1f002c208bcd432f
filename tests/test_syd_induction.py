"""ONLSTM-SYD on the synthetic treebank: after a short seeded CPU run its supervised
distances parse better than the right-branching baseline and than an unsupervised ON-LSTM
trained on the same budget (Du et al. 2020's claim, in miniature)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.data.synthetic import SyntheticTreebank
from synlm.metrics.parsing import ParsingF1, evaluation_tree
from synlm.syntax import baseline_tree


def final_metrics(root: Path, *overrides: str) -> dict[str, float]:
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"),
            "--trainer.max_epochs=2", "--trainer.enable_model_summary=false",
            "--trainer.enable_progress_bar=false",
            f"--trainer.default_root_dir={root}", *overrides]
    assert main(args) == 0
    rows = list(csv.DictReader((root / "version_0" / "metrics.csv").open()))
    last = [r for r in rows if r.get("val/uf1")][-1]
    return {k: float(v) for k, v in last.items() if v and k.startswith("val/")}


@pytest.mark.slow
def test_supervised_distances_beat_baseline_and_unsupervised_onlstm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sentences = SyntheticTreebank().sentences("valid")
    golds = [evaluation_tree(s.tree) for s in sentences]
    right = ParsingF1()
    right.update([baseline_tree(g.leaves(), "right-branching") for g in golds], golds)
    right_uf1 = 100 * float(right.compute()["uf1_sentence"])  # percent, as val/uf1

    syd = final_metrics(tmp_path / "syd")
    plain = final_metrics(tmp_path / "onlstm", "--model.heads=[]")
    assert "val/uf1_syd" in syd and "val/uf1_syd" not in plain
    best_unsupervised = max(v for k, v in plain.items() if k.startswith("val/uf1_lm"))
    # measured (2 epochs, seed 141): SYD 73.8, right-branching 41.3, unsupervised 44.0, ppl 15.8
    assert syd["val/uf1_syd"] > right_uf1 + 15
    assert syd["val/uf1_syd"] > best_unsupervised + 5
    assert np.isfinite(syd["val/ppl"]) and syd["val/ppl"] < 20

    # the same trees through `synlm parse --ckpt_path` (punctuation-free sentences fed alone)
    treebank = tmp_path / "valid.mrg"
    treebank.write_text("".join(s.tree.pformat(margin=10**6) + "\n" for s in sentences))
    checkpoint = tmp_path / "syd"  # the run folder: its best checkpoint
    capsys.readouterr()  # the runs' summaries
    for distances, floor in (("syd", right_uf1 + 15), ("lm", 0.0)):
        assert main(["parse", "--ckpt_path", str(checkpoint), "--treebank", str(treebank),
                     "--structure", distances, "--layer", "0"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["n_sentences"] == len(sentences)
        assert report["uf1_sentence"] > floor
