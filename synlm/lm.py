"""``SyntaxLM``: the training recipe around a ``SyntaxModel`` (``synlm.model``), as a
LightningModule: the loss with its regularisers, the carried state, the optimiser and its
schedule, the NaN watch, checkpoints and ``init_from``.

One module because it is one LightningModule: its hooks share the carried state, the loss
terms and the optimiser's groups."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import instantiate_class
from lightning.pytorch.utilities import rank_zero_info
from lightning_utilities.core.apply_func import apply_to_collection
from torch import Tensor, nn

from synlm.backbones.base import Backbone
from synlm.capabilities import ServesGold
from synlm.data.masking import check_objective
from synlm.data.subwords import load_vocab
from synlm.data.vocab import Vocab
from synlm.errors import InputError, RunError, SettingError
from synlm.heads.base import SyntaxHead
from synlm.metrics.perplexity import Perplexity
from synlm.metrics.structures import TREE_KINDS, InducedStructureMetrics
from synlm.model import SyntaxModel, upgrade_state_dict
from synlm.modules.recorded import plain
from synlm.optim import GroupedOptimizer, ParamGroup, build_optimizer, clip_gradients
from synlm.outputs import Batch, LMOutput, StepState
from synlm.runtime.runs import read_checkpoint, restore_rng_if_resuming, torch_rng

#: The optimiser of a model built without one (configs name theirs, see configs/).
DEFAULT_OPTIMIZER = {"class_path": "torch.optim.Adam", "init_args": {"lr": 1e-3}}


class NonFiniteLossError(RunError):
    """Training produced a NaN or infinite loss."""


class FiniteLossWatch:
    """The first non-finite training loss, recorded on the loss's device.

    ``record`` runs every step without the host waiting for the device (``if not
    torch.isfinite(loss)`` would wait on a GPU at every step); ``check`` reads the record,
    one wait, and raises ``NonFiniteLossError`` naming the exact step. ``SyntaxLM`` checks
    at each logging step (the logger reads the loss then anyway), before every validation
    and checkpoint, and at the end of training, so no checkpoint holds a non-finite model.
    """

    def __init__(self) -> None:
        self.step: Tensor | None = None  # () long, -1 while every loss was finite
        self.value: Tensor | None = None  # () that first loss

    def record(self, loss: Tensor, step: int) -> None:
        loss = loss.detach()
        if self.step is None:
            self.step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self.value = torch.zeros((), dtype=loss.dtype, device=loss.device)
        first = ~torch.isfinite(loss) & (self.step < 0)
        self.step = torch.where(first, step, self.step)
        self.value = torch.where(first, loss, self.value)

    def check(self) -> None:
        if self.step is None or (step := int(self.step)) < 0:
            return
        value, self.step = float(self.value), None
        raise NonFiniteLossError(f"non-finite training loss ({value}) at step {step}; "
                                 "the last good checkpoint is left as it was")


def plain_state(state: Any) -> Any:
    """The state with named tuples turned into tuples, so checkpoints load with
    ``weights_only=True``; backbones accept either form."""
    if isinstance(state, tuple):
        return tuple(plain_state(s) for s in state)
    if isinstance(state, list):
        return [plain_state(s) for s in state]
    return state


def detach_state(state: Any) -> Any:
    """Cut the graph between windows (truncated BPTT) without copying."""
    return apply_to_collection(state, Tensor, Tensor.detach)


def masked_mean(x: Tensor, mask: Tensor, dense: bool) -> Tensor:
    """``x[mask].mean()`` (``mask`` over ``x``'s leading dimensions). ``dense`` (every
    position counts, known on the host from ``Batch.n_targets``): the same value, bit for
    bit, without boolean indexing, whose data-dependent shape makes the host wait for the
    device at every step."""
    return x.contiguous().mean() if dense else x[mask].mean()


def attached_trainer(module: pl.LightningModule) -> pl.Trainer | None:
    """The trainer running ``module``, None outside one (Lightning's ``trainer`` raises
    then)."""
    try:
        return module.trainer
    except RuntimeError:
        return None


class KeepsDataModule:
    """A recipe's ``datamodule`` (a mixin before ``pl.LightningModule``): the one it was built
    with (``synlm.from_config`` sets it) or, without one, its trainer's."""

    _datamodule: pl.LightningDataModule | None = None

    @property
    def datamodule(self) -> pl.LightningDataModule | None:
        """The DataModule this model was built with (``synlm.from_config``) or trains on."""
        if self._datamodule is not None:
            return self._datamodule
        trainer = attached_trainer(self)  # type: ignore[arg-type]
        return trainer.datamodule if trainer is not None else None

    @datamodule.setter
    def datamodule(self, datamodule: pl.LightningDataModule | None) -> None:
        self._datamodule = datamodule


def with_scheduler(optimizer: torch.optim.Optimizer, lr_scheduler: Mapping[str, Any] | None) -> Any:
    """What ``configure_optimizers`` returns for ``optimizer`` and the scheduler config
    ``lr_scheduler`` (``{"class_path", "init_args"}``; None: the optimiser alone): a
    scheduler with ``interval = "step"`` steps every optimiser step, others every epoch;
    ``ReduceLROnPlateau`` watches its ``monitor`` (default ``val/loss``)."""
    if lr_scheduler is None:
        return optimizer
    scheduler = instantiate_class((optimizer,), dict(lr_scheduler))
    config = {"scheduler": scheduler, "interval": getattr(scheduler, "interval", "epoch")}
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        config["monitor"] = getattr(scheduler, "monitor", "val/loss")
    return {"optimizer": optimizer, "lr_scheduler": config}

class SyntaxLM(KeepsDataModule, pl.LightningModule):
    """The training recipe of a ``SyntaxModel`` (``self.model``: embedding, ``backbone``,
    syntax ``heads``, decoder), whose API (``log_probs``, ``step``, ``target_log_probs``,
    ``induce``, ``structures``, ``vocab``) it passes on.

    Loss (Merity et al. 2018 §4.6 for AR/TAR; each head's paper for its term)::

        NLL + Σ_h weight_h · loss_h + aux_loss
            + alpha · mean(a²) + beta · mean((layers[-1][t+1] − layers[-1][t])²)

    where ``a`` is ``hidden`` (``ar_target="output"``, AWD-LSTM: after the output dropout)
    or ``layers[-1]`` (``"last_layer"``, the released ON-LSTM). In stream mode (batches
    without ``lengths``) the recurrent state is carried from one window to the next and
    detached; it is reset at the start of every epoch and of every evaluation. With
    ``scale_lr_by_window`` each training step's learning rate (of the main optimiser) is
    multiplied by window length / ``bptt`` (AWD-LSTM main.py:186-187).

    Recipes (the AWD-LSTM one: SGD lr 30, alpha 2, beta 1, word dropout 0.1) live in the
    configs; the defaults here add no regularisation.

    Args:
        backbone: the ``SyntaxModel``'s; a backbone built in Python is saved as the config
            that built it (``RecordsInit``), so ``load_from_checkpoint`` rebuilds the model.
        heads: the ``SyntaxModel``'s, saved likewise.
        vocab_size: the ``SyntaxModel``'s, set from the DataModule by the CLI.
        embedding_dropout: the ``SyntaxModel``'s.
        tie_weights: the ``SyntaxModel``'s.
        decoder_bias: the ``SyntaxModel``'s.
        init_range: the ``SyntaxModel``'s.
        init_std: the ``SyntaxModel``'s.
        bptt: base window length, for the learning-rate scaling (linked from the data).
        alpha: activation regularisation (AR).
        beta: temporal activation regularisation (TAR).
        ar_target: what AR penalises: ``output`` (``hidden``) or ``last_layer``.
        optimizer: ``{"class_path", "init_args"}`` of the optimiser (the CLI links its
            top-level ``optimizer:`` here); default ``DEFAULT_OPTIMIZER``.
        lr_scheduler: the same for a scheduler (top-level ``lr_scheduler:``); schedulers with
            ``interval = "step"`` step every optimiser step, others every epoch;
            ``ReduceLROnPlateau`` watches its ``monitor`` (default ``val/loss``).
        param_groups: ``ParamGroup``s by pattern on the model's parameter names
            (``backbone.*``, ``heads.0.*``, ``embedding.weight``), with their own settings,
            optimiser and gradient clipping (``synlm.optim``).
        decay_norms_and_biases: weight decay on parameters with fewer than 2 dimensions;
            ``None``: not under AdamW, as configured otherwise.
        scale_lr_by_window: see above.
        lm_weight: the weight of the NLL term; 0 trains on the heads' losses alone (DMLM's
            phase 1, dependency modelling).
        init_from: a checkpoint, or a run folder (``runs/dm_lstm_dep``: its newest
            ``last.ckpt``), whose weights are loaded when a fit starts from scratch
            (not when it resumes): parameters of the same name and shape are taken, the
            others (e.g. a new head's) keep their initialisation, and both lists are
            printed (DMLM's phase 2 from its phase-1 model).
        frozen: regular expressions of parameter names (``re.search``) to keep fixed: they
            get no gradient and no optimiser state (e.g. ``'^decoder\\.|^embedding\\.'``).
    """

    def __init__(
        self,
        backbone: Backbone,
        heads: Sequence[SyntaxHead] = (),
        vocab_size: int = 10000,
        bptt: int = 70,
        embedding_dropout: float = 0.0,
        alpha: float = 0.0,
        beta: float = 0.0,
        ar_target: Literal["output", "last_layer"] = "output",
        tie_weights: bool = True,
        decoder_bias: bool = True,
        init_range: float = 0.1,
        init_std: float | None = None,
        optimizer: dict | None = None,
        lr_scheduler: dict | None = None,
        param_groups: Sequence[ParamGroup] = (),
        decay_norms_and_biases: bool | None = None,
        scale_lr_by_window: bool = True,
        lm_weight: float = 1.0,
        init_from: str | None = None,
        frozen: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.model = SyntaxModel(backbone, heads, vocab_size, embedding_dropout, tie_weights,
                                 decoder_bias, init_range, init_std)
        self.param_groups = [g if isinstance(g, ParamGroup) else ParamGroup(**g)
                             for g in param_groups]
        # The components as configs (what the CLI gave, or what built them in Python), so
        # that load_from_checkpoint rebuilds the model either way.
        self.save_hyperparameters(ignore=["backbone", "heads", "param_groups"])
        self.hparams.update(backbone=self.model.backbone.init_config,
                            heads=[h.init_config for h in self.model.heads],
                            param_groups=[plain(g, "param_groups") for g in self.param_groups])
        for pattern in frozen:
            regex = re.compile(pattern)
            matched = [p for name, p in self.model.named_parameters() if regex.search(name)]
            if not matched:
                raise SettingError("model.frozen", pattern,
                                   "a regular expression matching a parameter name")
            for p in matched:
                p.requires_grad_(False)
        self.ppl = nn.ModuleDict({"val": Perplexity(), "test": Perplexity()})
        self.word_ppl = nn.ModuleDict({"val": Perplexity(), "test": Perplexity()})
        self.parsing = nn.ModuleDict({"val": InducedStructureMetrics(),
                                      "test": InducedStructureMetrics()})
        self._states: dict[str, Any] = {}
        self._lr_scale = 1.0
        self._finite = FiniteLossWatch()

    # ------------------------------------------------------------------ the model's API
    backbone = property(lambda self: self.model.backbone, doc="``SyntaxModel.backbone``")
    heads = property(lambda self: self.model.heads, doc="``SyntaxModel.heads``")
    embedding = property(lambda self: self.model.embedding, doc="``SyntaxModel.embedding``")
    decoder = property(lambda self: self.model.decoder, doc="``SyntaxModel.decoder``")
    structures = property(lambda self: self.model.structures,
                          doc="``SyntaxModel.structures``")

    @property
    def vocab(self) -> Vocab | None:
        """The training corpus's vocabulary (``SyntaxModel.vocab``), saved in checkpoints."""
        return self.model.vocab

    @vocab.setter
    def vocab(self, vocab: Vocab | None) -> None:
        self.model.vocab = vocab

    @property
    def normalization(self) -> str:
        """The corpus's word normalisation (``SyntaxModel.normalization``), likewise."""
        return self.model.normalization

    @normalization.setter
    def normalization(self, normalization: str) -> None:
        self.model.normalization = normalization

    def log_probs(self, tokens: Tensor, state: Any = None) -> Tensor:
        """``SyntaxModel.log_probs``."""
        return self.model.log_probs(tokens, state)

    def step(self, tokens: Tensor, state: StepState | Any = None) -> tuple[Tensor, StepState]:
        """``SyntaxModel.step``."""
        return self.model.step(tokens, state)

    def target_log_probs(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """``SyntaxModel.target_log_probs``."""
        return self.model.target_log_probs(tokens, targets)

    def induce(self, tokens: Tensor, lengths: Tensor | None = None) -> dict[str, Tensor]:
        """``SyntaxModel.induce``."""
        return self.model.induce(tokens, lengths)

    @property
    def masked(self) -> bool:
        """Whether the model is a masked LM: its backbone attends both ways
        (``spec.bidirectional``), so it trains on the masked objective and its perplexity
        is over masked words (``mlm_ppl``)."""
        return self.backbone.spec.bidirectional

    @property
    def monitor(self) -> str:
        """The validation metric the best checkpoint is chosen by: ``val/ppl``, or a masked
        LM's ``val/mlm_ppl``."""
        return "val/mlm_ppl" if self.masked else "val/ppl"

    def forward(self, batch: Batch, state: Any = None, log_probs_needed: bool = False,
                head_states: Mapping[str, Any] | None = None) -> LMOutput:
        """``SyntaxModel.forward``."""
        return self.model(batch, state, log_probs_needed, head_states)

    def _resuming(self) -> bool:
        trainer = attached_trainer(self)
        return trainer is not None and trainer.ckpt_path is not None

    def _load_weights(self, path: str) -> None:
        """``init_from``: the tensors of ``path``'s state dict whose name and shape match
        (``path``: a checkpoint, or a run folder for its newest ``last.ckpt``)."""
        saved = read_checkpoint(path, "model.init_from")
        vocab = (saved.get("synlm") or {}).get("vocab")
        if vocab is not None and self.vocab is not None and vocab != self.vocab.to_saved():
            raise InputError(f"model.init_from: {path} was trained on another vocabulary "
                             "than this run's data; use the same corpus and subwords in both "
                             "phases")
        saved = upgrade_state_dict(saved.get("state_dict", saved))
        own = self.state_dict()
        taken = {k: v for k, v in saved.items() if k in own and own[k].shape == v.shape}
        self.load_state_dict(taken, strict=False)
        fresh = sorted(set(own) - set(taken))
        rank_zero_info(f"init_from {path}: {len(taken)} tensors loaded; kept fresh: "
              f"{', '.join(fresh) or 'none'}; not used: "
              f"{', '.join(sorted(set(saved) - set(taken))) or 'none'}")

    def setup(self, stage: str) -> None:
        datamodule = self.datamodule
        if isinstance(datamodule, ServesGold):
            check_objective(datamodule.objective, self.masked, type(self.backbone).__name__)
            for head in self.heads:
                datamodule.request(head.needs_gold, who=type(head).__name__,
                                   options=head.gold_options())
            self.vocab = datamodule.vocab
            self.normalization = datamodule.normalization
        if stage == "fit" and self.hparams.init_from and not self._resuming():
            self._load_weights(self.hparams.init_from)

    def _carrying_forward(self, batch: Batch, stage: str) -> LMOutput:
        """Forward with the state carried from this stage's previous window (stream mode,
        recurrent backbones), detached; sentence batches start from a zero state."""
        carry = batch.lengths is None and self.backbone.spec.recurrent
        result = self(batch, self._states.get(stage) if carry else None)
        if carry:
            self._states[stage] = detach_state(result.state)
        return result

    def _step(self, batch: Batch, stage: str) -> tuple[Tensor, LMOutput]:
        result = self._carrying_forward(batch, stage)
        nll = -result.target_log_probs  # (B, T)
        mask = batch.mask
        dense = batch.n_targets == mask.numel()  # every position counts (stream mode)
        # a masked batch may mask no word (short sentences): its loss is 0, not a NaN
        empty = self.masked and not batch.n_targets
        lm_loss = nll.sum() * 0.0 if empty else masked_mean(nll, mask, dense)
        loss = self.hparams.lm_weight * lm_loss
        logs = {f"{stage}/lm_loss": lm_loss}
        heads = {h.name: h for h in self.heads}
        for name, head_out in result.heads.items():
            head = heads[name]
            if head_out.loss is not None:
                loss = loss + head.weight * head_out.loss
                logs[f"{stage}/{name}_loss"] = head_out.loss
            logs.update({f"{stage}/{k}": v for k, v in head_out.metrics.items()})
        out = result.backbone
        if out.aux_loss is not None:
            loss = loss + out.aux_loss
        if stage == "train":
            loss = loss + self._activation_regularisation(out.hidden, out.layers, mask, dense)
        logs[f"{stage}/loss"] = loss
        batch_size = batch.tokens.size(0)
        on_step = stage == "train"
        self.log(f"{stage}/loss", logs.pop(f"{stage}/loss"), on_step=on_step, on_epoch=True,
                 batch_size=batch_size, sync_dist=not on_step, prog_bar=on_step)
        self.log_dict(logs, on_step=on_step, on_epoch=True, batch_size=batch_size,
                      sync_dist=not on_step, prog_bar=False)
        return loss, result

    def _activation_regularisation(self, hidden: Tensor, layers: list[Tensor] | None,
                                   mask: Tensor, dense: bool = False) -> Tensor:
        """AR on ``hidden`` or the top layer (``ar_target``), TAR on the top layer
        (Merity et al. 2018 §4.6); ``dense``: ``masked_mean``'s."""
        reg = torch.zeros((), device=mask.device)
        top = layers[-1] if layers else None
        ar_input = hidden if self.hparams.ar_target == "output" else top
        if self.hparams.alpha and ar_input is not None:
            reg = reg + self.hparams.alpha * masked_mean(ar_input.pow(2), mask, dense)
        if self.hparams.beta and top is not None and top.size(1) > 1:
            both = mask[:, 1:] & mask[:, :-1]
            diff = top[:, 1:] - top[:, :-1]
            reg = reg + self.hparams.beta * masked_mean(diff.pow(2), both, dense)
        return reg

    # ------------------------------------------------------------------ loops
    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        loss, _ = self._step(batch, "train")
        self._finite.record(loss, self.global_step)
        trainer = attached_trainer(self)
        every = trainer.log_every_n_steps if trainer is not None else 1
        if (self.global_step + 1) % every == 0:
            self._finite.check()
        return loss

    def on_validation_start(self) -> None:
        self._finite.check()

    def on_train_end(self) -> None:
        self._finite.check()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_validation_epoch_end(self) -> None:
        self._log_structures("val")

    def on_test_epoch_end(self) -> None:
        self._log_structures("test")

    def _log_structures(self, stage: str) -> None:
        """``{stage}/uf1_<name>[_l<layer>]`` for every tree-kind structure and
        ``{stage}/uas_<name>`` for every arc structure, then the headlines ``{stage}/uf1``
        and ``{stage}/uas``: the first head's structure of that family if any, else the
        backbone's (the middle layer of a multi-layer one). Only when the evaluation
        batches carried gold (sentence mode)."""
        parsing = self.parsing[stage]
        scores = parsing.compute()
        parsing.reset()
        if not scores:
            return
        for key, value in scores.items():
            self.log(f"{stage}/{key}", value.float())
        for metric, kinds in (("uf1", TREE_KINDS), ("uas", ("arcs",))):
            for name in (s.name for s in self.structures.values() if s.kind in kinds):
                keys = sorted(k for k in scores if k == f"{metric}_{name}"
                              or k.startswith(f"{metric}_{name}_l"))
                if keys:
                    self.log(f"{stage}/{metric}", scores[keys[len(keys) // 2]].float(),
                             prog_bar=True)
                    break

    def _eval_step(self, batch: Batch, stage: str) -> None:
        """Perplexity (per token), and per word on subword data (``word_ppl``), plus the
        induced structures' scores. A masked LM's is over the masked words given the rest
        of their sentence, ``mlm_ppl``: not comparable with a causal LM's ``ppl``; its
        structures are induced from the sentences unmasked (a second forward)."""
        _, result = self._step(batch, stage)
        nll = -result.target_log_probs
        self.ppl[stage].update(nll, batch.mask)
        name = "mlm_ppl" if self.masked else "ppl"
        self.log(f"{stage}/{name}", self.ppl[stage], on_step=False, on_epoch=True, prog_bar=True)
        if batch.word_ends is not None:
            self.word_ppl[stage].update(nll, batch.mask, batch.word_ends)
            self.log(f"{stage}/word_ppl", self.word_ppl[stage], on_step=False, on_epoch=True)
        if batch.trees is not None:
            if self.masked:  # the structures of the sentences as written, as synlm parse reads them
                words = torch.where(batch.mask, batch.targets, batch.tokens)  # (B, T)
                result = self.model.evaluate(words, lengths=batch.lengths)
            self.parsing[stage].update(self.model.structure_values(result), batch.trees)

    def predict_step(self, batch: Batch, batch_idx: int) -> Tensor:
        """Per-token log-probabilities of the targets, (B, T)."""
        result = self._carrying_forward(batch, "predict")
        return result.target_log_probs.masked_fill(~batch.mask, 0.0)

    def on_train_epoch_start(self) -> None:
        self._states.pop("train", None)

    def on_validation_epoch_start(self) -> None:
        self._states.pop("val", None)

    def on_test_epoch_start(self) -> None:
        self._states.pop("test", None)

    def on_predict_epoch_start(self) -> None:
        self._states.pop("predict", None)

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> Any:
        """The configured optimiser over ``param_groups`` and, if any, its scheduler."""
        hp = self.hparams
        optimizer = build_optimizer(list(self.model.named_parameters()),
                                    hp.optimizer or DEFAULT_OPTIMIZER, self.param_groups,
                                    hp.decay_norms_and_biases)
        return with_scheduler(optimizer, hp.lr_scheduler)

    def configure_gradient_clipping(self, optimizer: Any, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Groups with their own ``gradient_clip_val`` are clipped by their own norm, the
        other parameters by the trainer's ``gradient_clip_val``."""
        if not any(g.gradient_clip_val is not None for g in self.param_groups):
            super().configure_gradient_clipping(optimizer, gradient_clip_val,
                                                gradient_clip_algorithm)
            return
        if gradient_clip_algorithm not in (None, "norm"):
            raise InputError("per-group gradient clipping clips by norm; "
                             f"got gradient_clip_algorithm={gradient_clip_algorithm!r}")
        clip_gradients(list(self.model.named_parameters()), self.param_groups, gradient_clip_val)

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        stream = batch.lengths is None
        if self.hparams.scale_lr_by_window and stream:
            self._lr_scale = batch.tokens.size(1) / self.hparams.bptt

    def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any,
                       optimizer_closure: Any = None) -> None:
        """Scale the main optimiser's learning rates by window length / bptt for this step
        only (groups with an optimiser of their own keep theirs, as PaLM's parser Adam)."""
        scale, self._lr_scale = self._lr_scale, 1.0
        inner = getattr(optimizer, "optimizer", optimizer)  # under Lightning's wrapper
        main = inner.optimizers[0] if isinstance(inner, GroupedOptimizer) else inner
        groups = main.param_groups
        base = [g["lr"] for g in groups]
        for g in groups:
            g["lr"] = g["lr"] * scale
        try:
            optimizer.step(closure=optimizer_closure)
        finally:
            for g, lr in zip(groups, base):
                g["lr"] = lr

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Save the carried training state and torch's RNG (dropout masks), so a resumed
        run continues bit for bit (Lightning saves neither), and the vocabulary and word
        normalisation ``synlm parse`` needs. Window lengths and sentence batches come from
        generators seeded by (seed, epoch), so no other RNG matters. A non-finite loss
        since the last check raises here, before anything is written."""
        self._finite.check()
        checkpoint["synlm"] = {"train_state": plain_state(self._states.get("train")),
                               "rng": torch_rng(),
                               "vocab": self.vocab.to_saved() if self.vocab is not None else None,
                               "normalization": self.normalization}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore what ``on_save_checkpoint`` added; a checkpoint from before the model was
        split from this recipe has its weights renamed into ``model.`` (Lightning loads the
        state dict after this hook, by ``load_from_checkpoint`` and on resume alike)."""
        if "state_dict" in checkpoint:
            checkpoint["state_dict"] = upgrade_state_dict(checkpoint["state_dict"])
        saved = checkpoint.get("synlm")
        if not saved:
            return
        vocab = saved.get("vocab")
        if vocab is not None:
            self.vocab = load_vocab(vocab)
        # checkpoints from before normalisations were saved: synlm parse then used PTB's
        self.normalization = saved.get("normalization", "ptb")
        if saved["train_state"] is not None:
            self._states["train"] = saved["train_state"]
        restore_rng_if_resuming(self, saved)
