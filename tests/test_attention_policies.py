"""An attention policy of one's own (``synlm.transition.attention.base.AttentionPolicy``),
defined here, plugs into the action Transformer without a change to its file: by instance,
saved as its ``{"class_path", "init_args"}`` config, through the command line; teacher
forcing equals feeding one action at a time through the cache; a window wider than the
sentence is PLM to the last digit; it learns. The named policies by class and by short
name, and the settings a policy cannot use."""

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
from synlm.modules.recorded import build
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention import (
    CausalPolicy,
    PLMMaskPolicy,
    TGPolicy,
    named_policies,
)
from synlm.transition.attention.base import AttentionPolicy, BatchMasks, StepMasks
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


def test_a_policy_is_saved_as_its_config_and_rebuilt_from_it(grammar):  # noqa: F811
    """The model saves its policy as the config that builds it (``class_path`` and
    ``init_args``), from which ``build`` gives the same policy and numbers."""
    trees, vocab, words = grammar
    batch = encoded(trees, vocab, words)
    model = random_model(len(words), len(vocab), LocalWindow(2, relative=True))
    saved = model.init_config
    assert saved["init_args"]["attention"] == {
        "class_path": f"{__name__}.LocalWindow", "init_args": {"window": 2, "relative": True}}
    rebuilt = build(saved).double().eval()
    rebuilt.load_state_dict(model.state_dict())
    assert isinstance(rebuilt.policy, LocalWindow) and rebuilt.policy.window == 2
    torch.testing.assert_close(rebuilt(*batch).joint, model(*batch).joint, rtol=0, atol=0)


@pytest.mark.parametrize(("name", "policy"), [("causal", CausalPolicy),
                                              ("plm_mask", PLMMaskPolicy), ("tg", TGPolicy)])
def test_a_short_name_is_its_policy_with_its_defaults(grammar, name, policy):  # noqa: F811
    """The named policies are found among the policies by their ``name``; by instance and
    by name, the same golden values; each is saved as the config that rebuilds it."""
    trees, vocab, words = grammar
    assert named_policies()[name] is policy
    assert type(build(policy().init_config)) is policy
    by_name = random_model(len(words), len(vocab), name)
    assert type(by_name.policy) is policy
    model = random_model(len(words), len(vocab), policy())
    assert model(*encoded(trees, vocab, words)).joint.tolist() == pytest.approx(
        GOLDEN[name], abs=1e-9)


def test_a_policy_and_its_settings_that_cannot_be_used_are_one_line_errors():
    with pytest.raises(SettingError, match=r"^attention=stack: expected causal \| plm_mask \| "
                                           r"tg, or an AttentionPolicy by class name or "
                                           r"class_path \(synlm ls lists the "
                                           r"attention_policies\)$"):
        ActionTransformer(5, 3, "stack")
    with pytest.raises(SettingError, match="^attention=42: expected causal"):
        ActionTransformer(5, 3, 42)  # type: ignore[arg-type]
    with pytest.raises(SettingError, match="^max_relative=-2: expected at least "
                                           "min_relative=-1$"):
        TGPolicy(max_relative=-2)
    with pytest.raises(SettingError, match="stack_head=0: expected a head other than "
                                           "buffer_head=0"):  # checked when built
        ActionTransformer(5, 3, PLMMaskPolicy(stack_head=0))
    with pytest.raises(SettingError, match=r"^buffer_head=4: expected a head index in "
                                           r"\[0, 4\)$"):  # against the model's heads
        ActionTransformer(5, 3, PLMMaskPolicy(buffer_head=4), size=8, num_heads=4)
    model = ActionTransformer(5, 3, TGPolicy(min_relative=-2, max_relative=8), size=8,
                              num_heads=2)
    assert model.policy.relative_range == (-2, 8)


def test_the_command_line_trains_and_loads_a_policy_by_class_path(tmp_path: Path):
    """``--model.init_args.model.init_args.attention`` takes the policy's config; the run
    folder loads it, with the numbers it was saved with."""
    config = {"class_path": f"{__name__}.LocalWindow", "init_args": {"window": 4}}
    fit("plm.yaml", tmp_path, 2,
        f"--model.init_args.model.init_args.attention={json.dumps(config)}")
    model = load_model(str(tmp_path))
    assert isinstance(model.model.policy, LocalWindow)
    assert model.model.init_config["init_args"]["attention"] == {
        **config, "init_args": {"window": 4, "relative": False}}
    rows = [[0, 1, 2]]
    first, again = model.search_ids(rows), load_model(str(tmp_path)).search_ids(rows)
    assert first[0].word_log_probs == again[0].word_log_probs


def test_a_config_may_name_a_policy_by_its_short_name(tmp_path: Path):
    """``attention: tg``, as configs written before the policies were named by class: the
    policy of that name, saved as given."""
    fit("plm.yaml", tmp_path, 1, "--model.init_args.model.init_args.attention=tg")
    model = load_model(str(tmp_path))
    assert type(model.model.policy) is TGPolicy
    assert model.model.init_config["init_args"]["attention"] == "tg"
