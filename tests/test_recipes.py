"""The recipes, the registry and the capabilities: every shipped config's model resolves
through the one registry (``synlm.catalog``, without torch; ``synlm.registry``, imported);
a checkpoint and a config in the former flat form (``RNNGLM``, ``ActionTransformerLM``)
load and compute the numbers they did (tests/fixtures/checkpoints/make_transition_v0.py);
loading leaves torch's RNG alone; a command asked for what a model lacks says so in one
line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from conftest import run_cli
from synlm import catalog
from synlm.capabilities import InducesStructures, Parses, Samples, Searches, require
from synlm.errors import InputError
from synlm.lm import SyntaxLM
from synlm.loading import load_model, untrained_copy
from synlm.registry import recipe_class
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.beam import BeamSettings
from synlm.transition.lm import TransitionLM
from synlm.transition.rnng import RNNG

FIXTURES = Path(__file__).parent / "fixtures"
CHECKPOINTS = FIXTURES / "checkpoints"
RECORDED = json.loads((CHECKPOINTS / "transition_v0.json").read_text())
#: the shipped experiments as ``synlm fit`` resolves them (not the data and trainer partials)
RESOLVED = sorted(p for p in (FIXTURES / "resolved_configs").rglob("*.yaml")
                  if p.parent.name not in ("data", "trainer"))


def components(kind: str) -> set[str]:
    return set(catalog.list_components()[kind])


@pytest.mark.parametrize("path", RESOLVED, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_shipped_config_resolves_through_the_registry(path: Path) -> None:
    """Each shipped config's model (as ``synlm fit`` resolves it: the recorded fixtures)
    names a recipe the registry lists, and the recipe's model, or backbone and heads, are
    components it lists; the registry imports the recipe by that name."""
    model = yaml.safe_load(path.read_text())["model"]
    named = model.get("class_path")
    recipe = catalog.recipe(named)
    assert recipe.name in components("recipes")
    cls = recipe_class(named)
    if recipe.name == "TransitionLM":
        inner = model["init_args"]["model"]["class_path"].rpartition(".")[2]
        assert inner in components("transition_models")
        assert issubclass(cls, TransitionLM)
    else:
        assert cls is SyntaxLM
        assert model["backbone"]["class_path"].rpartition(".")[2] in components("backbones")
        for head in model.get("heads") or []:
            assert head["class_path"].rpartition(".")[2] in components("heads")


def test_the_registry_finds_former_names_and_says_what_it_knows() -> None:
    assert recipe_class("synlm.transition.lm.RNNGLM").__name__ == "RNNGLM"
    assert issubclass(recipe_class("ActionTransformerLM"), TransitionLM)
    assert recipe_class(None) is SyntaxLM
    with pytest.raises(InputError, match=r"^model.class_path TransitonLM: expected one of "
                       r"SyntaxLM, TransitionLM; did you mean TransitionLM\?$"):
        catalog.recipe("TransitonLM")
    assert "RNNGLM" not in components("recipes")  # a former name: found, not listed


def record(model: Any, name: str) -> dict[str, Any]:
    """What make_transition_v0.py recorded, computed by ``model``."""
    probe = RECORDED[name]
    rows, actions = probe["words"], probe["actions"]
    words = torch.tensor([r + [0] * (6 - len(r)) for r in rows])
    lengths = torch.tensor([len(r) for r in rows])
    width = max(map(len, actions))
    padded = torch.tensor([a + [-1] * (width - len(a)) for a in actions])
    with torch.no_grad():
        out = model.model(words, padded, lengths)
    results = model.search(words, lengths, BeamSettings(4, 2, 1))
    return {"joint": out.joint.double().tolist(),
            "action_log_probs": out.action_log_probs.double().tolist(),
            "word_log_probs": out.word_log_probs.double().tolist(),
            "beam_word_log_probs": [list(r.word_log_probs) for r in results],
            "beam_end_log_prob": [r.end_log_prob for r in results],
            "beam_best": [list(r.parses[0][0]) for r in results]}


def assert_recorded(got: dict[str, Any], name: str) -> None:
    want = RECORDED[name]
    for key in ("joint", "action_log_probs", "word_log_probs"):
        torch.testing.assert_close(torch.tensor(got[key]), torch.tensor(want[key]),
                                   rtol=0, atol=1e-5)
    for got_row, want_row in zip(got["beam_word_log_probs"], want["beam_word_log_probs"],
                                 strict=True):
        assert got_row == pytest.approx(want_row, abs=1e-5)
    assert got["beam_end_log_prob"] == pytest.approx(want["beam_end_log_prob"], abs=1e-5)
    assert got["beam_best"] == want["beam_best"]


@pytest.mark.parametrize(("name", "family"), [("rnng_v0", RNNG), ("tg_v0", ActionTransformer)])
def test_a_checkpoint_of_the_former_form_computes_what_it_did(name: str, family: type) -> None:
    """Written by ``RNNGLM``/``ActionTransformerLM`` (flat hyperparameters, the class named
    in ``synlm.model_class``), read by ``load_model``, which leaves torch's RNG alone."""
    before = torch.get_rng_state()
    model = load_model(str(CHECKPOINTS / f"{name}.ckpt"))
    assert torch.equal(torch.get_rng_state(), before)
    assert isinstance(model, TransitionLM) and isinstance(model.model, family)
    assert_recorded(record(model, name), name)
    # it holds TransitionLM's form, which rebuilds it (the chance row's copy)
    assert model.hparams["model"]["class_path"] == f"{family.__module__}.{family.__name__}"
    assert type(untrained_copy(model, 0).model) is family


@pytest.mark.parametrize("name", ["rnng_v0", "tg_v0"])
def test_a_config_of_the_former_form_builds_the_same_model(name: str, tmp_path: Path) -> None:
    """The config the former run saved (``model: {class_path: ...RNNGLM, init_args: {flat}}``)
    builds a model that, given the checkpoint's weights and vocabularies, computes the
    recorded numbers; so does the same config in TransitionLM's form, whose checkpoint
    then saves that form."""
    from synlm.lightning_cli import build_model

    saved = torch.load(CHECKPOINTS / f"{name}.ckpt", map_location="cpu", weights_only=False)
    former = yaml.safe_load(saved["synlm_config"])
    for key in ("ckpt_path", "weights_only"):  # fit's, which build_model does not take
        former.pop(key)
    assert former["model"]["class_path"].rpartition(".")[2] in ("RNNGLM", "ActionTransformerLM")
    assert "hidden_size" in former["model"]["init_args"] or "size" in former["model"]["init_args"]
    config = tmp_path / "former.yaml"
    config.write_text(yaml.safe_dump(former))
    loaded = load_model(str(CHECKPOINTS / f"{name}.ckpt"))
    model = build_model(str(config))
    model.load_state_dict(saved["state_dict"])
    model.action_vocab = loaded.action_vocab
    assert_recorded(record(model.eval(), name), name)
    assert model.hparams["model"]["class_path"] == loaded.hparams["model"]["class_path"]
    assert {k: v for k, v in model.hparams.items() if k != "optimizer"} == \
        {k: v for k, v in loaded.hparams.items() if k != "optimizer"}


def test_a_former_run_is_tested_with_its_own_config() -> None:
    """``synlm test --ckpt_path FORMER.ckpt`` reads the config the run saved (the former
    form), whose recipe the command line finds by its name: jsonargparse then builds it
    as the run did."""
    from synlm.lightning_cli import model_class_of, with_saved_config

    args = with_saved_config(["test", "--ckpt_path", str(CHECKPOINTS / "rnng_v0.ckpt")])
    assert model_class_of(args).__name__ == "RNNGLM"
    assert model_class_of([*args, "--model.class_path", "TransitionLM"]) is TransitionLM
    with pytest.raises(InputError, match="SyntaxLM takes its arguments under model:"):
        model_class_of([*args, "--model.class_path", "SyntaxLM"])


def test_transition_lm_takes_any_form_of_its_model() -> None:
    """A model built already, a ``{"class_path", "init_args"}`` dict (a checkpoint's) and a
    builder of ``(vocab_size, n_actions)`` (the CLI's) give the same recipe."""
    torch.manual_seed(0)
    built = TransitionLM(RNNG(11, 5, 8, 8, 1))
    as_dict = TransitionLM(built.hparams["model"], vocab_size=11, n_actions=5)
    as_builder = TransitionLM(lambda v, a: RNNG(v, a, 8, 8, 1), vocab_size=11, n_actions=5)
    assert built.hparams == as_dict.hparams == as_builder.hparams
    assert built.hparams["model"]["init_args"]["hidden_size"] == 8
    assert (built.hparams["vocab_size"], built.hparams["n_actions"]) == (11, 5)
    with pytest.raises(InputError, match="not a TransitionModel"):
        TransitionLM(lambda v, a: torch.nn.Linear(v, a))


def test_capabilities_are_types() -> None:
    transition = TransitionLM(RNNG(11, 5, 8, 8, 1))
    assert isinstance(transition, Searches) and isinstance(transition, Parses)
    assert not isinstance(transition, Samples)
    assert not isinstance(transition, InducesStructures)
    for lacking in (object(), type("Fake", (), {"use_beam": None})()):
        assert not isinstance(lacking, Searches)
    with pytest.raises(InputError, match=r"^synlm generate: the model \(TransitionLM\(RNNG\)\) "
                       r"has no left-to-right sampling \(Samples\)$"):
        require(transition, Samples, "synlm generate")


def test_a_structure_from_a_model_that_induces_none_is_one_line() -> None:
    from synlm.parsing import check_structure, default_structure

    plain = type("Plain", (), {})()
    with pytest.raises(InputError, match=r"^--structure syd: the model \(Plain\) has no "
                       r"induced structures \(InducesStructures\)$"):
        check_structure(plain, "syd")
    with pytest.raises(InputError, match=r"model \(Plain\) induces no structure$"):
        default_structure(plain)


def test_loading_a_syntax_lm_leaves_the_rng_alone() -> None:
    before = torch.get_rng_state()
    assert isinstance(load_model(str(CHECKPOINTS / "onlstm_syd_v0.ckpt")), SyntaxLM)
    assert torch.equal(torch.get_rng_state(), before)


def test_generate_on_a_transition_lm_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = CHECKPOINTS / "rnng_v0.ckpt"
    assert run_cli(["generate", "--ckpt_path", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"synlm generate: --ckpt_path {path}: the model (RNNGLM(RNNG)) has no left-to-right "
        "sampling (Samples)")


def test_a_checkpoint_whose_actions_are_not_its_datas_is_one_line() -> None:
    """``synlm test`` of a checkpoint on another treebank: the DataModule's action vocabulary
    (read at setup) must be the checkpoint's, or every action id would mean another action."""
    from synlm.syntax.actions import ActionVocab

    saved = {"synlm": {"action_vocab": ActionVocab(["NP", "S", "VP"]).to_saved()}}
    model = TransitionLM(RNNG(11, 5, 8, 8, 1))
    model.action_vocab = ActionVocab(["NP", "S", "VP"])  # the same labels: fine
    model.on_load_checkpoint(saved)
    assert model.action_vocab.itos == ["SHIFT", "REDUCE", "NT(NP)", "NT(S)", "NT(VP)"]
    model.action_vocab = ActionVocab(["ADJP", "NP", "S"])  # as many, other labels
    with pytest.raises(InputError, match=r"^the checkpoint's actions \(SHIFT, REDUCE, NT\(NP\)"):
        model.on_load_checkpoint(saved)
