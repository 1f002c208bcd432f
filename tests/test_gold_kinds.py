"""Corpora declare their gold kinds and word normalisation; the DataModule refuses a gold
field whose kind the corpus lacks in one line naming head, corpus and kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import synlm.data.treebanks
from synlm.data.corpora import GOLD_KINDS, PTB, Corpus, WikiText2
from synlm.data.datamodule import SynLMDataModule
from synlm.data.layout_tokens import FIELD_KINDS
from synlm.data.normalization import NORMALIZATIONS, normalize_word, normalizer
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.treebanks import CTBSepsent, PTBConcatSyn, PTBSepsent, UDTreebank
from synlm.outputs import GOLD_FIELDS
from synlm.registry import subclasses
from synlm.syntax import Sentence

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"


def named_corpora() -> list[type[Corpus]]:
    return [cls for cls in subclasses(Corpus) if "name" in vars(cls)]


def ud(tmp_path: Path, **kw) -> SynLMDataModule:
    files = {s: str(FIXTURES / "sample.conllu") for s in ("train", "valid", "test")}
    return SynLMDataModule(UDTreebank(files=files), cache_dir=str(tmp_path), **kw)


def test_every_corpus_declares_gold_and_a_valid_normalization() -> None:
    corpora = named_corpora()
    assert {PTB, WikiText2, SyntheticTreebank, PTBConcatSyn, PTBSepsent, CTBSepsent,
            UDTreebank} <= set(corpora)
    for cls in corpora:
        assert isinstance(cls.gold, frozenset) and cls.gold <= GOLD_KINDS, cls
        assert cls.normalization in NORMALIZATIONS, cls
        assert not hasattr(cls, "has_trees"), cls


def test_declared_gold_per_corpus() -> None:
    both = frozenset({"constituency", "dependency"})
    assert PTB.gold == WikiText2.gold == frozenset()
    assert SyntheticTreebank.gold == PTBConcatSyn.gold == PTBSepsent.gold == both
    assert CTBSepsent.gold == both
    assert UDTreebank.gold == frozenset({"dependency"})
    assert PTB.normalization == PTBConcatSyn.normalization == "ptb"
    assert {c.normalization for c in (WikiText2, SyntheticTreebank, PTBSepsent, CTBSepsent,
                                      UDTreebank)} == {"none"}


def test_field_kinds_cover_the_gold_fields() -> None:
    assert set(FIELD_KINDS) == GOLD_FIELDS - {"trees"}
    assert set(FIELD_KINDS.values()) == GOLD_KINDS


def test_normalizers() -> None:
    ptb = normalizer("ptb")
    assert ptb("1,000") == "N" and ptb("Hello") == "hello" and ptb("%") == "N"
    assert ptb("3\\/4") == "N" and ptb("$") == "$"
    assert normalizer("none")("Hello") == "Hello"
    assert synlm.data.treebanks.normalize_word is normalize_word  # synlm.commands.parse imports it
    with pytest.raises(ValueError) as err:
        normalizer("nfkc")
    message = str(err.value)
    assert "'nfkc'" in message and "none" in message and "ptb" in message
    assert "\n" not in message


def test_corpus_normalize_and_datamodule_normalization(tmp_path: Path) -> None:
    assert PTB("/nonexistent").normalize("1,000") == "N"
    assert PTB("/nonexistent").normalize("Hello") == "hello"
    assert UDTreebank(files={}).normalize("Hello") == "Hello"
    assert SynLMDataModule(PTBConcatSyn("/nonexistent")).normalization == "ptb"
    assert ud(tmp_path).normalization == "none"


def test_ud_refuses_constituency_fields_in_one_line(tmp_path: Path) -> None:
    dm = ud(tmp_path, mode="sentence")
    for field in ("distances", "spans"):
        with pytest.raises(ValueError) as err:
            dm.request(frozenset({field}), who="DistanceRankingHead")
        message = str(err.value)
        assert message.startswith(f"DistanceRankingHead needs constituency gold ({field}) but "
                                  "UDTreebank has only dependency gold")
        assert "PTBConcatSyn" in message and "\n" not in message
    assert dm.requested == frozenset()


def test_ud_serves_dependency_targets(tmp_path: Path) -> None:
    dm = ud(tmp_path, mode="sentence", eval_batch_size=2)
    assert dm.gold_fields() == frozenset({"dep_targets", "dep_path_lengths"})
    dm.request(frozenset({"dep_targets"}), who="DMLMHead")
    batch = next(iter(dm.val_dataloader()))
    assert batch.dep_mask is not None and batch.dep_mask.any()
    assert batch.distances is None and batch.spans is None
    assert batch.trees[0].heads == [2, 3, 0, 3, 3] and batch.trees[0].tree is None


def test_synthetic_serves_both_kinds(tmp_path: Path) -> None:
    corpus = SyntheticTreebank(n_train=60, n_valid=10, n_test=10)
    dm = SynLMDataModule(corpus, mode="sentence", eval_batch_size=4, cache_dir=str(tmp_path))
    assert dm.gold_fields() == GOLD_FIELDS
    dm.request(GOLD_FIELDS, who="test")
    batch = next(iter(dm.val_dataloader()))
    for mask in (batch.distance_mask, batch.span_mask, batch.dep_mask):
        assert mask.any()
    stream = SynLMDataModule(corpus, cache_dir=str(tmp_path))
    assert stream.gold_fields() == GOLD_FIELDS - {"trees", "path_lengths", "dep_path_lengths"}


def test_ptb_has_no_gold(tmp_path: Path) -> None:
    dm = SynLMDataModule(PTB("/nonexistent"), mode="sentence", cache_dir=str(tmp_path))
    assert dm.gold_fields() == frozenset()
    with pytest.raises(ValueError, match=r"^DMLMHead needs dependency gold \(dep_targets\) but "
                                         r"PTB has no gold syntax; use .*UDTreebank"):
        dm.request(frozenset({"dep_targets"}), who="DMLMHead")
    with pytest.raises(ValueError, match=r"^ParsingHead needs gold sentences \(trees\) but PTB "
                                         r"has no gold syntax"):
        dm.request(frozenset({"trees"}), who="ParsingHead")


def test_trees_to_train_on_need_sentence_rows(tmp_path: Path) -> None:
    """A head that trains on the rows' trees (``trees`` in its ``needs_gold``, TreeReg) needs
    training in sentence mode: evaluation rows alone (``eval_mode: sentence``) would leave it
    no loss. One line naming ``data.mode``."""
    corpus = SyntheticTreebank(n_train=20, n_valid=5, n_test=5)
    for eval_mode in ("stream", "sentence"):
        dm = SynLMDataModule(corpus, mode="stream", eval_mode=eval_mode, cache_dir=str(tmp_path))
        with pytest.raises(ValueError) as err:
            dm.request(frozenset({"distances", "trees"}), who="ParsingHead")
        message = str(err.value)
        assert message.startswith("ParsingHead needs gold sentences (trees), which only "
                                  "training in sentence mode serves")
        assert message.endswith("set data.mode: sentence") and "\n" not in message
    SynLMDataModule(corpus, mode="sentence",
                    cache_dir=str(tmp_path)).request(frozenset({"trees"}), who="ParsingHead")
    with pytest.raises(ValueError, match=r"^DistanceRankingHead needs constituency gold "
                                         r"\(distances, trees\) but UDTreebank .*"
                                         r"trees also need data.mode: sentence$"):
        ud(tmp_path).request(frozenset({"distances", "trees"}), who="DistanceRankingHead")


def test_unknown_field_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^X needs \['parses'\], which are not gold fields"):
        ud(tmp_path).request(frozenset({"parses"}), who="X")


class _TreelessClaim(Corpus):
    """Declares constituency gold but its sentences carry none (no ``name``: not listed)."""

    gold = frozenset({"constituency", "dependency"})

    def sentences(self, split: str) -> list[Sentence]:
        return [Sentence(["a", "b", "c"]), Sentence(["b", "a"])]

    def cache_key(self) -> str:
        return "treeless-claim"


def test_declared_kind_missing_from_the_training_split_raises(tmp_path: Path) -> None:
    dm = SynLMDataModule(_TreelessClaim(), batch_size=1, bptt=4, cache_dir=str(tmp_path))
    dm.request(frozenset({"distances"}), who="DistanceRankingHead")
    with pytest.raises(ValueError, match=r"^_TreelessClaim declares constituency gold but no "
                                         r"train sentence has it \(distances would be all"):
        dm.train_dataloader()


def test_a_corpus_with_an_unknown_kind_or_normalization_is_refused() -> None:
    with pytest.raises(TypeError, match="gold kinds are"):
        type("Bad", (Corpus,), {"gold": frozenset({"semantic"})})
    with pytest.raises(TypeError, match="is not one of"):
        type("Bad", (Corpus,), {"normalization": "nfkc"})


def test_random_tree_source_keeps_dependency_masks(tmp_path: Path) -> None:
    corpus = SyntheticTreebank(n_train=30, n_valid=6, n_test=6)
    dm = SynLMDataModule(corpus, mode="sentence", tree_source="random", cache_dir=str(tmp_path))
    dm.request(frozenset({"dep_targets"}), who="test")
    assert torch.as_tensor(dm.stream("train")[0]["dep_mask"]).any()
