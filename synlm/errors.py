"""synlm's exceptions, and the checks that raise them where a value is first taken.

Every exception synlm raises on purpose derives from ``SynLMError``::

    SynLMError                      anything synlm raises on purpose
    ├── InputError (ValueError)     something a user gave that synlm cannot use
    │   ├── SettingError            a parameter's value: its name, the value, what would do
    │   ├── MissingFileError        a file or folder a user named is not there
    │   │                           (also a FileNotFoundError: errors.reading)
    │   ├── CheckpointError         synlm.runtime.run_folders: a checkpoint missing or unreadable
    │   ├── CorpusError             synlm.data.corpora: a corpus file missing or malformed
    │   │   └── SuiteError          synlm.tse.syntaxgym: a test suite file
    │   ├── ReaderError             synlm.syntax.readers: a malformed treebank file
    │   ├── TreeFormatError         synlm.syntax.trees: a malformed bracketed tree
    │   ├── FormulaError            synlm.tse.formula: a malformed SyntaxGym prediction
    │   ├── AnnotateError           synlm.data.annotation: text that cannot be annotated
    │   └── PlotError               synlm.commands.plot: a run or metric that cannot be plotted
    └── RunError (RuntimeError)     a run that cannot go on, for a reason synlm names

    SynLMWarning (UserWarning)      anything synlm warns of on purpose
    └── KernelCheckWarning          synlm.kernels.self_check: a fused kernel failed its
        (RuntimeWarning)            check, the PyTorch loop used instead

Library functions raise these (a notebook catches them as ``SynLMError``, or as the
``ValueError`` or ``RuntimeError`` each also is); only the ``synlm`` command turns them into
one line, ``synlm <command>: error: ...`` (exit code 2). Any other exception is a bug, or a
problem synlm did not foresee, and keeps its traceback; ``SYNLM_TRACEBACK=1`` shows the
traceback of synlm's own errors too. A ``SynLMWarning`` is shown as Python shows a warning
(a notebook filters it by its category), and by the command as one line, ``synlm <command>:
warning: ...`` (``warnings_as_lines``), as the command's own warnings are.

``SettingError`` carries the parameter's name, the value and what is expected, so that the
command can name the flag (``--data.batch_size=0``) or the config file and line that set
it; the checks below raise it where a value is first taken (a constructor), before
anything is built or written.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Set to 1 to see the traceback of synlm's own errors too (the command prints one line).
TRACEBACK_ENV = "SYNLM_TRACEBACK"


class SynLMError(Exception):
    """The base of every exception synlm raises on purpose; its message is one line that
    says what went wrong and what would do."""


class InputError(SynLMError, ValueError):
    """Something a user gave that synlm cannot use, said in one line that names where it
    was given (a flag, a file and line); the ``synlm`` command prints it as it is."""


class SettingError(InputError):
    """``name`` was set to ``value``; ``expected`` says what would do."""

    def __init__(self, name: str, value: Any, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name}={value}: expected {expected}")


class MissingFileError(InputError, FileNotFoundError):
    """A file or folder a user named is not there (or cannot be read); also a
    ``FileNotFoundError``, for callers that catch that."""


class RunError(SynLMError, RuntimeError):
    """A run that cannot go on, for a reason synlm names in one line (a kernel that fails
    its self-check, a loss that is no longer finite)."""


class SynLMWarning(UserWarning):
    """A warning synlm gives on purpose: one line that says what it saw and what would do
    otherwise (a search held below its batch size, samples with no parse left out)."""


def not_utf8(where: str, data: bytes, err: UnicodeDecodeError,
             error: type[InputError] = InputError, expected: str = "UTF-8 text") -> InputError:
    """The one-line ``error`` for a file (``where``, its bytes ``data``) that is not UTF-8:
    the line and the byte where decoding ``err`` failed, and what was ``expected``."""
    line = data[:err.start].count(b"\n") + 1
    return error(f"{where}:{line}: not UTF-8 (byte {data[err.start]:#x}); expected {expected}")


def utf8_text(data: bytes, where: str, error: type[InputError] = InputError,
              expected: str = "UTF-8 text") -> str:
    """``data`` decoded as UTF-8, else ``not_utf8``'s one-line ``error`` naming ``where``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise not_utf8(where, data, err, error, expected) from None


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Around reading the file ``path`` a user named: a missing one is a one-line
    ``MissingFileError``, a folder or an unreadable one an ``InputError``, naming it (the
    ``OSError`` kept as the cause)."""
    with _user_file(path, "read"):
        yield


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Around writing the file ``path`` a user named (``--output``): one that cannot be
    written is a one-line ``InputError`` naming it (its cause kept)."""
    with _user_file(path, "write"):
        yield


@contextmanager
def _user_file(path: str | Path, verb: str) -> Iterator[None]:
    try:
        yield
    except SynLMError:
        raise
    except FileNotFoundError as err:
        if verb == "read":
            raise MissingFileError(f"{path}: no such file") from err
        raise InputError(f"{path}: cannot write it (no folder {Path(path).parent})") from err
    except IsADirectoryError as err:
        raise InputError(f"{path}: a folder, expected a file") from err
    except OSError as err:
        raise InputError(f"{path}: cannot {verb} it ({err.strerror or err})") from err


def show_traceback() -> bool:
    """Whether ``SYNLM_TRACEBACK`` asks for the traceback of synlm's own errors."""
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no")


def report(err: BaseException, prefix: str) -> int:
    """Say synlm's own error ``err`` for a command: one line ``{prefix}: {err}`` on stderr
    (``prefix``: ``synlm parse``, or ``synlm: error`` for the Lightning commands), after its
    traceback when ``SYNLM_TRACEBACK`` asks for it. Returns the exit code, 2."""
    if show_traceback():
        traceback.print_exception(type(err), err, err.__traceback__)
    print(f"{prefix}: {err}", file=sys.stderr)
    return 2


@contextmanager
def warnings_as_lines(prog: str) -> Iterator[None]:
    """Within it, each ``SynLMWarning`` shown as one line on stderr, ``{prog}: warning:
    {message}`` (the form of a command's own warnings), where Python shows the file and
    line of synlm that warned and its source line too; every other warning as before."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if issubclass(category, SynLMWarning):
            print(f"{prog}: warning: {message}", file=sys.stderr if file is None else file)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


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


def existing_file(flag: str, path: str | Path, what: str) -> None:
    """The file ``path`` that ``flag`` names is there: a missing one is a one-line
    ``MissingFileError`` saying ``what`` the flag takes, a folder an ``InputError``."""
    if Path(path).is_dir():
        raise InputError(f"{flag}: {path} is a folder; expected {what}")
    if not Path(path).is_file():
        raise MissingFileError(f"{flag}: no file {path} ({what})")


def model_folder(name: str) -> None:
    """A Hugging Face model's ``name`` that can only be a local folder (absolute, starting
    with ``.`` or ``~``, or with more than one ``/``) is one; a file never is. Hub names
    (``gpt2``, ``org/model``) pass."""
    path = Path(name).expanduser()
    if path.is_file():
        raise InputError(f"{name}: a file, expected a folder written by save_pretrained")
    if not path.exists() and (path.is_absolute() or name.startswith((".", "~"))
                              or name.count("/") > 1):
        raise MissingFileError(f"{name}: no such folder; expected a folder written by "
                               f"save_pretrained or a Hugging Face hub name")
