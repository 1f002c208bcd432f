"""``synlm evaluate-syntax`` over two processes (``torchrun --nproc_per_node 2``, gloo on
CPU; ``synlm.tse.sharding``): a tiny RNNG's word-synchronous beam search scores BLiMP pairs
split over the ranks, and the JSON summary and the per-pair records equal one process's (the
log-probabilities to 1e-5: a float32 search batched with other sentences);
``Sharded`` gives a rank every other block of ``SPAN`` sentences and returns all of them in
order."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_ddp import write_blimp

from conftest import run_cli
from synlm.catalog import REPO_CONFIGS
from synlm.data.synthetic import SyntheticTreebank
from synlm.tse import sharding
from synlm.tse.scores import ScoredSentence


class Recording:
    """A scorer that records what it is asked to score and scores a sentence by its length."""

    progress = None
    words = "as is"

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def score(self, sentences: list[list[str]]) -> list[ScoredSentence]:
        self.asked += sentences
        if self.progress is not None:
            self.progress(len(sentences))
        return [ScoredSentence(tuple(s), (-float(len(s)),), (False,), None, tuple(s), (0.0,))
                for s in sentences]


def test_a_rank_scores_every_other_block_and_returns_all_in_order(monkeypatch) -> None:
    """Blocks of 2: rank 1 of 2 scores sentences 2, 3, 6; the other rank's (0, 1, 4, 5),
    gathered, go back in their places; progress counts both ranks' (3 a rank, shown as 6)."""
    monkeypatch.setattr(sharding, "SPAN", 2)
    sentences = [["w"] * (i + 1) for i in range(7)]
    other = Recording().score([sentences[i] for i in (0, 1, 4, 5)])

    def gather(out: list, mine: list) -> None:
        out[:] = [other, mine]

    monkeypatch.setattr("torch.distributed.all_gather_object", gather)
    inner, counted = Recording(), []
    scorer = sharding.Sharded(inner, 1, 2)
    scorer.progress = counted.append
    scored = scorer.score(sentences)
    assert inner.asked == [sentences[i] for i in (2, 3, 6)] and scorer.words == "as is"
    assert [s.word_log_probs for s in scored] == [(-float(i + 1),) for i in range(7)]
    assert counted == [6]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ddp
def test_two_processes_give_one_processs_numbers(capsys, tmp_path: Path) -> None:
    root = tmp_path / "rnng"
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "rnng_synthetic.yaml"),
                    "--model.init_args.model.init_args.input_size=16",
                    "--model.init_args.model.init_args.hidden_size=16",
                    "--data.corpus.init_args.n_train=120", "--data.corpus.init_args.n_valid=8",
                    "--data.corpus.init_args.n_test=8", "--data.batch_size=8",
                    "--trainer.max_steps=4", "--trainer.limit_val_batches=1",
                    "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
                    f"--trainer.default_root_dir={root}"]) == 0
    ckpt = next(root.glob("version_*/checkpoints/last.ckpt"))
    write_blimp(tmp_path / "data", [s.words for s in
                                    SyntheticTreebank(n_train=120).sentences("train")])
    flags = ["evaluate-syntax", "--ckpt_path", str(ckpt), "--benchmark", "blimp",
             "--data-dir", str(tmp_path / "data"), "--beam-size", "5", "--word-beam-size", "2",
             "--shift-size", "1", "--batch-size", "2"]
    assert run_cli([*flags, "--output", str(tmp_path / "one.jsonl")]) == 0
    one = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    script = tmp_path / "synlm_cli.py"
    script.write_text("import sys\nfrom synlm.cli import main\nsys.exit(main())\n")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
         f"--master_port={free_port()}", str(script), *flags,
         "--output", str(tmp_path / "two.jsonl")], cwd=tmp_path, timeout=600,
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("{")]  # rank 0's alone
    two = json.loads(line)
    assert two.keys() == one.keys() and len(one["headline"]) > 0
    for key in one.keys() - {"provenance", "output"}:  # the command line, files apart
        assert two[key] == one[key], key
    records = [[json.loads(x) for x in (tmp_path / f"{n}.jsonl").read_text().splitlines()]
               for n in ("one", "two")]
    assert len(records[0]) == 6
    for one_record, two_record in zip(*records, strict=True):
        # a float32 search batched with other sentences than one process's: its last bits
        for key in ("good_log_prob", "bad_log_probs"):
            assert two_record.pop(key) == pytest.approx(one_record.pop(key), abs=1e-5, rel=0)
        assert two_record == one_record
