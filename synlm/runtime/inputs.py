"""The inputs and outputs a command's flags name, checked before torch is imported (a
second or more): a mistyped checkpoint path, run folder, text file or config, a text file
that is empty or not UTF-8, or an output in a folder that cannot be written, is one line at
once, before any model loads.

``check_inputs(command, args)`` reads the flags of ``INPUT_FLAGS`` and ``OUTPUT_FLAGS``
from the raw arguments (``--flag VALUE`` or ``--flag=VALUE``, with dashes or underscores)
and raises synlm's one-line error for the first that names nothing usable; the command's
own parser checks everything else once it runs (``lm-eval``'s flags, lm-eval's own:
``check_lm_eval_inputs``). An output is checked by creating (and removing) a file in the
folder it goes in, or in the nearest folder above it that exists: what a write needs there,
whoever runs it. Commands whose module loads without torch (``evaluate-syntax``,
``export-hf``, ``convert``, ``plot``, ``annotate``) check their other inputs themselves,
after parsing their flags."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from synlm.errors import InputError, MissingFileError, existing_file, model_folder, reading
from synlm.runtime import usage
from synlm.runtime.run_folders import (
    WHICH,
    check_checkpoint,
    check_run_checkpoint,
    run_name,
    unnamed_run,
)


def _checkpoint(flag: str, value: str) -> None:
    check_checkpoint(value, flag, folder="best")  # as synlm.loading.load_model reads it


def _text(flag: str, value: str) -> None:
    """A text file that is there, UTF-8 and not empty (``check_inputs`` leaves ``-``,
    standard input, to the command)."""
    existing_file(flag, value, "a text file, one sentence a line")
    with reading(value):
        data = Path(value).read_bytes()
    if not data.strip():
        raise InputError(f"{flag}: {value}: empty file, expected one sentence a line")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        raise InputError(f"{flag}: {value}:{line}: not UTF-8 (byte {data[err.start]:#04x} at "
                         f"column {column}), expected UTF-8 text") from None


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
    "generate": (("--ckpt_path", _checkpoint), ("--stories", _text), ("--contexts", _text),
                 ("--references", _text), *_METRIC_INPUTS),
    "evaluate-generation": _METRIC_INPUTS,
    "evaluate-syntax": (("--sentences", _text),),
    "annotate": (("--input", _text), ("--conllu", _text)),
}


def _writable(flag: str, folder: Path) -> None:
    """``folder``, or the nearest folder above it that exists (where the command makes the
    rest), takes a new file: one is created there and removed."""
    there = next(p for p in (folder, *folder.parents) if p.exists())
    shown = there if str(there) != "." else Path.cwd()
    if not there.is_dir():
        raise InputError(f"{flag}: {shown} is a file, not a folder")
    try:
        handle, name = tempfile.mkstemp(prefix=".synlm-check-", dir=there)
        os.close(handle)
        os.unlink(name)
    except OSError as err:
        raise InputError(f"{flag}: cannot write in {shown} ({err.strerror or err}); choose "
                         "another path") from None


def _file_out(flag: str, value: str) -> None:
    """A file written in its folder (through a temporary name there)."""
    _writable(flag, Path(value).parent)


def _folder_out(flag: str, value: str) -> None:
    """A folder written into (made if missing), or a file: the folder, or its parent's."""
    path = Path(value)
    _writable(flag, path if path.is_dir() else path.parent)


def _staged_out(flag: str, value: str) -> None:
    """A folder written beside itself and moved into place (``files.staged_folder``): its
    parent, and the folder itself where one is to be replaced."""
    path = Path(value)
    _writable(flag, path.parent)
    if path.is_dir():
        _writable(flag, path)


#: command -> each flag that names what it writes, and its check (``-`` is standard output)
OUTPUT_FLAGS: dict[str, tuple[tuple[str, Callable[[str, str], None]], ...]] = {
    "evaluate-syntax": (("--output", _file_out), ("--regions", _file_out),
                        ("--surprisals", _file_out), ("--report", _folder_out),
                        ("--journal", _folder_out)),
    "parse": (("--output", _folder_out),),
    "generate": (("--output", _file_out),),
    "annotate": (("--output", _file_out),),
    "plot": (("--output", _file_out),),
    "export-hf": (("--out", _staged_out),),
    "convert": (("--out", _staged_out),),
    "lm-eval": (("--output_path", _folder_out),),
}


def _line_count(path: str) -> int:
    """The lines of a text file, as ``synlm.data.files.read_lines`` splits it."""
    data = Path(path).read_bytes()
    return data.count(b"\n") + (not data.endswith(b"\n"))


def _one_reference_a_context(args: Sequence[str]) -> None:
    """``generate``'s ``--references``: a line for each line of ``--contexts`` (the files
    are there and readable: ``INPUT_FLAGS``)."""
    contexts = usage.flag_values(args, "--contexts")[-1:]
    references = usage.flag_values(args, "--references")[-1:]
    if contexts and references and "-" not in (contexts[0][2], references[0][2]):
        (_, _, context), (_, _, reference) = contexts[0], references[0]
        wanted, got = _line_count(context), _line_count(reference)
        if got != wanted:
            raise InputError(f"--references: {reference} has {got} lines, --contexts "
                             f"{context} {wanted}; give one reference a context")


#: command -> (the checks of its positional arguments, in order, with the name each is
#: given, the flags that take no value, the flags that take every value up to the next
#: flag): ``evaluate-generation FILE``, ``cp NAME DEST``.
POSITIONAL_INPUTS: dict[str, tuple[tuple[tuple[str, Callable[[str, str], None] | None], ...],
                                   tuple[str, ...], tuple[str, ...]]] = {
    "evaluate-generation": ((("the samples", lambda flag, value: existing_file(
        flag, value, "a JSONL file, as synlm generate writes")),), ("--news",),
        ("--rlm-set",)),
    "cp": ((("NAME", None), ("DEST", _folder_out)), ("--force",), ()),
}


def _positionals(args: Sequence[str], switches: tuple[str, ...],
                 many: tuple[str, ...]) -> list[str]:
    """The arguments that are no flag nor a flag's value, as argparse reads ``args``
    (``switches`` take no value, ``many`` every value up to the next flag, the others one)."""
    takes, found = 0, []
    for arg in args:
        if arg.startswith("-") and arg != "-":
            flag, eq, _ = arg.partition("=")
            names = _spellings(flag) if flag.startswith("--") else (flag,)
            takes = 0 if eq or any(n in switches for n in names) else \
                -1 if any(n in many for n in names) else 1
        elif takes:
            takes -= takes > 0
        else:
            found.append(arg)
    return found


def _spellings(flag: str) -> tuple[str, str]:
    """A flag with dashes and with underscores (``CommandParser`` takes both)."""
    name = flag[2:]
    return f"--{name.replace('_', '-')}", f"--{name.replace('-', '_')}"


def check_inputs(command: str, args: Sequence[str]) -> None:
    """The first input or output of ``command``'s ``args`` that names nothing usable, as
    synlm's one-line error (``INPUT_FLAGS``, ``OUTPUT_FLAGS``, ``POSITIONAL_INPUTS``;
    ``lm-eval``'s: ``check_lm_eval_inputs``; the Lightning commands': ``check_run_inputs``)."""
    if command == "lm-eval":
        check_lm_eval_inputs(args)
    for flag, check in (*INPUT_FLAGS.get(command, ()), *OUTPUT_FLAGS.get(command, ())):
        for _, _, value in usage.flag_values(args, *_spellings(flag)):
            if value != "-":
                check(flag, value)
    if command == "generate":
        _one_reference_a_context(args)
    if command in POSITIONAL_INPUTS:
        checks, switches, many = POSITIONAL_INPUTS[command]
        for (name, positional), value in zip(checks, _positionals(args, switches, many)):
            if positional is not None:
                positional(name, value)


#: ``--ckpt_path`` values Lightning resolves itself (synlm resolves ``best`` and ``last``
#: among the run folders), as ``synlm.lightning_cli`` passes them on.
LIGHTNING_CKPT_NAMES = ("hpc", "registry")
#: A flag's value that sets nothing, as YAML reads it (``--model.init_from=null``: a sweep's
#: "no start").
UNSET = ("null", "Null", "NULL", "~", "None", "")


def run_root(args: Sequence[str]) -> Path | None:
    """The folder that holds a command line's runs (``version_N``), as ``synlm.lightning_cli``
    finds it: the last ``--trainer.default_root_dir`` or config file (after its bases) that
    sets ``trainer.default_root_dir``, else ``runs/<config stems>`` (``run_name``). None
    where only Lightning can tell: a ``--trainer`` block, or a ``--config`` that is no file
    (YAML given inline)."""
    args = usage.resolve_configs(args)
    configs = usage.flag_values(args, *usage.CONFIG_FLAGS)
    if usage.flag_values(args, "--trainer") or not all(Path(v).is_file() for _, _, v in configs):
        return None
    settings = [(i, value) for i, _, value in usage.flag_values(args, "--trainer.default_root_dir")]
    for i, _, value in configs:
        for _, loaded in usage.with_bases(Path(value)):  # the deepest base first
            trainer = loaded.get("trainer")
            if isinstance(trainer, dict) and "default_root_dir" in trainer:
                settings.append((i, trainer["default_root_dir"]))
            if "trainer.default_root_dir" in loaded:
                settings.append((i, loaded["trainer.default_root_dir"]))
    settings.sort(key=lambda setting: setting[0])  # stable: a file's bases stay before it
    root = settings[-1][1] if settings else None
    if root is None or str(root) in UNSET:
        return Path("runs") / run_name([value for _, _, value in configs])
    return Path(str(root))


def check_run_inputs(command: str, args: Sequence[str]) -> None:
    """``fit|validate|test|predict``: the checkpoint ``--ckpt_path`` names (a file or run
    folder: its last for ``fit``, its best otherwise; ``best`` and ``last`` alone are looked
    for among the runs under ``run_root``, and need a ``--config`` outside ``fit``:
    ``unnamed_run``), and ``fit``'s ``--model.init_from``."""
    ckpts = [value for _, _, value in usage.flag_values(args, "--ckpt_path")
             if value not in UNSET]
    if (ckpts and ckpts[-1] in WHICH and command != "fit"
            and not usage.flag_values(args, *usage.CONFIG_FLAGS)):
        raise unnamed_run(ckpts[-1])  # as synlm.lightning_cli.with_saved_config says
    root = run_root(args) if ckpts and ckpts[-1] in WHICH else None
    if root is not None:
        check_run_checkpoint(root, ckpts[-1], fit=command == "fit")
    if ckpts and ckpts[-1] not in (*WHICH, *LIGHTNING_CKPT_NAMES):
        check_checkpoint(ckpts[-1], folder="last" if command == "fit" else "best")
    starts = [value for _, _, value in usage.flag_values(args, "--model.init_from")]
    if command == "fit" and starts and starts[-1] not in UNSET and not ckpts:
        check_checkpoint(starts[-1], "model.init_from")


#: The ``model_args`` of lm-eval's ``synlm`` model (``synlm.lm_eval_model.SynlmLM``'s
#: arguments but ``model``; a test keeps them equal).
SYNLM_MODEL_ARGS = ("ckpt_path", "batch_size", "device", "greedy", "beam_size",
                    "word_beam_size", "shift_size", "search_convention", "search", "particles",
                    "max_memory_mb")
#: lm-eval's subcommands that read no model (``run`` is the default).
_LM_EVAL_LISTINGS = ("ls", "validate")


def _values(args: Sequence[str], *flags: str) -> list[str]:
    """Every value of ``flags`` in ``args``: ``FLAG=VALUE``, or each argument after
    ``FLAG`` up to the next flag (lm-eval's ``--tasks`` and ``--model_args`` take several)."""
    found, taking = [], False
    for arg in args:
        flag, eq, value = arg.partition("=")
        if arg.startswith("-"):
            taking = arg in flags
            if flag in flags and eq:
                found.append(value)
        elif taking:
            found.append(arg)
    return found


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes, as lm-eval splits
    ``--model_args`` (``lm_eval._cli.utils.split_top_level``)."""
    parts, depth, quote, start = [], 0, None, 0
    for i, char in enumerate(text):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[({":
            depth += 1
        elif char in "])}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [part for part in [*parts, text[start:]] if part]


def _model_args(values: Sequence[str]) -> dict[str, Any]:
    """``--model_args``, as lm-eval reads them: one JSON object, or ``key=value`` items
    (several, each comma-separated); values as written (lm-eval converts numbers)."""
    if values and values[0].lstrip().startswith("{"):
        try:
            given = json.loads(values[0])
        except json.JSONDecodeError as err:
            raise InputError(f"--model_args: not JSON ({err.msg}); write key=value,key=value "
                             "or a JSON object with double quotes") from None
        return given
    found: dict[str, Any] = {}
    for value in values:
        for item in _split_top_level(value):
            key, eq, setting = item.partition("=")
            if not eq or not key:
                raise InputError(f"--model_args: expected key=value, got {item!r}")
            found[key] = setting
    return found


def _synlm_model_args(given: dict[str, Any], configured: bool) -> None:
    """The ``synlm`` model's ``model_args``: its arguments only, a checkpoint or run folder
    that is there (``configured``: an lm-eval ``--config`` may give ``ckpt_path``)."""
    for key in given:
        if key not in SYNLM_MODEL_ARGS:
            raise InputError(f"--model_args: the synlm model takes no {key!r}"
                             f"{usage.did_you_mean(key, SYNLM_MODEL_ARGS)} (it takes "
                             f"{', '.join(SYNLM_MODEL_ARGS)})")
    if "ckpt_path" in given:
        check_checkpoint(str(given["ckpt_path"]), "ckpt_path", folder="best")
    elif not configured:
        raise InputError("--model_args: the synlm model needs ckpt_path=RUN (a checkpoint or "
                         "run folder)")
    if str(given.get("search", "beam")) not in ("beam", "particles"):
        raise InputError(f"search={given['search']}: expected beam or particles")
    batch = str(given.get("batch_size", 1))
    if not (batch.isdigit() or batch.startswith("auto")):
        raise InputError(f"batch_size={batch}: expected a whole number or auto")


def _tasks(tasks: Sequence[str], include: str | None) -> None:
    """What ``--tasks`` names that is known without lm-eval's task index: a task file
    (``*.yaml``, a pattern) that matches nothing, and the BLiMP tasks synlm writes
    (``synlm_blimp*``: ``synlm.lm_eval_model.write_blimp_tasks``), which are in the
    ``--include_path`` folder or nowhere. Other names are lm-eval's to find: its index
    imports its task modules and reads its task files, seconds without torch."""
    for task in (t for value in tasks for t in value.split(",") if t):
        if task.endswith(".yaml") and not glob.glob(task):  # as lm-eval finds them
            raise MissingFileError(f"--tasks: no file {task} (a task's YAML file)")
        if not task.startswith("synlm_blimp"):
            continue
        if include is None:
            raise InputError(f"--tasks: {task} is a task synlm writes "
                             "(synlm.lm_eval_model.write_blimp_tasks); give the folder it "
                             "wrote as --include_path DIR")
        written = {p.stem for p in Path(include).rglob("synlm_blimp*.yaml")}
        if task not in written:
            raise InputError(f"--tasks: no task {task} in {include}"
                             f"{usage.did_you_mean(task, written)}")


def check_lm_eval_inputs(args: Sequence[str]) -> None:
    """``synlm lm-eval``'s inputs, before lm-eval or torch is imported: ``--include_path``
    and lm-eval's ``--config`` are there; ``--model_args`` parse (and the ``synlm`` model's
    are its own, with a checkpoint that is there; a local ``pretrained`` folder of ``hf``
    is there); ``--tasks`` as ``_tasks`` checks them. lm-eval's parser checks the rest."""
    if args[:1] and args[0] in _LM_EVAL_LISTINGS:
        return
    include = next(iter(_values(args, "--include_path")[-1:]), None)
    if include is not None and not Path(include).is_dir():
        raise MissingFileError(f"--include_path: no folder {include} (the folder of task "
                               "files, as synlm.lm_eval_model.write_blimp_tasks writes)")
    configs = _values(args, "--config", "-C")
    for config in configs[-1:]:
        existing_file("--config", config, "lm-eval's YAML config")
    given = _model_args(_values(args, "--model_args", "-a"))
    model = next(iter(_values(args, "--model", "-M")[-1:]), None)
    if model == "synlm":
        _synlm_model_args(given, bool(configs))
    elif (model == "hf" or (model is None and not configs)) and "pretrained" in given:
        model_folder(str(given["pretrained"]))
    _tasks(_values(args, "--tasks", "-t"), include)
