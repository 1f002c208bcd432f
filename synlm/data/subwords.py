"""Subword vocabularies: a byte-level BPE or unigram model trained on the training split with
the ``tokenizers`` library, or a pretrained tokenizer (GPT-2's) by hub name or local
directory.

Words keep their corpus tokenisation; each word is encoded on its own with a leading space
(as it appears inside a line), so a word has one encoding wherever it stands and every
subword knows its word. ``SynLMDataModule(subwords=...)`` turns each sentence into its
subwords and projects the gold syntax onto them (``synlm.syntax.subwords``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from synlm.data.vocab import EOS, Vocab, atomic_write_text
from synlm.errors import InputError

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


def load_vocab(saved: list[str] | dict[str, str | list[str]]) -> Vocab:
    """The vocabulary a checkpoint stored (``Vocab.to_saved``): a word list, a word list with
    its unknown-word policy, or a subword vocabulary's tokenizer."""
    if isinstance(saved, dict) and "tokenizer" in saved:
        return SubwordVocab(Tokenizer.from_str(saved["tokenizer"]), saved["eos"])
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


class TrainedUnigram(_Trained):
    """A unigram language model of pieces (Kudo 2018, SentencePiece's default, as
    Transformer Grammars tokenise) over bytes, trained on the training split
    (``_Trained``): each word is segmented into its most probable pieces, every byte a
    piece of its own, so no word is unknown.

    Args:
        vocab_size: at most this many tokens (the 256 bytes and ``<eos>`` included).
    """

    kind = "unigram"

    def __init__(self, vocab_size: int = 10000) -> None:
        super().__init__(vocab_size)

    def _model_and_trainer(self) -> tuple[models.Model, trainers.Trainer]:
        return models.Unigram(), trainers.UnigramTrainer(
            vocab_size=self.vocab_size, special_tokens=[EOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)


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
