"""A released GPST checkpoint's generative part as ``synlm.transition.gpst.GPST``'s state
dict: StructuredLM_RTDT's ``FastGenerativeR2D2`` names (GPT-2's ``Conv1D`` weights, stored
input-major, transposed into ``nn.Linear``'s). The inside-outside parts (the parser, the
outside encoder, the composition's split scorers) are left out."""

from __future__ import annotations

from torch import Tensor

#: released prefix -> GPST prefix, for the modules copied as they are.
RENAMED = {
    "embeddings.": "embedding.", "bos_embedding": "bos", "up_scale.": "up.",
    "down_scale.": "down.", "dense.": "word_head.", "action_mlp.": "action_head.",
    "action_layers.wpe.": "positions.", "generation_layers.ln_f.": "final_norm.",
}
#: a GPT-2 block's names -> an ``ActionLayer``'s, and whether the weight is transposed.
BLOCK = {
    "ln_1.": ("attn_norm.", False), "ln_2.": ("ffn_norm.", False),
    "attn.c_attn.": ("attn.qkv.", True), "attn.c_proj.": ("attn.proj.", True),
    "mlp.c_fc.": ("ffn.0.", True), "mlp.c_proj.": ("ffn.2.", True),
}
#: the composition layer's names.
COMPOSE = {"self_attn.": "attention.", "linear1.": "ffn_in.", "linear2.": "ffn_out.",
           "position_embedding.": "roles."}
ENCODER = "r2d2.inside_enc.layers."


def _block(stack: str, rest: str, value: Tensor) -> tuple[str, Tensor]:
    layer, name = rest.split(".", 1)
    for old, (new, transposed) in BLOCK.items():
        if name.startswith(old):
            weight = transposed and name.endswith("weight")
            return (f"{stack}.{layer}.{new}{name[len(old):]}", value.T if weight else value)
    raise KeyError(f"{stack}.h.{rest}: not a GPT-2 block parameter")


def released_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``GPST``'s state dict from a released ``FastGenerativeR2D2`` state dict."""
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        for stack in ("action_layers", "generation_layers"):
            if key.startswith(f"{stack}.h."):
                name, tensor = _block(stack, key[len(stack) + 3:], value)
                out[name] = tensor
        if key.startswith(ENCODER):
            layer, name = key[len(ENCODER):].split(".", 1)
            for old, new in COMPOSE.items():
                if name.startswith(old):
                    out[f"compose.layers.{layer}.{new}{name[len(old):]}"] = value
        for old, new in RENAMED.items():
            if key.startswith(old):
                out[new + key[len(old):]] = value
    return out


#: released prefix -> ``StructuredGPST`` prefix for the inside-outside part and the parser.
STRUCTURED = {
    "r2d2.parser.encoder.tok_embeddings.": "parser.embedding.",
    "r2d2.parser.encoder.norm.": "parser.norm.",
    "r2d2.parser.score_mlp.": "parser.score.",
    "r2d2.inside_enc.left_linear.": "inside_outside.left_score.",
    "r2d2.inside_enc.right_linear.": "inside_outside.right_score.",
    "r2d2.outside_enc.parent_linear.": "inside_outside.parent_out.",
    "r2d2.outside_enc.left_linear.": "inside_outside.left_out.",
    "r2d2.outside_enc.right_linear.": "inside_outside.right_out.",
    "r2d2.outside_root_embedding": "inside_outside.root",
    "insideoutside_dense.": "outside_head.",
}
PARSER = "r2d2.parser.encoder.layers."
OUTSIDE = "r2d2.outside_enc.layers."


def released_structured_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``StructuredGPST``'s state dict (``synlm.transition.gpst_structured``) from a
    released ``FastGenerativeR2D2`` state dict: its generative part, parser, split
    scorers, outside encoder and outside head."""
    out = {f"generative.{k}": v for k, v in released_state_dict(state).items()}
    for key, value in state.items():
        for old, new in STRUCTURED.items():
            if key.startswith(old):
                out[new + key[len(old):]] = value
        if key.startswith(PARSER):
            name = key[len(PARSER):].replace("attention.w", "w").replace("feed_forward.", "")
            out[f"parser.layers.{name}"] = value
        if key.startswith(OUTSIDE):
            layer, name = key[len(OUTSIDE):].split(".", 1)
            for old, new in COMPOSE.items():
                if name.startswith(old):
                    out[f"inside_outside.outside_layers.{layer}.{new}{name[len(old):]}"] = value
    return out
