"""TreeSamples: after each validation of a fit, the first validation sentences' induced
trees beside gold, as files in the run folder, a wandb table and TensorBoard text and
images; training numbers are unchanged by it."""

from __future__ import annotations

import csv
import re
import struct
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import wandb
from tensorboardX.proto import event_pb2

from conftest import TINY_OVERRIDES, run_cli
from synlm.callbacks import TreeSamples
from synlm.callbacks.trees import WANDB_COLUMNS, WANDB_KEY
from synlm.catalog import REPO_CONFIGS
from synlm.data.synthetic import SyntheticTreebank
from synlm.metrics.parsing import evaluation_tree

#: The quickstart (which has TreeSamples) at a tiny size: three validations, at steps 2, 4, 6.
TINY_QUICKSTART = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY_OVERRIDES,
                   "--model.backbone.init_args.input_size=16",
                   "--model.backbone.init_args.hidden_size=24",
                   "--model.backbone.init_args.chunk_size=4",
                   "--trainer.max_steps=6", "--trainer.val_check_interval=2",
                   "--trainer.limit_val_batches=2", "--trainer.log_every_n_steps=1"]
N = 5  # more than one validation batch (4 sentences) holds


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The tiny quickstart with TreeSamples(n=N), wandb (offline) and TensorBoard: its run
    folder, and what it logged to wandb (``Run.log``'s data, call by call)."""
    root = tmp_path_factory.mktemp("trees")
    logged: list[dict[str, Any]] = []
    log = wandb.sdk.wandb_run.Run.log

    def recording(run: Any, data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        logged.append(dict(data))
        return log(run, data, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wandb.sdk.wandb_run.Run, "log", recording)
        patch.setenv("WANDB_MODE", "offline")
        assert run_cli([*TINY_QUICKSTART, f"--trainer.callbacks.n={N}",
                        "--trainer.logger=WandbLogger",
                        f"--trainer.logger.init_args.save_dir={root}",
                        "--tensorboard=true", f"--data.cache_dir={root / 'cache'}",
                        f"--trainer.default_root_dir={root}"]) == 0
        wandb.finish()
    return root / "version_0", logged


def evaluation_words(n: int) -> list[list[str]]:
    """The first ``n`` validation sentences of the tiny corpus, punctuation removed."""
    corpus = SyntheticTreebank(n_train=300, n_valid=60, n_test=60)
    return [evaluation_tree(s.tree).leaves() for s in corpus.sentences("valid")[:n]]


def drawn_words(block: str) -> tuple[list[str], list[str], list[str]]:
    """One sentence's block of a trees file: the words of its header line, and those under
    the predicted and the gold drawings (a drawing's last line holds its leaves)."""
    header, drawings = block.split("\n", 1)
    predicted, gold = drawings.removeprefix("predicted:\n").split("\ngold:\n")
    return (header.split(": ", 1)[1].split(), predicted.splitlines()[-1].split(),
            gold.splitlines()[-1].split())


def tensorboard_summaries(folder: Path) -> dict[str, set[str]]:
    """Tag -> the kinds of value logged under it, over every event file in ``folder``."""
    out: dict[str, set[str]] = {}
    for path in folder.glob("events.out.tfevents.*"):
        data, i = path.read_bytes(), 0
        while i < len(data):
            (length,) = struct.unpack("<Q", data[i:i + 8])
            event = event_pb2.Event.FromString(data[i + 12:i + 12 + length])
            i += 12 + length + 4  # length, its crc, the record, its crc
            for value in event.summary.value:
                kind = value.metadata.plugin_data.plugin_name or value.WhichOneof("value")
                out.setdefault(value.tag, set()).add(kind)
    return out


def training_losses(run: Path) -> list[tuple[int, str]]:
    rows = csv.DictReader((run / "metrics.csv").open())
    return [(int(row["step"]), row["train/loss_step"]) for row in rows
            if row.get("train/loss_step")]


def test_trees_are_written_beside_metrics_csv_after_each_validation(
        logged_run: tuple[Path, list[dict[str, Any]]]) -> None:
    run, _ = logged_run
    folder = run / "trees"
    assert sorted(p.name for p in folder.glob("*.txt")) == [
        "step000002.txt", "step000004.txt", "step000006.txt"]  # the sanity check writes none
    assert sorted(p.name for p in folder.glob("step000004_*.svg")) == [
        f"step000004_{i}.svg" for i in range(1, N + 1)]
    blocks = (folder / "step000004.txt").read_text().rstrip("\n").split("\n\n")
    for i, (block, words) in enumerate(zip(blocks, evaluation_words(N), strict=True), 1):
        assert block.startswith(f"{i}: ")
        assert drawn_words(block) == (words, words, words)
    for path in folder.glob("*.svg"):
        assert ET.fromstring(path.read_text()).tag == "{http://www.w3.org/2000/svg}svg"


def test_wandb_gets_a_table_per_validation(
        logged_run: tuple[Path, list[dict[str, Any]]]) -> None:
    _, logged = logged_run
    tables = [(d["trainer/global_step"], d[WANDB_KEY]) for d in logged if WANDB_KEY in d]
    assert [step for step, _ in tables] == [2, 4, 6]
    table = tables[-1][1]
    assert table.columns == WANDB_COLUMNS and len(table.data) == N
    row = dict(zip(WANDB_COLUMNS, table.data[0]))
    assert row["step"] == 6 and row["sentence"] == " ".join(evaluation_words(1)[0])
    assert row["predicted"].startswith("(X ") and row["gold"].startswith("(S ")
    assert isinstance(row["picture"], wandb.Html)


def test_tensorboard_gets_text_and_images(
        logged_run: tuple[Path, list[dict[str, Any]]]) -> None:
    run, _ = logged_run
    summaries = tensorboard_summaries(run / "tensorboard")
    for i in range(1, N + 1):
        assert summaries[f"trees/{i}"] == {"image"}
        assert summaries[f"trees/{i}/text/text_summary"] == {"text"}


def test_training_losses_are_unchanged_by_tree_samples(
        logged_run: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    run, _ = logged_run
    assert run_cli([*TINY_QUICKSTART, "--trainer.callbacks=[]",
                    f"--trainer.default_root_dir={tmp_path}"]) == 0
    plain = tmp_path / "version_0"
    assert not (plain / "trees").exists()
    assert len(training_losses(run)) == 6
    assert training_losses(plain) == training_losses(run)


def test_every_n_validations_and_a_named_structure(tmp_path: Path) -> None:
    """``structure: lm`` (the ON-LSTM's own distances) every second validation."""
    assert run_cli([*TINY_QUICKSTART, "--trainer.callbacks.n=1",
                    "--trainer.callbacks.structure=lm",
                    "--trainer.callbacks.every_n_validations=2",
                    f"--trainer.default_root_dir={tmp_path}"]) == 0
    folder = tmp_path / "version_0" / "trees"
    assert sorted(p.name for p in folder.iterdir()) == ["step000004.txt", "step000004_1.svg"]


def test_without_trees_it_warns_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stream-mode validation carries no gold trees; an AWD-LSTM induces none: one line
    says so, however many validations."""
    for case, extra in (("stream", ["--data.eval_mode=stream"]),
                        ("awd", ["--model.backbone=AWDLSTM", "--model.heads=[]"])):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            assert run_cli([*TINY_QUICKSTART, "--trainer.max_steps=2", *extra,
                            f"--trainer.default_root_dir={tmp_path / case}"]) == 0
        said = [line for line in capsys.readouterr().err.splitlines() if "TreeSamples" in line]
        assert len(said) == 1, case
        assert said[0].startswith("synlm fit: warning: TreeSamples: "), said
        assert said[0].endswith("; no trees are logged"), said
        assert not (tmp_path / case / "version_0" / "trees").exists()


def test_a_structure_that_gives_no_tree_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli([*TINY_QUICKSTART, "--trainer.callbacks.structure=arcs",
                    f"--trainer.default_root_dir={tmp_path}"]) != 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "synlm: error: TreeSamples: structure 'arcs' is not a tree structure of the model; "
        "its tree structures: syd, lm")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"n": 0}, "n must be >= 1, got 0"),
    ({"every_n_validations": 0}, "every_n_validations must be >= 1, got 0"),
    ({"protocol": "wsj"}, "protocol must be one of ['kim', 'onlstm', 'palm', 'urnng'], got 'wsj'")])
def test_settings_are_checked(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"TreeSamples: {message}")):
        TreeSamples(**arguments)
