"""A ``SyntaxLM`` checkpoint as a Hugging Face folder (``synlm export-hf``, docs/interop.md):
``AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)`` and
``AutoTokenizer.from_pretrained(DIR)`` load it, and the model's next-token log-probabilities
are ``SyntaxLM.target_log_probs``'. A masked LM (a bidirectional backbone, trained with
``data.objective: masked``) is exported as one: ``AutoModelForMaskedLM`` loads it
(``SynlmForMaskedLM``, whose log-probabilities are ``SyntaxModel.masked_log_probs``') and
its tokenizer has ``<mask>`` as its mask token.

The folder holds ``config.json`` (``model_type: synlm``, ``auto_map`` to the remote code, the
``SyntaxModel``'s hyperparameters), ``model.safetensors``, the remote code
(``configuration_synlm.py``, ``modeling_synlm.py``: the model is rebuilt by the installed
``synlm`` package, so loading it needs ``pip install synlm``) and a fast tokenizer
(``synlm.hf_export.tokenizer``): a word-level one over the checkpoint's vocabulary, or the
checkpoint's own byte-level BPE; either starts every text with ``<eos>``; and
``.synlm-output``, the files synlm wrote (``synlm.runtime.files``: ``--force`` replaces
only such a folder).

A structure model (``TransitionLM``: RNNG, PLM, PLM-mask, TG, CAG; ``PushdownLM``) has no
Hugging Face form: its word probabilities come from a search over its trees, not from one
next-token distribution; its export is refused in one line (``synlm evaluate-syntax`` and
``synlm lm-eval`` score it under its declared surprisal convention).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from synlm import __version__
from synlm.errors import InputError
from synlm.runtime.files import check_replaceable, staged_folder

#: The classes ``config.json`` points the Auto classes to, in the folder's remote code: a
#: causal LM's, or a masked LM's (``masked``).
AUTO_MAP = {"AutoConfig": "configuration_synlm.SynlmConfig",
            "AutoModelForCausalLM": "modeling_synlm.SynlmForCausalLM"}
MASKED_AUTO_MAP = {"AutoConfig": "configuration_synlm.SynlmConfig",
                   "AutoModelForMaskedLM": "modeling_synlm.SynlmForMaskedLM"}
#: The remote-code files copied into every export, from this package.
REMOTE_CODE = ("configuration_synlm.py", "modeling_synlm.py")
#: ``GPT2Config`` settings that ``GPT2(pretrained=None)`` leaves at their defaults: a
#: pretrained GPT-2 is rebuilt from its sizes only if its own are these too.
GPT2_DEFAULTS = ("n_inner", "activation_function", "layer_norm_epsilon", "scale_attn_weights",
                 "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")


def standalone_backbone(model: Any) -> dict[str, Any]:
    """The backbone's config that rebuilds it without a download: a GPT-2 loaded from
    ``pretrained`` (a hub name or a folder) is given its sizes instead, its weights being
    in the export; any other config as it is. A pretrained GPT-2 whose other settings
    (``GPT2_DEFAULTS``) are not ``transformers``' defaults cannot be rebuilt so."""
    from synlm.backbones import GPT2

    config = model.hparams.backbone
    backbone = model.backbone
    if not isinstance(backbone, GPT2) or config["init_args"].get("pretrained") is None:
        return config
    from transformers import GPT2Config

    own, default = backbone.model.config, GPT2Config()
    differ = [k for k in GPT2_DEFAULTS if getattr(own, k) != getattr(default, k)]
    if differ:
        raise InputError(f"the GPT2 backbone loaded from {config['init_args']['pretrained']} "
                         f"sets {', '.join(differ)} differently from GPT2(pretrained=None), "
                         "which the export rebuilds; it cannot be exported")
    sizes = {k: getattr(own, k) for k in ("n_layer", "n_head", "n_embd", "n_positions")}
    return {**config, "init_args": {**config["init_args"], **sizes, "pretrained": None,
                                    "revision": None}}


def max_length(model: Any) -> int | None:
    """The longest sequence the model reads (GPT-2's ``n_positions``, a Transformer's learned
    positions); None: no limit."""
    from synlm.backbones import GPT2, Transformer

    backbone = model.backbone
    if isinstance(backbone, GPT2):
        return backbone.model.config.n_positions
    if isinstance(backbone, Transformer) and backbone.positions is not None:
        return backbone.positions.num_embeddings
    return None


def is_masked(model: Any) -> bool:
    """Whether ``model`` (a ``SyntaxLM``) is a masked LM: its backbone attends both ways."""
    return model.backbone.spec.bidirectional


def hf_config(model: Any) -> Any:
    """The ``SynlmConfig`` of ``model`` (a ``SyntaxLM``): its ``SyntaxModel``'s arguments,
    normalisation, ``<eos>`` as bos and eos, and the Auto classes' map (the tokenizer's
    ``<pad>`` lies outside the model's vocabulary, so the config names no pad id)."""
    from synlm.hf_export.configuration_synlm import SynlmConfig

    hp = model.hparams
    eos = model.vocab.eos_id
    extra = {} if (longest := max_length(model)) is None else \
        {"max_position_embeddings": longest}
    masked = is_masked(model)
    return SynlmConfig(
        backbone=standalone_backbone(model), heads=list(hp.heads), vocab_size=hp.vocab_size,
        embedding_dropout=hp.embedding_dropout, decoder_bias=hp.decoder_bias,
        init_range=hp.init_range, init_std=hp.init_std, normalization=model.normalization,
        tie_word_embeddings=hp.tie_weights, bos_token_id=eos, eos_token_id=eos,
        auto_map=dict(MASKED_AUTO_MAP if masked else AUTO_MAP),
        architectures=["SynlmForMaskedLM" if masked else "SynlmForCausalLM"],
        synlm_version=__version__, **extra)


def export_hf(model: Any, out: str | Path, force: bool = False) -> Path:
    """Write ``model`` (a ``SyntaxLM`` with its vocabulary, as ``synlm.loading.load_model``
    returns it) into the folder ``out`` (module docstring), written whole into a temporary
    folder beside it and then moved there; ``force`` replaces an earlier export in
    ``out`` that holds only what synlm wrote (``check_replaceable``). Returns ``out``."""
    from synlm.hf_export.modeling_synlm import SynlmForCausalLM, SynlmForMaskedLM
    from synlm.hf_export.tokenizer import build_tokenizer
    from synlm.model import SyntaxModel

    out = Path(out)
    check_replaceable(out, force)
    inner = getattr(model, "model", None)
    if not isinstance(inner, SyntaxModel):
        name = type(model).__name__ + (f" ({type(inner).__name__})" if inner is not None else "")
        raise InputError(f"--ckpt_path: a {name} checkpoint has no Hugging Face form: its word "
                         "probabilities come from a search over its trees; score it with synlm "
                         "evaluate-syntax or synlm lm-eval")
    if model.vocab is None:
        raise InputError("the model has no vocabulary: export a checkpoint of a run")
    if getattr(model.vocab, "unknown_words", "unk") == "classes":
        print("synlm export-hf: warning: the exported tokenizer reads an unknown word as "
              "<unk>, not as its unknown-word class (docs/interop.md)", file=sys.stderr)
    tokenizer = build_tokenizer(model.vocab, model.normalization, max_length(model))
    config = hf_config(model)
    with torch.device("meta"):  # a shell: the checkpoint's own modules go in it
        hf_model = (SynlmForMaskedLM if is_masked(model) else SynlmForCausalLM)(config)
    hf_model.model = model.model
    with staged_folder(out, "synlm export-hf") as staging:
        hf_model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for name in REMOTE_CODE:
            shutil.copyfile(Path(__file__).with_name(name), staging / name)
    return out
