"""The sentence-scoring API of the syntactic evaluation (synlm.tse.scoring): scores are the
model's own log-probabilities, summed per word; batched equals one at a time; every backbone,
a distribution-replacing head and subword vocabularies alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from backbone_cases import CASES, CAUSAL
from synlm.backbones import AWDLSTM
from synlm.data.normalization import ptb_text_words
from synlm.data.subwords import TrainedBPE
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.heads import DependencyMixtureHead
from synlm.lm import SyntaxLM
from synlm.outputs import Batch
from synlm.tse.scoring import ModelScorer
from synlm.tse.syntaxgym import evaluate_suite, read_suite

WORDS = ["<eos>", "<unk>", "the", "cat", "sat", "is", "n't", "here", "N", "dogs", "bark"]
SENTENCES = [["the", "cat", "sat"], ["dogs", "bark", "here", "the", "cat", "is", "n't", "N"],
             ["the", "zebra", "sat"], [], ["cat"]]


def word_model(backbone, heads=()) -> SyntaxLM:
    torch.manual_seed(0)
    model = SyntaxLM(backbone, heads=list(heads), vocab_size=len(WORDS)).eval()
    model.vocab, model.normalization = Vocab(WORDS), "ptb"
    return model


def doubles(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.double)


def gathered(model: SyntaxLM, ids: list[int]) -> torch.Tensor:
    """log p of ``ids`` then <eos> after <eos>, from ``log_probs`` (B, T, V) by hand."""
    eos = model.vocab.eos_id
    row = torch.tensor([[eos, *ids, eos]])
    return model.log_probs(row[:, :-1])[0].gather(1, row[0, 1:, None])[:, 0]


@pytest.mark.parametrize("case", CAUSAL)
def test_scores_are_the_models_log_probs_and_batching_changes_nothing(case: str) -> None:
    """Every causal backbone (the bidirectional ones are masked LMs, scored by
    pseudo-log-likelihood: tests/test_masked_objective.py): each token's score equals
    ``log_probs`` gathered at it (one row, no padding); three sentences a batch (sorted,
    padded) equal one at a time."""
    model = word_model(CASES[case]())
    batched = ModelScorer(model, batch_size=3).score(SENTENCES)
    single = ModelScorer(model, batch_size=1).score(SENTENCES)
    for words, b, s in zip(SENTENCES, batched, single):
        expected = gathered(model, model.vocab.encode(words))
        torch.testing.assert_close(doubles(*b.token_log_probs, b.eos_log_prob),
                                   expected.double(), rtol=0, atol=2e-5)
        assert b.words == tuple(words) and b.word_log_probs == pytest.approx(
            s.word_log_probs, abs=2e-5)
        assert b.total(eos=True) == pytest.approx(float(expected.double().sum()), abs=1e-4)
        assert b.total() == pytest.approx(b.total(eos=True) - b.eos_log_prob)


@pytest.mark.parametrize("case", sorted(set(CASES) - set(CAUSAL)))
def test_next_token_scores_of_a_bidirectional_backbone_are_refused(case: str) -> None:
    """A masked LM has no next-token distribution: its scores are a pseudo-log-likelihood,
    so the next-token scorer stops in one line instead of scoring stream windows."""
    model = word_model(CASES[case]())
    with pytest.raises(InputError, match="attends both ways") as caught:
        ModelScorer(model, batch_size=1).score(SENTENCES[:1])
    assert "\n" not in str(caught.value)


def test_a_replacing_head_scores_its_own_distribution() -> None:
    """DM-LSTM: the mixture's log-probabilities, not the decoder's."""
    model = word_model(AWDLSTM(16, 24, 2, dropout_input=0.0, dropout_hidden=0.0,
                               dropout_output=0.0, weight_drop=0.0),
                       [DependencyMixtureHead("mixture", context=4)])
    scored = ModelScorer(model, batch_size=2).score(SENTENCES)
    ids = model.vocab.encode(SENTENCES[1])
    expected = gathered(model, ids)
    torch.testing.assert_close(doubles(*scored[1].token_log_probs, scored[1].eos_log_prob),
                               expected.double(), rtol=0, atol=2e-5)
    eos = model.vocab.eos_id
    row = torch.tensor([[eos, *ids, eos]])
    with torch.no_grad():
        logits = model(Batch(tokens=row[:, :-1], targets=row[:, 1:],
                             mask=torch.ones_like(row[:, 1:]).bool())).logits
    decoder = logits[0].log_softmax(-1).gather(1, row[0, 1:, None])[:, 0]
    assert (decoder.double() - expected.double()).abs().max() > 1e-3


def test_unknown_words_are_flagged_and_scored_as_unk() -> None:
    model = word_model(CASES["AWDLSTM"]())
    scored = ModelScorer(model).score([["the", "zebra", "sat"]])[0]
    assert scored.unknown == (False, True, False)
    assert scored.tokens == ("the", "<unk>", "sat")
    unk = ModelScorer(model).score([["the", "<unk>", "sat"]])[0]
    assert scored.word_log_probs == pytest.approx(unk.word_log_probs, abs=1e-6)


def test_benchmark_text_is_normalised_as_the_training_corpus() -> None:
    """Mikolov's PTB: Treebank tokens (clitics split), punctuation gone, lowercase, N."""
    scorer = ModelScorer(word_model(CASES["AWDLSTM"]()))
    assert scorer.words("The cat isn't here, 45% \"said\" Mr. Smith's dogs.") == [
        "the", "cat", "is", "n't", "here", "N", "N", "said", "mr.", "smith", "'s", "dogs"]
    assert scorer.words("?!") == []
    scorer.model.normalization = "none"
    assert ModelScorer(scorer.model).words("The cat isn't here.") == [
        "The", "cat", "is", "n't", "here", "."]


def test_subword_log_probs_are_summed_per_word(tmp_path: Path) -> None:
    """A byte-level BPE model: each word's score is the sum of its subwords' scores, which
    equal ``log_probs`` gathered at them; no word is unknown; batched equals single."""
    train = [s.words for s in SyntheticTreebank(n_train=200).sentences("train")]
    vocab = TrainedBPE(vocab_size=300).vocab(train, tmp_path)
    torch.manual_seed(0)
    model = SyntaxLM(CASES["GPT2"](), vocab_size=len(vocab)).eval()
    model.vocab, model.normalization = vocab, "none"
    sentences = [train[0], ["unseenword", "xyzzy"], train[1][:3]]
    batched = ModelScorer(model, batch_size=3).score(sentences)
    single = ModelScorer(model, batch_size=1).score(sentences)
    for words, b, s in zip(sentences, batched, single):
        tokens, word_index = vocab.split([words])[0]
        assert len(tokens) > len(words) or words != sentences[1]
        expected = gathered(model, [vocab.stoi[t] for t in tokens]).double()
        per_word = torch.zeros(len(words), dtype=torch.double).index_add_(
            0, torch.tensor(word_index), expected[:-1])
        assert b.tokens == tuple(tokens)
        torch.testing.assert_close(doubles(*b.word_log_probs), per_word, rtol=0, atol=2e-5)
        assert b.word_log_probs == pytest.approx(s.word_log_probs, abs=2e-5)
        assert b.eos_log_prob == pytest.approx(float(expected[-1]), abs=2e-5)
        assert not any(b.unknown)


def test_a_model_without_vocabulary_or_a_bad_batch_size_is_one_line() -> None:
    model = SyntaxLM(CASES["AWDLSTM"](), vocab_size=5)
    with pytest.raises(ValueError, match="no vocabulary"):
        ModelScorer(model)
    model.vocab = Vocab(WORDS[:5])
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        ModelScorer(model, batch_size=0)


@pytest.mark.parametrize("kind", ["word", "subword"])
def test_subordination_regions_through_a_real_model(kind: str, tmp_path: Path) -> None:
    """The staged ``subordination`` suite through ``ModelScorer`` and ``evaluate_suite``: a
    PTB word model drops the ``"."`` region's text and the end of the sentence lands there
    (after ``book`` ends region 2); a subword model keeps ``"."`` as a word, and the end
    joins it in the last region. Every region equals the words' and the end's log-probs by
    hand."""
    suite = read_suite(Path(__file__).parent / "fixtures" / "syntaxgym" / "subordination.json")
    suite = replace(suite, items=suite.items[:2])
    if kind == "word":
        words = sorted({w for item in suite.items for c in item.conditions
                        for w in ptb_text_words(" ".join(c.contents))})
        model = SyntaxLM(CASES["AWDLSTM"](), vocab_size=len(words) + 2).eval()
        model.vocab, model.normalization = Vocab(["<eos>", "<unk>", *words]), "ptb"
    else:
        train = [s.words for s in SyntheticTreebank(n_train=200).sentences("train")]
        vocab = TrainedBPE(vocab_size=300).vocab(train, tmp_path)
        torch.manual_seed(0)
        model = SyntaxLM(CASES["GPT2"](), vocab_size=len(vocab)).eval()
        model.vocab, model.normalization = vocab, "none"
    scorer = ModelScorer(model, batch_size=4)
    result = evaluate_suite(suite, scorer)
    for item, record in zip(suite.items, result.items):
        for condition in item.conditions:
            regions = [scorer.words(content) for content in condition.contents]
            (scored,) = scorer.score([[w for region in regions for w in region]])
            sums, start = [], 0
            for region in regions:
                sums.append(-sum(scored.word_log_probs[start:start + len(region)]))
                start += len(region)
            sums[2] -= scored.eos_log_prob  # region 3: "." or the matrix clause, then the end
            assert [record.surprisals[condition.name][n] for n in (1, 2, 3)] == pytest.approx(
                sums, abs=1e-6)
            if kind == "word" and condition.name.endswith("no-matrix"):
                assert regions[2] == [] and sums[2] == pytest.approx(-scored.eos_log_prob)
            if kind == "subword":
                assert regions[2][-1] == "."
