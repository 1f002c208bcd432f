"""Parsing F1 (ON-LSTM sentence mean, corpus micro), per-label recall, tree statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from nltk import Tree

from synlm.metrics import ParsingF1, evaluation_tree, sentence_f1
from synlm.syntax import baseline_tree, read_trees

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"


def golds() -> list[Tree]:
    out = [evaluation_tree(t) for t, _ in read_trees(FIXTURES / "sample.mrg")]
    return [g for g in out if g is not None]


def test_sentence_f1_hand_cases():
    assert sentence_f1({(0, 2), (1, 4)}, {(0, 2), (2, 4)}) == pytest.approx(0.5)
    assert sentence_f1(set(), set()) == pytest.approx(1.0)  # 1-2 word sentences
    assert sentence_f1({(0, 2)}, set()) == 0.0  # P = 0, R = 1
    assert sentence_f1(set(), {(0, 2)}) == 0.0
    assert sentence_f1({(0, 2), (0, 3)}, {(0, 2)}) == pytest.approx(2 * 0.5 / 1.5)


def test_protocol_removes_punctuation_and_traces():
    g = golds()
    assert g[2].leaves() == ["Acme", "Corp.", "'s", "revenue", "rose", "12", "%", "to", "4.5",
                             "million"]  # $ and *U* gone (ON-LSTM word tags)
    assert [t.leaves() for t in g if len(t.leaves()) <= 2] == [["Yes"], ["It", "works"],
                                                                 ["Big", "changes"]]
    palm = evaluation_tree(read_trees(FIXTURES / "sample.mrg")[2][0], "palm")
    assert "$" in palm.leaves()


def test_hand_computed_sentence():
    gold = golds()[1]  # She wanted to buy a red bicycle: gold spans (1,7) (2,7) (3,7) (4,7)
    metric = ParsingF1()
    metric.update([baseline_tree(gold.leaves(), "right-branching")], [gold])
    out = metric.compute()
    assert out["uf1_sentence"].item() == pytest.approx(2 * 0.8 * 1.0 / 1.8, abs=1e-6)
    assert out["recall_VP"].item() == 1.0 and out["recall_NP"].item() == 1.0
    assert out["depth"].item() == pytest.approx((1 + 2 + 3 + 4 + 5 + 6 + 6) / 7)
    assert out["rl_ratio"].item() == 6.0  # six words are left children, one a right child
    assert out["right_splits_pct"].item() == 100.0


GOLDEN = {  # uf1_sentence, uf1_corpus, depth, rl_ratio, left_splits_pct, right_splits_pct
    "left-branching": (0.4043, 0.1474, 4.9722, 0.1452, 100.0, 0.0),
    "right-branching": (0.6007, 0.4211, 4.9722, 6.8889, 0.0, 100.0),
    "balanced": (0.5398, 0.3579, 3.1667, 0.6905, 39.3939, 0.0),
    "random": (0.4945, 0.2737, 3.5833, 0.9189, 32.4324, 24.3243),
}


@pytest.mark.parametrize("kind", sorted(GOLDEN))
def test_baselines_on_fixture(kind):
    g = golds()
    rng = np.random.default_rng(0)
    metric = ParsingF1()
    metric.update([baseline_tree(t.leaves(), kind, rng) for t in g], g)
    out = metric.compute()
    keys = ("uf1_sentence", "uf1_corpus", "depth", "rl_ratio", "left_splits_pct",
            "right_splits_pct")
    assert [round(out[k].item(), 4) for k in keys] == list(GOLDEN[kind])
    assert out["n_sentences"].item() == 10


def test_states_are_sums_that_merge_like_ddp():
    g = golds()
    preds = [baseline_tree(t.leaves(), "balanced") for t in g]
    whole, a, b = ParsingF1(), ParsingF1(), ParsingF1()
    whole.update(preds, g)
    a.update(preds[:4], g[:4])
    b.update(preds[4:], g[4:])
    assert all(isinstance(getattr(a, name), torch.Tensor) for name in a._defaults)
    a.merge_state(b)
    for k, v in whole.compute().items():
        torch.testing.assert_close(a.compute()[k], v, equal_nan=True)


def test_word_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match="predicted tree has 2 words, gold 3"):
        ParsingF1().update([Tree("X", ["a", "b"])], [Tree("S", ["a", "b", "c"])])


def _ddp_worker(rank: int, world: int, port: int, queue) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    g = golds()
    preds = [baseline_tree(t.leaves(), "right-branching") for t in g]
    metric = ParsingF1()
    metric.update(preds[rank::world], g[rank::world])
    out = {k: v.item() for k, v in metric.compute().items()}  # syncs the sums
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


@pytest.mark.ddp
def test_ddp_sync_equals_single_process():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(_ddp_worker, args=(2, port, queue), nprocs=2, start_method="spawn")
    synced = queue.get(timeout=60)
    g = golds()
    single = ParsingF1()
    single.update([baseline_tree(t.leaves(), "right-branching") for t in g], g)
    for k, v in single.compute().items():
        assert synced[k] == pytest.approx(v.item(), nan_ok=True)
