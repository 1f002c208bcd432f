"""Text-generation metrics (synlm.metrics.generation): hand-counted Distinct, Self-BLEU and BLEU
values, Self-BLEU equal to nltk's loop, the news evaluation equal to the released script, the
LM score and GPT-2 perplexity equal to scoring each sample alone, BERTScore as torchmetrics
gives it, and empty or too few samples counted and scored NaN instead of raising."""

from __future__ import annotations

import math
import random
import warnings
from pathlib import Path

import pytest
import torch
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from backbone_cases import build
from conftest import local_gpt2
from staged import staged
from synlm.data.subwords import PretrainedTokenizer
from synlm.data.vocab import Vocab
from synlm.lm import SyntaxLM
from synlm.metrics.generation import (
    bert_score,
    bleu,
    corpus_bleu,
    distinct,
    gpt2_perplexity,
    lm_score,
    multi_reference_bleu,
    news_metrics,
    sample_counts,
    self_bleu,
    sentence_distinct,
    story_metrics,
)


def toks(*lines: str) -> list[list[str]]:
    return [line.split() for line in lines]


def random_samples(rng: random.Random, count: int) -> list[list[str]]:
    """Samples over six words with lengths 1..8, so n-grams, counts and lengths repeat."""
    return [[rng.choice("abcdef") for _ in range(rng.randint(1, 8))] for _ in range(count)]


# ---------------------------------------------------------------------------- Distinct
DISTINCT_SET = toks("a b a b a", "b a", "c")


def test_distinct_concatenates_the_samples_as_the_released_code() -> None:
    # one sequence a b a b a | b a | c (8 tokens): 3 distinct unigrams of 8;
    # bigrams ab ba ab ba ab ba ac: 3 distinct (ab, ba, ac) of 7;
    # trigrams aba bab aba bab aba bac: 3 distinct (aba, bab, bac) of 6
    assert distinct(DISTINCT_SET, 1) == pytest.approx(100 * 3 / 8, abs=1e-12)
    assert distinct(DISTINCT_SET, 2) == pytest.approx(100 * 3 / 7, abs=1e-12)
    assert distinct(DISTINCT_SET, 3) == pytest.approx(100 * 3 / 6, abs=1e-12)


def test_distinct_per_sample_counts_no_ngram_across_samples() -> None:
    # bigrams: ab ba ab ba in the first, ba in the second, none in "c": 2 distinct of 5;
    # trigrams: aba bab aba in the first only: 2 distinct of 3
    assert distinct(DISTINCT_SET, 2, per_sample=True) == pytest.approx(100 * 2 / 5, abs=1e-12)
    assert distinct(DISTINCT_SET, 3, per_sample=True) == pytest.approx(100 * 2 / 3, abs=1e-12)
    assert distinct(toks("a", "b"), 2, per_sample=True) == 0.0  # no bigram inside a sample
    assert distinct(toks("a", "b"), 2) == 100.0  # but "a b" across them
    assert distinct([*DISTINCT_SET[:2], [], DISTINCT_SET[2]], 2) == distinct(DISTINCT_SET, 2)
    assert math.isnan(distinct([], 2)) and math.isnan(distinct([[], []], 2))


# ---------------------------------------------------------------------------- Self-BLEU
def nltk_self_bleu(samples: list[list[str]], n: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns on every zero n-gram match count
        scores = [sentence_bleu(samples[:i] + samples[i + 1:], s, (1 / n,) * n)
                  for i, s in enumerate(samples)]
    return 100 * sum(scores) / len(scores)


def test_self_bleu_by_hand() -> None:
    samples = toks("a b c", "a b d", "a e")
    # n=1: "a b c" matches a, b of 3 (others' lengths 3, 2: closest 3, BP 1): 2/3; likewise
    # "a b d": 2/3; "a e" matches a of 2, the others' length 3 > 2: BP = exp(1 - 3/2)
    sb1 = (2 / 3 + 2 / 3 + 0.5 * math.exp(-0.5)) / 3
    assert self_bleu(samples, 1) == pytest.approx(100 * sb1, abs=1e-12)
    # n=2: "a b c" has bigrams ab, bc of which ab in "a b d": sqrt(2/3 · 1/2); the same for
    # "a b d"; "a e" has no bigram match: ~0 (2.2e-308 in place of a zero precision)
    assert self_bleu(samples, 2) == pytest.approx(100 * 2 * math.sqrt(1 / 3) / 3, abs=1e-12)
    # a sample that is another's copy holds the largest count and finds it again
    assert self_bleu(toks("a b a", "a b a"), 3) == pytest.approx(100.0, abs=1e-12)


def test_self_bleu_leaves_empty_samples_out_and_is_nan_below_two() -> None:
    samples = toks("a b c", "a b d", "a e")
    for n in (1, 2):
        assert self_bleu([*samples, []], n) == self_bleu(samples, n)
        assert self_bleu([[], *samples[:2], []], n) == self_bleu(samples[:2], n)
    # "b" against "a b c": BP exp(1 - 3/1), p1 = 1; "a b c" against "b": BP 1, p1 = 1/3.
    # nltk's loop would also score the empty sample 0 and give "b" the empty one's length 0
    # as the closest (BP 1): (1 + 1/3 + 0) / 3; left out, it changes nothing
    with_empty = [["b"], [], ["a", "b", "c"]]
    assert self_bleu(with_empty, 1) == pytest.approx(100 * (math.exp(-2) + 1 / 3) / 2,
                                                     abs=1e-12)
    assert nltk_self_bleu(with_empty, 1) == pytest.approx(100 * (1 + 1 / 3) / 3, abs=1e-12)
    for too_few in ([], toks("a b"), [["a", "b"], [], []]):
        assert math.isnan(self_bleu(too_few, 2))
    with pytest.raises(ValueError, match="n >= 1"):
        self_bleu(toks("a", "b"), 0)


@pytest.mark.parametrize("seed", range(6))
def test_self_bleu_equals_the_nltk_loop(seed: int) -> None:
    rng = random.Random(seed)
    samples = random_samples(rng, [2, 3, 5, 12, 25, 40][seed])
    for n in (1, 2, 3, 4):
        assert self_bleu(samples, n) == pytest.approx(nltk_self_bleu(samples, n), abs=1e-12)


# ---------------------------------------------------------------------------- BLEU
@pytest.mark.parametrize("seed", [0, 1])
def test_smoothed_self_bleu_and_multi_reference_bleu_equal_the_nltk_loops(seed: int) -> None:
    """method1 smoothing: each sample against the others, each hypothesis against all the
    references, as nltk's sentence_bleu computes them one by one."""
    rng = random.Random(seed)
    samples, references = random_samples(rng, 25), random_samples(rng, 15)
    method1 = SmoothingFunction().method1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns about zero counts
        want_self = 100 * sum(sentence_bleu(samples[:i] + samples[i + 1:], s, (0.2,) * 5,
                                            method1) for i, s in enumerate(samples)) / 25
        want_multi = 100 * sum(sentence_bleu(references, s, (0.2,) * 5, method1)
                               for s in samples) / 25
    assert self_bleu(samples, 5, smoothed=True) == pytest.approx(want_self, rel=1e-12)
    assert multi_reference_bleu(samples, references, 5) == pytest.approx(want_multi, rel=1e-12)


#: The released news evaluation (DPLM-Transformer/eval_sentences.py with its metrics.py, at
#: the repository's commit 600ad56) run on the first 300 lines of the staged WMT News valid
#: split as samples and the first 400 of its test split as references, nltk 3.10.4, with
#: ``nltk.word_tokenize`` given ``preserve_line=True`` (punkt is not installed here): see
#: docs/evaluation.md.
RELEASED_NEWS = {"bleu_5": 7.65974318912254, "self_bleu_5": 8.765436513785238,
                 "distinct_1": 89.25976776140806, "distinct_2": 99.10756088560407,
                 "distinct_3": 99.72833771247494, "distinct_4": 99.93313492063493,
                 "distinct_5": 99.98924731182794, "unique_tokens": 1989}


def test_news_metrics_equal_the_released_script() -> None:
    news = staged("emnlp2017_news")
    samples = [line.split() for line in (news / "valid.txt").read_text().splitlines()[:300]]
    references = [line.split() for line in (news / "test.txt").read_text().splitlines()[:400]]
    got = news_metrics(samples, references)
    assert got == pytest.approx({**RELEASED_NEWS, "samples_scored": 300, "samples_empty": 0},
                                rel=1e-12)


def test_sentence_distinct_by_hand() -> None:
    """Per sample, samples shorter than six tokens left out: (5/6 + 6/6) / 2 for n = 1."""
    samples = toks("a b c d e a", "a b c d e f", "a a")
    assert sentence_distinct(samples, 1) == pytest.approx(100 * (5 / 6 + 1) / 2)
    assert sentence_distinct(samples, 6) == pytest.approx(100.0)
    assert math.isnan(sentence_distinct([*toks("a b"), []], 1))  # none of 6 tokens or more
    assert math.isnan(sentence_distinct(samples, 7))  # no sample has a 7-gram


def test_bleu_by_hand_and_as_the_nltk_sentence_average() -> None:
    # unigrams: the×2, cat, on, mat of 6 match; bigrams: the-cat, on-the, the-mat of 5; BP 1
    hyp, ref = toks("the cat sat on the mat", "the cat is on the mat")
    assert bleu([hyp], [ref], 1) == pytest.approx(100 * 5 / 6, abs=1e-12)
    assert bleu([hyp], [ref], 2) == pytest.approx(100 * math.sqrt(5 / 6 * 3 / 5), abs=1e-12)
    # no bigram match: method1 counts 0.1 of 1
    assert bleu(toks("a b"), toks("b a"), 2) == pytest.approx(100 * math.sqrt(0.1), abs=1e-12)
    rng = random.Random(1)
    hyps, refs = random_samples(rng, 20), random_samples(rng, 20)
    for n in (1, 2, 3):
        expected = [sentence_bleu([r], h, (1 / n,) * n, SmoothingFunction().method1)
                    for h, r in zip(hyps, refs)]
        assert bleu(hyps, refs, n) == pytest.approx(100 * sum(expected) / 20, abs=1e-12)


def test_corpus_bleu_by_hand_and_as_sacrebleu() -> None:
    import sacrebleu

    hyps, refs = toks("a b c", "d e"), toks("a b d", "d e f g")
    # unigrams: 2 + 2 of 5 match; bigrams: ab + de of 2 + 1; lengths 5 against 7
    bp = math.exp(1 - 7 / 5)
    assert corpus_bleu(hyps, refs, 1) == pytest.approx(100 * bp * 4 / 5, abs=1e-9)
    assert corpus_bleu(hyps, refs, 2) == pytest.approx(100 * bp * math.sqrt(4 / 5 * 2 / 3),
                                                       abs=1e-9)
    rng = random.Random(2)
    hyps, refs = random_samples(rng, 30), random_samples(rng, 30)
    expected = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]],
                                     tokenize="none").score
    assert corpus_bleu(hyps, refs, 4) == pytest.approx(expected, abs=1e-12)
    assert corpus_bleu(hyps, refs, 2) != pytest.approx(expected)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="one reference per hypothesis, got 2 hypotheses and 1"):
        bleu(toks("a", "b"), toks("a"), 1)
    with pytest.raises(ValueError, match="story_metrics: expected one reference per"):
        story_metrics([], toks("a"))
    with pytest.raises(ValueError, match="n >= 1"):
        bleu(toks("a"), toks("a"), 0)
    with pytest.raises(ValueError, match="at least one reference"):
        multi_reference_bleu(toks("a"), [], 2)


def test_no_sample_is_nan_and_an_empty_hypothesis_scores_zero() -> None:
    for metric in (bleu, corpus_bleu, multi_reference_bleu):
        assert math.isnan(metric([], [] if metric is not multi_reference_bleu else toks("a"), 2))
    # BLEU scores an empty hypothesis 0 (nltk); corpus BLEU adds its reference's length
    hyps, refs = toks("a b", "a b"), toks("a b", "c d")
    assert bleu([*hyps[:1], []], refs, 1) == bleu(hyps[:1], refs[:1], 1) / 2
    assert corpus_bleu([*hyps[:1], []], refs, 1) == pytest.approx(100 * math.exp(1 - 4 / 2))
    assert multi_reference_bleu([*hyps, []], refs, 1) == pytest.approx(
        multi_reference_bleu(hyps, refs, 1) * 2 / 3)


def test_story_metrics_are_the_functions_after_dropping_empty_samples() -> None:
    rng = random.Random(3)
    samples, references = random_samples(rng, 10), random_samples(rng, 10)
    metrics = story_metrics(samples, references)
    counts = {"samples_scored": 10, "samples_empty": 0}
    assert metrics == {
        "bleu_1": bleu(samples, references, 1), "bleu_2": bleu(samples, references, 2),
        "corpus_bleu_1": corpus_bleu(samples, references, 1),
        "corpus_bleu_2": corpus_bleu(samples, references, 2),
        "distinct_2": distinct(samples, 2), "distinct_3": distinct(samples, 3),
        "self_bleu_2": self_bleu(samples, 2), "self_bleu_3": self_bleu(samples, 3), **counts}
    # eval_stories.py skips empty lines and their references; the counts say how many
    with_empty = story_metrics([[], *samples, []], [["y"], *references, ["x"]])
    assert with_empty == {**metrics, "samples_scored": 10, "samples_empty": 2}


def test_story_metrics_of_one_or_no_non_empty_sample_are_nan_and_counted() -> None:
    """The user's case: 19 of 20 endings empty. One non-empty sample has BLEU and Distinct
    but no Self-BLEU (no other sample); none has no number at all; nothing raises."""
    one = story_metrics([["he", "slept", "."], *[[]] * 19], toks("he slept .", *["x"] * 19))
    assert one["samples_scored"] == 1 and one["samples_empty"] == 19
    assert one["bleu_1"] == pytest.approx(100.0) and one["distinct_2"] == 100.0
    assert math.isnan(one["self_bleu_2"]) and math.isnan(one["self_bleu_3"])
    none = story_metrics([[], []], toks("a", "b"))
    assert {k: v for k, v in none.items() if not math.isnan(v)} == {
        "samples_scored": 0, "samples_empty": 2}
    assert sample_counts([[], ["a"]]) == {"samples_scored": 1, "samples_empty": 1}


def test_news_metrics_leave_empty_samples_out() -> None:
    samples = [line.split() for line in ("the market rose 3 points on monday",
                                         "shares fell on day 2 of trading", "prices rose")]
    references = toks("the market fell 3 points on monday")
    metrics = news_metrics(samples, references)
    assert metrics["samples_scored"] == 3 and metrics["samples_empty"] == 0
    assert news_metrics([[], *samples[:2], [], samples[2]], references) == {
        **metrics, "samples_empty": 2}
    one = news_metrics([[], samples[2]])  # no sample of six tokens, one for Self-BLEU
    assert one["unique_tokens"] == 2 and one["samples_scored"] == 1
    assert all(math.isnan(one[k]) for k in ("distinct_1", "distinct_5", "self_bleu_5"))


# ---------------------------------------------------------------------------- LM score
SENTENCES = toks("the cat sat", "a dog saw the cat on the mat", "the mat", "a cat")


def word_lm(name: str) -> SyntaxLM:
    vocab = Vocab.build(SENTENCES)
    torch.manual_seed(0)
    model = SyntaxLM(build(name), heads=[], vocab_size=len(vocab)).eval()
    model.vocab = vocab
    return model


def alone(model: SyntaxLM, rows: list[list[int]]) -> float:
    """Σ −log p over each row [<eos>, w.., <eos>] scored on its own, per predicted token."""
    total = sum(-model.log_probs(torch.tensor([row[:-1]]))[0, t, row[t + 1]].item()
                for row in rows for t in range(len(row) - 1))
    return total / sum(len(row) - 1 for row in rows)


@pytest.mark.parametrize("name", ["AWDLSTM", "Transformer"])
def test_lm_score_is_each_sample_scored_alone(name: str) -> None:
    model = word_lm(name)
    eos = model.vocab.eos_id
    expected = alone(model, [[eos, *model.vocab.encode(s), eos] for s in SENTENCES])
    for batch_size in (1, 3, 8):  # padding to the longest row changes nothing
        assert lm_score(model, SENTENCES, batch_size=batch_size) == pytest.approx(
            expected, rel=1e-6)


def test_lm_score_unknown_words() -> None:
    model = word_lm("AWDLSTM")
    assert lm_score(model, toks("the zebra sat")) == lm_score(model, toks("the <unk> sat"))
    assert lm_score(model, toks("the zebra sat")) != lm_score(model, toks("the cat sat"))
    model.vocab = Vocab(model.vocab.itos, unk=None)
    assert lm_score(model, toks("the cat sat")) > 0
    with pytest.raises(ValueError, match="no unknown token"):
        lm_score(model, toks("the zebra sat"))
    model.vocab = None
    with pytest.raises(ValueError, match="expected a model with a vocabulary"):
        lm_score(model, toks("the cat sat"))
    with pytest.raises(ValueError, match="expected a model with a vocabulary"):
        lm_score(model, [])


def test_lm_score_scores_an_empty_sample_as_its_eos() -> None:
    model = word_lm("AWDLSTM")
    eos = model.vocab.eos_id
    assert lm_score(model, [[]]) == pytest.approx(alone(model, [[eos, eos]]), rel=1e-6)
    assert math.isnan(lm_score(model, []))


def test_lm_score_of_a_subword_model_is_per_subword(tmp_path: Path) -> None:
    vocab = PretrainedTokenizer(str(local_gpt2())).vocab([], tmp_path)
    torch.manual_seed(0)
    model = SyntaxLM(build("AWDLSTM"), heads=[], vocab_size=len(vocab)).eval()
    model.vocab = vocab
    rows = [[vocab.eos_id, *vocab.encode(pieces), vocab.eos_id]
            for pieces, _ in vocab.split(SENTENCES)]
    assert sum(map(len, rows)) > sum(len(s) + 2 for s in SENTENCES)  # some words split
    assert lm_score(model, SENTENCES, batch_size=2) == pytest.approx(alone(model, rows),
                                                                     rel=1e-6)


# ---------------------------------------------------------------------------- GPT-2
@pytest.fixture(scope="module")
def gpt2_path() -> Path:
    return local_gpt2()


def released_gpt2_perplexity(samples: list[list[str]], path: Path) -> float:
    """eval_ppl_by_gpt2.py's loop: one sample at a time, HF's ``labels=`` loss."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = GPT2LMHeadModel.from_pretrained(path).eval()
    perplexities = []
    with torch.no_grad():
        for sample in samples:
            ids = tokenizer(" ".join(sample).lower(), return_tensors="pt").input_ids
            ids = ids[:, :model.config.n_positions]
            perplexities.append(model(ids, labels=ids).loss.exp().item())
    return sum(perplexities) / len(perplexities)


def test_gpt2_perplexity_batched_equals_one_by_one(gpt2_path: Path) -> None:
    long = toks("the old dog saw a clever cat with the bird .")[0] * 20  # > n_positions = 128
    samples = [*toks("she saw this city .", "a dog", "the quiet teacher heard that bird ."),
               long]
    expected = released_gpt2_perplexity(samples, gpt2_path)
    assert gpt2_perplexity(samples, str(gpt2_path), device="cpu", batch_size=3) == (
        pytest.approx(expected, rel=1e-6))
    assert gpt2_perplexity(samples, str(gpt2_path), device="cpu", batch_size=1) == (
        pytest.approx(expected, rel=1e-6))


def test_gpt2_perplexity_lowercases_by_default(gpt2_path: Path) -> None:
    lower, upper = toks("she saw this city ."), toks("She saw THIS city .")
    path = str(gpt2_path)
    assert gpt2_perplexity(upper, path, device="cpu") == gpt2_perplexity(lower, path,
                                                                         device="cpu")
    assert gpt2_perplexity(upper, path, lowercase=False, device="cpu") != pytest.approx(
        gpt2_perplexity(lower, path, device="cpu"))



def test_gpt2_perplexity_leaves_samples_without_a_prediction_out(gpt2_path: Path) -> None:
    """An empty sample has no GPT-2 token to predict (NaN in the released script): left out."""
    path, samples = str(gpt2_path), toks("she saw this city .", "a dog")
    assert gpt2_perplexity([[], *samples, []], path, device="cpu") == pytest.approx(
        gpt2_perplexity(samples, path, device="cpu"), rel=1e-6)
    assert math.isnan(gpt2_perplexity([[], []], path, device="cpu"))
    assert math.isnan(gpt2_perplexity([], path, device="cpu"))


# ---------------------------------------------------------------------------- BERTScore
WORDS = ["the", "cat", "dog", "sat", "saw", "on", "a", "mat", "."]


@pytest.fixture(scope="module")
def bert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("bert")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                               *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(path / "vocab.txt"))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_bert_score_is_torchmetrics_f1_mean(bert_path: Path) -> None:
    from torchmetrics.functional.text import bert_score as torchmetrics_bert_score

    hyps, refs = toks("the cat sat on a mat .", "a dog saw the cat"), toks(
        "the dog sat on the mat .", "the cat saw a dog")
    assert bert_score(refs, refs, str(bert_path), device="cpu") == pytest.approx(100, abs=1e-3)
    for layer in (None, 1):
        direct = torchmetrics_bert_score([" ".join(h) for h in hyps],
                                         [" ".join(r) for r in refs],
                                         model_name_or_path=str(bert_path), num_layers=layer)
        score = bert_score(hyps, refs, str(bert_path), num_layers=layer, device="cpu")
        assert score == pytest.approx(100 * direct["f1"].mean().item(), abs=1e-4)
        assert score < 99.9
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        bert_score(hyps, refs[:1], str(bert_path))
    # an empty hypothesis (no precision) is left out with its reference
    with_empty = bert_score([[], *hyps], [["the"], *refs], str(bert_path), device="cpu")
    assert with_empty == pytest.approx(bert_score(hyps, refs, str(bert_path), device="cpu"))
    assert math.isnan(bert_score([[]], toks("the cat"), str(bert_path), device="cpu"))
