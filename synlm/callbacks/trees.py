"""Induced trees in the logs: after each validation of a fit, a few validation sentences'
trees beside their gold trees, as files in the run folder, a wandb table and TensorBoard
text and images (docs/visualisation.md, "Trees in the logs")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_warn
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from nltk import Tree
from torch import Tensor

from synlm import viz
from synlm.errors import InputError, SynLMWarning
from synlm.metrics.parsing import PROTOCOLS
from synlm.metrics.structures import TREE_KINDS, decode_trees, scored_rows
from synlm.syntax import Sentence, to_bracket

#: The run folder's subfolder the trees are written to.
FOLDER = "trees"
#: The wandb table's key and columns.
WANDB_KEY = "val/trees"
WANDB_COLUMNS = ["step", "sentence", "predicted", "gold", "picture"]
#: Points of margin around a TensorBoard picture's text.
MARGIN = 8.0


@dataclass(frozen=True)
class TreeSample:
    """A validation sentence's induced tree and its gold tree, over the words the
    evaluation keeps (punctuation removed, as ``val/uf1`` scores them), and their drawings
    (made once, for every place they go)."""

    predicted: Tree
    gold: Tree

    def words(self) -> list[str]:
        """The sentence's words, punctuation removed."""
        return self.gold.leaves()

    @cached_property
    def text(self) -> str:
        """``synlm.viz.pretty(predicted, gold)``."""
        return viz.pretty(self.predicted, self.gold)

    @cached_property
    def svg(self) -> str:
        """``synlm.viz.svg(predicted, gold)``."""
        return viz.svg(self.predicted, self.gold)


@dataclass(frozen=True)
class _Row:
    """A validation row kept for drawing: its tokens ``[<eos>, w1..wn]``, its sentence, its
    evaluation tree and which of its words that tree keeps."""

    tokens: Tensor
    sentence: Sentence
    gold: Tree
    keep: np.ndarray


def text_image(text: str, font_size: float = 10.0, dpi: float = 100.0) -> np.ndarray:
    """``text`` in a monospace font, black on white, as an ``(H, W, 3)`` uint8 image
    (matplotlib's Agg canvas, no pyplot, no window)."""
    lines = text.splitlines() or [""]
    width = (0.61 * font_size * max(len(line) for line in lines) + 2 * MARGIN) / 72
    height = (1.2 * font_size * len(lines) + 2 * MARGIN) / 72
    fig = Figure(figsize=(width, height), dpi=dpi, facecolor="white")
    fig.text(MARGIN / 72 / width, 1 - MARGIN / 72 / height, text, family="monospace",
             fontsize=font_size, va="top", ha="left")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code block (TensorBoard renders text summaries as Markdown)."""
    return "\n".join(f"    {line}" for line in text.splitlines())


class TreeSamples(pl.Callback):
    """The trees the model induces for the first ``n`` validation sentences with a gold
    tree, beside their gold trees, after every ``every_n_validations``-th validation of a
    fit (the sanity check left out). Validation must run in sentence mode on a corpus with
    trees (``data.eval_mode: sentence``), as it must for ``val/uf1``; otherwise, or for a
    model that induces no tree, it warns once and logs nothing.

    The structure is ``structure`` (a name of ``model.structures``, kind distances or
    spans), default the headline one of ``val/uf1``: the first of those kinds, its middle
    layer. Trees are decoded as ``synlm parse`` decodes them (rows ``[<eos>, w1..wn,
    <eos>]``, the unbiased decoder), over the words ``protocol`` scores (punctuation
    removed, as ``val/uf1``). Written by rank 0 at step ``S`` of training:

    - ``<run folder>/trees/stepSSSSSS.txt``: per sentence a line ``i: words``, then
      ``synlm.viz.pretty(predicted, gold)``; and ``stepSSSSSS_i.svg``, sentence ``i``'s
      ``synlm.viz.svg(predicted, gold)`` (gold's missed constituents shaded). The run folder
      is ``trainer.log_dir``: the CSV logger's ``version_N``.
    - wandb (a ``WandbLogger`` among the loggers): a table ``val/trees``, columns step,
      sentence, predicted and gold (bracketed) and picture (the SVG as ``wandb.Html``).
    - TensorBoard (a ``TensorBoardLogger``; ``synlm fit --tensorboard true``): per sentence
      the text drawing (``trees/i/text``) and the same drawing as an image (``trees/i``).
      The image is the nltk text drawing rendered in a monospace font with matplotlib:
      TensorBoard shows no SVG, rasterising one needs cairo (not a dependency), and the
      text drawing is the layout already tested and shown in the ``.txt`` files.

    It costs one forward pass over ``n`` sentences, without gradients, in eval mode (the
    model's mode is restored, ``SyntaxLM.induce``), with torch's RNG saved and restored
    around it: training numbers are unchanged by it.
    """

    def __init__(self, n: int = 4, structure: str | None = None,
                 every_n_validations: int = 1, protocol: str = "onlstm") -> None:
        if n < 1:
            raise InputError(f"TreeSamples: n must be >= 1, got {n}")
        if every_n_validations < 1:
            raise InputError(f"TreeSamples: every_n_validations must be >= 1, got "
                             f"{every_n_validations}")
        if protocol not in PROTOCOLS:
            raise InputError(f"TreeSamples: protocol must be one of {sorted(PROTOCOLS)}, got "
                             f"{protocol!r}")
        self.n = n
        self.structure = structure
        self.every_n_validations = every_n_validations
        self.protocol = protocol
        self._validations = 0
        self._chosen: str | None = None
        self._folder: Path | None = None
        self._collecting = False
        self._rows: list[_Row] = []
        self._warned = False

    # ------------------------------------------------------------------ hooks
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != TrainerFn.FITTING:
            return
        log_dir = trainer.log_dir  # every rank: log_dir broadcasts
        self._folder = Path(log_dir) / FOLDER if log_dir else None  # None: fast_dev_run
        self._chosen = self._pick(pl_module.structures)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._rows = []
        self._collecting = False
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        self._validations += 1
        self._collecting = (trainer.is_global_zero and self._chosen is not None
                            and self._validations % self.every_n_validations == 0)

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        if not self._collecting or len(self._rows) >= self.n or batch.trees is None:
            return
        rows, golds, keep = scored_rows(batch.trees, self.protocol)
        for (b, sentence), gold, kept in zip(rows, golds, keep):
            tokens = batch.tokens[b, :len(sentence.words) + 1]
            self._rows.append(_Row(tokens, sentence, gold, kept))
        del self._rows[self.n:]

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._collecting:
            return
        self._collecting = False
        if not self._rows:
            self._warn("the validation batches carry no gold trees (validate in sentence "
                       "mode, data.eval_mode: sentence, on a corpus with trees)")
            return
        samples = self._samples(pl_module, self._rows)
        self._rows = []
        step = trainer.global_step
        self._write_files(step, samples)
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                log_wandb(logger, step, samples)
            elif isinstance(logger, TensorBoardLogger):
                log_tensorboard(logger.experiment, step, samples)

    @property
    def state_key(self) -> str:
        """Its key in checkpoints: several TreeSamples of different settings may run (the
        form of Lightning's own keys, ``TreeSamples{'n': 4, ...}``, spelt out here: its
        helper is private)."""
        settings = {"n": self.n, "structure": self.structure,
                    "every_n_validations": self.every_n_validations, "protocol": self.protocol}
        return f"{type(self).__qualname__}{settings!r}"

    def state_dict(self) -> dict[str, Any]:
        """The validations counted, so that a resumed run keeps ``every_n_validations``'
        rhythm."""
        return {"validations": self._validations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._validations = state_dict["validations"]

    # ------------------------------------------------------------------ work
    def _pick(self, structures: Mapping[str, Any]) -> str | None:
        """The structure to draw: ``structure``, else the first of a tree kind (None, after
        a warning, when there is none)."""
        trees = [name for name, s in structures.items() if s.kind in TREE_KINDS]
        if self.structure is None:
            if not trees:
                self._warn("the model induces no tree (no structure of kind distances or "
                           "spans)")
            return trees[0] if trees else None
        if self.structure not in trees:
            raise InputError(f"TreeSamples: structure {self.structure!r} is not a tree "
                             f"structure of the model; its tree structures: "
                             f"{', '.join(trees) or 'none'}")
        return self.structure

    def _samples(self, pl_module: pl.LightningModule, rows: Sequence[_Row]) -> list[TreeSample]:
        """The chosen structure's trees for ``rows`` (its middle layer for distances), each
        beside its gold tree."""
        kind = pl_module.structures[self._chosen].kind
        width = max(len(row.tokens) for row in rows) + 1
        tokens = torch.zeros(len(rows), width, dtype=torch.long, device=pl_module.device)
        for b, row in enumerate(rows):  # [<eos>, w1..wn, <eos>]: a row for spans ending at wn
            tokens[b, :len(row.tokens)] = row.tokens
            tokens[b, len(row.tokens)] = row.tokens[0]
        lengths = torch.tensor([len(row.tokens) + 1 for row in rows], device=pl_module.device)
        with _torch_rng_kept(pl_module.device):  # lengths: a bidirectional backbone's rows
            values = pl_module.induce(tokens, lengths)[self._chosen]
        layers = decode_trees(kind, values, [(b, row.sentence) for b, row in enumerate(rows)],
                              [row.keep for row in rows])
        return [TreeSample(tree, row.gold)
                for tree, row in zip(layers[len(layers) // 2], rows)]

    def _write_files(self, step: int, samples: Sequence[TreeSample]) -> None:
        """``stepSSSSSS.txt`` (every sentence's drawings) and ``stepSSSSSS_i.svg``."""
        if self._folder is None:
            return
        self._folder.mkdir(parents=True, exist_ok=True)
        stem = f"step{step:06d}"
        text = "\n\n".join(f"{i}: {' '.join(s.words())}\n{s.text}"
                           for i, s in enumerate(samples, 1))
        (self._folder / f"{stem}.txt").write_text(text + "\n", encoding="utf-8")
        for i, s in enumerate(samples, 1):
            (self._folder / f"{stem}_{i}.svg").write_text(s.svg, encoding="utf-8")

    def _warn(self, reason: str) -> None:
        if not self._warned:
            rank_zero_warn(f"TreeSamples: {reason}; no trees are logged", category=SynLMWarning)
            self._warned = True


def _torch_rng_kept(device: torch.device) -> Any:
    """A context that saves torch's RNG (the CPU's and ``device``'s) and restores it."""
    if device.type == "cpu":
        return torch.random.fork_rng(devices=[])
    return torch.random.fork_rng(devices=[device.index or 0], device_type=device.type)


def log_wandb(logger: WandbLogger, step: int, samples: Sequence[TreeSample]) -> None:
    """The samples as one wandb table (``WANDB_COLUMNS``) at ``step``."""
    import wandb  # present: a WandbLogger is

    data = [[step, " ".join(s.words()), to_bracket(s.predicted), to_bracket(s.gold),
             wandb.Html(s.svg)] for s in samples]
    logger.log_table(WANDB_KEY, columns=WANDB_COLUMNS, data=data, step=step)


def log_tensorboard(writer: Any, step: int, samples: Sequence[TreeSample]) -> None:
    """Per sentence ``i``, its text drawing (``trees/i/text``) and that drawing as an image
    (``trees/i``) at ``step``; ``writer`` is a TensorBoard ``SummaryWriter``."""
    for i, s in enumerate(samples, 1):
        writer.add_text(f"trees/{i}/text", markdown_code(s.text), step)
        writer.add_image(f"trees/{i}", text_image(s.text), step, dataformats="HWC")
