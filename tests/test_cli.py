"""The synlm command: every shipped config prints and runs; errors are one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import TINY_OVERRIDES, local_gpt2, run_cli
from synlm.catalog import REPO_CONFIGS, list_components
from synlm.lightning_cli import from_config
from synlm.model import SyntaxModel
from synlm.transition.gpst_lm import GPSTLM
from synlm.transition.lm import TransitionLM
from synlm.transition.pushdown import PushdownTransformer
from synlm.transition.pushdown_lm import PushdownLM

EXPERIMENTS = sorted(str(p.relative_to(REPO_CONFIGS)) for p in
                     [*REPO_CONFIGS.glob("*.yaml"), *REPO_CONFIGS.glob("generation/*.yaml"),
                      *REPO_CONFIGS.glob("ablations/*.yaml")])
#: Partial configs that stack on an experiment (``--config X.yaml --config data/Y.yaml``)
#: or that an experiment names as its base (``config: data/ptb.yaml``).
RESOLVED = Path(__file__).parent / "fixtures" / "resolved_configs"
PARTIALS = sorted(str(p.relative_to(REPO_CONFIGS)) for p in
                  [*REPO_CONFIGS.glob("data/*.yaml"), *REPO_CONFIGS.glob("trainer/*.yaml")])


def hub_free() -> list[str]:
    """A small local GPT-2 (weights and tokenizer) instead of the hub's."""
    return [f"--model.backbone.init_args.pretrained={local_gpt2()}"]


def local_tokenizer(config: str) -> list[str]:
    """The small local GPT-2's tokenizer for a config whose subwords are a pretrained
    tokenizer (GPT-2's, from the hub)."""
    subwords = yaml.safe_load((RESOLVED / config).read_text())["data"].get("subwords") or {}
    if str(subwords.get("class_path", "")).endswith("PretrainedTokenizer"):
        return [f"--data.subwords.init_args.name_or_path={local_gpt2()}"]
    return []


def sets_max_tokens(config: str) -> bool:
    """Whether ``config`` (its base included: the resolved config) batches by a token budget
    (``data.max_tokens``)."""
    return yaml.safe_load((RESOLVED / config).read_text())["data"]["max_tokens"] is not None


def tiny(config: str) -> list[str]:
    """``TINY_OVERRIDES`` for ``config``; a token-budget config keeps its token-budget
    batches, of a few sentences (its budget of thousands of tokens would make the
    Transformers' fast_dev_run the suite's slowest tests)."""
    budget = ["--data.max_tokens=128"] if sets_max_tokens(config) else []
    return [*TINY_OVERRIDES, *budget]


def after_phase_one(config: str, *extra: str):
    """Overrides that start ``config``'s second phase from two steps of its first, run
    here through the CLI with ``extra`` overrides."""
    def overrides(root: Path) -> list[str]:
        args = ["fit", "--config", str(REPO_CONFIGS / config), *tiny(config), *extra,
                "--trainer.max_steps=2", "--trainer.limit_val_batches=1",
                f"--trainer.default_root_dir={root / 'phase1'}"]
        assert run_cli(args) == 0
        return [*extra, f"--model.init_from={root / 'phase1'}"]
    return overrides


#: The fits below that start from saved weights: a first phase trained here (on a small
#: local GPT-2 instead of the hub's).
STARTS_FROM = {
    "dm_lstm.yaml": after_phase_one("dm_lstm_dep.yaml"),
    "dm_gpt2.yaml": lambda root: after_phase_one("dm_gpt2_dep.yaml", *hub_free())(root),
}

#: One fit per family that tests/test_golden.py does not already train through the CLI
#: from its shipped config (AWD-LSTM, ON-LSTM, ONLSTM-SYD, PRPN, PRPN-SYD, PaLM-U/RB/S and
#: the Transformer, 3 steps each): DM on an LSTM (its own query/key attention) and on GPT-2
#: (the backbone's attention), each from a first phase trained here, and the reverse LM of
#: the story metrics. Every other config is proved by resolving exactly as recorded
#: (tests/test_config_resolution.py) and by building below.
FAMILY_FITS = ["dm_lstm.yaml", "dm_gpt2.yaml", "rlm.yaml"]


@pytest.mark.parametrize("name", FAMILY_FITS)
def test_fast_dev_run(name: str, tmp_path: Path) -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / name), *tiny(name),
            "--trainer.fast_dev_run=true", f"--trainer.default_root_dir={tmp_path}"]
    if name in STARTS_FROM:
        args += STARTS_FROM[name](tmp_path)
    assert run_cli(args) == 0


def components(name: str) -> set[str]:
    """The backbone, insert and head classes config ``name`` resolves to (its fixture); a
    recipe named by ``model.class_path`` and its model of its own (the RNNG), theirs."""
    recipe = yaml.safe_load((RESOLVED / name).read_text())["model"]
    resolved = recipe["init_args"]
    if "model" in resolved:
        return {recipe["class_path"], resolved["model"]["class_path"]}
    if "backbone" not in resolved:  # a recipe that is its model (PushdownLM)
        return {recipe["class_path"]}
    backbone = resolved["backbone"]
    inserts = backbone.get("init_args", {}).get("inserts") or []
    return {backbone["class_path"], *(i["class_path"] for i in inserts),
            *(h["class_path"] for h in resolved.get("heads") or [])}


def test_every_component_of_a_shipped_config_is_fitted_by_some_test() -> None:
    """The representative fits (here, tests/test_golden.py, tests/test_rnng_cli.py,
    tests/test_in_order_rnng.py, tests/test_action_transformer_cli.py,
    tests/test_tree_planting.py, tests/test_structformer.py, tests/test_udgn.py,
    tests/test_tree_reg.py, tests/test_masked_objective.py, tests/test_cag.py and
    tests/test_pushdown.py) cover
    every backbone, insert and head class the shipped configs use, and every model class."""
    from test_golden import SIZES

    fitted = [*SIZES, *FAMILY_FITS, "dm_lstm_dep.yaml", "dm_gpt2_dep.yaml", "rnng.yaml",
              "rnng_in_order.yaml", "plm.yaml", "tpt_transformer.yaml", "tpt_gpt2.yaml",
              "structformer.yaml", "udgn.yaml", "treereg_transformer.yaml",
              "treereg_gpt2.yaml", "transformer_mlm.yaml", "cag.yaml", "pushdown.yaml", "gpst.yaml"]
    used = set().union(*map(components, EXPERIMENTS))
    assert used - set().union(*map(components, fitted)) == set()


#: Layer settings of a config that reads a layer the small local GPT-2 (2 blocks) lacks.
LOCAL_GPT2_LAYERS = {"treereg_gpt2.yaml": ["--model.heads.init_args.layer=0"]}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_config_builds(name: str) -> None:
    """The model and DataModule of every shipped config, as ``synlm fit`` builds them (heads
    bound to the backbone, the data's gold checked against what the heads need)."""
    gpt2 = "gpt2" in name
    model = from_config(str(REPO_CONFIGS / name),
                        [*tiny(name), *(hub_free() if gpt2 else []), *local_tokenizer(name),
                         *LOCAL_GPT2_LAYERS.get(name, [])])
    if isinstance(model, TransitionLM):  # its action vocabulary comes from the trees
        finish = model.model.finish_action is not None  # an in-order model's FINISH, last
        assert model.model.n_actions == len(model.datamodule.action_vocab) + finish
        return
    model.setup("validate")  # asks the DataModule for each head's gold
    if isinstance(model, PushdownLM):  # asks for the trees, its own model
        assert isinstance(model.model, PushdownTransformer) and model.vocab is not None
        return
    if isinstance(model, GPSTLM):  # induces its trees, its own model
        assert model.vocab is not None
        return
    assert isinstance(model.model, SyntaxModel) and model.datamodule is not None


@pytest.mark.parametrize("name", PARTIALS)
def test_partial_configs_stack_on_an_experiment(name: str, tmp_path: Path) -> None:
    base = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"),
            "--config", str(REPO_CONFIGS / name)]
    assert run_cli([*base, "--print_config"]) == 0
    if name.startswith("data/") and "synthetic" not in name:
        return  # real corpora: checked by print_config alone (tests need no data)
    assert run_cli([*base, "--trainer.fast_dev_run=true", "--trainer.enable_progress_bar=false",
                    f"--trainer.default_root_dir={tmp_path}"]) == 0


def test_overrides_reach_interpolated_values(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "interp.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"backbone": {"class_path": "AWDLSTM", "init_args": {
            "dropout_input": 0.3,
            "dropout_output": "${model.backbone.init_args.dropout_input}"}}},
    }))
    args = ["fit", "--config", str(config), "--model.backbone.init_args.dropout_input=0.11",
            "--print_config"]
    assert run_cli(args) == 0
    recipe = yaml.safe_load(capsys.readouterr().out)["model"]
    assert recipe["class_path"] == "synlm.SyntaxLM"  # the default recipe
    assert recipe["init_args"]["backbone"]["init_args"]["dropout_output"] == 0.11


def test_unknown_class_lists_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["fit", "--model.backbone=NoSuchLSTM", "--print_config"])
    assert code != 0
    err = capsys.readouterr().err
    assert "--model.backbone=NoSuchLSTM: no class of that name" in err
    assert "(backbones: AWDLSTM, GPT2, ONLSTM, PRPN, StructFormer, Transformer, UDGN)" in err


def test_missing_corpus_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path))
    code = run_cli(["fit", "--config", str(REPO_CONFIGS / "awd_lstm.yaml"),
                    "--trainer.fast_dev_run=true", f"--trainer.default_root_dir={tmp_path}"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "ptb.train.txt" in lines[-1] and "SYNLM_DATA_DIR" in lines[-1]


def test_missing_first_phase_is_one_line(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["fit", "--config", str(REPO_CONFIGS / "dm_lstm.yaml"), *TINY_OVERRIDES,
                    f"--model.init_from={tmp_path / 'none.ckpt'}",
                    "--trainer.fast_dev_run=true", f"--trainer.default_root_dir={tmp_path}"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"synlm: error: model.init_from: no checkpoint at {tmp_path / 'none.ckpt'}; train the "
        "first phase or fix the path")


def test_ls_lists_components(capsys: pytest.CaptureFixture[str]) -> None:
    components = list_components()
    assert {"AWDLSTM", "Transformer", "GPT2"} <= set(components["backbones"])
    assert {"PTB", "WikiText2", "SyntheticTreebank"} <= set(components["corpora"])
    assert components["subwords"] == ["PretrainedTokenizer", "SentencePieceModel", "TrainedBPE",
                                    "TrainedUnigram"]
    assert "quickstart.yaml" in components["configs"]
    assert run_cli(["ls"]) == 0
    assert "AWDLSTM" in capsys.readouterr().out


def test_the_catalog_names_what_importing_registers() -> None:
    """``synlm ls`` reads the classes from the source files; importing them (what
    jsonargparse resolves short names among) finds the same, kind by kind."""
    import lightning.pytorch as pl

    from synlm import catalog, heads
    from synlm.backbones.base import LayerInsert
    from synlm.data.corpora import Corpus
    from synlm.data.subwords import Subwords
    from synlm.lm import SyntaxLM  # noqa: F401  (a recipe: imported, it is a subclass)
    from synlm.registry import backbone_classes, subclasses
    from synlm.transition.attention import AttentionPolicy
    from synlm.transition.model import TransitionModel

    def ours(classes: list[type]) -> list[str]:  # tests define heads and inserts too
        return [c.__name__ for c in classes
                if c.__module__.startswith("synlm.") and not c.__name__.startswith("_")]

    assert catalog.list_components() == {
        "recipes": ours(subclasses(pl.LightningModule)),
        "backbones": ours(backbone_classes()),
        "inserts": ours(subclasses(LayerInsert)),
        "heads": ours(subclasses(heads.SyntaxHead)),
        "transition_models": ours(subclasses(TransitionModel)),
        "attention_policies": ours(subclasses(AttentionPolicy)),
        "corpora": ours([c for c in subclasses(Corpus) if "name" in vars(c)]),
        "subwords": ours(subclasses(Subwords)),
        "configs": catalog.shipped_configs(),
    }
    assert dict(catalog.component_summaries()["backbones"]) == {
        c.__name__: catalog.first_sentence(c.__doc__) for c in backbone_classes()}


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["ls"], ["fitt"],
                                  ["fit", "--config", "nope.yaml"]])
def test_quick_answers_import_neither_torch_nor_lightning(args: list[str]) -> None:
    """What the command answers at once (under a second: benchmarks/startup.py) does not
    wait for torch's and Lightning's imports."""
    import subprocess
    import sys

    code = ("import sys; from synlm.cli import main; main(sys.argv[1:]); "
            "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=False)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr


def test_wandb_logger_receives_the_resolved_config(tmp_path: Path) -> None:
    from lightning.pytorch.loggers import WandbLogger

    from synlm.lightning_cli import SynLMCLI
    from synlm.runtime.run_callbacks import SaveRunConfig
    from synlm.runtime.runs import RunCSVLogger

    cli = SynLMCLI(args=["--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY_OVERRIDES,
                         f"--trainer.default_root_dir={tmp_path}",
                         "--trainer.logger=WandbLogger",
                         f"--trainer.logger.init_args.save_dir={tmp_path}",
                         "--trainer.logger.init_args.offline=true"], run=False)
    (callback,) = [c for c in cli.trainer.callbacks if isinstance(c, SaveRunConfig)]
    callback.save_config(cli.trainer, cli.model, "fit")
    csv, wandb = cli.trainer.loggers  # metrics.csv first, in the run folder
    assert isinstance(csv, RunCSVLogger) and isinstance(wandb, WandbLogger)
    pushed = wandb.experiment.config
    assert pushed["model"]["init_args"]["backbone"]["class_path"] == "synlm.backbones.ONLSTM"
    assert pushed["data"]["bptt"] == 12
    wandb.experiment.finish()


def test_from_config_builds_what_the_cli_builds() -> None:
    import synlm
    from synlm import SynLMDataModule

    model = synlm.from_config(str(REPO_CONFIGS / "quickstart.yaml"),
                              [*TINY_OVERRIDES, "--optimizer.lr=7.5"])
    assert isinstance(model.datamodule, SynLMDataModule)
    assert model.hparams.optimizer["init_args"]["lr"] == 7.5
    assert model.hparams.bptt == 12  # linked from the data
    assert model.hparams.vocab_size == model.datamodule.vocab_size
    assert [type(h).__name__ for h in model.heads] == ["DistanceRankingHead"]
    batch = next(iter(model.datamodule.val_dataloader()))
    assert model.log_probs(batch.tokens).shape == (*batch.tokens.shape, model.datamodule.vocab_size)
    sets = model.induce(batch.tokens)
    assert sets["lm"].shape[0] == 3 and sets["syd"].shape[0] == 1


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"]])
def test_help_lists_every_command(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from synlm.runtime.usage import COMMANDS

    assert run_cli(args) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.split("commands:\n")[1]
              .split("\n\n")[0].splitlines()]
    assert listed == list(COMMANDS) and {"parse", "plot", "ls", "generate"} <= set(listed)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import lightning
    import torch

    import synlm

    assert run_cli(["--version"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"synlm {synlm.__version__} (torch {torch.__version__}, "
        f"lightning {lightning.__version__})")


QUICKSTART = str(REPO_CONFIGS / "quickstart.yaml")


@pytest.mark.parametrize(("args", "said"), [
    (["fitt"], "synlm: error: unknown command 'fitt'; did you mean fit?"),
    (["fit", "--config", QUICKSTART, "--trainer.max_epocs=3"],
     "--trainer.max_epocs=3: not an option; did you mean --trainer.max_epochs?"),
    (["fit", "--config", QUICKSTART, "--model.backbone.init_args.hiden_size=3"],
     "--model.backbone.hiden_size: ONLSTM takes no such argument; did you mean hidden_size?"),
    (["fit", "--config", QUICKSTART, "--model.backbone=ONLSTMM"],
     "--model.backbone=ONLSTMM: no class of that name; did you mean ONLSTM?"),
    (["fit", "--config", "quickstat.yaml"],
     "synlm fit: error: --config: no file quickstat.yaml; did you mean quickstart.yaml?"),
    (["test", "--config=onlstm_sid.yaml"], "did you mean onlstm_syd.yaml?"),
], ids=["command", "flag", "class-argument", "class-name", "config", "config-equals"])
def test_mistakes_get_a_suggestion_instead_of_the_usage(
        args: list[str], said: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no configs/ here: shipped configs are found by name
    assert run_cli(args) == 2
    err = capsys.readouterr().err
    assert said in err and "usage:" not in err and len(err.strip().splitlines()) == 1


def test_a_yaml_error_names_its_file_line_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("config: bad.yaml\ntrainer:\n  max_epochs: 2\n")  # stacks on bad.yaml
    (tmp_path / "bad.yaml").write_text("trainer:\n  max_epochs: 3\n bad: [\n")
    assert run_cli(["fit", "--config", str(good)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"synlm fit: error: {tmp_path / 'bad.yaml'}:3:2: not valid YAML")


def test_shipped_configs_are_found_by_name_anywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli(["fit", "--config", "quickstart.yaml", "--config=trainer/debug.yaml",
                    "--print_config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["trainer"]["limit_train_batches"] == 4  # trainer/debug.yaml's
    assert printed["model"]["init_args"]["backbone"]["class_path"] == \
        "synlm.backbones.ONLSTM"


def test_every_shipped_config_is_package_data() -> None:
    """The wheel carries synlm/configs (``synlm ls``, ``--config NAME`` after a wheel
    install): every file there matches pyproject's package-data globs."""
    import re

    pyproject = (REPO_CONFIGS.parents[1] / "pyproject.toml").read_text()
    section = pyproject.split("[tool.setuptools.package-data]")[1]
    globs = re.findall(r'"([^"]+)"', re.search(r"synlm = \[(.*?)\]", section).group(1))
    packaged = {p for g in globs for p in REPO_CONFIGS.parent.glob(g)}
    shipped = {p for p in REPO_CONFIGS.rglob("*") if p.is_file()}
    assert shipped and shipped <= packaged


def test_ls_says_what_each_component_is() -> None:
    """One line each: a class's docstring's first sentence, a config's opening comment's."""
    from synlm.catalog import component_summaries

    summaries = {kind: dict(rows) for kind, rows in component_summaries().items()}
    assert summaries["configs"]["quickstart.yaml"].startswith("Quickstart: a small ONLSTM-SYD")
    assert summaries["backbones"]["ONLSTM"] == ("A stack of ON-LSTM layers with AWD-style "
                                                "regularisation (Shen et al. 2019 §5.1).")
    ours = ("DistanceRankingHead", "SpanHead", "DependencyMixtureHead")  # tests add heads too
    assert all(summaries["heads"][name] for name in ours)
    assert all(summaries["backbones"][name] for name in ("AWDLSTM", "ONLSTM", "PRPN", "GPT2"))
    described = [name for name, what in summaries["configs"].items() if what]
    assert len(described) == len(summaries["configs"])  # every shipped config says what it is


@pytest.mark.parametrize("command", ["fit", "test", "parse", "generate", "evaluate-syntax",
                                     "evaluate-generation", "annotate", "plot"])
def test_every_help_shows_the_defaults(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every option's default; ``fit``'s and ``test``'s in their full help (``--help`` is a
    screenful)."""
    assert run_cli([command, "--help-all" if command in ("fit", "test") else "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "default: " in text
    if command in ("fit", "test"):
        assert "--data.batch_size BATCH_SIZE training columns (stream) or sentences " \
               "(sentence, actions) per device. (type: int, default: 20)" in text
