"""What the ``synlm`` command says about itself: the overview of its commands, the version,
"did you mean" for mistyped commands, flags, class names and config names, config files
found among the shipped ones, and YAML errors that name their file and line.

One module because every line the command says about itself (its help, "did you mean", where
a bad value was set and what was expected) reads the same flags, config files and catalog."""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from synlm import __version__
from synlm.catalog import REPO_CONFIGS, classes, list_components, shipped_configs

#: Every subcommand with what it does, in the order ``synlm --help`` lists them.
COMMANDS = {
    "fit": "train a model; writes runs/<config>/version_N/ (config, metrics.csv, checkpoints)",
    "validate": "the validation metrics of a checkpoint (--ckpt_path; its config is inside)",
    "test": "the test metrics of a checkpoint (--ckpt_path; its config is inside)",
    "predict": "run a checkpoint's predict step over the data",
    "parse": "induced trees (and parsing F1 or UAS against a treebank) of a checkpoint",
    "evaluate-syntax": "BLiMP, SyntaxGym and Marvin & Linzen accuracies of a checkpoint",
    "export-hf": "a checkpoint as a Hugging Face folder (transformers, minicons, lm-eval)",
    "lm-eval": "lm-evaluation-harness's command line with the synlm model (lm-eval extra)",
    "convert": "a released rnng-pytorch checkpoint as a synlm run folder (--from rnng-pytorch)",
    "plot": "learning curves of runs from their metrics.csv",
    "generate": "sample text from a checkpoint (story endings, contexts, unconditional)",
    "evaluate-generation": "the generation metrics of a JSONL file of samples",
    "annotate": "dependency heads for raw text with a spaCy pipeline (cached CoNLL-U)",
    "cp": "a shipped config as one editable file, its bases flattened into it",
    "ls": "every kind of component (recipes to attention policies) and the shipped configs",
}


def overview() -> str:
    """``synlm --help``: every command, one line each."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return "\n".join([
        "usage: synlm COMMAND [options]      synlm COMMAND --help: the command's options",
        "",
        "Syntax-aware language models on PyTorch Lightning (synlm " + __version__ + ").",
        "fit/validate/test/predict take --config FILE.yaml (repeatable; a shipped config by",
        "name, e.g. --config quickstart.yaml) and dotted overrides, --trainer.max_epochs=3.",
        "",
        "commands:", *lines,
        "",
        "options:",
        "  -h, --help  this message",
        "  --version   the versions of synlm, torch and lightning",
    ])


#: ``synlm fit``'s flag for LightningCLI's own help: every option, with its documentation.
FULL_HELP = "--help-all"


def fit_help() -> str:
    """``synlm fit --help``: the config and the flags most runs set, in a screenful; the
    full list is LightningCLI's help (``synlm fit --help-all``)."""
    return "\n".join([
        "usage: synlm fit --config FILE.yaml [--config FILE.yaml ...] [--KEY=VALUE ...]",
        "",
        "Train a model; writes runs/<config>/version_N/ (config.yaml, metrics.csv,",
        "checkpoints/). Every key of a config is a flag too: --section.key=value.",
        "",
        "the config:",
        "  -c, --config FILE        a YAML config, or a shipped one by name (quickstart.yaml;",
        "                           synlm ls lists them); repeat it to stack several",
        "  --print_config           print the resolved config and exit",
        "",
        "common flags:",
        "  --trainer.max_epochs N   epochs to train (or --trainer.max_steps N)",
        "  --trainer.accelerator A  cpu, gpu or auto; --trainer.devices N: how many",
        "  --trainer.precision P    32-true, bf16-mixed, 16-mixed",
        "  --trainer.default_root_dir DIR   the run's folder (default runs/<config>)",
        "  --data.corpus NAME       the corpus (synlm ls: corpora); --data.batch_size N",
        "  --model NAME             the recipe: SyntaxLM (the default: a backbone and heads)",
        "                           or TransitionLM (a model that generates its trees)",
        "  --model.backbone NAME    SyntaxLM's backbone (synlm ls: backbones); --model.heads",
        "  --model.init_from RUN    start from a trained run's weights (checkpoint or folder)",
        "  --optimizer NAME         a torch.optim class; its settings: --optimizer.lr=0.001",
        "  --ckpt_path last         continue the newest run where it stopped (or a",
        "                           checkpoint or run folder to continue)",
        "  --seed_everything N      the seed of the run",
        "  --tensorboard true       also log to TensorBoard",
        "",
        f"every option of the trainer, model and data, documented: synlm fit {FULL_HELP}",
        "a recipe's own options: --model.help NAME (e.g. SyntaxLM); a class's:",
        "--model.backbone.help NAME (e.g. ONLSTM)",
    ])


#: ``validate|test|predict``: what it does, its split's batch size, its batch limit.
_CHECKPOINT_COMMANDS = {
    "validate": ("The validation metrics of a checkpoint.", "--data.eval_batch_size N",
                 "--trainer.limit_val_batches N"),
    "test": ("The test metrics of a checkpoint.", "--data.test_batch_size N",
             "--trainer.limit_test_batches N"),
    "predict": ("A checkpoint's predict step over the test split.", "--data.test_batch_size N",
                "--trainer.limit_predict_batches N"),
}


def checkpoint_help(command: str) -> str:
    """``synlm validate|test|predict --help``: the checkpoint, the config and the flags
    most runs set, in a screenful; the full list is LightningCLI's help (``synlm COMMAND
    --help-all``)."""
    what, batch, limit = _CHECKPOINT_COMMANDS[command]
    return "\n".join([
        f"usage: synlm {command} --ckpt_path RUN [--config FILE.yaml ...] [--KEY=VALUE ...]",
        "",
        what,
        "Without --config, the config its run was trained with is read from its run folder.",
        "Every key of a config is a flag too: --section.key=value.",
        "",
        "the checkpoint and the config:",
        "  --ckpt_path PATH       a checkpoint file or a run folder (runs/NAME: its newest run",
        "                         that saved one; runs/NAME/version_N): its best checkpoint;",
        "                         PATH/last: its last",
        "  --ckpt_path best|last  with --config: the newest run's, under its",
        "                         trainer.default_root_dir (default runs/<config>)",
        "  -c, --config FILE      a YAML config, or a shipped one by name (synlm ls lists",
        "                         them); without --ckpt_path: an untrained model",
        "  --print_config         print the resolved config and exit",
        "",
        "common flags:",
        f"  {batch:<35} sentences (or columns) a batch",
        f"  {limit:<35} a share (0.1) or a number of batches",
        f"  {'--trainer.accelerator A':<35} cpu, gpu or auto; --trainer.devices N",
        f"  {'--trainer.precision P':<35} 32-true, bf16-mixed, 16-mixed",
        "",
        f"every option of the trainer, model and data, documented: synlm {command} "
        f"{FULL_HELP}",
    ])


def version() -> str:
    """Read from the installed packages' metadata, without importing them."""
    return (f"synlm {__version__} (torch {metadata.version('torch')}, "
            f"lightning {metadata.version('lightning')})")


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the closest candidate, or ``""`` (case aside: ``OnLstm``
    finds ``ONLSTM``)."""
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]}?" if close else ""


def unknown_command(name: str) -> str:
    return (f"synlm: error: unknown command {name!r}{did_you_mean(name, COMMANDS)} "
            f"(synlm --help lists them)")


CONFIG_FLAGS = ("-c", "--config")


def flag_values(args: Sequence[str], *flags: str) -> list[tuple[int, str, str]]:
    """Every value of ``flags`` in ``args``, given as ``FLAG VALUE`` or ``FLAG=VALUE``, in
    order: ``(i, prefix, value)`` with ``args[i] == prefix + value``."""
    found = []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in flags and eq:
            found.append((i, flag + eq, value))
        elif arg in flags and i + 1 < len(args):
            found.append((i + 1, "", args[i + 1]))
    return found


def without_flag(args: Sequence[str], flag: str) -> list[str]:
    """``args`` with every value of ``flag`` (``FLAG VALUE`` or ``FLAG=VALUE``) left out."""
    dropped = {j for i, prefix, _ in flag_values(args, flag)
               for j in ((i,) if prefix else (i - 1, i))}
    return [arg for i, arg in enumerate(args) if i not in dropped]


def resolve_configs(args: Sequence[str]) -> list[str]:
    """``args`` with each ``--config NAME`` that is not a file here but a shipped config
    (``quickstart.yaml``, ``data/ptb.yaml``) replaced by the shipped file's path."""
    out = list(args)
    for i, prefix, value in flag_values(args, *CONFIG_FLAGS):
        out[i] = prefix + _shipped_or_given(value)
    return out


def _shipped_or_given(value: str) -> str:
    if Path(value).exists() or not (REPO_CONFIGS / value).is_file():
        return value
    return str(REPO_CONFIGS / value)


#: The key of a config file that names its base. synlm reads the chain
#: (``with_bases``) and applies each file as if it were a ``--config`` given before this
#: one (``synlm.lightning_cli.ConfigChain``): a block merges into the base's values, a
#: list or a value replaces the base's there (docs/cli.md, "Configs: a base and a delta").
BASE_KEY = "config"


def is_config_file(value: str) -> bool:
    """Whether a ``--config`` value names a file (not YAML given inline) that exists."""
    text = str(value)
    return "\n" not in text and not text.lstrip().startswith("{") and Path(text).is_file()


def config_error(args: Sequence[str]) -> str | None:
    """The first problem with a ``--config`` file of ``args``, as one line: a missing file
    (with the closest shipped config) or a YAML error with its file, line and column; the
    base a file names (its ``config:`` key) is checked too, and the way the file names it."""
    for _, _, value in flag_values(args, *CONFIG_FLAGS):
        found = _yaml_problem(Path(value))
        if found:
            return found
    return None


def _yaml_problem(path: Path, chain: tuple[Path, ...] = ()) -> str | None:
    """A problem with the config file ``path`` or its bases; ``chain``: the files that
    named it as their base, the first one given by ``--config``."""
    if "\n" in str(path) or str(path).lstrip().startswith("{"):
        return None  # a config given inline as a YAML string
    if not path.is_file():
        names = shipped_configs()
        hint = did_you_mean(path.name, [*names, *(Path(n).name for n in names)])
        return (f"--config: no file {path}{hint} (synlm ls lists the shipped configs, which "
                "may be named without a folder)")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = getattr(err, "problem", None) or str(err).splitlines()[0]
        return f"{where}: not valid YAML: {what}"
    if not isinstance(loaded, dict) or BASE_KEY not in loaded:
        return None
    return _base_problem(path, loaded, chain)


def _base_problem(path: Path, loaded: dict[str, Any], chain: tuple[Path, ...]) -> str | None:
    """A problem with the base ``path`` names (``config: base.yaml``): one base, named
    first, a file next to it, no loop."""
    base = loaded[BASE_KEY]
    where = f"{path}:{yaml_line(path, BASE_KEY) or 1}: {BASE_KEY}"
    if not isinstance(base, str):
        return (f"{where}: expected the file name of one base config (relative to "
                f"{path.parent}), got {base!r}")
    if next(iter(loaded)) != BASE_KEY:
        return f"{where}: put it first (the base it names would override the keys above it)"
    target = path.parent / base
    if not target.is_file():
        near = sorted(str(Path(base).parent / p.name) for p in target.parent.glob("*.yaml")) \
            if target.parent.is_dir() else []
        return (f"{where}: no file {base} (the base config, relative to "
                f"{path.parent}){did_you_mean(base, near)}")
    seen = (*chain, path.resolve())
    if target.resolve() in seen:
        names = " -> ".join(p.name for p in (*seen, target))
        return f"{where}: the bases loop ({names})"
    return _yaml_problem(target, seen)


def with_bases(path: Path, seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict[str, Any]]]:
    """The config file ``path`` and the bases it names (``config:``), each with its YAML,
    in the order they apply (the deepest base first); a file that cannot be read is left
    out, one that is not a mapping has no keys, and the chain ends where the bases loop."""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(loaded, dict):
        return [(path, {})]
    base = loaded.get(BASE_KEY)
    if not isinstance(base, str) or path.resolve() in seen:
        return [(path, loaded)]
    return [*with_bases(path.parent / base, (*seen, path.resolve())), (path, loaded)]


def suggestion(message: str, options: Iterable[str]) -> str:
    """A "did you mean" for a jsonargparse error ``message``: an unknown flag (among
    ``options``), an unknown key of a config file (among the keys beside it), an unknown
    argument of a class, or an unknown class name; ``""`` when nothing is close."""
    unknown = re.search(r"unrecognized arguments: (\S+)", message)
    if unknown:
        return did_you_mean(unknown.group(1).split("=")[0], options)
    unknown_key = re.search(r"does not accept option '([^']+)'", message)
    if unknown_key:
        block, _, name = unknown_key.group(1).rpartition(".")
        prefix = f"--{block}." if block else "--"
        beside = [o[len(prefix):] for o in options if o.startswith(prefix)]
        return did_you_mean(name, [o for o in beside if "." not in o])
    rejected = re.search(r"class_path '([\w.]+)'.*?Option '(\w+)' is not accepted", message,
                         re.DOTALL)
    if rejected:
        return did_you_mean(rejected.group(2), sorted(class_parameters(rejected.group(1)) or ()))
    bad_class = re.search(r"Expected a dot import path string: (\S+)", message)
    if bad_class:
        names = [n for kind, ns in list_components().items() if kind != "configs" for n in ns]
        return did_you_mean(bad_class.group(1), names)
    return ""


def class_parameters(class_path: str) -> set[str] | None:
    """The arguments the class ``class_path`` names takes (a short name: synlm's class of
    that name); None where it cannot be imported."""
    module, _, name = class_path.rpartition(".")
    if not module:
        modules = {found.module for found in classes() if found.name == name}
        if len(modules) != 1:
            return None
        module = modules.pop()
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return set(inspect.signature(cls).parameters) - {"self", "args", "kwargs"}


def config_files(args: Sequence[str]) -> list[Path]:
    """The YAML files ``args`` read, in the order they apply: each ``--config`` after the
    base it names (its ``config:`` key) and that base's own."""
    return [f for _, _, value in flag_values(args, *CONFIG_FLAGS) if "\n" not in value
            for f, _ in with_bases(Path(value))]


def yaml_line(path: Path, key: str, value: Any = None) -> int | None:
    """The line (1-based) of ``path`` that sets the dotted ``key`` (``init_args`` levels may
    be left out on either side; the file may write keys dotted, ``model.heads:``), or within
    it the scalar ``value``; None if it does not."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    parts, i = key.split("."), 0
    while i < len(parts):
        if not isinstance(node, yaml.MappingNode):
            return None
        entries = _entries(node)
        if not any(".".join(parts[i:j]) in entries for j in range(i + 1, len(parts) + 1)) \
                and "init_args" in entries:
            entries = _entries(entries["init_args"][1])  # written with its init_args level
        # the longest run of parts that one key of the file names ("model.heads")
        j = next((j for j in range(len(parts), i, -1) if ".".join(parts[i:j]) in entries), None)
        if j is None:
            if parts[i] == "init_args":
                i += 1  # written without its init_args level
                continue
            return None
        key_node, node = entries[".".join(parts[i:j])]
        i = j
    if value is not None:
        for scalar in _scalars(node):
            if scalar.value == str(value):
                return scalar.start_mark.line + 1
    return key_node.start_mark.line + 1


def _entries(node: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """A mapping node's entries by their (scalar) key; none for any other node."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _scalars(node: yaml.Node) -> list[yaml.ScalarNode]:
    if isinstance(node, yaml.ScalarNode):
        return [node]
    children = node.value if isinstance(node, yaml.SequenceNode) else \
        [v for _, v in node.value] if isinstance(node, yaml.MappingNode) else []
    return [s for child in children for s in _scalars(child)]


def _short(key: str) -> str:
    """A dotted key without its ``init_args`` levels, as a flag may give it."""
    return key.replace(".init_args.", ".")


def _as_written(key: str) -> str:
    """A parsed key as a config writes it: the recipe's arguments without their
    ``init_args`` level (``model.backbone``, not ``model.init_args.backbone``)."""
    return "model." + key.removeprefix("model.init_args.") if key.startswith(
        "model.init_args.") else key


def flag_given(key: str, args: Sequence[str]) -> bool:
    """Whether a flag of ``args`` sets the dotted ``key`` (with or without ``init_args``)."""
    return any(_short(a.split("=")[0]) == f"--{_short(key)}" for a in args if a.startswith("--"))


def set_by(key: str, value: Any, args: Sequence[str]) -> str | None:
    """What set ``key`` to ``value``: ``--key=value`` for a flag in ``args``, ``FILE:LINE:
    key: value`` for the last config file that sets it; None for neither (a default, a
    link)."""
    if flag_given(key, args):
        return f"--{_short(key)}={value}"
    for path in reversed(config_files(args)):
        line = yaml_line(path, key, value)
        if line is not None:
            return f"{path}:{line}: {_as_written(key)}: {value}"
    return None


def where_set(key: str, value: Any, args: Sequence[str]) -> str:
    """``set_by``, or ``--key=value`` when nothing in ``args`` sets it."""
    return set_by(key, value, args) or f"--{_short(key)}={value}"


def where_key(key: str, args: Sequence[str]) -> str:
    """Where ``args`` give the dotted ``key``: ``FILE:LINE: key`` for the last config file
    that sets it, unless a flag does; else the flag, ``--key``."""
    if not flag_given(key, args):
        for path in reversed(config_files(args)):
            line = yaml_line(path, key)
            if line is not None:
                return f"{path}:{line}: {_as_written(key)}"
    return f"--{_short(key)}"


#: the last part of a config key -> the kind of component it takes (``synlm ls``)
KIND_OF_KEY = {"model": "recipes", "backbone": "backbones", "heads": "heads", "corpus": "corpora",
               "subwords": "subwords", "inserts": "inserts"}


def parser_error(message: str, options: Iterable[str], args: Sequence[str]) -> str:
    """jsonargparse's error ``message`` (often a dozen lines) as one: where the value was
    set (``where_set``), what is expected, and "did you mean" when a name is close."""
    message = _innermost(message)
    key = re.search(r'Parser key "([^"]+)"', message)
    hint = suggestion(message, options)
    bad_class = re.search(r"Expected a dot import path string: (\S+)", message)
    rejected = re.search(r"class_path '([\w.]+)'.*?Option '(\w+)' is not accepted", message,
                         re.DOTALL)
    unknown = re.search(r"unrecognized arguments: (.+)", message)
    unknown_key = re.search(r"does not accept option '([^']+)'", message)
    if key and bad_class:
        name, kinds = bad_class.group(1), "synlm ls lists them"
        kind = KIND_OF_KEY.get(key.group(1).split(".")[-1])
        if kind:
            kinds = f"{kind}: {', '.join(list_components()[kind])}"
        if key.group(1) in ("optimizer", "lr_scheduler"):  # torch is imported: the CLI runs
            import torch.optim

            module = torch.optim if key.group(1) == "optimizer" else torch.optim.lr_scheduler
            kinds = f"one of {module.__name__}'s classes"
            hint = did_you_mean(name, [n for n in dir(module) if n[:1].isupper()])
        return f"{where_set(key.group(1), name, args)}: no class of that name{hint} ({kinds})"
    if key and rejected:
        owner = rejected.group(1).rsplit(".", 1)[-1]
        where = where_key(f"{key.group(1)}.{rejected.group(2)}", args)
        return f"{where}: {owner} takes no such argument{hint}"
    if unknown:
        return f"{unknown.group(1).strip()}: not an option{hint}"
    if unknown_key:
        return f"{where_key(unknown_key.group(1), args)}: not an option{hint}"
    if key:
        given = re.search(r"Got value: (.+)|Given value: (.+)", message)
        value = next(g for g in given.groups() if g).strip() if given else "?"
        expected = list(dict.fromkeys(
            _type_name(m) for m in re.findall(r"Expected a (.+?)(?:\. Got value:.*)?$", message,
                                              re.MULTILINE) if "NoneType" not in m))
        what = " or ".join(expected) if expected else " ".join(message.split()[3:])
        return f"{where_set(key.group(1), value, args)}: expected {what}{hint}"
    return " ".join(message.split()) + hint


def _innermost(message: str) -> str:
    """A subclass argument's error (the recipe's: ``Parser key "model"``, which nests the
    error of the class it was given, and of that class's subclass arguments) as the error
    of the innermost key, with its whole dotted path: ``Parser key
    "model.init_args.backbone.init_args.dropout_input": Expected a <class 'float'>...``,
    under the innermost ``class_path`` where the class refuses an option."""
    outer = re.match(r'Parser key "([^"]+)":', message)
    given = "- Problem with given class_path "
    if outer is None or given not in message:
        return message
    body = re.split(r"\n\s*- Expected a <class 'NoneType'>", message.split(given, 1)[1])[0]
    lines = body.splitlines()
    path, owner, rest = [outer.group(1)], lines[0].rstrip(":"), []
    for line in lines[1:]:
        key = re.match(r'\s*Parser key "([^"]+)":', line)
        cls = re.match(r"\s*Problem with given class_path ('[\w.]+')", line)
        if key:
            path += ["init_args", key.group(1)]
        elif cls:
            owner = cls.group(1)
        elif line.strip():
            rest.append(line.strip())
    return f'Parser key "{".".join(path)}":\n  class_path {owner}:\n  ' + "\n  ".join(rest)


def _type_name(text: str) -> str:
    """``int`` for ``<class 'int'>``, ``one of 64, 32, 16`` for ``typing.Literal[64, 32, 16]``."""
    literal = re.fullmatch(r"typing\.Literal\[(.*)\]", text)
    if literal:
        return f"one of {literal.group(1)}"
    named = re.fullmatch(r"<class '([\w.]+)'>", text)
    return named.group(1).rsplit(".", 1)[-1] if named else text
