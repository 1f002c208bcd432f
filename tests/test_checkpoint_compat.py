"""Checkpoints keep loading across the split of the model from its training recipe, and a
model built in Python saves and reloads with Lightning's public API alone."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from synlm.backbones import ONLSTM
from synlm.heads import DistanceRankingHead
from synlm.lm import SyntaxLM
from synlm.model import SyntaxModel, upgrade_state_dict
from synlm.modules.recorded import build

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"


def test_checkpoint_from_before_the_split_computes_what_it_did() -> None:
    """onlstm_syd_v0.ckpt was written by the CLI at a036338 (make_v0.py), with the model's
    weights at the top of the LightningModule; its recorded numbers still come out."""
    expected = json.loads((FIXTURES / "onlstm_syd_v0.json").read_text())
    model = SyntaxLM.load_from_checkpoint(FIXTURES / "onlstm_syd_v0.ckpt", map_location="cpu")
    tokens = torch.tensor(expected["tokens"])
    log_probs = model.log_probs(tokens)
    # each log-prob is the float32 result of float32 sums, the longest the log-softmax's over
    # the vocabulary (70 terms; the layers' have 16 or 32): another CPU may add the terms in
    # another order, which moves a sum of N terms by up to ~N * eps32 of its size. The
    # log-probs are all negative, so their sum (in float64) moves by at most that fraction.
    vocab = log_probs.shape[-1]
    assert log_probs.double().sum().item() == pytest.approx(
        expected["log_probs_sum"], rel=vocab * torch.finfo(torch.float32).eps, abs=0)
    torch.testing.assert_close(log_probs[:, :, :12], torch.tensor(expected["log_probs_at"]),
                               rtol=0, atol=1e-6)
    torch.testing.assert_close(model.target_log_probs(tokens, tokens.roll(-1, dims=1)),
                               torch.tensor(expected["target_log_probs"]), rtol=0, atol=1e-6)
    induced = model.induce(tokens)
    assert induced.keys() == expected["structures"].keys()
    for name, values in expected["structures"].items():
        torch.testing.assert_close(induced[name].double(), torch.tensor(values,
                                   dtype=torch.float64), rtol=0, atol=1e-6)
    assert len(model.vocab) == expected["vocab_size"]
    assert model.normalization == expected["normalization"]


def test_old_checkpoint_resumes_into_the_new_layout(tmp_path: Path) -> None:
    saved = torch.load(FIXTURES / "onlstm_syd_v0.ckpt", map_location="cpu", weights_only=True)
    assert all(not k.startswith("model.") for k in saved["state_dict"])
    renamed = upgrade_state_dict(saved["state_dict"])
    model = SyntaxLM.load_from_checkpoint(FIXTURES / "onlstm_syd_v0.ckpt", map_location="cpu")
    assert renamed.keys() == model.state_dict().keys()
    assert upgrade_state_dict(renamed) == renamed  # a current state dict is left as it is


def tiny() -> SyntaxLM:
    backbone = ONLSTM(input_size=8, hidden_size=16, num_layers=2, chunk_size=4)
    return SyntaxLM(backbone, [DistanceRankingHead(layer=1, mlp_size=8)], vocab_size=20,
                    alpha=2.0, param_groups=[{"pattern": "^heads", "options": {"lr": 0.5}}])


def test_model_built_in_python_reloads_with_load_from_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = tiny()
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, max_epochs=0)
    trainer.strategy.connect(model)
    trainer.save_checkpoint(tmp_path / "built.ckpt")
    loaded = SyntaxLM.load_from_checkpoint(tmp_path / "built.ckpt", weights_only=True)
    assert loaded.hparams.backbone == model.backbone.init_config
    assert loaded.hparams.param_groups == model.hparams.param_groups
    assert loaded.hparams.alpha == 2.0
    tokens = torch.randint(20, (2, 7))
    torch.testing.assert_close(loaded.log_probs(tokens), model.log_probs(tokens), rtol=0, atol=0)


def test_syntax_model_needs_no_lightning() -> None:
    """The model alone: built from the configs its parts record, it computes the same."""
    torch.manual_seed(0)
    lm = tiny()
    model = SyntaxModel(lm.backbone.init_config, [h.init_config for h in lm.heads],
                        vocab_size=20)
    assert not isinstance(model, pl.LightningModule)
    model.load_state_dict({k.removeprefix("model."): v for k, v in lm.state_dict().items()})
    tokens = torch.randint(20, (2, 7))
    torch.testing.assert_close(model.log_probs(tokens), lm.log_probs(tokens), rtol=0, atol=0)
    assert model.induce(tokens).keys() == lm.induce(tokens).keys()


def test_build_refuses_what_is_not_a_component() -> None:
    with pytest.raises(ValueError, match="'torch.nn.Linear': not a synlm component"):
        build({"class_path": "torch.nn.Linear", "init_args": {"in_features": 2}})
    with pytest.raises(ValueError, match="no such class"):
        build({"class_path": "synlm.backbones.OnLstm"})


def test_a_tg_checkpoint_from_before_the_policies_held_their_settings_computes_what_it_did(
) -> None:
    """tg_v1.ckpt was written by the CLI at c9c2e74 (make_tg_v1.py): TransitionLM's
    hyperparameters without its class, TG's settings (``min_relative``, ``max_relative``,
    ``sequence_length``, ...) as ``ActionTransformer``'s own arguments. It loads into a
    ``TGPolicy`` holding them and computes the recorded log-probabilities."""
    from synlm.loading import load_model
    from synlm.transition.attention.tg import TGPolicy

    model = load_model(str(FIXTURES / "tg_v1.ckpt"))
    assert isinstance(model.model.policy, TGPolicy)
    assert model.model.policy.relative_range == (-1, 62)
    for row in json.loads((FIXTURES / "tg_v1.json").read_text()):
        with torch.no_grad():
            out = model.model(torch.tensor([row["words"]]), torch.tensor([row["actions"]]),
                              torch.tensor([len(row["words"])]))
        assert out.action_log_probs[0].tolist() == pytest.approx(row["action_log_probs"],
                                                                 abs=1e-5)
        assert out.word_log_probs[0].tolist() == pytest.approx(row["word_log_probs"], abs=1e-5)
        assert float(out.joint[0]) == pytest.approx(row["joint"], abs=1e-4)


def test_synlm_test_reads_a_transition_checkpoint_from_before(tmp_path: Path) -> None:
    """``synlm test --ckpt_path`` on the same checkpoint: its saved config and its
    hyperparameters are read in today's form (the recipe the config names, the policy with
    its settings), and the test runs."""
    from conftest import run_cli

    assert run_cli(["test", "--ckpt_path", str(FIXTURES / "tg_v1.ckpt"),
                    "--trainer.limit_test_batches=1", "--model.beam_size=2",
                    "--model.word_beam_size=1", f"--trainer.default_root_dir={tmp_path}"]) == 0
    (metrics,) = tmp_path.rglob("metrics.csv")
    assert "test/joint_ppl" in metrics.read_text()


def test_a_run_config_from_before_resolves_to_the_policy_with_its_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The config.yaml such a run wrote (the checkpoint carries it) is a config today: its
    TG settings are the policy's."""
    import yaml

    from conftest import run_cli
    from synlm.runtime.runs import CONFIG_KEY

    saved = torch.load(FIXTURES / "tg_v1.ckpt", map_location="cpu", weights_only=False)
    (tmp_path / "config.yaml").write_text(saved[CONFIG_KEY])
    assert "min_relative" in saved[CONFIG_KEY]
    assert run_cli(["fit", "--config", str(tmp_path / "config.yaml"), "--print_config"]) == 0
    model = yaml.safe_load(capsys.readouterr().out)["model"]["init_args"]["model"]["init_args"]
    assert model["attention"] == {
        "class_path": "synlm.transition.attention.tg.TGPolicy",
        "init_args": {"min_relative": -1, "max_relative": 62, "sequence_length": None,
                      "memory_length": None}}
