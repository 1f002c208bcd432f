"""PaLM's span attention: the vectorised span representations, the attention equations on
set weights, PaLM-RB's fixed scores, and what the insert declares."""

from __future__ import annotations

import pytest
import torch

from synlm.backbones import AWDLSTM, SpanAttention
from synlm.backbones.span_attention import rational_span_states
from synlm.syntax import baseline_tree, palm_tree


def _gates(B: int, N: int, n: int, seed: int, dtype: torch.dtype = torch.double,
           forget: tuple[float, float] = (0.0, 1.0)) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lo, hi = forget
    u_fw, u_bw = (torch.randn(B, N, n, generator=g, dtype=dtype) for _ in range(2))
    f_fw, f_bw = (lo + (hi - lo) * torch.rand(B, N, n, generator=g, dtype=dtype)
                  for _ in range(2))
    return [u_fw, f_fw, u_bw, f_bw]


def _direct(u: torch.Tensor, f: torch.Tensor, start: int, end: int, backward: bool
            ) -> torch.Tensor:
    """c_i = f_i c_{i-1} + u_i over positions start..end (inclusive) from zero, read at the
    last position visited."""
    c = torch.zeros_like(u[:, 0])
    steps = range(end, start - 1, -1) if backward else range(start, end + 1)
    for i in steps:
        c = f[:, i] * c + u[:, i]
    return c


@pytest.mark.parametrize("K", [1, 2, 5])
def test_span_states_equal_the_per_span_recurrence(K: int) -> None:
    B, T, n = 2, 6, 3
    u_fw, f_fw, u_bw, f_bw = _gates(B, K - 1 + T, n, seed=K)
    fw, bw = rational_span_states(u_fw, f_fw, u_bw, f_bw, K)
    assert fw.shape == bw.shape == (B, T, K, n)
    for t in range(T):
        end = K - 1 + t
        for v in range(K):  # slot v: the K - v positions ending at `end`
            start = end - (K - v) + 1
            torch.testing.assert_close(fw[:, t, v], _direct(u_fw, f_fw, start, end, False))
            torch.testing.assert_close(bw[:, t, v], _direct(u_bw, f_bw, start, end, True))


def test_span_states_are_stable_in_float32() -> None:
    """Long windows with forget gates near 1 (long memory) or near 0: float32 stays within
    1e-5 of float64, with no exp of long cumulative log-sums."""
    for forget in ((0.999, 0.99999), (1e-4, 1e-2)):
        wide = _gates(2, 39 + 50, 4, seed=0, forget=forget)
        exact = rational_span_states(*wide, K=40)
        single = rational_span_states(*(x.float() for x in wide), K=40)
        for a, b in zip(single, exact, strict=True):
            torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)


def _set_weights(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("paper", [False, True])
def test_attention_follows_the_equations(paper: bool) -> None:
    """Eq. 1-3 and the mixing (released, or eq. 6 with ``paper``) computed per position
    and span in float64, with eq. 2 in the paper's log-space form."""
    H, n, P, m = 5, 3, 4, 4
    K = m - 1
    insert = SpanAttention(after=0, window=m, rrnn_size=n, parser_size=P,
                           activation="tanh" if paper else "none",
                           mix_input="hidden_and_context" if paper else "context")
    insert.bind(H, 0.0)
    insert.double().eval()
    _set_weights(insert, seed=1)
    g = torch.Generator().manual_seed(2)
    past = torch.randn(1, K, H, generator=g, dtype=torch.double)
    h = torch.randn(1, 6, H, generator=g, dtype=torch.double)
    raw = torch.randn(1, 6, H, generator=g, dtype=torch.double)
    out = insert(h, raw, past)

    s = insert.scorer
    tape = torch.cat([past, h], 1)[0]  # (K + T, H)
    pre = tape @ s.rrnn.weight.T
    u, f = pre[:, :2 * n], torch.sigmoid(pre[:, 2 * n:] + s.forget_bias)
    u = (torch.tanh(u) if paper else u) * (1 - f)
    # eq. 1c over the whole tape, then eq. 2: c_{i,j} = c_j - c_{i-1} * prod f (log space)
    c_fw = torch.zeros_like(u[:, :n])
    c_bw = torch.zeros_like(u[:, n:])
    run = torch.zeros(n, dtype=torch.double)
    for i in range(len(tape)):
        run = f[i, :n] * run + u[i, :n]
        c_fw[i] = run
    run = torch.zeros(n, dtype=torch.double)
    for i in reversed(range(len(tape))):
        run = f[i, n:] * run + u[i, n:]
        c_bw[i] = run
    log_f_fw = torch.log(f[:, :n]).cumsum(0)
    log_f_bw = torch.log(f[:, n:]).flip(0).cumsum(0).flip(0)
    for t in range(h.size(1)):
        x, e = h[0, t], K + t - 1  # spans end at the tape position before the input
        reprs = []
        for v in range(K):
            i = e - (K - v) + 1  # span [i, e]
            before = c_fw[i - 1] * torch.exp(log_f_fw[e] - log_f_fw[i - 1]) if i > 0 else 0
            after = c_bw[e + 1] * torch.exp(log_f_bw[i] - log_f_bw[e + 1])
            reprs.append(torch.cat([c_fw[e] - before, c_bw[i] - after]))
        r = torch.tanh(torch.stack(reprs) * torch.sigmoid(s.gate(x)))  # (K, 2n)
        scores = s.score(torch.tanh(s.span_proj(r) + s.token_proj(x))).squeeze(-1)  # eq. 3
        torch.testing.assert_close(out.fields["span_scores"][0, t], scores)
        a = torch.softmax(scores, 0) @ r  # eq. 3a, 3b
        gate = torch.sigmoid(insert.mix_gate(torch.cat([x, a])))
        mlp = torch.tanh(insert.mix(torch.cat([x, a]) if paper else a))
        torch.testing.assert_close(out.hidden[0, t], gate * raw[0, t] + (1 - gate) * mlp)
    torch.testing.assert_close(out.state, tape[None, -K:])


def test_right_branching_scores_give_right_branching_trees() -> None:
    """PaLM-RB: scores are the span lengths (the longest span first); decoded greedily they
    give the right-branching tree of any sentence."""
    torch.manual_seed(0)
    backbone = AWDLSTM(8, 12, 3, 0.0, 0.0, 0.0, 0.0,
                       inserts=[SpanAttention(window=6, rrnn_size=4, scores="right_branching")])
    out = backbone(torch.randn(2, 9, 8))
    assert out.span_scores.tolist() == [[[5.0, 4.0, 3.0, 2.0, 1.0]] * 9] * 2
    scorer = {name.split(".")[-2] for name, _ in backbone.inserts[0].scorer.named_parameters()
              if "." in name}
    assert scorer == {"rrnn", "gate"}  # no score MLP
    words = ["the", "old", "man", "saw", "a", "dog"]
    tree = palm_tree(words, out.span_scores[0, :len(words) + 2].numpy())
    assert tree == baseline_tree(words, "right-branching")


def test_the_insert_declares_its_window_and_refuses_bad_settings() -> None:
    backbone = AWDLSTM(8, 12, 3, inserts=[SpanAttention(after=1, window=7, rrnn_size=4)])
    assert backbone.spec.span_slots == 6
    assert "span_scores" in backbone.spec.provides
    assert [s.name for s in backbone.spec.structures] == ["span_attention"]
    assert backbone.inserts[0].scorer.rrnn.in_features == 12  # the width of layer 2
    with pytest.raises(ValueError, match="window must be >= 2"):
        SpanAttention(window=1)
    with pytest.raises(ValueError, match="mix_input"):
        SpanAttention(mix_input="both")
    with pytest.raises(ValueError, match="scores must be"):
        AWDLSTM(8, 12, 3, inserts=[SpanAttention(scores="left")])
    with pytest.raises(ValueError, match=r"activation must be one of \('none', 'tanh'\)"):
        SpanAttention(activation="relu")



def test_span_states_and_scores_stay_float32_under_autocast() -> None:
    """bf16-mixed: the rational span states and scores are the float32 ones, bit for bit,
    from a bfloat16 layer output."""
    insert = SpanAttention(after=0, window=4, rrnn_size=3, parser_size=4)
    insert.bind(5, 0.0)
    insert.eval()
    h = torch.randn(2, 6, 5).to(torch.bfloat16)
    want = insert(h.float(), h.float(), None).fields["span_scores"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = insert(h, h, None).fields["span_scores"]
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0)
