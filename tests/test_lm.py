"""SyntaxLM: composition checks, loss terms, learning-rate scaling, overfitting, NaN stop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import fit_batch
from synlm.backbones import AWDLSTM
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.heads.base import SyntaxHead
from synlm.lm import NonFiniteLossError, SyntaxLM
from synlm.outputs import Batch, HeadOutput
from synlm.runtime.run_callbacks import RunCheckpoint


def tiny_backbone(**kw) -> AWDLSTM:
    args = dict(input_size=16, hidden_size=32, num_layers=2, dropout_input=0.0,
                dropout_hidden=0.0, dropout_output=0.0, weight_drop=0.0)
    return AWDLSTM(**{**args, **kw})


class ConstantHead(SyntaxHead):
    """Returns a fixed loss; reads what the test says it reads."""

    def __init__(self, weight: float = 0.5, value: float = 2.0, requires: frozenset = frozenset(),
                 needs_gold: frozenset = frozenset()) -> None:
        super().__init__("constant", weight, requires=requires, needs_gold=needs_gold)
        self.value = value

    def forward(self, out, batch, logits) -> HeadOutput:
        return HeadOutput(loss=torch.tensor(self.value), metrics={"seen": torch.tensor(1.0)})


class NeedsDistances(ConstantHead):
    def __init__(self) -> None:
        super().__init__(requires=frozenset({"distances"}))


class NeedsSpans(ConstantHead):
    def __init__(self) -> None:
        super().__init__(needs_gold=frozenset({"spans"}))


def batch_of(tokens: torch.Tensor) -> Batch:
    return Batch(tokens=tokens[:, :-1], targets=tokens[:, 1:],
                 mask=torch.ones_like(tokens[:, 1:], dtype=torch.bool))


def test_head_requirements_are_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="NeedsDistances requires.*AWDLSTM does not provide"):
        SyntaxLM(tiny_backbone(), heads=[NeedsDistances()], vocab_size=20)


def test_gold_requirements_are_checked_at_setup() -> None:
    from synlm.data.corpora import PTB

    model = SyntaxLM(tiny_backbone(), heads=[NeedsSpans()], vocab_size=20)
    model._datamodule = SynLMDataModule(PTB("/nowhere"))
    with pytest.raises(ValueError, match="NeedsSpans needs.*PTB"):
        model.setup("fit")


def test_loss_is_nll_plus_weighted_heads_plus_ar_tar(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = SyntaxLM(tiny_backbone(), heads=[ConstantHead(0.5, 2.0)], vocab_size=20,
                     alpha=2.0, beta=1.0, embedding_dropout=0.0).eval()
    assert model.hparams.ar_target == "output"  # AR on hidden, as AWD-LSTM
    logged: dict[str, torch.Tensor] = {}
    monkeypatch.setattr(model, "log_dict", lambda d, **kw: logged.update(d))
    batch = batch_of(torch.randint(0, 20, (3, 9)))
    loss, result = model._step(batch, "train")
    out = result.backbone
    nll = -result.target_log_probs.mean()
    ar = 2.0 * out.hidden.pow(2).mean()
    tar = 1.0 * (out.layers[-1][:, 1:] - out.layers[-1][:, :-1]).pow(2).mean()
    torch.testing.assert_close(loss, nll + 0.5 * 2.0 + ar + tar)
    torch.testing.assert_close(logged["train/lm_loss"], nll)
    assert logged["train/constant_loss"] == 2.0 and "train/seen" in logged
    expected = torch.log_softmax(result.logits, -1).gather(-1, batch.targets[..., None])[..., 0]
    torch.testing.assert_close(result.target_log_probs, expected)


def test_a_stream_batch_takes_its_loss_without_boolean_indexing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When every position counts (stream mode; ``Batch.n_targets`` says so on the host) the
    LM loss and AR/TAR skip boolean indexing, whose data-dependent shape makes the host wait
    for a GPU at every step, and give the same loss bit for bit."""
    torch.manual_seed(0)
    model = SyntaxLM(tiny_backbone(), heads=[], vocab_size=20, alpha=2.0, beta=1.0,
                     embedding_dropout=0.0).eval()
    monkeypatch.setattr(model, "log", lambda *args, **kwargs: None)
    monkeypatch.setattr(model, "log_dict", lambda *args, **kwargs: None)
    tokens = torch.randint(0, 20, (3, 9))
    losses, indexing = [], []
    for n_targets in (0, 3 * 8):  # 0: not counted (a batch built by hand): indexing
        model._states.clear()
        with torch.profiler.profile() as profile:
            loss, _ = model._step(dataclasses.replace(batch_of(tokens), n_targets=n_targets),
                                  "train")
        losses.append(loss)
        indexing.append("aten::nonzero" in {e.key for e in profile.key_averages()})
    assert torch.equal(losses[0], losses[1])
    assert indexing == [True, False]


def test_tied_decoder_and_reference_init() -> None:
    model = SyntaxLM(tiny_backbone(), vocab_size=30)
    assert model.decoder.weight is model.embedding.weight
    assert model.embedding.weight.abs().max() <= 0.1 and model.decoder.bias.abs().sum() == 0


def test_learning_rate_scaled_by_window_for_one_step() -> None:
    model = SyntaxLM(tiny_backbone(), vocab_size=20, bptt=70)
    param = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([param], lr=30.0)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = param.sum()
        loss.backward()
        return loss

    model.on_train_batch_start(batch_of(torch.zeros(2, 36, dtype=torch.long)), 0)
    model.optimizer_step(0, 0, optimizer, closure)
    torch.testing.assert_close(param.detach(), torch.full((3,), -30.0 * 35 / 70))
    assert optimizer.param_groups[0]["lr"] == 30.0  # restored after the step


def test_log_probs_are_normalised_and_causal() -> None:
    model = SyntaxLM(tiny_backbone(), vocab_size=20)
    tokens = torch.randint(0, 20, (2, 8))
    lp = model.log_probs(tokens)
    assert lp.shape == (2, 8, 20)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 8))
    changed = tokens.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 20
    torch.testing.assert_close(model.log_probs(changed)[:, :5], lp[:, :5])
    assert model.training  # mode restored


def test_tiny_model_overfits_tiny_corpus() -> None:
    torch.manual_seed(0)
    corpus = SyntheticTreebank(n_train=8, n_valid=2, n_test=2, seed=3)
    # one column, one window: the whole corpus is a sequence the model can memorise
    dm = SynLMDataModule(corpus, batch_size=1, bptt=500, variable_bptt=False)
    (batch,) = list(dm.train_dataloader())
    model = SyntaxLM(tiny_backbone(hidden_size=64), vocab_size=dm.vocab_size,
                     embedding_dropout=0.0)
    # from about the vocabulary size to almost deterministic
    assert fit_batch(model, batch, lr=3e-2, steps=250) < 1.2


class ExplodesAtStep3(SyntaxLM):
    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        super().on_train_batch_start(batch, batch_idx)
        if self.global_step == 3:
            with torch.no_grad():
                self.embedding.weight.fill_(float("nan"))


def test_non_finite_loss_stops_with_step_and_keeps_last_checkpoint(tmp_path: Path) -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=200, n_valid=20, n_test=20),
                         batch_size=4, eval_batch_size=4, bptt=10)
    model = ExplodesAtStep3(tiny_backbone(), vocab_size=dm.vocab_size, bptt=10)
    trainer = pl.Trainer(max_steps=10, val_check_interval=2, limit_val_batches=1,
                         callbacks=[RunCheckpoint()], default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, num_sanity_val_steps=0)
    with pytest.raises(NonFiniteLossError, match="at step 3"):
        trainer.fit(model, dm)
    last = tmp_path / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=False)
    assert state["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values())


def test_adam_with_plateau_schedule() -> None:
    model = SyntaxLM(
        tiny_backbone(), vocab_size=20,
        optimizer={"class_path": "torch.optim.Adam",
                   "init_args": {"lr": 3e-3, "betas": (0.0, 0.999), "eps": 1e-9}},
        lr_scheduler={"class_path": "lightning.pytorch.cli.ReduceLROnPlateau",
                      "init_args": {"monitor": "val/loss", "factor": 0.5, "patience": 2}})
    config = model.configure_optimizers()
    optimizer = config["optimizer"]
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["betas"] == (0.0, 0.999) and optimizer.defaults["eps"] == 1e-9
    scheduler = config["lr_scheduler"]["scheduler"]
    assert scheduler.factor == 0.5 and scheduler.patience == 2
    assert config["lr_scheduler"]["monitor"] == "val/loss"


def test_induced_tree_f1_from_oracle_distances() -> None:
    """Gold gap heights decode to the gold bracketing (recall 1; precision is lost only on
    n-ary gold nodes), and reversed distances score far lower."""
    from synlm.metrics.structures import InducedStructureMetrics
    from synlm.syntax import tree_to_distances

    sentences = SyntheticTreebank(n_train=60).sentences("train")
    width = max(len(s.words) for s in sentences) + 1
    oracle = torch.zeros(1, len(sentences), width)
    for b, s in enumerate(sentences):  # rows [<eos>, w1..wn]: value i = gap before word i
        oracle[0, b, 2 : len(s.words) + 1] = torch.tensor(tree_to_distances(s.tree),
                                                          dtype=torch.float)
    metric = InducedStructureMetrics()
    metric.update({"gold": ("distances", oracle), "reversed": ("distances", -oracle)},
                  sentences)
    scores = metric.compute()
    assert scores["uf1_gold"] > 90 and scores["uf1_reversed"] < 0.5 * scores["uf1_gold"]


def test_heads_need_distinct_names() -> None:
    with pytest.raises(ValueError, match="distinct names"):
        SyntaxLM(tiny_backbone(), heads=[ConstantHead(), ConstantHead()], vocab_size=20)


def test_predict_log_probs_reproduce_test_perplexity() -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=100, n_valid=20, n_test=30),
                         batch_size=4, test_batch_size=3, bptt=9)
    model = SyntaxLM(tiny_backbone(), vocab_size=dm.vocab_size, bptt=9)
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    (tested,) = trainer.test(model, dm, verbose=False)
    predicted = torch.cat([lp.flatten() for lp in trainer.predict(model, dm)])
    count = sum(b.mask.sum() for b in dm.test_dataloader())
    # the state is carried across windows in both loops, so the numbers are the same
    torch.testing.assert_close(torch.exp(-predicted.double().sum() / count),
                               torch.tensor(tested["test/ppl"], dtype=torch.float64))


def _explode_fit(tmp_path: Path, **trainer_args) -> pl.Trainer:
    dm = SynLMDataModule(SyntheticTreebank(n_train=200, n_valid=20, n_test=20),
                         batch_size=4, eval_batch_size=4, bptt=10)
    model = ExplodesAtStep3(tiny_backbone(), vocab_size=dm.vocab_size, bptt=10)
    trainer = pl.Trainer(default_root_dir=tmp_path, logger=False, enable_progress_bar=False,
                         enable_checkpointing=False, num_sanity_val_steps=0, **trainer_args)
    trainer.fit(model, dm)
    return trainer


@pytest.mark.parametrize("trainer_args", [
    {"max_steps": 10, "limit_val_batches": 0, "log_every_n_steps": 5},  # at the logging step
    {"max_steps": 5, "limit_val_batches": 0, "log_every_n_steps": 50},  # at the end of training
])
def test_non_finite_loss_found_without_a_validation(tmp_path: Path, trainer_args) -> None:
    with pytest.raises(NonFiniteLossError, match=r"\(nan\) at step 3;"):
        _explode_fit(tmp_path, **trainer_args)


class _ScalarReads(TorchDispatchMode):
    """Counts reads of a tensor's value by the host (``.item()``, ``bool(t)``, ``int(t)``):
    on a GPU each waits for the device."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


class CountsScalarReads(SyntaxLM):
    def training_step(self, batch: Batch, batch_idx: int):
        with _ScalarReads() as reads:
            loss = super().training_step(batch, batch_idx)
        self.reads.append(reads.count)
        return loss


def test_training_step_reads_no_device_value_between_logging_steps(tmp_path: Path) -> None:
    """A stream-mode step with AR, TAR, DropConnect and the non-finite watch asks the device
    for no value: the watch reads its record at logging steps only."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=200, n_valid=20, n_test=20),
                         batch_size=4, eval_batch_size=4, bptt=10)
    model = CountsScalarReads(tiny_backbone(weight_drop=0.5), vocab_size=dm.vocab_size,
                              bptt=10, alpha=2.0, beta=1.0)
    model.reads = []
    trainer = pl.Trainer(max_steps=6, limit_val_batches=0, log_every_n_steps=3, logger=False,
                         enable_progress_bar=False, enable_checkpointing=False,
                         default_root_dir=tmp_path)
    trainer.fit(model, dm)
    assert model.reads == [0, 0, 1, 0, 0, 1]  # global steps 2 and 5 log


def test_a_head_written_for_class_variables_is_told_the_new_constructor() -> None:
    class OldStyle(SyntaxHead):
        name = "old"

        def __init__(self, weight: float = 0.5) -> None:
            super().__init__(weight)

    with pytest.raises(TypeError, match=r"OldStyle: SyntaxHead.__init__ takes the head's name"):
        OldStyle()
