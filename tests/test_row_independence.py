"""Batch rows are independent and time is causal, at batch size > 1, for every backbone, insert
and head (docs/design.md, the backbone contract): changing row b from position t on leaves
every other row's outputs, structures and carried state exactly as they were, and row b's
positions before t too; in eval mode, and in training mode with every dropout drawing the
same masks (the same seed before both passes). The released PaLM's rational RNN broke this
(docs/reference-implementations.md, PaLM): its mutation fails here."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from backbone_cases import CASES, EMB, build, run
from synlm.backbones import AWDLSTM, ONLSTM, PRPN, SpanAttention, Transformer
from synlm.backbones import span_attention as span_module
from synlm.heads import DependencyMixtureHead, DistanceRankingHead, SpanHead
from synlm.lm import SyntaxLM
from synlm.outputs import Batch

B, T, ROW, AT = 4, 9, 1, 5  # row ROW changes from position AT on
MODES = ("eval", "train")


def _inputs(seed: int, t: int = T) -> Tensor:
    return torch.randn(B, t, EMB, generator=torch.Generator().manual_seed(seed)).double()


def _changed(x: Tensor, seed: int) -> Tensor:
    """``x`` with row ROW from position AT on replaced (embeddings or token ids)."""
    y = x.clone()
    if x.is_floating_point():
        y[ROW, AT:] = torch.randn(y[ROW, AT:].shape,
                                  generator=torch.Generator().manual_seed(seed)).double()
    else:
        y[ROW, AT:] = (y[ROW, AT:] + 1 + seed) % 11
    return y


def _assert_rows_kept(name: str, a: Tensor, b: Tensor, batch_dim: int,
                      time_dim: int | None) -> None:
    """Rows other than ROW equal; row ROW equal before AT (``time_dim`` None: no time axis
    to spare, the whole row may change)."""
    others = [r for r in range(B) if r != ROW]
    torch.testing.assert_close(a.movedim(batch_dim, 0)[others], b.movedim(batch_dim, 0)[others],
                               rtol=1e-12, atol=1e-12,
                               msg=lambda m: f"{name}: another row changed. {m}")
    if time_dim is not None:
        row_a, row_b = a.select(batch_dim, ROW), b.select(batch_dim, ROW)
        t = time_dim - (time_dim > batch_dim)  # the time axis once the batch axis is gone
        torch.testing.assert_close(row_a.narrow(t, 0, AT), row_b.narrow(t, 0, AT),
                                   rtol=1e-12, atol=1e-12,
                                   msg=lambda m: f"{name}: an earlier position changed. {m}")


def _run(forward: Callable[[], object], mode: str) -> object:
    torch.manual_seed(0)  # the same dropout masks in both passes
    return forward()


def assert_backbone_rows_independent(backbone: torch.nn.Module, mode: str) -> None:
    """The contract on one backbone: outputs of a window, then of a second window carried
    from each window's state (the state is checked through what it carries). A
    bidirectional backbone reads row ROW as AT long, so that what changes is its padding,
    and carries no state."""
    backbone = backbone.double().train(mode == "train")
    x = _inputs(0)
    y = _changed(x, 1)
    nxt = _inputs(2)
    lengths = torch.full((B,), T)
    lengths[ROW] = AT
    a = _run(lambda: run(backbone, x, lengths), mode)
    b = _run(lambda: run(backbone, y, lengths), mode)
    fields = {"hidden": (0, 1), "span_scores": (0, 1), "attention": (0, 1),
              "distances": (1, 2), "distance_features": (1, 2)}
    for field, (batch_dim, time_dim) in fields.items():
        if getattr(a, field) is not None:
            _assert_rows_kept(field, getattr(a, field), getattr(b, field), batch_dim, time_dim)
    for i, (la, lb) in enumerate(zip(a.layers, b.layers)):
        _assert_rows_kept(f"layers[{i}]", la, lb, 0, 1)
    if backbone.spec.bidirectional:
        return
    a2 = _run(lambda: backbone(nxt, a.state), mode)
    b2 = _run(lambda: backbone(nxt, b.state), mode)
    _assert_rows_kept("the next window (carried state)", a2.hidden, b2.hidden, 0, None)


def _prpn(norm: str) -> PRPN:
    return PRPN(input_size=EMB, hidden_size=24, num_layers=2, n_slots=5, n_lookback=3,
                norm=norm)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_backbone_keeps_rows_apart_and_time_causal(name: str, mode: str) -> None:
    """Training PRPN is checked with ``norm="layer"``: the released ``norm="batch"`` couples
    rows and positions through BatchNorm's batch statistics by design (next test)."""
    backbone = _prpn("layer") if name == "PRPN" and mode == "train" else build(name)
    assert_backbone_rows_independent(backbone, mode)


def test_prpn_batch_norm_couples_rows_in_training_only() -> None:
    """The released PRPN normalises its parser and predictor with BatchNorm: in training its
    statistics span the batch and the window (docs/models/prpn.md), at evaluation they are
    the running ones and rows are independent."""
    with pytest.raises(AssertionError, match="another row changed"):
        assert_backbone_rows_independent(_prpn("batch"), "train")
    assert_backbone_rows_independent(_prpn("batch"), "eval")


def _released_rrnn_backward(real: Callable[..., tuple[Tensor, Tensor]]
                            ) -> Callable[..., tuple[Tensor, Tensor]]:
    """The released PaLM's bug, in synlm's function: the backward states built time-major
    and read back batch-major (``rrnn.py``: ``stack(dim=1)`` then ``view(length, batch,
    -1)``), which mixes rows and time steps."""
    def mutated(*args: object) -> tuple[Tensor, Tensor]:
        fw, bw = real(*args)
        B_, T_ = bw.shape[:2]
        return fw, bw.transpose(0, 1).reshape(T_, B_, *bw.shape[2:]).reshape(bw.shape)
    return mutated


def test_the_released_palm_leak_fails_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    real = span_module.rational_span_states
    monkeypatch.setattr(span_module, "rational_span_states", _released_rrnn_backward(real))
    with pytest.raises(AssertionError, match="another row changed|an earlier position"):
        assert_backbone_rows_independent(build("PaLM"), "eval")


#: Every head that reads hidden states (or what the backbone computes from them), on a
#: backbone that provides what it reads.
HEADS: dict[str, Callable[[], SyntaxLM]] = {
    "DistanceRankingHead on ONLSTM": lambda: SyntaxLM(
        ONLSTM(EMB, 24, 3, chunk_size=4), heads=[DistanceRankingHead()], vocab_size=11),
    "SpanHead on PaLM": lambda: SyntaxLM(
        AWDLSTM(EMB, 24, 3, inserts=[SpanAttention(after=1, window=5, rrnn_size=4,
                                                   parser_size=6)]),
        heads=[SpanHead()], vocab_size=11),
    "DependencyMixtureHead on AWDLSTM": lambda: SyntaxLM(
        AWDLSTM(EMB, 24, 3), heads=[DependencyMixtureHead("mixture", context=4)],
        vocab_size=11),
    "DependencyMixtureHead on Transformer": lambda: SyntaxLM(
        Transformer(input_size=EMB, num_layers=2, num_heads=2, ffn_size=32),
        heads=[DependencyMixtureHead("mixture", attention="backbone", context=4)],
        vocab_size=11),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(HEADS))
def test_every_head_keeps_rows_apart_and_time_causal(name: str, mode: str) -> None:
    """The language model with the head: its next-token distribution (the head's when it
    replaces the decoder's), the head's structure and its metrics-free forward."""
    torch.manual_seed(0)
    model = HEADS[name]().double().train(mode == "train")
    tokens = torch.randint(0, 11, (B, T), generator=torch.Generator().manual_seed(3))
    changed = _changed(tokens, 4)

    def forward(x: Tensor) -> object:
        return model(Batch(tokens=x, targets=x, mask=torch.ones_like(x, dtype=torch.bool)),
                     log_probs_needed=True)

    a, b = _run(lambda: forward(tokens), mode), _run(lambda: forward(changed), mode)
    _assert_rows_kept("logits", a.logits, b.logits, 0, 1)
    for head, out in a.heads.items():
        other = b.heads[head]
        if out.log_probs is not None:
            _assert_rows_kept(f"{head} log_probs", out.log_probs, other.log_probs, 0, 1)
        if out.structure is not None:
            batch_dim = 1 if model.structures[head].kind == "distances" else 0  # (L, B, T)
            _assert_rows_kept(f"{head} structure", out.structure, other.structure,
                              batch_dim, batch_dim + 1)
