"""Automatic metrics for generated text, as the DMLM paper reports them (Yang & Wan 2022,
"Dependency-based Mixture Language Models", Tables 2, 4 and 5).

The protocol is that of the paper's released evaluation code (``DPLM-Transformer/metrics.py``,
``eval_stories.py``, ``eval_ppl_by_gpt2.py``); each function says where it follows it and where
it departs from it. All text is pre-tokenised: a sample or a reference is a list of whitespace
tokens. BLEU, Distinct, Self-BLEU and BERTScore are percentages (×100), as the tables print
them; the LM score is in nats per token and the GPT-2 perplexity is a plain perplexity.

Samples may be empty (a model that ends a sample at once) or too few. A metric that cannot
score an empty sample (Self-BLEU, BERTScore, GPT-2 perplexity, the news Distinct) leaves it
out, and a metric left with nothing to score (no sample; fewer than two for Self-BLEU) is NaN,
not an exception. ``story_metrics`` and ``news_metrics`` leave empty samples out of every
column and say how many they kept (``sample_counts``). Only a bad call raises: references
that do not pair with the samples, an n-gram order below 1, a model without a vocabulary.
"""

from __future__ import annotations

import math
import sys
import warnings
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from statistics import fmean
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.errors import InputError, SynLMWarning

Tokens = Sequence[str]
NGram = tuple[str, ...]


class ScoringLM(Protocol):
    """What ``lm_score`` reads of a ``synlm.SyntaxLM`` (which sits above this floor), through
    ``synlm.tse.scoring.ModelScorer``."""

    vocab: Any  # a synlm.data.vocab.Vocab; a SubwordVocab also has ``split``
    normalization: str
    training: bool

    def target_log_probs(self, tokens: Tensor, targets: Tensor) -> Tensor: ...

    def parameters(self) -> Iterator[nn.Parameter]: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


def _check_pairs(hypotheses: Sequence[Tokens], references: Sequence[Tokens], what: str) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{what}: expected one reference per hypothesis, got "
                         f"{len(hypotheses)} hypotheses and {len(references)} references")


def _check_order(n: int, what: str) -> None:
    if n < 1:
        raise ValueError(f"{what}: expected an n-gram order n >= 1, got {n}")


def _mean(values: Iterable[float]) -> float:
    """The mean of ``values``; NaN when there is none (nothing to score)."""
    values = list(values)
    return fmean(values) if values else math.nan


def sample_counts(samples: Sequence[Tokens]) -> dict[str, int]:
    """How many samples a report scores and how many it leaves out as empty:
    ``samples_scored`` (the non-empty ones) and ``samples_empty`` (no token at all)."""
    empty = sum(len(s) == 0 for s in samples)
    return {"samples_scored": len(samples) - empty, "samples_empty": empty}


def _ngrams(tokens: Tokens, n: int) -> list[NGram]:
    """The n-grams of ``tokens`` in order (none when it is shorter than n)."""
    return list(zip(*(tokens[i:] for i in range(n))))


def _device(device: str | torch.device | None) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens], n: int) -> float:
    """Sentence BLEU-n averaged over pairs, ×100: the released protocol of Table 2's B-n.

    ``mean_i sentence_bleu([references[i]], hypotheses[i], weights=(1/n,)*n,
    smoothing_function=SmoothingFunction().method1)`` with nltk, i.e. per pair
    BP · exp(Σ_{k≤n} log(p_k) / n), p_k the clipped k-gram precision against the one reference
    (a zero match count replaced by 0.1 matches, nltk's method1; no unigram match gives 0) and
    BP = min(1, exp(1 − |ref| / |hyp|)). As ``bleu_upto`` in the released ``metrics.py``; a
    macro average of sentence scores, not the corpus BLEU of ``corpus_bleu``. An empty
    hypothesis scores 0, as in nltk; no pair at all gives NaN.
    """
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    _check_pairs(hypotheses, references, "bleu")
    _check_order(n, "bleu")
    weights, smoothing = (1 / n,) * n, SmoothingFunction().method1
    return 100 * _mean(sentence_bleu([list(r)], list(h), weights, smoothing)
                       for h, r in zip(hypotheses, references))


def corpus_bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens], n: int) -> float:
    """Corpus BLEU-n by sacrebleu, ×100 (sacrebleu's own scale): clipped n-gram matches and
    counts summed over all pairs before the precisions are taken, BP = min(1, exp(1 − R / H))
    on the summed lengths, BLEU = BP · exp(Σ_{k≤n} log(p_k) / n).

    Tokens are space-joined and not re-tokenised (``tokenize="none"``), one reference per
    hypothesis, ``effective_order=False`` (the corpus-level setting) and sacrebleu's default
    smoothing ("exp", which only matters when some order has no match at all). Not in the
    released code: the standard corpus BLEU, offered beside its sentence average (``bleu``).
    An empty hypothesis adds its reference's length only; no pair at all gives NaN.
    """
    from sacrebleu.metrics import BLEU

    _check_pairs(hypotheses, references, "corpus_bleu")
    _check_order(n, "corpus_bleu")
    if not hypotheses:
        return math.nan
    metric = BLEU(max_ngram_order=n, tokenize="none", effective_order=False)
    return metric.corpus_score([" ".join(h) for h in hypotheses],
                               [[" ".join(r) for r in references]]).score


def distinct(samples: Sequence[Tokens], n: int, per_sample: bool = False) -> float:
    """Distinct-n, ×100: the number of distinct n-grams over the number of n-grams.

    By default as the released story evaluation (``distinct_document``): the samples are
    concatenated into one token sequence, so n-grams spanning the end of one sample and the
    start of the next are counted too. ``per_sample=True`` counts the n-grams inside each
    sample only and pools them over the set (Li et al. 2016's definition). An empty sample
    adds no n-gram; no non-empty sample gives NaN, and non-empty samples without an n-gram
    (all shorter than n) give 0, where the released code divides by zero.
    """
    _check_order(n, "distinct")
    if not any(samples):
        return math.nan
    sequences = samples if per_sample else [[t for sample in samples for t in sample]]
    grams = [g for tokens in sequences for g in _ngrams(tokens, n)]
    return 100 * len(set(grams)) / len(grams) if grams else 0.0


def _matches_against_others(counts: list[Counter[NGram]]) -> list[int]:
    """For each sample, its k-gram matches against all the other samples as nltk clips them:
    Σ_g min(c(g), max over the others of their count of g). Kept per k-gram: the largest and
    second-largest count over all samples (ties included), so the maximum over the others is
    the second-largest when this sample holds the largest, else the largest (≥ its count)."""
    top: dict[NGram, tuple[int, int]] = {}
    for sample in counts:
        for gram, c in sample.items():
            first, second = top.get(gram, (0, 0))
            if c > first:
                top[gram] = (c, first)
            elif c > second:
                top[gram] = (first, c)
    return [sum(min(c, top[g][1]) if c == top[g][0] else c for g, c in sample.items())
            for sample in counts]


def self_bleu(samples: Sequence[Tokens], n: int, smoothed: bool = False) -> float:
    """Self-BLEU-n, ×100: the mean over samples of nltk's unsmoothed
    ``sentence_bleu(other_samples, sample, weights=(1/n,)*n)``, equal to the nltk loop
    (``smoothed``: with ``SmoothingFunction().method1``, a zero match count of an order ≥ 2
    read as 0.1, as the released news evaluation, ``news_metrics``).

    Per sample: p_k = (k-gram matches clipped by the maximum count among the other samples)
    / max(1, number of its k-grams); r = the other samples' length closest to its own (the
    shorter on a tie); BP = 1 if |s| > r, 0 if |s| = 0, else exp(1 − r / |s|); the score is 0
    without a unigram match, else BP · exp(Σ_{k≤n} log(p_k) / n), where a p_k without matches
    counts as the smallest positive float (nltk's method0), which makes the score ~0.

    In O(total n-grams) as the released ``selfbleu`` (largest and second-largest count per
    n-gram), with the closest other length found by bisection in the sorted lengths. The
    released code puts 1e-100 for a zero match count where nltk puts 2.2e-308; both are ~0.

    Empty samples are left out, as samples and as the others' lengths (nltk would score one
    0 and let its length 0 be the closest); fewer than two non-empty samples give NaN.
    """
    _check_order(n, "self_bleu")
    samples = [s for s in samples if len(s) > 0]
    if len(samples) < 2:
        return math.nan
    matches = [_matches_against_others([Counter(_ngrams(s, k)) for s in samples])
               for k in range(1, n + 1)]
    length_counts = Counter(len(s) for s in samples)
    lengths = sorted(length_counts)
    scores = []
    for i, sample in enumerate(samples):
        h = len(sample)
        if length_counts[h] > 1:
            r = h
        else:  # its own length is unique: the nearest distinct lengths below and above
            j = bisect_left(lengths, h)
            near = lengths[max(j - 1, 0):j] + lengths[j + 1:j + 2]
            r = min(near, key=lambda length: (abs(length - h), length))
        scores.append(_sentence_bleu([m[i] for m in matches], h, r, smoothed))
    return 100 * fmean(scores)


def _sentence_bleu(matches: Sequence[int], h: int, r: int, smoothed: bool) -> float:
    """nltk's ``sentence_bleu`` from the clipped match counts of orders 1..n, the
    hypothesis length ``h`` and the closest reference length ``r``: 0 without a unigram
    match; a zero count is 0.1 with ``smoothed`` (method1), else the smallest float
    (method0); BP = 1 if h > r, else exp(1 − r / h)."""
    if matches[0] == 0:
        return 0.0
    n = len(matches)
    bp = 1.0 if h > r else math.exp(1 - r / h)
    zero = 0.1 if smoothed else None
    log_p = (math.log(m / max(1, h - k) if m else (zero / max(1, h - k) if zero
                                                   else sys.float_info.min))
             for k, m in enumerate(matches))
    return bp * math.exp(math.fsum(1 / n * lp for lp in log_p))


def lm_score(model: ScoringLM, samples: Sequence[Tokens], batch_size: int = 32) -> float:
    """The LM score (Semeniuta et al. 2018; Caccia et al. 2020): the mean negative
    log-likelihood, in nats per token, of the samples under an "oracle" ``SyntaxLM``.

    Each sample is scored by synlm's one sentence scorer (``synlm.tse.scoring.ModelScorer``)
    as the row ``[<eos>, w1..wn]`` predicting ``w1..wn <eos>`` from a fresh state, with the
    distribution the model uses, in eval mode; the mean is over all predicted tokens, the
    closing ``<eos>`` included: Σ −log p / Σ (n_i + 1). Words are encoded with
    ``model.vocab`` (unknown words as ``<unk>``; a vocabulary without one raises). With a
    subword vocabulary the words are first split into subwords and the mean is per subword
    token. Not in the released code. An empty sample is scored as its one ``<eos>`` (the model
    ending it at once); no sample at all gives NaN. A transition LM's search can find no tree
    for a sample ("no parse within the beam"): such samples are left out of the mean and
    counted in a warning.
    """
    from synlm.tse.scoring import ModelScorer

    if model.vocab is None:
        raise InputError("lm_score: expected a model with a vocabulary (model.vocab), as a "
                         "synlm checkpoint stores it; this one has none")
    if not samples:
        return math.nan
    scored = ModelScorer(model, batch_size).score([list(sample) for sample in samples])
    if unparsed := sum(not s.parsed for s in scored):
        warnings.warn(f"lm_score: {unparsed} of {len(scored)} samples have no parse within "
                      "the oracle's beam and are left out of the mean", SynLMWarning,
                      stacklevel=2)
        scored = [s for s in scored if s.parsed]
        if not scored:
            return math.nan
    total = -math.fsum(p for s in scored for p in (*s.token_log_probs, s.eos_log_prob))
    return total / sum(len(s.tokens) + 1 for s in scored)


@torch.no_grad()
def gpt2_perplexity(samples: Sequence[Tokens], model_path: str, lowercase: bool = True,
                    device: str | torch.device | None = None, batch_size: int = 16) -> float:
    """The mean over samples of each sample's perplexity under GPT-2, as the released
    ``eval_ppl_by_gpt2.py`` (Tables 4 and 5's "GPT-2 PPL").

    Each sample is joined with spaces, lowercased by default (the released script lowercases
    every line), tokenised by the tokenizer at ``model_path`` (a ``save_pretrained`` folder or
    a hub name) and cut to the model's ``n_positions``; its perplexity is
    exp(mean over t ≥ 2 of −log p(x_t | x_<t)), the first token not being predicted, as
    ``GPT2LMHeadModel(ids, labels=ids).loss`` computes it; the result is the plain mean of
    these perplexities (not the perplexity of the pooled tokens). Batched with right padding
    and an attention mask, which gives the one-by-one numbers. A sample of fewer than two
    GPT-2 tokens (an empty one included), which has no predicted token (NaN in the released
    script, which makes its mean NaN), is left out; none left gives NaN.
    """
    from transformers import AutoTokenizer, GPT2LMHeadModel

    if not any(samples):
        return math.nan
    texts = [" ".join(s) for s in samples]
    if lowercase:
        texts = [t.lower() for t in texts]
    with _loading(model_path, "GPT-2"):
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    ids = [x for x in tokenizer(texts)["input_ids"] if len(x) > 1]
    if not ids:
        return math.nan
    device = _device(device)
    with _loading(model_path, "GPT-2"):
        model = GPT2LMHeadModel.from_pretrained(model_path)
    model = model.to(device).eval()
    ids = [x[:model.config.n_positions] for x in ids]
    ids.sort(key=len)  # less padding; the mean does not depend on the order
    perplexities = []
    for start in range(0, len(ids), batch_size):
        batch = ids[start:start + batch_size]
        tokens = torch.zeros(len(batch), len(batch[-1]), dtype=torch.long)  # the longest last
        for i, row in enumerate(batch):
            tokens[i, :len(row)] = torch.tensor(row)
        mask = (torch.arange(tokens.size(1)) < torch.tensor([len(r) for r in batch])[:, None])
        tokens, mask = tokens.to(device), mask.to(device)
        logits = model(input_ids=tokens, attention_mask=mask.long()).logits.float()
        nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        predicted = mask[:, 1:]
        mean_nll = (nll * predicted).sum(1) / predicted.sum(1)
        perplexities += mean_nll.exp().tolist()
    return fmean(perplexities)


@contextmanager
def _loading(model_path: str, what: str) -> Iterator[None]:
    """Around loading a pretrained model a user named: one that transformers cannot find or
    read (an ``OSError``: no such folder, not a hub name, offline) is a one-line
    ``InputError`` naming it."""
    try:
        yield
    except OSError as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(f"{what}: cannot load a model from {model_path} ({reason})") from err


def bert_score(hypotheses: Sequence[Tokens], references: Sequence[Tokens], model_path: str,
               num_layers: int | None = None, batch_size: int = 64,
               device: str | torch.device | None = None) -> float:
    """BERTScore F1 (Zhang et al. 2020), ×100: the mean over pairs of
    ``torchmetrics.functional.text.bert_score`` F1 on the space-joined tokens, with the model
    and tokenizer at ``model_path`` (a local folder or a hub name), the hidden states of layer
    ``num_layers`` (None: the last; 0 is the embeddings), no idf weighting, no baseline
    rescaling, inputs truncated to 512 tokens.

    The paper used Tiiiger/bert_score's defaults for English (roberta-large, layer 17); the
    number depends on the model and the layer, so compare only scores computed alike. Not in
    the released code. Empty hypotheses (whose precision is undefined) are left out with
    their references; none left gives NaN.
    """
    from torchmetrics.functional.text import bert_score as torchmetrics_bert_score

    _check_pairs(hypotheses, references, "bert_score")
    kept = [(h, r) for h, r in zip(hypotheses, references) if len(h) > 0]
    if not kept:
        return math.nan
    with _loading(model_path, "BERTScore"):
        scores = torchmetrics_bert_score([" ".join(h) for h, _ in kept],
                                         [" ".join(r) for _, r in kept],
                                         model_name_or_path=model_path, num_layers=num_layers,
                                         batch_size=batch_size, device=_device(device),
                                         truncation=True)
    return 100 * scores["f1"].double().mean().item()


def story_metrics(samples: Sequence[Tokens], references: Sequence[Tokens]) -> dict[str, float]:
    """Table 2's model-free columns for samples and their references (one each), as
    ``eval_stories.py`` computes them: empty samples are dropped with their references
    first, then B-1, B-2 (``bleu``), corpus BLEU-1, -2 (``corpus_bleu``), D-2, D-3
    (``distinct``, concatenated) and SB-2, SB-3 (``self_bleu``), all ×100, with
    ``samples_scored`` (the non-empty samples, which every column reads) and
    ``samples_empty`` (those dropped). No non-empty sample makes every column NaN; one
    makes Self-BLEU NaN."""
    _check_pairs(samples, references, "story_metrics")
    kept = [(s, r) for s, r in zip(samples, references) if len(s) > 0]
    hyps, refs = [s for s, _ in kept], [r for _, r in kept]
    return {"bleu_1": bleu(hyps, refs, 1), "bleu_2": bleu(hyps, refs, 2),
            "corpus_bleu_1": corpus_bleu(hyps, refs, 1),
            "corpus_bleu_2": corpus_bleu(hyps, refs, 2),
            "distinct_2": distinct(hyps, 2), "distinct_3": distinct(hyps, 3),
            "self_bleu_2": self_bleu(hyps, 2), "self_bleu_3": self_bleu(hyps, 3),
            **sample_counts(samples)}


def released_tokens(sample: Tokens) -> list[str]:
    """A sample as the released news evaluation reads a line of its file:
    ``nltk.word_tokenize`` of the space-joined tokens, without its sentence splitter
    (``preserve_line=True``; the splitter needs the punkt model, and on text that is already
    tokenised, as samples and the WMT News files are, it changes nothing)."""
    from nltk import word_tokenize

    return word_tokenize(" ".join(sample), preserve_line=True)


def multi_reference_bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens],
                         n: int) -> float:
    """BLEU-n of every hypothesis against the whole reference set, ×100, averaged: nltk's
    ``sentence_bleu(references, hypothesis, (1/n,)*n, SmoothingFunction().method1)``, as the
    released news evaluation's ``Bleu`` (clipped by the largest count of an n-gram in any
    reference; r the reference length closest to the hypothesis', the shorter on a tie). An
    empty hypothesis scores 0; no hypothesis gives NaN; no reference raises."""
    if len(references) == 0:
        raise ValueError("multi_reference_bleu: expected at least one reference, got none")
    _check_order(n, "multi_reference_bleu")
    largest: list[dict[NGram, int]] = []
    for k in range(1, n + 1):
        top: dict[NGram, int] = {}
        for reference in references:
            for gram, c in Counter(_ngrams(reference, k)).items():
                top[gram] = max(c, top.get(gram, 0))
        largest.append(top)
    lengths = sorted({len(r) for r in references})
    scores = []
    for h in hypotheses:
        j = bisect_left(lengths, len(h))
        r = min(lengths[max(j - 1, 0):j + 1], key=lambda x: (abs(x - len(h)), x))
        matches = [sum(min(c, top.get(g, 0)) for g, c in Counter(_ngrams(h, k)).items())
                   for k, top in enumerate(largest, start=1)]
        scores.append(_sentence_bleu(matches, len(h), r, smoothed=True))
    return 100 * _mean(scores)


def sentence_distinct(samples: Sequence[Tokens], n: int, min_length: int = 6) -> float:
    """Distinct-n per sample, averaged, ×100, over the samples of at least ``min_length``
    tokens: the released news evaluation's ``distinct_upto`` (it keeps samples longer than 5
    words). None kept gives NaN, where the released code divides by zero."""
    _check_order(n, "sentence_distinct")
    grams = (_ngrams(s, n) for s in samples if len(s) >= min_length)
    return 100 * _mean(len(set(g)) / len(g) for g in grams if g)


#: The released news evaluation's sample and reference limits (``eval_sentences.py``): the
#: first 10,000 references, the first 10,002 hypotheses (its loop stops after index 10,001).
NEWS_REFERENCES, NEWS_HYPOTHESES, NEWS_SELF_BLEU = 10_000, 10_002, 10_000


def news_metrics(samples: Sequence[Tokens], references: Sequence[Tokens] | None = None
                 ) -> dict[str, float]:
    """Tables 4-5's model-free columns for unconditional samples, as the released
    ``DPLM-Transformer/eval_sentences.py`` computes them (with its ``metrics.py``), ×100:
    ``distinct_1`` .. ``distinct_5`` (``sentence_distinct``: per sample, over samples of six
    tokens or more; it prints the first three), ``self_bleu_5`` (smoothed, each of the first
    10,000 samples against the others, ``self_bleu(smoothed=True)``) and, given the real
    test sentences, ``bleu_5`` (``multi_reference_bleu`` of the first 10,002 samples against
    the first 10,000 references), both on ``released_tokens``; and ``unique_tokens``, the
    number of distinct tokens. Empty samples are left out of all of them (so "the first
    10,000" are the first non-empty ones), counted by ``samples_scored`` (the non-empty
    samples) and ``samples_empty``; a metric with too few samples is NaN (``self_bleu``,
    ``sentence_distinct``). Not offered: its KL divergence and MS-Jaccard."""
    kept = [s for s in samples if len(s) > 0]
    result: dict[str, float] = {f"distinct_{k}": sentence_distinct(kept, k)
                                for k in range(1, 6)}
    tokenised = [released_tokens(s) for s in kept]
    result["self_bleu_5"] = self_bleu(tokenised[:NEWS_SELF_BLEU], 5, smoothed=True)
    if references is not None:
        refs = [released_tokens(r) for r in references[:NEWS_REFERENCES]]
        result["bleu_5"] = multi_reference_bleu(tokenised[:NEWS_HYPOTHESES], refs, 5)
    result["unique_tokens"] = len({t for s in kept for t in s})
    return {**result, **sample_counts(samples)}
