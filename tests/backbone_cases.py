"""Tiny constructions of every backbone: the parametrised tests run them all.

A case is a backbone class name and a factory (a stack with a layer insert is a case of its
own). A new backbone must add a case here; ``test_every_backbone_has_a_case`` fails
otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from synlm.backbones import (
    AWDLSTM,
    GPT2,
    ONLSTM,
    PRPN,
    UDGN,
    SpanAttention,
    StructFormer,
    Transformer,
)
from synlm.backbones.base import Backbone
from synlm.outputs import BackboneOutput

EMB = 16
_AWD = dict(input_size=EMB, hidden_size=24, num_layers=3, dropout_input=0.2,
            dropout_hidden=0.2, dropout_output=0.2, weight_drop=0.3)
_ONLSTM = dict(input_size=EMB, hidden_size=24, num_layers=3, chunk_size=4)


def _span(**options: object) -> SpanAttention:
    return SpanAttention(after=1, window=5, rrnn_size=4, parser_size=6, **options)


CASES: dict[str, Callable[[], Backbone]] = {
    "AWDLSTM": lambda: AWDLSTM(**_AWD),
    "ONLSTM": lambda: ONLSTM(**_ONLSTM),
    "PRPN": lambda: PRPN(input_size=EMB, hidden_size=24, num_layers=2, n_slots=5,
                         n_lookback=3),
    "PaLM": lambda: AWDLSTM(**_AWD, inserts=[_span()]),
    "PaLM-RB": lambda: AWDLSTM(**_AWD, inserts=[_span(scores="right_branching")]),
    "PaLM-paper": lambda: AWDLSTM(**_AWD, inserts=[_span(activation="tanh",
                                                         mix_input="hidden_and_context")]),
    "ONLSTM+SpanAttention": lambda: ONLSTM(**_ONLSTM, inserts=[_span()]),
    "Transformer": lambda: Transformer(input_size=EMB, num_layers=3, num_heads=2, ffn_size=32),
    "GPT2": lambda: GPT2(n_embd=EMB, n_head=2, n_layer=3, n_positions=64),
    "Transformer-pre-norm": lambda: Transformer(input_size=EMB, num_layers=2, num_heads=4,
                                                ffn_size=32, pre_norm=True, attention_layer=0),
    "Transformer-bidirectional": lambda: Transformer(
        input_size=EMB, num_layers=2, num_heads=2, ffn_size=32, pre_norm=True, causal=False,
        activation="leaky_relu", positions="learned", dropout_input=0.0, dropout_output=0.1),
    "UDGN": lambda: UDGN(emb_size=EMB // 2, head_size=4, num_layers=2, num_heads=2,
                         parser_layers=2),
    "StructFormer": lambda: StructFormer(hidden_size=EMB, num_layers=2, num_heads=2,
                                         parser_layers=2, conv_size=3, relative_bias=True),
}


#: The cases that predict the next token (the others attend both ways: masked LMs).
CAUSAL = sorted(name for name, make in CASES.items() if not make().spec.bidirectional)


def run(backbone: Backbone, x: Tensor, lengths: Tensor | None = None, state: object = None
        ) -> BackboneOutput:
    """``backbone`` over ``x`` (B, T, E): a bidirectional one also reads ``lengths`` (B,)
    (default: every row is T long), as ``SyntaxModel`` passes it."""
    if not backbone.spec.bidirectional:
        return backbone(x, state)
    if lengths is None:
        lengths = torch.full((x.size(0),), x.size(1), dtype=torch.long)
    return backbone(x, state, lengths=lengths)


def all_backbones() -> dict[str, type[Backbone]]:
    """Every backbone synlm defines (importing ``synlm.cli`` registers them all)."""
    from synlm.registry import backbone_classes

    return {c.__name__: c for c in backbone_classes()}


def build(name: str) -> Backbone:
    return CASES[name]()
