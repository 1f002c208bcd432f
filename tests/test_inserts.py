"""A module inserted between two layers of a recurrent stack: it changes what the next layer
reads, carries its own state across windows, joins the spec and trains."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from torch import Tensor, nn

from synlm.backbones import AWDLSTM, ONLSTM
from synlm.backbones.base import InsertOutput, LayerInsert
from synlm.outputs import Structure

K = 3


class PastMix(LayerInsert):
    """h_t + tanh(W [h_{t-1} .. h_{t-K}]) with the last K inputs carried across windows, and
    span scores = the K dot products h_t · h_{t-k}: a stand-in for PaLM's span attention."""

    provides: ClassVar = frozenset({"span_scores"})
    structures: ClassVar = (Structure("span", "spans"),)

    def bind(self, size: int, dropout_hidden: float) -> None:
        self.mix = nn.Linear(K * size, size)

    def forward(self, h: Tensor, raw: Tensor, state: Tensor | None) -> InsertOutput:
        B, T, H = h.shape
        past = h.new_zeros(B, K, H) if state is None else state  # (B, K, H) oldest first
        tape = torch.cat([past, h], 1)  # (B, K + T, H)
        window = tape.unfold(1, K, 1)[:, :T]  # (B, T, H, K): steps t-K .. t-1
        mixed = h + torch.tanh(self.mix(window.flatten(2)))
        scores = torch.einsum("bth,bthk->btk", h, window)  # (B, T, K)
        return InsertOutput(mixed, tape[:, -K:], {"span_scores": scores})


def stack(kind: str, insert: LayerInsert | None) -> nn.Module:
    inserts = [] if insert is None else [insert]
    if kind == "AWDLSTM":
        return AWDLSTM(8, 12, 3, 0.0, 0.0, 0.0, 0.0, inserts=inserts)
    return ONLSTM(8, 12, 3, chunk_size=4, dropout_input=0.0, dropout_hidden=0.0,
                  dropout_output=0.0, weight_drop=0.0, inserts=inserts)


@pytest.mark.parametrize("kind", ["AWDLSTM", "ONLSTM"])
def test_insert_joins_the_spec_and_changes_only_the_layers_above(kind: str) -> None:
    torch.manual_seed(0)
    plain = stack(kind, None).double().eval()
    torch.manual_seed(0)
    mixed = stack(kind, PastMix(after=1)).double().eval()
    assert mixed.spec.provides == plain.spec.provides | {"span_scores"}
    assert Structure("span", "spans") in mixed.spec.structures
    mixed.load_state_dict(plain.state_dict(), strict=False)  # same stack weights
    x = torch.randn(2, 7, 8, dtype=torch.double)
    a, b = plain(x), mixed(x)
    for layer in (0, 1):  # at and below the insert: unchanged
        torch.testing.assert_close(a.layers[layer], b.layers[layer])
    assert not torch.allclose(a.layers[2], b.layers[2])
    assert b.span_scores.shape == (2, 7, K) and a.span_scores is None


@pytest.mark.parametrize("kind", ["AWDLSTM", "ONLSTM"])
def test_insert_state_is_carried_and_causal(kind: str) -> None:
    torch.manual_seed(0)
    model = stack(kind, PastMix(after=0)).double().eval()
    x = torch.randn(2, 10, 8, dtype=torch.double)
    whole = model(x)
    first = model(x[:, :6])
    second = model(x[:, 6:], first.state)
    torch.testing.assert_close(torch.cat([first.hidden, second.hidden], 1), whole.hidden)
    torch.testing.assert_close(torch.cat([first.span_scores, second.span_scores], 1),
                               whole.span_scores)
    y = x.clone()
    y[:, 5:] += 1.0
    torch.testing.assert_close(model(y).hidden[:, :5], whole.hidden[:, :5])


def test_insert_gets_gradients_and_bad_positions_are_refused() -> None:
    model = stack("ONLSTM", PastMix(after=1))
    model(torch.randn(2, 5, 8)).hidden.sum().backward()
    assert model.inserts[0].mix.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"after must be in 0\.\.1"):
        stack("AWDLSTM", PastMix(after=2))
