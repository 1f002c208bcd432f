"""Interchangeable backbones. Importing this package registers them for short class
names in configs (``class_path: AWDLSTM``)."""

from synlm.backbones.awd_lstm import AWDLSTM
from synlm.backbones.base import Backbone
from synlm.backbones.on_lstm import ONLSTM
from synlm.backbones.prpn import PRPN

__all__ = ["AWDLSTM", "ONLSTM", "PRPN", "Backbone"]
