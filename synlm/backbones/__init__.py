"""Interchangeable backbones. Importing this package registers them for short class
names in configs (``class_path: AWDLSTM``)."""

from synlm.backbones.awd_lstm import AWDLSTM
from synlm.backbones.base import Backbone

__all__ = ["AWDLSTM", "Backbone"]
