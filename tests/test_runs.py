"""One folder per run: reruns never overwrite each other, ``--ckpt_path last`` continues
the newest run in its folder, a checkpoint alone is enough to test it, and a missing or
damaged checkpoint is one line wherever one is read."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest
import torch
import yaml

from conftest import TINY_OVERRIDES, run_cli
from synlm.catalog import REPO_CONFIGS
from synlm.runtime.run_folders import CheckpointError, resolve_checkpoint
from synlm.runtime.runs import CONFIG_KEY, best_in_run

SMALL = [*TINY_OVERRIDES, "--data.corpus.init_args.n_train=60",
         "--model.backbone.init_args.input_size=16", "--model.backbone.init_args.hidden_size=24",
         "--model.backbone.init_args.chunk_size=4", "--trainer.limit_val_batches=2",
         "--trainer.limit_test_batches=2", "--trainer.num_sanity_val_steps=0",
         "--trainer.log_every_n_steps=1"]


def fit(root: Path, *extra: str) -> int:
    return run_cli(["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *SMALL,
                    f"--trainer.default_root_dir={root}", *extra])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_each_run_gets_its_own_folder(tmp_path: Path) -> None:
    assert fit(tmp_path, "--trainer.max_epochs=2", "--trainer.limit_train_batches=3") == 0
    first = tmp_path / "version_0"
    kept = {p.name: digest(p) for p in [*first.glob("checkpoints/*.ckpt"),
                                        first / "metrics.csv", first / "config.yaml"]}
    assert fit(tmp_path, "--trainer.max_epochs=1", "--trainer.limit_train_batches=3") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["version_0", "version_1"]
    assert {p.name: digest(first / ("checkpoints" if p.suffix == ".ckpt" else "") / p.name)
            for p in [*first.glob("checkpoints/*.ckpt"), first / "metrics.csv",
                      first / "config.yaml"]} == kept
    for version, epochs in (("version_0", 2), ("version_1", 1)):
        run = tmp_path / version
        assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["max_epochs"] \
            == epochs
        assert len([r for r in rows(run / "metrics.csv") if r.get("val/ppl")]) == epochs
        names = {p.name for p in (run / "checkpoints").iterdir()}
        assert "last.ckpt" in names and f"epoch{epochs - 1:03d}-step{3 * epochs:06d}.ckpt" \
            in names


def test_ckpt_path_last_continues_the_newest_run_in_its_folder(tmp_path: Path) -> None:
    assert fit(tmp_path, "--trainer.max_steps=2") == 0
    assert fit(tmp_path, "--trainer.max_steps=3") == 0
    older = digest(tmp_path / "version_0" / "checkpoints" / "last.ckpt")
    assert fit(tmp_path, "--trainer.max_steps=5", "--ckpt_path=last") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["version_0", "version_1"]
    assert digest(tmp_path / "version_0" / "checkpoints" / "last.ckpt") == older
    newest = torch.load(resolve_checkpoint(tmp_path, best_in_run), weights_only=False)
    assert newest["global_step"] == 5  # 3 steps of version_1, then 2 more
    steps = [int(r["step"]) for r in rows(tmp_path / "version_1" / "metrics.csv")
             if r.get("train/loss_step")]
    assert steps == [0, 1, 2, 3, 4]  # one curve, its first part kept


def test_ckpt_path_last_without_a_run_starts_one(tmp_path: Path) -> None:
    assert fit(tmp_path, "--trainer.max_steps=1", "--ckpt_path=last") == 0
    assert (tmp_path / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_a_checkpoint_alone_is_enough_to_test_it(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """No --config: the checkpoint carries its run's config (the tiny data, the model);
    the result equals testing with the config given again."""
    assert fit(tmp_path / "run", "--trainer.max_steps=2") == 0
    ckpt = tmp_path / "run" / "version_0" / "checkpoints" / "last.ckpt"
    assert "SyntheticTreebank" in torch.load(ckpt, weights_only=False)[CONFIG_KEY]
    assert run_cli(["test", "--ckpt_path", str(tmp_path / "run")]) == 0  # the run folder
    assert run_cli(["test", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *SMALL,
                    f"--trainer.default_root_dir={tmp_path / 'run'}",
                    f"--ckpt_path={ckpt}"]) == 0
    capsys.readouterr()
    # the first logged in the run it tested, the second where default_root_dir said
    (logged,) = (tmp_path / "run" / "version_0" / "test").glob("*/metrics.csv")
    alone, configured = rows(logged), rows(tmp_path / "run" / "version_1" / "metrics.csv")
    assert alone[0]["test/ppl"] and alone == configured


def damaged(tmp_path: Path) -> Path:
    assert fit(tmp_path / "run", "--trainer.max_steps=1") == 0
    ckpt = tmp_path / "run" / "version_0" / "checkpoints" / "last.ckpt"
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(ckpt.read_bytes()[:4000])
    return cut


@pytest.mark.parametrize("command", [
    ["test", "--ckpt_path", "{ckpt}"],
    ["test", "--config", str(REPO_CONFIGS / "quickstart.yaml"), "--ckpt_path", "{ckpt}"],
    ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), "--ckpt_path", "{ckpt}"],
    ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *SMALL,
     "--trainer.max_steps=1", "--model.init_from={ckpt}"],
    ["parse", "--ckpt_path", "{ckpt}", "--input", "{text}"],
    ["generate", "--ckpt_path", "{ckpt}", "--num-samples", "1"],
], ids=["test", "test-with-config", "fit-resume", "init-from", "parse", "generate"])
@pytest.mark.parametrize("kind", ["missing", "cut-short", "run-without-checkpoint"])
def test_a_bad_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      command: list[str], kind: str) -> None:
    if kind == "missing":
        ckpt, said = tmp_path / "none.ckpt", "no checkpoint at"
    elif kind == "cut-short":
        ckpt, said = damaged(tmp_path), "is not a complete checkpoint"
    else:
        (tmp_path / "empty" / "version_0").mkdir(parents=True)
        ckpt, said = tmp_path / "empty", "holds no checkpoint"
    (tmp_path / "text.txt").write_text("the cat sat\n")
    capsys.readouterr()
    args = [a.format(ckpt=ckpt, text=tmp_path / "text.txt") for a in command]
    assert run_cli([*args, f"--trainer.default_root_dir={tmp_path / 'other'}"]
                   if command[0] in ("fit", "test") else args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and str(ckpt) in err[0], err
    assert not (tmp_path / "other").exists()  # nothing half-written


def test_the_old_layout_gets_a_hint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="x/best, .*x/last name the newest run's"):
        resolve_checkpoint(tmp_path / "runs" / "x" / "checkpoints" / "last.ckpt", best_in_run)


def test_test_with_last_and_no_run_is_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["test", "--config", str(REPO_CONFIGS / "quickstart.yaml"),
                    f"--trainer.default_root_dir={tmp_path}", "--ckpt_path=last"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--ckpt_path last: no run under" in line


def test_without_a_logger_or_checkpoints_runs_still_get_their_own_folder(
        tmp_path: Path) -> None:
    assert fit(tmp_path, "--trainer.max_steps=1", "--trainer.logger=false") == 0
    assert fit(tmp_path, "--trainer.max_steps=1", "--trainer.logger=false",
               "--trainer.enable_checkpointing=false") == 0
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                  if p.is_file()) == ["version_0/checkpoints/last.ckpt",
                                      "version_0/config.yaml", "version_1/config.yaml"]
