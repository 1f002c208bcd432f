"""The tokenizer of an exported model: a ``tokenizers`` pipeline that reads running text the
way ``synlm.tse.scoring.ModelScorer`` does (``synlm.data.normalization.text_normalizer`` of
the checkpoint's normalisation, then the checkpoint's vocabulary), as far as ``tokenizers``'
normalizers and regex pre-tokenizers can say it.

The Penn Treebank's word splitting (nltk's ``TreebankWordTokenizer``, which
``treebank_words`` runs) is a sequence of regex substitutions; most of them are splits, which
``pre_tokenizers.Split`` expresses:

- double quotes become ``````/``''`` (an opening one at the start or after a space or an
  opening bracket), in the normalizer;
- the sentence-final period, and only that one, is split off (``Mr.`` keeps its period);
- ``; @ # $ % & ? !``, brackets, ``...``, ``--``, ``````/``''`` and a ``:`` or ``,`` not
  followed by a digit are tokens of their own (``3,000`` and ``10:30`` stay whole);
- clitics: ``n't``, ``'s``, ``'m``, ``'d``, ``'ll``, ``'re``, ``'ve`` and a closing ``'`` split
  off their word (``is n't``, ``ca n't``, ``John 's``), and ``cannot``, ``gonna``, ``gotta``,
  ``wanna``, ``gimme``, ``lemme``, ``d'ye``, ``more'n``, ``'tis`` and ``'twas`` into two.

Mikolov's PTB (``ptb``) then lowercases (normalizer ``Lowercase``), writes each number
(digits with ``.,:-`` and ``\\/``) and ``%`` as ``N`` (normalizer ``Replace``; a number is
recognised in the text, between spaces, brackets, quotes and sentence punctuation, where
nltk tests a whole Treebank token) and deletes punctuation (``MIKOLOV_DELETED``: a
``Split`` that removes those whole tokens). docs/interop.md lists where the two differ.
"""

from __future__ import annotations

import re
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, processors
from tokenizers import pre_tokenizers as pre

from synlm.data.normalization import MIKOLOV_DELETED, NORMALIZATIONS
from synlm.data.subwords import SentencePieceVocab, SubwordVocab
from synlm.data.vocab import MASK, Vocab
from synlm.errors import InputError

#: The padding token an export adds after the model's vocabulary (id V): padded positions
#: are masked, and no word of the vocabulary may stand for padding (``<eos>`` starts every
#: sentence, so minicons would drop it as padding).
PAD = "<pad>"

#: An opening double quote (Treebank ``STARTING_QUOTES``): ``"`` at the start, ``"`` or ``''``
#: after a space or an opening bracket.
_OPENING_QUOTE = r'^"|(?<=[ (\[{<])(?:"|\'\')'
#: The sentence-final period: after a character that is not a period, followed by closing
#: brackets and quotes only.
_FINAL_PERIOD = r'(?<=[^.])\.(?=[\]\)}>"\']*\s*\z)'
#: Punctuation that is a token of its own wherever it stands.
_PUNCTUATION = r"\.\.\.|--|``|''|[;@#$%&?!\[\](){}<>]|[:,](?!\d)"
#: Treebank's closing single quote, then its ``ENDING_QUOTES`` in their order (``'s``, ``'m``,
#: ``'d``; ``'ll``, ``'re``, ``'ve``, ``n't``), each split off the end of a word.
_ENDINGS = (r"(?<=[^'])'$", r"(?<=[^' ])'[sSmMdD]$",
            r"(?<=[^' ])(?:'ll|'LL|'re|'RE|'ve|'VE|n't|N'T)$")
#: Treebank ``CONTRACTIONS2`` then ``CONTRACTIONS3``: both words split off.
_CONTRACTIONS = (
    r"(?i)\b(?:can(?=not\b)|d(?='ye\b)|gim(?=me\b)|gon(?=na\b)|got(?=ta\b)|lem(?=me\b)"
    r"|more(?='n\b)|wan(?=na$))|(?<=\bcan)not\b|(?<=\bd)'ye\b|(?<=\bgim|\blem)me\b"
    r"|(?<=\bgon)na\b|(?<=\bgot)ta\b|(?<=\bmore)'n\b|(?<=\bwan)na$",
    r"(?i)^'t(?=(?:is|was)\b)|(?<=^'t)(?:is|was)\b")
#: A number of Mikolov's PTB (``normalize_word``) that is a whole Treebank token of running
#: text: between the start or end, spaces and the punctuation split off around it.
_SPLIT_OFF = r"[\s;@#$%&?!()\[\]{}<>]|``|''|\.\.\.|--"
_NUMBER = (rf"(?<=^|{_SPLIT_OFF})[0-9][0-9.,:\-]*(?:\\/[0-9.,:\-]*)*"
           rf"(?=\z|{_SPLIT_OFF}|(?:'[sSmMdD]?|'ll|'LL|'re|'RE|'ve|'VE|n't|N'T)(?:\s|\z))")


def _deleted() -> str:
    """A regex matching a whole token that Mikolov's PTB deletes."""
    return "^(?:" + "|".join(sorted(map(re.escape, MIKOLOV_DELETED), key=len, reverse=True)) + ")$"


def text_pipeline(normalization: str) -> tuple[normalizers.Normalizer, pre.PreTokenizer]:
    """The normalizer and pre-tokenizer that read running text as ``text_normalizer
    (normalization)`` does, word by word (module docstring)."""
    if normalization not in NORMALIZATIONS:
        raise InputError(f"unknown word normalization {normalization!r}; valid names: "
                         f"{', '.join(sorted(NORMALIZATIONS))}")
    steps = [normalizers.Replace(Regex(_OPENING_QUOTE), "``"), normalizers.Replace('"', "''")]
    splits = [pre.Split(Regex(_FINAL_PERIOD), "isolated"), pre.WhitespaceSplit(),
              *(pre.Split(Regex(pattern), "isolated")
                for pattern in (_PUNCTUATION, *_ENDINGS, *_CONTRACTIONS))]
    if normalization == "ptb":
        steps = [normalizers.Lowercase(), *steps, normalizers.Replace(Regex(_NUMBER), "N"),
                 normalizers.Replace("%", " N ")]
        splits.append(pre.Split(Regex(_deleted()), "removed"))
    return normalizers.Sequence(steps), pre.Sequence(splits)


def build_tokenizer(vocab: Vocab, normalization: str, max_length: int | None = None) -> Any:
    """The export's ``transformers`` fast tokenizer: running text normalised and split as
    ``text_pipeline(normalization)`` says, then a word-level model over ``vocab`` (an
    unknown word is ``<unk>``) or, for a subword vocabulary, its own byte-level BPE applied
    to each word with a leading space (``SubwordVocab.split``); ``<eos>`` (the vocabulary's)
    is the bos and eos token and starts every encoded text, ``PAD`` is added after the
    vocabulary; a masked LM's ``<mask>`` (``synlm.data.masking``) is its mask token.
    ``max_length``: the model's longest sequence, if it has one."""
    from transformers import PreTrainedTokenizerFast

    if PAD in vocab.stoi:
        raise InputError(f"the vocabulary holds {PAD}, which the export adds for padding")
    normalizer, pre_tokenizer = text_pipeline(normalization)
    if isinstance(vocab, SubwordVocab):
        tokenizer = _subwords(vocab, normalizer, pre_tokenizer)
    else:
        tokenizer = Tokenizer(models.WordLevel(vocab=dict(vocab.stoi), unk_token=vocab.unk))
        tokenizer.normalizer, tokenizer.pre_tokenizer = normalizer, pre_tokenizer
    mask = MASK if MASK in vocab.stoi else None
    special = [t for t in (vocab.eos, vocab.unk, mask) if t is not None]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t in (*special, PAD)])
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{vocab.eos} $A", pair=f"{vocab.eos} $A $B",
        special_tokens=[(vocab.eos, vocab.eos_id)])
    options = {} if max_length is None else {"model_max_length": max_length}
    if mask is not None:
        options["mask_token"] = mask
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=vocab.eos, eos_token=vocab.eos,
        unk_token=vocab.unk, pad_token=PAD, padding_side="right",
        model_input_names=["input_ids", "attention_mask"], clean_up_tokenization_spaces=False,
        **options)


def _subwords(vocab: SubwordVocab, normalizer: normalizers.Normalizer,
              pre_tokenizer: pre.PreTokenizer) -> Tokenizer:
    """The vocabulary's byte-level BPE behind ``normalizer`` and ``pre_tokenizer``: each word
    they give gets its leading space from the byte-level step, as ``SubwordVocab.split``
    gives it."""
    if isinstance(vocab, SentencePieceVocab):
        raise InputError("the checkpoint's subwords are a SentencePiece model; the export "
                         "reproduces byte-level BPE (data.subwords: TrainedBPE, GPT-2's "
                         "PretrainedTokenizer) only")
    tokenizer = Tokenizer.from_str(vocab.tokenizer.to_str())
    own = tokenizer.pre_tokenizer
    if not isinstance(own, pre.ByteLevel):
        raise InputError(f"the checkpoint's subword tokenizer splits words with "
                         f"{type(own).__name__}; the export reproduces byte-level BPE "
                         "(data.subwords: TrainedBPE, GPT-2's PretrainedTokenizer) only")
    tokenizer.pre_tokenizer = pre.Sequence([pre_tokenizer, pre.ByteLevel(
        add_prefix_space=True, trim_offsets=own.trim_offsets, use_regex=own.use_regex)])
    if tokenizer.normalizer is not None:
        normalizer = normalizers.Sequence([normalizer, tokenizer.normalizer])
    tokenizer.normalizer = normalizer
    return tokenizer
