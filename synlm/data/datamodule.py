"""``SynLMDataModule``: one DataModule for every corpus, in stream, sentence or action
mode."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

import lightning.pytorch as pl
import numpy as np
import torch
from nltk import Tree

from synlm import errors
from synlm.data.batching import (
    PATH_FIELDS,
    ActionItem,
    BucketLoader,
    Columns,
    ShuffledLoader,
    StreamLoader,
    TokenArrays,
    TokenBudgetLoader,
    UnitDataset,
    awd_window_lengths,
    collate_actions,
    collate_units,
    fixed_window_lengths,
)
from synlm.data.corpora import Corpus, default_cache_dir, sha256_of
from synlm.data.subwords import Subwords, SubwordVocab
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.unknown_words import RNNG_PYTORCH_RULES
from synlm.data.vocab import UNK, UnknownWords, Vocab
from synlm.errors import InputError
from synlm.outputs import GOLD_FIELDS
from synlm.syntax import Sentence, baseline_tree
from synlm.syntax.actions import ORDERS, ActionError, ActionVocab, oracle, piece_actions
from synlm.syntax.documents import DOC, documents
from synlm.syntax.subwords import project_sentence
from synlm.syntax.targets import cached_targets, max_distance

#: The gold kind (``Corpus.gold``) each gold ``Batch`` field is built from. ``trees`` (the
#: per-row gold ``Sentence`` list, sentence mode only) comes with either kind; the path
#: lengths (``PATH_FIELDS``) are served when training runs in sentence mode.
FIELD_KINDS = {"distances": "constituency", "spans": "constituency", "dep_targets": "dependency",
               **{name: kind for name, (kind, _) in PATH_FIELDS.items()}}

#: Corpora named in the error of a missing kind.
_EXAMPLES = {"constituency": "a corpus with trees, e.g. PTBConcatSyn or SyntheticTreebank",
             "dependency": "a corpus with dependency heads or trees, e.g. UDTreebank, "
                           "PTBConcatSyn or SyntheticTreebank"}

#: ``min_count`` under ``unknown_words: classes`` unless given: the training singletons become
#: classes (Dyer et al. 2016, as ``PTBSepsent``).
DEFAULT_MIN_COUNT = 2

#: The part of the training split ``dependency_holdout`` holds out, as ``sentences`` and
#: ``stream`` name it; validation serves it.
HELD_OUT = "train-held-out"

#: The batch layouts a split can be served in (``mode``, ``eval_mode``).
Mode = Literal["stream", "sentence", "actions"]

#: What a row of action mode is (``action_unit``).
ACTION_UNITS = ("sentence", "document")


class SynLMDataModule(pl.LightningDataModule):
    """Batches a ``Corpus`` for language modelling with optional gold syntax.

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
            over the same words before targets are built (Du et al. 2020 Table 4,
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
    """

    def __init__(
        self,
        corpus: Corpus | None = None,
        mode: Mode = "stream",
        eval_mode: Mode | None = None,
        action_order: Literal["top_down", "in_order"] = "top_down",
        action_unit: Literal["sentence", "document"] = "sentence",
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
    ) -> None:
        super().__init__()
        for name, value in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size),
                            ("test_batch_size", test_batch_size), ("bptt", bptt),
                            ("max_length", max_length), ("max_tokens", max_tokens),
                            ("span_window", span_window)):
            errors.at_least(name, value)
        errors.at_least("num_workers", num_workers, 0)
        errors.probability("dependency_holdout", dependency_holdout)
        self.corpus = corpus if corpus is not None else SyntheticTreebank()
        if dependency_holdout and "dependency" not in self.corpus.gold:
            raise InputError(f"data.dependency_holdout holds out training sentences with "
                             f"dependency gold, but {type(self.corpus).__name__} has none; use "
                             f"{_EXAMPLES['dependency']}, or set it to 0")
        self.mode = mode
        self.eval_mode = eval_mode or mode
        if "actions" in (self.mode, self.eval_mode):
            _check_action_mode(self.corpus, action_order, tree_source)
        self.action_order = action_order
        if action_unit not in ACTION_UNITS:
            raise errors.SettingError("action_unit", action_unit, " | ".join(ACTION_UNITS))
        self.action_unit = action_unit
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
        self._streams: dict[tuple[str, str], tuple[TokenArrays, np.ndarray]] = {}
        self._action_items: dict[str, list[ActionItem]] = {}

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
        Subwords: the ``subwords``' vocabulary. ``vocab_file``: that one."""
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
        """Gold ``Batch`` fields this corpus can supply in these modes: ``distances`` and
        ``spans`` with constituency gold, ``dep_targets`` with dependency gold, and ``trees``
        (the rows' gold ``Sentence``) with either when ``mode`` or ``eval_mode`` is
        ``sentence``; ``path_lengths`` (constituency) and ``dep_path_lengths`` (dependency)
        when ``mode`` is ``sentence``."""
        gold = self.corpus.gold
        fields = {f for f, kind in FIELD_KINDS.items()
                  if kind in gold and (self.mode == "sentence" or f not in PATH_FIELDS)}
        if gold and "sentence" in (self.mode, self.eval_mode):
            fields.add("trees")
        return frozenset(fields)

    def request(self, fields: frozenset[str], who: str,
                options: Mapping[str, Any] | None = None) -> None:
        """Ask for gold fields, built with ``options`` (``span_window``); a field the corpus
        cannot supply, or an option that conflicts with an explicit setting, raises a
        one-line ``ValueError`` naming ``who``."""
        missing = fields - self.gold_fields()
        if missing:
            raise InputError(self._missing_message(frozenset(missing), who))
        if fields & PATH_FIELDS.keys() and self.tree_source != "gold":
            raise InputError(f"{who} reads the gold trees' path lengths, which data.tree_source: "
                             f"{self.tree_source} would not replace; use tree_source: gold")
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
                self._streams.clear()
        requested = self.requested | (fields & GOLD_FIELDS)
        if requested != self.requested:
            self.requested = requested
            self._streams.clear()  # rebuilt with the new gold arrays on next use

    def _missing_message(self, missing: frozenset[str], who: str) -> str:
        """One line: who needs which gold kind (and fields), what the corpus has, what to do."""
        corpus, has = type(self.corpus).__name__, self.corpus.gold
        unknown = sorted(missing - GOLD_FIELDS)
        if unknown:
            return (f"{who} needs {unknown}, which are not gold fields; gold fields are "
                    f"{sorted(GOLD_FIELDS)}")
        has_text = f"has only {' and '.join(sorted(has))} gold" if has else "has no gold syntax"
        paths = sorted(missing & PATH_FIELDS.keys())
        if paths and {FIELD_KINDS[f] for f in paths} <= has:  # the kind is there, the mode not
            return (f"{who} needs {', '.join(paths)}, which training in sentence mode serves, "
                    f"but data.mode is {self.mode}; set data.mode: sentence")
        kinds = sorted({FIELD_KINDS[f] for f in missing if f in FIELD_KINDS})
        if kinds:
            need = f"{' and '.join(kinds)} gold ({', '.join(sorted(missing))})"
            use = _EXAMPLES[kinds[0]] if len(kinds) == 1 else _EXAMPLES["constituency"]
        elif not has:
            need, use = "gold sentences (trees)", _EXAMPLES["constituency"]
        else:
            return (f"{who} needs gold sentences (trees), which only sentence mode serves, but "
                    f"{corpus} is served in stream mode only; set eval_mode: sentence")
        stream_only = "trees" in missing and has  # the corpus has gold, the mode has no rows
        return (f"{who} needs {need} but {corpus} {has_text}; use {use}"
                + ("; trees also need eval_mode: sentence" if stream_only else ""))

    # ------------------------------------------------------------------ actions
    @cached_property
    def action_vocab(self) -> ActionVocab:
        """The actions of the training split's trees (all of it, ``dependency_holdout``'s
        held-out sentences included): ``SHIFT``, ``REDUCE``, ``NT(X)`` by sorted label
        (``NT(DOC)`` among them with ``action_unit: document``)."""
        train = self.corpus_sentences("train")
        trees = [_rooted(s.tree, _where(s, f"train sentence {i + 1}")) for i, s in enumerate(train)
                 if s.tree is not None]
        if not trees:
            raise InputError(f"action mode needs trees, but no training sentence of "
                             f"{type(self.corpus).__name__} has one")
        vocab = ActionVocab.from_trees(trees)
        if self.action_unit == "document":
            return ActionVocab([*vocab.labels, DOC])
        return vocab

    def action_items(self, split: str) -> list[ActionItem]:
        """The split's sentences with a tree (as ``sentences`` gives them), each as its word
        ids, the ids of the actions that build its tree (``action_order``) and the sentence;
        sentences without a tree are left out. With ``subwords``: the word-level sentence's
        pieces (each word with a leading space, ``SubwordVocab.split``), which of them ends
        a word, and one ``SHIFT`` a piece (``piece_actions``). With ``action_unit:
        document`` an item is a document (``synlm.syntax.documents``). A split without any
        tree, a tree the oracle cannot take or a label the training split lacks raises one
        line naming the source."""
        if split not in self._action_items:
            subwords = isinstance(self.vocab, SubwordVocab)
            sentences = self.corpus_sentences(split) if subwords else self.sentences(split)
            with_trees = [(i, s) for i, s in enumerate(sentences) if s.tree is not None]
            if not with_trees:
                raise InputError(
                    f"action mode needs trees, but no {split} sentence of "
                    f"{type(self.corpus).__name__} has one; use a corpus with trees in every "
                    "split, e.g. PTBSepsent, or PTBConcatSyn with treebank: the LDC WSJ folder")
            if self.action_unit == "document":
                rooted = [replace(s, tree=_rooted(s.tree, _where(s, f"{split} sentence {i + 1}")))
                          for i, s in with_trees]
                with_trees = list(enumerate(documents(rooted, split)))
            pieces = self.vocab.split([s.words for _, s in with_trees]) if subwords else None
            items = []
            for k, (i, s) in enumerate(with_trees):
                where = _where(s, f"{split} sentence {i + 1}")
                if pieces is None:
                    tokens, ends = s.words, None
                else:
                    tokens, word_index = pieces[k]
                    ends = np.append(np.diff(word_index) != 0, True)
                items.append(ActionItem(np.asarray(self.vocab.encode(tokens), dtype=np.int64),
                                        self._action_ids(s, where, ends), s, ends))
            self._action_items[split] = items
        return self._action_items[split]

    def _action_ids(self, sentence: Sentence, where: str,
                    word_ends: np.ndarray | None = None) -> np.ndarray:
        """The ids of the oracle's actions for ``sentence``'s tree, one ``SHIFT`` a piece
        where ``word_ends`` (pieces) is given; errors name ``where``."""
        vocab, tree = self.action_vocab, _rooted(sentence.tree, where)
        try:
            actions = oracle(tree, self.action_order)
            if word_ends is not None:
                actions = piece_actions(actions, word_ends.tolist())
            return np.asarray(vocab.encode(actions), dtype=np.int64)
        except ActionError as err:  # a label the vocabulary lacks
            raise InputError(f"{where}: {err}; the training split has no constituent with "
                             "this label") from None
        except InputError as err:
            raise InputError(f"{where}: {err}") from None

    # ------------------------------------------------------------------ streams
    def stream(self, split: str, mode: str | None = None) -> tuple[TokenArrays, np.ndarray]:
        """The split as one stream of units ``[<eos>, w1..wn]`` plus a closing
        ``<eos>``, and the start of each unit (the last entry is the closing ``<eos>``)."""
        mode = mode or self.mode
        if (split, mode) not in self._streams:
            sentences = self.sentences(split)
            lengths = np.array([len(s.words) + 1 for s in sentences], dtype=np.int64)
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            tokens = np.full(bounds[-1] + 1, self.vocab.eos_id, dtype=np.int64)
            words = [w for s in sentences for w in s.words]
            is_word = np.ones(bounds[-1], dtype=bool)
            is_word[bounds[:-1]] = False
            tokens[:-1][is_word] = self.vocab.encode(words)
            arrays: TokenArrays = {"tokens": tokens}
            if isinstance(self.vocab, SubwordVocab):
                arrays["word_ends"] = _word_ends(sentences, is_word)
            # the closing <eos> gets an id of its own
            arrays["sentence_ids"] = np.append(np.repeat(np.arange(len(sentences)), lengths),
                                               len(sentences)).astype(np.int64)
            if self.requested - {"trees", *PATH_FIELDS}:
                arrays.update(self._gold(split, mode))
            self._streams[split, mode] = (arrays, bounds)
        return self._streams[split, mode]

    @cached_property
    def boundary(self) -> float:
        """The sentence-boundary distance: the training split's largest gap + 1 (random
        trees: the longest sentence + 1, above any binary tree's height)."""
        if self.tree_source == "random":
            return float(max(len(s.words) for s in self.sentences("train")) + 1)
        return float(max_distance(self.sentences("train")) + 1)

    def _gold(self, split: str, mode: str) -> TokenArrays:
        """Gold syntax aligned with the stream (``synlm.syntax.targets``), cached on disk.
        A requested field with no gold at all in the training split raises: a head would
        train on an all-false mask. Evaluation splits may lack gold (PTB-Concat-Syn with
        the NLTK sample has trees in its training split only)."""
        stream = mode == "stream"
        sentences = self.sentences(split)
        part = split
        if self.dependency_holdout and split in ("train", HELD_OUT):
            part = f"{split}{self.dependency_holdout:g}"  # the sentences differ by it
        if self.tree_source == "random":
            origin = "train" if split == HELD_OUT else split
            rng = np.random.default_rng([self.seed, self.corpus.splits.index(origin)])
            sentences = [replace(s, tree=baseline_tree(s.words, "random", rng))
                         if s.tree is not None else s for s in sentences]
        targets = cached_targets(
            sentences, self.cache_dir / self.corpus.cache_key(),
            key=f"{self.cache_key}-{part}-{self.tree_source}-{self.seed}", mode=mode,
            span_window=self.span_window or 10, boundary=self.boundary, closing_eos=stream)
        present = {"constituency": targets.distance_mask.any(),
                   "dependency": targets.dep_row_mask.any()}
        empty = sorted(f for f in self.requested & FIELD_KINDS.keys()
                       if not present[FIELD_KINDS[f]])
        if empty and split == self.corpus.splits[0]:
            kinds = " and ".join(sorted({FIELD_KINDS[f] for f in empty}))
            raise InputError(
                f"{type(self.corpus).__name__} declares {kinds} gold but no {split} sentence "
                f"has it ({', '.join(empty)} would be all masked); check its trees or heads")
        # a split without any gold of a kind serves none (its batches carry None, so heads
        # log no loss there rather than a zero)
        gold: TokenArrays = {}
        if "distances" in self.requested and present["constituency"]:
            gold["distances"], gold["distance_mask"] = targets.distances, targets.distance_mask
        if "spans" in self.requested and present["constituency"]:
            gold["spans"], gold["span_mask"] = targets.spans, targets.span_mask
        if "dep_targets" in self.requested and present["dependency"]:
            gold["dep_offsets"], gold["dep_mask"] = targets.dep_targets, targets.dep_mask
            gold["dep_rows"] = targets.dep_row_mask
        if not stream:  # one more row for the closing <eos>, never a target input
            gold = {k: np.concatenate([v, np.zeros_like(v[:1])]) for k, v in gold.items()}
        return gold

    # ------------------------------------------------------------------ loaders
    def _world(self) -> tuple[int, int]:
        if self.trainer is None:
            return 0, 1
        return self.trainer.global_rank, self.trainer.world_size

    def setup(self, stage: str) -> None:
        if self.trainer is not None:
            # the training loader is built per epoch: windows or batches are redrawn from
            # (seed, epoch), and the position a checkpoint saves is one in that epoch
            self.trainer.reload_dataloaders_every_n_epochs = 1

    def _epoch(self) -> int:
        """The trainer's current epoch (0 outside a trainer): what training batches are
        redrawn from."""
        return self.trainer.current_epoch if self.trainer is not None else 0

    def _in_order(self, dataset: Any, batch_size: int,
                  collate: Callable[[list[Any]], Any]) -> torch.utils.data.DataLoader:
        """An evaluation loader: ``dataset`` in order, ``batch_size`` items a batch. Its own
        generator: a loader's iterator draws its seed from one, which must not be torch's
        global RNG (dropout masks)."""
        return torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, collate_fn=collate, num_workers=self.num_workers,
            generator=torch.Generator().manual_seed(self.seed))

    def _stream_loader(self, split: str, n_columns: int, train: bool) -> StreamLoader:
        rank, world = self._world()
        columns = Columns.cut(self.stream(split, "stream")[0], n_columns, rank, world)
        epoch = self._epoch() if train else 0
        if train and self.variable_bptt:
            rng = np.random.default_rng([self.seed, epoch])
            lengths = awd_window_lengths(columns.length, self.bptt, rng)
        else:
            lengths = fixed_window_lengths(columns.length, self.bptt)
        return StreamLoader(columns, lengths, epoch=epoch)

    def _sentence_loader(self, split: str, batch_size: int, train: bool
                         ) -> torch.utils.data.DataLoader | ShuffledLoader | TokenBudgetLoader:
        """Training: batches redrawn every epoch from ``(seed, epoch)``, resumable mid-epoch
        (``ResumableLoader``); evaluation: the split in order."""
        arrays, bounds = self.stream(split, "sentence")
        dataset = UnitDataset(arrays, bounds, self.sentences(split),
                              paths=sorted(self.requested & PATH_FIELDS.keys()))
        lengths = np.diff(bounds)  # tokens per unit
        if not train:
            return self._in_order(dataset, batch_size, collate_units)
        if self.max_length is not None:
            keep = np.flatnonzero(lengths - 1 <= self.max_length)
            dataset, lengths = torch.utils.data.Subset(dataset, keep.tolist()), lengths[keep]
        rank, world = self._world()
        epoch = self._epoch()
        if self.max_tokens is not None:
            return TokenBudgetLoader(dataset, lengths, self.max_tokens, self.seed, epoch,
                                     rank, world)
        return ShuffledLoader(dataset, batch_size, self.seed, epoch, rank, world)

    def _action_loader(self, split: str, batch_size: int, train: bool
                       ) -> torch.utils.data.DataLoader | BucketLoader:
        """Training: sentences of similar action length (``BucketLoader``), redrawn every
        epoch from ``(seed, epoch)``, resumable mid-epoch; evaluation: the split in order."""
        items = self.action_items(split)
        if not train:
            return self._in_order(items, batch_size, collate_actions)
        if self.max_length is not None:
            items = [item for item in items if len(item.words) <= self.max_length]
        lengths = np.array([len(item.actions) for item in items], dtype=np.int64)
        if self.max_tokens is not None and lengths.size and lengths.max() > self.max_tokens:
            item = items[int(lengths.argmax())]
            where = _where(item.sentence, f"a {split} sentence")
            raise InputError(f"{where}: {len(item.actions)} actions, more than data.max_tokens="
                             f"{self.max_tokens}; raise max_tokens or set data.max_length")
        rank, world = self._world()
        epoch = self._epoch()
        return BucketLoader(items, lengths, batch_size, self.max_tokens, self.seed, epoch,
                            rank, world, collate_actions)

    def _loader(self, split: str, batch_size: int, train: bool = False):
        mode = self.mode if train else self.eval_mode
        if mode == "stream":
            return self._stream_loader(split, batch_size, train)
        if mode == "actions":
            return self._action_loader(split, batch_size, train)
        return self._sentence_loader(split, batch_size, train)

    def train_dataloader(self):
        return self._loader("train", self.batch_size, train=True)

    def val_dataloader(self):
        """The validation split, or with ``dependency_holdout`` the held-out training
        sentences."""
        return self._loader(HELD_OUT if self.dependency_holdout else "valid",
                            self.eval_batch_size)

    def test_dataloader(self):
        return self._loader("test", self.test_batch_size)

    def predict_dataloader(self):
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


def _check_action_mode(corpus: Corpus, order: str, tree_source: str) -> None:
    """Action mode needs a corpus with trees, words and their gold labels; anything else
    raises one line naming the setting."""
    name = type(corpus).__name__
    if "constituency" not in corpus.gold:
        raise InputError(f"data.mode: actions needs constituency trees, but {name} has none; "
                         f"use {_EXAMPLES['constituency']}")
    if order not in ORDERS:
        raise errors.SettingError("action_order", order, f"one of {', '.join(ORDERS)}")
    if tree_source != "gold":
        raise InputError(f"data.tree_source: {tree_source} replaces trees by unlabelled ones "
                         "for distance and span targets; action mode needs the gold trees")


def _where(sentence: Sentence, otherwise: str) -> str:
    """Where ``sentence`` comes from, for an error: its ``source`` (``file:line``), else
    ``otherwise`` (its place in its split)."""
    return sentence.source or otherwise


def _rooted(tree: Tree, where: str) -> Tree:
    """``tree`` as the oracle takes it: an unlabelled root bracket over one constituent is
    dropped (the PTB's ``( (S ...) )``); any other unlabelled bracket raises one line."""
    while tree.label() == "" and len(tree) == 1 and isinstance(tree[0], Tree):
        tree = tree[0]
    if any(t.label() == "" for t in tree.subtrees()):
        raise InputError(f"{where}: a bracket without a label; expected a label on every "
                         "constituent (an unlabelled root only over one constituent)")
    return tree


def _cached_vocab(path: Path, build: Callable[[], Vocab]) -> Vocab:
    """The vocabulary cached at ``path``, else ``build()``'s, saved there."""
    if path.exists():
        return Vocab.load(path)
    vocab = build()
    vocab.save(path)
    return vocab


def _word_ends(sentences: list[Sentence], is_word: np.ndarray) -> np.ndarray:
    """(N + 1,) bool over a subword stream's inputs: whether the target there (the next
    token) ends a word: the last subword of a word, or an ``<eos>``. The closing ``<eos>``
    has no target."""
    n_words = [s.word_index[-1] + 1 if s.word_index else 0 for s in sentences]
    first_word = np.cumsum([0, *n_words[:-1]])  # of each sentence, numbered across the split
    word_of = np.concatenate([np.asarray(s.word_index, dtype=np.int64) + first
                              for s, first in zip(sentences, first_word)])  # per subword
    token_ends = np.ones(len(is_word) + 1, dtype=bool)  # <eos> positions end a "word"
    token_ends[:-1][is_word] = np.append(word_of[1:] != word_of[:-1], True)
    return np.append(token_ends[1:], False)
