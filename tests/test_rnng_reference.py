"""synlm's RNNG computes the released one's function (aistairc/rnng-pytorch, Noji & Oseki
2021): with the reference's float64 weights transplanted, the teacher-forced action and word
log-probabilities, and word-synchronous beam search's surprisals and n-best parses at
100/10/1, 20/5/1 and 5/5/0, equal those its own code computed (tests/fixtures/rnng/, made by
benchmarks/rnng_reference.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from synlm.syntax.actions import ActionVocab
from synlm.transition.beam import BeamSettings, SearchResult, search_batch
from synlm.transition.rnng import RNNG, RNNGOutput

FIXTURE = Path(__file__).parent / "fixtures" / "rnng" / "reference.pt"


@pytest.fixture(scope="module")
def reference() -> dict:
    return torch.load(FIXTURE, weights_only=True)


def transplanted(reference: dict) -> tuple[RNNG, ActionVocab]:
    """synlm's RNNG holding the reference's weights."""
    config = reference["config"]
    vocab = ActionVocab(reference["nonterminals"])
    assert ["<pad>", *vocab.itos] == reference["actions_itos"]
    model = RNNG(len(reference["words"]) - 1, len(vocab), config["w_dim"], config["h_dim"],
                 config["num_layers"], dropout=0.0, max_open=config["max_open_nts"],
                 max_consecutive=config["max_cons_nts"]).double().eval()
    model.load_state_dict(reference_weights(reference), strict=True)
    return model, vocab


def reference_weights(reference: dict) -> dict[str, torch.Tensor]:
    """The reference's weights under synlm's ``RNNG`` names. The reference numbers words and
    actions from a ``<pad>`` at 0 that synlm has not (the fixture gives its outputs a -1e30
    bias, so the reference's softmaxes run over the same entries as synlm's): every id
    shifts by one."""
    ref, config = reference["state_dict"], reference["config"]
    ours = {
        "embedding.weight": ref["emb.0.weight"][1:],
        "nt_embedding.weight": ref["rnng.nt_emb.0.weight"],
        "initial_item": ref["rnng.initial_emb.0.weight"][0],
        "output.weight": ref["rnng.output.1.weight"],
        "output.bias": ref["rnng.output.1.bias"],
        "composition.output.weight": ref["rnng.composition.output.1.weight"],
        "composition.output.bias": ref["rnng.composition.output.1.bias"],
        "action_decoder.weight": ref["action_mlp.weight"][1:],
        "action_decoder.bias": ref["action_mlp.bias"][1:],
        "word_decoder.bias": ref["vocab_mlp.bias"][1:],
    }
    for layer in range(config["num_layers"]):
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            ours[f"stack_lstm.cells.{layer}.{name}"] = ref[f"rnng.stack_rnn.lstm.{layer}.{name}"]
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        ours[f"composition.forward_lstm.{name}_l0"] = ref[f"rnng.composition.rnn.{name}_l0"]
        ours[f"composition.backward_lstm.{name}_l0"] = \
            ref[f"rnng.composition.rnn.{name}_l0_reverse"]
    ours["word_decoder.weight"] = ours["embedding.weight"]
    return ours


def padded(word_ids: list[list[int]], action_ids: list[list[int]]) -> tuple[torch.Tensor, ...]:
    """Sentences as a batch: words (B, N) (0 padded), actions (B, A) (-1 padded), lengths
    (B,)."""
    words = pad_sequence([torch.tensor(w) for w in word_ids], batch_first=True)
    actions = pad_sequence([torch.tensor(a) for a in action_ids], batch_first=True,
                           padding_value=-1)
    return words, actions, torch.tensor([len(w) for w in word_ids])


def batch(reference: dict, vocab: ActionVocab) -> tuple[torch.Tensor, ...]:
    """The fixture's sentences: words (B, N), actions (B, A) (-1 padded), lengths (B,)."""
    word_id = {w: i - 1 for i, w in enumerate(reference["words"])}
    sentences = reference["sentences"]
    return padded([[word_id[w] for w in s["words"]] for s in sentences],
                  [vocab.encode(s["actions"]) for s in sentences])


def assert_teacher_forcing_equal(out: RNNGOutput, reference: dict) -> None:
    """Each sentence's gold action and word log-probabilities and joint, to 1e-10."""
    for b, s in enumerate(reference["sentences"]):
        A, N = len(s["actions"]), len(s["words"])
        torch.testing.assert_close(out.action_log_probs[b, :A],
                                   torch.tensor(s["action_log_probs"], dtype=torch.float64),
                                   rtol=0, atol=1e-10)
        torch.testing.assert_close(out.word_log_probs[b, :N],
                                   torch.tensor(s["word_log_probs"], dtype=torch.float64),
                                   rtol=0, atol=1e-10)
        assert out.joint[b].item() == pytest.approx(s["joint"], abs=1e-10)


def assert_searches_equal(results: list[SearchResult], expected: list[dict],
                          itos: list[str]) -> None:
    """Each sentence's surprisals, n-best parses (action ids named by ``itos``) and their
    scores, to 1e-9."""
    for ours, theirs in zip(results, expected, strict=True):
        assert list(ours.surprisals) == pytest.approx(theirs["surprisals"], abs=1e-9)
        assert len(ours.parses) == len(theirs["parses"])
        for (actions, score), (their_actions, their_score) in zip(ours.parses,
                                                                  theirs["parses"]):
            assert [itos[a] for a in actions] == their_actions
            assert score == pytest.approx(their_score, abs=1e-9)


def test_teacher_forced_log_probs_equal_the_reference(reference):
    model, vocab = transplanted(reference)
    words, actions, lengths = batch(reference, vocab)
    with torch.no_grad():
        assert_teacher_forcing_equal(model(words, actions, lengths), reference)


@pytest.mark.parametrize("setting", ["100,10,1", "20,5,1", "5,5,0"])
def test_beam_search_equals_the_reference(reference, setting):
    """Each sentence's stack and action budget follow its own length, as the reference's
    when it searches a sentence alone (in a batch its sizes follow the longest sentence, the
    one difference, at 5/5/0: docs/reference-implementations.md §11.3)."""
    model, vocab = transplanted(reference)
    words, _, lengths = batch(reference, vocab)
    expected = reference["beams"][setting]
    results = search_batch(model, words, lengths,
                           BeamSettings(*map(int, setting.split(","))))
    assert_searches_equal(results, expected["alone"], vocab.itos)
