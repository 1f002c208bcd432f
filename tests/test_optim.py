"""Optimisers from config: param groups, GroupedOptimizer, per-group clipping, schedules."""

from __future__ import annotations

import copy
import io
import math
import re

import jsonargparse
import pytest
import torch
from torch import Tensor, nn

from synlm.optim import (
    GroupedOptimizer,
    InverseSqrtWarmup,
    ParamGroup,
    WarmupCosine,
    build_optimizer,
    clip_gradients,
    optimizer_class,
)

SGD = {"class_path": "torch.optim.SGD", "init_args": {"lr": 30.0, "weight_decay": 1.2e-6}}
ADAM = {"class_path": "torch.optim.Adam", "init_args": {"lr": 1e-3, "betas": (0.0, 0.999)}}
ADAMW = {"class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-3, "weight_decay": 0.1}}
SCORER_ADAM = ParamGroup(pattern=r"^scorer\.", optimizer=ADAM)


class Tiny(nn.Module):
    """Parameters: backbone.0.{weight (4, 3), bias (4,)}, backbone.1.{weight, bias} (4,)
    (a LayerNorm), scorer.{weight (2, 4), bias (2,)}."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.backbone = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
        self.scorer = nn.Linear(4, 2)
        nn.init.normal_(self.backbone[1].weight)  # so that the LayerNorm gain gets gradients

    def loss(self, x: Tensor, y: Tensor) -> Tensor:
        return nn.functional.cross_entropy(self.scorer(self.backbone(x)), y)


def batches(n: int) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 3, generator=g), torch.randint(0, 2, (5,), generator=g))
            for _ in range(n)]


def train(model: Tiny, optimizer: torch.optim.Optimizer, data: list[tuple[Tensor, Tensor]]
          ) -> list[Tensor]:
    """Lightning's way: ``optimizer.step(closure)``; the losses the steps returned."""
    losses = []
    for x, y in data:
        def closure(x: Tensor = x, y: Tensor = y) -> Tensor:
            optimizer.zero_grad()
            loss = model.loss(x, y)
            loss.backward()
            return loss

        losses.append(optimizer.step(closure))
    return losses


def names_of(model: nn.Module, group: dict) -> list[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for p in group["params"]]


# ---------------------------------------------------------------------- groups
def test_parameters_go_to_the_first_matching_group_in_order() -> None:
    model = Tiny()
    model.backbone[1].bias.requires_grad_(False)
    groups = [ParamGroup(r"^scorer\.", {"lr": 1.0}), ParamGroup(r"\.bias$", {"lr": 2.0})]
    optimizer = build_optimizer(list(model.named_parameters()), SGD, groups)
    assert type(optimizer) is torch.optim.SGD
    pgs = optimizer.param_groups
    assert [g["name"] for g in pgs] == ["main", r"^scorer\.", r"\.bias$"]
    assert [names_of(model, g) for g in pgs] == [
        ["backbone.0.weight", "backbone.1.weight"],
        ["scorer.weight", "scorer.bias"],  # scorer.bias matched the first pattern
        ["backbone.0.bias"],  # the frozen backbone.1.bias is left out
    ]
    assert [g["lr"] for g in pgs] == [30.0, 1.0, 2.0]
    assert [g["weight_decay"] for g in pgs] == [1.2e-6] * 3


@pytest.mark.parametrize("groups", [
    [ParamGroup(r"^decoder\.")],
    [ParamGroup("scorer"), ParamGroup(r"scorer\.weight")],  # shadowed by the first
])
def test_a_pattern_without_parameters_is_an_error(groups: list[ParamGroup]) -> None:
    expected = re.escape(f"pattern '{groups[-1].pattern}' matches no trainable parameter")
    with pytest.raises(ValueError, match=expected) as err:
        build_optimizer(list(Tiny().named_parameters()), SGD, groups)
    message = str(err.value)
    assert "\n" not in message
    assert message.endswith("look like: backbone.0.weight, backbone.0.bias, "
                            "backbone.1.weight, backbone.1.bias")


def test_bad_patterns_and_class_paths_are_value_errors() -> None:
    params = list(Tiny().named_parameters())
    with pytest.raises(ValueError, match=r"pattern '\(' is not a valid regex"):
        build_optimizer(params, SGD, [ParamGroup("(")])
    for path in ("torch.optim.Nope", "nope.SGD", "torch.nn.Linear"):
        with pytest.raises(ValueError, match="is not a torch.optim.Optimizer"):
            optimizer_class(path)
    assert optimizer_class("AdamW") is torch.optim.AdamW


def test_adamw_does_not_decay_biases_and_norms() -> None:
    model = Tiny()
    optimizer = build_optimizer(list(model.named_parameters()), ADAMW,
                                [ParamGroup("scorer", {"lr": 0.5})])
    pgs = optimizer.param_groups
    assert [(g["name"], g["weight_decay"], g["lr"], names_of(model, g)) for g in pgs] == [
        ("main", 0.1, 1e-3, ["backbone.0.weight"]),
        ("main/no_decay", 0.0, 1e-3, ["backbone.0.bias", "backbone.1.weight",
                                      "backbone.1.bias"]),
        ("scorer", 0.1, 0.5, ["scorer.weight"]),
        ("scorer/no_decay", 0.0, 0.5, ["scorer.bias"]),
    ]
    forced = build_optimizer(list(model.named_parameters()), ADAMW, decay_norms_and_biases=True)
    assert [(g["name"], g["weight_decay"], len(g["params"])) for g in forced.param_groups] == [
        ("main", 0.1, 6)]


def test_sgd_decays_everything_unless_told_not_to() -> None:
    model = Tiny()
    optimizer = build_optimizer(list(model.named_parameters()), SGD)
    assert [(g["name"], g["weight_decay"], len(g["params"])) for g in optimizer.param_groups] == [
        ("main", 1.2e-6, 6)]
    split = build_optimizer(list(model.named_parameters()), SGD,
                            [ParamGroup("scorer", {"lr": 1.0})], decay_norms_and_biases=False)
    assert [(g["name"], g["weight_decay"], names_of(model, g)) for g in split.param_groups] == [
        ("main", 1.2e-6, ["backbone.0.weight"]),
        ("main/no_decay", 0.0, ["backbone.0.bias", "backbone.1.weight", "backbone.1.bias"]),
        ("scorer", 1.2e-6, ["scorer.weight"]),
        ("scorer/no_decay", 0.0, ["scorer.bias"]),
    ]


def test_the_main_group_comes_first_even_when_empty() -> None:
    model = Tiny()
    optimizer = build_optimizer(list(model.named_parameters()), ADAMW, [ParamGroup(".")])
    assert [(g["name"], len(g["params"])) for g in optimizer.param_groups] == [
        ("main", 0), (".", 2), ("./no_decay", 4)]


def test_param_groups_parse_from_yaml() -> None:
    parser = jsonargparse.ArgumentParser()
    parser.add_argument("--groups", type=list[ParamGroup], default=[])
    config = parser.parse_string(
        "groups:\n"
        "  - pattern: '^backbone\\.inserts\\.'\n"
        "    options: {lr: 1.0e-3, betas: [0.0, 0.999]}\n"
        "    optimizer: {class_path: torch.optim.Adam, init_args: {eps: 1.0e-9}}\n"
        "    gradient_clip_val: 0.25\n"
        "  - pattern: scorer\n")
    assert parser.instantiate(config).groups == [
        ParamGroup(r"^backbone\.inserts\.", {"lr": 1e-3, "betas": [0.0, 0.999]},
                   {"class_path": "torch.optim.Adam", "init_args": {"eps": 1e-9}}, 0.25),
        ParamGroup("scorer"),
    ]


# ---------------------------------------------------------------------- GroupedOptimizer
def test_grouped_optimizer_steps_like_the_separate_optimizers() -> None:
    model, reference = Tiny(), Tiny()
    optimizer = build_optimizer(list(model.named_parameters()), SGD, [SCORER_ADAM])
    assert isinstance(optimizer, GroupedOptimizer)
    assert [type(o) for o in optimizer.optimizers] == [torch.optim.SGD, torch.optim.Adam]
    assert [g["lr"] for g in optimizer.param_groups] == [30.0, 1e-3]
    assert optimizer.defaults is optimizer.optimizers[0].defaults

    sgd = torch.optim.SGD(reference.backbone.parameters(), lr=30.0, weight_decay=1.2e-6)
    adam = torch.optim.Adam(reference.scorer.parameters(), lr=1e-3, betas=(0.0, 0.999))
    losses = train(model, optimizer, batches(3))
    for (x, y), loss in zip(batches(3), losses):
        sgd.zero_grad()
        adam.zero_grad()
        expected = reference.loss(x, y)
        expected.backward()
        sgd.step()
        adam.step()
        assert torch.equal(loss, expected)
    for p, q, initial in zip(model.parameters(), reference.parameters(), Tiny().parameters()):
        assert torch.equal(p, q)
        assert not torch.equal(p, initial)


def test_a_group_with_the_main_config_shares_the_main_optimizer() -> None:
    same = ParamGroup("scorer", {"lr": 1.0}, optimizer=copy.deepcopy(SGD))
    optimizer = build_optimizer(list(Tiny().named_parameters()), SGD, [same])
    assert type(optimizer) is torch.optim.SGD
    assert [g["lr"] for g in optimizer.param_groups] == [30.0, 1.0]


def make_grouped(model: Tiny) -> GroupedOptimizer:
    momentum = {"class_path": "SGD", "init_args": {"lr": 0.5, "momentum": 0.9}}
    return build_optimizer(list(model.named_parameters()), momentum, [SCORER_ADAM])


def test_grouped_state_dict_resumes_bit_for_bit() -> None:
    straight = Tiny()
    train(straight, make_grouped(straight), batches(4))

    first = Tiny()
    optimizer = make_grouped(first)
    train(first, optimizer, batches(2))
    buffer = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)

    resumed = Tiny(seed=7)
    resumed.load_state_dict(saved["model"])
    optimizer = make_grouped(resumed)
    optimizer.load_state_dict(saved["optimizer"])
    assert len(optimizer.state) == 6
    assert all("momentum_buffer" in optimizer.state[p] for p in resumed.backbone.parameters())
    assert all(float(optimizer.state[p]["step"]) == 2 for p in resumed.scorer.parameters())
    train(resumed, optimizer, batches(4)[2:])
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)

    with pytest.raises(ValueError, match="the state has 1 optimizers, this GroupedOptimizer 2"):
        optimizer.load_state_dict({"optimizers": [saved["optimizer"]["optimizers"][0]]})


def test_grouped_state_is_the_childrens_state() -> None:
    model = Tiny()
    optimizer = make_grouped(model)
    train(model, optimizer, batches(1))
    sgd, adam = optimizer.optimizers
    for p in model.backbone.parameters():
        assert optimizer.state[p] is sgd.state[p]
    for p in model.scorer.parameters():
        assert optimizer.state[p] is adam.state[p]
    with pytest.raises(TypeError):
        optimizer.state[model.scorer.weight] = {}  # type: ignore[index]


def test_zero_grad_and_add_param_group_reach_the_children() -> None:
    model = Tiny()
    optimizer = make_grouped(model)
    train(model, optimizer, batches(1))
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    extra = nn.Parameter(torch.zeros(3))
    optimizer.add_param_group({"params": [extra], "name": "extra"})
    assert optimizer.optimizers[0].param_groups[-1]["params"] == [extra]
    assert [g["name"] for g in optimizer.param_groups] == ["main", "extra", r"^scorer\."]


def test_lr_schedulers_drive_every_child() -> None:
    model = Tiny()
    optimizer = make_grouped(model)
    sgd, adam = optimizer.optimizers
    lambda_lr = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)
    optimizer.step()  # no gradients yet: nothing moves
    lambda_lr.step()
    assert (sgd.param_groups[0]["lr"], adam.param_groups[0]["lr"]) == (0.25, 5e-4)
    assert lambda_lr.get_last_lr() == [0.25, 5e-4]

    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.1, patience=0)
    plateau.step(1.0)
    plateau.step(2.0)  # worse: every lr times 0.1
    assert sgd.param_groups[0]["lr"] == pytest.approx(0.025, rel=1e-12)
    assert adam.param_groups[0]["lr"] == pytest.approx(5e-5, rel=1e-12)


def test_grouped_repr_and_copy() -> None:
    optimizer = make_grouped(Tiny())
    text = repr(optimizer)
    assert text.startswith("GroupedOptimizer(\n  SGD (\n  Parameter Group 0\n      dampening: 0")
    assert "\n  Adam (\n" in text and "      name: ^scorer\\.\n" in text and text.endswith("\n)")
    clone = copy.deepcopy(optimizer)
    assert repr(clone) == text
    assert [type(o) for o in clone.optimizers] == [torch.optim.SGD, torch.optim.Adam]


# ---------------------------------------------------------------------- clipping
def joint_norm(params: list[nn.Parameter]) -> float:
    return float(torch.cat([p.grad.flatten() for p in params]).norm())


def test_each_group_is_clipped_to_its_own_norm() -> None:
    model = Tiny()
    for p in model.parameters():
        p.grad = torch.full_like(p, 3.0)
    groups = [ParamGroup(r"^scorer\.", gradient_clip_val=0.5),  # norm 3·√10 → 0.5
              ParamGroup(r"^backbone\.1\.", gradient_clip_val=100.0),  # 3·√8 < 100: kept
              ParamGroup(r"^backbone\.0\.bias")]  # no own value: with the rest
    clip_gradients(model.named_parameters(), groups, default_clip=2.0)  # rest: 3·√16 → 2
    assert joint_norm(list(model.scorer.parameters())) == pytest.approx(0.5, rel=1e-5)
    assert all(torch.equal(p.grad, torch.full_like(p, 3.0)) for p in model.backbone[1].parameters())
    rest = list(model.backbone[0].parameters())
    assert joint_norm(rest) == pytest.approx(2.0, rel=1e-5)
    assert all(torch.allclose(p.grad, torch.full_like(p, 0.5)) for p in rest)  # 2 / √16


def test_zero_or_none_means_no_clipping_and_missing_grads_are_skipped() -> None:
    model = Tiny()
    for p in model.parameters():
        p.grad = torch.full_like(p, 3.0)
    model.scorer.bias.grad = None
    clip_gradients(model.named_parameters(), [ParamGroup("^scorer", gradient_clip_val=1.0),
                                              ParamGroup("^backbone.1", gradient_clip_val=0.0)],
                   default_clip=None)
    assert joint_norm([model.scorer.weight]) == pytest.approx(1.0, rel=1e-5)
    assert all(torch.equal(p.grad, torch.full_like(p, 3.0)) for p in model.backbone.parameters())
    clip_gradients(model.named_parameters(), [ParamGroup("^backbone.1", gradient_clip_val=0.0)],
                   default_clip=1.0)
    assert all(torch.equal(p.grad, torch.full_like(p, 3.0)) for p in model.backbone[1].parameters())
    assert joint_norm([*model.backbone[0].parameters(), model.scorer.weight]) == pytest.approx(
        1.0, rel=1e-5)


# ---------------------------------------------------------------------- schedules
def scheduled_lrs(warmup: int, init: float, base_lrs: list[float], steps: int
                  ) -> list[list[float]]:
    """The lrs of every param group after 0, 1, ..., ``steps`` scheduler steps."""
    groups = [{"params": [nn.Parameter(torch.zeros(1))], "lr": lr} for lr in base_lrs]
    optimizer = torch.optim.SGD(groups)
    scheduler = InverseSqrtWarmup(optimizer, warmup_steps=warmup, warmup_init_lr=init)
    lrs = []
    for _ in range(steps + 1):
        lrs.append([g["lr"] for g in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    return lrs


def test_inverse_sqrt_warmup_values() -> None:
    w = 8
    lrs = scheduled_lrs(w, 0.1, [2.0, 0.5], 4 * w)
    expected = {0: [0.1, 0.1],
                w // 2: [0.1 + 1.9 * 4 / 8, 0.1 + 0.4 * 4 / 8],  # 1.05, 0.3
                w: [2.0, 0.5],
                4 * w: [2.0 * math.sqrt(1 / 4), 0.5 * math.sqrt(1 / 4)]}  # 1.0, 0.25
    for step, values in expected.items():
        assert lrs[step] == pytest.approx(values, rel=1e-12), step
    assert InverseSqrtWarmup.interval == "step"
    with pytest.raises(ValueError, match="warmup_steps must be at least 1"):
        scheduled_lrs(0, 0.0, [1.0], 0)


def test_warmup_cosine_values() -> None:
    """Transformer Grammars' schedule: linear from start_lr to the peak over the warm-up,
    half the way down (to min_lr) half a cycle later, min_lr from the cycle's end on."""
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = WarmupCosine(optimizer, warmup_steps=4, cycle_steps=10, start_lr=0.2,
                             min_lr=0.1)
    lrs = []
    for _ in range(20):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == pytest.approx(0.2) and lrs[2] == pytest.approx(0.6)
    assert lrs[4] == pytest.approx(1.0)
    assert lrs[9] == pytest.approx(0.1 + 0.9 * 0.5)  # half a cycle after the peak
    assert lrs[14] == pytest.approx(0.1) and lrs[19] == pytest.approx(0.1)
    assert WarmupCosine.interval == "step"


def test_inverse_sqrt_warmup_is_vaswanis_schedule_up_to_a_constant() -> None:
    d_model, w, base = 64, 50, 2.0
    lrs = scheduled_lrs(w, 0.0, [base], 5 * w)
    for s in range(1, 5 * w + 1):
        vaswani = d_model ** -0.5 * min(s ** -0.5, s * w ** -1.5)
        assert lrs[s][0] / vaswani == pytest.approx(base * math.sqrt(d_model * w), rel=1e-12)
    exact = scheduled_lrs(w, 0.0, [(d_model * w) ** -0.5], 2 * w)
    assert exact[w][0] == pytest.approx(d_model ** -0.5 * w ** -0.5, rel=1e-12)
