"""The recipes, the registry and the capabilities: every shipped config's model resolves
through the one registry (``synlm.catalog``, without torch; ``synlm.registry``, imported);
a run is tested with the config it saved; loading leaves torch's RNG alone; a command asked
for what a model lacks says so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from test_beam_failures import tiny_rnng
from test_export_hf import save_checkpoint

from conftest import run_cli
from synlm import catalog
from synlm.capabilities import InducesStructures, Parses, Samples, Searches, require
from synlm.errors import InputError
from synlm.lm import SyntaxLM
from synlm.loading import load_model, untrained_copy
from synlm.registry import recipe_class
from synlm.runtime.runs import CONFIG_KEY
from synlm.transition.gpst_lm import GPSTLM
from synlm.transition.lm import TransitionLM
from synlm.transition.pushdown_lm import PushdownLM
from synlm.transition.rnng import RNNG

FIXTURES = Path(__file__).parent / "fixtures"
CHECKPOINTS = FIXTURES / "checkpoints"
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
    elif recipe.name == "PushdownLM":  # its model is its own arguments
        assert cls is PushdownLM
    elif recipe.name == "GPSTLM":  # its model is its own arguments
        assert cls is GPSTLM
    else:
        assert cls is SyntaxLM
        arguments = model["init_args"]
        assert arguments["backbone"]["class_path"].rpartition(".")[2] in components("backbones")
        for head in arguments.get("heads") or []:
            assert head["class_path"].rpartition(".")[2] in components("heads")


def test_the_registry_finds_recipes_by_name_and_says_what_it_knows() -> None:
    assert recipe_class("synlm.transition.lm.TransitionLM") is TransitionLM
    assert recipe_class("TransitionLM") is TransitionLM
    assert recipe_class(None) is SyntaxLM
    with pytest.raises(InputError, match=r"^model.class_path TransitonLM: expected one of "
                       r"GPSTLM, PushdownLM, SyntaxLM, TransitionLM; did you mean TransitionLM\?$"):
        catalog.recipe("TransitonLM")
    with pytest.raises(InputError, match=r"^model.class_path synlm.transition.lm.RNNGLM: "
                       r"expected one of GPSTLM, PushdownLM, SyntaxLM, TransitionLM$"):
        recipe_class("synlm.transition.lm.RNNGLM")


def rnng_checkpoint(path: Path) -> Path:
    """A small RNNG under ``TransitionLM`` as ``synlm fit`` saves it: its vocabularies and
    the config the run was trained with."""
    saved = torch.load(save_checkpoint(tiny_rnng(), path), weights_only=False)
    saved[CONFIG_KEY] = yaml.safe_dump({"model": {
        "class_path": "TransitionLM",
        "init_args": {"model": {"class_path": "RNNG", "init_args": {"hidden_size": 8}}}}})
    torch.save(saved, path)
    return path


def test_a_transition_checkpoint_loads_as_saved_and_its_copy_is_fresh(tmp_path: Path) -> None:
    """``load_model`` rebuilds a ``TransitionLM`` checkpoint from the recipe it names, with
    its weights and vocabularies, and leaves torch's RNG alone; ``untrained_copy`` (the
    chance row) rebuilds its model's family with fresh weights and the same vocabularies."""
    saved = tiny_rnng()
    before = torch.get_rng_state()
    model = load_model(str(rnng_checkpoint(tmp_path / "rnng.ckpt")))
    assert torch.equal(torch.get_rng_state(), before)
    assert type(model) is TransitionLM and type(model.model) is RNNG
    assert model.state_dict().keys() == saved.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 saved.state_dict().values(), strict=True))
    assert model.vocab.itos == saved.vocab.itos
    assert model.action_vocab.itos == saved.action_vocab.itos
    fresh = untrained_copy(model, 1)
    assert type(fresh) is TransitionLM and type(fresh.model) is RNNG
    assert (fresh.vocab, fresh.action_vocab) == (model.vocab, model.action_vocab)
    assert not torch.equal(fresh.model.word_decoder.weight, model.model.word_decoder.weight)


def test_a_run_is_tested_with_its_own_config(tmp_path: Path) -> None:
    """``synlm test --ckpt_path CKPT`` reads the config the run saved, whose recipe the
    parser chooses by its ``class_path``, as Lightning's subclass mode does: it then builds
    it as the run did."""
    from synlm.lightning_cli import SynLMCLI, with_saved_config

    ckpt = rnng_checkpoint(tmp_path / "rnng.ckpt")
    args = with_saved_config(["test", "--ckpt_path", str(ckpt)])
    assert args[1] == "--config" and "class_path: TransitionLM" in args[2]
    cli = SynLMCLI(args=[*args[1:3], "--data.corpus=SyntheticTreebank", "--data.mode=actions",
                         f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert type(cli.model) is TransitionLM and type(cli.model.model) is RNNG


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


def test_what_generation_setup_and_provenance_ask_are_types() -> None:
    """A ``SyntaxLM`` runs a backbone and does not search; a loaded model names its file;
    DM's mixture head keeps histories, the distance head none; the DataModule serves gold."""
    from synlm.backbones import AWDLSTM
    from synlm.capabilities import FromCheckpoint, KeepsHistories, RunsBackbone, ServesGold
    from synlm.data.datamodule import SynLMDataModule
    from synlm.heads import DependencyMixtureHead, DistanceRankingHead

    syntax = SyntaxLM(AWDLSTM(8, 8, 2), heads=[DependencyMixtureHead("mixture")],
                      vocab_size=11)
    assert isinstance(syntax, RunsBackbone) and not isinstance(syntax, Searches)
    assert not isinstance(TransitionLM(RNNG(11, 5, 8, 8, 1)), RunsBackbone)
    assert not isinstance(syntax, FromCheckpoint)
    loaded = load_model(str(CHECKPOINTS / "onlstm_syd_v0.ckpt"))
    assert isinstance(loaded, FromCheckpoint) and Path(loaded.checkpoint_file).is_file()
    assert isinstance(syntax.heads[0], KeepsHistories)
    assert not isinstance(DistanceRankingHead(), KeepsHistories)
    assert isinstance(SynLMDataModule(), ServesGold) and not isinstance(object(), ServesGold)


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


def test_generate_on_a_transition_lm_is_one_line(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    path = rnng_checkpoint(tmp_path / "rnng.ckpt")
    assert run_cli(["generate", "--ckpt_path", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"synlm generate: --ckpt_path {path}: the model (TransitionLM(RNNG)) has no "
        "left-to-right sampling (Samples)")


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
