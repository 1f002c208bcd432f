"""AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM Language Models").

A stack of single-layer LSTMs with DropConnect on the hidden-to-hidden weights (§2),
variational (locked) dropout on the input, between layers and on the output (§4.2).
Word-type embedding dropout (§4.3) and the tied decoder (§4.4) live in ``SyntaxLM``.
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from synlm.backbones.base import Backbone
from synlm.modules import LockedDropout, WeightDropLSTM
from synlm.outputs import BackboneOutput

LSTMState = list[tuple[Tensor, Tensor]]  # per layer: (h (1, B, H_l), c (1, B, H_l))


class AWDLSTM(Backbone):
    """Sizes ``input_size -> hidden_size x (num_layers - 1) -> input_size`` (400/1150/1150/400
    for PTB), so the last layer can be tied to the embedding.

    Args:
        input_size: embedding size (the last layer's size too).
        hidden_size: size of the inner layers.
        num_layers: number of LSTM layers.
        dropout_input: locked dropout on the embeddings (AWD ``dropouti``).
        dropout_hidden: locked dropout between layers (``dropouth``).
        dropout_output: locked dropout on the last layer's output (``dropout``).
        weight_drop: DropConnect on each ``weight_hh`` (``wdrop``), inverted scaling.
    """

    provides: ClassVar[frozenset[str]] = frozenset({"layers", "raw_last"})

    def __init__(
        self,
        input_size: int = 400,
        hidden_size: int = 1150,
        num_layers: int = 3,
        dropout_input: float = 0.4,
        dropout_hidden: float = 0.25,
        dropout_output: float = 0.4,
        weight_drop: float = 0.5,
    ) -> None:
        super().__init__()
        self.input_size = self.output_size = input_size
        sizes = [input_size] + [hidden_size] * (num_layers - 1) + [input_size]
        self.rnns = nn.ModuleList(
            WeightDropLSTM(sizes[i], sizes[i + 1], weight_drop) for i in range(num_layers)
        )
        self.drop_input = LockedDropout(dropout_input)
        self.drop_hidden = LockedDropout(dropout_hidden)
        self.drop_output = LockedDropout(dropout_output)

    def forward(self, x: Tensor, state: LSTMState | None = None) -> BackboneOutput:
        # x: (B, T, input_size)
        h = self.drop_input(x)
        new_state: LSTMState = []
        for i, rnn in enumerate(self.rnns):
            raw, layer_state = rnn(h, None if state is None else state[i])  # (B, T, H_l)
            new_state.append(layer_state)
            last = i == len(self.rnns) - 1
            h = self.drop_output(raw) if last else self.drop_hidden(raw)
        # AR penalises the dropped last layer, TAR the raw one (awd-lstm-lm main.py:197-203)
        return BackboneOutput(hidden=h, state=new_state, layers=[h], raw_last=raw)
