"""Nothing a command's flags name fails after the work: every output goes in a folder that
takes a file, every input text file is there, UTF-8 and not empty, each checked before torch
is imported (one line on stderr, exit code 2); and ``--force`` replaces only a folder that
holds what synlm wrote there (its ``.synlm-output``), anything else is refused and kept."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from test_fast_checks import synlm

from synlm.errors import InputError
from synlm.runtime.files import MARKER, check_replaceable, staged_folder
from synlm.runtime.inputs import check_inputs


def _takes_a_file(folder: Path) -> bool:
    try:
        handle, name = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(handle)
    os.unlink(name)
    return True


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a stand-in checkpoint, text files of one and two lines, an empty and a
    non-UTF-8 one, tree files with an unclosed bracket and a byte that is not UTF-8, and a
    thesis in a folder synlm did not write."""
    root = tmp_path_factory.mktemp("checks")
    (root / "model.ckpt").write_bytes(b"")
    (root / "s.txt").write_text("The cat sleeps .\n")
    (root / "blank.txt").write_text("\n  \n")
    (root / "two.txt").write_text("The cat sleeps .\nThe dog barks .")
    (root / "latin1.txt").write_bytes("The cat sleeps .\nLa b\xeate dort .\n".encode("latin-1"))
    (root / "cut.mrg").write_bytes(b"(S (NN cat))\n(S (NP (DT the) (NN cat))\n")
    (root / "bytes.mrg").write_bytes(b"(S (NN cat))\n(S (NN caf\xff))\n")
    (root / "thesis").mkdir()
    (root / "thesis" / "thesis.tex").write_text("\\chapter{Results}\n")
    return root


@pytest.fixture(scope="module")
def read_only(here: Path) -> Path:
    """A folder no file can be made in: a 0555 folder, or for root (who writes there all
    the same) ``/sys``."""
    folder = here / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    if _takes_a_file(folder):
        folder = Path("/sys")
        if not folder.is_dir() or _takes_a_file(folder):
            pytest.skip("no folder here refuses a new file")
    return folder


#: (a command's arguments, with ``RO`` for the read-only folder, and the flag named)
OUTPUTS = [
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--output", "RO/r.jsonl"], "--output"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--report", "RO/report"], "--report"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--regions", "RO/regions.tsv"],
     "--regions"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--sentences", "s.txt", "--surprisals",
      "RO/s.tsv"], "--surprisals"),
    (["parse", "--ckpt_path", "model.ckpt", "--input", "s.txt", "--output", "RO/trees.txt"],
     "--output"),
    (["parse", "--ckpt_path", "model.ckpt", "--input", "s.txt", "--format", "svg", "--output",
      "RO"], "--output"),
    (["generate", "--ckpt_path", "model.ckpt", "--output", "RO/g.jsonl"], "--output"),
    (["export-hf", "--ckpt_path", "model.ckpt", "--out", "RO/export"], "--out"),
    (["convert", "m.pt", "--from", "rnng-pytorch", "--out", "RO/run"], "--out"),
    (["plot", "run", "--output", "RO/curves.png"], "--output"),
    (["annotate", "--input", "s.txt", "--output", "RO/s.conllu"], "--output"),
    (["cp", "quickstart.yaml", "RO"], "DEST"),
    (["cp", "quickstart.yaml", "RO/new/q.yaml"], "DEST"),
]


@pytest.mark.parametrize(("args", "flag"), OUTPUTS, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_an_output_that_cannot_be_written_is_one_line_before_torch(
        here: Path, read_only: Path, args: list[str], flag: str) -> None:
    args = [arg.replace("RO", str(read_only)) for arg in args]
    code, torch, err, _ = synlm(args, here)
    assert (code, torch) == (2, False), err
    assert len(err) == 1 and f"{flag}: cannot write in {read_only}" in err[0], err


#: (a command's arguments, the one line's start after the command's name)
INPUTS = [
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--sentences", "blank.txt",
      "--surprisals", "s.tsv"], "--sentences: blank.txt: empty file"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--sentences", "latin1.txt",
      "--surprisals", "s.tsv"], "--sentences: latin1.txt:2: not UTF-8 (byte 0xea at column 5)"),
    (["parse", "--ckpt_path", "model.ckpt", "--input", "blank.txt"], "--input: blank.txt: empty"),
    (["parse", "--ckpt_path", "model.ckpt", "--input", "latin1.txt"],
     "--input: latin1.txt:2: not UTF-8"),
    (["generate", "--ckpt_path", "model.ckpt", "--contexts", "latin1.txt"],
     "--contexts: latin1.txt:2: not UTF-8"),
    (["generate", "--ckpt_path", "model.ckpt", "--contexts", "s.txt", "--references",
      "blank.txt"], "--references: blank.txt: empty"),
    (["generate", "--ckpt_path", "model.ckpt", "--contexts", "s.txt", "--references",
      "two.txt"], "--references: two.txt has 2 lines, --contexts s.txt 1; give one "
     "reference a context"),
    (["generate", "--ckpt_path", "model.ckpt", "--stories", "blank.txt"],
     "--stories: blank.txt: empty"),
    (["evaluate-generation", "s.txt", "--rlm-heldout", "latin1.txt"],
     "--rlm-heldout: latin1.txt:2: not UTF-8"),
    (["annotate", "--input", "latin1.txt", "--parser", "conllu", "--conllu", "s.txt"],
     "--input: latin1.txt:2: not UTF-8"),
    (["annotate", "--input", "s.txt", "--parser", "conllu", "--conllu", "blank.txt"],
     "--conllu: blank.txt: empty"),
    (["evaluate-syntax", "--ckpt_path", "model.ckpt", "--output", "s.txt/r.jsonl"],
     "--output: s.txt is a file, not a folder"),
    (["parse", "--ckpt_path", "model.ckpt", "--treebank", "cut.mrg"],
     "--treebank: cut.mrg:2: expected ')' to close this bracket"),
    (["parse", "--ckpt_path", "model.ckpt", "--treebank", "bytes.mrg"],
     "--treebank: bytes.mrg:2: not UTF-8 (byte 0xff)"),
    (["parse", "--baseline", "balanced", "--treebank", "blank.txt"],
     "--treebank: blank.txt: nothing in it"),
]


@pytest.mark.parametrize(("args", "said"), INPUTS, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_an_input_file_is_read_before_torch(here: Path, args: list[str], said: str) -> None:
    code, torch, err, _ = synlm(args, here)
    assert (code, torch) == (2, False), err
    assert len(err) == 1 and err[0].startswith(f"synlm {args[0]}: {said}"), err


def test_the_checks_pass_what_can_be_written_and_leave_nothing(tmp_path: Path) -> None:
    """A new file, a folder to make (several levels down) and standard output pass; the
    file made to check a folder is removed."""
    (tmp_path / "s.txt").write_text("The cat sleeps .\n")
    check_inputs("evaluate-syntax", ["--sentences", str(tmp_path / "s.txt"), "--surprisals",
                                     str(tmp_path / "s.tsv"), "--report",
                                     str(tmp_path / "a" / "b" / "report")])
    check_inputs("cp", ["quickstart.yaml", str(tmp_path), "--force"])
    check_inputs("parse", ["--input", "-", "--output", "-"])
    assert [p.name for p in tmp_path.iterdir()] == ["s.txt"]


def test_force_refuses_a_folder_synlm_did_not_write_before_torch(here: Path) -> None:
    for args in (["convert", "m.pt", "--from", "rnng-pytorch", "--out", "thesis", "--force"],
                 ["export-hf", "--ckpt_path", "model.ckpt", "--out", "thesis", "--force"]):
        code, torch, err, _ = synlm(args, here)
        assert (code, torch) == (2, False), err
        assert err == [f"synlm {args[0]}: thesis holds files synlm did not write (thesis.tex); "
                       "remove them or choose another --out"]
    assert (here / "thesis" / "thesis.tex").read_text() == "\\chapter{Results}\n"


def test_a_staged_folder_names_what_it_wrote_and_replaces_only_that(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with staged_folder(out, "synlm convert") as staging:
        (staging / "checkpoints").mkdir()
        (staging / "checkpoints" / "last.ckpt").write_text("1")
        (staging / "config.yaml").write_text("a: 1\n")
    assert json.loads((out / MARKER).read_text()) == {
        "command": "synlm convert", "files": ["checkpoints/last.ckpt", "config.yaml"]}
    check_replaceable(out, force=True)
    with pytest.raises(InputError, match="is not empty; name a new folder, or pass --force"):
        check_replaceable(out, force=False)
    with staged_folder(out, "synlm convert") as staging:
        (staging / "config.yaml").write_text("a: 2\n")
    assert (out / "config.yaml").read_text() == "a: 2\n"
    assert not (out / "checkpoints").exists()
    (out / "thesis.tex").write_text("mine")  # put in a folder synlm wrote: kept
    refused = r"run holds files synlm convert did not write \(thesis.tex\); remove them"
    with pytest.raises(InputError, match=refused), staged_folder(out, "synlm convert") as staging:
        (staging / "config.yaml").write_text("a: 3\n")
    assert (out / "thesis.tex").read_text() == "mine"
    assert (out / "config.yaml").read_text() == "a: 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging left
