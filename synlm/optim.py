"""Optimisers from config: parameter groups, several optimiser classes behind one
``torch.optim.Optimizer``, per-group gradient clipping and the inverse-sqrt schedule.

Optimiser configs have the LightningCLI form ``{"class_path": "torch.optim.SGD",
"init_args": {"lr": 30, ...}}``; a class path without a dot names a ``torch.optim`` class.
Plain torch: no Lightning here.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.nn import Parameter
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from synlm.errors import InputError

#: ``{"class_path": str, "init_args": {keyword: value}}``, as LightningCLI writes it.
OptimizerConfig = Mapping[str, Any]


@dataclass
class ParamGroup:
    """Settings for the parameters whose name matches ``pattern``.

    YAML (a list of these under the model's param groups)::

        - pattern: '^backbone\\.inserts\\.'        # re.search on 'backbone.inserts.0.scorer.weight'
          options: {lr: 1.0e-3}                    # overrides the optimiser's init_args
          optimizer: {class_path: torch.optim.Adam, init_args: {betas: [0.0, 0.999]}}
          gradient_clip_val: 1.0

    Args:
        pattern: regular expression searched in parameter names; a parameter belongs to
            the first group that matches, and unmatched ones to the main group.
        options: per-group optimiser settings (``lr``, ``weight_decay``, ``betas``, ...).
        optimizer: another optimiser config for these parameters (``options`` then
            override its ``init_args``); None: the main optimiser.
        gradient_clip_val: clip this group's gradients by their own total norm (0: never
            clip them); None: the trainer's global clipping applies to them.
    """

    pattern: str
    options: dict[str, Any] = field(default_factory=dict)
    optimizer: dict[str, Any] | None = None
    gradient_clip_val: float | None = None


# ---------------------------------------------------------------------- parameter groups
def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InputError(f"param group pattern '{pattern}' is not a valid regex: {err}") from None


def assign_parameters(named_parameters: Iterable[tuple[str, Parameter]],
                      groups: Sequence[ParamGroup]) -> list[list[Parameter]]:
    """The trainable parameters split by group: ``[main, groups[0], groups[1], ...]``.

    Each parameter goes to the first group whose pattern matches its name, in the order
    of ``named_parameters``; frozen parameters (``requires_grad=False``) are left out.
    Raises ValueError if a group gets no parameter.
    """
    patterns = [_compile(g.pattern) for g in groups]
    buckets: list[list[Parameter]] = [[] for _ in range(len(groups) + 1)]
    names = []
    for name, param in named_parameters:
        if not param.requires_grad:
            continue
        names.append(name)
        hit = next((i for i, p in enumerate(patterns) if p.search(name)), None)
        buckets[0 if hit is None else hit + 1].append(param)
    for group, bucket in zip(groups, buckets[1:]):
        if not bucket:
            raise InputError(
                f"param group pattern '{group.pattern}' matches no trainable parameter left "
                f"by earlier groups; parameter names look like: {', '.join(names[:4])}"
            )
    return buckets


# ---------------------------------------------------------------------- building
def optimizer_class(class_path: str) -> type[Optimizer]:
    """The optimiser class at ``class_path`` (``torch.optim.<name>`` when it has no dot)."""
    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module or "torch.optim"), name, None)
    except ImportError:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise InputError(f"optimizer class_path {class_path!r} is not a torch.optim.Optimizer")
    return cls


def _torch_groups(name: str, params: list[Parameter], options: Mapping[str, Any],
                  decay_small: bool) -> list[dict[str, Any]]:
    """torch param-group dicts for one bucket; unless ``decay_small``, its parameters with
    ndim < 2 (biases, norm gains) go to a second dict with weight decay 0."""
    if decay_small:
        return [{"name": name, "params": params, **options}]
    return [{"name": name, "params": [p for p in params if p.ndim >= 2], **options},
            {"name": f"{name}/no_decay", "params": [p for p in params if p.ndim < 2],
             **options, "weight_decay": 0.0}]


@dataclass
class _Child:
    """One optimiser to build: its class, its init_args and its param-group dicts."""

    cls: type[Optimizer]
    init_args: dict[str, Any]
    groups: list[dict[str, Any]] = field(default_factory=list)

    def build(self) -> Optimizer:
        """The optimiser; a value it refuses (torch's "Invalid learning rate: -1.0") is an
        ``InputError`` naming the class and its settings: they come from the config."""
        try:
            return self.cls(self.groups, **self.init_args)
        except ValueError as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            options = [{k: v for k, v in g.items() if k != "params"} for g in self.groups]
            raise InputError(f"{self.cls.__name__} refuses its settings ({reason}): "
                             f"init_args {self.init_args}, param groups {options}") from err


#: Stands for the parameters no pattern matches: the main optimiser's settings, named "main".
_MAIN = ParamGroup(pattern="main")


def build_optimizer(named_parameters: Iterable[tuple[str, Parameter]], optimizer: OptimizerConfig,
                    groups: Sequence[ParamGroup] = (),
                    decay_norms_and_biases: bool | None = None) -> Optimizer:
    """The optimiser for ``named_parameters`` (e.g. ``module.named_parameters()``).

    ``param_groups[0]`` is always the main group (``optimizer``'s settings, the
    parameters no pattern matches; possibly empty), named ``main``; each ``ParamGroup``
    follows, named by its pattern. Under AdamW, parameters with ndim < 2 get their own
    ``<name>/no_decay`` group with weight decay 0; ``decay_norms_and_biases`` True keeps
    them decayed, False splits them off under any optimiser (None: only under AdamW).

    Returns one optimiser of the main class, or a ``GroupedOptimizer`` (main first) when
    some group names its own ``optimizer`` config.
    """
    buckets = assign_parameters(named_parameters, groups)
    children: dict[str, _Child] = {}
    for index, params in enumerate(buckets):
        group = groups[index - 1] if index else _MAIN
        config = group.optimizer if group.optimizer is not None else optimizer
        cls = optimizer_class(config["class_path"])
        init_args = dict(config.get("init_args") or {})
        key = json.dumps([f"{cls.__module__}.{cls.__qualname__}", init_args],
                         sort_keys=True, default=repr)
        child = children.setdefault(key, _Child(cls, init_args))
        decay_small = (decay_norms_and_biases if decay_norms_and_biases is not None
                       else not issubclass(cls, torch.optim.AdamW))
        made = _torch_groups(group.pattern, params, group.options, decay_small)
        # Empty dicts are dropped, except the main one: param_groups[0] is the main settings.
        child.groups += [g for g in made if g["params"] or (index == 0 and g is made[0])]
    built = [child.build() for child in children.values()]
    return built[0] if len(built) == 1 else GroupedOptimizer(built)


# ---------------------------------------------------------------------- several optimisers
class GroupedOptimizer(Optimizer):
    """Several optimisers driven as one, for Lightning's automatic optimisation.

    ``param_groups`` lists the children's group dicts themselves (so an LR scheduler's
    edits reach them), children in order; ``step(closure)`` evaluates the closure once,
    then steps every child (which must not need a closure themselves, unlike LBFGS).
    """

    def __init__(self, optimizers: Sequence[Optimizer]) -> None:
        if not optimizers:
            raise ValueError("GroupedOptimizer needs at least one optimizer")
        self.optimizers = list(optimizers)
        # Optimizer.__init__ would register the parameters again; __setstate__ sets up
        # only the hooks, with the first child's defaults.
        super().__setstate__({"defaults": self.optimizers[0].defaults})

    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [group for child in self.optimizers for group in child.param_groups]

    @property
    def state(self) -> Mapping[Tensor, Any]:  # type: ignore[override]
        """The children's per-parameter states (read-only; the state dicts themselves)."""
        return MappingProxyType({p: s for child in self.optimizers for p, s in child.state.items()})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for child in self.optimizers:
            child.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for child in self.optimizers:
            child.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """New parameters join the first (main) optimiser."""
        self.optimizers[0].add_param_group(param_group)

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {"optimizers": [child.state_dict() for child in self.optimizers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        states = state_dict.get("optimizers", ())
        if len(states) != len(self.optimizers):
            raise InputError(f"the state has {len(states)} optimizers, this GroupedOptimizer "
                             f"{len(self.optimizers)}; was it saved with other param groups?")
        for child, state in zip(self.optimizers, states):
            child.load_state_dict(state)

    def __getstate__(self) -> dict[str, Any]:
        return {"optimizers": self.optimizers, "defaults": self.defaults}

    def __repr__(self) -> str:
        inner = "\n".join(textwrap.indent(repr(child), "  ") for child in self.optimizers)
        return f"{type(self).__name__}(\n{inner}\n)"


# ---------------------------------------------------------------------- gradient clipping
def clip_gradients(named_parameters: Iterable[tuple[str, Parameter]],
                   groups: Sequence[ParamGroup], default_clip: float | None) -> None:
    """Clip gradients by total norm: each group with a ``gradient_clip_val`` by its own
    norm (0: not at all), every other parameter by ``default_clip`` over their joint norm
    (None or 0: not at all). Parameters without a gradient are ignored."""
    buckets = assign_parameters(named_parameters, groups)
    rest = list(buckets[0])
    for group, params in zip(groups, buckets[1:]):
        if group.gradient_clip_val is None:
            rest += params
        elif group.gradient_clip_val > 0:
            _clip(params, group.gradient_clip_val)
    if default_clip:
        _clip(rest, default_clip)


def _clip(params: list[Parameter], max_norm: float) -> None:
    with_grad = [p for p in params if p.grad is not None]
    if with_grad:
        torch.nn.utils.clip_grad_norm_(with_grad, max_norm)


# ---------------------------------------------------------------------- schedules
class InverseSqrtWarmup(LRScheduler):
    """Linear warm-up, then decay with the inverse square root of the step (fairseq's
    ``inverse_sqrt`` scheduler). For step s = number of ``step()`` calls so far, w =
    ``warmup_steps``, lr₀ = ``warmup_init_lr`` and each group's base lr::

        lr(s) = lr₀ + (base_lr − lr₀) · s / w     if s < w
        lr(s) = base_lr · sqrt(w / s)             otherwise

    Vaswani et al. (2017) §5.3 use d_model^-0.5 · min(s^-0.5, s · w^-1.5): the same
    shape (with lr₀ = 0), equal to this one with base_lr = (d_model · w)^-0.5.
    Step it every optimiser step (``interval``).
    """

    interval: ClassVar[str] = "step"

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 4000,
                 warmup_init_lr: float = 0.0, last_epoch: int = -1) -> None:
        if warmup_steps < 1:
            raise InputError(f"warmup_steps must be at least 1, got {warmup_steps}")
        self.warmup_steps = warmup_steps
        self.warmup_init_lr = warmup_init_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:  # type: ignore[override]
        s, w, lr0 = self.last_epoch, self.warmup_steps, self.warmup_init_lr
        if s < w:
            return [lr0 + (base - lr0) * s / w for base in self.base_lrs]
        return [base * math.sqrt(w / s) for base in self.base_lrs]


class WarmupCosine(LRScheduler):
    """Linear warm-up, then cosine decay (Transformer Grammars' released
    ``linear_warmup_then_cosine_anneal``). For step s = number of ``step()`` calls so far,
    w = ``warmup_steps``, c = ``cycle_steps``, each group's base lr (the peak) and the
    ``start_lr`` and ``min_lr`` it starts and ends at::

        lr(s) = start_lr + (base_lr − start_lr) · s / w                       if s < w
        lr(s) = min_lr + (base_lr − min_lr) · (1 + cos(π · min((s − w) / c, 1))) / 2

    Step it every optimiser step (``interval``).
    """

    interval: ClassVar[str] = "step"

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 8000,
                 cycle_steps: int = 100000, start_lr: float = 1e-7, min_lr: float = 3e-7,
                 last_epoch: int = -1) -> None:
        if warmup_steps < 1 or cycle_steps < 1:
            raise InputError(f"warmup_steps and cycle_steps must be at least 1, got "
                             f"{warmup_steps} and {cycle_steps}")
        self.warmup_steps, self.cycle_steps = warmup_steps, cycle_steps
        self.start_lr, self.min_lr = start_lr, min_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:  # type: ignore[override]
        s, w = self.last_epoch, self.warmup_steps
        if s < w:
            return [self.start_lr + (base - self.start_lr) * s / w for base in self.base_lrs]
        decay = 0.5 * (1.0 + math.cos(math.pi * min((s - w) / self.cycle_steps, 1.0)))
        return [self.min_lr + (base - self.min_lr) * decay for base in self.base_lrs]
