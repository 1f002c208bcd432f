"""Every value a user can set is checked before anything is built or written: one line on
stderr that names the flag (or the config file and line) and what is expected, exit code 2,
and no run folder left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

QUICK = ["fit", "--config", "quickstart.yaml", "--data.corpus.init_args.n_train=60",
         "--data.corpus.init_args.n_valid=20", "--data.corpus.init_args.n_test=20"]

#: (extra arguments, a fragment the one line must hold)
BAD_FLAGS = [
    (["--data.batch_size=0"], "--data.batch_size=0: expected a whole number >= 1"),
    (["--data.batch_size=-3"], "--data.batch_size=-3: expected a whole number >= 1"),
    (["--data.batch_size=abc"], "--data.batch_size=abc: expected int"),
    (["--data.eval_batch_size=0"], "--data.eval_batch_size=0: expected a whole number >= 1"),
    (["--data.bptt=0"], "--data.bptt=0: expected a whole number >= 1"),
    (["--data.num_workers=-1"], "--data.num_workers=-1: expected a whole number >= 0"),
    (["--data.corpus=PTBB"], "--data.corpus=PTBB: no class of that name; did you mean PTB?"),
    (["--optimizer.lr=-1"], "--optimizer.lr=-1.0: expected a value SGD accepts (Invalid "
                            "learning rate: -1.0)"),
    (["--optimizer.weight_decay=-0.5"], "--optimizer.weight_decay=-0.5: expected a value SGD"),
    (["--optimizer=Adamm"], "--optimizer=Adamm: no class of that name; did you mean Adam? "
                            "(one of torch.optim's classes)"),
    (["--trainer.max_epochs=-2"], "--trainer.max_epochs=-2: expected a whole number >= -1"),
    (["--trainer.max_epoch=3"], "--trainer.max_epoch=3: not an option; did you mean "
                                "--trainer.max_epochs?"),
    (["--trainer.accumulate_grad_batches=0"], "--trainer.accumulate_grad_batches=0: expected"),
    (["--trainer.val_check_interval=0"], "--trainer.val_check_interval=0: expected a number > 0"),
    (["--trainer.gradient_clip_val=-1.5"], "--trainer.gradient_clip_val=-1.5: expected a number "
                                          ">= 0"),
    (["--trainer.log_every_n_steps=-1"], "--trainer.log_every_n_steps=-1: expected"),
    (["--trainer.accelerator=gpux"], "--trainer: You selected an invalid accelerator name"),
    (["--trainer.devices=0"], "--trainer: `Trainer(devices='0')` value is not a valid input"),
    (["--trainer.precision=17"], "--trainer.precision=17: expected one of 64, 32, 16"),
    (["--seed_everything=abc"], "--seed_everything=abc: expected bool or int"),
    (["--model.backbone=OnLstm"], "--model.backbone=OnLstm: no class of that name; did you "
                                  "mean ONLSTM?"),
    (["--model.backbone.init_args.hidden_size=0"],
     "--model.backbone.hidden_size=0: expected a whole number >= 1"),
    (["--model.backbone.init_args.dropout_input=1.5"],
     "--model.backbone.dropout_input=1.5: expected a probability in [0, 1)"),
    (["--model.backbone.init_args.chunk_size=7"],
     "--model.backbone.chunk_size=7: expected a divisor of each layer's size (192 here)"),
    (["--model.backbone.init_args.hiden_size=3"], "did you mean hidden_size?"),
    (["--ckpt_path=missing.ckpt"], "--ckpt_path: no checkpoint at missing.ckpt"),
    (["--ckpt_path=best"], "--ckpt_path best: fit continues a run where it stopped"),
    (["--model.init_from=missing.ckpt"], "model.init_from: no checkpoint at missing.ckpt"),
    (["--config", "nope.yaml"], "--config: no file nope.yaml"),
]

#: (a YAML file stacked on the quickstart, the line the error must begin with)
BAD_FILES = [
    ("model:\n  backbone:\n    class_path: OnLstm\n",
     "bad.yaml:3: model.backbone: OnLstm: no class of that name; did you mean ONLSTM?"),
    ("data:\n  batch_size: 0\n", "bad.yaml:2: data.batch_size: 0: expected a whole number >= 1"),
    ("data.batch_size: 0\n", "bad.yaml:1: data.batch_size: 0: expected a whole number >= 1"),
    ("trainer:\n  max_epochs: 2\n  accumulate_grad_batches: 0\n",
     "bad.yaml:3: trainer.accumulate_grad_batches: 0: expected a whole number >= 1"),
    ("data:\n  batch_size: [1\n", "bad.yaml:3:1: not valid YAML"),
]


def _one_error_line(capfd: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(("extra", "expected"), BAD_FLAGS, ids=[" ".join(e) for e, _ in BAD_FLAGS])
def test_a_bad_flag_is_one_line_and_leaves_no_run_folder(
        extra: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli([*QUICK, *extra]) == 2
    line = _one_error_line(capfd)
    assert line.startswith("synlm") and expected in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("text", "expected"), BAD_FILES, ids=[t.split(":")[0] + str(i)
                                                              for i, (t, _) in
                                                              enumerate(BAD_FILES)])
def test_a_bad_value_in_a_config_file_names_its_line(
        text: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    line = _error_of_config_file(text, tmp_path, monkeypatch, capfd)
    assert expected in line, line


def _error_of_config_file(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capfd: pytest.CaptureFixture[str]) -> str:
    """The one line ``synlm fit`` (quick) prints for ``bad.yaml`` holding ``text``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(text)
    assert run_cli([*QUICK, "--config", "bad.yaml"]) == 2
    return _one_error_line(capfd)
    assert not (tmp_path / "runs").exists()


def test_missing_corpus_files_are_one_line_before_anything_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """An empty ``SYNLM_DATA_DIR``: the missing file, its URL and the variable, no model
    summary before it, no run folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path / "empty"))
    assert run_cli(["fit", "--config", "awd_lstm.yaml"]) == 2
    line = _one_error_line(capfd)
    assert line.startswith(f"synlm: error: ptb: missing {tmp_path / 'empty'}/ptb/ptb.train.txt")
    assert "SYNLM_DATA_DIR" in line
    assert not (tmp_path / "runs").exists()


def test_a_failed_start_keeps_the_run_folders_already_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clean-up removes only the folder the failed command made."""
    monkeypatch.chdir(tmp_path)
    earlier = tmp_path / "runs" / "quickstart" / "version_0"
    earlier.mkdir(parents=True)
    (earlier / "metrics.csv").write_text("step\n")
    assert run_cli([*QUICK, "--trainer.max_epochs=1", "--optimizer.lr=-1"]) == 2
    assert sorted(p.name for p in (tmp_path / "runs" / "quickstart").iterdir()) == ["version_0"]


#: (a YAML file with a misspelled key, stacked on the quickstart; the line the error must
#: begin with): a nested key, a top-level key and a class's argument, each as a misspelled
#: flag is told, with the file and line instead of the flag
MISSPELLED_KEYS = [
    ("trainer:\n  max_epocs: 3\n",
     "bad.yaml:2: trainer.max_epocs: not an option; did you mean max_epochs?"),
    ("trainer.max_epochs: 1\nseed_everythin: 3\n",
     "bad.yaml:2: seed_everythin: not an option; did you mean seed_everything?"),
    ("model:\n  backbone:\n    init_args:\n      hiden_size: 8\n",
     "bad.yaml:4: model.backbone.hiden_size: ONLSTM takes no such argument; did you mean "
     "hidden_size?"),
]


@pytest.mark.parametrize(("text", "expected"), MISSPELLED_KEYS,
                         ids=["nested", "top-level", "class-argument"])
def test_a_misspelled_key_in_a_config_file_names_its_line_and_the_key_meant(
        text: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    line = _error_of_config_file(text, tmp_path, monkeypatch, capfd)
    assert line.startswith(f"synlm fit: error: {expected} "), line
    assert not (tmp_path / "runs").exists()
