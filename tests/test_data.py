"""Corpora, vocabulary and batching (stream and sentence modes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from staged import staged
from synlm.data.batching import Columns, awd_window_lengths, fixed_window_lengths
from synlm.data.corpora import PTB
from synlm.data.datamodule import SynLMDataModule
from synlm.data.files import CorpusError
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import Vocab


def small_corpus(**kw) -> SyntheticTreebank:
    return SyntheticTreebank(n_train=200, n_valid=40, n_test=40, **kw)


def test_synthetic_treebank_is_seeded_and_consistent() -> None:
    a, b = small_corpus().sentences("train"), small_corpus().sentences("train")
    assert [s.words for s in a] == [s.words for s in b]
    assert [s.words for s in a] != [s.words for s in small_corpus(seed=7).sentences("train")]
    assert [s.words for s in a] != [s.words for s in small_corpus().sentences("valid")]
    for s in a:
        assert s.tree.leaves() == s.words and len(s.tags) == len(s.words)
        assert s.heads.count(0) == 1  # one root
        assert all(0 <= h <= len(s.words) and h != i + 1 for i, h in enumerate(s.heads))
    labels = {t.label() for s in a for t in s.tree.subtrees()}
    assert {"S", "NP", "VP", "PP"} <= labels


def test_synthetic_heads_form_a_tree() -> None:
    for s in small_corpus().sentences("train")[:50]:
        for i in range(1, len(s.words) + 1):  # every word reaches the root without a cycle
            seen, j = set(), i
            while j:
                assert j not in seen
                seen.add(j)
                j = s.heads[j - 1]


def test_vocab_first_appearance_order_and_unknowns() -> None:
    vocab = Vocab.build([["b", "a"], ["a", "c"]])
    assert vocab.itos == ["<eos>", "b", "a", "c", "<unk>"]
    assert vocab.encode(["c", "zzz"]) == [3, vocab.unk_id]


def test_vocab_is_cached(tmp_path: Path) -> None:
    dm = SynLMDataModule(small_corpus(), cache_dir=str(tmp_path))
    assert dm.vocab_size > 10
    cached = list(tmp_path.rglob("vocab.json"))
    assert len(cached) == 1
    assert SynLMDataModule(small_corpus(), cache_dir=str(tmp_path)).vocab.itos == dm.vocab.itos


def test_stream_layout_units_and_targets() -> None:
    dm = SynLMDataModule(small_corpus())
    arrays, bounds = dm.stream("train")
    tokens = arrays["tokens"]
    first = dm.sentences("train")[0]
    assert tokens[0] == dm.vocab.eos_id
    assert dm.vocab.decode(tokens[1 : len(first.words) + 1]) == first.words
    assert tokens[len(first.words) + 1] == dm.vocab.eos_id
    assert (tokens[bounds] == dm.vocab.eos_id).all()


def test_columns_are_contiguous_and_disjoint_across_ranks() -> None:
    stream = {"tokens": np.arange(103), "sentence_ids": np.arange(103)}
    single = Columns.cut(stream, 4)
    assert single.arrays["tokens"].shape == (4, 25)
    assert torch.equal(single.arrays["tokens"][1], torch.arange(25, 50))  # AWD batchify
    ranks = [Columns.cut(stream, 2, rank=r, world_size=2).arrays["tokens"] for r in (0, 1)]
    assert torch.equal(torch.cat(ranks), single.arrays["tokens"])  # same cut, split by rank
    window = single.window(3, 5)
    assert torch.equal(window.targets, window.tokens + 1)


def test_awd_window_lengths_follow_the_rule() -> None:
    rng = np.random.default_rng(0)
    lengths = awd_window_lengths(100_000, 70, rng)
    assert sum(lengths) == 100_000 - 1 and min(lengths[:-1]) >= 5
    short = np.mean(np.array(lengths[:-1]) < 52)  # the bptt/2 = 35 branch
    assert 0.03 < short < 0.07
    assert 66 < np.mean(lengths[:-1]) < 70
    assert fixed_window_lengths(30, 7) == [7, 7, 7, 7, 1]


def test_train_loader_is_stateful_and_redrawn_each_epoch() -> None:
    dm = SynLMDataModule(small_corpus(), batch_size=4, bptt=10)
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader)
    resumed = dm.train_dataloader()
    resumed.load_state_dict({"epoch": 0, "consumed": 3})
    assert torch.equal(next(iter(resumed)).tokens, batches[3].tokens)
    assert torch.equal(next(iter(dm.train_dataloader())).tokens, batches[0].tokens)


def test_sentence_mode_pads_and_masks() -> None:
    dm = SynLMDataModule(small_corpus(), mode="sentence", eval_batch_size=5)
    batch = next(iter(dm.val_dataloader()))
    sentences = dm.sentences("valid")[:5]
    assert batch.lengths.tolist() == [len(s.words) + 1 for s in sentences]
    assert batch.mask.sum() == batch.lengths.sum()
    for row, s in enumerate(sentences):
        n = len(s.words)
        assert dm.vocab.decode(batch.targets[row, :n].tolist()) == s.words
        assert batch.targets[row, n] == dm.vocab.eos_id and batch.tokens[row, 0] == 0
    assert batch.trees[0] is sentences[0]


def test_missing_corpus_names_file_url_and_env(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as err:
        PTB(str(tmp_path)).sentences("train")
    message = str(err.value)
    assert str(tmp_path / "ptb" / "ptb.train.txt") in message
    assert "https://" in message and "SYNLM_DATA_DIR" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "empty file"), (b"  \n", "empty file"),
     (b"fine line\nbad \xff byte\n", "ptb.valid.txt:2: not UTF-8")],
)
def test_bad_corpus_files_name_file_and_line(tmp_path: Path, content: bytes, expected: str
                                             ) -> None:
    (tmp_path / "ptb").mkdir()
    (tmp_path / "ptb" / "ptb.valid.txt").write_bytes(content)
    with pytest.raises(CorpusError, match=expected):
        PTB(str(tmp_path)).sentences("valid")


def test_request_fails_naming_the_head_and_corpus() -> None:
    dm = SynLMDataModule(PTB("/nonexistent"))
    with pytest.raises(ValueError, match="DistanceRankingHead needs.*PTB"):
        dm.request(frozenset({"distances"}), who="DistanceRankingHead")


def test_staged_corpora_match_their_checksums() -> None:
    from synlm.data.corpora import WikiText2
    from synlm.data.files import sha256_of

    for name, kind in (("ptb", PTB), ("wikitext-2", WikiText2)):
        corpus = kind(str(staged(name).parent))
        for split, remote in corpus.files.items():
            assert sha256_of(corpus.path(split)) == remote.sha256
    assert len(PTB(str(staged("ptb").parent)).sentences("valid")) == 3370


def test_random_tree_ablation_changes_targets_not_masks() -> None:
    fields = frozenset({"distances", "trees"})
    gold, random = (SynLMDataModule(small_corpus(), mode="sentence", tree_source=source)
                    for source in ("gold", "random"))
    for dm in (gold, random):
        dm.request(fields, who="test")
    a, b = (next(iter(dm.val_dataloader())) for dm in (gold, random))
    assert torch.equal(a.distance_mask, b.distance_mask)
    assert not torch.equal(a.distances, b.distances)
    within = a.distance_mask.clone()
    within[:, :2] = False  # gaps inside sentences (rows 0-1 hold the boundary)
    assert (b.distances[within] < random.boundary).all()
    assert a.trees[0] == b.trees[0]  # evaluation stays on the gold trees
    again = SynLMDataModule(small_corpus(), mode="sentence", tree_source="random")
    again.request(fields, who="test")
    assert torch.equal(next(iter(again.val_dataloader())).distances, b.distances)


def test_dependency_targets_are_token_ids_and_masked_past_the_column() -> None:
    dm = SynLMDataModule(small_corpus(), batch_size=2, bptt=8, variable_bptt=False)
    dm.request(frozenset({"dep_targets"}), who="test")
    columns = dm.train_dataloader().columns
    tokens, offsets = columns.arrays["tokens"], columns.arrays["dep_offsets"]
    whole = columns.window(0, columns.length - 1)
    positions = torch.arange(columns.length - 1)[None, :, None] + offsets[:, :-1]
    stored = columns.arrays["dep_mask"][:, :-1]
    assert torch.equal(whole.dep_mask, stored & (positions < columns.length))
    kept = whole.dep_mask
    ids = tokens.gather(1, positions.clamp(max=columns.length - 1).flatten(1)).view_as(kept)
    assert torch.equal(whole.dep_targets[kept], ids[kept])
    first = columns.window(0, 4)  # row 0 is <eos> standing for ROOT: its dependent is the root
    sentence = dm.sentences("train")[0]
    root = sentence.heads.index(0)
    assert first.dep_mask[0, 0].any()
    assert dm.vocab.itos[int(first.dep_targets[0, 0, 0])] == sentence.words[root]


def test_batch_moves_its_tensors_and_keeps_its_trees() -> None:
    dm = SynLMDataModule(small_corpus(), mode="sentence", eval_batch_size=3)
    batch = next(iter(dm.val_dataloader()))
    moved = batch.to("meta")
    assert moved.tokens.device.type == "meta" and moved.mask.device.type == "meta"
    assert moved.trees is batch.trees and moved.distances is None
