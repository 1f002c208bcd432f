"""ONLSTM against the per-step reference cell of Du et al. 2020 eq. 1-12 (``on_lstm_step``)."""

from __future__ import annotations

import pytest
import torch

from synlm.backbones.base import StackState
from synlm.backbones.on_lstm import ONLSTM, on_lstm_step
from synlm.kernels.on_lstm_torch import TorchRecurrence
from synlm.modules import cumax, drop_connect

DT = torch.float64


def reference_layer(x, state, w_ih, b_ih, w_hh, b_hh, chunk):
    """Eq. 1-12 one step at a time, reference gate layout. x (B, T, I) -> h (B, T, H);
    c (B, n, chunk) of ``state`` carries the chunk layout."""
    h, c = state
    hs, dists, logits = [], [], []
    for t in range(x.size(1)):
        h, c, lf = on_lstm_step(x[:, t] @ w_ih.T + b_ih + b_hh, h, c, w_hh)  # eq. 1-11
        hs.append(h)
        dists.append(1 - cumax(lf).mean(-1))  # eq. 12 / n
        logits.append(lf)
    return torch.stack(hs, 1), (h, c), torch.stack(dists, 1), torch.stack(logits, 1)


def reference_stack(model, x, state=None, weights=None):
    """The whole ONLSTM (no dropout) with the reference cell; weights: W_hh per layer."""
    B = x.size(0)
    state = state or [cell.init_state(B, x) for cell in model.cells]
    outs, dists, logits, new_state = [], [], [], []
    for l, cell in enumerate(model.cells):
        w_hh = cell.hh.weight if weights is None else weights[l]
        x, s, d, lf = reference_layer(
            x, state[l], cell.ih.weight, cell.ih.bias, w_hh, cell.hh.bias, cell.chunk_size
        )
        outs.append(x)
        dists.append(d)
        logits.append(lf)
        new_state.append(s)
    return outs, torch.stack(dists), logits, new_state


def hand_set(model: ONLSTM, scale: float = 0.4) -> ONLSTM:
    """Deterministic, non-symmetric weights: scale * sin(1 + index * 0.37 + tensor number)."""
    with torch.no_grad():
        for k, p in enumerate(model.parameters()):
            idx = torch.arange(p.numel(), dtype=DT).reshape(p.shape)
            p.copy_(scale * torch.sin(1.0 + 0.37 * idx + k))
    return model


def tiny(**kw) -> ONLSTM:
    args = dict(input_size=6, hidden_size=8, num_layers=2, chunk_size=2, dropout_input=0.0,
                dropout_hidden=0.0, dropout_output=0.0, weight_drop=0.0)
    args.update(kw)
    return hand_set(ONLSTM(**args).to(DT))


def inputs(B=3, T=5, I=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, I, generator=g, dtype=DT)


def test_matches_reference_step_by_step():
    model = tiny().eval()
    x = inputs()
    out = model(x)
    ref_layers, ref_dist, ref_logits, ref_state = reference_stack(model, x)
    assert out.hidden.shape == (3, 5, 6)
    assert len(out.layers) == 2
    for got, want in zip(out.layers, ref_layers, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(out.distances, ref_dist)  # (L, B, T)
    # distance_features (L, B, T, n_max): layer 1 has n = 3, zero-padded to 4
    assert out.distance_features.shape == (2, 3, 5, 4)
    assert model.spec.distance_feature_sizes == (4, 3)
    torch.testing.assert_close(out.distance_features[0], ref_logits[0])
    torch.testing.assert_close(out.distance_features[1, ..., :3], ref_logits[1])
    assert (out.distance_features[1, ..., 3] == 0).all()
    for (h, c), (rh, rc) in zip(out.state.layers, ref_state, strict=True):
        torch.testing.assert_close(h, rh)
        torch.testing.assert_close(c, rc)
    assert out.state.layers[0][1].shape == (3, 4, 2)  # c: (B, n, chunk)


def test_gradients_match_reference():
    """The hand-written backward agrees with autograd through the reference, incl. h^f."""
    model = tiny().eval()
    x = inputs().requires_grad_()
    g = torch.Generator().manual_seed(1)
    coef_h = torch.randn(3, 5, 6, generator=g, dtype=DT)
    coef_d = torch.randn(2, 3, 5, generator=g, dtype=DT)
    coef_f = torch.randn(3, 5, 4, generator=g, dtype=DT)

    out = model(x)
    loss = (out.hidden * coef_h).sum() + (out.distances * coef_d).sum()
    loss = loss + (out.distance_features[0] * coef_f).sum()
    got = torch.autograd.grad(loss, [x, *model.parameters()])

    ref_layers, ref_dist, ref_logits, _ = reference_stack(model, x)
    ref = (ref_layers[-1] * coef_h).sum() + (ref_dist * coef_d).sum()
    ref = ref + (ref_logits[0] * coef_f).sum()
    want = torch.autograd.grad(ref, [x, *model.parameters()])
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


def test_float32_matches_float64():
    """float32 (on CPU, oneDNN step matmuls for weights this large) agrees with float64."""
    model = hand_set(tiny(input_size=8, hidden_size=512, chunk_size=4), scale=0.05).eval()
    assert model.cells[0].hh.weight.numel() >= 2**20
    x = inputs(T=4, I=8).requires_grad_()
    out = model(x)
    (out.layers[0].sum() + out.hidden.sum() + out.distances.sum()).backward()
    model32 = hand_set(tiny(input_size=8, hidden_size=512, chunk_size=4), scale=0.05)
    model32 = model32.float().eval()
    x32 = x.detach().float().requires_grad_()
    out32 = model32(x32)
    (out32.layers[0].sum() + out32.hidden.sum() + out32.distances.sum()).backward()
    for got, want in zip(out32.layers, out.layers, strict=True):
        torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x32.grad, x.grad.float(), rtol=1e-4, atol=1e-4)
    for p64, p32 in zip(model.parameters(), model32.parameters(), strict=True):
        torch.testing.assert_close(p32.grad, p64.grad.float(), rtol=1e-4, atol=1e-4)


def test_recurrence_gradcheck():
    g = torch.Generator().manual_seed(0)
    T, B, n, k = 4, 2, 3, 2
    G = 2 * n + 4 * n * k
    args = (torch.randn(T, B, G, generator=g, dtype=DT), torch.randn(B, n * k, generator=g,
            dtype=DT), torch.randn(B, n, k, generator=g, dtype=DT),
            0.5 * torch.randn(G, n * k, generator=g, dtype=DT))
    args = tuple(a.requires_grad_() for a in args)
    assert torch.autograd.gradcheck(TorchRecurrence.apply, args, fast_mode=True)


def test_cumax_monotone_and_master_gates_in_unit_interval():
    logits = 3 * torch.randn(4, 7, 11, dtype=DT)
    m = cumax(logits)
    assert (m.diff(dim=-1) >= 0).all()
    assert ((m >= 0) & (m <= 1 + 1e-12)).all()
    torch.testing.assert_close(m[..., -1], torch.ones(4, 7, dtype=DT))
    model = tiny().eval()
    out = model(inputs())
    for l, n in enumerate(model.spec.distance_feature_sizes):
        f_master = cumax(out.distance_features[l, ..., :n])  # f~ (eq. 5)
        assert (f_master.diff(dim=-1) >= 0).all() and (f_master >= 0).all()
        assert (f_master <= 1 + 1e-12).all()


def test_distances_in_unit_interval():
    model = tiny().eval()
    hand_set(model, scale=3.0)  # saturating gates
    d = model(inputs(T=20) * 5).distances
    assert d.shape == (2, 3, 20)
    assert (d >= 0).all() and (d < 1).all()


def test_state_carry_two_windows_equal_one():
    model = tiny().eval()
    x = inputs(T=8)
    full = model(x)
    first = model(x[:, :4])
    second = model(x[:, 4:], first.state)
    torch.testing.assert_close(torch.cat([first.hidden, second.hidden], 1), full.hidden)
    torch.testing.assert_close(torch.cat([first.distances, second.distances], 2), full.distances)
    for (h, c), (fh, fc) in zip(second.state.layers, full.state.layers, strict=True):
        torch.testing.assert_close(h, fh)
        torch.testing.assert_close(c, fc)
    zeros = StackState([cell.init_state(3, x) for cell in model.cells], [])
    torch.testing.assert_close(model(x, zeros).hidden, full.hidden)


def test_causal():
    model = tiny().eval()
    x = inputs(T=8)
    y = x.clone()
    y[:, 5:] += 1.0
    a, b = model(x), model(y)
    torch.testing.assert_close(a.hidden[:, :5], b.hidden[:, :5])
    torch.testing.assert_close(a.distances[..., :5], b.distances[..., :5])
    assert not torch.allclose(a.hidden[:, 5:], b.hidden[:, 5:])


def test_drop_connect_semantics():
    w = torch.randn(200, 50, dtype=DT)
    dropped = drop_connect(w, 0.4, training=True)
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], w[kept])  # no 1/(1-p) rescaling
    assert 0.3 < 1 - kept.double().mean() < 0.5
    torch.testing.assert_close(drop_connect(w, 0.4, training=False), w * 0.6)
    assert drop_connect(w, 0.0, training=True) is w


def test_drop_connect_one_mask_per_window():
    """Training output = the reference run with one fixed dropped W_hh per layer."""
    model = tiny(weight_drop=0.5).train()
    x = inputs(T=6)
    torch.manual_seed(123)
    out = model(x)
    torch.manual_seed(123)  # the forward draws one mask per layer, in layer order
    weights = [cell.window_weight() for cell in model.cells]
    for cell, w in zip(model.cells, weights, strict=True):
        kept = w != 0
        assert 0 < kept.sum() < w.numel()
        torch.testing.assert_close(w[kept], cell.hh.weight[kept])
    ref_layers, ref_dist, _, _ = reference_stack(model, x, weights=weights)
    torch.testing.assert_close(out.layers[-1], ref_layers[-1])
    torch.testing.assert_close(out.distances, ref_dist)
    model.eval()
    scaled = [cell.hh.weight * 0.5 for cell in model.cells]
    torch.testing.assert_close(model(x).hidden, reference_stack(model, x, weights=scaled)[0][-1])


def test_layers_and_dropouts_contract():
    model = tiny(dropout_input=0.3, dropout_hidden=0.3, dropout_output=0.5).train()
    torch.manual_seed(0)
    out = model(inputs())
    # output dropout on hidden only: the top layer stays undropped, which is what the
    # reference's AR reads (``ar_target: last_layer``)
    assert not torch.allclose(out.hidden, out.layers[-1])
    assert model.spec.provides >= {"layers", "distances", "distance_features"}
    with pytest.raises(ValueError, match="expected a divisor of each layer"):
        ONLSTM(input_size=6, hidden_size=9, chunk_size=2)
