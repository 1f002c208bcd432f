"""synlm's exceptions: library code raises typed errors (``synlm.errors``), never exits;
only the ``synlm`` command turns synlm's own errors into one line, any other exception
keeps its traceback, and ``SYNLM_TRACEBACK=1`` shows one for synlm's errors too."""

from __future__ import annotations

import argparse
import ast
import warnings
from pathlib import Path

import pytest

import synlm
from synlm import cli, errors
from synlm.cli import main
from synlm.commands import plot
from synlm.commands.plot import PlotError
from synlm.data.annotation import AnnotateError
from synlm.data.files import CorpusError, read_lines
from synlm.errors import (
    InputError,
    MissingFileError,
    RunError,
    SettingError,
    SynLMError,
    SynLMWarning,
)
from synlm.loading import load_model
from synlm.parsing import default_structure
from synlm.runtime import checks
from synlm.runtime.run_folders import CheckpointError
from synlm.syntax import read_trees
from synlm.syntax.readers import ReaderError
from synlm.syntax.trees import TreeFormatError
from synlm.tse.formula import FormulaError
from synlm.tse.syntaxgym import SuiteError

QUICK = ["fit", "--config", "quickstart.yaml", "--data.corpus.init_args.n_train=60",
         "--data.corpus.init_args.n_valid=20", "--data.corpus.init_args.n_test=20"]
TREEBANK = Path(__file__).parent / "fixtures" / "syntax" / "sample.mrg"


def test_every_error_is_a_synlm_error_and_what_it_was() -> None:
    for error in (SettingError, MissingFileError, CheckpointError, CorpusError, SuiteError,
                  ReaderError, TreeFormatError, FormulaError, AnnotateError, PlotError):
        assert issubclass(error, InputError) and issubclass(error, ValueError), error
    assert issubclass(InputError, SynLMError) and issubclass(RunError, SynLMError)
    assert issubclass(MissingFileError, FileNotFoundError)
    assert issubclass(RunError, RuntimeError) and not issubclass(RunError, ValueError)


def _exits(node: ast.AST) -> bool:
    if isinstance(node, ast.Raise) and node.exc is not None:
        called = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(called, ast.Name) and called.id == "SystemExit"
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "sys.exit"


def test_no_library_code_exits() -> None:
    """``raise SystemExit`` and ``sys.exit`` only under ``if __name__ == "__main__"`` and in
    the ``synlm`` script's entry point: a notebook catches a library's error as one."""
    found = []
    for path in sorted(Path(synlm.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = {id(n) for top in tree.body
                   if isinstance(top, ast.If) and "__main__" in ast.unparse(top.test)
                   for n in ast.walk(top)}
        allowed |= {id(n) for top in tree.body
                    if isinstance(top, ast.FunctionDef) and top.name == "entry_point"
                    for n in ast.walk(top)}
        found += [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                  if _exits(n) and id(n) not in allowed]
    assert found == []


def test_library_functions_raise_typed_errors(tmp_path: Path) -> None:
    missing = tmp_path / "none.ckpt"
    with pytest.raises(CheckpointError, match=f"--ckpt_path: no checkpoint at {missing}"):
        load_model(str(missing))
    no_structure = type("Model", (), {"structures": {}})()
    with pytest.raises(InputError, match="induces no structure"):
        default_structure(no_structure)
    with pytest.raises(MissingFileError, match=f"{tmp_path / 'none.txt'}: no such file"):
        read_lines(tmp_path / "none.txt")
    with pytest.raises(FileNotFoundError):  # as before, for callers that catch that
        read_trees(tmp_path / "none.mrg")


def test_building_from_a_config_in_python_raises_instead_of_exiting() -> None:
    """``synlm.from_config`` (a notebook's way in): a bad flag or value is an
    ``InputError`` with the line the command would print, not a ``SystemExit``."""
    with pytest.raises(InputError, match=r"--trainer.max_epoch=3: not an option; did you "
                                         r"mean --trainer.max_epochs\?"):
        synlm.from_config("quickstart.yaml", ["--trainer.max_epoch=3"])
    with pytest.raises(InputError, match=r"--data.batch_size=0: expected a whole number"):
        synlm.from_config("quickstart.yaml", ["--data.batch_size=0"])
    with pytest.raises(InputError, match="--config: no file nope.yaml"):
        synlm.from_config("nope.yaml")


@pytest.mark.parametrize("bug", [ValueError, RuntimeError, KeyError])
def test_a_programming_error_in_a_lightning_command_keeps_its_traceback(
        bug: type[Exception], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    def broken(trainer: object) -> None:
        raise bug("a bug, not a bad value")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checks, "check_trainer", broken)
    with pytest.raises(bug, match="a bug, not a bad value"):
        main(QUICK)
    assert "error:" not in capfd.readouterr().err


def test_a_programming_error_in_a_command_keeps_its_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise ValueError("a bug in the scoring")

    monkeypatch.setattr("synlm.parsing.evaluate", broken)
    with pytest.raises(ValueError, match="a bug in the scoring"):
        main(["parse", "--baseline", "balanced", "--treebank", str(TREEBANK)])
    monkeypatch.setattr(plot, "read_run", lambda run: (_ for _ in ()).throw(RuntimeError("x")))
    with pytest.raises(RuntimeError):
        main(["plot", str(tmp_path)])


def test_a_value_lightning_refuses_once_the_run_starts_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*QUICK, "--trainer.val_check_interval=1000", "--trainer.max_steps=1"]) == 2
    line = capfd.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("synlm: error: Lightning: `val_check_interval` (1000) must be less "
                           "than or equal to the number of the training batches")


def _traceback_then_one_line(capfd: pytest.CaptureFixture[str]) -> tuple[str, str]:
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0] == "Traceback (most recent call last):", err
    return err, lines[-1]


def test_synlm_traceback_shows_where_an_input_error_was_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(errors.TRACEBACK_ENV, "1")
    assert main([*QUICK, "--data.batch_size=0"]) == 2
    err, line = _traceback_then_one_line(capfd)
    assert "synlm.errors.SettingError: batch_size=0" in err  # raised in the DataModule
    assert line == "synlm: error: --data.batch_size=0: expected a whole number >= 1"
    assert main(["parse", "--ckpt_path", "none.ckpt", "--treebank", str(TREEBANK)]) == 2
    err, line = _traceback_then_one_line(capfd)
    assert "in check_checkpoint" in err  # before torch loads: synlm.runtime.inputs
    assert line == "synlm parse: --ckpt_path: no checkpoint at none.ckpt"
    with pytest.raises(argparse.ArgumentError, match="hiden_size"):  # jsonargparse's error
        main([*QUICK, "--model.backbone.init_args.hiden_size=3"])


def test_without_synlm_traceback_an_input_error_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(errors.TRACEBACK_ENV, "0")
    assert main(["parse", "--ckpt_path", str(tmp_path / "none.ckpt"),
                 "--treebank", str(TREEBANK)]) == 2
    assert capfd.readouterr().err == \
        f"synlm parse: --ckpt_path: no checkpoint at {tmp_path / 'none.ckpt'}\n"


def test_a_synlm_warning_is_one_line_of_the_command_and_others_are_left_as_they_are(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Under ``synlm <command>`` a ``SynLMWarning`` is the line ``synlm <command>: warning:
    ...`` (no file, line or source of synlm's); another library's warning goes on to
    Python's own display (here the record ``catch_warnings`` keeps); afterwards warnings
    are shown as before."""
    def warns(args: list[str]) -> int:
        warnings.warn("searched 2 sentences at a time where 16 were asked for", SynLMWarning,
                      stacklevel=1)
        warnings.warn("a library's own", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(cli, "_command", lambda name: warns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = warnings.showwarning
        assert main(["plot", "--help"]) == 0
        assert warnings.showwarning is before
    assert capsys.readouterr().err.splitlines() == [
        "synlm plot: warning: searched 2 sentences at a time where 16 were asked for"]
    assert [(w.category, str(w.message)) for w in caught] == [(UserWarning, "a library's own")]


def test_synlm_warnings_are_synlm_warnings() -> None:
    """Each warning synlm gives on purpose is a ``SynLMWarning`` (so the command shows it as
    one line, and a notebook filters it by that category): every ``warnings.warn`` and
    ``rank_zero_warn`` call in the package names one as its category."""
    from synlm.kernels.self_check import KernelCheckWarning

    ours = {SynLMWarning.__name__, KernelCheckWarning.__name__}
    assert issubclass(KernelCheckWarning, SynLMWarning)
    calls, bare = 0, []
    for path in Path(synlm.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called not in ("warnings.warn", "rank_zero_warn"):
                continue
            calls += 1
            given = [k.value for k in node.keywords if k.arg == "category"] + \
                (node.args[1:2] if called == "warnings.warn" else [])
            if not given or ast.unparse(given[0]).split(".")[-1] not in ours:
                bare.append(f"{path.name}:{node.lineno}")
    assert calls >= 6 and not bare
