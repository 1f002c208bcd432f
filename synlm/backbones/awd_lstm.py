"""AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM Language Models").

A stack of single-layer LSTMs with DropConnect on the hidden-to-hidden weights (§2),
variational (locked) dropout on the input, between layers and on the output (§4.2).
Word-type embedding dropout (§4.3) and the tied decoder (§4.4) live in ``SyntaxLM``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from synlm.backbones.base import LayerInsert, RecurrentStack
from synlm.modules import WeightDropLSTM

LayerState = tuple[Tensor, Tensor]  # h (1, B, H_l), c (1, B, H_l)


class AWDLSTM(RecurrentStack):
    """Sizes ``input_size -> hidden_size x (num_layers - 1) -> input_size`` (400/1150/1150/400
    for PTB), so the last layer can be tied to the embedding.

    Args:
        input_size: embedding size (the last layer's size too).
        hidden_size: size of the inner layers.
        num_layers: number of LSTM layers.
        dropout_input: locked dropout on the embeddings (AWD ``dropouti``).
        dropout_hidden: locked dropout between layers (``dropouth``).
        dropout_output: locked dropout on the last layer's output (``dropout``).
        weight_drop: DropConnect on each ``weight_hh`` (``wdrop``), inverted scaling; a mask
            is drawn per layer as that layer runs.
        inserts: modules run between two layers (``LayerInsert``), e.g. PaLM's span attention.
    """

    def __init__(
        self,
        input_size: int = 400,
        hidden_size: int = 1150,
        num_layers: int = 3,
        dropout_input: float = 0.4,
        dropout_hidden: float = 0.25,
        dropout_output: float = 0.4,
        weight_drop: float = 0.5,
        inserts: Sequence[LayerInsert] = (),
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, dropout_input, dropout_hidden,
                         dropout_output, inserts)
        sizes = [input_size, *self.layer_sizes]
        self.rnns = nn.ModuleList(
            WeightDropLSTM(sizes[i], sizes[i + 1], weight_drop) for i in range(num_layers)
        )
        self.bind_inserts()
        self.spec = self.make_spec()

    def run_layer(self, index: int, x: Tensor, state: LayerState | None, weight: Any
                  ) -> tuple[Tensor, LayerState, None]:
        y, new_state = self.rnns[index](x, state)  # (B, T, H_l)
        return y, new_state, None
