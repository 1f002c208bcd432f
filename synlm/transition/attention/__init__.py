"""The attention policies of the action Transformer (``synlm.transition.action_transformer``),
one file each behind one protocol (``base.AttentionPolicy``):

- ``causal`` (PLM, ``causal.py``): every earlier token;
- ``plm_mask`` (PLM-mask, ``plm_mask.py``): two heads restricted to either side of the
  innermost open constituent;
- ``tg`` (Transformer Grammars, ``tg.py``): STACK and COMPOSE attention, relative depth.

``attention:`` names one of them (``POLICIES``), or gives a policy of one's own as a
``{"class_path", "init_args"}`` config, a dotted class path or, in Python, an instance.
This module imports no torch, so the names are known without it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from synlm.errors import SettingError

if TYPE_CHECKING:
    from synlm.transition.attention.base import AttentionPolicy

#: The policies by the name ``attention:`` gives, as class paths.
POLICIES: dict[str, str] = {
    "causal": "synlm.transition.attention.causal.CausalPolicy",
    "plm_mask": "synlm.transition.attention.plm_mask.PLMMaskPolicy",
    "tg": "synlm.transition.attention.tg.TGPolicy",
}
ATTENTIONS: tuple[str, ...] = tuple(POLICIES)
#: What a config's ``attention:`` holds: a name, or a policy's ``{"class_path", "init_args"}``.
Attention = Literal[ATTENTIONS] | Mapping[str, Any]  # type: ignore[valid-type]


def _class(path: str) -> object:
    """What the dotted ``path`` names; a one-line ``SettingError`` if nothing."""
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise SettingError("attention", path, "the class_path of an AttentionPolicy: there "
                                              "is no such class") from None


def build_policy(attention: Any, settings: Mapping[str, tuple[Any, Any]] | None = None
                 ) -> AttentionPolicy:
    """The policy ``attention`` gives: a name of ``POLICIES``, built with those of the
    model's flat ``settings`` (name -> (value, default)) its constructor takes; a policy; or
    its config or dotted class path. A setting the policy does not take must keep its
    default (it would change nothing: a one-line ``SettingError`` says so); a policy given
    by class path takes its settings in its ``init_args``."""
    from synlm.transition.attention.base import AttentionPolicy

    settings = settings or {}
    if isinstance(attention, str) and attention in POLICIES:
        cls = _class(POLICIES[attention])
        takes = inspect.signature(cls).parameters
        for name, (value, default) in settings.items():
            if name not in takes and value != default:
                raise SettingError(name, value,
                                   f"{default}: attention={attention} does not use it")
        return cls(**{name: value for name, (value, _) in settings.items() if name in takes})
    for name, (value, default) in settings.items():
        if value != default:
            raise SettingError(name, value, f"{default}: a policy given by class_path takes "
                                            "its settings in its init_args")
    if isinstance(attention, str) and "." in attention:
        attention = {"class_path": attention}
    if isinstance(attention, Mapping):
        cls = _class(attention.get("class_path", ""))
        if not (isinstance(cls, type) and issubclass(cls, AttentionPolicy)):
            raise SettingError("attention", attention["class_path"],
                               "the class_path of an AttentionPolicy")
        attention = cls(**attention.get("init_args", {}))
    if not isinstance(attention, AttentionPolicy):
        raise SettingError("attention", attention, f"{' | '.join(POLICIES)}, or the "
                                                   "class_path of an AttentionPolicy")
    return attention
