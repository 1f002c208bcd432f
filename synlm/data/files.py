"""Data files on disk and on the network: where the data and cache folders are, fetching a
file checked against its checksum, reading a text file with errors that name file and line.

Light to import (no nltk, no torch): the benchmark readers and the commands' ``--help`` use
it; ``synlm.data.corpora`` builds the corpora on it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from synlm.errors import InputError, reading
from synlm.runtime.files import follow_umask

DATA_ENV = "SYNLM_DATA_DIR"
CACHE_ENV = "SYNLM_CACHE_DIR"

def env_dir(variable: str, fallback: str) -> Path:
    """``$variable`` if set, else ``fallback`` under the user cache (``~/.cache/synlm``)."""
    if os.environ.get(variable):
        return Path(os.environ[variable]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "synlm" / fallback


def default_data_dir() -> Path:
    """``$SYNLM_DATA_DIR`` if set, else ``~/.cache/synlm/data``."""
    return env_dir(DATA_ENV, "data")


def default_cache_dir() -> Path:
    """``$SYNLM_CACHE_DIR`` if set, else ``~/.cache/synlm``: vocabularies, encoded splits,
    annotations."""
    return env_dir(CACHE_ENV, "")


class CorpusError(InputError):
    """A corpus file is missing or malformed; the message names file and line."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_of(path: Path) -> str:
    """The file's git blob id: sha1 of ``blob <size>\\0`` plus its bytes (what ``git
    ls-tree`` lists), the checksum a repository gives for a file it did not publish."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def download(url: str, dest: Path, sha256: str | None = None,
             git_blob: str | None = None) -> Path:
    """Fetch ``url`` to ``dest`` through a temporary file, verifying its sha256 (or, where
    only that is known, its git blob id)."""
    if sha256 is None and git_blob is None:
        raise ValueError(f"{url}: no checksum to verify it against")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    follow_umask(fd)
    os.close(fd)
    try:
        try:
            urllib.request.urlretrieve(url, tmp)
        except OSError as err:  # URLError, HTTPError, connection errors
            raise CorpusError(f"could not fetch {url} ({getattr(err, 'reason', err)}); "
                              f"download it by hand to {dest}") from None
        kind, want = ("sha256", sha256) if sha256 else ("git blob", git_blob)
        got = sha256_of(Path(tmp)) if sha256 else git_blob_of(Path(tmp))
        if got != want:
            raise CorpusError(f"{url}: {kind} {got}, expected {want}")
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dest


def read_lines(path: Path) -> list[str]:
    """Read a UTF-8 text file; a bad byte or an empty file names the file and line, a
    missing one is a ``MissingFileError``."""
    with reading(path):
        data = path.read_bytes()
    if not data.strip():
        raise CorpusError(f"{path}: empty file, expected one sentence per line")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, raw in enumerate(lines, start=1):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise CorpusError(
                f"{path}:{number}: not UTF-8 (byte {raw[err.start]:#04x} at column "
                f"{err.start + 1}), expected UTF-8 text"
            ) from None
    return out


@dataclass(frozen=True)
class RemoteFile:
    """A corpus file: its name under the corpus folder, where to fetch it, and its sha256,
    or its git blob id where only that is published."""

    name: str
    url: str
    sha256: str | None = None
    git_blob: str | None = None

    def fetch(self, dest: Path) -> Path:
        return download(self.url, dest, self.sha256, self.git_blob)

    @property
    def checksum(self) -> str:
        return (self.sha256 or self.git_blob or "")[:12]


def truncated(path: Path) -> CorpusError:
    """The one-line error for a data file that ends early (an interrupted download)."""
    return CorpusError(f"{path}: truncated or damaged (an interrupted download?); delete it "
                       "and pass --download (download=True) to fetch it again")
