"""Tiny constructor arguments for every backbone: the parametrised tests run them all.

A new backbone must add a case here; ``test_every_backbone_has_a_case`` fails otherwise.
"""

from __future__ import annotations

from synlm.backbones.base import Backbone

EMB = 16

CASES: dict[str, dict] = {
    "AWDLSTM": dict(input_size=EMB, hidden_size=24, num_layers=3, dropout_input=0.2,
                    dropout_hidden=0.2, dropout_output=0.2, weight_drop=0.3),
    "ONLSTM": dict(input_size=EMB, hidden_size=24, num_layers=3, chunk_size=4),
    "PRPN": dict(input_size=EMB, hidden_size=24, num_layers=2, n_slots=5, n_lookback=3),
}


def all_backbones() -> dict[str, type[Backbone]]:
    """Every backbone synlm defines (importing ``synlm.cli`` registers them all)."""
    from synlm.registry import backbone_classes

    return {c.__name__: c for c in backbone_classes()}


def build(name: str) -> Backbone:
    return all_backbones()[name](**CASES[name])
