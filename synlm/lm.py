"""``SyntaxLM``: token embedding + backbone + tied decoder + syntax heads, as a LightningModule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters
from lightning_utilities.core.apply_func import apply_to_collection
from torch import Tensor, nn

from synlm.backbones.base import Backbone
from synlm.data.vocab import Vocab
from synlm.heads.base import SyntaxHead
from synlm.metrics.parsing import InducedTreeF1
from synlm.metrics.perplexity import Perplexity
from synlm.modules import embedding_dropout
from synlm.outputs import Batch, HeadOutput, LMOutput


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or infinite loss."""


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


class SyntaxLM(pl.LightningModule):
    """A language model made of a ``backbone`` and any number of syntax ``heads``.

    Loss (Merity et al. 2018 eq. for AR/TAR; each head's paper for its term)::

        NLL + Σ_h weight_h · loss_h + aux_loss
            + alpha · mean(layers[-1]²) + beta · mean((raw_last[t+1] − raw_last[t])²)

    In stream mode (batches without ``lengths``) the recurrent state is carried from one
    window to the next and detached; it is reset at the start of every epoch and of
    every evaluation. With ``scale_lr_by_window`` each training step's learning rate is
    multiplied by window length / ``bptt`` (AWD-LSTM main.py:186-187).

    Args:
        backbone: a ``Backbone``; ``output_size`` must equal ``input_size`` when tied.
        heads: syntax heads; each head's ``requires`` must be provided by the backbone.
        vocab_size: set from the DataModule by the CLI.
        bptt: base window length, for the learning-rate scaling (linked from the data).
        embedding_dropout: word-type dropout on the embedding matrix (AWD ``dropoute``).
        alpha, beta: activation and temporal activation regularisation.
        init_range: embedding (and untied decoder) init U(−r, r); decoder bias 0.
        optimizer: ``sgd`` (AWD-LSTM; NT-ASGD is the ``NTASGD`` callback) or ``adam``.
        lr, weight_decay, momentum: optimiser settings.
        adam_betas, adam_eps: Adam settings (ON-LSTM/PRPN use betas (0, 0.999), eps 1e-9).
        plateau_patience: if set, ReduceLROnPlateau(factor 0.5) on ``val/loss``.
    """

    def __init__(
        self,
        backbone: Backbone,
        heads: Sequence[SyntaxHead] = (),
        vocab_size: int = 10000,
        bptt: int = 70,
        embedding_dropout: float = 0.1,
        alpha: float = 2.0,
        beta: float = 1.0,
        tie_weights: bool = True,
        init_range: float = 0.1,
        optimizer: Literal["sgd", "adam"] = "sgd",
        lr: float = 30.0,
        weight_decay: float = 1.2e-6,
        momentum: float = 0.0,
        adam_betas: tuple[float, float] = (0.0, 0.999),
        adam_eps: float = 1e-9,
        plateau_patience: int | None = None,
        scale_lr_by_window: bool = True,
    ) -> None:
        super().__init__()
        # Through the CLI the hyperparameters are the config (class paths included), so
        # load_from_checkpoint rebuilds everything; built in Python, modules are not saved.
        via_cli = _given_hyperparameters.get() is not None
        self.save_hyperparameters(ignore=None if via_cli else ["backbone", "heads"])
        self.backbone = backbone
        self.heads = nn.ModuleList(heads)
        self._check_heads()
        for head in self.heads:
            head.bind(backbone)

        self.embedding = nn.Embedding(vocab_size, backbone.input_size)
        if tie_weights and backbone.output_size != backbone.input_size:
            raise ValueError(
                f"tied weights need {type(backbone).__name__}.output_size "
                f"({backbone.output_size}) == input_size ({backbone.input_size})"
            )
        self.decoder = nn.Linear(backbone.output_size, vocab_size)
        if tie_weights:
            self.decoder.weight = self.embedding.weight
        nn.init.uniform_(self.embedding.weight, -init_range, init_range)
        if not tie_weights:
            nn.init.uniform_(self.decoder.weight, -init_range, init_range)
        nn.init.zeros_(self.decoder.bias)

        self.val_ppl = Perplexity()
        self.test_ppl = Perplexity()
        self.parsing = nn.ModuleDict({"val": InducedTreeF1(), "test": InducedTreeF1()})
        self._states: dict[str, Any] = {}
        self._lr_scale = 1.0
        self._datamodule: pl.LightningDataModule | None = None
        self.vocab: Vocab | None = None  # set at setup, saved in checkpoints (synlm parse)

    # ------------------------------------------------------------------ checks
    def _check_heads(self) -> None:
        provided = self.backbone.provides
        for head in self.heads:
            missing = head.requires - provided
            if missing:
                raise ValueError(
                    f"{type(head).__name__} requires {sorted(missing)} which "
                    f"{type(self.backbone).__name__} does not provide "
                    f"(it provides {sorted(provided) or 'only hidden states'})"
                )
        names = [h.name for h in self.heads]
        if len(set(names)) != len(names):
            raise ValueError(f"heads need distinct names (their metric keys): {names}")
        replacing = [type(h).__name__ for h in self.heads if h.replaces_distribution]
        if len(replacing) > 1:
            raise ValueError(f"at most one head may replace the next-token distribution: "
                             f"{replacing}")

    def setup(self, stage: str) -> None:
        datamodule = self.datamodule
        if datamodule is None or not hasattr(datamodule, "request"):
            return
        for head in self.heads:
            datamodule.request(head.needs_gold, who=type(head).__name__)
        self.vocab = datamodule.vocab

    @property
    def datamodule(self) -> pl.LightningDataModule | None:
        """The DataModule this model was built with (``from_config``) or trains on."""
        if self._datamodule is not None:
            return self._datamodule
        trainer = self._trainer
        return trainer.datamodule if trainer is not None else None

    # ------------------------------------------------------------------ forward
    def forward(self, batch: Batch, state: Any = None) -> LMOutput:
        emb = embedding_dropout(self.embedding.weight, batch.tokens,
                                self.hparams.embedding_dropout, self.training)  # (B, T, E)
        out = self.backbone(emb, state)
        logits = self.decoder(out.hidden)  # (B, T, V)
        target_log_probs = -F.cross_entropy(
            logits.flatten(0, 1).float(), batch.targets.flatten(), reduction="none"
        ).view_as(batch.targets)
        heads: dict[str, HeadOutput] = {}
        provided = batch.provided()
        for head in self.heads:
            if head.needs_gold - provided and not head.replaces_distribution:
                continue  # e.g. log_probs() on raw text: no gold, no supervised loss
            head_out = head(out, batch, logits)
            heads[head.name] = head_out
            if head.replaces_distribution:
                target_log_probs = head_out.target_log_probs
        return LMOutput(logits=logits, target_log_probs=target_log_probs, backbone=out,
                        heads=heads, state=out.state)

    def _carrying_forward(self, batch: Batch, stage: str) -> LMOutput:
        """Forward with the state carried from this stage's previous window (stream mode,
        recurrent backbones), detached; sentence batches start from a zero state."""
        carry = batch.lengths is None and self.backbone.recurrent
        result = self(batch, self._states.get(stage) if carry else None)
        if carry:
            self._states[stage] = detach_state(result.state)
        return result

    def _step(self, batch: Batch, stage: str) -> tuple[Tensor, LMOutput]:
        result = self._carrying_forward(batch, stage)
        nll = -result.target_log_probs  # (B, T)
        mask = batch.mask
        lm_loss = nll[mask].mean()
        loss = lm_loss
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
            loss = loss + self._activation_regularisation(out.layers, out.raw_last, mask)
        logs[f"{stage}/loss"] = loss
        batch_size = batch.tokens.size(0)
        on_step = stage == "train"
        self.log_dict(logs, on_step=on_step, on_epoch=True, batch_size=batch_size,
                      sync_dist=not on_step, prog_bar=False)
        return loss, result

    def _activation_regularisation(self, layers: list[Tensor] | None,
                                   raw_last: Tensor | None, mask: Tensor) -> Tensor:
        """AR on the last layer as the backbone reports it (AWD: after output dropout),
        TAR on the raw last layer (Merity et al. 2018 §4.6)."""
        reg = torch.zeros((), device=mask.device)
        if self.hparams.alpha and layers:
            reg = reg + self.hparams.alpha * layers[-1][mask].pow(2).mean()
        if self.hparams.beta and raw_last is not None and raw_last.size(1) > 1:
            both = mask[:, 1:] & mask[:, :-1]
            diff = raw_last[:, 1:] - raw_last[:, :-1]
            reg = reg + self.hparams.beta * diff[both].pow(2).mean()
        return reg

    # ------------------------------------------------------------------ loops
    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        loss, _ = self._step(batch, "train")
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"non-finite training loss ({loss.item()}) at step {self.global_step}; "
                "the last good checkpoint is left as it was"
            )
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "val", self.val_ppl)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "test", self.test_ppl)

    def on_validation_epoch_end(self) -> None:
        self._log_parsing("val")

    def on_test_epoch_end(self) -> None:
        self._log_parsing("test")

    def _log_parsing(self, stage: str) -> None:
        """``{stage}/uf1_<set>[_l<layer>]`` for every distance set, and ``{stage}/uf1``: the
        first supervised head's set (its first layer) if any, else the backbone's middle
        layer. Only when the evaluation batches carried gold trees (sentence mode)."""
        parsing = self.parsing[stage]
        scores = parsing.compute()
        parsing.reset()
        if not scores:
            return
        for key, value in scores.items():
            self.log(f"{stage}/uf1_{key}", value.float())

        def of(name: str) -> list[str]:
            return sorted(k for k in scores if k == name or k.startswith(f"{name}_l"))

        supervised = [h.name for h in self.heads if hasattr(h, "distances")]
        headline = of(supervised[0]) if supervised else []
        if not headline:
            lm = of("lm")
            headline = lm[len(lm) // 2 :]
        self.log(f"{stage}/uf1", scores[headline[0]].float(), prog_bar=True)

    def _eval_step(self, batch: Batch, stage: str, ppl: Perplexity) -> None:
        _, result = self._step(batch, stage)
        ppl.update(-result.target_log_probs, batch.mask)
        self.log(f"{stage}/ppl", ppl, on_step=False, on_epoch=True, prog_bar=True)
        if batch.trees is not None:
            self.parsing[stage].update(self._distance_sets(result), batch.trees)

    def _distance_sets(self, result: LMOutput) -> dict[str, Tensor]:
        """Named (L, B, T) distances: ``lm`` from the backbone, one per distance head."""
        sets = {}
        if result.backbone.distances is not None:
            sets["lm"] = result.backbone.distances
        for head in self.heads:
            if hasattr(head, "distances"):
                sets[head.name] = head.distances(result.backbone)
        return sets

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
        hp = self.hparams
        if hp.optimizer == "sgd":
            optimizer = torch.optim.SGD(self.parameters(), lr=hp.lr, momentum=hp.momentum,
                                        weight_decay=hp.weight_decay)
        else:
            optimizer = torch.optim.Adam(self.parameters(), lr=hp.lr, betas=hp.adam_betas,
                                         eps=hp.adam_eps, weight_decay=hp.weight_decay)
        if hp.plateau_patience is None:
            return optimizer
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=0.5, patience=hp.plateau_patience)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": "val/loss"}}

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        stream = batch.lengths is None
        if self.hparams.scale_lr_by_window and stream:
            self._lr_scale = batch.tokens.size(1) / self.hparams.bptt

    def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any,
                       optimizer_closure: Any = None) -> None:
        """Scale the learning rate by window length / bptt for this step only."""
        scale, self._lr_scale = self._lr_scale, 1.0
        groups = optimizer.param_groups
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
        run continues bit for bit; Lightning saves neither. Window lengths come from
        their own seeded generator, so no other RNG matters."""
        rng = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        checkpoint["synlm"] = {"train_state": plain_state(self._states.get("train")),
                               "rng": rng,
                               "vocab": self.vocab.itos if self.vocab is not None else None}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("synlm")
        if not saved:
            return
        if saved.get("vocab") is not None:
            self.vocab = Vocab(saved["vocab"])
        if saved["train_state"] is not None:
            self._states["train"] = saved["train_state"]
        torch.set_rng_state(saved["rng"]["cpu"])
        if "cuda" in saved["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["rng"]["cuda"])

    # ------------------------------------------------------------------ public helpers
    @classmethod
    def from_config(cls, path: str, overrides: Sequence[str] = ()) -> SyntaxLM:
        """Build the model the CLI would build from ``path`` (plus ``--key=value``
        overrides); its DataModule is ``model.datamodule``."""
        from synlm.cli import build_from_config

        model, datamodule = build_from_config(path, overrides)
        model._datamodule = datamodule
        return model

    @torch.no_grad()
    def log_probs(self, tokens: Tensor, state: Any = None) -> Tensor:
        """Next-token log-probabilities (B, T, V) for ``tokens`` (B, T), in eval mode."""
        result = self._evaluate(tokens, state)
        replaced = [h.log_probs for h in result.heads.values() if h.log_probs is not None]
        return replaced[0] if replaced else result.logits.float().log_softmax(-1)

    @torch.no_grad()
    def distance_sets(self, tokens: Tensor) -> dict[str, Tensor]:
        """Syntactic distances (L, B, T) for rows ``[<eos>, w1..wn]`` in eval mode:
        ``lm`` from the backbone, and one entry per head that induces distances."""
        return self._distance_sets(self._evaluate(tokens))

    def _evaluate(self, tokens: Tensor, state: Any = None) -> LMOutput:
        """A forward pass in eval mode on raw tokens (no targets, no gold), then the
        previous mode again."""
        was_training = self.training
        self.eval()
        try:
            return self(Batch(tokens=tokens, targets=tokens,
                              mask=torch.ones_like(tokens, dtype=torch.bool)), state)
        finally:
            self.train(was_training)
