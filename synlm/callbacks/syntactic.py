"""Targeted syntactic evaluation during training: after each validation of a fit, a fixed
slice of BLiMP, SyntaxGym or Marvin & Linzen scored with the model, its headline numbers
logged beside ``val/ppl`` (docs/syntactic-evaluation.md, "During training")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from synlm.errors import InputError
from synlm.tse.benchmarks import BENCHMARKS, load_benchmarks, score_benchmarks
from synlm.tse.scoring import ModelScorer


class SyntacticEvaluation(pl.Callback):
    """Logs ``val/<benchmark>/<measure>`` (``synlm.tse.BenchmarkResult.headline``, e.g.
    ``val/blimp/accuracy``, ``val/blimp/in_vocabulary_accuracy``) after each validation of
    a fit, from the first ``subset`` pairs of each BLiMP paradigm (items of each SyntaxGym
    suite, pairs of each Marvin & Linzen case), read once when the fit starts.

    Under DDP the slice is scored once, on global rank 0, while the other ranks wait; its
    headline numbers are then broadcast (``trainer.strategy.broadcast``) and every rank logs
    the same values, so that callbacks on any rank can monitor them (a ``ModelCheckpoint`` or
    ``EarlyStopping`` on ``val/blimp/accuracy``). They are logged with ``sync_dist`` and the
    ``max`` reduction, which keeps equal values exactly as they are. The slice is read on
    every rank when the fit starts, so a missing file stops every rank alike. The sanity
    check is skipped. The cost is one scoring pass over the slice: 1,340 sentences for BLiMP
    at ``subset=10``, a few seconds for a PTB-size AWD-LSTM on a CPU core
    (``benchmarks/tse_speed.py`` measures the rate).

    Args:
        benchmarks: names of ``synlm.tse.BENCHMARKS``.
        subset: pairs (items) of each paradigm, suite or case.
        suites: SyntaxGym suites (default the paper's 34).
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).
        batch_size: sentences per forward pass.
    """

    def __init__(self, benchmarks: Sequence[str] = ("blimp",), subset: int = 10,
                 suites: Sequence[str] | None = None, data_dir: str | None = None,
                 batch_size: int = 64) -> None:
        unknown = [name for name in benchmarks if name not in BENCHMARKS]
        if unknown:
            raise InputError(f"SyntacticEvaluation: unknown benchmark {unknown[0]!r}; expected "
                             f"one of {', '.join(BENCHMARKS)}")
        if subset < 1:
            raise InputError(f"SyntacticEvaluation: subset must be at least 1, got {subset}")
        self.benchmarks = list(benchmarks)
        self.subset, self.suites, self.data_dir = subset, suites, data_dir
        self.batch_size = batch_size
        self._loaded: dict[str, list[Any]] | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            self._loaded = load_benchmarks(self.benchmarks, self.data_dir, self.subset,
                                           suites=self.suites)

    def on_validation_epoch_end(self, trainer: pl.Trainer,
                                pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING \
                or self._loaded is None:
            return
        headline = self._headline(pl_module, self._loaded) if trainer.is_global_zero else None
        for name, value in trainer.strategy.broadcast(headline, src=0).items():
            pl_module.log(name, value, sync_dist=True, reduce_fx="max")

    def _headline(self, pl_module: pl.LightningModule,
                  loaded: dict[str, list[Any]]) -> dict[str, float]:
        """``{"val/<benchmark>/<measure>": value}``: the headline numbers of the ``loaded``
        slice scored with the model, those that are defined."""
        scorer = ModelScorer(pl_module, self.batch_size, pl_module.device)
        return {f"val/{name}": value
                for result in score_benchmarks(loaded, scorer).values()
                for name, value in result.headline.items() if value is not None}
