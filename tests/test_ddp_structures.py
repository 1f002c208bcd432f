"""Every structure model trains under DDP (two gloo processes on CPU, ``synlm fit
--trainer.devices=2 --trainer.strategy=ddp``): the RNNG, the in-order RNNG, PLM, PLM-mask,
Transformer Grammars over sentences and over streamed documents, CAG (over words) and
Pushdown Layers, tiny, on the synthetic treebank. Two steps, then one validation whose
sums run over both ranks' halves of the validation split: its perplexity equals ``synlm
validate`` of the saved weights in one process (1e-5)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from synlm.catalog import REPO_CONFIGS

SYNTHETIC = ["--data.corpus=SyntheticTreebank", "--data.corpus.init_args.n_train=64",
             "--data.corpus.init_args.n_valid=16", "--data.corpus.init_args.n_test=8",
             "--data.batch_size=4", "--data.eval_batch_size=4"]
TINY_TRANSFORMER = ["--model.init_args.model.init_args.size=16",
                    "--model.init_args.model.init_args.num_layers=1",
                    "--model.init_args.model.init_args.num_heads=2",
                    "--model.init_args.model.init_args.ffn_size=32"]
TINY_RNNG = ["--model.init_args.model.init_args.input_size=16",
             "--model.init_args.model.init_args.hidden_size=16",
             "--model.init_args.model.init_args.num_layers=1"]
MODELS = {
    "rnng": (["--config", "rnng.yaml", *TINY_RNNG], "val/joint_ppl"),
    "rnng_in_order": (["--config", "rnng_in_order.yaml", *TINY_RNNG], "val/joint_ppl"),
    "plm": (["--config", "plm.yaml", *TINY_TRANSFORMER], "val/joint_ppl"),
    "plm_mask": (["--config", "plm_mask.yaml", *TINY_TRANSFORMER], "val/joint_ppl"),
    "tg": (["--config", "tg.yaml", *TINY_TRANSFORMER], "val/joint_ppl"),
    "tg_documents_streamed": (
        ["--config", "tg_document.yaml", *TINY_TRANSFORMER,
         "--model.init_args.model.init_args.attention.init_args.sequence_length=16",
         "--model.init_args.model.init_args.attention.init_args.memory_length=16",
         "--data.max_document_words=40", "--data.document_order=streamed"], "val/doc_ppl"),
    "cag": (["--config", "cag.yaml", "--data.subwords=null", "--data.unknown_words=unk",
             "--model.init_args.model.init_args.input_size=16",
             "--model.init_args.model.init_args.num_layers=1",
             "--model.init_args.model.init_args.num_heads=2"], "val/joint_ppl"),
    "pushdown": (["--config", "pushdown.yaml", "--model.init_args.size=16",
                  "--model.init_args.num_layers=2", "--model.init_args.attention_heads=2"],
                 "val/ppl"),
}


def logged(root: Path, name: str) -> float:
    """The last value of ``name`` in the metrics.csv of the run under ``root``."""
    (metrics,) = root.glob("version_*/metrics.csv")
    return [float(row[name]) for row in csv.DictReader(metrics.open()) if row.get(name)][-1]


@pytest.mark.ddp
@pytest.mark.parametrize("model", MODELS)
def test_a_structure_model_trains_on_two_ranks(model: str, tmp_path: Path) -> None:
    args, metric = MODELS[model]
    args = [a if not a.endswith(".yaml") else str(REPO_CONFIGS / a) for a in args]
    common = [*args, *SYNTHETIC, "--trainer.accelerator=cpu",
              "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
              "--trainer.num_sanity_val_steps=0"]
    two = tmp_path / "two"
    # a script of its own: Lightning's launcher runs the same command line for rank 1
    script = tmp_path / "synlm_cli.py"
    script.write_text("import sys\nfrom synlm.cli import main\nsys.exit(main())\n")
    done = subprocess.run(
        [sys.executable, str(script), "fit", *common, "--trainer.devices=2",
         "--trainer.strategy=ddp", "--trainer.max_steps=2", "--trainer.val_check_interval=2",
         f"--trainer.default_root_dir={two}"], cwd=tmp_path, timeout=600,
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    one = tmp_path / "one"
    ckpt = next(two.glob("version_*/checkpoints/last.ckpt"))
    assert run_cli(["validate", *common, "--trainer.devices=1", f"--ckpt_path={ckpt}",
                    f"--trainer.default_root_dir={one}"]) == 0
    assert logged(two, metric) == pytest.approx(logged(one, metric), rel=1e-5)
