"""Interchangeable backbones and the modules inserted between their layers. Importing this
package registers them for short class names in configs (``class_path: AWDLSTM``,
``class_path: SpanAttention``)."""

from synlm.backbones.awd_lstm import AWDLSTM
from synlm.backbones.base import Backbone
from synlm.backbones.gpt2 import GPT2
from synlm.backbones.on_lstm import ONLSTM
from synlm.backbones.prpn import PRPN
from synlm.backbones.span_attention import SpanAttention
from synlm.backbones.structformer import StructFormer
from synlm.backbones.transformer import Transformer
from synlm.backbones.udgn import UDGN

__all__ = ["AWDLSTM", "GPT2", "ONLSTM", "PRPN", "UDGN", "Backbone", "SpanAttention",
           "StructFormer", "Transformer"]
