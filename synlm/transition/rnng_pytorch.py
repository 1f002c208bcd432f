"""Checkpoints of the released RNNG code (aistairc/rnng-pytorch, Noji & Oseki 2021) as synlm
models: a ``train.py`` checkpoint of ``FixedStackRNNG`` (top-down) or
``FixedStackInOrderRNNG`` (in-order), over words or SentencePiece pieces, becomes a
``TransitionLM`` holding an ``RNNG`` or ``InOrderRNNG`` with the same weights
(``synlm convert``; docs/models/rnng.md, "rnng-pytorch checkpoints").

A ``train.py`` checkpoint is a ``torch.save`` of a dict: ``model_state_dict`` (the
parameters), ``args`` (the training flags, a dict), ``vocab`` (a pickled
``data.Vocabulary``), ``action_dict`` (a pickled ``action_dict.TopDownActionDict`` or
``InOrderActionDict``), ``prepro_args``, optimiser and scheduler states. It is read with
``torch.load(weights_only=True)``: torch's restricted unpickler, which rebuilds tensors and
plain containers and refuses every other global, with the released classes (``PICKLED``)
allowed as stand-ins that only record their state (``Recorded``). A subword checkpoint's
vocabulary (``data.SentencePieceVocabulary``) holds a pickled
``sentencepiece.SentencePieceProcessor``, whose state is the serialised SentencePiece model:
the ``sentencepiece`` library reads those bytes (``SentencePieceVocab``). No code of the released
package is needed or run; a pickle naming anything else (``os.system``) is refused.
torch's restricted unpickler rather than a ``pickle.Unpickler`` of synlm's own: it already
reads the zip archive and rebuilds tensors and storages, and its list of allowed globals
follows torch's formats; a hand-written ``find_class`` would have to allow torch's rebuild
functions itself.

Ids. The released vocabulary numbers words from a ``<pad>`` at 0 (then ``<unk>``, then the
words); synlm's keeps every id and reads ``<pad>`` as its ``<eos>``, a word the RNNG never
generates: its word-decoder bias is set to ``PAD_LOGIT``, so that the converted model's word
softmax leaves it out, as the released beam search does (``word_logit[:, pad] = -inf``; its
training loss keeps ``<pad>`` in the softmax, where training drives its probability towards
zero). A subword checkpoint keeps the SentencePiece model's ids and pieces (``<pad>`` id 0,
``<unk>``, ``<s>``, ``</s>``, then the pieces), its ``<pad>`` the end-of-sentence token.
A word-level vocabulary built with the Berkeley unknown-word rules
(``--unkmethod berkeleyrule``: ``<unk>``, ``<cunks>``, ...; ``--unkmethod berkeleyrule2``:
``UNK``, ``UNK-INITC``, ``UNK-LC-ed``, ...) keeps its classes and encodes an unknown word as
its class (``synlm.data.unknown_words.RNNG_PYTORCH_RULES``), as the released
``Vocabulary.get_id`` does. Actions are matched by name (``SHIFT``, ``REDUCE``, ``NT(X)``,
``FINISH``): synlm's ``ActionVocab`` sorts the labels and has no ``<pad>`` action (the
released beam search masks it), and the in-order model puts ``FINISH`` last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from synlm.data.subwords import SentencePieceVocab
from synlm.data.unknown_words import RNNG_PYTORCH_RULES
from synlm.data.vocab import EOS, UNK, Vocab
from synlm.errors import InputError
from synlm.syntax.actions import ActionVocab, nt_label
from synlm.transition.parser_state import FIRST_NT

#: The word decoder's bias at ``<pad>`` (synlm's ``<eos>``): exp of it is 0 in float32.
PAD_LOGIT = -1e30


class Recorded:
    """A stand-in for a pickled class of the released code: it records the state it is
    given (``__dict__``) and the arguments it is called with, and does nothing else."""

    released_name = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.state = state


def _stand_in(released_name: str) -> type[Recorded]:
    name = released_name.rsplit(".", 1)[1]
    return type(name, (Recorded,), {"released_name": released_name})


#: The classes a released checkpoint pickles, each allowed as a ``Recorded`` stand-in.
PICKLED: dict[str, type[Recorded]] = {name: _stand_in(name) for name in (
    "data.Vocabulary", "data.SentencePieceVocabulary", "action_dict.TopDownActionDict",
    "action_dict.InOrderActionDict", "argparse.Namespace",
    "sentencepiece.SentencePieceProcessor")}

#: The classes a pickled ``SentencePieceProcessor`` names as its return type (its
#: ``_return_type``, ``int`` or ``str``): named, never called.
RETURN_TYPES = [(int, "builtins.int"), (str, "builtins.str")]

#: Released parameter name → (synlm's ``RNNG`` / ``InOrderRNNG`` name, how rows map).
#: Rows: ``words``: same ids (``<pad>`` is synlm's ``<eos>``); ``actions``: by action name
#: (synlm's order, without ``<pad>``); ``labels``: by nonterminal label (synlm's sorted
#: order; the in-order table's one unread row dropped); ``first``: row 0; ``-``: as it is.
#: ``{layer}`` stands for each stack-LSTM layer.
PARAMETERS: dict[str, tuple[str, str]] = {
    "emb.0.weight": ("embedding.weight", "words"),
    "vocab_mlp.weight": ("word_decoder.weight", "words"),  # tied to emb.0.weight
    "vocab_mlp.bias": ("word_decoder.bias", "words"),
    "action_mlp.weight": ("action_decoder.weight", "actions"),
    "action_mlp.bias": ("action_decoder.bias", "actions"),
    "rnng.nt_emb.0.weight": ("nt_embedding.weight", "labels"),
    "rnng.initial_emb.0.weight": ("initial_item", "first"),
    "rnng.output.1.weight": ("output.weight", "-"),
    "rnng.output.1.bias": ("output.bias", "-"),
    "rnng.composition.output.1.weight": ("composition.output.weight", "-"),
    "rnng.composition.output.1.bias": ("composition.output.bias", "-"),
    **{f"rnng.composition.rnn.{p}_l0": (f"composition.forward_lstm.{p}_l0", "-")
       for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")},
    **{f"rnng.composition.rnn.{p}_l0_reverse": (f"composition.backward_lstm.{p}_l0", "-")
       for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")},
    **{f"rnng.stack_rnn.lstm.{{layer}}.{p}": (f"stack_lstm.cells.{{layer}}.{p}", "-")
       for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")},
}

#: ``args.strategy`` → synlm's model class and action order.
STRATEGIES = {"top_down": ("synlm.transition.rnng.RNNG", "top_down"),
              "in_order": ("synlm.transition.in_order_rnng.InOrderRNNG", "in_order")}
#: The bound on consecutive NTs each released model searches with (``FixedStackRNNG``'s
#: default; ``beam_search.py`` sets 3 for in-order models).
MAX_CONSECUTIVE = {"top_down": 8, "in_order": 3}


#: The training flags read from ``args``: each one's default and what it must be.
ARGS: dict[str, tuple[Any, str]] = {
    "strategy": ("top_down", "a string"), "composition": ("lstm", "a string"),
    "w_dim": (256, "a whole number >= 1"), "h_dim": (256, "a whole number >= 1"),
    "num_layers": (2, "a whole number >= 1"), "dropout": (0.3, "a number in [0, 1)"),
    "seed": (3435, "a whole number"), "sp_model": ("", "a string or null")}


class ConversionError(InputError):
    """A released checkpoint that cannot be converted, as one line naming its key."""


def _fits(value: Any, kind: str) -> bool:
    """Whether ``value`` is what ``ARGS`` says (``kind``); true or false is no number."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return {"a string": isinstance(value, str),
            "a string or null": value is None or isinstance(value, str),
            "a whole number": number and isinstance(value, int),
            "a whole number >= 1": number and isinstance(value, int) and value >= 1,
            "a number in [0, 1)": number and 0 <= value < 1}[kind]


def _args(args: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The flags of ``ARGS`` from the checkpoint's ``args``, defaults for missing ones;
    one of another kind is a one-line ``ConversionError`` naming it."""
    read = {}
    for name, (default, kind) in ARGS.items():
        read[name] = args.get(name, default)
        if not _fits(read[name], kind):
            raise ConversionError(f"{path}: args.{name} is {read[name]!r}; expected {kind}")
    return read


def _strings(value: Any, where: str, path: str | Path) -> list[str]:
    """``value``, a list of distinct strings (a vocabulary's ``i2w``, an ``i2a``)."""
    if not isinstance(value, list | tuple):
        raise ConversionError(f"{path}: {where} is a {type(value).__name__}; expected a list "
                              "of strings")
    odd = [v for v in value if not isinstance(v, str)]
    if odd:
        raise ConversionError(f"{path}: {where} holds {odd[0]!r}; expected strings only")
    if len(set(value)) != len(value):
        twice = next(v for k, v in enumerate(value) if v in value[:k])
        raise ConversionError(f"{path}: {where} holds {twice!r} twice")
    return list(value)


@dataclass
class Converted:
    """A released checkpoint as synlm's parts: the model's config (``{"class_path",
    "init_args"}`` without its sizes), its weights under synlm's names (the released
    dtype), the vocabularies (a ``SentencePieceVocab`` for a subword checkpoint), the action
    order and the training seed."""

    model_config: dict[str, Any]
    state_dict: dict[str, Tensor]
    vocab: Vocab
    action_vocab: ActionVocab
    action_order: str
    seed: int


def read_released(path: str | Path) -> dict[str, Any]:
    """The dict a released ``train.py`` saved, its pickled objects as ``Recorded`` stand-ins;
    a pickle naming any other global is a one-line ``ConversionError``."""
    import pickle
    import zipfile

    if not zipfile.is_zipfile(path):
        raise ConversionError(f"{path}: not a torch.save archive (a train.py checkpoint is "
                              "one); is it cut short, or another kind of file?")
    try:
        with torch.serialization.safe_globals([*((cls, name) for name, cls in PICKLED.items()),
                                               *RETURN_TYPES]):
            saved = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)", str(err))
        if found is None:
            raise ConversionError(f"{path}: its pickle cannot be read by torch's restricted "
                                  "unpickler; is it cut short?") from None
        raise ConversionError(f"{path}: pickles {found.group(1)}, not one of the released "
                              f"checkpoint's classes ({', '.join(PICKLED)}); refused") from None
    except (RuntimeError, OSError, EOFError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConversionError(f"{path}: cannot be read by torch.load ({reason})") from None
    if not isinstance(saved, dict):
        raise ConversionError(f"{path}: holds a {type(saved).__name__}, not a train.py "
                              "checkpoint's dict")
    return saved


def _key(saved: dict[str, Any], key: str, path: str | Path) -> Any:
    if key not in saved:
        raise ConversionError(f"{path}: no key {key!r}; a train.py checkpoint has "
                              "model_state_dict, args, vocab and action_dict")
    return saved[key]


def convert(path: str | Path) -> Converted:
    """The released checkpoint at ``path`` as synlm's parts (module docstring); one of
    another shape is a one-line ``ConversionError`` naming the key."""
    saved = read_released(path)
    args = _key(saved, "args", path)
    args = vars(args) if isinstance(args, Recorded) else args
    if not isinstance(args, dict):
        raise ConversionError(f"{path}: args is a {type(args).__name__}; train.py saves a "
                              "dict of its flags")
    flags = _args(args, path)
    vocab, action_dict = _key(saved, "vocab", path), _key(saved, "action_dict", path)
    subword = bool(flags["sp_model"]) or type(vocab).__name__ == "SentencePieceVocabulary"
    strategy = flags["strategy"]
    if strategy not in STRATEGIES:
        raise ConversionError(f"{path}: args.strategy is {strategy!r}; expected top_down or "
                              "in_order")
    if flags["composition"] != "lstm":
        raise ConversionError(f"{path}: args.composition is {flags['composition']!r}; synlm's "
                              "RNNG composes with the LSTM (composition: lstm)")
    prepro = saved.get("prepro_args") or {}
    if not isinstance(prepro, dict):
        raise ConversionError(f"{path}: prepro_args is a {type(prepro).__name__}; "
                              "preprocess.py saves a dict of its flags")
    for step in ("lowercase", "replace_num"):
        if prepro.get(step) and not subword:  # preprocess.py skips both for pieces
            raise ConversionError(f"{path}: prepro_args.{step} is set; converting a "
                                  "checkpoint trained on lowercased or number-replaced words "
                                  "is not supported yet")
    words = _pieces(vocab, path) if subword else _vocab(vocab, path)
    expected_actions = (["<pad>", "SHIFT", "REDUCE"] + (["FINISH"] if strategy == "in_order"
                                                        else []))
    i2a = _strings(getattr(action_dict, "i2a", []), "action_dict.i2a", path)
    if i2a[:len(expected_actions)] != expected_actions or \
            type(action_dict).__name__ != {"top_down": "TopDownActionDict",
                                           "in_order": "InOrderActionDict"}[strategy]:
        raise ConversionError(f"{path}: action_dict is a {type(action_dict).__name__} with "
                              f"actions {i2a[:5]}...; args.strategy={strategy} expects "
                              f"{expected_actions} first")
    labels = [nt_label(a) for a in i2a[len(expected_actions):]]
    if None in labels:
        raise ConversionError(f"{path}: action_dict.i2a has "
                              f"{i2a[len(expected_actions) + labels.index(None)]!r} among its "
                              "NT(X) actions")
    action_vocab = ActionVocab(labels)
    index = {a: i for i, a in enumerate(i2a)}
    class_path, order = STRATEGIES[strategy]
    sizes = {"input_size": flags["w_dim"], "hidden_size": flags["h_dim"],
             "num_layers": flags["num_layers"]}
    model_config = {"class_path": class_path, "init_args": {
        **sizes, "dropout": float(flags["dropout"]),
        "max_consecutive": MAX_CONSECUTIVE[strategy]}}
    names = list(action_vocab.itos) + (["FINISH"] if strategy == "in_order" else [])
    rows = {"words": torch.arange(len(words)),
            "actions": torch.tensor([index[a] for a in names]),
            "labels": torch.tensor([index[a] - len(expected_actions)
                                    for a in action_vocab.itos[FIRST_NT:]]),
            "first": torch.tensor(0)}
    released_rows = {"words": len(words), "actions": len(i2a),
                     "labels": len(i2a) - 3, "first": 1}
    state = _mapped(_key(saved, "model_state_dict", path), sizes["num_layers"], rows,
                    released_rows, path)
    state["word_decoder.bias"] = state["word_decoder.bias"].clone()
    state["word_decoder.bias"][0] = PAD_LOGIT
    if isinstance(words, SentencePieceVocab):
        synlm_vocab: Vocab = words
    else:
        unkmethod = getattr(vocab, "unkmethod", "unk")
        synlm_vocab = Vocab([EOS, *words[1:]], unk=UNK if UNK in words else None,
                            unknown_words=unkmethod if unkmethod in RNNG_PYTORCH_RULES else "unk")
    return Converted(model_config, state, synlm_vocab, action_vocab, order, flags["seed"])


def _vocab(vocab: Any, path: str | Path) -> list[str]:
    """The released vocabulary's words by id (``<pad>`` first), checked."""
    if type(vocab).__name__ != "Vocabulary" or not hasattr(vocab, "i2w"):
        raise ConversionError(f"{path}: vocab is a {type(vocab).__name__}, not a pickled "
                              "data.Vocabulary")
    unkmethod = getattr(vocab, "unkmethod", "unk")
    if not isinstance(unkmethod, str) or unkmethod not in ("unk", *RNNG_PYTORCH_RULES):
        raise ConversionError(f"{path}: vocab.unkmethod is {unkmethod!r}; expected 'unk', "
                              "'berkeleyrule' or 'berkeleyrule2'")
    words = _strings(vocab.i2w, "vocab.i2w", path)
    if getattr(vocab, "padding_idx", 0) != 0 or EOS in words or \
            (unkmethod == "unk" and UNK not in words):
        raise ConversionError(f"{path}: vocab.i2w has <pad> at {getattr(vocab, 'padding_idx', 0)}"
                              f", {UNK} {'in' if UNK in words else 'missing'}; expected <pad> "
                              f"at 0, a {UNK} and no {EOS}")
    return words


def _pieces(vocab: Any, path: str | Path) -> SentencePieceVocab:
    """A subword checkpoint's vocabulary: the SentencePiece model its pickled
    ``data.SentencePieceVocabulary`` holds (``vocab.sp``), ``<pad>`` (id 0) its
    end-of-sentence token."""
    if type(vocab).__name__ != "SentencePieceVocabulary":
        raise ConversionError(f"{path}: args.sp_model is set but vocab is a "
                              f"{type(vocab).__name__}; a subword checkpoint pickles a "
                              "data.SentencePieceVocabulary")
    processor = getattr(vocab, "sp", None)
    proto = getattr(processor, "model_proto", getattr(processor, "state", None))
    if type(processor).__name__ != "SentencePieceProcessor" or not isinstance(proto, bytes):
        raise ConversionError(f"{path}: vocab.sp is a {type(processor).__name__} without a "
                              "serialised model; expected a pickled "
                              "sentencepiece.SentencePieceProcessor")
    if getattr(vocab, "padding_idx", 0) != 0:
        raise ConversionError(f"{path}: vocab.padding_idx is {vocab.padding_idx}; expected 0 "
                              "(preprocess.py trains SentencePiece with pad_id=0)")
    import sentencepiece

    try:
        pad = sentencepiece.SentencePieceProcessor(model_proto=proto).id_to_piece(0)
    except (RuntimeError, IndexError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConversionError(f"{path}: vocab.sp holds no SentencePiece model the "
                              f"sentencepiece library reads ({reason})") from None
    return SentencePieceVocab(proto, pad)


def _mapped(released: dict[str, Tensor], num_layers: int, rows: dict[str, Tensor],
            released_rows: dict[str, int], path: str | Path) -> dict[str, Tensor]:
    """The released ``model_state_dict`` under synlm's names (``PARAMETERS``), rows mapped."""
    if not isinstance(released, dict):
        raise ConversionError(f"{path}: model_state_dict is a {type(released).__name__}")
    table = {}
    for theirs, (ours, how) in PARAMETERS.items():
        layers = range(num_layers) if "{layer}" in theirs else [None]
        for layer in layers:
            table[theirs.format(layer=layer)] = (ours.format(layer=layer), how)
    for name, value in released.items():
        if not isinstance(name, str):
            raise ConversionError(f"{path}: model_state_dict has the key {name!r}; expected "
                                  "parameter names")
        if not (isinstance(value, Tensor) and value.is_floating_point()):
            kind = value.dtype if isinstance(value, Tensor) else type(value).__name__
            raise ConversionError(f"{path}: model_state_dict[{name!r}] is a {kind}; expected "
                                  "a floating-point tensor")
    unexpected = sorted(set(released) - set(table))
    missing = sorted(set(table) - set(released))
    if unexpected or missing:
        which = f"unexpected parameter {unexpected[0]}" if unexpected else \
            f"missing parameter {missing[0]}"
        raise ConversionError(f"{path}: model_state_dict has {which}; expected the "
                              "parameters of FixedStackRNNG / FixedStackInOrderRNNG with "
                              f"args.num_layers={num_layers} (composition: lstm)")
    state = {}
    for theirs, (ours, how) in table.items():
        tensor = released[theirs]
        if how != "-" and (tensor.dim() < 1 or tensor.size(0) != released_rows[how]):
            raise ConversionError(f"{path}: model_state_dict[{theirs!r}] has shape "
                                  f"{tuple(tensor.shape)}; expected {released_rows[how]} rows "
                                  f"(its {how})")
        state[ours] = tensor if how == "-" else tensor[rows[how]]
    return state


def check_shapes(state: dict[str, Tensor], model: torch.nn.Module,
                 path: str | Path) -> None:
    """A one-line ``ConversionError`` naming the released key of the first weight whose
    shape is not the one ``model`` (built from the checkpoint's args) has."""
    released = {ours: theirs for theirs, (ours, _) in PARAMETERS.items()}
    for name, param in model.state_dict().items():
        if state[name].shape != param.shape:
            theirs = released.get(re.sub(r"cells\.\d+\.", "cells.{layer}.", name), name)
            raise ConversionError(f"{path}: {theirs} has shape {tuple(state[name].shape)} "
                                  f"under synlm's {name}; the checkpoint's args give "
                                  f"{tuple(param.shape)}")
