"""Subword vocabularies: a byte-level BPE trained on the training split with the
``tokenizers`` library, a unigram model of pieces trained on it with the ``sentencepiece``
library, or a pretrained tokenizer (GPT-2's) by hub name or local directory.

Words keep their corpus tokenisation; each word is encoded on its own with a leading space
(as it appears inside a line), so a word has one encoding wherever it stands and every
subword knows its word. ``SynLMDataModule(subwords=...)`` turns each sentence into its
subwords and projects the gold syntax onto them (``synlm.syntax.subwords``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from synlm.data.vocab import EOS, Vocab, atomic_write_bytes, atomic_write_text
from synlm.errors import InputError, reading

#: Byte-level BPE's base alphabet.
BYTES = 256


class SubwordVocab(Vocab):
    """The vocabulary of a ``tokenizers.Tokenizer`` (ids as the tokenizer's), with the
    tokenizer itself for splitting words and decoding ids to text."""

    def __init__(self, tokenizer: Tokenizer, eos: str) -> None:
        ids = tokenizer.get_vocab(with_added_tokens=True)
        itos = sorted(ids, key=ids.__getitem__)
        if [ids[t] for t in itos] != list(range(len(itos))):
            raise InputError("the tokenizer's ids are not contiguous from 0")
        super().__init__(itos, eos=eos, unk=None)
        self.tokenizer = tokenizer

    def split(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[str], list[int]]]:
        """Each sentence's subword tokens and, for each, the (0-based) index of its word."""
        encodings = self.tokenizer.encode_batch([[" " + w for w in words] for words in sentences],
                                                is_pretokenized=True, add_special_tokens=False)
        return [(e.tokens, e.word_ids) for e in encodings]

    def word_ends(self, ids: Sequence[int]) -> list[bool]:
        """Whether each token of a sentence encoded as ``split`` encodes it ends its word:
        the next token begins a word (it carries the tokenizer's mark of a leading space,
        GPT-2's ``Ġ``, SentencePiece's ``▁``), or it is the last."""
        mark = self.space_mark
        starts = [self.itos[i].startswith(mark) for i in ids]
        return [*starts[1:], True] if ids else []

    @property
    def space_mark(self) -> str:
        """The character a word's first token starts with: how the tokenizer writes the
        leading space ``split`` gives every word."""
        ((tokens, _),) = self.split([["a"]])
        return tokens[0][0]

    def text(self, ids: Sequence[int]) -> str:
        """``ids`` decoded to text (bytes joined, spaces restored)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False).strip()

    @property
    def key(self) -> str:
        """Identifies this vocabulary in cache keys (a digest of the tokenizer)."""
        return "subwords-" + hashlib.sha256(self.tokenizer.to_str().encode()).hexdigest()[:16]

    def to_saved(self) -> dict[str, str]:
        """What a checkpoint stores to rebuild it (``load_vocab``): the tokenizer."""
        return {"tokenizer": self.tokenizer.to_str(), "eos": self.eos}


#: SentencePiece's mark of a space (U+2581), written before a word's first piece, or after
#: its last with ``treat_whitespace_as_suffix`` (rnng-pytorch's models).
SPACE = "\u2581"


class SentencePieceVocab(SubwordVocab):
    """The pieces of a SentencePiece model (Kudo & Richardson 2018), ids as the model's,
    read and applied with the ``sentencepiece`` library itself. A word is encoded on its own
    (as ``SubwordVocab``; SentencePiece splits a line at its spaces before segmenting, so
    the pieces are those of the whole line) and its pieces carry the model's ``▁`` before
    the first (the default) or after the last (``treat_whitespace_as_suffix``, as
    rnng-pytorch trains them). A piece the model lacks is its ``<unk>`` (a model trained
    with ``byte_fallback`` has none: it spells such characters in bytes).

    Args:
        model_proto: the serialised model (the bytes of a ``.model`` file).
        eos: the end-of-sentence token, one of the model's pieces.
    """

    def __init__(self, model_proto: bytes, eos: str) -> None:
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
        itos = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        Vocab.__init__(self, itos, eos=eos, unk=None)
        self.unknown_ids = frozenset({processor.unk_id()} - {-1})
        self.processor, self.model_proto = processor, model_proto
        #: Whether ``▁`` follows a word's last piece (``treat_whitespace_as_suffix``).
        self.suffix = processor.encode("a", out_type=str)[-1].endswith(SPACE)

    def split(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[str], list[int]]]:
        out = []
        for words in sentences:
            pieces = self.processor.encode(list(words), out_type=int) if words else []
            out.append(([self.itos[i] for ids in pieces for i in ids],
                        [w for w, ids in enumerate(pieces) for _ in ids]))
        return out

    def word_ends(self, ids: Sequence[int]) -> list[bool]:
        """Whether each piece ends its word: it ends with ``▁`` (``suffix``), or the next
        piece starts with it, or it is the last."""
        if self.suffix:
            return [self.itos[i].endswith(SPACE) for i in ids]
        starts = [self.itos[i].startswith(SPACE) for i in ids]
        return [*starts[1:], True] if ids else []

    @property
    def space_mark(self) -> str:
        return SPACE

    def text(self, ids: Sequence[int]) -> str:
        return self.processor.decode(list(ids)).strip()

    @property
    def key(self) -> str:
        return "sentencepiece-" + hashlib.sha256(self.model_proto).hexdigest()[:16]

    def to_saved(self) -> dict[str, str]:
        """The serialised model (base64) and the end-of-sentence token."""
        return {"sentencepiece": base64.b64encode(self.model_proto).decode("ascii"),
                "eos": self.eos}


def load_vocab(saved: list[str] | dict[str, str | list[str]]) -> Vocab:
    """The vocabulary a checkpoint stored (``Vocab.to_saved``): a word list, a word list with
    its unknown-word policy, a subword vocabulary's tokenizer or SentencePiece model."""
    if isinstance(saved, dict) and "tokenizer" in saved:
        return SubwordVocab(Tokenizer.from_str(saved["tokenizer"]), saved["eos"])
    if isinstance(saved, dict) and "sentencepiece" in saved:
        return SentencePieceVocab(base64.b64decode(saved["sentencepiece"]), saved["eos"])
    return Vocab.from_saved(saved)


class Subwords:
    """How a corpus's words become subwords (``SynLMDataModule(subwords=...)``)."""

    def vocab(self, train: Sequence[Sequence[str]], cache_dir: Path) -> SubwordVocab:
        """The subword vocabulary, given the training split's words and the cache folder."""
        raise NotImplementedError  # pragma: no cover


class _Trained(Subwords):
    """A byte-level tokenizer trained on the training split with the ``tokenizers`` library,
    ``<eos>`` its only special token (id 0), every byte in its vocabulary (no word is
    unknown). Cached under the cache folder, keyed by its kind, settings and a digest of the
    training words: a changed corpus trains a new one."""

    #: The cache file's prefix.
    kind = ""

    def __init__(self, vocab_size: int, min_frequency: int = 2) -> None:
        if vocab_size <= BYTES + 1:
            raise InputError(f"{type(self).__name__}(vocab_size={vocab_size}) leaves no room "
                             f"for merges: the {BYTES} bytes and <eos> come first; use more "
                             f"than {BYTES + 1}")
        self.vocab_size = vocab_size
        self.min_frequency = min_frequency

    def _model_and_trainer(self) -> tuple[models.Model, trainers.Trainer]:
        raise NotImplementedError  # pragma: no cover

    def vocab(self, train: Sequence[Sequence[str]], cache_dir: Path) -> SubwordVocab:
        digest = hashlib.sha256(json.dumps([self.vocab_size, self.min_frequency]).encode())
        for words in train:
            digest.update(" ".join(words).encode() + b"\n")
        path = cache_dir / f"{self.kind}-{self.vocab_size}-{digest.hexdigest()[:16]}.json"
        if path.exists():
            return SubwordVocab(Tokenizer.from_file(str(path)), EOS)
        model, trainer = self._model_and_trainer()
        tokenizer = Tokenizer(model)
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.train_from_iterator((" " + " ".join(words) for words in train), trainer)
        atomic_write_text(path, tokenizer.to_str())
        return SubwordVocab(tokenizer, EOS)


class TrainedBPE(_Trained):
    """A byte-level BPE (Radford et al. 2019 §2.2; Sennrich et al. 2016) trained on the
    training split (``_Trained``).

    Args:
        vocab_size: at most this many tokens (256 bytes + merges + ``<eos>``); a small corpus
            may stop short of it.
        min_frequency: a merge needs a pair seen at least this often.
    """

    kind = "bpe"

    def __init__(self, vocab_size: int = 10000, min_frequency: int = 2) -> None:
        super().__init__(vocab_size, min_frequency)

    def _model_and_trainer(self) -> tuple[models.Model, trainers.Trainer]:
        return models.BPE(), trainers.BpeTrainer(
            vocab_size=self.vocab_size, min_frequency=self.min_frequency, special_tokens=[EOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)


class TrainedUnigram(Subwords):
    """A unigram language model of pieces (Kudo 2018, SentencePiece's default, as
    Transformer Grammars tokenise) trained on the training split with the ``sentencepiece``
    library (``SentencePieceVocab``): each word is segmented into its most probable pieces,
    ``▁`` before the first; ``<eos>`` is id 0 and ``byte_fallback`` spells a character the
    model lacks in bytes (the 256 byte pieces are in the vocabulary), so no word is unknown.
    Every character of the training words is kept (``character_coverage=1``). Cached as
    ``unigram-<size>-<digest>.model`` under the cache folder, the digest taken over the
    settings and the training words: a changed corpus trains a new one.

    Args:
        vocab_size: at most this many pieces (the 256 bytes, ``<eos>``, ``<unk>`` and every
            character of the training words included); a small corpus may stop short of it.
    """

    kind = "unigram"

    def __init__(self, vocab_size: int = 10000) -> None:
        if vocab_size <= BYTES + 2:
            raise InputError(f"TrainedUnigram(vocab_size={vocab_size}) leaves no room for "
                             f"pieces: the {BYTES} bytes, <eos> and <unk> come first; use "
                             f"more than {BYTES + 2}")
        self.vocab_size = vocab_size

    def vocab(self, train: Sequence[Sequence[str]], cache_dir: Path) -> SentencePieceVocab:
        import sentencepiece

        digest = hashlib.sha256(json.dumps(["sentencepiece", self.vocab_size]).encode())
        for words in train:
            digest.update(" ".join(words).encode() + b"\n")
        path = cache_dir / f"{self.kind}-{self.vocab_size}-{digest.hexdigest()[:16]}.model"
        if not path.exists():
            model = io.BytesIO()
            try:
                sentencepiece.SentencePieceTrainer.train(
                    sentence_iterator=(" ".join(words) for words in train), model_writer=model,
                    model_type="unigram", vocab_size=self.vocab_size, hard_vocab_limit=False,
                    character_coverage=1.0, byte_fallback=True, eos_id=0, eos_piece=EOS,
                    unk_id=1, bos_id=-1, pad_id=-1, num_threads=1, minloglevel=2)
            except RuntimeError as err:  # too few pieces for the characters, an empty split
                reason = str(err).strip().splitlines()[0].split("] ")[-1]
                raise InputError(f"TrainedUnigram(vocab_size={self.vocab_size}) cannot be "
                                 f"trained on the training words: {reason}") from None
            atomic_write_bytes(path, model.getvalue())
        return SentencePieceVocab(path.read_bytes(), EOS)


class SentencePieceModel(Subwords):
    """A trained SentencePiece model (a ``.model`` file: ``spm_train``'s, the one
    Transformer Grammars' release tokenises with, or rnng-pytorch's, which ``synlm convert``
    writes into the run folder), read with the ``sentencepiece`` library
    (``SentencePieceVocab``).

    Args:
        path: the ``.model`` file.
        eos: the end-of-sentence token, one of the model's pieces; None: its ``</s>``
            (``eos_id``).
    """

    def __init__(self, path: str, eos: str | None = None) -> None:
        self.path = path
        self.eos = eos

    def vocab(self, train: Sequence[Sequence[str]], cache_dir: Path) -> SentencePieceVocab:
        import sentencepiece

        with reading(self.path):
            proto = Path(self.path).read_bytes()
        try:
            processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        except RuntimeError as err:
            raise InputError(f"{self.path}: not a SentencePiece model ({err})") from None
        eos = self.eos if self.eos is not None else (
            processor.id_to_piece(processor.eos_id()) if processor.eos_id() >= 0 else None)
        if eos is None or processor.piece_to_id(eos) == processor.unk_id():
            raise InputError(f"{self.path}: the model has no piece {eos or '</s>'} to end a "
                             "sentence with; set data.subwords.init_args.eos to one of its "
                             "pieces")
        return SentencePieceVocab(proto, eos)


class PretrainedTokenizer(Subwords):
    """A pretrained tokenizer loaded by ``transformers.AutoTokenizer``: a hub name (``gpt2``,
    downloaded and cached by Hugging Face) or a local directory (``save_pretrained``).

    Args:
        name_or_path: hub name or directory.
        eos: the end-of-sentence token; None: the tokenizer's own (GPT-2's
            ``<|endoftext|>``).
        revision: a hub revision (branch, tag or commit) to pin.
    """

    def __init__(self, name_or_path: str = "gpt2", eos: str | None = None,
                 revision: str | None = None) -> None:
        self.name_or_path = name_or_path
        self.eos = eos
        self.revision = revision

    def vocab(self, train: Sequence[Sequence[str]], cache_dir: Path) -> SubwordVocab:
        from transformers import AutoTokenizer

        try:
            loaded = AutoTokenizer.from_pretrained(self.name_or_path, revision=self.revision)
        except OSError as err:  # no such folder, not a hub name, offline
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise InputError(f"data.subwords: cannot load the tokenizer {self.name_or_path} "
                             f"({reason})") from err
        eos = self.eos or loaded.eos_token
        if eos is None:
            raise InputError(f"tokenizer {self.name_or_path} names no eos token; set "
                             "data.subwords.init_args.eos")
        return SubwordVocab(loaded.backend_tokenizer, eos)
