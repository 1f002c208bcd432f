"""Golden values (torchtune style): a fixed-seed tiny model of every family, trained for 3
steps through the CLI from its shipped config, gives these training and validation losses.

They were pinned before the contracts refactor (PaLM's and the Transformer's when they were
added) and must keep holding: a change that moves them changes numerics, and must say so
(and re-pin with ``SYNLM_PRINT_GOLDEN=1``). GPT-2's numerics are pinned to transformers' own
model instead (tests/test_gpt2.py).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from conftest import TINY_OVERRIDES
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main

SMALL_LSTM = ["--model.backbone.init_args.input_size=16",
              "--model.backbone.init_args.hidden_size=32"]
SMALL_PRPN = ["--model.backbone.init_args.input_size=16",
              "--model.backbone.init_args.hidden_size=24",
              "--model.backbone.init_args.n_slots=5"]


def small_palm(**options: str) -> list[str]:
    """A list item cannot be overridden key by key on the command line: restate it whole."""
    args = {"after": 1, "window": 6, "rrnn_size": 4, "parser_size": 8, **options}
    return [*SMALL_LSTM, "--model.backbone.init_args.inserts="
            + json.dumps([{"class_path": "SpanAttention", "init_args": args}])]


SIZES = {
    "awd_lstm.yaml": SMALL_LSTM,
    "onlstm.yaml": [*SMALL_LSTM, "--model.backbone.init_args.chunk_size=4"],
    "onlstm_syd.yaml": [*SMALL_LSTM, "--model.backbone.init_args.chunk_size=4"],
    "prpn.yaml": SMALL_PRPN,
    "prpn_syd.yaml": SMALL_PRPN,
    "palm_u.yaml": small_palm(),
    "palm_rb.yaml": small_palm(scores="right_branching"),
    "palm_s.yaml": small_palm(),
    "transformer.yaml": ["--model.backbone.init_args.input_size=16",
                         "--model.backbone.init_args.num_layers=2",
                         "--model.backbone.init_args.num_heads=2",
                         "--model.backbone.init_args.ffn_size=32", "--model.init_std=0.25",
                         "--data.max_tokens=256", "--trainer.accumulate_grad_batches=1"],
}

#: config -> (train/loss at steps 0, 1, 2; val/loss after step 3)
GOLDEN: dict[str, tuple[tuple[float, float, float], float]] = {
    "awd_lstm.yaml": ((4.260932, 4.1780634, 3.9962351), 4.0135794),
    "onlstm.yaml": ((4.2508845, 4.0521145, 3.9216962), 3.9605227),
    "onlstm_syd.yaml": ((5.0035982, 4.8119349, 4.8177848), 4.7684956),
    "prpn.yaml": ((4.2468104, 4.249507, 4.2519603), 4.2453709),
    "prpn_syd.yaml": ((4.9922519, 4.9963861, 4.9861917), 4.9913635),
    "palm_rb.yaml": ((4.3055015, 4.2928829, 4.2747273), 4.2417068),
    "palm_s.yaml": ((4.3040009, 4.3200254, 4.3023982), 4.25494),
    "palm_u.yaml": ((4.2878942, 4.3039141, 4.2862792), 4.2388406),
    "transformer.yaml": ((4.6534319, 4.6871791, 4.8640819), 4.7220631),
}


def losses(config: str, root: Path) -> tuple[tuple[float, ...], float]:
    args = ["fit", "--config", str(REPO_CONFIGS / config), *TINY_OVERRIDES, *SIZES[config],
            "--trainer.max_steps=3", "--trainer.val_check_interval=3",
            "--trainer.limit_val_batches=2", "--trainer.num_sanity_val_steps=0",
            "--trainer.log_every_n_steps=1", f"--trainer.default_root_dir={root}"]
    assert main(args) == 0
    rows = list(csv.DictReader((root / "version_0" / "metrics.csv").open()))
    train = {int(r["step"]): float(r["train/loss_step"]) for r in rows if r.get("train/loss_step")}
    (val,) = [float(r["val/loss"]) for r in rows if r.get("val/loss")]
    return tuple(train[s] for s in range(3)), val


@pytest.mark.parametrize("config", sorted(SIZES))
def test_golden_losses(config: str, tmp_path: Path) -> None:
    train, val = losses(config, tmp_path)
    if os.environ.get("SYNLM_PRINT_GOLDEN"):
        print(f'\n    "{config}": (({", ".join(f"{x:.8g}" for x in train)}), {val:.8g}),')
    want_train, want_val = GOLDEN[config]
    assert train == pytest.approx(want_train, rel=2e-5)
    assert val == pytest.approx(want_val, rel=2e-5)
