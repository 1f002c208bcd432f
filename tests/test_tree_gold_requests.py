"""A head that trains on the rows' gold trees (``needs_gold`` ``trees``: TreeReg) gets them or
a one-line refusal at setup: under ``tree_source: random`` the training rows carry the random
trees the other gold fields are built from (with subwords drawn over the words, so that no
word is split); training in stream mode, and a corpus without constituency trees (dependency
only: UD), are refused naming the flag; in sentence mode on a treebank TreeReg trains."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from synlm import SynLMDataModule, SyntaxLM
from synlm.backbones import GPT2, Transformer
from synlm.data.corpora import Corpus
from synlm.data.subwords import TrainedBPE
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.treebanks import UDTreebank
from synlm.errors import InputError
from synlm.heads import TreeRegHead
from synlm.heads.tree_reg import gold_splits, word_starts
from synlm.syntax import Sentence
from synlm.syntax.distances import tree_to_distances

CONLLU = Path(__file__).parent / "fixtures" / "syntax" / "sample.conllu"


def _model(data: SynLMDataModule, gpt2: bool = False) -> SyntaxLM:
    """A tiny float64 LM with TreeReg on layer 0, set up on ``data`` as a fit sets it up
    (``SyntaxLM.setup`` asks the DataModule for its heads' gold)."""
    torch.manual_seed(0)
    backbone = GPT2(n_embd=16, n_head=2, n_layer=2, n_positions=64, dropout=0.0,
                    attention_layer=None) if gpt2 else \
        Transformer(input_size=16, num_layers=2, num_heads=2, ffn_size=32, dropout=0.0,
                    attention_layer=None)
    model = SyntaxLM(backbone, heads=[TreeRegHead(layer=0, fraction=0.5)],
                     vocab_size=data.vocab_size, decoder_bias=False, init_std=0.25,
                     scale_lr_by_window=False)
    model.datamodule = data
    model.setup("fit")
    return model.double()


def _synthetic(tmp_path: Path, **kw: object) -> SynLMDataModule:
    return SynLMDataModule(SyntheticTreebank(n_train=40, n_valid=8, n_test=8), batch_size=6,
                           cache_dir=str(tmp_path), **kw)


def _refusal(data: SynLMDataModule) -> str:
    with pytest.raises(InputError) as err:
        _model(data)
    message = str(err.value)
    assert "\n" not in message
    return message


# --- tree_source: random --------------------------------------------------------------------

@pytest.mark.parametrize("subwords", [False, True])
def test_random_trees_reach_the_head_as_the_distances_are_built(tmp_path: Path,
                                                                subwords: bool) -> None:
    """Each training row's tree is the random tree its distance targets come from (Algorithm
    1 of its tree equals the row's gaps), not the gold one; the head's constituents are its
    splits. With subwords the random tree is over the words: a word's pieces are never split,
    and L_TR is finite."""
    data = _synthetic(tmp_path, mode="sentence", tree_source="random",
                      subwords=TrainedBPE(vocab_size=300) if subwords else None)
    data.request(frozenset({"distances"}), who="DistanceRankingHead")
    model = _model(data, gpt2=subwords)
    assert data.requested == {"distances", "trees"}
    batch = next(iter(data.train_dataloader()))
    gold = {tuple(s.words): s.tree for s in data.sentences("train")}
    changed = 0
    for b, sentence in enumerate(batch.trees):
        n = len(sentence.words)
        gaps = batch.distances[b, 2 : n + 1].tolist()
        assert gaps == [float(d) for d in tree_to_distances(sentence.tree)]
        assert batch.distance_mask[b, : n + 1].all()
        changed += gaps != [float(d) for d in tree_to_distances(gold[tuple(sentence.words)])]
        starts = word_starts(sentence)
        assert all(starts[k + 1] for _, _, k in gold_splits(sentence.tree, starts))
    assert changed >= len(batch.trees) // 2
    if subwords:
        assert any(not all(word_starts(s)) for s in batch.trees)  # some word has pieces
    head = model.heads[0]
    rows, _, starts, spans = head.gold(batch)
    want = [(r, i, j, k) for r, b in enumerate(rows.tolist())
            for i, j, k in gold_splits(batch.trees[b].tree, word_starts(batch.trees[b]))]
    assert spans.tolist() == [list(x) for x in want]
    loss = model(batch).heads["treereg"].loss
    assert loss is not None and torch.isfinite(loss) and loss > 0
    evaluation = next(iter(data.val_dataloader()))
    assert [s.tree for s in evaluation.trees] == [s.tree for s in data.sentences("valid")[:10]]


def test_random_trees_are_the_same_on_every_epoch_and_run(tmp_path: Path) -> None:
    data = _synthetic(tmp_path, mode="sentence", tree_source="random")
    _model(data)
    first = {tuple(s.words): s.tree for b in data.train_dataloader() for s in b.trees}
    again = _synthetic(tmp_path / "again", mode="sentence", tree_source="random")
    _model(again)
    assert first == {tuple(s.words): s.tree for b in again.train_dataloader() for s in b.trees}


# --- refused in one line --------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["stream", "actions"])
def test_training_outside_sentence_mode_is_refused(tmp_path: Path, mode: str) -> None:
    """Stream (or action) training batches carry no trees, whatever ``eval_mode`` serves."""
    message = _refusal(_synthetic(tmp_path, mode=mode, eval_mode="sentence"))
    assert message == ("TreeRegHead needs gold sentences (trees), which only training in "
                       "sentence mode serves (data.eval_mode does not), but data.mode is "
                       f"{mode}; set data.mode: sentence")


@pytest.mark.parametrize("mode", ["sentence", "stream"])
def test_a_dependency_only_corpus_is_refused(tmp_path: Path, mode: str) -> None:
    """UD's sentences have heads and no trees: TreeReg would add no loss."""
    files = {s: str(CONLLU) for s in ("train", "valid", "test")}
    data = SynLMDataModule(UDTreebank(files=files), mode=mode, cache_dir=str(tmp_path))
    message = _refusal(data)
    want = ("TreeRegHead needs gold sentences (trees) but UDTreebank has only dependency gold; "
            "it trains on constituency trees: set data.corpus to a corpus with trees, e.g. "
            "PTBConcatSyn or SyntheticTreebank")
    assert message == want + ("" if mode == "sentence" else "; trees also need data.mode: "
                                                            "sentence")
    assert data.requested == frozenset()


class _Treeless(Corpus):
    """Declares constituency gold, but no sentence has a tree (no ``name``: not listed)."""

    gold = frozenset({"constituency"})

    def sentences(self, split: str) -> list[Sentence]:
        return [Sentence(["a", "b", "c"]), Sentence(["b", "a"])]

    def cache_key(self) -> str:
        return "treeless"


def test_a_training_split_without_any_tree_is_refused(tmp_path: Path) -> None:
    data = SynLMDataModule(_Treeless(), mode="sentence", batch_size=2, cache_dir=str(tmp_path))
    _model(data)
    with pytest.raises(InputError, match=r"^_Treeless declares constituency gold but no train "
                                         r"sentence has a tree \(the trees a head trains on "
                                         r"would all be None\); check its trees$"):
        data.train_dataloader()


# --- the valid setting ------------------------------------------------------------------------

def test_sentence_mode_on_a_treebank_trains_treereg(tmp_path: Path) -> None:
    """Set up as a fit is, Adam on the training step's loss (the LM's and L_TR) of the first
    training batch: L_TR falls below half its start and the gold splits come to score
    highest more often."""
    data = _synthetic(tmp_path, mode="sentence")
    model = _model(data)
    batch = next(iter(data.train_dataloader()))
    assert all(s.tree is not None for s in batch.trees)
    before = model(batch).heads["treereg"]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with pytest.warns(UserWarning, match="self.log"):  # no trainer to log to
        for _ in range(30):
            optimizer.zero_grad()
            model.training_step(batch, 0).backward()
            optimizer.step()
    after = model(batch).heads["treereg"]
    assert after.loss < 0.5 * before.loss
    assert after.metrics["treereg_acc"] > before.metrics["treereg_acc"]
