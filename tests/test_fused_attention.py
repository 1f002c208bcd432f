"""The action Transformer's fused attention (``attention_kernel: fused``, flex_attention with
a block mask and TG's relative term as a ``score_mod``) equals the unfused one in float32,
batched and one action at a time through the cache, for every policy and one of the test's
own; the vocabulary computed only at the tokens that predict equals it computed everywhere;
beam search with the cache grown as rows fill it equals it with the whole budget allocated."""

from __future__ import annotations

import pytest
import torch
from test_action_transformer import grammar, one_at_a_time, random_model  # noqa: F401
from test_attention_policies import LocalWindow
from test_rnng import encoded

from synlm.errors import SettingError
from synlm.transition import action_layers
from synlm.transition import action_transformer as at
from synlm.transition.action_cache import ActionTransformerState
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention import named_policies
from synlm.transition.beam import (
    BeamSettings,
    action_budget,
    search_sentences,
    sentence_bytes,
    stack_slots,
    state_nbytes,
)
from synlm.transition.parser_state import NO_ACTION, SHIFT

NAMED = sorted(named_policies())
POLICIES: list[object] = [*NAMED, LocalWindow(3), LocalWindow(3, relative=True)]
IDS = [*NAMED, "window", "window-relative"]


@pytest.fixture
def batch(grammar) -> tuple[int, int, torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: F811
    """Five trees of different lengths (the batch padded), with their vocabulary sizes."""
    trees, vocab, word_ids = grammar
    words, actions, lengths = encoded(trees[:5], vocab, word_ids)
    return len(word_ids), len(vocab), words, actions, lengths


@pytest.fixture
def flex_calls(monkeypatch) -> list[int]:
    """Counts the calls of flex_attention through the model."""
    calls: list[int] = []
    original = action_layers._flex_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(action_layers, "_flex_attention", spy)
    return calls


def pair(V: int, n_actions: int, attention: object) -> tuple[ActionTransformer, ...]:
    """The same float32 random model, unfused and fused."""
    return tuple(random_model(V, n_actions, attention, attention_kernel=kernel).float()
                 for kernel in ("unfused", "fused"))


@pytest.mark.parametrize("attention", POLICIES, ids=IDS)
def test_fused_teacher_forcing_equals_unfused(batch, attention, flex_calls):
    V, n_actions, words, actions, lengths = batch
    unfused, fused = pair(V, n_actions, attention)
    with torch.no_grad():  # flex_attention has no backward on a CPU
        expected, found = unfused(words, actions, lengths), fused(words, actions, lengths)
    for name in ("action_log_probs", "word_log_probs"):
        torch.testing.assert_close(getattr(found, name), getattr(expected, name),
                                   rtol=0, atol=1e-6)
    # the joint sums some forty of them, each rounded in float32: 1e-6 of its size
    torch.testing.assert_close(found.joint, expected.joint, rtol=1e-6, atol=0)
    # causal teacher forcing runs scaled_dot_product_attention(is_causal) under either
    assert len(flex_calls) == (0 if attention == "causal" else len(fused.layers))


@pytest.mark.parametrize("attention", POLICIES, ids=IDS)
def test_fused_one_action_at_a_time_equals_unfused(batch, attention, flex_calls):
    V, n_actions, words, actions, _ = batch
    unfused, fused = pair(V, n_actions, attention)
    with torch.no_grad():
        expected = one_at_a_time(unfused, words, actions)
        assert not flex_calls
        found = one_at_a_time(fused, words, actions)
    torch.testing.assert_close(found, expected, rtol=0, atol=1e-6)
    assert len(flex_calls) == len(fused.layers) * (1 + actions.size(1))  # start token, steps


def test_auto_runs_unfused_on_a_cpu_and_fused_rejects_attention_dropout(batch, flex_calls):
    V, n_actions, words, actions, lengths = batch
    model = random_model(V, n_actions, "tg").float()
    assert model.attention_kernel == "auto"
    model(words, actions, lengths)
    assert not flex_calls
    dropping = ActionTransformer(V, n_actions, "tg", size=8, num_heads=4, dropout=0.1,
                                 attention_kernel="fused").train()
    with pytest.raises(SettingError, match="attention_kernel=fused") as error:
        dropping(words, actions, lengths)
    assert "\n" not in str(error.value)
    with pytest.raises(SettingError, match="attention_kernel=fused: .* on a CPU"):
        dropping.eval()(words, actions, lengths)  # no dropout in eval mode; a backward
    with torch.no_grad():
        dropping(words, actions, lengths)
    with pytest.raises(SettingError, match="attention_kernel=flash"):
        ActionTransformer(V, n_actions, "tg", attention_kernel="flash")  # type: ignore[arg-type]


@pytest.mark.parametrize("attention", NAMED)
def test_vocabulary_at_predicting_tokens_equals_it_everywhere(batch, attention, monkeypatch):
    """The log-probabilities equal those of the vocabulary computed at every token (padding
    and TG's COMPOSE copies included) and then gathered, as the output equation reads; the
    layers run on the real tokens alone (packed) and the softmax on the real actions'
    predicting tokens alone."""
    V, n_actions, words, actions, lengths = batch
    model = random_model(V, n_actions, attention)
    top: list[torch.Tensor] = []
    model.layers[-1].register_forward_hook(  # (B, T, C), the packed real tokens padded
        lambda module, args, kwargs, out: top.append(kwargs["packed"].pad(out)),
        with_kwargs=True)
    rows: list[int] = []
    parts = model._log_softmax_parts
    monkeypatch.setattr(model, "_log_softmax_parts", lambda h: rows.append(h.size(0)) or parts(h))
    out = model(words, actions, lengths)
    assert rows == [int((actions != NO_ACTION).sum())]

    word_logits, action_logits, words_norm, norm = parts(model.final_norm(top[0]))  # (B, T, ·)
    predictor = at.predictors(model.policy.masks(actions, model.num_heads), actions.size(1))
    B, A = actions.shape
    shifts, real = actions == SHIFT, actions != NO_ACTION
    word_index = (shifts.long().cumsum(1) - 1).clamp(min=0)
    at_word = words.gather(1, word_index.clamp(max=words.size(1) - 1))
    action_lp = torch.where(
        shifts, (words_norm - norm).gather(1, predictor),
        action_logits.gather(1, predictor[..., None].expand(B, A, n_actions)).gather(
            2, actions.clamp(min=0)[..., None])[..., 0] - norm.gather(1, predictor))
    word_lp = word_logits.gather(1, predictor[..., None].expand(B, A, V)).gather(
        2, at_word[..., None])[..., 0] - words_norm.gather(1, predictor)
    torch.testing.assert_close(out.action_log_probs, action_lp * real, rtol=0, atol=1e-12)
    for b in range(B):
        torch.testing.assert_close(out.word_log_probs[b, :int(lengths[b])],
                                   word_lp[b][shifts[b]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("attention", NAMED)
def test_search_with_a_growing_cache_equals_the_whole_budget(batch, attention, monkeypatch):
    V, n_actions, words, _, lengths = batch
    model = random_model(V, n_actions, attention)
    settings = BeamSettings(10, 5, 1)
    budget = model.cache_positions(int(action_budget(lengths).max()) + 1)
    allocated: list[int] = []
    reserve = ActionTransformerState.reserve

    def counting(self: ActionTransformerState, positions: int) -> None:
        reserve(self, positions)
        if self.cache.size(0) > 1:  # a beam's rows, not the one row batch sizing measures
            allocated.append(self.cache.size(-2))

    monkeypatch.setattr(ActionTransformerState, "reserve", counting)
    monkeypatch.setattr(ActionTransformerState, "FIRST_ALLOCATION", 2)
    grown = search_sentences(model, words, lengths, settings)
    assert 2 < max(allocated) < budget  # grown as filled, never to the whole budget
    monkeypatch.setattr(ActionTransformerState, "FIRST_ALLOCATION", 10**6)
    allocated.clear()
    whole = search_sentences(model, words, lengths, settings)
    assert min(allocated) == budget
    for g, w in zip(grown, whole, strict=True):
        assert g.parses == w.parses
        assert g.surprisals == w.surprisals


@pytest.mark.parametrize("attention", ["causal", "tg"])
def test_batch_sizing_counts_the_cache_at_its_largest(batch, attention):
    V, n_actions, _, _, _ = batch
    model = random_model(V, n_actions, attention)
    settings = BeamSettings(10, 5, 1)
    slots = stack_slots(20, settings.max_stack, model.limits.max_open)
    first = model.initial_state(1, slots, 101)  # a 20-word sentence: 100 actions + 1
    full = model.initial_state(1, slots, 101)
    full.reserve(full.capacity)
    assert full.cache.size(-2) == model.cache_positions(101) > first.cache.size(-2)
    rows = settings.beam_size + settings.done_size
    # besides three states an item: two action paths, four float64 rows of logits as wide
    # as the largest matrix, the sort of its successors
    widest = max(p.size(0) for p in model.parameters() if p.dim() == 2)
    rest = 2 * 8 * 101 + 4 * 8 * widest + 16 * 8 * n_actions
    assert sentence_bytes(model, 20, settings) == rows * (3 * state_nbytes(full) + rest)
