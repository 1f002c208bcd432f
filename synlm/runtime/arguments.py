"""The argument parser of synlm's own commands (``parse``, ``generate``,
``evaluate-generation``, ``evaluate-syntax``, ``annotate``, ``plot``): one flag style, both
spellings, defaults in ``--help``, errors in one line.

- Every long option is accepted with dashes and with underscores (``--max-length`` and
  ``--max_length``, ``--ckpt_path`` and ``--ckpt-path``), as LightningCLI's commands spell
  theirs with underscores; ``--help`` lists the spelling the command declares.
- ``--help`` shows each option's default (where it has one).
- A wrong flag or value is one line naming it, with the closest option when there is one;
  a prefix of an option is not taken for it.
"""

from __future__ import annotations

import argparse
import copy
import difflib
from typing import Any, NoReturn

from synlm.runtime.lightning_internals import option_strings


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in the help (where there is one to say: not None, an empty list or a flag's
    False); each option under the spellings its command declared."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, [], ()):
            return action.help
        return super()._get_help_string(action)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        declared = getattr(action, "declared", None)
        if declared:
            action = copy.copy(action)
            action.option_strings = list(declared)
        return super()._format_action_invocation(action)


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the conventions above."""

    def __init__(self, prog: str, description: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs.setdefault("allow_abbrev", False)  # a prefix is a typo, not a flag
        super().__init__(prog=prog, description=description, **kwargs)

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        taken = set(option_strings(self))
        other = tuple(
            alias for name in names if name.startswith("--")
            for alias in ("--" + name[2:].replace("-", "_"), "--" + name[2:].replace("_", "-"))
            if alias not in names and alias not in taken)
        action = super().add_argument(*names, *dict.fromkeys(other), **kwargs)
        action.declared = names  # type: ignore[attr-defined]
        return action

    def error(self, message: str) -> NoReturn:
        hint = ""
        if message.startswith("unrecognized arguments: "):
            flag = message.split(": ", 1)[1].split()[0].split("=")[0]
            close = difflib.get_close_matches(flag, option_strings(self), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
        self.exit(2, f"{self.prog}: error: {message}{hint} ({self.prog} --help lists the "
                     "options)\n")


def memory_budget(text: str) -> float:
    """A ``--max-memory-mb`` value: megabytes, more than 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 MB, got {text}")
    return value


def add_memory_budget(group: Any) -> None:
    """``--max-memory-mb`` on a command that searches a transition LM's trees."""
    group.add_argument("--max-memory-mb", type=memory_budget, default=None, metavar="MB",
                       help="the memory a search may hold besides the model: sentences are "
                       "searched in batches that fit it, a sentence that cannot is refused "
                       "naming the size that fits; unset: the checkpoint's (2048)")
