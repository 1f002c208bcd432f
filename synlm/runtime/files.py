"""Files as an ordinary ``open()`` makes them: synlm writes a file or folder whole or not at
all, through a temporary name and a rename, and ``tempfile`` makes those private (0600 files,
0700 folders) whatever the umask. ``follow_umask`` gives them the mode ``open()`` and
``mkdir`` would have (0644 and 0755 under the usual umask 022), so a colleague or a web
server can read what synlm wrote where the umask lets them.

A folder synlm writes whole (``staged_folder``: ``convert``'s run folder, ``export-hf``'s
export) holds a marker, ``.synlm-output``: the command that wrote it and the files it wrote.
``--force`` replaces such a folder only (``check_replaceable``): a folder with any other
file is refused in one line and nothing is deleted."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from synlm.errors import InputError

#: The file in each folder ``staged_folder`` writes: ``{"command": ..., "files": [...]}``.
MARKER = ".synlm-output"


def current_umask() -> int:
    """This process's umask (read from ``/proc/self/status`` where there is one, so that no
    other thread sees it change; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | Path | int) -> None:
    """Give ``path`` (a file, a folder, or an open file's descriptor) the mode ``open()`` or
    ``mkdir`` would give it under the umask: 0o666 or 0o777 less the umask."""
    is_dir = os.path.isdir(path) if not isinstance(path, int) else False
    mode = (0o777 if is_dir else 0o666) & ~current_umask()
    if isinstance(path, int):
        os.fchmod(path, mode)
    else:
        os.chmod(path, mode)


def follow_umask_tree(root: str | Path) -> None:
    """``follow_umask`` on ``root`` and everything under it (a folder another library wrote
    privately: ``safetensors`` makes its files 0600)."""
    root = Path(root)
    for path in [root, *root.rglob("*")]:
        follow_umask(path)


def _files(folder: Path) -> list[str]:
    """The files under ``folder``, as paths relative to it, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def foreign_files(folder: Path) -> tuple[str, list[str]]:
    """Who wrote ``folder`` by its marker (``synlm`` where none says), and the files in it
    that the marker does not list (every file where there is no marker)."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        command, listed = str(marker["command"]), set(marker["files"])
    except (OSError, ValueError, TypeError, KeyError):
        command, listed = "synlm", set()
    return command, [name for name in _files(folder) if name not in listed | {MARKER}]


def check_replaceable(out: Path, force: bool, flag: str = "--out") -> None:
    """``out`` may be written by ``staged_folder``: a new or empty folder, or with ``force``
    one that holds only what synlm wrote there (its marker's files); else a one-line
    ``InputError`` naming ``flag``."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag}: {out} is a file; expected a new or empty folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise InputError(f"{flag}: {out} is not empty; name a new folder, or pass --force to "
                         "replace what synlm wrote there")
    command, foreign = foreign_files(out)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                          else "")
        raise InputError(f"{out} holds files {command} did not write ({shown}); remove them "
                         f"or choose another {flag}")


@contextmanager
def staged_folder(out: str | Path, command: str) -> Iterator[Path]:
    """A folder written whole or not at all: the caller fills a temporary folder beside
    ``out``, which then gets its marker (``command`` and the files written), the umask's
    modes (``follow_umask_tree``) and replaces ``out`` (an existing one removed, if it
    holds only what synlm wrote: ``check_replaceable``); an exception removes it and leaves
    ``out`` as it was."""
    out = Path(out)
    check_replaceable(out, force=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield staging
        (staging / MARKER).write_text(json.dumps({"command": command,
                                                  "files": _files(staging)}, indent=1) + "\n",
                                      encoding="utf-8")
        follow_umask_tree(staging)
        check_replaceable(out, force=True)  # a file put there meanwhile is kept too
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
