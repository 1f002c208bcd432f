"""``synlm cp``: a shipped config as one editable file, its chain of bases flattened.

    synlm cp onlstm_syd.yaml my_onlstm_syd.yaml
    synlm cp ablations/onlstm_syd_hidden.yaml experiments/   # experiments/onlstm_syd_hidden.yaml

A shipped config is often a delta on its base (``config: onlstm.yaml``, then the keys that
change); the copy holds every value the chain sets, in one file with no ``config:`` key,
which ``synlm fit --config`` resolves exactly as the shipped config. NAME is a shipped
config's name (``synlm ls``) or any config file. An existing DEST is kept unless
``--force``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from synlm.catalog import REPO_CONFIGS
from synlm.errors import InputError, SynLMError, report
from synlm.runtime import usage
from synlm.runtime.arguments import CommandParser
from synlm.runtime.config_chain import flattened
from synlm.runtime.files import follow_umask


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser("synlm cp", __doc__.split("\n\n")[0])
    p.add_argument("name", metavar="NAME", help="a shipped config (synlm ls lists them, e.g. "
                   "quickstart.yaml, ablations/onlstm_syd_hidden.yaml) or a config file")
    p.add_argument("dest", metavar="DEST", help="the file to write, or a folder to write it "
                   "in under the config's own name")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    return p


def destination(source: Path, dest: str) -> Path:
    """The file ``dest`` names: itself, or ``dest/<source's name>`` for a folder (one
    that exists, or a name ending in ``/``)."""
    path = Path(dest)
    return path / source.name if path.is_dir() or dest.endswith("/") else path


def shipped_name(path: Path) -> str:
    """A shipped config by its name (``onlstm.yaml``), any other file by its path."""
    try:
        return str(path.resolve().relative_to(REPO_CONFIGS.resolve()))
    except ValueError:
        return str(path)


def copy(name: str, dest: str, force: bool = False) -> Path:
    """Write config ``name`` flattened to ``dest`` (``destination``); the file written."""
    args = usage.resolve_configs(["--config", name])
    problem = usage.config_error(args)
    if problem:
        raise InputError(problem.removeprefix("--config: "))
    source = Path(args[-1])
    target = destination(source, dest)
    if target.exists() and not force:
        raise InputError(f"{target}: exists; --force replaces it")
    if target.resolve() == source.resolve():
        raise InputError(f"{target}: is the config itself; name another file")
    files = [shipped_name(path) for path, _ in usage.with_bases(source)]
    header = (f"# synlm cp {name}: {' <- '.join(reversed(files))}, flattened into one file\n"
              f"#   synlm fit --config {target}\n")
    text = header + yaml.safe_dump(flattened(source), sort_keys=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    follow_umask(partial)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synlm cp`` (``argv`` without the word ``cp``): writes the file and
    prints one JSON line (config, output); errors are one line on stderr, exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        target = copy(args.name, args.dest, args.force)
    except SynLMError as err:
        return report(err, "synlm cp")
    print(json.dumps({"config": args.name, "output": str(target)}))
    return 0
