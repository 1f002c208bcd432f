"""What needs no model is checked before torch is imported: a mistyped checkpoint path or
run folder, a suite name or file, a benchmark or its files, a sentence, pair, text or config
file is one line on stderr (exit code 2) with torch not in ``sys.modules``; and ``synlm fit
--help`` is a screenful that names what a run needs first and where the full list is."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synlm.runtime import usage
from synlm.runtime.run_folders import (
    CheckpointError,
    any_best,
    check_checkpoint,
    resolve_checkpoint,
)

#: The slow imports (seconds each): torch, and nltk and matplotlib (nltk imports scipy and
#: scikit-learn).
HEAVY = ("torch", "nltk", "matplotlib")
#: Runs ``synlm.cli.main`` on the arguments, then prints which of ``HEAVY`` were imported.
PROBE = ("import sys\nfrom synlm.cli import main\ntry:\n    code = main(sys.argv[1:])\n"
         "except SystemExit as exit_:\n    code = exit_.code\n"
         f"print(code, ','.join(m for m in {HEAVY} if m in sys.modules) or '-')\n")


def synlm(args: list[str], cwd: Path) -> tuple[int, bool, list[str], str]:
    """``synlm ARGS`` in a fresh interpreter: its exit code, whether torch was imported,
    its stderr lines and its stdout (the probe's line left out)."""
    code, loaded, err, out = imports_of(args, cwd)
    return code, "torch" in loaded, err, out


def imports_of(args: list[str], cwd: Path) -> tuple[int, set[str], list[str], str]:
    """As ``synlm``, with the ``HEAVY`` modules the command imported."""
    env = {**os.environ, "SYNLM_DATA_DIR": str(cwd / "data")}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, cwd=cwd, env=env, check=False)
    *out, last = done.stdout.strip().splitlines() or ["? ?"]
    code, loaded = last.split()
    return (int(code), set(loaded.split(",")) - {"-"}, done.stderr.strip().splitlines(),
            "\n".join(out))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a file that stands for a checkpoint (the checks read none), an empty
    run folder, a malformed suite, a malformed pair file, and an empty data folder."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "model.ckpt").write_bytes(b"")
    (root / "empty_run" / "version_0").mkdir(parents=True)
    (root / "bad_suite.json").write_text(json.dumps({"meta": {"name": "x"}}))
    (root / "bad_pairs.jsonl").write_text("not json\n")
    (root / "data").mkdir()
    (root / "tasks").mkdir()
    for task in ("synlm_blimp", "synlm_blimp_agreement"):  # as write_blimp_tasks names them
        (root / "tasks" / f"{task}.yaml").write_text(f"task: {task}\n")
    return root


#: (arguments, a piece of the one line the command prints)
CASES = [
    (["evaluate-syntax", "--ckpt_path", "nope"], "--ckpt_path: no checkpoint at nope"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "nope"],
     "--ckpt_path: no checkpoint at nope"),
    (["evaluate-syntax", "--ckpt_path", "empty_run"], "empty_run holds no checkpoint"),
    (["evaluate-syntax", "--ckpt_path", "empty_run/best"], "empty_run holds no best"),
    (["evaluate-syntax", "--hf", "./nope"], "./nope: no such folder"),
    (["evaluate-syntax", "--config", "nope.yaml"], "--config: no file nope.yaml"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--benchmark", "blimpp"],
     "unknown benchmark 'blimpp'"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--suites", "subordinationn",
      "--benchmark", "syntaxgym"], "did you mean subordination?"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--suites", "nope.json",
      "--benchmark", "syntaxgym"], "no file nope.json"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--suites", "bad_suite.json",
      "--benchmark", "syntaxgym"], "bad_suite.json: top level lacks 'predictions'"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--pairs", "bad_pairs.jsonl"],
     "bad_pairs.jsonl:1: not JSON"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--benchmark", "blimp"],
     "BLiMP: missing"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--benchmark", "marvin-linzen"],
     "Marvin & Linzen: missing"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--benchmark", "syntaxgym"],
     "syntaxgym: missing"),
    (["evaluate-syntax", "--results", "nope.json"], "--results: cannot read nope.json"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--sentences", "nope.txt",
      "--surprisals", "s.tsv"], "--sentences: no file nope.txt"),
    (["parse", "--ckpt_path", "nope", "--treebank", "bad_pairs.jsonl"],
     "--ckpt_path: no checkpoint at nope"),
    (["parse", "--baseline", "right-branching", "--treebank", "nope"],
     "--treebank: no file or folder nope"),
    (["parse", "--ckpt-path=model.ckpt", "--input", "nope.txt"], "--input: no file nope.txt"),
    (["parse", "--config", "nope.yaml", "--treebank", "bad_pairs.jsonl"],
     "--config: no file nope.yaml"),
    (["generate", "--ckpt_path", "empty_run"], "empty_run holds no checkpoint"),
    (["generate", "--ckpt_path", "model.ckpt", "--stories", "nope.csv"],
     "--stories: no file nope.csv"),
    (["generate", "--ckpt_path", "model.ckpt", "--contexts", "nope.txt"],
     "--contexts: no file nope.txt"),
    (["evaluate-generation", "bad_pairs.jsonl", "--oracle", "nope"],
     "--oracle: no checkpoint at nope"),
    (["evaluate-generation", "--news", "nope.jsonl"], "the samples: no file nope.jsonl"),
    (["annotate", "--input", "nope.txt", "--parser", "conllu", "--conllu", "x"],
     "--input: no file nope.txt"),
    (["plot", "nope"], "no run at nope"),
    (["export-hf", "--ckpt_path", "nope", "--out", "out"], "--ckpt_path: no checkpoint"),
    (["convert", "nope.pt", "--from", "rnng-pytorch", "--out", "out"], "nope.pt: no such"),
    (["fit", "--config", "quickstart.yaml", "--ckpt_path", "nope"],
     "--ckpt_path: no checkpoint at nope"),
    (["fit", "--config", "quickstart.yaml", "--model.init_from=nope"],
     "model.init_from: no checkpoint at nope"),
    (["fit", "--config", "nope.yaml"], "--config: no file nope.yaml"),
    (["validate", "--ckpt_path", "empty_run"], "empty_run holds no checkpoint"),
    (["test", "--ckpt_path", "nope"], "--ckpt_path: no checkpoint at nope"),
    (["predict", "--ckpt_path", "nope"], "--ckpt_path: no checkpoint at nope"),
    (["lm-eval", "--model", "synlm", "--model_args", "ckpt_path=nope", "--tasks", "x"],
     "synlm lm-eval: ckpt_path: no checkpoint at nope"),
    (["lm-eval", "run", "-M", "synlm", "-a", "ckpt_path=empty_run", "-t", "x"],
     "empty_run holds no checkpoint"),
    (["lm-eval", "--model", "synlm", "--model_args", "ckpt=model.ckpt", "--tasks", "x"],
     "the synlm model takes no 'ckpt'; did you mean ckpt_path?"),
    (["lm-eval", "--model", "synlm", "--model_args", "model.ckpt", "--tasks", "x"],
     "--model_args: expected key=value, got 'model.ckpt'"),
    (["lm-eval", "--model", "synlm", "--model_args", "{'ckpt_path': 'model.ckpt'}"],
     "--model_args: not JSON"),
    (["lm-eval", "--model", "synlm", "--tasks", "x"], "the synlm model needs ckpt_path=RUN"),
    (["lm-eval", "--model=synlm", "--model_args", "ckpt_path=model.ckpt", "search=beams"],
     "search=beams: expected beam or particles"),
    (["lm-eval", "--model", "synlm", "--model_args", "ckpt_path=model.ckpt,batch_size=many"],
     "batch_size=many: expected a whole number or auto"),
    (["lm-eval", "--model", "synlm", "--model_args", "ckpt_path=model.ckpt", "--tasks",
      "synlm_blimp_agreement"], "give the folder it wrote as --include_path DIR"),
    (["lm-eval", "--model", "synlm", "--model_args", "ckpt_path=model.ckpt", "--tasks",
      "synlm_blimp,synlm_blimp_agreemnt", "--include_path", "tasks"],
     "no task synlm_blimp_agreemnt in tasks; did you mean synlm_blimp_agreement?"),
    (["lm-eval", "--tasks", "x", "--include_path", "nope"], "--include_path: no folder nope"),
    (["lm-eval", "--tasks", "hellaswag", "nope.yaml"], "--tasks: no file nope.yaml"),
    (["lm-eval", "--model", "hf", "--model_args", "pretrained=./nope"], "./nope: no such folder"),
    (["lm-eval", "-C", "nope.yaml"], "--config: no file nope.yaml"),
    (["test", "--ckpt_path", "best"], "--ckpt_path best: which run's? name its folder"),
    (["validate", "--ckpt_path=last"], "or give the run's --config (its "
     "trainer.default_root_dir"),
    (["predict", "--ckpt_path", "best", "--trainer.max_epochs=1"],
     "--ckpt_path best: which run's?"),
    (["test", "--config", "quickstart.yaml", "--ckpt_path", "best"],
     "--ckpt_path best: no run under runs/quickstart saved a best checkpoint"),
    (["validate", "--config", "quickstart.yaml", "--ckpt_path=last",
      "--trainer.default_root_dir", "empty_run"],
     "--ckpt_path last: no run under empty_run saved a last checkpoint"),
    (["fit", "--config", "quickstart.yaml", "--ckpt_path", "best"],
     "fit continues a run where it stopped (--ckpt_path last); to start a new run from the "
     "best weights: --model.init_from runs/quickstart/best"),
]


@pytest.mark.parametrize(("args", "said"), CASES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_a_check_that_needs_no_model_answers_before_torch_loads(inputs: Path, args: list[str],
                                                                 said: str) -> None:
    code, torch, err, _ = synlm(args, inputs)
    assert (code, torch) == (2, False), err
    assert len(err) == 1 and said in err[0], err


def test_the_checks_pass_what_the_commands_take(inputs: Path) -> None:
    """A checkpoint that is there passes (the command goes on to read it: torch)."""
    code, torch, err, _ = synlm(["export-hf", "--ckpt_path", "model.ckpt", "--out", "out"],
                                inputs)
    assert torch and code == 2 and "model.ckpt" in err[-1]


def test_a_flag_set_to_null_names_no_checkpoint() -> None:
    """``--model.init_from=null`` (a sweep's "no start") and ``--ckpt_path null`` set
    nothing: no file is looked for."""
    from synlm.runtime.inputs import check_run_inputs

    check_run_inputs("fit", ["--model.init_from=null", "--ckpt_path", "null"])
    with pytest.raises(CheckpointError, match="model.init_from: no checkpoint at nope"):
        check_run_inputs("fit", ["--model.init_from=nope"])


def test_check_checkpoint_finds_what_resolve_checkpoint_finds(tmp_path: Path) -> None:
    """The check reads no checkpoint: where a run has several that may be its best, it
    passes without choosing (resolving reads their val/ppl)."""
    run = tmp_path / "runs" / "x" / "version_0" / "checkpoints"
    run.mkdir(parents=True)
    (run / "last.ckpt").write_bytes(b"")
    for path, folder in [(tmp_path / "runs" / "x", "last"), (tmp_path / "runs" / "x", "best"),
                         (tmp_path / "runs" / "x" / "last", "best"), (run / "last.ckpt", "best")]:
        check_checkpoint(path, folder=folder)
        assert resolve_checkpoint(path, any_best, folder=folder) == run / "last.ckpt"
    (run / "epoch=0.ckpt").write_bytes(b"")
    (run / "epoch=1.ckpt").write_bytes(b"")
    check_checkpoint(tmp_path / "runs" / "x" / "best")  # two to choose from: none read
    for missing in (tmp_path / "runs" / "y", tmp_path / "runs" / "x" / "version_0" / "best2"):
        with pytest.raises(CheckpointError, match="no checkpoint at"):
            check_checkpoint(missing)


#: The flags ``synlm fit --help`` must name: the config and what most runs set.
FIRST_FLAGS = ("--config", "--trainer.max_epochs", "--data.corpus", "--data.batch_size",
               "--model.backbone", "--ckpt_path", "--seed_everything", "--model.init_from")


def test_fit_help_is_a_screenful_of_what_a_run_needs_first(tmp_path: Path) -> None:
    code, torch, err, short = synlm(["fit", "--help"], tmp_path)
    assert (code, torch, err) == (0, False, [])
    lines = short.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100
    for flag in FIRST_FLAGS:
        assert re.search(rf"(^|[ ;,]){re.escape(flag)}\b", short, re.MULTILINE), flag
    assert "synlm fit --help-all" in short
    code, _, err, full = synlm(["fit", "--help-all"], tmp_path)
    assert code == 0, err
    options = set(re.findall(r"(?<![\w.-])(--[\w.]+)", full))
    named = set(re.findall(r"(?<![\w-])(--[a-z_]+(?:\.[a-z_]+)*)", short)) - {"--help-all"}
    named = {n.removesuffix(".help") for n in named}
    # every flag the short help names is one of the full list's (``--optimizer.lr``: an
    # argument of the optimiser class ``--optimizer`` names), or an argument of the default
    # recipe, which ``--model.help SyntaxLM`` lists
    code, _, err, recipe = synlm(["fit", "--model.help", "SyntaxLM"], tmp_path)
    assert code == 0, err
    options |= set(re.findall(r"(?<![\w.-])(--[\w.]+)", recipe))
    assert {n for n in named if n not in options and not n.startswith("--optimizer.")} == \
        {"--section.key"}, named - options
    assert len(full.splitlines()) > 4 * len(lines)


#: Every command but ``fit`` (above) and ``ls`` (no flags).
COMMANDS = [command for command in usage.COMMANDS if command not in ("fit", "ls")]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_and_a_wrong_flag_answer_before_torch_loads(tmp_path: Path, command: str) -> None:
    """``--help`` (and, but for the Lightning commands, whose flags Lightning reads, a flag
    the command does not take) imports no torch, and a wrong flag neither nltk nor
    matplotlib: each command's module imports only light parts at the top, and sets torch's
    thread count once its flags are good."""
    if command == "lm-eval" and importlib.util.find_spec("lm_eval") is None:
        pytest.skip("the lm-eval extra is not installed")
    code, torch, err, out = synlm([command, "--help"], tmp_path)
    assert (code, torch, err) == (0, False, []), err
    assert "usage:" in out
    if command in ("validate", "test", "predict"):
        return
    code, loaded, err, _ = imports_of([command, "--bogus"], tmp_path)
    assert (code, loaded) == (2, set()), err
    assert "error:" in err[-1], err


def test_the_checkpoint_commands_help_is_a_screenful(tmp_path: Path) -> None:
    """``validate|test|predict --help``: the checkpoint, the config and common flags, each
    one of the full list's (``--help-all``, LightningCLI's)."""
    code, _, err, full = synlm(["test", "--help-all"], tmp_path)
    assert code == 0, err
    options = set(re.findall(r"(?<![\w.-])(--[\w.]+)", full))
    for command in ("validate", "test", "predict"):
        code, torch, err, short = synlm([command, "--help"], tmp_path)
        assert (code, torch, err) == (0, False, [])
        lines = short.splitlines()
        assert len(lines) <= 30 and max(map(len, lines)) <= 100
        assert lines[0].startswith(f"usage: synlm {command} --ckpt_path")
        assert f"synlm {command} --help-all" in short
        named = set(re.findall(r"(?<![\w-])(--[a-z_]+(?:\.[a-z_]+)*)", short)) - {"--help-all"}
        assert named - options == {"--section.key"}, named - options
        assert {"--ckpt_path", "--config", "--trainer.accelerator"} <= named


def test_syntax_package_loads_its_names_on_first_use() -> None:
    """``synlm.syntax`` imports a submodule when one of its names is first used: importing
    the package (or its light ``shapes``) loads no nltk, and each name is its submodule's."""
    import synlm.syntax

    probe = ("import sys, synlm.syntax, synlm.syntax.shapes\n"
             "print(synlm.syntax.BASELINES, 'nltk' in sys.modules, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split(")")[-1].split() == ["False", "False"]
    for name in synlm.syntax.__all__:
        module = importlib.import_module(f"synlm.syntax.{synlm.syntax._SOURCES[name]}")
        assert getattr(synlm.syntax, name) is getattr(module, name)
        assert name in dir(synlm.syntax)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        synlm.syntax.nope  # noqa: B018
