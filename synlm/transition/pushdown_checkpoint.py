"""The released Pushdown-Layers checkpoint (``model.pt``, a ``PushdownLM`` state dict, alone
or under ``state_dict``; ``vocab.pkl``, a pickled ``vocabulary.WordVocabulary``) read into
``synlm.transition.pushdown.PushdownTransformer``: its sizes from the tensors' shapes, its words in
id order. The vocabulary is unpickled by a restricted unpickler that admits the one class
it needs, rebuilt as a plain record of its state."""

from __future__ import annotations

import pickle
import re
from typing import Any

import torch
from torch import Tensor

from synlm.errors import InputError
from synlm.transition.pushdown import PushdownTransformer

#: Released parameter names (after ``trafo.encoder.layers.<i>.`` or ``attachment_head.``)
#: -> synlm's.
LAYER_NAMES = {"self_attn.multi_head_merge": "merge", "self_attn.data_to_q": "query",
               "self_attn.data_to_kv": "key_value", "self_attn.pos_to_pq": "position",
               "self_attn.depth_embed": "depth", "linear1": "ff_in", "linear2": "ff_out",
               "norm1": "norm_attention", "norm2": "norm_ff"}
HEAD_NAMES = {"data_to_q_prime": "query", "data_to_k_prime": "key",
              "pos_to_pq_stack": "position", "q_next_word_mlp": "query_mlp",
              "k_next_word_mlp": "self_mlp", "depth_embed": "depth",
              "key_and_stack_info_composer": "compose"}
#: What the released model holds but never reads: position tables and index buffers (made
#: again from the sizes), and the attention parts its attachment head inherits unused.
UNUSED = re.compile(r"(^|\.)(int_seq|pos_encoding)$|^attachment_head\.(global_pos_bias|"
                    r"multi_head_merge\.weight|data_to_q\.weight)$")


class _Vocabulary:
    """``vocabulary.WordVocabulary`` as unpickled: its attributes, nothing else."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("vocabulary", "WordVocabulary"):
            return _Vocabulary
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a vocabulary")


def read_vocabulary(path: str) -> list[str]:
    """The words of a released ``vocab.pkl`` in id order (``<pad>`` first, ``<eos>`` among
    them)."""
    try:
        with open(path, "rb") as handle:
            vocab = _Unpickler(handle).load()
    except (OSError, pickle.UnpicklingError, EOFError) as error:
        raise InputError(f"{path}: expected a pickled WordVocabulary ({error})") from None
    words = getattr(vocab, "inv_words", None)
    if not isinstance(words, dict) or sorted(words) != list(range(len(words))):
        raise InputError(f"{path}: expected a WordVocabulary with inv_words 0..n-1")
    return [str(words[i]) for i in range(len(words))]


def _renamed(name: str) -> str | None:
    if UNUSED.search(name):
        return None
    if name == "input_embedding.weight":
        return "embedding.weight"
    if name == "output_map.bias":
        return "output_bias"
    found = re.fullmatch(r"trafo\.encoder\.layers\.(\d+)\.(.+)\.(weight|bias)", name)
    if found and found[2] in LAYER_NAMES:
        return f"layers.{found[1]}.{LAYER_NAMES[found[2]]}.{found[3]}"
    found = re.fullmatch(r"attachment_head\.([a-z_]+)(\.\d+)?\.(weight|bias)", name)
    if found and found[1] in HEAD_NAMES:
        return f"head.{HEAD_NAMES[found[1]]}{found[2] or ''}.{found[3]}"
    raise InputError(f"model.pt: {name} is not a parameter of a released PushdownLM with "
                     "a depth tape and composed attachment keys")


def read_model(path: str) -> tuple[PushdownTransformer, dict[str, Any]]:
    """The released ``model.pt`` as a ``PushdownTransformer`` (in evaluation mode) and its
    constructor's arguments."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, pickle.UnpicklingError) as error:
        raise InputError(f"{path}: expected a released model.pt ({error})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or "input_embedding.weight" not in state:
        raise InputError(f"{path}: expected a PushdownLM state dict (input_embedding.weight)")
    ours: dict[str, Tensor] = {}
    for name, value in state.items():
        new = _renamed(name)
        if new is not None:
            ours[new] = value
    embedding = ours["embedding.weight"]
    size = embedding.size(1)
    layers = len({n.split(".")[1] for n in ours if n.startswith("layers.")})
    config = {"vocab_size": embedding.size(0) - 2, "size": size, "num_layers": layers,
              "attention_heads": size // ours["layers.0.depth.weight"].size(1),
              "ff_multiplier": ours["layers.0.ff_in.weight"].size(0) // size,
              "head_depth_divisor": size // ours["head.depth.weight"].size(1),
              "max_depth": ours["head.depth.weight"].size(0), "dropout": 0.1,
              "embedding_dropout": 0.1}
    model = PushdownTransformer(**config).to(embedding.dtype)  # as saved: float32, or float64
    model.load_state_dict(ours)
    return model.eval(), config
