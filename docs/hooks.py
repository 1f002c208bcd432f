"""mkdocs hook (``hooks:`` in ``mkdocs.yml``): a line ``<!-- synlm: ARGS -->`` in a page
becomes what ``synlm ARGS`` prints (``synlm parse --help``, ``synlm ls``), in a code block
indented as the marker is (so it can sit in an admonition), computed when the site is built,
so the CLI reference cannot go stale.

The commands run in this process through ``synlm.cli.main``, at a fixed width of
``COLUMNS`` characters. An output longer than ``MAX_LINES`` (LightningCLI's ``fit --help``
lists every trainer, model and data option) keeps its usage, description and first
``options:`` section, and says how many lines were left out. A command that fails stops the
build.

The docstrings rendered by mkdocstrings are reST-flavoured: a paragraph ending in ``::``
introduces the literal block after it, which Markdown shows as code already; the hook
writes that ``::`` as the single colon reST prints.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import sys
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- synlm: (?P<args>[^>]+?) -->$", re.MULTILINE)
COLUMNS = 100
MAX_LINES = 160
LITERAL_BLOCK_COLONS = re.compile(r"(?<=\S)::</p>")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace every marker of the page by its command's output."""
    return MARKER.sub(lambda m: code_block(m["args"], m["indent"]), markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """reST's ``text::`` before a literal block as ``text:``."""
    return LITERAL_BLOCK_COLONS.sub(":</p>", html)


def code_block(args: str, indent: str) -> str:
    """``$ synlm ARGS`` and its (abridged) output as a fenced text block, each line
    prefixed by ``indent``."""
    lines = ["```text", f"$ synlm {args}", *abridge(run_synlm(args), args).splitlines(), "```"]
    return "\n".join(indent + line for line in lines)


@functools.cache
def run_synlm(args: str) -> str:
    """What ``synlm ARGS`` prints on stdout; ``PluginError`` if it exits non-zero."""
    from synlm.cli import main

    out, argv, columns = io.StringIO(), sys.argv, os.environ.get("COLUMNS")
    sys.argv = ["synlm"]  # argparse names the program after argv[0] (LightningCLI's parser)
    os.environ["COLUMNS"] = str(COLUMNS)  # argparse and rich wrap at this width
    try:
        with contextlib.redirect_stdout(out):
            try:
                code = main(shlex.split(args))
            except SystemExit as exit_:  # --help exits
                code = exit_.code
    finally:
        sys.argv = argv
        if columns is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = columns
    if code not in (0, None):
        raise PluginError(f"docs/hooks.py: `synlm {args}` exited with status {code}")
    return out.getvalue()


def abridge(text: str, args: str) -> str:
    """``text`` if at most ``MAX_LINES`` lines, else up to the end of its ``options:``
    section and a line naming how many lines were left out."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= MAX_LINES:
        return text
    if "options:\n" not in lines:
        raise PluginError(f"docs/hooks.py: `synlm {args}` printed {len(lines)} lines and no "
                          "options: section to keep")
    start = lines.index("options:\n")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i][0].isspace()), len(lines))
    return "".join(lines[:end]) + f"[... {len(lines) - end} more lines: synlm {args}]\n"
