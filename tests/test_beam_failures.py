"""A beam that empties, and sentences a transition LM cannot score: a long sentence under a
small stack is searched again with no stack bound; a sentence the beam finds no tree for even
then is marked (never NaN) and counted apart by the TSE scorer, ``evaluate-syntax``,
``parse``, the lm-eval model and ``synlm test``; an empty sentence is a one-line error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from nltk import Tree

from conftest import fake_models, run_cli
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.outputs import ActionBatch
from synlm.syntax.actions import ActionVocab, oracle
from synlm.syntax.sentence import Sentence
from synlm.transition.beam import BeamSettings, search_batch, search_sentences
from synlm.transition.lm import TransitionLM
from synlm.transition.rnng import RNNG
from synlm.tse.minimal_pairs import MinimalPair, evaluate_pairs, summarize
from synlm.tse.scoring import ModelScorer

WORDS = ["<eos>", "<unk>", "the", "dog", "cat", "sees", "sleeps", "a", "never"]
#: The word the model never generates (its output logit -inf): no tree holds it.
NEVER = "never"


def tiny_rnng(seed: int = 0, model_class: type[RNNG] = RNNG) -> TransitionLM:
    """A random RNNG recipe (``model_class``: top-down, or the in-order ``InOrderRNNG``)
    over ``WORDS`` with its vocabularies, in eval mode, whose word softmax gives ``NEVER``
    probability 0."""
    torch.manual_seed(seed)
    vocab = Vocab(WORDS)
    actions = ActionVocab(["S", "NP", "VP"])
    model = TransitionLM(model_class(len(vocab), len(actions), input_size=8, hidden_size=8,
                                     num_layers=1, dropout=0.0), beam_size=6, word_beam_size=3)
    model.vocab, model.action_vocab, model.normalization = vocab, actions, "ptb"
    with torch.no_grad():
        model.model.word_decoder.bias[vocab.stoi[NEVER]] = float("-inf")
    return model.eval()


def ids(model: TransitionLM, text: str) -> list[int]:
    return model.vocab.encode(text.split())


def test_an_emptied_beam_is_searched_again_without_the_stack_bound() -> None:
    model = tiny_rnng()
    words = torch.tensor([ids(model, " ".join(["the", "dog", "sees", "a", "cat"] * 6))])
    n = torch.tensor([30])
    small = BeamSettings(6, 3, 1, max_stack=8)
    (emptied,) = search_batch(model.model, words, n, small)
    assert not emptied.parsed and emptied.word_log_probs is None and emptied.parses == ()
    (again,) = search_sentences(model.model, words, n, small)
    (unbounded,) = search_batch(model.model, words, n, BeamSettings(6, 3, 1, max_stack=None))
    assert again.parsed and again.unbounded_stack
    assert again.word_log_probs == pytest.approx(unbounded.word_log_probs, abs=1e-9)
    assert all(math.isfinite(lp) and lp < 0 for lp in again.word_log_probs)
    # the tree found holds every word: 30 SHIFTs
    assert again.parses[0][0].count(0) == 30
    # a sentence whose beam does not empty is not searched again
    (short,) = search_sentences(model.model, words[:, :5], torch.tensor([5]), small)
    assert short.parsed and not short.unbounded_stack


def test_a_beam_that_empties_again_is_marked_never_nan() -> None:
    model = tiny_rnng()
    rows = [ids(model, "the dog never sleeps"), ids(model, "the dog sleeps")]
    marked, fine = model.search_ids(rows)
    assert not marked.parsed and marked.unbounded_stack
    assert marked.word_log_probs is None and marked.end_log_prob is None
    assert marked.surprisals is None and marked.parses == ()
    assert fine.parsed and not fine.unbounded_stack and math.isfinite(sum(fine.word_log_probs))
    assert model.best_tree(marked, ["the", "dog", "never", "sleeps"]) is None
    assert model.parse([["the", "dog", "never", "sleeps"], ["a", "cat"]])[0] is None
    assert model.search_ids([]) == []


def test_the_tse_scorer_counts_a_pair_without_a_parse_apart() -> None:
    model = tiny_rnng()
    scorer = ModelScorer(model)
    scored = scorer.score([["the", "dog", "never", "sleeps"], ["the", "dog", "sleeps"]])
    assert not scored[0].parsed and scored[0].word_log_probs is None
    assert scored[1].parsed and len(scored[1].word_log_probs) == 3
    with pytest.raises(ValueError, match="no parse within the beam"):
        scored[0].total()
    pairs = [MinimalPair({"n": 0}, "the dog never sleeps", ("the dog never sleep",)),
             MinimalPair({"n": 1}, "the dog sleeps", ("the dog sees",)),
             MinimalPair({"n": 2}, "the cat sleeps", ("never the cat sleeps",))]
    records = evaluate_pairs(pairs, scorer)
    assert [r.get("no_parse", False) for r in records] == [True, False, True]
    assert "correct" not in records[0] and "good_log_prob" not in records[0]
    good, bad = (sum(s.word_log_probs) for s in scorer.score(
        [["the", "dog", "sleeps"], ["the", "dog", "sees"]]))
    assert records[1]["correct"] == (good > bad)
    summary = summarize(records)
    assert summary["pairs"] == 1 and summary["no_parse_pairs"] == 2
    assert summary["accuracy"] == float(good > bad)


def test_evaluate_syntax_marks_the_pair_and_names_the_convention(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_models(monkeypatch, lambda path: tiny_rnng())
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b}) + "\n"
                             for g, b in [("the dog never sleeps", "the dog never sleep"),
                                          ("the dog sleeps", "the dog sees")]))
    assert run_cli(["evaluate-syntax", "--ckpt_path", "rnng.ckpt", "--pairs", str(pairs)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["pairs"]["overall"]["pairs"] == 1
    assert summary["pairs"]["overall"]["no_parse_pairs"] == 1
    assert summary["headline"]["pairs/accuracy"] in (0.0, 1.0)
    assert "pairs: 1 pairs or items have a sentence with no parse within the beam" in \
        captured.err
    convention = summary["conventions"]["pairs"]
    assert convention["search_convention"] == "renormalised_given_length"
    assert convention["eos_term"].startswith("0 for every sentence")
    assert "nan" not in json.dumps({k: v for k, v in summary.items()
                                    if k != "provenance"}).lower()  # paths may hold "nan"


def test_parse_writes_an_empty_line_and_counts_it(capsys: pytest.CaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setattr("synlm.loading.load_model", lambda path: tiny_rnng())
    ckpt = tmp_path / "rnng.ckpt"
    ckpt.touch()  # the command checks that the checkpoint is there
    text = tmp_path / "in.txt"
    text.write_text("the dog sleeps\nthe dog never sleeps\na cat sees the dog\n")
    assert run_cli(["parse", "--ckpt_path", str(ckpt), "--input", str(text)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.split("\n")
    assert lines[1] == "" and lines[0].startswith("(") and lines[2].startswith("(")
    assert "1 of 3 sentences have no parse within the beam (sentences 2)" in captured.err
    assert run_cli(["parse", "--ckpt_path", str(ckpt), "--input", str(text),
                    "--format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records[1] == {"words": ["the", "dog", "never", "sleeps"], "tree": None,
                          "no_parse": True}
    assert records[0]["tree"] is not None


def test_the_lm_eval_model_gives_a_counted_minus_infinity() -> None:
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from synlm.lm_eval_model import SynlmLM

    lm = SynlmLM(model=tiny_rnng(), beam_size=6, word_beam_size=3)
    requests = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
                for text in ("the dog never sleeps", "the dog sleeps")]
    marked, fine = lm.loglikelihood_rolling(requests)
    assert marked == float("-inf") and math.isfinite(fine) and fine < 0
    assert lm.no_parse == 1
    pair = [Instance(request_type="loglikelihood", doc={}, arguments=("the dog", " never"),
                     idx=0)]
    assert lm.loglikelihood(pair)[0] == (float("-inf"), False)
    assert lm.no_parse == 2


def test_an_empty_sentence_is_a_one_line_error_naming_it(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = tiny_rnng()
    with pytest.raises(InputError, match="sentence 2: no words"):
        search_sentences(model.model, torch.zeros(2, 3, dtype=torch.long),
                         torch.tensor([3, 0]), BeamSettings(6, 3, 1))
    with pytest.raises(InputError, match="sentence 2 of 2: no words"):
        ModelScorer(model).score([["the", "dog", "sleeps"], []])
    fake_models(monkeypatch, lambda path: tiny_rnng())
    text = tmp_path / "sentences.txt"
    text.write_text("the dog sleeps\n. ,\n")
    assert run_cli(["evaluate-syntax", "--ckpt_path", "rnng.ckpt", "--sentences", str(text),
                    "--surprisals", str(tmp_path / "out.tsv"), "--tokenise", "treebank"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{text}:2: no words" in err


def test_synlm_test_leaves_a_sentence_without_a_parse_out_and_counts_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """test's beam_ppl over the parsed sentence alone, its F1 over one sentence, and
    ``test/no_parse`` 1 with a warning."""
    model = tiny_rnng()
    logged: dict[str, float] = {}
    monkeypatch.setattr(model, "log", lambda name, value, **_: logged.update({name: float(value)}))
    trees = [Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VBZ sleeps)))"),
             Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (RB never) (VBZ sleeps)))")]
    words = [ids(model, " ".join(tree.leaves())) for tree in trees]
    actions = [model.action_vocab.encode(oracle(tree)) for tree in trees]
    batch = ActionBatch(
        words=torch.tensor([words[0] + [0], words[1]]),
        actions=torch.tensor([actions[0] + [-1] * (len(actions[1]) - len(actions[0])),
                              actions[1]]),
        word_lengths=torch.tensor([3, 4]), action_lengths=torch.tensor(list(map(len, actions))),
        sentences=[Sentence(tree.leaves(), tree) for tree in trees], n_words=7,
        n_actions=sum(map(len, actions)))
    with torch.no_grad():  # as Lightning's test loop
        model.test_step(batch, 0)
    with pytest.warns(UserWarning, match="1 test sentences have no parse within the beam"):
        model.on_test_epoch_end()
    (fine,) = model.search_ids([words[0]])
    assert logged["test/no_parse"] == 1.0
    assert logged["test/beam_ppl"] == pytest.approx(math.exp(-sum(fine.word_log_probs) / 3),
                                                    rel=1e-5)
    assert 0.0 <= logged["test/uf1"] <= 1.0


def test_the_lm_score_leaves_out_a_sample_without_a_parse_and_says_so() -> None:
    from synlm.metrics.generation import lm_score

    model = tiny_rnng().double()  # float64: the batches differ, and float32 sums with them
    parsed = lm_score(model, [["the", "dog", "sleeps"], ["a", "cat"]])
    with pytest.warns(UserWarning, match="1 of 3 samples have no parse"):
        mixed = lm_score(model, [["the", "dog", "sleeps"], ["the", "never"], ["a", "cat"]])
    assert math.isfinite(parsed) and mixed == pytest.approx(parsed, abs=1e-12)
