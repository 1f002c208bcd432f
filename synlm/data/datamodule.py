"""``SynLMDataModule``: one DataModule for every corpus, which serves each ``mode`` through
its layout: ``layout_tokens`` (stream, sentence), ``layout_actions`` (actions, a sentence a
row) and ``layout_documents`` (actions, a document a row).

One module because the DataModule's settings are one constructor's (the CLI's ``data:``
section), checked together, and every layout reads them from it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

import lightning.pytorch as pl
import numpy as np

from synlm import errors
from synlm.data.batching import ActionItem, TokenArrays
from synlm.data.corpora import Corpus
from synlm.data.files import default_cache_dir, sha256_of
from synlm.data.gold_requests import refusal, servable
from synlm.data.layout import EXAMPLES, HELD_OUT, Layout, Loader
from synlm.data.layout_actions import ActionLayout, check_action_mode
from synlm.data.layout_documents import DocumentLayout
from synlm.data.layout_tokens import SentenceLayout, StreamLayout
from synlm.data.masking import DEFAULT_MASK_RATE, Objective, check_settings, masked_vocab
from synlm.data.subwords import Subwords, SubwordVocab
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.unknown_words import RNNG_PYTORCH_RULES
from synlm.data.vocab import UNK, UnknownWords, Vocab
from synlm.errors import InputError
from synlm.outputs import GOLD_FIELDS
from synlm.syntax import Sentence
from synlm.syntax.actions import ActionVocab
from synlm.syntax.subwords import project_sentence
from synlm.syntax.targets import max_distance

#: ``min_count`` under ``unknown_words: classes`` unless given: the training singletons become
#: classes (Dyer et al. 2016, as ``PTBSepsent``).
DEFAULT_MIN_COUNT = 2

#: The batch layouts a split can be served in (``mode``, ``eval_mode``).
Mode = Literal["stream", "sentence", "actions"]

#: How training batches read documents (``document_order``; ``layout_documents``).
DOCUMENT_ORDERS = ("chunked", "streamed")

#: What a row of action mode is (``action_unit``), and the layout that serves it.
ACTION_UNITS: dict[str, type[ActionLayout]] = {"sentence": ActionLayout,
                                               "document": DocumentLayout}


class SynLMDataModule(pl.LightningDataModule):
    """Batches a ``Corpus`` for language modelling with optional gold syntax. It reads the
    corpus's sentences and builds the vocabulary; each mode is served by its layout
    (``synlm.data.layout``): ``StreamLayout`` and ``SentenceLayout`` (``layout_tokens``),
    in action mode ``ActionLayout`` (``layout_actions``) or, with ``action_unit: document``,
    ``DocumentLayout`` (``layout_documents``).

    Args:
        corpus: the corpus (default: the bundled synthetic treebank).
        mode: ``stream`` (AWD-style contiguous columns, state carried across windows),
            ``sentence`` (one padded sentence per row, for parsing evaluation and
            sentence-level models) or ``actions`` (one sentence per row as its word ids and
            the ids of the RNNG actions that build its tree, ``ActionBatch``, for recurrent
            neural network grammars; sentences without a tree are left out, training batches
            hold sentences of similar length).
        eval_mode: the mode of validation, test and predict (default: ``mode``); a
            stream-trained model validated in ``sentence`` mode logs ``val/uf1``.
        action_order: action mode: ``top_down`` (Dyer et al. 2016) or ``in_order`` (Liu &
            Zhang 2017) actions (``synlm.syntax.actions.oracle``).
        action_unit: action mode: what a row is, a ``sentence`` or a ``document``: the
            sentences of one source file (an ``.mrg`` file of a treebank: one article) as
            one tree under a root ``DOC``, as the released Transformer Grammars' documents
            (``synlm.syntax.documents``); the words of a row are then the document's, and
            ``max_length`` counts them.
        max_document_words: with ``action_unit: document``: a document of more words is cut,
            between its sentences, into consecutive documents of at most this many (a
            sentence of more alone), which bounds a row's memory: a corpus without document
            boundaries (``SyntheticTreebank``) would otherwise make one document of a split.
            The default holds every article of the NLTK WSJ sample (the longest: 4,534).
        document_order: with ``action_unit: document``, how training batches read the
            documents (``layout_documents``): ``chunked``, each batch's documents from their
            starts, or ``streamed``, as the released Transformer Grammars' trainer: the
            documents back to back through the batch's rows, one chunk of the model's
            ``sequence_length`` tokens a row and batch, each row's memory carried to its
            next batch and emptied where a document starts.
        batch_size: training columns (stream) or sentences (sentence, actions) per device.
        eval_batch_size: the same for validation (AWD: 10).
        test_batch_size: the same for test (AWD: 1).
        bptt: base window length; training windows vary as AWD-LSTM's unless
            ``variable_bptt`` is False; evaluation windows are fixed.
        max_length: sentence and action modes: training sentences of more words are
            dropped.
        max_tokens: sentence and action modes: training batches of sentences of similar
            length holding at most this many tokens (actions in action mode; rows × longest,
            padding included; fairseq's ``--max-tokens``), redrawn every epoch;
            ``batch_size`` is then unused. Evaluation keeps ``eval_batch_size``.
        span_window: PaLM's m: span targets cover the m - 1 spans ending at each word;
            None: the window a head asks for (``SpanHead`` asks for its attention's), else 10.
        subwords: split words into subwords (``TrainedBPE``, ``TrainedUnigram``: a
            byte-level BPE or a SentencePiece unigram model trained on the training split;
            ``SentencePieceModel``: a trained SentencePiece model;
            ``PretrainedTokenizer``: GPT-2's or another pretrained tokenizer);
            gold syntax is projected onto the subwords, and evaluation also logs the
            word-level perplexity ``word_ppl``; in action mode each word's ``SHIFT`` becomes
            one a piece (rnng-pytorch's subword actions, ``ActionBatch.word_ends``). None:
            the word vocabulary.
        tree_source: ``random`` replaces every gold tree by a seeded random binary tree
            over the same words (with ``subwords``: over the words, projected onto their
            pieces as gold trees are) before targets are built, and in the training rows'
            ``Batch.trees``, which a head that trains on trees reads (Du et al. 2020 Table 4,
            "random trees"); evaluation trees stay gold.
        seed: seeds the window lengths of each epoch (with the epoch number), and which
            sentences ``dependency_holdout`` holds out.
        dependency_holdout: the fraction of the training sentences with dependency gold
            (heads, or a tree to take them from by head rules) held out, drawn by ``seed``:
            training never sees them, and validation serves them instead of the corpus's
            validation split, so that a dependency-modelling phase validates (and is
            checkpointed) by its own loss, ``val/dm_loss``, where the validation split has no
            dependency gold (PTB-Concat-Syn with NLTK's sample). At least one sentence is held
            out and one kept; the vocabulary is the whole corpus's either way. 0: none.
        vocab_file: a word vocabulary to use instead of building one from the corpus (a
            JSON list of words holding ``<eos>`` and ``<unk>``, as cached); words outside it
            read as ``<unk>``.
        unknown_words: how the word vocabulary treats rare and unseen words. ``unk``: the
            vocabulary holds every word of every split and any other word reads as ``<unk>``.
            ``classes`` (Berkeley-parser unknown-word classes, as Hu et al. 2020 train their
            word-level models): training words seen fewer than ``min_count`` times become
            their class (``UNK-LC-ed``, ``UNK-INITC``, ``UNK-NUM``:
            ``synlm.data.unknown_words.unkify``), the vocabulary is the training split's
            remaining words and classes, and any word it lacks (in any split, or in raw text
            a model scores) reads as its class if the vocabulary has it, else as ``<unk>``.
            Needs raw words: not with ``subwords`` or ``vocab_file``, nor a corpus whose text
            already has ``<unk>`` in place of rare words (Mikolov's PTB, WikiText-2).
            ``berkeleyrule`` and ``berkeleyrule2`` (rnng-pytorch's) are refused here: each is
            the policy a converted checkpoint's ``vocab_file`` carries, which that vocabulary
            keeps.
        min_count: with ``classes``: the count in the training split below which a word
            becomes its class; at least 2 (default 2: the training singletons).
        cache_dir: where vocabularies and encoded splits are cached
            (default ``$SYNLM_CACHE_DIR`` or ``~/.cache/synlm``).
        objective: ``causal`` (each next token) or ``masked``: words of sentence rows
            replaced by ``<mask>`` (in the vocabulary), predicted by a bidirectional backbone
            (``synlm.data.masking``).
        mask_rate: ``masked``: the probability that a word is masked, in (0, 1).
    """

    def __init__(
        self,
        corpus: Corpus | None = None,
        mode: Mode = "stream",
        eval_mode: Mode | None = None,
        action_order: Literal["top_down", "in_order"] = "top_down",
        action_unit: Literal["sentence", "document"] = "sentence",
        max_document_words: int = 5000,
        document_order: Literal["chunked", "streamed"] = "chunked",
        batch_size: int = 20,
        eval_batch_size: int = 10,
        test_batch_size: int = 1,
        bptt: int = 70,
        variable_bptt: bool = True,
        max_length: int | None = None,
        max_tokens: int | None = None,
        span_window: int | None = None,
        subwords: Subwords | None = None,
        tree_source: Literal["gold", "random"] = "gold",
        seed: int = 141,
        dependency_holdout: float = 0.0,
        num_workers: int = 0,
        vocab_file: str | None = None,
        unknown_words: UnknownWords = "unk",
        min_count: int | None = None,
        cache_dir: str | None = None,
        objective: Objective = "causal",
        mask_rate: float = DEFAULT_MASK_RATE,
    ) -> None:
        super().__init__()
        for name, value in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size),
                            ("test_batch_size", test_batch_size), ("bptt", bptt),
                            ("max_length", max_length), ("max_tokens", max_tokens),
                            ("max_document_words", max_document_words),
                            ("span_window", span_window)):
            errors.at_least(name, value)
        errors.at_least("num_workers", num_workers, 0)
        errors.probability("dependency_holdout", dependency_holdout)
        self.corpus = corpus if corpus is not None else SyntheticTreebank()
        if dependency_holdout and "dependency" not in self.corpus.gold:
            raise InputError(f"data.dependency_holdout holds out training sentences with "
                             f"dependency gold, but {type(self.corpus).__name__} has none; use "
                             f"{EXAMPLES['dependency']}, or set it to 0")
        self.mode = mode
        self.eval_mode = eval_mode or mode
        check_settings(objective, mask_rate, self.mode, self.eval_mode)
        self.objective, self.mask_rate = objective, mask_rate
        if "actions" in (self.mode, self.eval_mode):
            check_action_mode(self.corpus, action_order, tree_source)
        self.action_order = action_order
        if action_unit not in ACTION_UNITS:
            raise errors.SettingError("action_unit", action_unit, " | ".join(ACTION_UNITS))
        self.action_unit = action_unit
        self.max_document_words = max_document_words
        if document_order not in DOCUMENT_ORDERS:
            raise errors.SettingError("document_order", document_order,
                                      " | ".join(DOCUMENT_ORDERS))
        if document_order == "streamed" and action_unit != "document":
            raise InputError("data.document_order: streamed streams documents; set "
                             "data.action_unit: document")
        self.document_order = document_order
        #: the chunks a streamed document is read in (``LayoutData.chunks_of``)
        self.chunks_of: Callable[[np.ndarray], int] | None = None
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.test_batch_size = test_batch_size
        self.bptt = bptt
        self.variable_bptt = variable_bptt
        self.max_length = max_length
        self.max_tokens = max_tokens
        self.span_window = span_window
        self.subwords = subwords
        self.tree_source = tree_source
        self.seed = seed
        self.dependency_holdout = dependency_holdout
        self.num_workers = num_workers
        self.vocab_file = vocab_file
        self.unknown_words = unknown_words
        #: None under ``unk``; under ``classes`` the threshold in use.
        self.min_count = _checked_min_count(unknown_words, min_count, subwords, vocab_file)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.requested: frozenset[str] = frozenset()
        self._corpus_sentences: dict[str, list[Sentence]] = {}
        self._sentences: dict[str, list[Sentence]] = {}
        #: the layout of each mode: the token layouts, and action mode's by ``action_unit``
        self._tokens = {"stream": StreamLayout(self), "sentence": SentenceLayout(self)}
        self._actions = ACTION_UNITS[action_unit](self)

    # ------------------------------------------------------------------ corpus
    def corpus_sentences(self, split: str) -> list[Sentence]:
        """The split as the corpus reads it (words)."""
        if split not in self._corpus_sentences:
            self._corpus_sentences[split] = self.corpus.sentences(split)
        return self._corpus_sentences[split]

    def sentences(self, split: str) -> list[Sentence]:
        """The split as the model sees it: the corpus's sentences, or with ``subwords``
        their subword sentences (gold projected, ``Sentence.word_index`` set). With
        ``dependency_holdout``, ``train`` lacks the held-out sentences, which ``HELD_OUT``
        holds (in the training split's order)."""
        if split not in self._sentences:
            if self.dependency_holdout and split in ("train", HELD_OUT):
                whole = self._model_sentences("train")
                held = self._held_out(whole)
                self._sentences["train"] = [s for i, s in enumerate(whole) if i not in held]
                self._sentences[HELD_OUT] = [whole[i] for i in sorted(held)]
            else:
                self._sentences[split] = self._model_sentences(split)
        return self._sentences[split]

    def _model_sentences(self, split: str) -> list[Sentence]:
        """The corpus's split, as subword sentences with ``subwords``."""
        sentences = self.corpus_sentences(split)
        if isinstance(self.vocab, SubwordVocab):
            pieces = self.vocab.split([s.words for s in sentences])
            sentences = [project_sentence(s, tokens, word_index)
                         for s, (tokens, word_index) in zip(sentences, pieces)]
        return sentences

    def _held_out(self, train: list[Sentence]) -> set[int]:
        """The indices of the training sentences ``dependency_holdout`` holds out:
        ``round(fraction × n)`` of the n with dependency gold (at least 1, at most n − 1),
        drawn without replacement by ``seed``."""
        with_gold = [i for i, s in enumerate(train) if s.heads is not None or s.tree is not None]
        if len(with_gold) < 2:
            raise InputError(f"data.dependency_holdout needs two training sentences with "
                             f"dependency gold (one held out, one kept); "
                             f"{type(self.corpus).__name__} has {len(with_gold)}")
        count = min(max(round(self.dependency_holdout * len(with_gold)), 1), len(with_gold) - 1)
        rng = np.random.default_rng(self.seed)
        return {with_gold[i] for i in rng.choice(len(with_gold), count, replace=False)}

    @cached_property
    def vocab(self) -> Vocab:
        """Words: built from all splits in order of first appearance (as AWD-LSTM), cached;
        with ``unknown_words: classes`` from the training split, rare words as their classes.
        Subwords: the ``subwords``' vocabulary. ``vocab_file``: that one. Under
        ``objective: masked`` ``<mask>`` follows its tokens."""
        vocab = self._corpus_vocab()
        return masked_vocab(vocab) if self.objective == "masked" else vocab

    def _corpus_vocab(self) -> Vocab:
        if self.vocab_file is not None:
            if self.subwords is not None:
                raise InputError("data.vocab_file is a word vocabulary; it cannot be combined "
                                 "with data.subwords")
            return Vocab.load(self.vocab_file)
        folder = self.cache_dir / self.corpus.cache_key()
        if self.subwords is not None:
            return self.subwords.vocab([s.words for s in self.corpus_sentences("train")], folder)
        if self.unknown_words == "classes":
            return _cached_vocab(folder / f"vocab-classes-{self.min_count}.json",
                                 self._build_class_vocab)
        return _cached_vocab(folder / "vocab.json", lambda: Vocab.build(
            s.words for split in self.corpus.splits for s in self.corpus_sentences(split)))

    def _build_class_vocab(self) -> Vocab:
        """The ``classes`` vocabulary of the training split; a corpus whose training text
        already has ``<unk>`` raises one line."""
        train = [s.words for s in self.corpus_sentences("train")]
        if any(UNK in words for words in train):
            raise InputError(
                f"data.unknown_words: classes needs raw words, but {type(self.corpus).__name__}'s "
                f"training text already has {UNK} in place of rare words (as Mikolov's PTB and "
                "WikiText-2 do); use a corpus of raw words, e.g. your own TextFiles")
        return Vocab.build_classes(train, self.min_count)

    @property
    def cache_key(self) -> str:
        """Identifies the encoded corpus: the corpus's key, plus the subwords' or the given
        vocabulary's if any, or the unknown-word classes' threshold."""
        key = self.corpus.cache_key()
        if isinstance(self.vocab, SubwordVocab):
            return f"{key}-{self.vocab.key}"
        if self.vocab_file is not None:
            return f"{key}-vocab{sha256_of(Path(self.vocab_file))[:12]}"
        if self.unknown_words == "classes":
            return f"{key}-classes{self.min_count}"
        return key

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def normalization(self) -> str:
        """The corpus's word normalisation (a ``synlm.data.normalization.NORMALIZATIONS`` name),
        for checkpoints and ``synlm parse``."""
        return self.corpus.normalization

    def gold_fields(self) -> frozenset[str]:
        """Gold ``Batch`` fields a head can train on with this corpus and ``mode``
        (``gold_requests.servable``): ``distances`` and ``spans`` with constituency gold,
        ``dep_targets`` with dependency gold; when ``mode`` is ``sentence``, ``path_lengths``
        (constituency), ``dep_path_lengths`` (dependency) and ``trees`` (the rows' gold
        ``Sentence``, with constituency gold: what TreeReg trains on). Evaluation in sentence
        mode serves ``trees`` whatever is requested."""
        return servable(self.corpus, self.mode)

    def request(self, fields: frozenset[str], who: str,
                options: Mapping[str, Any] | None = None) -> None:
        """Ask for gold fields a head trains on, built with ``options`` (``span_window``); a
        field the corpus or the training mode cannot supply, path lengths under random trees
        (``gold_requests.refusal``), or an option that conflicts with an explicit setting,
        raises a one-line ``ValueError`` naming ``who``."""
        refused = refusal(fields, who, self.corpus, self.mode, self.tree_source)
        if refused:
            raise InputError(refused)
        for option, value in (options or {}).items():
            if option != "span_window":
                raise InputError(f"{who} asks for data option {option!r}; the DataModule "
                                 "takes only span_window")
            if self.span_window is not None and self.span_window != value:
                raise InputError(f"{who} needs span targets over a window of {value} (its "
                                 f"attention's) but data.span_window is {self.span_window}; "
                                 f"set data.span_window: {value} or remove it")
            if self.span_window != value:
                self.span_window = value
                self._reset_streams()
        requested = self.requested | (fields & GOLD_FIELDS)
        if requested != self.requested:
            self.requested = requested
            self._reset_streams()

    def _reset_streams(self) -> None:
        """The token layouts rebuild their streams, with the requested gold, on next use."""
        for layout in self._tokens.values():
            layout.reset()

    @cached_property
    def boundary(self) -> float:
        """The sentence-boundary distance: the training split's largest gap + 1 (random
        trees: the longest sentence + 1, above any binary tree's height)."""
        if self.tree_source == "random":
            return float(max(len(s.words) for s in self.sentences("train")) + 1)
        return float(max_distance(self.sentences("train")) + 1)

    # ------------------------------------------------------------------ layouts
    def stream(self, split: str, mode: str | None = None) -> tuple[TokenArrays, np.ndarray]:
        """The split as one stream of units ``[<eos>, w1..wn]`` plus a closing ``<eos>``,
        and the start of each unit (the last entry is the closing ``<eos>``), with the
        requested gold aligned as ``mode`` (stream or sentence; default ``mode``) serves
        it (``layout_tokens``)."""
        return self._tokens[mode or self.mode].stream(split)

    @property
    def action_vocab(self) -> ActionVocab:
        """The actions of the training split's trees (all of it, ``dependency_holdout``'s
        held-out sentences included): ``SHIFT``, ``REDUCE``, ``NT(X)`` by sorted label
        (``NT(DOC)`` among them with ``action_unit: document``)."""
        return self._actions.vocab

    def action_items(self, split: str) -> list[ActionItem]:
        """The split's rows in action mode (``layout_actions``): each sentence with a tree,
        or with ``action_unit: document`` each document (``layout_documents``), as its word
        (or piece) ids, the ids of the actions that build its tree (``action_order``) and
        the sentence."""
        return self._actions.items(split)

    def setup(self, stage: str) -> None:
        if self.trainer is not None:
            # the training loader is built per epoch: windows or batches are redrawn from
            # (seed, epoch), and the position a checkpoint saves is one in that epoch
            self.trainer.reload_dataloaders_every_n_epochs = 1

    def _loader(self, split: str, batch_size: int, train: bool = False) -> Loader:
        """``split`` batched by the layout of ``mode`` (training) or ``eval_mode``."""
        mode = self.mode if train else self.eval_mode
        layout: Layout = self._actions if mode == "actions" else self._tokens[mode]
        return layout.loader(split, batch_size, train)

    def train_dataloader(self) -> Loader:
        return self._loader("train", self.batch_size, train=True)

    def val_dataloader(self) -> Loader:
        """The validation split, or with ``dependency_holdout`` the held-out training
        sentences."""
        return self._loader(HELD_OUT if self.dependency_holdout else "valid",
                            self.eval_batch_size)

    def test_dataloader(self) -> Loader:
        return self._loader("test", self.test_batch_size)

    def predict_dataloader(self) -> Loader:
        return self._loader("test", self.test_batch_size)


def _checked_min_count(unknown_words: str, min_count: int | None,
                       subwords: Subwords | None, vocab_file: str | None) -> int | None:
    """The ``min_count`` in use (None under ``unk``); a setting of ``unknown_words`` or
    ``min_count`` that makes no sense raises one line naming it."""
    if unknown_words not in get_args(UnknownWords):
        raise InputError(f"data.unknown_words is {unknown_words!r}; choose unk or classes")
    if unknown_words in RNNG_PYTORCH_RULES:
        raise InputError(f"data.unknown_words: {unknown_words} is the policy of a vocabulary "
                         "rnng-pytorch built, kept in its vocab.json (synlm convert; "
                         "data.vocab_file); to build unknown-word classes use classes")
    if unknown_words == "unk":
        if min_count is not None:
            raise InputError("data.min_count applies only with data.unknown_words: classes")
        return None
    if subwords is not None:
        raise InputError("data.unknown_words: classes is for word vocabularies; it cannot be "
                         "combined with data.subwords (a subword vocabulary splits unseen words)")
    if vocab_file is not None:
        raise InputError("data.unknown_words: classes builds its vocabulary from the training "
                         "split; it cannot be combined with data.vocab_file")
    if min_count is not None and min_count < 2:
        raise InputError(f"data.min_count is {min_count}; with data.unknown_words: classes it "
                         "must be at least 2 (below, no training word becomes a class)")
    return DEFAULT_MIN_COUNT if min_count is None else min_count


def _cached_vocab(path: Path, build: Callable[[], Vocab]) -> Vocab:
    """The vocabulary cached at ``path``, else ``build()``'s, saved there."""
    if path.exists():
        return Vocab.load(path)
    vocab = build()
    vocab.save(path)
    return vocab
