"""Errors in what a user set, as one line each. ``SettingError`` carries the parameter's
name, the value and what is expected, so that the ``synlm`` command can name the flag
(``--data.batch_size=0``) or the config file and line that set it; the checks below raise
it where a value is first taken (a constructor), before anything is built or written."""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Something a user gave that synlm cannot use, said in one line that names where it
    was given (a flag, a file and line); the ``synlm`` command prints it as it is."""


class SettingError(ValueError):
    """``name`` was set to ``value``; ``expected`` says what would do."""

    def __init__(self, name: str, value: Any, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name}={value}: expected {expected}")


def at_least(name: str, value: int | None, minimum: int = 1) -> None:
    """A whole number (a size, a count) of at least ``minimum``; None passes (unset)."""
    if value is not None and value < minimum:
        raise SettingError(name, value, f"a whole number >= {minimum}")


def probability(name: str, value: float, top: float = 1.0) -> None:
    """A dropout or mixing probability in ``[0, top)``."""
    if not 0 <= value < top:
        raise SettingError(name, value, f"a probability in [0, {top:g})")


def non_negative(name: str, value: float | None) -> None:
    """A weight, a threshold: zero or more; None passes (unset)."""
    if value is not None and value < 0:
        raise SettingError(name, value, "a number >= 0")
