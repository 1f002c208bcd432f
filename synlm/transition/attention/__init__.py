"""The attention policies of the action Transformer (``synlm.transition.action_transformer``),
one file each behind one protocol (``base.AttentionPolicy``):

- ``CausalPolicy`` (PLM, ``causal.py``): every earlier token;
- ``PLMMaskPolicy`` (PLM-mask, ``plm_mask.py``): two heads restricted to either side of the
  innermost open constituent;
- ``TGPolicy`` (Transformer Grammars, ``tg.py``): STACK and COMPOSE attention, relative
  depth, and for documents chunks read with Transformer-XL memory (``memory.py``).

They are a kind of the one registry (``synlm.catalog``'s ``attention_policies``, which
``synlm ls`` lists): a config names one as any component, by class name or ``class_path``
with its ``init_args`` (``class_path: TGPolicy``), which jsonargparse resolves among the
imported policies; or by a policy's short ``name`` (``causal``, ``plm_mask``, ``tg``), the
policy with its defaults (``build_policy``).
"""

from __future__ import annotations

from synlm.errors import SettingError
from synlm.transition.attention.base import AttentionPolicy
from synlm.transition.attention.causal import CausalPolicy
from synlm.transition.attention.plm_mask import PLMMaskPolicy
from synlm.transition.attention.tg import TGPolicy

__all__ = ["AttentionPolicy", "CausalPolicy", "PLMMaskPolicy", "TGPolicy", "build_policy",
           "named_policies"]


def named_policies(base: type[AttentionPolicy] = AttentionPolicy
                   ) -> dict[str, type[AttentionPolicy]]:
    """The imported policies deriving from ``base`` that set a short ``name``, by it."""
    found = {}
    for cls in base.__subclasses__():
        found.update(named_policies(cls))
        if vars(cls).get("name"):
            found[cls.name] = cls
    return found


def build_policy(attention: AttentionPolicy | str) -> AttentionPolicy:
    """The policy ``attention`` gives: a policy as it is, or a policy's short ``name`` as
    that policy with its defaults; anything else a one-line ``SettingError``."""
    if isinstance(attention, AttentionPolicy):
        return attention
    named = named_policies()
    if isinstance(attention, str) and attention in named:
        return named[attention]()
    raise SettingError("attention", attention,
                       f"{' | '.join(sorted(named))}, or an AttentionPolicy by class name or "
                       "class_path (synlm ls lists the attention_policies)")
