"""``TransitionLM``: the training recipe of the transition LMs, a LightningModule around a
``TransitionModel`` (``synlm.transition.model``) that a config names by ``class_path``: an
RNNG (``synlm.transition.rnng``), PLM, PLM-mask or a Transformer Grammar
(``synlm.transition.action_transformer``).

Training maximises the joint log-likelihood of the gold action sequences and words with
teacher forcing; the loss is −Σ log p(x, y) over a batch divided by its sentences (the
released RNNG recipe's ``--loss_normalize batch``) or by its tokens (the released PLM's).
Validation and test log what the released code reports::

    joint_ppl  = exp(−Σ log p(x, y) / Σ (actions + words))      its "ppl"
    action_ppl = exp(−Σ log p(a_t | a_<t) / Σ actions)
    word_ppl   = exp(−Σ log p(x_i | a_<t(i)) / Σ words)          given the gold tree

and test adds the language-model perplexity of word-synchronous beam search
(``synlm.transition.beam``), as the released ``beam_search.py`` computes it, and the parsing
F1 of its best trees::

    beam_ppl = exp(−Σ_sentences Σ_i log p̂(x_i | x_<i) / Σ words)    (no end-of-sentence term)

over the sentences the search parses: one whose beam empties twice (``synlm.transition.beam``)
is left out of ``beam_ppl`` and of the F1, and counted (``test/no_parse``, and a warning).

With documents (the DataModule's ``action_unit: document``) validation and test log the
document-level perplexity Transformer Grammars report (Sartran et al. 2022), the joint
over the gold trees per word of the documents::

    doc_ppl = exp(−Σ_documents log p(x, y) / Σ words)

and test runs no beam search (the paper scores documents with their gold trees only).
Documents streamed through the rows (``data.document_order: streamed``) train one chunk a
row and batch (``synlm.transition.stream``: the embeddings, layers and softmax of that
chunk alone, each document's layout built once): a batch's loss is over the actions and
words its chunks predict, and a checkpoint keeps the rows' memory (the layouts are built
again on resume), so that a resumed run goes on with the same stream.

One module because the loss, the sums the perplexities are made of, test's search and
what a checkpoint keeps read and write the same recipe state (vocabularies, the action
unit, the stream).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.cli import instantiate_class
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torchmetrics import SumMetric

from synlm import errors
from synlm.data.datamodule import SynLMDataModule
from synlm.data.layout_actions import where
from synlm.data.normalization import normalizer
from synlm.data.subwords import SubwordVocab, load_vocab
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.lm import attached_trainer, with_scheduler
from synlm.metrics.parsing import ParsingF1
from synlm.metrics.structures import prune_leaves, scored_rows
from synlm.modules.recorded import RecordsInit, build
from synlm.outputs import ActionBatch
from synlm.runtime.runs import restore_rng_if_resuming, torch_rng
from synlm.syntax.actions import ActionVocab, tree_of
from synlm.transition.attention.base import ChunkedMasks
from synlm.transition.beam import (
    BeamSettings,
    check_fits,
    search_bytes,
    search_sentences,
    word_level,
)
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import SHIFT
from synlm.transition.stream import Stream, read_streamed
from synlm.transition.types import NO_PARSE, RNNGOutput, SearchResult

_SUMS = ("action_ll", "word_ll", "actions", "words", "beam_ll", "beam_words", "no_parse")


class TransitionLM(pl.LightningModule):
    """The training recipe of a transition model (``self.model``, a ``TransitionModel``:
    the RNNG, the action Transformers, any family that implements the contract of
    ``synlm.transition.model``), trained and evaluated on ``ActionBatch``es (the
    DataModule's ``mode: actions``): the loss, the perplexities, beam search and parsing,
    optimisers and checkpoints. A config names the model by ``class_path``, as
    ``SyntaxLM`` takes its backbone::

        model:
          class_path: TransitionLM
          init_args:
            model:
              class_path: RNNG
              init_args: {hidden_size: 256, num_layers: 2, dropout: 0.3}
            loss_normalize: sentences

    Args:
        model: the transition model, built with ``(vocab_size, n_actions)``: what the CLI
            makes of a ``class_path`` and its ``init_args``, a ``{"class_path",
            "init_args"}`` dict (a checkpoint's), or a model built already (its own sizes
            are kept).
        vocab_size: V (linked from the DataModule).
        n_actions: the action vocabulary's size (linked from the DataModule).
        loss_normalize: divide the batch's −log p(x, y) by its ``sentences`` (the released
            RNNG's), its ``tokens`` (actions + words; the released PLM averages over its
            tokens) or nothing (``sum``).
        beam_size: test's beam search (``BeamSettings``; the released searches' 100).
        word_beam_size: likewise (10).
        shift_size: likewise (the fast track: the RNNG's 1, the released PLM's 5).
        max_memory_mb: the memory a search may hold besides the model (``SearchSettings``):
            sentences are searched in batches that fit it, and a sentence that does not fit
            alone is refused in one line naming the beam that does.
        optimizer: ``{"class_path", "init_args"}`` (the CLI links top-level ``optimizer:``);
            default ``default_optimizer``.
        lr_scheduler: the same for a scheduler; ``ReduceLROnPlateau`` watches ``val/loss``.
    """

    #: What the best checkpoint is chosen by (the released train.py: the joint perplexity).
    monitor = "val/joint_ppl"
    #: The optimiser when the config names none (the released RNNG's: Adam, lr 0.001).
    default_optimizer: ClassVar[dict[str, Any]] = {"class_path": "torch.optim.Adam",
                                                   "init_args": {"lr": 1e-3}}

    def __init__(self, model: Callable[[int, int], TransitionModel], vocab_size: int = 10000,
                 n_actions: int = 3,
                 loss_normalize: Literal["sentences", "tokens", "sum"] = "sentences",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 1,
                 max_memory_mb: float = 2048.0,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None) -> None:
        super().__init__()
        self.model = _built(model, vocab_size, n_actions)
        # the model as the config that builds it, its sizes beside it (where the CLI links
        # them), so that load_from_checkpoint rebuilds it; the recipe's own class as
        # Lightning's subclass mode records it (``synlm test --ckpt_path`` reads the
        # hyperparameters as this recipe's)
        config = self.model.init_config
        init_args = dict(config["init_args"])
        vocab_size, n_actions = init_args.pop("vocab_size"), init_args.pop("n_actions")
        self.save_hyperparameters({
            "_class_path": f"{type(self).__module__}.{type(self).__qualname__}",
            "model": {"class_path": config["class_path"], "init_args": init_args},
            "vocab_size": vocab_size, "n_actions": n_actions, "loss_normalize": loss_normalize,
            "beam_size": beam_size, "word_beam_size": word_beam_size, "shift_size": shift_size,
            "max_memory_mb": max_memory_mb, "optimizer": optimizer, "lr_scheduler": lr_scheduler})
        self.sums = torch.nn.ModuleDict({f"{stage}_{name}": SumMetric()
                                         for stage in ("val", "test") for name in _SUMS})
        self.parsing = ParsingF1()
        self.vocab: Vocab | None = None
        self.normalization = "none"
        self.action_vocab: ActionVocab | None = None
        self.beam = BeamSettings(beam_size, word_beam_size, shift_size,
                                 max_memory_mb=max_memory_mb)
        #: rows are ``sentence``s or ``document``s (the DataModule's ``action_unit``)
        self.action_unit = "sentence"
        #: streamed documents' rows from one training batch to the next
        self.stream = Stream()

    # ------------------------------------------------------------------ data
    def setup(self, stage: str) -> None:
        trainer = attached_trainer(self)
        datamodule = trainer.datamodule if trainer is not None else None
        if isinstance(datamodule, SynLMDataModule):
            check_action_order(self.model, datamodule.action_order)
            self.vocab = datamodule.vocab
            self.normalization = datamodule.normalization
            self.action_vocab = datamodule.action_vocab
            self.action_unit = datamodule.action_unit
            if datamodule.document_order == "streamed" and self.reads_in_chunks():
                datamodule.chunks_of = self.chunks_of

    def chunks_of(self, actions: np.ndarray) -> int:
        """The chunks the model reads ``actions`` (a document's) in."""
        masks = self.model.policy.masks(torch.as_tensor(actions)[None], self.model.num_heads)
        return len(masks.chunks)

    def reads_in_chunks(self) -> bool:
        """Whether the model reads a row in chunks with memory (``ChunkedMasks``)."""
        policy = getattr(self.model, "policy", None)
        one_tree = torch.tensor([[self.model.n_actions - 1, SHIFT, 1]])  # (X w)
        return policy is not None and isinstance(
            policy.masks(one_tree, self.model.num_heads), ChunkedMasks)

    def test_fits(self) -> str | None:
        """Whether test's search of the longest test sentence fits ``max_memory_mb``
        (``check_fits``): None, else the one-line reason, naming the sentence and the budget
        that would hold it. Documents are not searched (None)."""
        trainer = attached_trainer(self)
        datamodule = trainer.datamodule if trainer is not None else None
        if not isinstance(datamodule, SynLMDataModule) or self.action_unit == "document":
            return None
        try:
            items = datamodule.action_items("test")
        except InputError:  # no test trees: test says so when it runs
            return None
        if not items:
            return None
        longest = max(items, key=lambda item: len(item.words))
        n = len(longest.words)
        try:
            check_fits(self.model, n, self.beam)
        except InputError as err:
            needed = -(-search_bytes(self.model, n, self.beam) // 2**20)
            return f"test: {where(longest.sentence, 'the longest test sentence')}: {err}; " \
                   f"or set --model.init_args.max_memory_mb={needed}"
        return None

    def on_fit_start(self) -> None:
        """A test search that will not fit its memory is said before training, not after."""
        problem = self.test_fits()
        if problem:
            rank_zero_warn(f"{problem} (before synlm test)", category=errors.SynLMWarning)

    def on_test_start(self) -> None:
        """The longest test sentence is checked to fit the search's memory before any test
        batch runs (``test_fits``): a one-line ``InputError`` otherwise."""
        problem = self.test_fits()
        if problem:
            raise InputError(problem)

    # ------------------------------------------------------------------ loops
    def _joint(self, batch: ActionBatch, stage: str) -> Tensor:
        if batch.chunk is not None and stage == "train":
            out, batch = self._streamed(batch)
        else:
            out = self.model(batch.words, batch.actions, batch.word_lengths, batch.word_ends)
        # a family's closing actions (the in-order FINISH) count among each sentence's
        batch = replace(batch, n_actions=batch.n_actions
                        + self.model.closing_actions * batch.words.size(0))
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

    def _streamed(self, batch: ActionBatch) -> tuple[RNNGOutput, ActionBatch]:
        """A batch of streamed documents read one chunk a row (``read_streamed``, carrying
        ``self.stream``): the log-probabilities of the actions and words its chunks predict
        (0 elsewhere), and the batch with those counts."""
        out, actions, words = read_streamed(self.model, batch, self.stream)
        return out, replace(batch, n_actions=int(actions.sum()), n_words=int(words.sum()))

    def _add(self, stage: str, **values: Tensor | float) -> None:
        for name, value in values.items():
            self.sums[f"{stage}_{name}"].update(torch.as_tensor(value, dtype=torch.float64))

    def training_step(self, batch: ActionBatch, batch_idx: int) -> Tensor:
        return self._joint(batch, "train")

    def validation_step(self, batch: ActionBatch, batch_idx: int) -> None:
        self._joint(batch, "val")

    def test_step(self, batch: ActionBatch, batch_idx: int) -> None:
        self._joint(batch, "test")
        if self.action_unit == "document":
            return
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
        if self.action_unit == "document":  # no search, no parses
            return
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
        if self.action_unit == "document":
            ppl["doc_ppl"] = (s["action_ll"] + s["word_ll"]) / s["words"]
        if s["beam_words"] > 0:
            ppl["beam_ppl"] = s["beam_ll"] / s["beam_words"]
        if s["no_parse"] > 0:
            self.log(f"{stage}/no_parse", float(s["no_parse"]))
            rank_zero_warn(f"{int(s['no_parse'])} {stage} sentences have {NO_PARSE} (even "
                           "with no stack bound): left out of beam_ppl and the F1",
                           category=errors.SynLMWarning)
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
                 shift_size: int | None = None, convention: str | None = None,
                 max_memory_mb: float | None = None) -> None:
        """Search with these sizes (and surprisal ``convention``,
        ``synlm.transition.types.CONVENTIONS``, within ``max_memory_mb``) from now on; one
        left unset keeps its value."""
        sizes = {"beam_size": beam_size, "word_beam_size": word_beam_size,
                 "shift_size": shift_size}
        given = next((name for name, size in sizes.items() if size is not None), None)
        if given and not isinstance(self.beam, BeamSettings):
            raise InputError(f"{given}: a beam size, but the model searches by "
                             f"{self.beam.describe()}")
        self.beam = replace(self.beam, **{k: int(v) for k, v in sizes.items() if v is not None},
                            convention=convention or self.beam.convention,
                            max_memory_mb=max_memory_mb or self.beam.max_memory_mb)

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
        actions = self.action_vocab.decode(self.model.tree_actions(result.parses[0][0]))
        return tree_of(actions, list(words), self.model.action_orders[0])

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> Any:
        hp = self.hparams
        optimizer = instantiate_class(self.model.parameters(),
                                      hp.optimizer or self.default_optimizer)
        return with_scheduler(optimizer, hp.lr_scheduler)

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The vocabularies and normalisation scoring and parsing need, torch's RNG (dropout
        masks: a resumed run continues bit for bit) and the recipe's name (the form its
        hyperparameters are in)."""
        checkpoint["synlm"] = {
            "model_class": f"{TransitionLM.__module__}.{TransitionLM.__name__}",
            "rng": torch_rng(),
            "vocab": self.vocab.to_saved() if self.vocab is not None else None,
            "normalization": self.normalization,
            "action_vocab": self.action_vocab.to_saved() if self.action_vocab else None,
            "stream_memory": self._ranks_memory()}

    def _ranks_memory(self) -> Tensor | None:
        """Every rank's streamed memory (world, layers, B, M, C), gathered (each rank
        saves a checkpoint alike, rank 0 writes it); None before the first streamed batch."""
        if self.stream.memory is None:
            return None
        mine = torch.stack(self.stream.memory)  # (layers, B, M, C)
        trainer = attached_trainer(self)
        if trainer is None or trainer.world_size == 1:
            return mine[None]
        return self.all_gather(mine).cpu()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("synlm") or {}
        if saved.get("vocab") is not None:
            self.vocab = load_vocab(saved["vocab"])
        if saved.get("action_vocab") is not None:
            loaded = ActionVocab.from_saved(saved["action_vocab"])
            data = self.action_vocab  # the DataModule's, when setup read one first
            if data is not None and data.itos != loaded.itos:
                raise errors.InputError(
                    f"the checkpoint's actions ({', '.join(loaded.itos)}) are not its data's "
                    f"({', '.join(data.itos)}): its action ids would be read as others; give "
                    "the treebank it was trained on, or labels mapped to its own")
            self.action_vocab = loaded
        self.normalization = saved.get("normalization", "none")
        memory = saved.get("stream_memory")  # (world, layers, B, M, C): this rank's
        rank = min(self.global_rank, len(memory) - 1) if memory is not None else 0
        self.stream.memory = None if memory is None else list(memory[rank])
        restore_rng_if_resuming(self, saved)


def _built(model: Callable[[int, int], TransitionModel] | Mapping[str, Any] | TransitionModel,
           vocab_size: int, n_actions: int) -> TransitionModel:
    """The ``TransitionModel`` that ``TransitionLM``'s ``model`` argument describes."""
    if isinstance(model, Mapping):
        init_args = {**model.get("init_args", {}), "vocab_size": vocab_size,
                     "n_actions": n_actions}
        model = build({"class_path": model["class_path"], "init_args": init_args})
    elif not isinstance(model, TransitionModel):
        model = model(vocab_size, n_actions)
    if not isinstance(model, TransitionModel) or not isinstance(model, RecordsInit):
        raise InputError(f"model.model: {type(model).__name__} is not a TransitionModel "
                         "(synlm.transition.model) saved as its config (RecordsInit)")
    return model


def check_action_order(model: Any, order: str) -> None:
    """A ``SettingError`` naming ``data.action_order`` unless ``model`` decodes ``order``
    (its ``action_orders``)."""
    if order not in model.action_orders:
        raise errors.SettingError("data.action_order", order,
                                  f"{' | '.join(model.action_orders)}: the "
                                  f"{type(model).__name__} decodes only those")

