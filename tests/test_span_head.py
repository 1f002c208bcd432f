"""PaLM-S's span head: the loss on set values, target alignment with the attention's slots,
the window handshake with the data, and a short run that learns to parse."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from nltk import Tree

from conftest import tiny_palm_config
from synlm.backbones import AWDLSTM, SpanAttention
from synlm.cli import main
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.heads import SpanHead
from synlm.lm import SyntaxLM
from synlm.metrics.parsing import ParsingF1, evaluation_tree
from synlm.outputs import BackboneOutput, Batch
from synlm.syntax import Sentence, baseline_tree, palm_tree
from synlm.syntax.targets import build_targets
from synlm.syntax.trees import binarize, spans


def _batch(targets: torch.Tensor, span_mask: torch.Tensor) -> Batch:
    B, T = span_mask.shape
    tokens = torch.zeros(B, T, dtype=torch.long)
    return Batch(tokens=tokens, targets=tokens, mask=torch.ones(B, T, dtype=torch.bool),
                 spans=targets, span_mask=span_mask)


def test_loss_is_the_cross_entropy_over_gold_rows_or_all_rows() -> None:
    scores = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [1.0, 2.0]]])  # (1, 3, 2)
    targets = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.5, 0.5]]])
    span_mask = torch.tensor([[False, True, True]])
    out = BackboneOutput(hidden=torch.zeros(1, 3, 4), span_scores=scores)
    # row 1: -log(3/4); row 2: -(log σ(-1) + log σ(1)) / 2
    row1 = -math.log(0.75)
    row2 = -0.5 * (math.log(1 / (1 + math.e)) + math.log(math.e / (1 + math.e)))
    gold = SpanHead(reduction="gold_rows")(out, _batch(targets, span_mask), None)
    every = SpanHead(reduction="all_rows")(out, _batch(targets, span_mask), None)
    assert gold.loss.item() == pytest.approx((row1 + row2) / 2)
    assert every.loss.item() == pytest.approx((row1 + row2) / 3)
    # row 1's top span (slot 0) is gold, row 2's (slot 1) too
    assert gold.metrics["span_top_acc"].item() == 1.0
    no_gold = SpanHead()(out, Batch(tokens=torch.zeros(1, 3, dtype=torch.long),
                                    targets=torch.zeros(1, 3, dtype=torch.long),
                                    mask=torch.ones(1, 3, dtype=torch.bool)), None)
    assert no_gold.loss is None


def test_targets_line_up_with_the_attention_slots() -> None:
    """Slot v of input i is the span of K - v words ending at word i - 1, for the targets
    (right-aligned, the released left-alignment fixed) as for the attention and the decoder:
    scores that put 1 on every gold target decode into the gold binarised tree."""
    tree = Tree.fromstring("(S (NP (DT the) (JJ old) (NN man)) (VP (VBD saw) (NP (DT a) "
                           "(NN dog))) (. .))")
    words = tree.leaves()
    K = 6
    targets = build_targets([Sentence(words, tree=tree)], span_window=K + 1, closing_eos=True)
    # the unit [<eos>, w1..w7] and the closing <eos>: row i holds spans ending at word i
    assert targets.spans.shape == (len(words) + 2, K)
    # row 4 (input "saw"): [the [old man]] and [old man] end at word 3, in slots K - 3 and
    # K - 2, weighted by length (3 : 2) as the released targets
    np.testing.assert_allclose(targets.spans[4], [0, 0, 0, 0.6, 0.4, 0], rtol=1e-6)
    gold = binarize(tree)  # the right-branching binarisation the targets come from
    oracle = (targets.spans > 0).astype(np.float64)
    oracle[np.arange(1, len(words) + 2), K - 1] = 1.0  # single words are always spans
    assert spans(palm_tree(words, oracle)) == spans(gold)


def _tiny_lm(window: int) -> SyntaxLM:
    backbone = AWDLSTM(16, 24, 3, inserts=[SpanAttention(window=window, rrnn_size=4,
                                                         parser_size=8)])
    return SyntaxLM(backbone, heads=[SpanHead()], vocab_size=50)


def test_the_head_asks_the_data_for_its_window() -> None:
    lm = _tiny_lm(window=6)
    assert lm.heads[0].gold_options() == {"span_window": 6}
    data = SynLMDataModule(SyntheticTreebank(n_train=20, n_valid=5, n_test=5))
    data.request(lm.heads[0].needs_gold, "SpanHead", lm.heads[0].gold_options())
    assert data.span_window == 6
    arrays, _ = data.stream("train")
    assert arrays["spans"].shape[-1] == 5
    fixed = SynLMDataModule(SyntheticTreebank(n_train=20, n_valid=5, n_test=5), span_window=10)
    with pytest.raises(ValueError, match=r"window of 6 .* data.span_window is 10; set "
                                         r"data.span_window: 6"):
        fixed.request(lm.heads[0].needs_gold, "SpanHead", lm.heads[0].gold_options())


def test_targets_of_another_window_are_refused_in_one_line() -> None:
    out = BackboneOutput(hidden=torch.zeros(1, 3, 4), span_scores=torch.zeros(1, 3, 4))
    batch = _batch(torch.zeros(1, 3, 9), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="9 slots .* scores 4; set data.span_window to 5"):
        SpanHead()(out, batch, None)


def _metrics(run: Path) -> list[dict[str, float]]:
    (path,) = run.rglob("metrics.csv")
    return [{k: float(v) for k, v in row.items() if v} for row in csv.DictReader(path.open())]


def test_palm_s_learns_to_parse_the_synthetic_treebank(tmp_path: Path) -> None:
    """A short seeded PaLM-S run: the span loss falls and val/uf1 of the attention's trees
    beats right-branching trees of the same sentences."""
    path = tiny_palm_config(tmp_path, heads=[{"class_path": "SpanHead",
                                              "init_args": {"weight": 1.0}}],
                            corpus={"class_path": "SyntheticTreebank",
                                    "init_args": {"n_valid": 200}})
    try:
        main(["fit", "--config", str(path)])
    except SystemExit as exit_:
        assert not exit_.code
    rows = _metrics(tmp_path)
    span_losses = [r["train/span_loss_step"] for r in rows if "train/span_loss_step" in r]
    assert np.mean(span_losses[-3:]) < 0.7 * np.mean(span_losses[:3])
    uf1 = [r["val/uf1"] for r in rows if "val/uf1" in r][-1]
    sentences = SyntheticTreebank(n_valid=200).sentences("valid")
    golds = [g for g in (evaluation_tree(s.tree, "onlstm") for s in sentences) if g is not None]
    right = ParsingF1()
    right.update([baseline_tree(g.leaves(), "right-branching") for g in golds], golds)
    assert uf1 > 100 * float(right.compute()["uf1_sentence"]) + 10  # percent


def test_a_split_without_gold_serves_none(tmp_path: Path) -> None:
    """PTB-Concat-Syn with the NLTK sample has trees in training only: its validation
    batches carry no span targets, so no zero span loss is logged there."""
    corpus = SyntheticTreebank(n_train=20, n_valid=5, n_test=5)
    data = SynLMDataModule(corpus, eval_batch_size=2, cache_dir=str(tmp_path))
    data._sentences["valid"] = [replace(s, tree=None) for s in corpus.sentences("valid")]
    data.request(frozenset({"spans"}), "SpanHead", {"span_window": 4})
    assert "spans" in data.stream("train")[0]
    assert "spans" not in data.stream("valid")[0]
    assert next(iter(data.val_dataloader())).spans is None
