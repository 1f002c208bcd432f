"""AWD regularisers: variational dropout, word-type dropout, DropConnect on weight_hh."""

from __future__ import annotations

import torch
from torch import nn

from synlm.modules import LockedDropout, WeightDropLSTM, cumax, embedding_dropout


def test_locked_dropout_shares_one_mask_over_time() -> None:
    torch.manual_seed(0)
    drop = LockedDropout(0.5).train()
    y = drop(torch.ones(4, 7, 16))
    assert torch.equal(y, y[:, :1].expand_as(y))  # same mask at every step
    assert set(y.unique().tolist()) <= {0.0, 2.0}  # inverted scaling 1/(1-p)
    assert torch.equal(drop.eval()(torch.ones(4, 7, 16)), torch.ones(4, 7, 16))


def test_embedding_dropout_drops_whole_word_types() -> None:
    torch.manual_seed(0)
    weight = torch.randn(50, 8)
    tokens = torch.tensor([[3, 3, 7, 3], [7, 9, 3, 9]])
    out = embedding_dropout(weight, tokens, p=0.5, training=True)
    for word in (3, 7, 9):
        rows = out[tokens == word]
        dropped = rows.abs().sum(-1) == 0
        assert dropped.all() or not dropped.any()  # a type is dropped everywhere or nowhere
        if not dropped.any():
            torch.testing.assert_close(rows[0], weight[word] * 2)
    assert torch.equal(embedding_dropout(weight, tokens, 0.5, training=False), weight[tokens])


def test_weight_drop_lstm_equals_lstm_with_the_dropped_weight() -> None:
    torch.manual_seed(0)
    module = WeightDropLSTM(5, 6, weight_drop=0.5).train()
    x = torch.randn(2, 4, 5)
    torch.manual_seed(1)
    out, _ = module(x)
    torch.manual_seed(1)
    dropped = nn.functional.dropout(module.lstm.weight_hh_l0, 0.5, training=True)
    reference = nn.LSTM(5, 6, batch_first=True)
    reference.load_state_dict({**module.lstm.state_dict(), "weight_hh_l0": dropped})
    torch.testing.assert_close(out, reference(x)[0])
    # one real parameter, which receives the gradient through the mask
    assert [n for n, _ in module.named_parameters()].count("lstm.weight_hh_l0") == 1
    out.sum().backward()
    grad = module.lstm.weight_hh_l0.grad
    assert torch.equal(grad == 0, (dropped == 0) | (grad == 0))
    assert (grad[dropped == 0] == 0).all() and grad.abs().sum() > 0


def test_weight_drop_is_off_in_eval() -> None:
    module = WeightDropLSTM(5, 6, weight_drop=0.9).eval()
    x = torch.randn(2, 4, 5)
    torch.testing.assert_close(module(x)[0], module.lstm(x)[0])


def test_cumax_is_monotone_in_unit_interval() -> None:
    y = cumax(torch.randn(3, 11) * 5)
    assert (y.diff(dim=-1) >= 0).all() and (y >= 0).all() and (y <= 1 + 1e-6).all()
    torch.testing.assert_close(y[:, -1], torch.ones(3))


def test_weight_drop_lstm_runs_in_float32_under_autocast() -> None:
    """bf16-mixed keeps the LSTM in float32: the same outputs and state as without autocast,
    from a bfloat16 input (what an autocast embedding or insert may hand it)."""
    torch.manual_seed(0)
    lstm = WeightDropLSTM(6, 8, weight_drop=0.5).train()
    x = torch.randn(2, 5, 6).to(torch.bfloat16)
    state = (torch.randn(1, 2, 8), torch.randn(1, 2, 8))
    torch.manual_seed(1)
    want, (want_h, want_c) = lstm(x.float(), state)
    torch.manual_seed(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, (got_h, got_c) = lstm(x, state)
    assert got.dtype == torch.float32
    for g, w in [(got, want), (got_h, want_h), (got_c, want_c)]:
        torch.testing.assert_close(g, w, rtol=0, atol=0)
