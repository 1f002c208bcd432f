"""PLM, PLM-mask and Transformer Grammars through the command line and every scorer, as the
RNNG (tests/test_rnng_cli.py): ``synlm fit`` from configs/plm.yaml, plm_mask.yaml and
tg.yaml (tiny, on the synthetic treebank), resume equal to an uninterrupted run, ``synlm
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
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention import CausalPolicy, PLMMaskPolicy, TGPolicy
from synlm.transition.beam import BeamSettings
from synlm.transition.lm import TransitionLM
from synlm.tse.scoring import ModelScorer
from test_resume import assert_same_runs, last

CONFIGS = {"plm.yaml": CausalPolicy, "plm_mask.yaml": PLMMaskPolicy, "tg.yaml": TGPolicy}
TINY = [
    *TINY_OVERRIDES,
    "--data.corpus.init_args.n_train=60",
    "--data.corpus.init_args.n_valid=8",
    "--data.corpus.init_args.n_test=8",
    "--model.init_args.model.init_args.size=16",
    "--model.init_args.model.init_args.num_layers=1",
    "--model.init_args.model.init_args.num_heads=2",
    "--model.init_args.model.init_args.ffn_size=32",
    "--model.init_args.beam_size=6",
    "--model.init_args.word_beam_size=3",
    "--model.init_args.shift_size=1",
    "--trainer.limit_val_batches=2",
    "--trainer.log_every_n_steps=1",
    "--trainer.val_check_interval=2",
]


def fit(config: str, root: Path, max_steps: int, *extra: str) -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / config), *TINY,
            f"--trainer.max_steps={max_steps}", f"--trainer.default_root_dir={root}", *extra]
    assert run_cli(args) == 0


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[str, Path]:
    """A tiny run of each config, 6 steps."""
    root = tmp_path_factory.mktemp(request.param.removesuffix(".yaml"))
    torch.set_num_threads(1)
    fit(request.param, root, 6)
    return request.param, root


def test_fit_saves_the_policy_with_its_vocabularies(trained: tuple[str, Path]) -> None:
    config, root = trained
    model = load_model(str(root))
    assert isinstance(model, TransitionLM) and isinstance(model.model, ActionTransformer)
    assert type(model.model.policy) is CONFIGS[config]
    policy = model.model.init_config["init_args"]["attention"]  # saved by its class_path
    assert policy["class_path"].rpartition(".")[2] == CONFIGS[config].__name__
    assert model.vocab is not None and model.action_vocab is not None
    assert model.model.n_actions == len(model.action_vocab)
    saved = last(root)
    assert saved["synlm"]["model_class"] == "synlm.transition.lm.TransitionLM"
    assert math.isfinite(saved["callbacks"][next(iter(saved["callbacks"]))]["best_model_score"])


def test_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    fit("tg.yaml", straight, 5)
    fit("tg.yaml", resumed, 3)
    fit("tg.yaml", resumed, 5, "--ckpt_path=last")
    assert_same_runs(straight, resumed, 5)


def test_test_logs_joint_and_beam_perplexities(trained: tuple[str, Path], tmp_path: Path
                                               ) -> None:
    _, root = trained
    logged = metrics_of_test(root, tmp_path / "test")
    for name in ("test/joint_ppl", "test/action_ppl", "test/word_ppl", "test/beam_ppl"):
        assert 1.0 < float(logged[name]) < math.inf, name
    assert 0.0 <= float(logged["test/uf1"]) <= 1.0


def test_parse_gives_best_trees_over_the_input_words(trained: tuple[str, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    _, root = trained
    text = tmp_path / "in.txt"
    text.write_text("the dog sees a cat\nthe cat sleeps\n")
    assert run_cli(["parse", "--ckpt_path", str(root), "--input", str(text),
                    "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["words"] for r in lines] == [["the", "dog", "sees", "a", "cat"],
                                           ["the", "cat", "sleeps"]]
    model = load_model(str(root))
    model.beam = BeamSettings(6, 3, 1)
    assert lines[1]["tree"] == to_bracket(model.parse([["the", "cat", "sleeps"]])[0])


def test_scorers_read_the_beams_word_log_probs(trained: tuple[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    """ModelScorer (hence evaluate-syntax) and the lm-eval model score an action Transformer
    by its beam, as an RNNG."""
    _, root = trained
    model = load_model(str(root))
    model.beam = BeamSettings(6, 3, 1)
    words = ["the", "dog", "sleeps"]
    scored = ModelScorer(model).score([words])[0]
    (result,) = model.search(torch.tensor([model.vocab.encode(words)]), torch.tensor([3]))
    assert scored.word_log_probs == pytest.approx(result.word_log_probs, abs=1e-6)
    assert scored.eos_log_prob == pytest.approx(result.end_log_prob, abs=1e-6)
    assert SynlmLM(model=model, beam_size=6, word_beam_size=3, shift_size=1).greedy is False
    report = pair_report(root, tmp_path, capsys, "the dog sleeps", "dog the sleeps",
                         "--beam-size", "6", "--word-beam-size", "3", "--shift-size", "1")
    good = sum(ModelScorer(model).score([["the", "dog", "sleeps"]])[0].word_log_probs)
    bad = sum(ModelScorer(model).score([["dog", "the", "sleeps"]])[0].word_log_probs)
    assert report["headline"]["pairs/accuracy"] == float(good > bad)
