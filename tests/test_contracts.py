"""The contracts a new family relies on: replacing heads must deliver, every structure kind
is scored in validation, optimisers come from the config with parameter groups."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml
from torch import nn

from synlm.backbones import AWDLSTM
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.heads.base import SyntaxHead
from synlm.lm import SyntaxLM
from synlm.optim import GroupedOptimizer, ParamGroup
from synlm.outputs import HeadOutput
from test_inserts import PastMix

EXPERIMENTS = sorted(p.name for p in REPO_CONFIGS.glob("*.yaml"))


def tiny(**kw) -> AWDLSTM:
    return AWDLSTM(16, 24, 3, 0.0, 0.0, 0.0, 0.0, **kw)


class SilentReplacement(SyntaxHead):
    def __init__(self) -> None:
        super().__init__("silent", replaces_distribution=True)

    def forward(self, out, batch, logits, log_probs_needed=False) -> HeadOutput:
        return HeadOutput()


class OracleArcs(SyntaxHead):
    """Arc scores that put every word's head on its gold head (when the row has one)."""

    def __init__(self) -> None:
        super().__init__("oracle", structure_kind="arcs")

    def forward(self, out, batch, logits) -> HeadOutput:
        B, T = batch.tokens.shape
        scores = torch.zeros(B, T, T)
        for b, sentence in enumerate(batch.trees or []):
            for d, h in enumerate(sentence.heads or [], start=1):
                scores[b, d, h] = 1.0
        return HeadOutput(structure=scores)


def test_a_replacing_head_that_returns_nothing_is_an_error() -> None:
    """A bug in the head, not in the user's input: a RuntimeError, whose traceback shows."""
    model = SyntaxLM(tiny(), heads=[SilentReplacement()], vocab_size=20)
    with pytest.raises(RuntimeError, match="SilentReplacement replaces .* no target_log_probs"):
        model.log_probs(torch.randint(0, 20, (2, 5)))


def test_every_structure_kind_is_scored_in_validation(tmp_path: Path) -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=40, n_valid=16, n_test=16),
                         mode="sentence", batch_size=8, eval_batch_size=8)
    model = SyntaxLM(tiny(inserts=[PastMix(after=1)]), heads=[OracleArcs()],
                     vocab_size=dm.vocab_size)
    assert {n: s.kind for n, s in model.structures.items()} == {"span": "spans",
                                                                "oracle": "arcs"}
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path)
    (scores,) = trainer.validate(model, dm, verbose=False)
    assert scores["val/uas_oracle"] == scores["val/uas"] == 100.0  # oracle heads, percent
    assert 0.0 < scores["val/uf1_span"] == scores["val/uf1"] <= 100.0  # span decoder ran


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_optimizer_override_on_every_config(name: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as printed_and_exited:
        main(["fit", "--config", str(REPO_CONFIGS / name), "--optimizer=AdamW",
              "--optimizer.lr=5e-4", "--print_config"])
    assert printed_and_exited.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["optimizer"]["class_path"] == "torch.optim.AdamW"
    assert printed["optimizer"]["init_args"]["lr"] == 5e-4


def test_parameter_groups_with_their_own_optimiser_and_clipping(tmp_path: Path) -> None:
    """PaLM's recipe: the inserted module trains with Adam lr 1e-3 and clip 1.0, everything
    else with SGD lr 30 and the trainer's clip 0.25; the window scaling touches SGD only."""
    torch.manual_seed(0)
    dm = SynLMDataModule(SyntheticTreebank(n_train=60, n_valid=10, n_test=10),
                         batch_size=4, bptt=10)
    groups = [ParamGroup(pattern=r"^backbone\.inserts\.",
                         optimizer={"class_path": "torch.optim.Adam",
                                    "init_args": {"lr": 1e-3}},
                         gradient_clip_val=1.0)]
    model = SyntaxLM(tiny(inserts=[PastMix(after=1)]), vocab_size=dm.vocab_size, bptt=10,
                     optimizer={"class_path": "torch.optim.SGD", "init_args": {"lr": 30.0}},
                     param_groups=groups)
    clipped: list[tuple[float, float]] = []

    class Norms(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            def norm(params) -> float:
                return float(torch.stack([p.grad.norm() for p in params]).norm())
            inserts = list(module.backbone.inserts.parameters())
            rest = [p for n, p in module.model.named_parameters()
                    if not n.startswith("backbone.ins")]
            clipped.append((norm(inserts), norm(rest)))

    trainer = pl.Trainer(max_steps=3, gradient_clip_val=0.25, logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         limit_val_batches=0, callbacks=[Norms()], default_root_dir=tmp_path)
    trainer.fit(model, dm)
    optimizer = trainer.optimizers[0]
    assert isinstance(optimizer, GroupedOptimizer)
    sgd, adam = optimizer.optimizers
    assert sgd.param_groups[0]["lr"] == 30.0 and adam.param_groups[0]["lr"] == 1e-3
    assert {id(p) for p in adam.param_groups[0]["params"]} == {
        id(p) for p in model.backbone.inserts.parameters()}
    for inserts, rest in clipped:
        assert inserts <= 1.0 + 1e-5 and rest <= 0.25 + 1e-5


def test_adamw_leaves_biases_and_norms_undecayed() -> None:
    model = SyntaxLM(tiny(), vocab_size=20, optimizer={
        "class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-3, "weight_decay": 0.1}})
    optimizer = model.configure_optimizers()
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0
               for p in g["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in decayed) == (p.ndim >= 2), name
    assert isinstance(model.decoder, nn.Linear)
