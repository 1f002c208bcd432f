"""Two gloo processes on CPU: disjoint columns, and the same result as one process; the
syntactic evaluation's numbers on every rank. Run as a script, this file is the syntactic
evaluation's probe (``python test_ddp.py FOLDER DEVICES``), which Lightning's DDP launcher
runs once more for rank 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("ddp_probe.py")


def run_probe(tmp_path: Path, devices: int) -> dict:
    """Both probes' results with ``devices`` processes, from one launch (each launch costs
    seconds of imports per process)."""
    out = tmp_path / f"ddp{devices}.json"
    env = {**os.environ, "PYTHONPATH": str(PROBE.parent.parent)}
    done = subprocess.run([sys.executable, str(PROBE), str(out), str(devices), "columns",
                           "budget", "masked"], env=env, cwd=tmp_path, timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """The probes' results on one process and on two gloo ranks."""
    tmp_path = tmp_path_factory.mktemp("ddp")
    return {devices: run_probe(tmp_path, devices) for devices in (1, 2)}


@pytest.mark.ddp
def test_ddp_ranks_see_disjoint_columns_and_log_the_same_perplexity(
        probes: dict[int, dict]) -> None:
    single, double = probes[1]["columns"], probes[2]["columns"]
    assert double["world_size"] == 2
    rank0, rank1 = double["columns"]
    assert not set(rank0) & set(rank1)  # each rank has its own columns ...
    assert rank0 + rank1 == single["columns"][0]  # ... of the same cut as one process
    assert double["val_ppl"] == pytest.approx(single["val_ppl"], rel=1e-5)
    assert double["weight_sum"] == pytest.approx(single["weight_sum"], rel=1e-5)


@pytest.mark.ddp
def test_ddp_token_budget_batches_cover_the_epoch_in_equal_steps(
        probes: dict[int, dict]) -> None:
    """Each rank takes every other token-budget batch; both run the same number of steps
    (the list is padded with repeated batches) and together see every sentence."""
    single, double = probes[1]["budget"], probes[2]["budget"]
    ((steps, seen),) = single["ranks"]
    (steps0, seen0), (steps1, seen1) = double["ranks"]
    assert sorted(seen) == list(range(single["sentences"]))
    assert steps0 == steps1 == -(-steps // 2)
    assert set(seen0) | set(seen1) == set(seen)
    repeated = len(seen0) + len(seen1) - len(seen)  # rows of the padding batch, if any
    assert (repeated > 0) == (steps % 2 == 1)


@pytest.mark.ddp
def test_ddp_ranks_mask_their_own_sentences_as_one_process_does(
        probes: dict[int, dict]) -> None:
    """Masks are drawn per sentence (synlm.data.masking): the two ranks hold different
    sentences, and each sentence is masked on its rank as one process masks it."""
    (single,) = probes[1]["masked"]["masks"]
    rank0, rank1 = probes[2]["masked"]["masks"]
    assert rank0.keys() != rank1.keys() and rank0.keys() | rank1.keys() == single.keys()
    for masks in (rank0, rank1):
        assert all(masks[k] == single[k] for k in masks)
    assert sum(map(len, single.values())) > 0


#: The probe's tiny BLiMP: the first training sentences of the synthetic treebank, each
#: against its words reversed, in two paradigms of three pairs.
PAIRS, PARADIGMS = 3, ("toy_forward", "toy_backward")


def write_blimp(data: Path, sentences: list[list[str]]) -> None:
    """``data/blimp/BLiMP.zip`` with ``data/<UID>.jsonl`` files of ``PAIRS`` pairs each, a
    sentence good and its words reversed bad."""
    (data / "blimp").mkdir(parents=True)
    with zipfile.ZipFile(data / "blimp" / "BLiMP.zip", "w") as archive:
        for k, uid in enumerate(PARADIGMS):
            rows = sentences[k * PAIRS:(k + 1) * PAIRS]
            archive.writestr(f"data/{uid}.jsonl", "\n".join(json.dumps(
                {"sentence_good": " ".join(words), "sentence_bad": " ".join(words[::-1]),
                 "UID": uid, "linguistics_term": "word_order", "pairID": str(i)})
                for i, words in enumerate(rows)))


@pytest.mark.ddp
def test_syntactic_evaluation_is_logged_alike_on_every_rank(tmp_path: Path) -> None:
    """``SyntacticEvaluation`` under two gloo ranks: both log the same BLiMP headline after
    the validation (and a ``ModelCheckpoint`` monitoring ``val/blimp/accuracy`` runs on
    both), equal to scoring the same slice with the trained model in one process."""
    from synlm.data.synthetic import SyntheticTreebank

    corpus = SyntheticTreebank(n_train=120, n_valid=40, n_test=10)
    write_blimp(tmp_path / "data", [s.words for s in corpus.sentences("train")])
    env = {**os.environ, "PYTHONPATH": str(PROBE.parent.parent)}
    done = subprocess.run([sys.executable, __file__, str(tmp_path), "2"], env=env,
                          cwd=tmp_path, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["world_size"] == 2 and set(rank0["logged"]) == {
        "val/blimp/accuracy", "val/blimp/in_vocabulary_accuracy", "val/blimp/unknown_share"}
    assert rank1["logged"] == rank0["logged"]
    assert rank1["best"] == rank0["best"] == rank0["logged"]["val/blimp/accuracy"]
    for name, value in rank0["logged"].items():
        assert value == pytest.approx(rank0["one_process"][name.removeprefix("val/")],
                                      abs=1e-6), name


def syntactic(folder: Path, devices: int) -> None:
    """Two steps of a small AWD-LSTM on the synthetic treebank with ``SyntacticEvaluation``
    over ``folder/data``'s BLiMP and a ``ModelCheckpoint`` on ``val/blimp/accuracy``, one
    validation after the second step; each rank writes ``folder/rank<R>.json``: the values
    it logged, its checkpoint's best score and, on rank 0, the slice scored by the model in
    this process."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from synlm.backbones import AWDLSTM
    from synlm.callbacks.syntactic import SyntacticEvaluation
    from synlm.data.datamodule import SynLMDataModule
    from synlm.data.synthetic import SyntheticTreebank
    from synlm.lm import SyntaxLM
    from synlm.tse.benchmarks import load_benchmarks, score_benchmarks
    from synlm.tse.scoring import ModelScorer

    pl.seed_everything(0)
    dm = SynLMDataModule(SyntheticTreebank(n_train=120, n_valid=40, n_test=10),
                         batch_size=4 // devices, eval_batch_size=4 // devices, bptt=8,
                         cache_dir=str(folder / "cache"))
    backbone = AWDLSTM(16, 32, 2, dropout_input=0, dropout_hidden=0, dropout_output=0,
                       weight_drop=0)
    model = SyntaxLM(backbone, vocab_size=dm.vocab_size, bptt=8,
                     optimizer={"class_path": "torch.optim.SGD", "init_args": {"lr": 1.0}})
    data = str(folder / "data")
    checkpoint = ModelCheckpoint(dirpath=folder / "checkpoints", monitor="val/blimp/accuracy",
                                 mode="max")
    trainer = pl.Trainer(accelerator="cpu", devices=devices,
                         strategy="ddp" if devices > 1 else "auto", max_steps=2,
                         val_check_interval=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[SyntacticEvaluation(["blimp"], subset=PAIRS, data_dir=data,
                                                        batch_size=2), checkpoint])
    trainer.fit(model, dm)
    result = {"world_size": trainer.world_size, "best": float(checkpoint.best_model_score),
              "logged": {name: float(value) for name, value in trainer.callback_metrics.items()
                         if name.startswith("val/blimp/")}}
    if trainer.is_global_zero:
        blimp = score_benchmarks(load_benchmarks(["blimp"], data, PAIRS), ModelScorer(model))
        result["one_process"] = blimp["blimp"].headline
    (folder / f"rank{trainer.global_rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    syntactic(Path(sys.argv[1]), int(sys.argv[2]))
