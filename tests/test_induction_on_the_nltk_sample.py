"""The structure-inducing Transformers from their shipped configs, cut down, trained on the
staged NLTK treebank sample (``data/nltk_sample_trees.yaml``: real WSJ trees, punctuation
and case as written): StructFormer and UDGN as masked LMs, TreeReg on a causal Transformer.
Each lowers its loss over three short epochs and scores the structures it induces (or, for
TreeReg, its bracketing accuracy) on the sample's validation trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import at_each_validation, run_cli
from staged import staged

SMALL = {
    "structformer.yaml": ["--model.backbone.init_args.hidden_size=16",
                          "--model.backbone.init_args.num_layers=2",
                          "--model.backbone.init_args.num_heads=2",
                          "--model.backbone.init_args.parser_layers=2",
                          "--model.backbone.init_args.conv_size=3",
                          "--data.max_tokens=null", "--data.batch_size=16",
                          "--optimizer.init_args.lr=0.01"],
    "udgn.yaml": ["--model.backbone.init_args.emb_size=16",
                  "--model.backbone.init_args.head_size=4",
                  "--model.backbone.init_args.num_layers=2",
                  "--model.backbone.init_args.num_heads=2",
                  "--model.backbone.init_args.parser_layers=2",
                  "--data.max_tokens=null", "--data.batch_size=16",
                  "--optimizer.init_args.lr=0.01"],
    "treereg_transformer.yaml": ["--model.backbone.init_args.input_size=16",
                                 "--model.backbone.init_args.num_layers=3",
                                 "--model.backbone.init_args.num_heads=2",
                                 "--model.backbone.init_args.ffn_size=32",
                                 "--model.init_std=0.25", "--data.max_tokens=null",
                                 "--data.batch_size=16", "--trainer.accumulate_grad_batches=1",
                                 "--optimizer.init_args.lr=3e-3",
                                 "--lr_scheduler.init_args.warmup_steps=1"],
}
#: What each config's validation scores of the sample's trees are logged as.
SCORES = {"structformer.yaml": ["val/uf1_constituency"], "udgn.yaml": [],
          "treereg_transformer.yaml": ["val/treereg_acc"]}


@pytest.mark.parametrize("config", list(SMALL))
def test_fits_the_nltk_sample_and_scores_its_trees(config: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    staged("nltk_treebank", "treebank.zip")
    monkeypatch.chdir(tmp_path)
    assert run_cli(["fit", "--config", config, "--config", "data/nltk_sample_trees.yaml",
                    *SMALL[config], "--trainer.max_epochs=3",
                    "--trainer.limit_train_batches=12", "--trainer.limit_val_batches=4",
                    "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=4",
                    f"--trainer.default_root_dir={tmp_path / 'run'}"]) == 0
    losses = at_each_validation(tmp_path / "run")
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    for key in SCORES[config]:
        scores = at_each_validation(tmp_path / "run", key)
        assert len(scores) == 3 and all(0.0 <= s <= 100.0 for s in scores), (key, scores)
