"""An attention policy of one's own (``synlm.transition.attention.base.AttentionPolicy``),
defined here, plugs into the action Transformer without a change to its file: by instance,
by ``{"class_path", "init_args"}`` or dotted class path, through the command line; teacher
forcing equals feeding one action at a time through the cache; a window wider than the
sentence is PLM to the last digit; it learns. The named policies by class path, and the
model's flat policy settings that a policy does not use."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from test_action_transformer import (  # noqa: F401 (grammar: a fixture)
    GOLDEN,
    assert_beam_equals_the_exact_marginal,
    grammar,
    one_at_a_time,
    random_model,
)
from test_action_transformer_cli import fit
from test_rnng import assert_learns_ten_trees, encoded

from synlm.errors import SettingError
from synlm.loading import load_model
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention.base import AttentionPolicy, BatchMasks, StepMasks
from synlm.transition.attention.tg import TGPolicy
from synlm.transition.parser_state import NO_ACTION
from synlm.transition.structure import RowState


@dataclass
class WindowState(RowState):
    """``LocalWindow``'s rows in search: the tokens so far."""

    length: torch.Tensor
    capacity: int
    window: int
    relative: bool

    def step(self, actions: torch.Tensor) -> StepMasks:
        present = actions != NO_ACTION
        keys = torch.arange(self.capacity)
        query = self.length[:, None]
        allowed = torch.where(present[:, None], (keys <= query) & (keys > query - self.window),
                              keys == 0)
        relative = torch.where(allowed, query - keys, 0)[:, None] if self.relative else None
        masks = StepMasks(self.length[:, None].clone(), present[:, None],
                          allowed[:, None, None, :], relative)
        self.length += present.long()
        return masks


class LocalWindow(AttentionPolicy):
    """Each token reads itself and the ``window - 1`` tokens before it; with ``relative``,
    by relative attention over the distance instead of absolute positions, post-norm."""

    def __init__(self, window: int = 3, relative: bool = False) -> None:
        self.window, self.relative = window, relative
        self.absolute_positions = not relative
        self.pre_norm = not relative
        self.relative_range = (0, window - 1) if relative else None

    def masks(self, actions: torch.Tensor, num_heads: int) -> BatchMasks:
        B, A = actions.shape
        pos = torch.arange(A + 1)
        allowed = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - self.window)
        relative = (pos[:, None] - pos[None, :]) * allowed
        return BatchMasks(source=torch.arange(-1, A).expand(B, A + 1),
                          predicts=torch.ones(B, A + 1, dtype=torch.bool),
                          allowed=allowed.expand(B, 1, A + 1, A + 1),
                          relative=relative.expand(B, A + 1, A + 1) if self.relative else None)

    def initial_state(self, rows: int, capacity: int, num_heads: int,
                      device: torch.device | str | None = None) -> WindowState:
        return WindowState(torch.ones(rows, dtype=torch.long), capacity, self.window,
                           self.relative)


WINDOWS = {"window 2": LocalWindow(2), "relative window 3": LocalWindow(3, relative=True)}


@pytest.mark.parametrize("policy", WINDOWS.values(), ids=WINDOWS.keys())
def test_teacher_forcing_equals_one_action_at_a_time(grammar, policy):  # noqa: F811
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), policy)
    w, a, n = encoded(trees, vocab, words)
    forced = model(w, a, n).joint
    torch.testing.assert_close(one_at_a_time(model, w, a).sum(1), forced, rtol=0, atol=1e-10)


@pytest.mark.parametrize("policy", WINDOWS.values(), ids=WINDOWS.keys())
def test_the_window_bounds_what_an_action_sees(grammar, policy):  # noqa: F811
    """Another second word (``dog`` -> ``cat``, token 4) changes the log-probabilities of
    the actions from 4 on that read it, each layer ``window - 1`` tokens further, and of no
    other action."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), policy)
    w, a, n = encoded(trees[:1], vocab, words)  # (S (NP the dog) (VP barks)): 9 actions
    other = w.clone()
    other[0, 1] = words["cat"]
    differs = (model(w, a, n).action_log_probs
               - model(other, a, n).action_log_probs).abs()[0] > 1e-9
    reach = len(model.layers) * (policy.window - 1)
    assert differs.tolist() == [4 <= t <= 4 + reach for t in range(9)]


def test_a_window_wider_than_the_sentence_is_plm(grammar):  # noqa: F811
    """Same weights (the same parameters, drawn alike): PLM's numbers to 1e-12; a window of
    two gives others."""
    trees, vocab, words = grammar
    batch = encoded(trees, vocab, words)
    plm = random_model(len(words), len(vocab), "causal")(*batch).joint
    wide = random_model(len(words), len(vocab), LocalWindow(1000))(*batch).joint
    narrow = random_model(len(words), len(vocab), LocalWindow(2))(*batch).joint
    assert plm.tolist() == pytest.approx(GOLDEN["causal"], abs=1e-9)
    torch.testing.assert_close(wide, plm, rtol=0, atol=1e-12)
    assert (narrow - plm).abs().min() > 0.01


def test_beam_equals_the_exact_marginal():
    """As for the named policies: the beam that holds all 63 trees of three words sums
    their joint probabilities, and finds the best."""
    assert_beam_equals_the_exact_marginal(LocalWindow(3, relative=True))


def test_a_policy_of_ones_own_learns_ten_trees():
    assert_learns_ten_trees(lambda v, a: ActionTransformer(
        v, a, LocalWindow(6, relative=True), size=32, num_layers=2, num_heads=4,
        dropout=0.0), lr=0.003)


def test_a_policy_by_class_path_is_the_policy_and_saves_its_config(grammar):  # noqa: F811
    trees, vocab, words = grammar
    batch = encoded(trees, vocab, words)
    config = {"class_path": f"{__name__}.LocalWindow",
              "init_args": {"window": 2, "relative": True}}
    by_instance = random_model(len(words), len(vocab), LocalWindow(2, relative=True))
    model = random_model(len(words), len(vocab), config)
    assert isinstance(model.policy, LocalWindow) and model.policy.window == 2
    assert model.attention == config == by_instance.attention
    torch.testing.assert_close(model(*batch).joint, by_instance(*batch).joint, rtol=0, atol=0)
    assert random_model(5, 3, f"{__name__}.LocalWindow").policy.window == 3  # its default
    rebuilt = ActionTransformer(**by_instance.init_config["init_args"])
    assert rebuilt.attention == config


@pytest.mark.parametrize("name", ["causal", "plm_mask", "tg"])
def test_a_named_policy_by_class_path_gives_its_golden_values(grammar, name):  # noqa: F811
    trees, vocab, words = grammar
    path = {"causal": "causal.CausalPolicy", "plm_mask": "plm_mask.PLMMaskPolicy",
            "tg": "tg.TGPolicy"}[name]
    model = random_model(len(words), len(vocab),
                         {"class_path": f"synlm.transition.attention.{path}"})
    assert model(*encoded(trees, vocab, words)).joint.tolist() == pytest.approx(
        GOLDEN[name], abs=1e-9)


def test_a_setting_the_policy_does_not_use_is_a_one_line_error():
    with pytest.raises(SettingError, match=r"^buffer_head=2: expected 0: attention=causal "
                                           r"does not use it$"):
        ActionTransformer(5, 3, "causal", buffer_head=2)
    with pytest.raises(SettingError, match="min_relative=-2: expected -1: attention=plm_mask"):
        ActionTransformer(5, 3, "plm_mask", min_relative=-2)
    with pytest.raises(SettingError, match="stack_head=0: expected 1: attention=tg"):
        ActionTransformer(5, 3, "tg", stack_head=0)
    with pytest.raises(SettingError, match="max_relative=8: expected 62: a policy given by "
                                           "class_path takes its settings in its init_args"):
        ActionTransformer(5, 3, TGPolicy(), max_relative=8)
    with pytest.raises(SettingError, match="stack_head=0: expected a head other than "
                                           "buffer_head=0"):  # checked when built
        ActionTransformer(5, 3, "plm_mask", stack_head=0)
    with pytest.raises(SettingError, match="^attention=no.such.Policy: expected the "
                                           "class_path of an AttentionPolicy: there is no "
                                           "such class$"):
        ActionTransformer(5, 3, {"class_path": "no.such.Policy"})
    with pytest.raises(SettingError, match="^attention=synlm.transition.rnng.RNNG: expected "
                                           "the class_path of an AttentionPolicy$"):
        ActionTransformer(5, 3, "synlm.transition.rnng.RNNG")
    with pytest.raises(SettingError, match="^attention=42: expected causal | plm_mask | tg, "
                                           "or the class_path of an AttentionPolicy$"):
        ActionTransformer(5, 3, 42)  # type: ignore[arg-type]
    # the named policies' own settings, and the defaults of the others, as configs give them
    model = ActionTransformer(5, 3, "tg", size=8, num_heads=2, buffer_head=0, stack_head=1,
                              min_relative=-2, max_relative=8)
    assert model.policy.relative_range == (-2, 8)


def test_the_command_line_trains_and_loads_a_policy_by_class_path(tmp_path: Path):
    """``--model.init_args.model.init_args.attention`` takes the policy's config; the run
    folder loads it, with the numbers it was saved with."""
    config = {"class_path": f"{__name__}.LocalWindow", "init_args": {"window": 4}}
    fit("plm.yaml", tmp_path, 2,
        f"--model.init_args.model.init_args.attention={json.dumps(config)}")
    model = load_model(str(tmp_path))
    assert isinstance(model.model.policy, LocalWindow) and model.model.attention == {
        **config, "init_args": {"window": 4, "relative": False}}
    rows = [[0, 1, 2]]
    first, again = model.search_ids(rows), load_model(str(tmp_path)).search_ids(rows)
    assert first[0].word_log_probs == again[0].word_log_probs
