"""Subword vocabularies, gold projected onto subwords, word-level perplexity, and
token-budget batching."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from nltk import Tree

from synlm.data.batching import TokenBudgetLoader, token_budget_batches
from synlm.data.corpora import TextCorpus
from synlm.data.datamodule import SynLMDataModule
from synlm.data.subwords import (
    SPACE,
    PretrainedTokenizer,
    SentencePieceModel,
    SentencePieceVocab,
    SubwordVocab,
    TrainedBPE,
    TrainedUnigram,
    load_vocab,
)
from synlm.data.synthetic import SyntheticTreebank
from synlm.metrics.perplexity import Perplexity
from synlm.syntax import Sentence
from synlm.syntax.subwords import project_sentence


def test_gold_is_projected_onto_subwords() -> None:
    """A word of several subwords becomes a WORD constituent; its first subword takes the
    word's head, mapped to the head word's last subword; later subwords attach leftwards."""
    s = Sentence(["the", "cats", "sat"], Tree.fromstring("(S (NP (DT the) (NNS cats)) (VP sat))"),
                 heads=[2, 3, 0], tags=["DT", "NNS", "VBD"])
    p = project_sentence(s, ["Ġthe", "Ġcat", "s", "Ġsat"], [0, 1, 1, 2])
    assert str(p.tree) == "(S (NP (DT Ġthe) (NNS (WORD Ġcat s))) (VP Ġsat))"
    assert p.heads == [3, 4, 2, 0]
    assert p.tags == ["DT", "NNS", "NNS", "VBD"]
    assert p.word_index == [0, 1, 1, 2]
    with pytest.raises(ValueError, match="do not cover its 3 words"):
        project_sentence(s, ["Ġthe", "Ġsat"], [0, 2])


class Lines(TextCorpus):
    """A corpus of three files written by the test."""

    name = "lines"
    folder = "lines"

    def __init__(self, data_dir: str, text: str) -> None:
        super().__init__(data_dir)
        for split in ("train", "valid", "test"):
            (Path(data_dir) / "lines").mkdir(parents=True, exist_ok=True)
            (Path(data_dir) / "lines" / f"{split}.txt").write_text(text)

    @property
    def files(self):  # type: ignore[override]
        from synlm.data.files import RemoteFile

        return {s: RemoteFile(f"{s}.txt", "", "0" * 64) for s in ("train", "valid", "test")}


def test_trained_bpe_splits_words_and_decodes_back(tmp_path: Path) -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=200, n_valid=20, n_test=20),
                         subwords=TrainedBPE(vocab_size=300), cache_dir=str(tmp_path))
    vocab = dm.vocab
    assert isinstance(vocab, SubwordVocab) and len(vocab) == 300
    assert vocab.eos_id == 0 and vocab.unk_id is None
    for raw, sub in zip(dm.corpus_sentences("valid"), dm.sentences("valid")):
        assert vocab.text(vocab.encode(sub.words)) == " ".join(raw.words)
        assert sub.tree.leaves() == sub.words  # the projected tree covers the subwords
    assert any(len(s.words) > len(r.words)
               for s, r in zip(dm.sentences("valid"), dm.corpus_sentences("valid")))
    assert load_vocab(vocab.to_saved()).itos == vocab.itos  # checkpoints


def test_the_bpe_cache_is_reused_and_rebuilt_when_the_corpus_changes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    def bpe_files() -> list[Path]:
        return sorted(cache.rglob("bpe-*.json"))

    text = "the cat sat on the mat\nthe dog ran\n" * 20
    first = SynLMDataModule(Lines(str(tmp_path / "a"), text), subwords=TrainedBPE(vocab_size=280),
                            cache_dir=str(cache)).vocab
    (path,) = bpe_files()
    stamp = path.stat().st_mtime_ns
    again = SynLMDataModule(Lines(str(tmp_path / "a"), text), subwords=TrainedBPE(vocab_size=280),
                            cache_dir=str(cache)).vocab
    assert again.itos == first.itos and path.stat().st_mtime_ns == stamp  # read, not retrained
    changed = SynLMDataModule(Lines(str(tmp_path / "a"), text + "zebras grazed\n" * 90),
                              subwords=TrainedBPE(vocab_size=280), cache_dir=str(cache)).vocab
    assert len(bpe_files()) == 2
    assert "Ġzebras" in changed.stoi and "Ġzebras" not in first.stoi


def test_a_pretrained_tokenizer_loads_from_a_local_directory(tmp_path: Path) -> None:
    """GPT-2's tokenizer class, saved with save_pretrained: ids are the tokenizer's own, the
    eos token is the tokenizer's, every word keeps its leading-space form."""
    from transformers import GPT2TokenizerFast

    trained = TrainedBPE(vocab_size=300).vocab(
        [s.words for s in SyntheticTreebank(n_train=100).sentences("train")], tmp_path)
    hf = GPT2TokenizerFast(tokenizer_object=trained.tokenizer, eos_token="<eos>")
    hf.save_pretrained(tmp_path / "tok")
    vocab = PretrainedTokenizer(str(tmp_path / "tok")).vocab([], tmp_path)
    assert vocab.eos == "<eos>" and len(vocab) == len(hf)
    ((pieces, word_index),) = vocab.split([["the", "cat", "saw"]])
    assert vocab.encode(pieces) == hf.encode(" the cat saw")
    assert word_index == sorted(word_index) and word_index[-1] == 2


def test_trained_unigram_is_a_sentencepiece_model_with_bytes_for_unseen_characters(
        tmp_path: Path) -> None:
    """``TrainedUnigram``: a SentencePiece unigram model of the training words, cached as its
    ``.model`` file (which ``SentencePieceModel`` reads back), ``<eos>`` id 0, ``▁`` before
    each word's first piece, a character it never saw spelled in bytes (no piece unknown);
    decoding gives the words back, and a checkpoint rebuilds it."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=200, n_valid=20, n_test=20),
                         subwords=TrainedUnigram(vocab_size=320), cache_dir=str(tmp_path))
    vocab = dm.vocab
    assert isinstance(vocab, SentencePieceVocab) and not vocab.suffix
    assert vocab.eos_id == 0 and 300 < len(vocab) <= 320
    for raw, sub in zip(dm.corpus_sentences("valid"), dm.sentences("valid")):
        assert vocab.text(vocab.encode(sub.words)) == " ".join(raw.words)
    ((pieces, word_index),) = vocab.split([["the", "Zébra\u2603"]])
    ids = vocab.encode(pieces)
    assert pieces[0].startswith(SPACE) and "<0xE2>" in pieces and word_index[0] == 0
    assert vocab.word_ends(ids) == [word_index[k] != word_index[k + 1]
                                    for k in range(len(ids) - 1)] + [True]
    assert not any(vocab.is_unknown(i) for i in ids)
    assert vocab.text(ids) == "the Zébra\u2603"
    (path,) = sorted(tmp_path.rglob("unigram-320-*.model"))
    assert SentencePieceModel(str(path), eos="<eos>").vocab([], tmp_path).itos == vocab.itos
    assert load_vocab(vocab.to_saved()).itos == vocab.itos
    from synlm.hf_export.tokenizer import build_tokenizer

    with pytest.raises(ValueError, match="subwords are a SentencePiece model"):
        build_tokenizer(vocab, "none")
    with pytest.raises(ValueError, match=r"vocab_size=280\) cannot be trained.*284"):
        TrainedUnigram(vocab_size=280).vocab([s.words for s in dm.corpus_sentences("train")],
                                             tmp_path)


def test_a_sentencepiece_model_without_an_eos_piece_is_one_line(tmp_path: Path) -> None:
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["the cat sat", "a dog ran"] * 20),
        model_prefix=str(tmp_path / "m"), vocab_size=15, eos_id=-1, minloglevel=2)
    with pytest.raises(ValueError, match="no piece </s> to end a sentence with"):
        SentencePieceModel(str(tmp_path / "m.model")).vocab([], tmp_path)
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePieceModel(str(tmp_path / "bad.model")).vocab([], tmp_path)


def test_bad_bpe_size_is_one_line() -> None:
    with pytest.raises(ValueError, match="leaves no room for merges"):
        TrainedBPE(vocab_size=200)


def test_word_ends_count_every_word_and_eos(tmp_path: Path) -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=50, n_valid=20, n_test=20), mode="sentence",
                         subwords=TrainedBPE(vocab_size=300), cache_dir=str(tmp_path),
                         eval_batch_size=7)
    words = sum(len(s.words) + 1 for s in dm.corpus_sentences("valid"))
    tokens = sum(len(s.words) + 1 for s in dm.sentences("valid"))
    ends = sum(int((b.word_ends & b.mask).sum()) for b in dm.val_dataloader())
    assert ends == words < tokens
    stream = SynLMDataModule(SyntheticTreebank(n_train=50, n_valid=20, n_test=20),
                             subwords=TrainedBPE(vocab_size=300), cache_dir=str(tmp_path))
    assert int(stream.stream("valid")[0]["word_ends"].sum()) == words


def test_word_perplexity_divides_by_words() -> None:
    """exp(Σ NLL over subwords / words): 4 subwords of 2 words with NLL 1 each -> e²."""
    nll = torch.ones(1, 4)
    mask = torch.tensor([[True, True, True, True]])
    ends = torch.tensor([[False, True, False, True]])
    ppl, word_ppl = Perplexity(), Perplexity()
    ppl.update(nll, mask)
    word_ppl.update(nll, mask, ends)
    assert ppl.compute().item() == pytest.approx(math.e)
    assert word_ppl.compute().item() == pytest.approx(math.e ** 2)


def test_token_budget_batches_cover_every_item_within_the_budget() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=500)
    batches = token_budget_batches(lengths, 120, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for b in batches:
        assert len(b) * lengths[b].max() <= 120
    # greedy: adding the next item by length would have broken the budget
    assert sum(len(b) for b in batches) / len(batches) > 5
    with pytest.raises(ValueError, match="item 3 has 50 tokens, more than data.max_tokens=40"):
        token_budget_batches(np.array([3, 4, 5, 50]), 40, rng)


def test_token_budget_loader_shares_batches_between_ranks_and_resumes() -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=100, n_valid=10, n_test=10), mode="sentence",
                         max_tokens=64)
    arrays, bounds = dm.stream("train", "sentence")
    from synlm.data.batching import UnitDataset

    dataset = UnitDataset(arrays, bounds, dm.sentences("train"))
    lengths = np.diff(bounds)
    one = TokenBudgetLoader(dataset, lengths, 64, seed=1)
    ranks = [TokenBudgetLoader(dataset, lengths, 64, seed=1, rank=r, world_size=2)
             for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == math.ceil(len(one) / 2)
    for batch in one:
        assert batch.tokens.numel() <= 64
    seen = [b.tokens for b in one]
    resumed = TokenBudgetLoader(dataset, lengths, 64, seed=1)
    resumed.load_state_dict({"epoch": 0, "consumed": 3})
    assert next(b.tokens for b in resumed).equal(seen[3])
    next_epoch = TokenBudgetLoader(dataset, lengths, 64, seed=1, epoch=1)
    assert not all(a.shape == b.tokens.shape and a.equal(b.tokens)
                   for a, b in zip(seen, next_epoch))
    assert isinstance(dm.train_dataloader(), TokenBudgetLoader)
