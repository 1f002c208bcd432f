"""Every shipped config resolves exactly as recorded in tests/fixtures/resolved_configs/:
what ``synlm fit --config X --print_config`` printed before the configs became deltas on
their bases (an ablation: stacked on its base with a second ``--config``), less the
``# synlm VERSION`` header; the same values of the same types, the order of keys aside. A
delta (a config whose ``config:`` names another experiment) changes its base only in the
keys it names, and names no key it leaves as it was.

A config meant to resolve differently: rewrite its fixture, then read the diff::

    python tests/test_config_resolution.py configs/X.yaml   # no argument: every config

The configs are resolved in this process by the CLI's own parser, built once
(``jsonargparse.capture_parser``), without building a model or reading data."""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli
from synlm.catalog import REPO_CONFIGS, shipped_configs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "resolved_configs"
#: Not LightningCLI configs: wandb sweeps (tests/test_sweeps.py) and a spaCy pipeline
#: (tests/test_annotate.py).
NOT_LIGHTNING = ("sweeps/", "spacy/")
#: Partial configs, which experiments name as their base (``config: data/ptb.yaml``).
PARTIALS = ("data/", "trainer/")
CONFIGS = [n for n in shipped_configs() if not n.startswith(NOT_LIGHTNING)]

KeyPath = tuple[str | int, ...]


@functools.cache
def _parser() -> Any:
    """The parser ``synlm fit`` parses its command line with (one shape for every recipe)."""
    from jsonargparse import capture_parser

    from synlm.lightning_cli import SynLMCLI

    return capture_parser(lambda: SynLMCLI(args=["fit"]))


@functools.cache
def resolve(name: str) -> str:
    """What ``synlm fit --config configs/NAME --print_config`` prints, less its header."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            config = str(REPO_CONFIGS / name)
            _parser().parse_args(["fit", "--config", config, "--print_config"])
        except SystemExit as exit_:
            assert not exit_.code, f"{name} does not resolve: {err.getvalue().strip()}"
    lines = out.getvalue().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):  # the dump header: "# synlm 0.1.0"
        lines.pop(0)
    return "".join(lines)


def base_of(name: str) -> str | None:
    """The config that ``name``'s ``config:`` key names, relative to ``REPO_CONFIGS``."""
    path = REPO_CONFIGS / name
    base = (yaml.safe_load(path.read_text()) or {}).get("config")
    if base is None:
        return None
    return str((path.parent / base).resolve().relative_to(REPO_CONFIGS.resolve()))


def test_every_config_has_a_fixture() -> None:
    recorded = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.yaml"))
    assert recorded == CONFIGS, "python tests/test_config_resolution.py writes the missing"


def _numbers_as_floats(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _numbers_as_floats(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_numbers_as_floats(v) for v in tree]
    return float(tree) if isinstance(tree, int) and not isinstance(tree, bool) else tree


def canonical(text: str) -> str:
    """A resolved config as YAML with its keys sorted (the order in which a dump lists a
    class's ``class_path`` and ``init_args`` follows the order the files set them in) and
    whole numbers as floats: a trainer's ``limit_val_batches: 2`` (``int | float``) is
    printed ``2`` or ``2.0`` depending on what the parser met before in the process."""
    return yaml.safe_dump(_numbers_as_floats(yaml.safe_load(text)), sort_keys=True)


@pytest.mark.parametrize("name", CONFIGS)
def test_resolves_as_recorded(name: str) -> None:
    want, got = canonical((FIXTURES / name).read_text()), canonical(resolve(name))
    diff = "".join(difflib.unified_diff(want.splitlines(keepends=True),
                                        got.splitlines(keepends=True),
                                        f"fixtures/resolved_configs/{name}", f"configs/{name}"))
    assert got == want, f"configs/{name} resolves differently (keys sorted):\n{diff}"


# --- deltas: a config whose base is another experiment ----------------------------------

DELTAS = [n for n in CONFIGS if (b := base_of(n)) is not None and not b.startswith(PARTIALS)]


def flatten(tree: Any, prefix: KeyPath = ()) -> dict[KeyPath, Any]:
    """Leaf paths of nested dicts and lists (lists by index); empty ones are leaves."""
    if isinstance(tree, dict) and tree:
        items: Any = tree.items()
    elif isinstance(tree, list) and tree:
        items = enumerate(tree)
    else:
        return {prefix: tree}
    return {path: leaf for key, value in items
            for path, leaf in flatten(value, (*prefix, key)).items()}


def named_keys(name: str) -> set[KeyPath]:
    """The leaf paths a config file names, its dotted keys split (``config`` left out), a
    recipe's arguments under ``model.init_args`` where the file leaves that level out (as
    the parser reads ``model.heads``)."""
    values = yaml.safe_load((REPO_CONFIGS / name).read_text()) or {}
    values.pop("config", None)
    paths = {(*str(path[0]).split("."), *path[1:]) for path in flatten(values)}
    return {("model", "init_args", *p[1:]) if p[0] == "model" and len(p) > 1
            and p[1] not in ("class_path", "init_args") else p for p in paths}


def differing(a: dict[str, Any], b: dict[str, Any]) -> set[KeyPath]:
    flat_a, flat_b = flatten(a), flatten(b)
    missing = object()
    return {p for p in flat_a.keys() | flat_b.keys()
            if flat_a.get(p, missing) != flat_b.get(p, missing)}


def dotted(path: KeyPath) -> str:
    return ".".join(map(str, path))


def test_deltas_are_found() -> None:
    assert "palm_s.yaml" in DELTAS and "ablations/palm_u_released.yaml" in DELTAS
    assert len([n for n in DELTAS if n.startswith("generation/")]) == 22


@pytest.mark.parametrize("name", DELTAS)
def test_delta_changes_its_base_only_where_it_says(name: str) -> None:
    base = base_of(name)
    assert base is not None
    before, after = yaml.safe_load(resolve(base)), yaml.safe_load(resolve(name))
    diffs = differing(before, after)
    named = named_keys(name)
    in_base = {p[:i] for p in flatten(before) for i in range(len(p) + 1)}
    assert diffs, f"{name} changes nothing in {base}"

    # every difference is named: the delta names the path, one of its prefixes or one of
    # its keys (a list the base has empty); or it lies in the init_args of a class the
    # delta changes (they reset to that class's defaults), or in a list item the base does
    # not have (its unnamed keys are the class defaults)
    def covered(p: KeyPath) -> bool:
        if any(p[:len(q)] == q or q[:len(p)] == p for q in named):
            return True
        for i, key in enumerate(p):
            new_class = (*p[:i], "class_path")
            if key == "init_args" and new_class in named and new_class in diffs:
                return True
        items = [p[:i + 1] for i, key in enumerate(p) if isinstance(key, int)]
        return any(item not in in_base and any(q[:len(item)] == item for q in named)
                   for item in items)

    unnamed = {p for p in diffs if not covered(p)}
    assert not unnamed, f"{name} changes keys it does not name: {sorted(map(dotted, unnamed))}"

    # every named key changes something, or restates a key of a list item that changes
    # (a list of the base's length merges with it item by item, so an item is restated
    # with its class_path); a key the base already has is not repeated
    def needed(q: KeyPath) -> bool:
        if any(p[:len(q)] == q or q[:len(p)] == p for p in diffs):
            return True
        items = [q[:i + 1] for i, key in enumerate(q) if isinstance(key, int)]
        return any(p[:len(item)] == item for item in items for p in diffs)

    idle = sorted(dotted(q) for q in named if not needed(q))
    assert not idle, f"{name} restates keys it leaves as in {base}: {idle}"


# --- a delta written as a block: it merges into its base ----------------------------------

def resolve_file(args: list[str]) -> dict[str, Any]:
    """The config ``synlm fit ARGS --print_config`` prints, as a mapping."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _parser().parse_args(["fit", *args, "--print_config"])
        except SystemExit as exit_:
            assert not exit_.code, err.getvalue().strip()
    return yaml.safe_load(out.getvalue())


#: (base, a delta that sets one model argument as a nested block, the path it sets, value)
BLOCK_DELTAS = [
    ("onlstm_syd.yaml", "model: {embedding_dropout: 0.2}\n",
     ("model", "init_args", "embedding_dropout"), 0.2),
    ("tg.yaml", "model: {init_args: {model: {init_args: {num_layers: 3}}}}\n",
     ("model", "init_args", "model", "init_args", "num_layers"), 3),
]


@pytest.mark.parametrize(("base", "block", "path", "value"), BLOCK_DELTAS,
                         ids=["syntax-lm", "transition-lm"])
@pytest.mark.parametrize("form", ["base-key", "dotted", "two-configs"])
def test_a_delta_keeps_every_other_value_of_its_base(
        base: str, block: str, path: KeyPath, value: Any, form: str, tmp_path: Path) -> None:
    """The delta a user writes naturally, a block under ``model:`` (or the same key dotted,
    or the block as a second ``--config``), changes that one value and keeps the base's
    backbone, heads, policy and sizes."""
    dotted_key = ".".join(p for p in path if p != "init_args" or path[0] != "model")
    body = {"base-key": block, "dotted": f"{dotted_key}: {value}\n",
            "two-configs": block}[form]
    delta = tmp_path / "delta.yaml"
    if form == "two-configs":
        delta.write_text(body)
        args = ["--config", str(REPO_CONFIGS / base), "--config", str(delta)]
    else:
        delta.write_text(f"config: {REPO_CONFIGS / base}\n{body}")
        args = ["--config", str(delta)]
    before, after = yaml.safe_load(resolve(base)), resolve_file(args)
    assert differing(before, after) == {path}
    assert flatten(after)[path] == value


def test_the_recipe_is_chosen_as_lightning_chooses_a_subclass() -> None:
    """``--model=TransitionLM`` and ``--model.class_path`` choose the recipe over a config
    that names none (``SyntaxLM``, the default), dotted overrides reach its arguments."""
    quickstart = ["--config", str(REPO_CONFIGS / "quickstart.yaml")]
    assert resolve_file(quickstart)["model"]["class_path"] == "synlm.SyntaxLM"
    for chosen in (["--model=TransitionLM"], ["--model.class_path", "TransitionLM"]):
        model = resolve_file([*quickstart, *chosen, "--model.beam_size=7"])["model"]
        assert model["class_path"].endswith(".TransitionLM")
        assert model["init_args"]["beam_size"] == 7
    rnng = resolve_file(["--config", str(REPO_CONFIGS / "rnng.yaml"),
                         "--model.model.hidden_size=99"])["model"]["init_args"]["model"]
    assert rnng["class_path"].endswith(".RNNG") and rnng["init_args"]["hidden_size"] == 99


# --- synlm cp: a config with its chain flattened into one file ---------------------------

CHAINED = [n for n in CONFIGS if base_of(n) is not None]


@pytest.mark.parametrize("name", CHAINED)
def test_a_flattened_copy_resolves_as_its_config(name: str, tmp_path: Path) -> None:
    """``synlm cp NAME DEST`` writes one file without a base that the parser resolves to
    exactly what NAME and its chain of bases resolve to."""
    from synlm.commands.cp import copy

    target = copy(name, str(tmp_path) + "/")
    assert target == tmp_path / Path(name).name
    flat = yaml.safe_load(target.read_text())
    assert "config" not in flat
    got = canonical(yaml.safe_dump(resolve_file(["--config", str(target)])))
    assert got == canonical(resolve(name))


def test_cp_keeps_what_exists_and_names_the_config_meant(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert run_cli(["cp", "quickstart.yaml", str(tmp_path / "mine.yaml")]) == 0
    (tmp_path / "mine.yaml").write_text("# my notes\n")
    assert run_cli(["cp", "quickstart.yaml", str(tmp_path / "mine.yaml")]) == 2
    assert (tmp_path / "mine.yaml").read_text() == "# my notes\n"
    assert run_cli(["cp", "quickstart.yaml", str(tmp_path / "mine.yaml"), "--force"]) == 0
    assert run_cli(["cp", "quickstat.yaml", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"synlm cp: {tmp_path / 'mine.yaml'}: exists; --force replaces it",
                   "synlm cp: no file quickstat.yaml; did you mean quickstart.yaml? (synlm ls "
                   "lists the shipped configs, which may be named without a folder)"]
    assert not (tmp_path / "x.yaml").exists()


# --- the run folder: named after the config given, not its bases ------------------------

def run_folder(args: list[str]) -> str:
    """``trainer.default_root_dir`` as ``synlm fit`` sets it for ``args`` (nothing runs)."""
    from synlm.lightning_cli import SynLMCLI

    class Parsed(Exception):
        pass

    class Stop(SynLMCLI):
        def parse_arguments(self, parser: Any, args: Any) -> None:
            super().parse_arguments(parser, args)
            raise Parsed(self.config["fit"].trainer.default_root_dir)

    with pytest.raises(Parsed) as parsed:
        Stop(args=args)
    return str(parsed.value.args[0])


@pytest.mark.parametrize("name", ["palm_s.yaml", "ablations/onlstm_syd_layer1.yaml",
                                  "generation/dm_lstm_dep_roc.yaml", "gpt2.yaml"])
def test_a_run_is_named_after_its_config(name: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_folder(["fit", "--config", str(REPO_CONFIGS / name)]) == \
        str(Path("runs") / Path(name).stem)


def test_partials_stacked_on_the_command_line_leave_the_run_name() -> None:
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"),
            "--config", str(REPO_CONFIGS / "trainer" / "debug.yaml")]
    assert run_folder(args) == str(Path("runs") / "quickstart")


ROOTED = "config: {base}\ntrainer.default_root_dir: {root}\n"


@pytest.mark.parametrize("case", ["shipped", "partials", "in_a_file", "in_its_base",
                                  "flag_after", "file_after_flag", "null"])
def test_the_fast_check_finds_the_run_folder_the_cli_does(case: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``synlm.runtime.inputs.run_root`` (read before torch loads, for ``--ckpt_path
    best|last``) agrees with the folder the CLI sets: the flag or file that sets
    ``trainer.default_root_dir`` last wins, a base's setting before its file's."""
    from synlm.runtime.inputs import run_root

    monkeypatch.chdir(tmp_path)
    Path("rooted.yaml").write_text(ROOTED.format(base=REPO_CONFIGS / "quickstart.yaml",
                                                 root="from_file"))
    Path("child.yaml").write_text("config: rooted.yaml\ntrainer.max_epochs: 1\n")
    Path("unset.yaml").write_text(ROOTED.format(base="rooted.yaml", root="null"))
    args = {
        "shipped": ["--config", "quickstart.yaml"],
        "partials": ["--config", "quickstart.yaml", "--config", "trainer/debug.yaml"],
        "in_a_file": ["--config", "rooted.yaml"],
        "in_its_base": ["--config", "child.yaml"],
        "flag_after": ["--config", "child.yaml", "--trainer.default_root_dir", "from_flag"],
        "file_after_flag": ["--trainer.default_root_dir=from_flag", "--config", "rooted.yaml"],
        "null": ["--config", "unset.yaml"],
    }[case]
    cli_args = [a if a != "quickstart.yaml" else str(REPO_CONFIGS / a) for a in args]
    cli_args = [a if a != "trainer/debug.yaml" else str(REPO_CONFIGS / a) for a in cli_args]
    assert run_root(args) == Path(run_folder(["fit", *cli_args]))


@pytest.mark.parametrize("args", [["--config", "quickstart.yaml", "--trainer", "trainer.yaml"],
                                  ["--config", "trainer:\n  default_root_dir: x\n"]])
def test_the_fast_check_leaves_to_lightning_what_only_it_reads(args: list[str]) -> None:
    """A whole ``--trainer`` block or a config given inline: no folder is guessed (the CLI
    checks ``--ckpt_path best|last`` once it has parsed them)."""
    from synlm.runtime.inputs import run_root

    assert run_root(args) is None


# --- a base named wrong: one line naming the file, its line and what is expected --------

BASE = "model:\n  heads: []\ntrainer:\n  max_epochs: 2\n"
#: (the config's text, how the line ``synlm fit --config bad.yaml`` says begins, after
#: "error: " and the folder)
BAD_BASES = [
    ("config: nope.yaml\n", "bad.yaml:1: config: no file nope.yaml (the base config, "
                             "relative to {dir})"),
    ("config: bsae.yaml\n", "bad.yaml:1: config: no file bsae.yaml (the base config, "
                             "relative to {dir}); did you mean base.yaml?"),
    ("config: [base.yaml, other.yaml]\n",
     "bad.yaml:1: config: expected the file name of one base config (relative to {dir}), "
     "got ['base.yaml', 'other.yaml']"),
    ("trainer.max_epochs: 3\nconfig: base.yaml\n",
     "bad.yaml:2: config: put it first (the base it names would override the keys above it)"),
    ("config: bad.yaml\n", "bad.yaml:1: config: the bases loop (bad.yaml -> bad.yaml)"),
]


@pytest.mark.parametrize(("text", "said"), BAD_BASES,
                         ids=["missing", "misspelt", "list", "not-first", "loop"])
def test_a_bad_base_is_one_line(text: str, said: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "bad.yaml").write_text(text)
    assert run_cli(["fit", "--config", str(tmp_path / "bad.yaml"), "--print_config"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"synlm fit: error: {tmp_path}/{said.format(dir=tmp_path)}"), line


def write_fixtures(names: list[str]) -> None:
    """Record how ``names`` (all configs when empty) resolve now."""
    for name in names or CONFIGS:
        name = str(Path(name)).removeprefix("configs/")
        target = FIXTURES / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(resolve(name))
        print(f"wrote {target}")


if __name__ == "__main__":
    write_fixtures(sys.argv[1:])
