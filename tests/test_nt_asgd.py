"""NT-ASGD: the switch rule, averaged weights at validation, fine-tuning restarts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from synlm.callbacks import NTASGD


class EventLog:
    """A logger that records what it is given: (step, metric) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str]] = []

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.events.extend((step, name) for name, value in metrics.items() if value == 1.0)


class FakeTrainer(SimpleNamespace):
    """The few Trainer attributes NTASGD reads; each validation is one step further, and
    Lightning's logging step lags ``global_step`` by one during a validation."""

    def __init__(self, module: torch.nn.Module) -> None:
        optimizer = torch.optim.SGD(module.parameters(), lr=30.0, weight_decay=1e-6)
        super().__init__(optimizers=[optimizer], lr_scheduler_configs=[], sanity_checking=False,
                         state=SimpleNamespace(fn="fit"), callback_metrics={},
                         should_stop=False, current_epoch=0, global_step=0, loggers=[EventLog()],
                         fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(
                             _batches_that_stepped=0)))
        self.strategy = self

    @property
    def events(self) -> list[tuple[int, str]]:
        return self.loggers[0].events

    def validate(self, callback: NTASGD, module: torch.nn.Module, value: float) -> None:
        self.global_step += 1
        self.fit_loop.epoch_loop._batches_that_stepped = self.global_step - 1
        self.callback_metrics = {"val/ppl": torch.tensor(value)}
        callback.on_validation_end(self, module)
        self.fit_loop.epoch_loop._batches_that_stepped = self.global_step  # as Lightning


def test_switch_rule_matches_awd() -> None:
    """Switch when a value is worse than the best of all but the last ``nonmono``."""
    module = torch.nn.Linear(2, 2)
    trainer, callback = FakeTrainer(module), NTASGD(nonmono=2)
    values = [10, 9, 8, 8.5, 8.6, 8.7, 8.8]
    switched_at = None
    for i, value in enumerate(values):
        trainer.validate(callback, module, value)
        if switched_at is None and callback.averaging:
            switched_at = i
    # at i=5: 8.7 > min([10, 9, 8]) = 8; at i=4: 8.6 > min([10, 9]) = 9 is false
    assert switched_at == 5
    optimizer = trainer.optimizers[0]
    assert isinstance(optimizer, torch.optim.ASGD)
    assert optimizer.param_groups[0]["lr"] == 30.0
    assert optimizer.param_groups[0]["weight_decay"] == 1e-6
    assert callback.history == pytest.approx(values)
    assert trainer.events == [(5, "nt_asgd/averaging")]  # the 6th validation's step


def test_validation_sees_averaged_weights_and_training_the_raw_ones() -> None:
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 1)
    trainer, callback = FakeTrainer(module), NTASGD(finetune_epoch=0)
    callback.on_train_epoch_start(trainer, module)
    optimizer = trainer.optimizers[0]
    seen = []
    for _ in range(3):
        optimizer.zero_grad()
        module(torch.randn(4, 3)).pow(2).sum().backward()
        optimizer.step()
        seen.append(module.weight.detach().clone())
    raw = module.weight.detach().clone()
    callback.on_validation_epoch_start(trainer, module)
    # torch's ASGD with t0=0 averages the iterates from its second step on (mu lags a step)
    torch.testing.assert_close(module.weight.detach(), torch.stack(seen[1:]).mean(0))
    state = callback.state_dict()  # a checkpoint written now keeps the raw weights aside
    assert torch.equal(state["raw"][0], raw)
    callback.on_train_batch_start(trainer, module, None, 0)
    assert torch.equal(module.weight.detach(), raw)


def test_finetuning_restarts_averaging_and_stops_when_non_monotone() -> None:
    module = torch.nn.Linear(2, 2)
    trainer, callback = FakeTrainer(module), NTASGD(nonmono=1, finetune_epoch=3)
    trainer.validate(callback, module, 5.0)
    trainer.current_epoch = 3
    callback.on_train_epoch_start(trainer, module)
    first_asgd = trainer.optimizers[0]
    assert callback.finetuning and callback.history == []
    for value in (4.0, 3.9):
        trainer.validate(callback, module, value)
    assert not trainer.should_stop and trainer.optimizers[0] is first_asgd
    trainer.validate(callback, module, 4.5)  # worse than min([4.0])
    assert trainer.should_stop
    assert trainer.events == [(1, "nt_asgd/finetuning"), (3, "nt_asgd/stopped")]


def test_switch_at_a_fixed_epoch_ignores_the_rule_and_sets_the_lr() -> None:
    """PaLM's schedule: Adam until ``switch_epoch``, then ASGD at ``lr``, whatever the
    validation values did before."""
    module = torch.nn.Linear(2, 2)
    trainer, callback = FakeTrainer(module), NTASGD(nonmono=1, switch_epoch=2, lr=30.0)
    trainer.optimizers = [torch.optim.Adam(module.parameters(), lr=1e-3, weight_decay=1e-6)]
    for epoch, value in enumerate([5.0, 9.0, 9.5]):  # non-monotone from epoch 1 on
        trainer.current_epoch = epoch
        callback.on_train_epoch_start(trainer, module)
        assert callback.averaging == (epoch >= 2)
        trainer.validate(callback, module, value)
    optimizer = trainer.optimizers[0]
    assert isinstance(optimizer, torch.optim.ASGD)
    assert optimizer.param_groups[0]["lr"] == 30.0
    assert optimizer.param_groups[0]["weight_decay"] == 1e-6
    assert trainer.events == [(2, "nt_asgd/averaging")]  # once, at epoch 2's start
