"""``HFScorer`` on two tiny causal LMs built here and loaded back by path: a GPT-2 with a
byte-level BPE (BOS = EOS = ``<|endoftext|>``) and a Llama with a sentencepiece-style BPE
(``<s>``, ``</s>``, ``<unk>``). Word log-probabilities against one hand-run forward pass,
batching, transformers' own loss, unknown words, the benchmarks end to end, and the errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2TokenizerFast,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from synlm.data.synthetic import SyntheticTreebank
from synlm.errors import InputError
from synlm.tse.hf_scoring import HFScorer
from synlm.tse.minimal_pairs import MinimalPair, evaluate_pairs
from synlm.tse.syntaxgym import evaluate_suite, parse_suite, region_words

POSITIONS = 64
#: Mixed lengths, an empty sentence, a word the BPE splits into characters (``zebra``),
#: capitals and punctuation attached to words, as benchmark text has them.
SENTENCES = [
    ["The", "teacher", "saw", "a", "zebra", "."],
    ["she", "slept", "."],
    [],
    ["some", "old", "farmer", "heard", "that", "the", "clever", "child", "laughed", "near",
     "the", "river", "with", "the", "green", "boat."],
    ["the", "dog", "waited"],
    ["They", "visited", "the", "strange", "king's", "garden", "behind", "the", "house."],
]
#: The start token each model conditions the first word on.
START = {"gpt2": "<|endoftext|>", "llama": "<s>"}


def _corpus() -> list[str]:
    return [" ".join(s.words) for s in SyntheticTreebank(n_train=300).sentences("train")]


def _gpt2(folder: Path, text: list[str]) -> None:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    # GPT-2's own special tokens: one token is its BOS, EOS and unk
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>",
                                  eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer.save_pretrained(folder)
    end = tokenizer.eos_token_id
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=2, n_head=2, n_embd=32,
                               n_positions=POSITIONS, initializer_range=0.2,
                               bos_token_id=end, eos_token_id=end)).save_pretrained(folder)


def _llama(folder: Path, text: list[str]) -> None:
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    bpe.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    # trained on lowercase text: a capital letter is outside its alphabet, read as <unk>
    bpe.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>")
    tokenizer.save_pretrained(folder)
    LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=POSITIONS,
        initializer_range=0.2, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id)).save_pretrained(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both models and their tokenizers, each saved to a folder by ``save_pretrained``."""
    root = tmp_path_factory.mktemp("hf-scoring")
    text = _corpus()
    torch.manual_seed(0)
    _gpt2(root / "gpt2", text)
    _llama(root / "llama", text)
    return {"gpt2": root / "gpt2", "llama": root / "llama"}


@pytest.fixture(scope="module")
def scorers(folders: dict[str, Path]) -> dict[str, HFScorer]:
    """Each model scored in float64, so that hand computations agree to 1e-6 and beyond."""
    return {kind: HFScorer(path, batch_size=4, dtype=torch.float64)
            for kind, path in folders.items()}


def _by_hand(path: Path, words: Sequence[str]) -> tuple[list[int], list[int], torch.Tensor]:
    """Each word tokenised on its own (a space before all but the first), its tokens' word
    indices, and the log-probabilities of the tokens then the EOS token from one unbatched
    float64 forward pass over ``[start] + ids``."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    ids, index = [], []
    for i, word in enumerate(words):
        pieces = tokenizer((" " if i else "") + word, add_special_tokens=False).input_ids
        ids += pieces
        index += [i] * len(pieces)
    start = tokenizer.convert_tokens_to_ids(START[path.name])
    row = torch.tensor([[start, *ids, tokenizer.eos_token_id]])  # (1, n + 2)
    with torch.no_grad():
        log_probs = model(input_ids=row[:, :-1]).logits.log_softmax(-1)  # (1, n + 1, V)
    return ids, index, log_probs.gather(-1, row[:, 1:, None])[0, :, 0]  # (n + 1,)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_word_log_probs_are_the_token_log_probs_summed_over_each_word(
        kind: str, folders: dict[str, Path], scorers: dict[str, HFScorer]) -> None:
    """Each word's log-probability is the sum of its tokens' from one forward pass over
    ``[BOS] + ids`` (GPT-2: ``<|endoftext|>``), the tokens being those of each word alone;
    the EOS term is the last target's."""
    scorer = scorers[kind]
    tokenizer = scorer.tokenizer
    for words, scored in zip(SENTENCES, scorer.score(SENTENCES)):
        ids, index, expected = _by_hand(folders[kind], words)
        assert scored.words == tuple(words)
        assert scored.tokens == tuple(tokenizer.convert_ids_to_tokens(ids))
        per_word = torch.zeros(len(words), dtype=torch.float64).index_add_(
            0, torch.tensor(index, dtype=torch.long), expected[:-1])
        assert scored.word_log_probs == pytest.approx(per_word.tolist(), abs=1e-6)
        assert scored.token_log_probs == pytest.approx(expected[:-1].tolist(), abs=1e-6)
        assert scored.eos_log_prob == pytest.approx(float(expected[-1]), abs=1e-6)
        assert all(value < 0 for value in scored.word_log_probs)
    # a word of many tokens, the space before it a token of its own that belongs to it
    zebra = scorer.score([["a", "zebra"]])[0]
    space = "Ġ" if kind == "gpt2" else "▁"
    assert zebra.tokens[1] == space and len(zebra.tokens) > 3
    assert zebra.word_log_probs[1] == pytest.approx(sum(zebra.token_log_probs[1:]), abs=1e-12)


def test_batched_equals_one_at_a_time_and_progress_counts_sentences(
        folders: dict[str, Path]) -> None:
    """Three sentences a batch (sorted, right padded, float32 as saved) equal one at a time,
    for both models; the progress callback hears of every sentence."""
    for path in folders.values():
        seen: list[int] = []
        batched = HFScorer(path, batch_size=3, progress=seen.append).score(SENTENCES)
        single = HFScorer(path, batch_size=1).score(SENTENCES)
        assert seen == [3, 3]
        for b, s in zip(batched, single):
            assert b.tokens == s.tokens
            assert b.token_log_probs == pytest.approx(s.token_log_probs, abs=1e-5)
            assert b.word_log_probs == pytest.approx(s.word_log_probs, abs=1e-5)
            assert b.eos_log_prob == pytest.approx(s.eos_log_prob, abs=1e-5)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_sentence_total_is_minus_transformers_loss_times_its_tokens(
        kind: str, folders: dict[str, Path], scorers: dict[str, HFScorer]) -> None:
    """What minicons' ``IncrementalLMScorer(bos_token=True)`` sums: the total without the end
    equals ``-loss * n`` with transformers' own causal-LM loss over ``[BOS] + ids``; a built
    model with its tokenizer scores as its folder does."""
    path = folders[kind]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    built = HFScorer(model, tokenizer=tokenizer)
    assert built.name == str(path)
    sentences = [words for words in SENTENCES if words]
    for words, scored, same in zip(sentences, scorers[kind].score(sentences),
                                   built.score(sentences)):
        ids = tokenizer(" ".join(words), add_special_tokens=False).input_ids
        row = torch.tensor([[tokenizer.convert_tokens_to_ids(START[kind]), *ids]])
        with torch.no_grad():
            loss = model(input_ids=row, labels=row).loss
        # transformers computes its loss in float32 (``ForCausalLMLoss``)
        assert scored.total() == pytest.approx(-float(loss) * len(ids), rel=1e-6)
        assert scored.total(eos=True) == pytest.approx(scored.total() + scored.eos_log_prob)
        assert same.word_log_probs == pytest.approx(scored.word_log_probs, abs=1e-9)


def test_unknown_words_eos_and_the_scorer_attributes(scorers: dict[str, HFScorer]) -> None:
    """A capital outside the Llama tokenizer's alphabet makes its word unknown (only it);
    byte-level GPT-2 reads every word; both give the end of the sentence; words are the
    whitespace-separated ones; SyntaxGym counts no end token for either."""
    words = ["the", "Zebra", "saw", "a", "cat", "."]
    llama, gpt2 = scorers["llama"].score([words])[0], scorers["gpt2"].score([words])[0]
    assert llama.unknown == (False, True, False, False, False, False)
    assert "<unk>" in llama.tokens
    assert not any(gpt2.unknown)
    for scored in (llama, gpt2):
        assert scored.eos_log_prob is not None and scored.eos_log_prob < 0
    for kind, scorer in scorers.items():
        assert scorer.syntaxgym_mapping == "offsets"
        assert scorer.covers_end("the store.") and scorer.covers_end("")
        assert scorer.words("the  store. ") == ["the", "store."] and scorer.words(" ") == []
        assert scorer.vocab_size == len(scorer.tokenizer)
        assert scorer.tokenizer.convert_ids_to_tokens(scorer.start_id) == START[kind]


def _suite() -> dict:
    """Two conditions of three items; region 2 is critical, region 3 is punctuation in one
    condition and empty in the other."""

    def condition(name: str, contents: list[str]) -> dict:
        return {"condition_name": name, "regions": [
            {"region_number": n, "content": c} for n, c in enumerate(contents, start=1)]}

    items = [(["The keys to the", "cabinet", "are", "here."], ["The keys to the", "cabinet",
                                                               "is", "here."]),
             (["The dog near the", "farmers", ",", "slept"], ["The dog near the", "farmers",
                                                              "", "sleeps"]),
             (["A", "child", "laughed", "."], ["A", "child", "laugh", "."])]
    return {"meta": {"name": "agreement", "metric": "sum"},
            "region_meta": {"1": "subject", "2": "attractor", "3": "verb", "4": "end"},
            "predictions": [{"type": "formula", "formula": "(3;%good%) < (3;%bad%)"}],
            "items": [{"item_number": i, "conditions": [condition("good", a),
                                                        condition("bad", b)]}
                      for i, (a, b) in enumerate(items, start=1)]}


def test_the_benchmarks_run_end_to_end(scorers: dict[str, HFScorer]) -> None:
    """Minimal pairs and a SyntaxGym suite evaluate through ``HFScorer``: a pair's numbers
    are its sentences' totals, and a region's surprisal is minus its words' summed
    log-probabilities (no end-of-sentence token in any region)."""
    scorer = scorers["gpt2"]
    pairs = [MinimalPair({"pairID": 0}, "The keys to the cabinet are here.",
                         ("The keys to the cabinet is here.",)),
             MinimalPair({"pairID": 1}, "Every child laughs.",
                         ("Every child laugh.", "Every child laughing."))]
    for eos in (False, True):
        records = evaluate_pairs(pairs, scorer, eos=eos)
        for pair, record in zip(pairs, records):
            good, *bad = scorer.score([scorer.words(t) for t in (pair.good, *pair.bad)])
            assert record["good_log_prob"] == pytest.approx(good.total(eos), abs=1e-9)
            assert record["bad_log_probs"] == pytest.approx([b.total(eos) for b in bad], abs=1e-9)
            assert record["correct"] == all(good.total(eos) > b.total(eos) for b in bad)
            assert not record["unknown"]
    assert records[0]["differing_words"] == ["are", "is"]

    suite = parse_suite(_suite(), "agreement.json")
    result = evaluate_suite(suite, scorer)
    assert len(result.items) == 3 and 0 <= result.accuracy <= 1 and result.unknown_share == 0
    for item, item_result in zip(suite.items, result.items):
        for condition in item.conditions:
            regions = region_words(scorer, condition)
            scored = scorer.score([[w for region in regions for w in region]])[0]
            start = 0
            for number, region in zip(condition.region_numbers, regions):
                stop = start + len(region)
                expected = -sum(scored.word_log_probs[start:stop])
                got = item_result.surprisals[condition.name][number]
                assert got == pytest.approx(expected, abs=1e-9)
                start = stop
        bad, good = (item_result.surprisals[c][3] for c in ("bad", "good"))
        assert item_result.predictions == (good < bad,)


def test_errors_are_one_line_input_errors(tmp_path: Path, folders: dict[str, Path]) -> None:
    """A missing folder, a folder with no model, one with no tokenizer, a built model without
    its tokenizer, a bad batch size or dtype, a sentence past the context: one line each,
    naming what was wrong."""
    missing = tmp_path / "no-model-here"
    with pytest.raises(InputError, match="no such folder") as err:
        HFScorer(missing)
    assert str(missing) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match="cannot load a causal LM's model from this folder") \
            as err:
        HFScorer(tmp_path)
    assert str(tmp_path) in str(err.value) and "\n" not in str(err.value)
    no_tokenizer = tmp_path / "weights-only"
    AutoModelForCausalLM.from_pretrained(folders["gpt2"]).save_pretrained(no_tokenizer)
    with pytest.raises(InputError, match="its tokenizer reads 'The cat.' as no tokens"):
        HFScorer(no_tokenizer)
    with pytest.raises(InputError, match="tokenizer: required"):
        HFScorer(AutoModelForCausalLM.from_pretrained(folders["gpt2"]))
    with pytest.raises(InputError, match="batch_size=0"):
        HFScorer(folders["gpt2"], batch_size=0)
    with pytest.raises(InputError, match="dtype=int8"):
        HFScorer(folders["gpt2"], dtype="int8")
    scorer = HFScorer(folders["llama"])
    long = ["the", "dog", "saw", "a", "cat", "near", "the", "river"] * 8
    with pytest.raises(InputError, match=rf"'the dog saw a cat near \.\.\.' is \d+ tokens.*"
                                         rf"at most {POSITIONS - 1} tokens") as err:
        scorer.score([["a", "cat"], long])
    assert "\n" not in str(err.value)


def test_evaluate_syntax_scores_a_local_hf_model(folders: dict[str, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """``synlm evaluate-syntax --hf FOLDER`` on one's own pairs and suite: the numbers are the
    scorer's, SyntaxGym's regions count no end of sentence (the reference's Hugging Face
    path), and the output names the conventions."""
    from synlm.cli import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "The keys to the cabinet are here.",
                                 "sentence_bad": "The keys to the cabinet is here."}) + "\n")
    suite = tmp_path / "agreement.json"
    suite.write_text(json.dumps(_suite()))
    assert main(["evaluate-syntax", "--hf", str(folders["gpt2"]), "--pairs", str(pairs),
                 "--benchmark", "syntaxgym", "--suites", str(suite), "--batch-size", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["model"] == str(folders["gpt2"])
    assert out["conventions"]["syntaxgym"]["eos"] is False
    assert out["conventions"]["pairs"]["eos"] is False
    scorer = HFScorer(folders["gpt2"])
    good, bad = scorer.score([scorer.words(t) for t in ("The keys to the cabinet are here.",
                                                         "The keys to the cabinet is here.")])
    assert out["headline"]["pairs/accuracy"] == float(good.total() > bad.total())
    expected = evaluate_suite(parse_suite(_suite(), str(suite)), scorer)
    assert out["syntaxgym"]["suites"]["agreement"]["accuracy"] == pytest.approx(
        expected.accuracy)
