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
    import synlm.backbones  # noqa: F401  (registers every backbone)

    found, stack = {}, list(Backbone.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("synlm."):
            found[cls.__name__] = cls
    return found


def build(name: str) -> Backbone:
    return all_backbones()[name](**CASES[name])
