"""The inputs a command's flags name, checked before torch is imported (a second or more):
a mistyped checkpoint path, run folder, text file or config is one line at once.

``check_inputs(command, args)`` reads the flags of ``INPUT_FLAGS`` from the raw arguments
(``--flag VALUE`` or ``--flag=VALUE``, with dashes or underscores) and raises synlm's
one-line error for the first that names nothing usable; the command's own parser checks
everything else once it runs. Commands whose module loads without torch (``evaluate-syntax``,
``export-hf``, ``convert``, ``plot``, ``annotate``) check their inputs themselves, after
parsing their flags."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from synlm.errors import InputError, MissingFileError, existing_file, model_folder
from synlm.runtime import usage
from synlm.runtime.run_folders import WHICH, check_checkpoint, unnamed_run


def _checkpoint(flag: str, value: str) -> None:
    check_checkpoint(value, flag, folder="best")  # as synlm.loading.load_model reads it


def _text(flag: str, value: str) -> None:
    if value != "-":  # standard input
        existing_file(flag, value, "a text file, one sentence a line")


def _file(flag: str, value: str) -> None:
    existing_file(flag, value, "a file")


def _path(flag: str, value: str) -> None:
    if not Path(value).exists():
        raise MissingFileError(f"{flag}: no file or folder {value}")


def _config(flag: str, value: str) -> None:
    problem = usage.config_error(usage.resolve_configs(["--config", value]))
    if problem:
        raise InputError(problem.replace("--config", flag, 1))


def _model(flag: str, value: str) -> None:
    model_folder(value)


#: The generation metrics' inputs (``generate --metrics`` and ``evaluate-generation``).
_METRIC_INPUTS = (("--oracle", _checkpoint), ("--gpt2", _model), ("--bert", _model),
                  ("--rlm-heldout", _text), ("--news-references", _text))

#: command -> each flag that names an input, and its check
INPUT_FLAGS: dict[str, tuple[tuple[str, Callable[[str, str], None]], ...]] = {
    "parse": (("--ckpt_path", _checkpoint), ("--config", _config), ("--treebank", _path),
              ("--input", _text)),
    "generate": (("--ckpt_path", _checkpoint), ("--stories", _file), ("--contexts", _text),
                 ("--references", _text), *_METRIC_INPUTS),
    "evaluate-generation": _METRIC_INPUTS,
}


#: command -> (its first positional argument's check, the flags that take no value, the
#: flags that take every value up to the next flag): ``evaluate-generation FILE``.
POSITIONAL_INPUTS: dict[str, tuple[Callable[[str, str], None], tuple[str, ...],
                                   tuple[str, ...]]] = {
    "evaluate-generation": (lambda _, value: existing_file(
        "the samples", value, "a JSONL file, as synlm generate writes"),
        ("--news",), ("--rlm-set",)),
}


def _first_positional(args: Sequence[str], switches: tuple[str, ...],
                      many: tuple[str, ...]) -> str | None:
    """The first argument that is no flag nor a flag's value, as argparse reads ``args``
    (``switches`` take no value, ``many`` every value up to the next flag, the others one)."""
    takes = 0
    for arg in args:
        if arg.startswith("-"):
            flag, eq, _ = arg.partition("=")
            names = _spellings(flag) if flag.startswith("--") else (flag,)
            takes = 0 if eq or any(n in switches for n in names) else \
                -1 if any(n in many for n in names) else 1
        elif takes:
            takes -= takes > 0
        else:
            return arg
    return None


def _spellings(flag: str) -> tuple[str, str]:
    """A flag with dashes and with underscores (``CommandParser`` takes both)."""
    name = flag[2:]
    return f"--{name.replace('_', '-')}", f"--{name.replace('-', '_')}"


def check_inputs(command: str, args: Sequence[str]) -> None:
    """The first input of ``command``'s ``args`` that names nothing usable, as synlm's
    one-line error (``INPUT_FLAGS``; the Lightning commands': ``check_run_inputs``)."""
    for flag, check in INPUT_FLAGS.get(command, ()):
        for _, _, value in usage.flag_values(args, *_spellings(flag)):
            check(flag, value)
    if command in POSITIONAL_INPUTS:
        check, switches, many = POSITIONAL_INPUTS[command]
        value = _first_positional(args, switches, many)
        if value is not None:
            check(command, value)


#: ``--ckpt_path`` values Lightning resolves itself (synlm resolves ``best`` and ``last``
#: among the run folders), as ``synlm.lightning_cli`` passes them on.
LIGHTNING_CKPT_NAMES = ("hpc", "registry")
#: A flag's value that sets nothing, as YAML reads it (``--model.init_from=null``: a sweep's
#: "no start").
UNSET = ("null", "Null", "NULL", "~", "None", "")


def check_run_inputs(command: str, args: Sequence[str]) -> None:
    """``fit|validate|test|predict``: the checkpoint ``--ckpt_path`` names (a file or run
    folder: its last for ``fit``, its best otherwise; ``best`` and ``last`` alone are looked
    for once the run's folder is known, and need a ``--config`` outside ``fit``:
    ``unnamed_run``), and ``fit``'s ``--model.init_from``."""
    ckpts = [value for _, _, value in usage.flag_values(args, "--ckpt_path")
             if value not in UNSET]
    if (ckpts and ckpts[-1] in WHICH and command != "fit"
            and not usage.flag_values(args, *usage.CONFIG_FLAGS)):
        raise unnamed_run(ckpts[-1])  # as synlm.lightning_cli.with_saved_config says
    if ckpts and ckpts[-1] not in (*WHICH, *LIGHTNING_CKPT_NAMES):
        check_checkpoint(ckpts[-1], folder="last" if command == "fit" else "best")
    starts = [value for _, _, value in usage.flag_values(args, "--model.init_from")]
    if command == "fit" and starts and starts[-1] not in UNSET and not ckpts:
        check_checkpoint(starts[-1], "model.init_from")
