"""GPST's generative part (``synlm.transition.gpst``) and its beam search
(``synlm.transition.gpst_search``) against the released code.

Fixture (``tests/fixtures/gpst/``): ant-research/StructuredLM_RTDT at commit
3164bda63684f68866e578734a05d9983f4ef63b, ``create_model("r2d2-gen-fast", ...)`` with a tiny
random model in float64 on the CPU (GPT-2: 16 wide, 2 heads, 2 action + 2 generation layers,
64 positions, vocabulary 23; composition: 8 wide, 2 heads, feed-forward 16, 2 layers; the
configs are in ``released.json``; every parameter drawn N(0, 0.3) (matrices) or N(0, 0.2),
layer-norm gains + 1, seed 0). ``weights.pt`` holds its generative part's state dict.
Recorded: the released ``R2D2GenFastBeamSearcher.beam_search`` with ``target_ids`` on four
sentences (1, 3, 5 and 6 words), one at a time: with its action masks restricted to a gold
tree (teacher forcing: each step's log-probability and log p(x, y)), and unrestricted at
beam sizes 1, 3 and 8 (the prefix log-probabilities ``marginal_logp``, the value it returns
with ``tag`` all ones, the final beam's actions and scores); and the released perplexity
evaluator (``eval/evaluate_lm.py``, ``R2D2GenFastEvaluator.beam_search``) on the 3-, 5- and
6-word sentences and a 2-word one at the same beam sizes (its negative log-likelihood per
word, the final beam's valid action sequences). To run it under torch 2.13 and
transformers 5 on a CPU: ``SequenceSummary``, the head-pruning and model-parallel helpers
are not imported, ``get_head_mask(None)`` is ``[None] * n_layer``, ``fast_parser.py``
imports ``ModelArgs, Transformer`` from ``Llama_flash_attn`` (the released file omits it),
and ``BeamContext.gpt_input_cache`` takes the default dtype (float64) instead of float32.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from synlm.transition.gpst import GPST, REDUCE, SHIFT, plan_steps
from synlm.transition.gpst_convert import released_state_dict
from synlm.transition.gpst_search import (
    action_synchronous_search,
    action_synchronous_searches,
    beam_search,
    beam_searches,
)

FIXTURES = Path(__file__).parent / "fixtures" / "gpst"
RELEASED = json.loads((FIXTURES / "released.json").read_text())


def released_model() -> GPST:
    gpt, r2d2 = RELEASED["gpt_config"], RELEASED["r2d2_config"]
    model = GPST(gpt["vocab_size"], size=gpt["n_embd"], n_heads=gpt["n_head"],
                 action_layers=gpt["action_layer_num"],
                 generation_layers=gpt["n_layer"] - gpt["action_layer_num"],
                 compose_size=r2d2["hidden_size"], compose_heads=r2d2["num_attention_heads"],
                 compose_ffn=r2d2["intermediate_size"],
                 compose_layers=r2d2["encoder_num_hidden_layers"],
                 max_positions=gpt["n_positions"]).double().eval()
    state = torch.load(FIXTURES / "weights.pt", weights_only=True)
    model.load_state_dict(released_state_dict(state), strict=True)
    return model


def padded(rows: list[list[int]], fill: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [fill] * (width - len(row)) for row in rows])


def gold_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    sentences = RELEASED["sentences"]
    return (padded(sentences, 0), padded(RELEASED["gold_actions"], -1),
            torch.tensor([len(s) for s in sentences]))


def test_teacher_forcing_equals_the_released_search_on_gold_trees() -> None:
    words, actions, lengths = gold_batch()
    with torch.no_grad():
        out = released_model()(words, actions, lengths)
    for b, (gold, expected) in enumerate(zip(RELEASED["gold_actions"],
                                             RELEASED["teacher_forcing"])):
        # a SHIFT's step is log p(SHIFT) + log p(word), as the released search scores it
        word_steps = torch.zeros(len(gold), dtype=torch.float64)
        shifts = [t for t, a in enumerate(gold) if a == SHIFT]
        word_steps[shifts] = out.word_log_probs[b, :len(shifts)]
        steps = out.action_log_probs[b, :len(gold)] + word_steps
        torch.testing.assert_close(steps, torch.tensor(expected["step_log_probs"],
                                                       dtype=torch.float64),
                                   rtol=0, atol=1e-10)
        assert abs(out.joint[b].item() - expected["joint"]) < 1e-10
    assert (out.action_log_probs[actions < 0] == 0).all()


@pytest.mark.parametrize("beam_size", [1, 3, 8])
def test_beam_search_equals_the_released_search(beam_size: int) -> None:
    model = released_model()
    for sentence, expected in zip(RELEASED["sentences"],
                                  RELEASED["searches"][str(beam_size)]):
        result = beam_search(model, torch.tensor(sentence), beam_size)
        prefix = torch.tensor(result.word_log_probs, dtype=torch.float64).cumsum(0)
        torch.testing.assert_close(prefix, torch.tensor(expected["prefix_log_probs"],
                                                        dtype=torch.float64),
                                   rtol=0, atol=1e-10)
        # the released evaluator's sum leaves the first word out
        assert abs(sum(result.surprisals[1:]) - expected["surprisal_sum"]) < 1e-10
        assert [list(a) for a, _ in result.parses] == [h["actions"] for h in expected["beam"]]
        scores = torch.tensor([s for _, s in result.parses], dtype=torch.float64)
        torch.testing.assert_close(scores, torch.tensor([h["score"] for h in expected["beam"]],
                                                        dtype=torch.float64),
                                   rtol=0, atol=1e-10)


@pytest.mark.parametrize("beam_size", [1, 3, 8])
def test_action_synchronous_search_equals_the_released_perplexity_evaluator(beam_size: int
                                                                            ) -> None:
    model = released_model()
    for expected in RELEASED["perplexity"][str(beam_size)]:
        result = action_synchronous_search(model, torch.tensor(expected["sentence"]),
                                           beam_size)
        assert abs(result.nll_per_word - expected["nll_per_word"]) < 1e-10
        assert [list(a) for a, _ in result.parses] == expected["beam"]
        words = torch.tensor(expected["sentence"])
        with pytest.raises(ValueError, match="2 or more words"):
            action_synchronous_search(model, words[:1], beam_size)


@pytest.mark.parametrize("beam_size", [1, 3, 8])
def test_a_batch_of_mixed_lengths_equals_each_sentence_searched_alone(beam_size: int) -> None:
    model = released_model()
    sentences = [RELEASED["sentences"][i] for i in (3, 0, 2, 1, 3)] + [[4, 17]]
    for result, sentence in zip(beam_searches(model, sentences, beam_size), sentences,
                                strict=True):
        alone = beam_search(model, torch.tensor(sentence), beam_size)
        assert [a for a, _ in result.parses] == [a for a, _ in alone.parses]
        torch.testing.assert_close(torch.tensor([s for _, s in result.parses]),
                                   torch.tensor([s for _, s in alone.parses]),
                                   rtol=0, atol=1e-12)
        torch.testing.assert_close(torch.tensor(result.word_log_probs),
                                   torch.tensor(alone.word_log_probs), rtol=0, atol=1e-12)
        assert abs(result.end_log_prob - alone.end_log_prob) < 1e-12
    several = [s for s in sentences if len(s) >= 2]
    for score, sentence in zip(action_synchronous_searches(model, several, beam_size),
                               several, strict=True):
        alone_score = action_synchronous_search(model, torch.tensor(sentence), beam_size)
        assert [a for a, _ in score.parses] == [a for a, _ in alone_score.parses]
        assert abs(score.log_prob - alone_score.log_prob) < 1e-12
    with pytest.raises(ValueError, match="sentences of 1 or more words"):
        beam_searches(model, [[3], []], beam_size)


def test_a_parse_score_is_its_teacher_forced_joint_and_the_end_term_is_a_log_prob() -> None:
    model = released_model()
    sentence = RELEASED["sentences"][3]
    result = beam_search(model, torch.tensor(sentence), 8)
    actions = padded([list(a) for a, _ in result.parses], -1)
    rows = len(result.parses)
    with torch.no_grad():
        out = model(torch.tensor([sentence] * rows), actions,
                    torch.full((rows,), len(sentence)))
    torch.testing.assert_close(out.joint, torch.tensor([s for _, s in result.parses],
                                                       dtype=torch.float64),
                               rtol=0, atol=1e-10)
    assert result.end_log_prob < 0
    assert all(a.count(SHIFT) == len(sentence) and a.count(REDUCE) == len(sentence) - 1
               for a, _ in result.parses)


@pytest.mark.parametrize("actions, message", [
    ([[REDUCE]], "REDUCE at step 0 with 0 element"),
    ([[SHIFT, SHIFT]], "SHIFT at step 1 after the last of its 1 words"),
    ([[SHIFT, 2]], "2 at step 1"),
])
def test_illegal_actions_are_one_line_errors(actions: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_steps(actions, [1], 1)


def test_a_tiny_model_lowers_its_loss() -> None:
    torch.manual_seed(0)
    model = GPST(23, size=16, n_heads=2, action_layers=1, generation_layers=1,
                 compose_size=8, compose_heads=2, compose_ffn=16, compose_layers=1,
                 max_positions=16, dropout=0.0)
    words, actions, lengths = gold_batch()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-2)
    losses = []
    for _ in range(30):
        loss = -model(words, actions, lengths).joint.mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert all(p.grad is not None for p in model.parameters())
