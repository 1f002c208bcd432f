"""The ``synlm`` command: ``fit``, ``validate``, ``test`` and ``predict`` (LightningCLI,
``synlm.lightning_cli``) plus ``parse``, ``plot``, ``annotate``, ``generate``,
``evaluate-generation``, ``evaluate-syntax``, ``export-hf``, ``lm-eval``, ``convert``,
``cp`` and ``ls``.

This module imports only what answering at once needs (``--help``, ``--version``, ``ls``,
an unknown command, ``fit|validate|test|predict --help``, a missing config file, a bad
``SYNLM_THREADS``, and the inputs a command's flags name that need no model:
``synlm.runtime.inputs``); each command's module (torch, Lightning: seconds) is imported
when that command runs, and the other commands' ``--help`` answers before torch loads.

Errors: each command prints synlm's own (``synlm.errors.SynLMError``) as one line and exits
with code 2 (``synlm.errors.report``; ``SYNLM_TRACEBACK=1`` prints their traceback too);
any other exception propagates with its traceback. synlm's own warnings
(``synlm.errors.SynLMWarning``) are one line too, ``synlm <command>: warning: ...``."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from synlm.catalog import component_summaries
from synlm.errors import SynLMError, report, warnings_as_lines
from synlm.runtime import usage
from synlm.runtime.inputs import check_inputs, check_run_inputs
from synlm.runtime.lightning_flags import unknown_flag
from synlm.runtime.threads import configure_threads, sum_alike, wait_passively

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def _ls() -> int:
    """Every component by kind, one line each: its short name and what it is, cut to the
    terminal's width."""
    width = shutil.get_terminal_size().columns
    summaries = component_summaries()
    name_width = max(len(name) for rows in summaries.values() for name, _ in rows)
    for kind, rows in summaries.items():
        print(f"{kind}:")
        for name, what in rows:
            line = f"  {name:<{name_width}}  {what or '-'}"
            print(line if len(line) <= width else line[:width - 1] + "…")
    return 0


def _command(name: str) -> Callable[[list[str]], int]:
    """The function that runs command ``name`` on its arguments, its module imported now."""
    if name == "evaluate-syntax":
        from synlm.commands.evaluate_syntax import main as evaluate_syntax_main

        return lambda args: evaluate_syntax_main(args, build_model=_build_model)
    if name == "export-hf":
        from synlm.commands.export_hf import main as export_hf_main

        return export_hf_main
    if name == "convert":
        from synlm.commands.convert import main as convert_main

        return convert_main
    if name == "cp":
        from synlm.commands.cp import main as cp_main

        return cp_main
    if name == "plot":
        from synlm.commands.plot import main as plot_main

        return plot_main
    if name == "annotate":
        from synlm.commands.annotate import main as annotate_main

        return annotate_main
    if name == "lm-eval":
        try:
            from synlm.lm_eval_model import main as lm_eval_main
        except ImportError as err:  # the lm-eval extra is not installed
            if err.name != "lm_eval":
                raise
            missing = err
            return lambda args: report(missing, "synlm lm-eval")
        return lm_eval_main
    if name in ("generate", "evaluate-generation"):
        from synlm.commands import generate

        run = generate.main if name == "generate" else generate.evaluate_main
        return lambda args: run(args, build_run=_build_run)
    from synlm.commands.parse import main as parse_main  # the one command left: parse

    return lambda args: parse_main(args, build_model=_build_model)


def _build_model(*args: Any, **kwargs: Any) -> Any:
    """``synlm.lightning_cli.from_config``, imported when a command first builds a model (so
    that ``evaluate-syntax --help`` and its argument errors answer before torch loads)."""
    from synlm.lightning_cli import from_config

    return from_config(*args, **kwargs)


def _build_run(*args: Any, **kwargs: Any) -> Any:
    """``synlm.lightning_cli.build_run``, imported when a command first builds a run."""
    from synlm.lightning_cli import build_run

    return build_run(*args, **kwargs)


def _wants_help(args: Sequence[str]) -> bool:
    return any(arg in ("-h", "--help") for arg in args)


def _find_local_components() -> None:
    """A config's ``class_path: my_heads.MyHead`` finds ``my_heads.py`` in the folder the
    command runs in, as under ``python -m``; searched last, so it never shadows a library."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)


def main(argv: Sequence[str] | None = None) -> int:
    wait_passively()  # before any command imports torch (its OpenMP reads it once)
    sum_alike()  # before the first matrix product (MKL reads it once)
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in ([], ["-h"], ["--help"]):
        print(usage.overview())
        return 0
    if args[:1] == ["--version"]:
        print(usage.version())
        return 0
    if args[0] not in usage.COMMANDS:
        print(usage.unknown_command(args[0]), file=sys.stderr)
        return 2
    if args[0] == "ls":
        return _ls()
    if args[0] in LIGHTNING_COMMANDS and _wants_help(args[1:]):
        print(usage.fit_help() if args[0] == "fit" else usage.checkpoint_help(args[0]))
        return 0
    if usage.FULL_HELP in args[1:] and args[0] in LIGHTNING_COMMANDS:
        args = [a if a != usage.FULL_HELP else "--help" for a in args]  # LightningCLI's own
    elif args[0] in LIGHTNING_COMMANDS:
        problem = usage.config_error(usage.resolve_configs(args)) or \
            unknown_flag(args[0], usage.resolve_configs(args[1:]))
        if problem:
            print(f"synlm {args[0]}: error: {problem}", file=sys.stderr)
            return 2
        try:
            check_run_inputs(args[0], args[1:])
        except SynLMError as err:
            return report(err, "synlm: error")
    elif not _wants_help(args[1:]):
        try:
            check_inputs(args[0], args[1:])  # before the command's module imports torch
        except SynLMError as err:
            return report(err, f"synlm {args[0]}")
    if args[0] not in LIGHTNING_COMMANDS:
        # each parses its flags, and answers --help or a wrong flag, before torch loads; those
        # with a model then set torch's thread count (configure_threads), plot and annotate
        # never import torch
        _find_local_components()
        with warnings_as_lines(f"synlm {args[0]}"):
            return _command(args[0])(args[1:])
    try:
        # fit, validate, test, predict: the warnings once the run's count is known (a resume's)
        threads = configure_threads(warn=False)
    except SynLMError as err:
        return report(err, "synlm: error")
    _find_local_components()
    from synlm.lightning_cli import run

    with warnings_as_lines(f"synlm {args[0]}"):
        return run(args, threads)


def entry_point() -> None:
    """The ``synlm`` script: ``main``, quiet when its output's reader goes away
    (``synlm ls | head``)."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # Python's advice: point stdout at devnull, exit without a trace
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
