"""The RNNG family's search scores a word only where its successor may be kept
(``synlm.transition.beam.step_log_probs``, ``RNNG.split_log_probs``): the bound it prunes by
is an upper bound of the word's log-probability (Jensen's, tight on a flat distribution), and
the search with pruning equals the search that scores every word (n-best lists identical, the
numbers to 1e-12 in float64) for the top-down and in-order RNNG and the CAG, over words and
over pieces, with and without the fast track, while scoring fewer words."""

from __future__ import annotations

import math

import pytest
import torch
from test_beam_pool import (
    assert_same_search,
    assert_same_search_over_pieces,
    random_model,
    sentences,
)

from synlm.transition import beam as beam_module
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.cag import CAG
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.parser_state import SHIFT, Limits
from synlm.transition.rnng import RNNG, RNNGStep


def every_word_scored(model, state, words, legal, scores, shift_size, convention):  # type: ignore[no-untyped-def]
    """``step_log_probs`` without pruning: the model's whole step."""
    return model.next_log_probs(state, words, legal, **convention).double()


def step_of(model: RNNG, rows: int = 6) -> tuple[RNNGStep, torch.Tensor]:
    """A step of ``rows`` fresh stacks, each with SHIFT legal, and those rows."""
    state = model.initial_state(rows, 8)
    legal = state.parser.legal_actions(torch.full((rows,), 3), model.n_actions, Limits(8))
    legal[:, SHIFT] = True
    words = torch.arange(1, rows + 1)
    return model.split_log_probs(state, words, legal), torch.arange(rows)


def test_the_bound_is_above_the_word_and_tight_on_a_flat_softmax() -> None:
    model = random_model(RNNG)
    with torch.no_grad():
        model.word_decoder.weight.mul_(40.0)  # a peaked word distribution: a loose bound
    with torch.no_grad():
        step, rows = step_of(model)
        exact, bound = step.word_log_probs(rows), step.word_bounds(rows)
    assert bool((bound > exact).all())
    assert float((bound - exact).min()) > 1.0  # far from the word where it peaks
    with torch.no_grad():
        model.word_decoder.weight.zero_()
        model.word_decoder.bias.zero_()
    step, rows = step_of(model)  # every word 1/V: the bound is log(1/V) and its margin
    assert step.word_log_probs(rows).tolist() == pytest.approx([-math.log(20)] * 6, abs=1e-12)
    assert step.word_bounds(rows).tolist() == pytest.approx(
        [-math.log(20) + RNNGStep.MARGIN] * 6, abs=1e-12)


def test_next_log_probs_is_the_split_step_summed() -> None:
    model = random_model(RNNG)
    step, rows = step_of(model)
    state = model.initial_state(6, 8)
    legal = state.parser.legal_actions(torch.full((6,), 3), model.n_actions, Limits(8))
    legal[:, SHIFT] = True
    whole = model.next_log_probs(state, torch.arange(1, 7), legal)
    assert torch.equal(whole[:, SHIFT], step.actions[:, SHIFT] + step.word_log_probs(rows))
    others = torch.arange(model.n_actions) != SHIFT
    assert torch.equal(whole[:, others], step.actions[:, others])


@pytest.mark.parametrize("kind", [RNNG, InOrderRNNG, CAG])
@pytest.mark.parametrize("sizes", [(8, 4, 1), (24, 6, 2), (16, 4, 0)])
def test_the_pruned_search_is_the_search_of_every_word(
        kind: type[RNNG], sizes: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    model = random_model(kind)
    with torch.no_grad():  # a flatter word softmax than the other weights', as a trained
        model.word_decoder.bias.zero_()  # model's bound is nearer its words than U(-0.5, 0.5)
    words, lengths = sentences()
    scored: list[int] = []
    word_log_probs = RNNGStep.word_log_probs

    def counting(step: RNNGStep, rows: torch.Tensor) -> torch.Tensor:
        scored.append(rows.numel())
        return word_log_probs(step, rows)

    monkeypatch.setattr(RNNGStep, "word_log_probs", counting)
    settings = BeamSettings(*sizes)
    pruned = search_sentences(model, words, lengths, settings)
    pruned_rows, scored[:] = sum(scored), []
    with monkeypatch.context() as patch:
        patch.setattr(beam_module, "step_log_probs", every_word_scored)
        every = search_sentences(model, words, lengths, settings)
    assert_same_search(pruned, every)
    assert 0 < pruned_rows < sum(scored)


def test_the_pruned_search_over_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a word only SHIFT is legal: every item's piece is scored, nothing pruned."""
    assert_same_search_over_pieces(
        monkeypatch, lambda model, patch: patch.setattr(beam_module, "step_log_probs",
                                                        every_word_scored))
