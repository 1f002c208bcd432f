"""GPST's recipe (``synlm.transition.gpst_lm.GPSTLM``, configs/gpst.yaml): ``synlm fit``
trains a cut-down GPST-small on the synthetic treebank and on the staged NLTK sample, its
validation loss falling; the fitted run parses and scores pairs by its beam search; the
supervised option on gold trees; bad settings in one line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from conftest import at_each_validation, metrics_of_test, run_cli, searches_and_parses
from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.errors import InputError
from synlm.loading import load_model
from synlm.transition.gpst_lm import GPSTLM, progress
from synlm.transition.types import ALL_ACTIONS

#: configs/gpst.yaml cut down: a 16-wide generative model, an 8-wide composition and parser.
SMALL = ["--model.init_args.size=16", "--model.init_args.n_heads=2",
         "--model.init_args.action_layers=1", "--model.init_args.generation_layers=1",
         "--model.init_args.compose_size=8", "--model.init_args.compose_heads=2",
         "--model.init_args.compose_ffn=16", "--model.init_args.compose_layers=1",
         "--model.init_args.score_size=4", "--model.init_args.parser_size=8",
         "--model.init_args.parser_hidden=16", "--model.init_args.parser_layers=1",
         "--model.init_args.parser_heads=2", "--model.init_args.max_positions=256",
         "--model.init_args.parser_positions=256", "--model.init_args.dropout=0.0",
         "--model.init_args.beam_size=3",
         "--data.batch_size=16", "--trainer.max_epochs=3", "--trainer.limit_train_batches=10",
         "--trainer.limit_val_batches=2", "--trainer.accelerator=cpu",
         "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
         "--trainer.log_every_n_steps=4", "--optimizer.init_args.lr=0.003"]
SYNTHETIC = ["--config", "data/synthetic_sentence.yaml", "--data.corpus.init_args.n_train=160",
             "--data.corpus.init_args.n_valid=32", "--data.corpus.init_args.n_test=8"]


def fit_lowers_the_loss(run: Path, *extra: str) -> GPSTLM:
    """``synlm fit`` of configs/gpst.yaml, cut down: the validation loss falls over three
    epochs, ``synlm test`` logs it, and the run loads."""
    torch.set_num_threads(1)
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "gpst.yaml"), *extra, *SMALL,
                    f"--trainer.default_root_dir={run}"]) == 0
    losses = at_each_validation(run)
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    logged = metrics_of_test(run, run / "test")
    assert 0.0 < float(logged["test/word_nll"]) < math.inf
    model = load_model(str(run))
    assert isinstance(model, GPSTLM) and model.vocab is not None
    return model


def test_the_config_fits_the_synthetic_treebank(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Fitted, it induces trees, parses (``synlm parse``) and scores pairs (``synlm
    evaluate-syntax``) with the released beam search."""
    model = fit_lowers_the_loss(tmp_path / "run", *SYNTHETIC)
    words = torch.tensor([model.vocab.encode(["the", "cat", "saw", "a", "dog"])])
    out = model.model.eval()(words, torch.tensor([5]))
    assert len(out.tree_actions[0]) == 9 and torch.isfinite(out.loss)
    report = searches_and_parses(model, tmp_path / "run", tmp_path, capsys)
    assert report["conventions"]["pairs"]["search_convention"] == ALL_ACTIONS
    with pytest.raises(InputError, match="word_beam_size: GPST searches by beam 3"):
        model.use_beam(word_beam_size=2)


def test_the_config_fits_the_nltk_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    staged("nltk_treebank", "treebank.zip")
    monkeypatch.chdir(tmp_path)
    fit_lowers_the_loss(tmp_path / "run")


def test_gold_trees_and_summed_gradients_train(tmp_path: Path) -> None:
    """``trees: gold`` (the generative model alone on the binarised gold trees) and
    ``gradients: sum`` (one backward of the released sum) lower the loss too."""
    fit_lowers_the_loss(tmp_path / "gold", *SYNTHETIC, "--model.init_args.trees=gold")
    fit_lowers_the_loss(tmp_path / "sum", *SYNTHETIC, "--model.init_args.gradients=sum")


def test_schedules_and_bad_settings() -> None:
    assert progress(1.0, 0.1, 0.8, 0, 100) == 1.0
    assert progress(1.0, 0.1, 0.8, 40, 100) == pytest.approx(0.55)
    assert progress(1.0, 0.1, 0.8, 90, 100) == pytest.approx(0.1)
    with pytest.raises(InputError, match="model.trees=silver: expected induced or gold"):
        GPSTLM(vocab_size=10, trees="silver")
    with pytest.raises(InputError, match="model.gradients=both"):
        GPSTLM(vocab_size=10, gradients="both")
