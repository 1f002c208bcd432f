"""The training recipes of the transition LMs, LightningModules: ``RNNGLM`` (an RNNG,
``synlm.transition.rnng``) and ``ActionTransformerLM`` (PLM, PLM-mask, Transformer Grammars:
``synlm.transition.action_transformer``), on what ``TransitionRecipe`` shares.

Training maximises the joint log-likelihood of the gold action sequences and words with
teacher forcing; the loss is −Σ log p(x, y) over a batch divided by its sentences (the
released recipe's ``--loss_normalize batch``). Validation and test log what the released
code reports::

    joint_ppl  = exp(−Σ log p(x, y) / Σ (actions + words))      its "ppl"
    action_ppl = exp(−Σ log p(a_t | a_<t) / Σ actions)
    word_ppl   = exp(−Σ log p(x_i | a_<t(i)) / Σ words)          given the gold tree

and test adds the language-model perplexity of word-synchronous beam search
(``synlm.transition.beam``), as the released ``beam_search.py`` computes it, and the parsing
F1 of its best trees::

    beam_ppl = exp(−Σ_sentences Σ_i log p̂(x_i | x_<i) / Σ words)    (no end-of-sentence term)

over the sentences the search parses: one whose beam empties twice (``synlm.transition.beam``)
is left out of ``beam_ppl`` and of the F1, and counted (``test/no_parse``, and a warning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import instantiate_class
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torchmetrics import SumMetric

from synlm import errors
from synlm.data.normalization import normalizer
from synlm.data.subwords import SubwordVocab, load_vocab
from synlm.data.vocab import Vocab
from synlm.lm import attached_trainer, with_scheduler
from synlm.metrics.parsing import ParsingF1
from synlm.metrics.structures import prune_leaves, scored_rows
from synlm.outputs import ActionBatch
from synlm.runtime.runs import restore_torch_rng, torch_rng
from synlm.syntax.actions import ActionVocab, tree_of
from synlm.transition.action_transformer import ActionTransformer, Attention
from synlm.transition.beam import BeamSettings, search_sentences, word_level
from synlm.transition.rnng import RNNG
from synlm.transition.types import NO_PARSE, SearchResult

_SUMS = ("action_ll", "word_ll", "actions", "words", "beam_ll", "beam_words", "no_parse")



class TransitionRecipe(pl.LightningModule):
    """What the recipes of transition LMs share: a model (``self.model``, a
    ``synlm.transition.beam.TransitionLM`` whose ``forward(words, actions, word_lengths)``
    gives an ``RNNGOutput``) trained and evaluated on ``ActionBatch``es (the DataModule's
    ``mode: actions``), beam search, parsing, optimisers and checkpoints. A subclass builds
    ``self.model`` and ``self.beam`` in its ``__init__``, after ``save_hyperparameters``
    (whose ``loss_normalize``, ``optimizer`` and ``lr_scheduler`` this class reads)."""

    #: What the best checkpoint is chosen by (the released train.py: the joint perplexity).
    monitor = "val/joint_ppl"
    #: The optimiser when the config names none.
    default_optimizer: ClassVar[dict[str, Any]]

    def __init__(self) -> None:
        super().__init__()
        self.sums = torch.nn.ModuleDict({f"{stage}_{name}": SumMetric()
                                         for stage in ("val", "test") for name in _SUMS})
        self.parsing = ParsingF1()
        self.vocab: Vocab | None = None
        self.normalization = "none"
        self.action_vocab: ActionVocab | None = None
        self.beam = BeamSettings()

    # ------------------------------------------------------------------ data
    def setup(self, stage: str) -> None:
        trainer = attached_trainer(self)
        datamodule = trainer.datamodule if trainer is not None else None
        if datamodule is not None and hasattr(datamodule, "action_vocab"):
            check_action_order(self.model, datamodule.action_order)
            self.vocab = datamodule.vocab
            self.normalization = datamodule.normalization
            self.action_vocab = datamodule.action_vocab

    # ------------------------------------------------------------------ loops
    def _joint(self, batch: ActionBatch, stage: str) -> Tensor:
        out = self.model(batch.words, batch.actions, batch.word_lengths, batch.word_ends)
        log_likelihood = out.joint.sum()
        norm = {"sentences": batch.words.size(0), "tokens": batch.n_actions + batch.n_words,
                "sum": 1}[self.hparams.loss_normalize]
        loss = -log_likelihood / norm
        on_step = stage == "train"
        self.log(f"{stage}/loss", loss, on_step=on_step, on_epoch=True, prog_bar=on_step,
                 batch_size=batch.words.size(0), sync_dist=not on_step)
        if stage != "train":
            self._add(stage, action_ll=out.action_log_probs.sum(), word_ll=out.word_log_probs.sum(),
                      actions=batch.n_actions, words=batch.n_words)
        return loss

    def _add(self, stage: str, **values: Tensor | float) -> None:
        for name, value in values.items():
            self.sums[f"{stage}_{name}"].update(torch.as_tensor(value, dtype=torch.float64))

    def training_step(self, batch: ActionBatch, batch_idx: int) -> Tensor:
        return self._joint(batch, "train")

    def validation_step(self, batch: ActionBatch, batch_idx: int) -> None:
        self._joint(batch, "val")

    def test_step(self, batch: ActionBatch, batch_idx: int) -> None:
        self._joint(batch, "test")
        results = self.search(batch.words, batch.word_lengths, word_ends=batch.word_ends)
        parsed = [b for b, r in enumerate(results) if r.parsed]
        n_words = batch.word_lengths if batch.word_ends is None else batch.word_ends.sum(1)
        self._add("test", beam_ll=sum(sum(results[b].word_log_probs) for b in parsed),
                  beam_words=sum(int(n_words[b]) for b in parsed),
                  no_parse=len(results) - len(parsed))
        if batch.word_ends is not None:  # parses over pieces as parses over words
            results = [word_level(r, ends.tolist()) for r, ends in
                       zip(results, batch.word_ends, strict=True)]
        rows, golds, keep = scored_rows(batch.sentences)
        scored = [(b, s, mask, gold) for (b, s), mask, gold in zip(rows, keep, golds)
                  if results[b].parsed]
        if scored:
            self.parsing.update([prune_leaves(self.best_tree(results[b], s.words), mask)
                                 for b, s, mask, _ in scored], [g for *_, g in scored])

    def on_validation_epoch_end(self) -> None:
        self._log_perplexities("val")

    def on_test_epoch_end(self) -> None:
        self._log_perplexities("test")
        scores = self.parsing.compute()
        self.parsing.reset()
        if scores["n_sentences"] > 0:
            self.log("test/uf1", scores["uf1_sentence"].float())
            self.log("test/uf1_corpus", scores["uf1_corpus"].float())

    def _log_perplexities(self, stage: str) -> None:
        sums = {name: self.sums[f"{stage}_{name}"] for name in _SUMS}
        s = {name: m.compute() if m.update_called else 0.0 for name, m in sums.items()}
        for metric in sums.values():
            metric.reset()
        if s["actions"] == 0:
            return
        ppl = {"joint_ppl": (s["action_ll"] + s["word_ll"]) / (s["actions"] + s["words"]),
               "action_ppl": s["action_ll"] / s["actions"], "word_ppl": s["word_ll"] / s["words"]}
        if s["beam_words"] > 0:
            ppl["beam_ppl"] = s["beam_ll"] / s["beam_words"]
        if s["no_parse"] > 0:
            self.log(f"{stage}/no_parse", float(s["no_parse"]))
            rank_zero_warn(f"{int(s['no_parse'])} {stage} sentences have {NO_PARSE} (even "
                           "with no stack bound): left out of beam_ppl and the F1")
        for name, mean_ll in ppl.items():
            self.log(f"{stage}/{name}", torch.exp(-mean_ll).float(), prog_bar=name == "joint_ppl")

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def search(self, words: Tensor, lengths: Tensor, settings: BeamSettings | None = None,
               word_ends: Tensor | None = None) -> list[SearchResult]:
        """Beam search (``synlm.transition.beam``) of each row of ``words`` (B, N) in eval
        mode, with ``settings`` (default: this model's ``beam_size``, ...); pieces with
        ``word_ends`` (B, N)."""
        was_training = self.training
        self.eval()
        try:
            return search_sentences(self.model, words, lengths, settings or self.beam,
                                    word_ends)
        finally:
            self.train(was_training)

    def search_ids(self, rows: Sequence[Sequence[int]]) -> list[SearchResult]:
        """``search`` of sentences given as lists of word ids, padded here, on the model's
        device; with a subword vocabulary, of pieces (``SubwordVocab.word_ends`` says where
        each word ends; the log-probabilities are per piece)."""
        if not rows:
            return []
        device = next(self.model.parameters()).device
        words = torch.zeros(len(rows), max(1, *map(len, rows)), dtype=torch.long)
        ends = None
        if isinstance(self.vocab, SubwordVocab):
            ends = torch.zeros(words.shape, dtype=torch.bool, device=device)
        for b, ids in enumerate(rows):
            words[b, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            if ends is not None:
                ends[b, :len(ids)] = torch.tensor(self.vocab.word_ends(ids))
        return self.search(words.to(device),
                           torch.tensor([len(ids) for ids in rows], device=device),
                           word_ends=ends)

    def use_beam(self, beam_size: int | None = None, word_beam_size: int | None = None,
                 shift_size: int | None = None, convention: str | None = None) -> None:
        """Search with these sizes (and surprisal ``convention``,
        ``synlm.transition.beam.CONVENTIONS``) from now on; one left unset keeps its value."""
        sizes = {"beam_size": beam_size, "word_beam_size": word_beam_size,
                 "shift_size": shift_size}
        self.beam = replace(self.beam, **{k: int(v) for k, v in sizes.items() if v is not None},
                            convention=convention or self.beam.convention)

    @property
    def search_convention(self) -> str:
        """The surprisal convention its search computes (``synlm.transition.beam``)."""
        return self.beam.convention_of(self.model)

    def parse(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        """The best tree beam search finds for each sentence (words as the corpus writes
        them, normalised as the training corpus was; the trees hold the given words); None
        for a sentence with no parse within the beam."""
        normalize = normalizer(self.normalization)
        rows = [[normalize(w) for w in words] for words in sentences]
        if isinstance(self.vocab, SubwordVocab):
            rows = [self.vocab.encode(pieces) for pieces, _ in self.vocab.split(rows)]
            results = [r if not r.parsed else word_level(r, self.vocab.word_ends(ids))
                       for r, ids in zip(self.search_ids(rows), rows, strict=True)]
        else:
            results = self.search_ids([self.vocab.encode(words) for words in rows])
        return [self.best_tree(r, s) for r, s in zip(results, sentences, strict=True)]

    def best_tree(self, result: SearchResult, words: Sequence[str]) -> Any:
        """The best tree of a search over ``words`` (an ``nltk.Tree``, words as leaves);
        None when the search found none (``SearchResult.parsed``)."""
        if not result.parsed:
            return None
        actions = self.action_vocab.decode(result.parses[0][0])
        return tree_of(actions, list(words))

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> Any:
        hp = self.hparams
        optimizer = instantiate_class(self.model.parameters(),
                                      hp.optimizer or self.default_optimizer)
        return with_scheduler(optimizer, hp.lr_scheduler)

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The vocabularies and normalisation scoring and parsing need, torch's RNG (dropout
        masks: a resumed run continues bit for bit) and this class's name."""
        checkpoint["synlm"] = {
            "model_class": f"{type(self).__module__}.{type(self).__name__}",
            "rng": torch_rng(),
            "vocab": self.vocab.to_saved() if self.vocab is not None else None,
            "normalization": self.normalization,
            "action_vocab": self.action_vocab.to_saved() if self.action_vocab else None}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("synlm") or {}
        if saved.get("vocab") is not None:
            self.vocab = load_vocab(saved["vocab"])
        if saved.get("action_vocab") is not None:
            self.action_vocab = ActionVocab.from_saved(saved["action_vocab"])
        self.normalization = saved.get("normalization", "none")
        if "rng" in saved:
            restore_torch_rng(saved["rng"])


def check_action_order(model: Any, order: str) -> None:
    """A ``SettingError`` naming ``data.action_order`` unless ``model`` decodes ``order``
    (its ``action_orders``)."""
    if order not in model.action_orders:
        raise errors.SettingError("data.action_order", order,
                                  f"{' | '.join(model.action_orders)}: the "
                                  f"{type(model).__name__} decodes only those")


class RNNGLM(TransitionRecipe):
    """Trains and evaluates an ``RNNG`` (``self.model``).

    Args:
        vocab_size: V (linked from the DataModule).
        n_actions: the action vocabulary's size (linked from the DataModule).
        input_size: the ``RNNG``'s.
        hidden_size: the ``RNNG``'s.
        num_layers: the ``RNNG``'s.
        dropout: the ``RNNG``'s.
        legal_softmax: the ``RNNG``'s.
        max_open: the ``RNNG``'s.
        max_consecutive: the ``RNNG``'s.
        loss_normalize: divide the batch's −log p(x, y) by its ``sentences`` (the released
            default), ``tokens`` (actions + words) or nothing (``sum``).
        beam_size: test's beam search (``BeamSettings``; the reference's 100).
        word_beam_size: likewise (10).
        shift_size: likewise (1).
        optimizer: ``{"class_path", "init_args"}`` (the CLI links top-level ``optimizer:``);
            default ``default_optimizer``.
        lr_scheduler: the same for a scheduler; ``ReduceLROnPlateau`` watches ``val/loss``.
    """

    #: The released recipe's (its README: Adam, lr 0.001).
    default_optimizer = {"class_path": "torch.optim.Adam", "init_args": {"lr": 1e-3}}

    def __init__(self, vocab_size: int = 10000, n_actions: int = 3, input_size: int = 256,
                 hidden_size: int = 256, num_layers: int = 2, dropout: float = 0.3,
                 legal_softmax: bool = False, max_open: int = 100, max_consecutive: int = 8,
                 loss_normalize: Literal["sentences", "tokens", "sum"] = "sentences",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 1,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = RNNG(vocab_size, n_actions, input_size, hidden_size, num_layers, dropout,
                          legal_softmax, max_open, max_consecutive)
        self.beam = BeamSettings(beam_size, word_beam_size, shift_size)


class ActionTransformerLM(TransitionRecipe):
    """Trains and evaluates an ``ActionTransformer`` (``self.model``): PLM
    (``attention: causal``), PLM-mask (``plm_mask``) or a Transformer Grammar (``tg``).

    Args:
        vocab_size: V (linked from the DataModule).
        n_actions: the action vocabulary's size (linked from the DataModule).
        attention: the ``ActionTransformer``'s.
        size: the ``ActionTransformer``'s.
        num_layers: the ``ActionTransformer``'s.
        num_heads: the ``ActionTransformer``'s.
        ffn_size: the ``ActionTransformer``'s (None: 4 × size).
        dropout: the ``ActionTransformer``'s.
        max_positions: the ``ActionTransformer``'s.
        buffer_head: the ``ActionTransformer``'s.
        stack_head: the ``ActionTransformer``'s.
        min_relative: the ``ActionTransformer``'s.
        max_relative: the ``ActionTransformer``'s.
        pre_norm: the ``ActionTransformer``'s.
        max_open: the ``ActionTransformer``'s.
        max_consecutive: the ``ActionTransformer``'s.
        loss_normalize: divide the batch's −log p(x, y) by its ``sentences``, its
            ``tokens`` (actions + words; the released PLM averages over its tokens) or
            nothing (``sum``).
        beam_size: test's beam search (``BeamSettings``; the released PLM's 100).
        word_beam_size: likewise (10).
        shift_size: likewise (its fast track: 5).
        optimizer: ``{"class_path", "init_args"}``; default ``default_optimizer``.
        lr_scheduler: the same for a scheduler.
    """

    #: Adam with a Transformer's usual rate (the configs set the papers').
    default_optimizer = {"class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-4}}

    def __init__(self, vocab_size: int = 10000, n_actions: int = 3,
                 attention: Attention = "causal", size: int = 256, num_layers: int = 4,
                 num_heads: int = 4, ffn_size: int | None = None, dropout: float = 0.1,
                 max_positions: int = 1024, buffer_head: int = 0, stack_head: int = 1,
                 min_relative: int = -1, max_relative: int = 62,
                 pre_norm: bool | None = None, max_open: int = 100, max_consecutive: int = 8,
                 loss_normalize: Literal["sentences", "tokens", "sum"] = "tokens",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 5,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = ActionTransformer(vocab_size, n_actions, attention, size, num_layers,
                                       num_heads, ffn_size, dropout, max_positions,
                                       buffer_head, stack_head, min_relative, max_relative,
                                       pre_norm, max_open, max_consecutive)
        self.beam = BeamSettings(beam_size, word_beam_size, shift_size)


#: The recipes a checkpoint's ``synlm.model_class`` may name, by that name.
RECIPES: dict[str, type[TransitionRecipe]] = {
    f"{cls.__module__}.{cls.__name__}": cls for cls in (RNNGLM, ActionTransformerLM)}
