"""The data-free RNNG and TG of docs/quickstart.md: ``configs/rnng_synthetic.yaml`` and
``configs/tg_synthetic.yaml`` run as the page says (fit, test of the run folder, parse),
with no data folder, here for two steps on a few sentences."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

#: The documented commands' sizes cut down: a few sentences, two steps, one beam.
SMALLER = ["--data.corpus.init_args.n_train=40", "--data.corpus.init_args.n_valid=8",
           "--data.corpus.init_args.n_test=8", "--trainer.max_steps=2",
           "--trainer.enable_progress_bar=false", "--model.init_args.beam_size=4",
           "--model.init_args.word_beam_size=2"]


@pytest.mark.parametrize("name", ["rnng_synthetic", "tg_synthetic"])
def test_a_data_free_config_trains_tests_and_parses(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path / "no-data"))  # nothing is read there
    assert run_cli(["fit", "--config", f"{name}.yaml", *SMALLER]) == 0
    run = Path("runs") / name / "version_0"
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert run_cli(["test", "--ckpt_path", f"runs/{name}", *SMALLER[:3],
                    "--trainer.limit_test_batches=1"]) == 0
    (metrics,) = (run / "test").glob("*/metrics.csv")
    header, row = metrics.read_text().splitlines()[:2]
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["test/joint_ppl"]) > 1 and 0 <= float(logged["test/uf1"]) <= 1
    capsys.readouterr()
    (tmp_path / "in.txt").write_text("the dog saw a cat .\n")
    assert run_cli(["parse", "--ckpt_path", f"runs/{name}", "--input", "in.txt"]) == 0
    (tree,) = capsys.readouterr().out.splitlines()
    assert tree.startswith("(") and tree.split()[-1].rstrip(")") == "."
    assert not (tmp_path / "no-data").exists()
