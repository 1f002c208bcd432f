"""``PLLScorer`` on a tiny random ``BertForMaskedLM`` with a WordPiece tokenizer built here from
a small word list and loaded back by path (nothing downloads): its pseudo-log-likelihoods
equal minicons' ``MaskedLMScorer`` for both variants, which differ on words of several
tokens; the word sums; batching; ``synlm evaluate-syntax --hf`` picks it for a masked LM on
every benchmark, names the variant, and refuses ``--eos`` in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_evaluate_syntax import evaluate, toy_data
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertTokenizerFast,
    GPT2Config,
    GPT2LMHeadModel,
)

from synlm.errors import InputError
from synlm.tse.masked_scoring import PLLScorer, is_masked_config, is_masked_lm

#: Whole words; every other word is spelled with ``##`` letters (``sleeps``: ``sleep ##s``,
#: ``zebra``: ``z ##e ##b ##r ##a``), and a character outside the list (``!``) is ``[UNK]``.
WORDS = ["the", "a", "cat", "dog", "sleep", "bark", "nap", "teacher", "saw", "store", "keys",
         "to", "cabinet", "are", "is", "here", ".", ","]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: Capitals (lowercased by the tokenizer), words of one to five tokens, punctuation attached
#: to words (its own tokenizer word), an unknown character, an empty sentence.
SENTENCES = [
    ["The", "cat", "sleeps."],
    ["The", "teacher", "saw", "a", "zebra", "!"],
    [],
    ["the", "cats", "naps", "here,", "near", "the", "store."],
    ["dog"],
    ["The", "keys", "to", "the", "cabinets", "are", "barking", "here."],
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer and a random 2-layer BERT, saved by ``save_pretrained``."""
    root = tmp_path_factory.mktemp("masked-scoring")
    vocab = SPECIAL + WORDS + list(LETTERS) + [f"##{c}" for c in LETTERS]
    wordpiece = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)},
                                           unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab.index("[CLS]")), ("[SEP]", vocab.index("[SEP]"))])
    wordpiece.decoder = decoders.WordPiece()
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]",
                                  sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]",
                                  mask_token="[MASK]")
    assert tokenizer.tokenize("The cats zebra!") == ["the", "cat", "##s", "z", "##e", "##b",
                                                     "##r", "##a", "[UNK]"]
    out = root / "bert"
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=64,
                               max_position_embeddings=40, initializer_range=0.5,
                               pad_token_id=tokenizer.pad_token_id)).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def minicons_scorer(folder: Path):
    from minicons.scorer import MaskedLMScorer

    scorer = MaskedLMScorer(str(folder), device="cpu", dtype=torch.float64)
    if not hasattr(scorer.tokenizer, "batch_encode_plus"):
        # transformers 5 dropped batch_encode_plus, which MaskedLMScorer.encode calls; it was
        # the tokenizer called on a list of texts
        scorer.tokenizer.batch_encode_plus = scorer.tokenizer.__call__
    return scorer


@pytest.mark.parametrize("variant", ["within_word_l2r", "original"])
def test_pll_equals_minicons(variant: str, folder: Path, minicons_scorer) -> None:
    """Each sentence's PLL (no special token scored) and each token's log-probability are
    minicons' ``sequence_score`` summed and ``token_score``, to 1e-5. Both run the model in
    float64: minicons returns float32 values, whose float32 sum drifts by 1e-5 over 20
    tokens."""
    scorer = PLLScorer(folder, variant=variant, batch_size=3, dtype=torch.float64)
    scored = scorer.score(SENTENCES)
    texts = [" ".join(words) for words in SENTENCES if words]
    theirs = minicons_scorer.sequence_score(texts, reduction=lambda x: x.double().sum(0).item(),
                                            PLL_metric=variant)
    tokens = minicons_scorer.token_score(texts, PLL_metric=variant)
    ours = [s for s in scored if s.words]
    for s, total, pairs in zip(ours, theirs, tokens, strict=True):
        assert s.eos_log_prob is None
        assert s.total() == pytest.approx(total, abs=1e-5)
        assert list(s.tokens) == [t for t, _ in pairs]
        np.testing.assert_allclose(s.token_log_probs, [v for _, v in pairs], atol=1e-5)
    empty = scored[SENTENCES.index([])]
    assert empty.word_log_probs == () and empty.tokens == ()


def test_the_variants_differ_on_words_of_several_tokens(folder: Path) -> None:
    """Within a word of one token the two variants agree; a word of several tokens (``cats``:
    ``cat ##s``) differs, since ``within_word_l2r`` masks ``##s`` too when scoring ``cat``."""
    l2r, original = (PLLScorer(folder, variant=v).score(SENTENCES) for v in
                     ("within_word_l2r", "original"))
    a, b = l2r[3], original[3]  # the cats naps here, near the store.
    assert a.tokens[1:3] == ("cat", "##s")
    assert a.word_log_probs[1] != pytest.approx(b.word_log_probs[1], abs=1e-4)
    # "the" (one token): only its context differs, masked tokens elsewhere are not its word
    assert a.token_log_probs[0] == pytest.approx(b.token_log_probs[0], abs=1e-6)
    # a word's last token is scored the same way by both variants
    assert a.token_log_probs[2] == pytest.approx(b.token_log_probs[2], abs=1e-6)
    assert a.total() != pytest.approx(b.total(), abs=1e-4)


def test_word_sums_unknowns_and_batching(folder: Path) -> None:
    """A word's log-probability sums its tokens' (``here,``: ``here`` and ``,``); ``!`` is
    unknown; the scores do not depend on the batch size (1 vs all at once)."""
    one = PLLScorer(folder, batch_size=1).score(SENTENCES)
    many = PLLScorer(folder, batch_size=64).score(SENTENCES)
    for a, b in zip(one, many):
        np.testing.assert_allclose(a.token_log_probs, b.token_log_probs, atol=1e-5)
    scored = many[3]
    assert scored.tokens[5:7] == ("here", ",")
    assert scored.word_log_probs[3] == pytest.approx(sum(scored.token_log_probs[5:7]))
    assert sum(scored.word_log_probs) == pytest.approx(sum(scored.token_log_probs))
    assert many[1].unknown == (False,) * 5 + (True,)
    assert len(many[1].word_log_probs) == 6


def test_a_masked_lm_is_told_from_a_causal_one(folder: Path) -> None:
    assert is_masked_lm(str(folder))
    assert not is_masked_config(GPT2Config())
    assert not is_masked_config(BertConfig(is_decoder=True))
    assert is_masked_config(BertConfig())
    assert not is_masked_lm(str(folder / "absent"))


def test_errors_are_one_line(folder: Path) -> None:
    with pytest.raises(InputError, match="variant"):
        PLLScorer(folder, variant="l2r")
    scorer = PLLScorer(folder)
    with pytest.raises(InputError) as err:
        scorer.score([["the"] * 60])
    assert "past" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("variant", [None, "original"])
def test_evaluate_syntax_scores_a_masked_lm_on_every_benchmark(
        variant: str | None, folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--hf DIR`` on a masked LM: BLiMP, Marvin & Linzen and SyntaxGym scored by PLL (the
    numbers are the scorer's), the variant in every benchmark's conventions, no end term."""
    data = toy_data(tmp_path / "data")
    flags = [] if variant is None else ["--pll", variant]
    out, _ = evaluate(capsys, "--hf", str(folder), "--data-dir", str(data), "--suites",
                      "number_src", "--batch-size", "2", *flags,
                      "--output", str(tmp_path / "records.jsonl"))
    used = variant or "within_word_l2r"
    assert set(out["conventions"]) == {"blimp", "marvin_linzen", "syntaxgym"}
    for convention in out["conventions"].values():
        assert convention["pll"] == used and convention["eos"] is False
    scorer = PLLScorer(folder, variant=used)
    good, bad = scorer.score([scorer.words(t) for t in ("The cat sleeps.", "The cat sleep.")])
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    first = next(r for r in records if r.get("UID") == "toy_agreement")
    assert first["correct"] == (good.total() > bad.total())
    assert out["headline"]["blimp/accuracy"] is not None
    assert out["syntaxgym"]["suites"]["number_src"]["accuracy"] is not None
    assert out["marvin_linzen"]["table1"]["Subject-verb agreement"]["Simple"]["accuracy"] \
        is not None


@pytest.mark.parametrize("flags", [["--eos"], ["--pll", "original", "--config", "x.yaml"]])
def test_eos_is_refused_for_a_masked_lm(flags: list[str], folder: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    """``--eos`` on a masked LM, and ``--pll`` without a model (``--hf`` or ``--ckpt_path``,
    a synlm masked LM), are one-line errors."""
    from conftest import run_cli

    args = flags if "--config" in flags else ["--hf", str(folder), *flags]
    assert run_cli(["evaluate-syntax", *args]) != 0
    err = capsys.readouterr().err.strip()
    assert flags[0] in err and len(err.splitlines()) == 1
    assert "masked LM" in err if flags == ["--eos"] else "--hf or --ckpt_path" in err


def test_pll_is_refused_for_a_causal_lm(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--pll`` when no ``--hf`` model is a masked LM: one line naming the model."""
    from conftest import run_cli

    GPT2LMHeadModel(GPT2Config(vocab_size=50, n_layer=1, n_head=1, n_embd=8,
                               n_positions=16, bos_token_id=0, eos_token_id=0)).save_pretrained(
        tmp_path / "gpt2")
    capsys.readouterr()  # save_pretrained's progress bar
    assert run_cli(["evaluate-syntax", "--hf", str(tmp_path / "gpt2"), "--pll",
                    "original"]) != 0
    err = capsys.readouterr().err.strip()
    assert "--pll" in err and "causal LM" in err and len(err.splitlines()) == 1
