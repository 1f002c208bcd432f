"""The docs cannot name a flag a command does not have: every ``synlm COMMAND ... --flag``
in README.md and docs/ (in code blocks, a command line continued over lines ending in ``\\``,
and in inline code) names a flag of that command's parser; and the command table of
docs/cli.md lists every command ``synlm`` has."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from synlm.commands import annotate, convert, cp, evaluate_syntax, export_hf, generate, parse, plot
from synlm.runtime.lightning_internals import option_strings
from synlm.runtime.usage import COMMANDS, FULL_HELP

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: synlm's own commands, each by the function that builds its parser.
PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "parse": parse.build_parser,
    "generate": generate.build_parser,
    "evaluate-generation": generate.build_evaluate_parser,
    "evaluate-syntax": evaluate_syntax.build_parser,
    "annotate": annotate.build_parser,
    "plot": plot.build_parser,
    "export-hf": export_hf.build_parser,
    "convert": convert.build_parser,
    "cp": cp.build_parser,
    "ls": lambda: argparse.ArgumentParser(prog="synlm ls"),  # no options
}

#: LightningCLI's commands: the first dotted part of each flag they take (``--trainer.*``,
#: ``--model.*``), besides ``--help`` and ``--help-all``; the full parser is not built.
LIGHTNING_KEYS = {"config", "print_config", "ckpt_path", "weights_only", "trainer", "model",
                  "data", "optimizer", "lr_scheduler", "seed_everything", "tensorboard"}
LIGHTNING = {"fit": LIGHTNING_KEYS, "validate": LIGHTNING_KEYS | {"verbose"},
             "test": LIGHTNING_KEYS | {"verbose"},
             "predict": LIGHTNING_KEYS | {"return_predictions"}}

FENCE = re.compile(r"^\s*(```|~~~)")
#: ``synlm COMMAND`` (not ``synlm.cli``, ``runs/synlm``, ``SYNLM_DATA_DIR``).
MENTION = re.compile(r"(?<![\w./-])synlm\s+(" + "|".join(
    sorted(map(re.escape, COMMANDS), key=len, reverse=True)) + r")(?![\w-])")
#: Where a command's arguments end: a pipe, ``&&``, ``;``, a shell comment, a line's end.
END = re.compile(r"\n|\|\|?|&&|;|(?<!\S)#")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w.-]*")
INLINE = re.compile(r"(`+)((?:(?!\n\s*\n).)+?)\1", re.DOTALL)


@dataclass(frozen=True)
class Mention:
    """A flag the docs give a command: where (file and line), the command, the words after
    the command and the flag (``--structure``, without a value)."""

    where: str
    command: str
    words: tuple[str, ...]
    flag: str


def _mentions_in(text: str, where: Callable[[int], str], start: int = 0) -> Iterator[Mention]:
    """The flags of each ``synlm COMMAND`` in the shell text ``text`` (a ``\\`` at a line's
    end continues the line), which starts at offset ``start`` of the page; ``where(offset)``
    names a page's offset by file and line."""
    flat = text.replace("\\\n", "  ")  # the same offsets, the continued lines as one
    for match in MENTION.finditer(flat):
        end = END.search(flat, match.end())
        rest = flat[match.end():end.start() if end else len(flat)]
        words = tuple(rest.split())
        for flag in FLAG.finditer(rest):
            yield Mention(where(start + match.end() + flag.start()), match[1], words,
                          flag[0].split("=")[0].rstrip("."))


def mentions(text: str, name: str) -> list[Mention]:
    """Every flag given to a ``synlm`` command in the Markdown ``text`` of the file ``name``:
    in fenced code blocks (a command line per line, continued by ``\\``) and in inline
    code (which may wrap onto the next line)."""

    def where(offset: int) -> str:
        return f"{name}:{text.count(chr(10), 0, offset) + 1}"

    lines = text.splitlines(keepends=True)
    prose, code, fenced = [], [], False
    for line in lines:  # each line in one of the two, blanked in the other (same offsets)
        blank = re.sub(r"[^\n]", " ", line)
        if FENCE.match(line):
            fenced = not fenced
            line = blank
        code.append(line if fenced else blank)
        prose.append(blank if fenced else line)
    found = list(_mentions_in("".join(code), where))
    for span in INLINE.finditer("".join(prose)):
        inline = span[2].replace("\n", " ")  # inline code: a line break is a space
        found.extend(_mentions_in(inline, where, span.start(2)))
    return found


def documented() -> list[Mention]:
    return [m for page in PAGES
            for m in mentions(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]


def _lm_eval_parsers() -> dict[str, argparse.ArgumentParser]:
    """lm-eval's subcommands (``run``, ``ls``, ``validate``) as its ``HarnessCLI`` adds
    them; ``synlm lm-eval`` without one is ``run``."""
    harness = pytest.importorskip("lm_eval._cli.harness")
    subparsers = argparse.ArgumentParser(prog="lm-eval").add_subparsers()
    for subcommand in (harness.Run, harness.List, harness.Validate):
        subcommand.create(subparsers)
    return dict(subparsers.choices)


def missing(found: list[Mention], command: str) -> list[str]:
    """``FILE:LINE: synlm COMMAND --flag`` for each of ``found``'s flags of ``command`` that
    its parser does not take."""
    mentioned = [m for m in found if m.command == command]
    if command in LIGHTNING:
        return [f"{m.where}: synlm {command} {m.flag}" for m in mentioned
                if m.flag not in ("--help", FULL_HELP)
                and m.flag[2:].split(".")[0] not in LIGHTNING[command]]
    if command == "lm-eval":
        parsers = _lm_eval_parsers() if mentioned else {}
        takes = {m: set(option_strings(parsers[m.words[0] if m.words and m.words[0] in parsers
                                               else "run"])) for m in mentioned}
    else:
        flags = set(option_strings(PARSERS[command]()))
        takes = {m: flags for m in mentioned}
    return [f"{m.where}: synlm {command} {m.flag}" for m in mentioned if m.flag not in takes[m]]


def test_mentions_are_found_where_the_docs_give_them() -> None:
    text = ("Run `synlm parse --ckpt_path X\n--structure syd` or `synlm.cli`'s `--nothing`.\n"
            "\n```bash\nsynlm fit --config a.yaml \\\n    --trainer.max_epochs=3 | tee log  "
            "# --not-a-flag\nSYNLM_DATA_DIR=d synlm test --bogus && synlm ls\n```\n"
            "`synlm parse --distances lm|syd`\n")
    found = [(m.where, m.command, m.flag) for m in mentions(text, "page.md")]
    assert sorted(found) == [
        ("page.md:1", "parse", "--ckpt_path"), ("page.md:2", "parse", "--structure"),
        ("page.md:5", "fit", "--config"), ("page.md:6", "fit", "--trainer.max_epochs"),
        ("page.md:7", "test", "--bogus"), ("page.md:9", "parse", "--distances")]
    found_ = mentions(text, "page.md")
    assert missing(found_, "test") == ["page.md:7: synlm test --bogus"]
    assert missing(found_, "parse") == ["page.md:9: synlm parse --distances"]
    assert missing(found_, "fit") == []


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_documented_flag_exists(command: str) -> None:
    """Each flag README.md and docs/ give ``synlm COMMAND`` is one its parser takes (for
    ``fit``, ``validate``, ``test`` and ``predict``: one of LightningCLI's top-level keys;
    for ``lm-eval``: lm-eval's)."""
    wrong = missing(documented(), command)
    assert not wrong, "flags the command does not take:\n" + "\n".join(wrong)


def test_every_command_has_a_parser_here() -> None:
    assert set(COMMANDS) == set(PARSERS) | set(LIGHTNING) | {"lm-eval"}


def test_the_cli_page_lists_every_command() -> None:
    """docs/cli.md's table of commands has a row naming each of ``synlm``'s commands
    (``[`synlm validate`, `test`, `predict`]`` names three), and names no other."""
    rows = [line for line in (ROOT / "docs" / "cli.md").read_text().splitlines()
            if line.startswith("| [`synlm ")]
    listed = [name for row in rows
              for name in re.findall(r"`(?:synlm )?([a-z-]+)`", row.split(" | ")[0])]
    assert sorted(listed) == sorted(COMMANDS)
