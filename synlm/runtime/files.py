"""Files as an ordinary ``open()`` makes them: synlm writes a file or folder whole or not at
all, through a temporary name and a rename, and ``tempfile`` makes those private (0600 files,
0700 folders) whatever the umask. ``follow_umask`` gives them the mode ``open()`` and
``mkdir`` would have (0644 and 0755 under the usual umask 022), so a colleague or a web
server can read what synlm wrote where the umask lets them."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


@contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """A folder written whole or not at all: the caller fills a temporary folder beside
    ``out``, which then gets the umask's modes (``follow_umask_tree``) and replaces ``out``
    (an existing one removed); an exception removes it and leaves ``out`` as it was."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield staging
        follow_umask_tree(staging)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
