"""The RNNG through the command line and every scorer: ``synlm fit`` from configs/rnng.yaml
(a tiny one on the synthetic treebank), resume equal to an uninterrupted run, ``synlm
test``'s joint and beam perplexities, ``synlm parse``'s best trees, and ``evaluate-syntax``
and the lm-eval model scoring with the beam's word log-probabilities."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import TINY_OVERRIDES, metrics_of_test, pair_report, run_cli
from synlm.catalog import REPO_CONFIGS
from synlm.lm_eval_model import SynlmLM
from synlm.loading import load_model
from synlm.syntax.trees import to_bracket
from synlm.transition.beam import BeamSettings
from synlm.transition.lm import TransitionLM
from synlm.transition.rnng import RNNG
from synlm.tse.scoring import ModelScorer
from test_resume import assert_same_runs, last

TINY_RNNG = [
    *TINY_OVERRIDES,
    "--data.corpus.init_args.n_train=60",
    "--data.corpus.init_args.n_valid=8",
    "--data.corpus.init_args.n_test=8",
    "--model.init_args.model.init_args.input_size=12",
    "--model.init_args.model.init_args.hidden_size=12",
    "--model.init_args.model.init_args.num_layers=1",
    "--model.init_args.beam_size=6",
    "--model.init_args.word_beam_size=3",
    "--trainer.limit_val_batches=2",
    "--trainer.log_every_n_steps=1",
    "--trainer.val_check_interval=2",
]


def fit(root: Path, max_steps: int, *extra: str) -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / "rnng.yaml"), *TINY_RNNG,
            f"--trainer.max_steps={max_steps}", f"--trainer.default_root_dir={root}", *extra]
    assert run_cli(args) == 0


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RNNG run, 6 steps."""
    root = tmp_path_factory.mktemp("rnng")
    torch.set_num_threads(1)
    fit(root, 6)
    return root


def test_fit_saves_an_rnng_with_its_vocabularies(trained: Path) -> None:
    model = load_model(str(trained))
    assert isinstance(model, TransitionLM) and isinstance(model.model, RNNG)
    assert model.vocab is not None and model.action_vocab is not None
    assert model.action_vocab.itos[:2] == ["SHIFT", "REDUCE"]
    assert model.model.n_actions == len(model.action_vocab)
    saved = last(trained)
    assert saved["synlm"]["model_class"] == "synlm.transition.lm.TransitionLM"
    assert math.isfinite(saved["callbacks"][next(iter(saved["callbacks"]))]["best_model_score"])


def test_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit(straight, 5)
    fit(resumed, 3)
    fit(resumed, 5, "--ckpt_path=last")
    assert_same_runs(straight, resumed, 5)


def test_test_logs_joint_and_beam_perplexities(trained: Path, tmp_path: Path) -> None:
    logged = metrics_of_test(trained, tmp_path / "test")
    for name in ("test/joint_ppl", "test/action_ppl", "test/word_ppl", "test/beam_ppl"):
        assert 1.0 < float(logged[name]) < math.inf, name
    assert 0.0 <= float(logged["test/uf1"]) <= 1.0


def test_parse_gives_best_trees_over_the_input_words(trained: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "in.txt"
    text.write_text("the dog sees a cat\nthe cat sleeps\n")
    assert run_cli(["parse", "--ckpt_path", str(trained), "--input", str(text),
                    "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["words"] for r in lines] == [["the", "dog", "sees", "a", "cat"],
                                           ["the", "cat", "sleeps"]]
    model = load_model(str(trained))
    model.beam = BeamSettings(6, 3, 1)
    expected = model.parse([["the", "cat", "sleeps"]])[0]
    assert lines[1]["tree"] == to_bracket(expected)


def test_scorers_read_the_beams_word_log_probs(trained: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    """ModelScorer (hence evaluate-syntax) and the lm-eval model score an RNNG by its beam:
    the word log-probabilities sum to the beam's prefix log-probability."""
    model = load_model(str(trained))
    model.beam = BeamSettings(6, 3, 1)
    words = ["the", "dog", "sleeps"]
    scored = ModelScorer(model).score([words])[0]
    ids = torch.tensor([model.vocab.encode(words)])
    (result,) = model.search(ids, torch.tensor([3]))
    assert scored.word_log_probs == pytest.approx(result.word_log_probs, abs=1e-6)
    assert scored.eos_log_prob == pytest.approx(result.end_log_prob, abs=1e-6)
    lm = SynlmLM(model=model, beam_size=6, word_beam_size=3, shift_size=1)
    assert lm.greedy is False
    report = pair_report(trained, tmp_path, capsys, "the dog sleeps", "dog the sleeps",
                         "--beam-size", "6", "--word-beam-size", "3")
    good = sum(ModelScorer(model).score([["the", "dog", "sleeps"]])[0].word_log_probs)
    bad = sum(ModelScorer(model).score([["dog", "the", "sleeps"]])[0].word_log_probs)
    assert report["headline"]["pairs/accuracy"] == float(good > bad)
