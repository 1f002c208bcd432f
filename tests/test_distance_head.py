"""DistanceRankingHead: eq. 18 as released, pairings, masks, the split head (eq. 14-17)."""

from __future__ import annotations

import inspect

import pytest
import torch
import yaml
from torch import nn

from conftest import run_cli
from synlm.backbones.awd_lstm import AWDLSTM
from synlm.backbones.base import Backbone
from synlm.backbones.on_lstm import ONLSTM
from synlm.catalog import REPO_CONFIGS
from synlm.heads.base import HeadContext
from synlm.heads.distance import DistanceRankingHead, ranking_loss, ranking_pairs
from synlm.lm import SyntaxLM
from synlm.outputs import BackboneOutput, Batch

DT = torch.float64


def make_batch(gold, valid=None, sentence_ids=None) -> Batch:
    B, T = gold.shape
    tokens = torch.zeros(B, T, dtype=torch.long)
    return Batch(tokens=tokens, targets=tokens, mask=torch.ones(B, T, dtype=torch.bool),
                 sentence_ids=sentence_ids, distances=gold, distance_mask=valid)


def bind_to(head: DistanceRankingHead, backbone: Backbone, vocab: int = 10) -> DistanceRankingHead:
    """Bind ``head`` as SyntaxLM would, to ``backbone`` under a tied embedding/decoder."""
    size = backbone.spec.input_size
    head.bind(HeadContext(vocab, nn.Embedding(vocab, size), nn.Linear(size, vocab),
                          backbone.spec))
    return head


def shared_head(**kw) -> DistanceRankingHead:
    head = DistanceRankingHead(mode="shared", layer=0, **kw)
    bind_to(head, ONLSTM(input_size=4, hidden_size=4, num_layers=1, chunk_size=2))
    return head


def run_shared(head, pred, batch):
    out = BackboneOutput(hidden=torch.zeros(*pred.shape, 4), distances=pred[None])
    return head(out, batch, logits=None)


def test_sentence_pairing_hand_computed():
    gold = torch.tensor([[3.0, 1.0, 2.0, 0.0]])
    pred = torch.tensor([[2.0, 0.5, 1.0, 0.0]], dtype=DT)  # same order as gold
    # ordered pairs (i, j) with gold_i > gold_j and their pred_i - pred_j:
    # (0,1) 1.5, (0,2) 1.0, (0,3) 2.0, (2,1) 0.5, (2,3) 1.0, (1,3) 0.5
    out = run_shared(shared_head(margin=0.5), pred, make_batch(gold))
    assert out.loss.item() == 0.0
    assert out.metrics["syd_rank_acc"].item() == 1.0
    assert out.metrics["syd_rank_pairs"].item() == 6
    out = run_shared(shared_head(margin=1.0), pred, make_batch(gold))
    assert out.loss.item() == pytest.approx((0.5 + 0.5) / 6)
    # reversed prediction: every pair wrong, relu(1 + |diff|)
    out = run_shared(shared_head(margin=1.0), -pred, make_batch(gold))
    assert out.loss.item() == pytest.approx((2.5 + 2.0 + 3.0 + 1.5 + 2.0 + 1.5) / 6)
    assert out.metrics["syd_rank_acc"].item() == 0.0
    # ties in gold are not pairs; equal predictions are not "correct"
    out = run_shared(shared_head(), torch.zeros(1, 3, dtype=DT),
                     make_batch(torch.tensor([[1.0, 1.0, 0.0]])))
    assert out.metrics["syd_rank_pairs"].item() == 2
    assert out.loss.item() == pytest.approx(1.0)
    assert out.metrics["syd_rank_acc"].item() == 0.0


def test_stream_pairing_hand_computed():
    """Pairs across batch columns at the same step (SDLM main.py with (T, B) inputs)."""
    gold = torch.tensor([[2.0, 0.0], [1.0, 1.0], [0.0, 5.0]])  # (B=3, T=2)
    pred = torch.tensor([[0.9, 0.0], [0.2, 0.3], [0.1, 0.2]], dtype=DT)
    # t=0: (0,1) 0.7, (0,2) 0.8, (1,2) 0.1  -> relu(1-d): 0.3, 0.2, 0.9
    # t=1: (2,1) -0.1, (2,0) 0.2, (1,0) 0.3 -> 1.1, 0.8, 0.7
    out = run_shared(shared_head(pairing="stream"), pred, make_batch(gold))
    assert out.metrics["syd_rank_pairs"].item() == 6
    assert out.loss.item() == pytest.approx((0.3 + 0.2 + 0.9 + 1.1 + 0.8 + 0.7) / 6)
    assert out.metrics["syd_rank_acc"].item() == pytest.approx(5 / 6)
    # predictions in the gold order, gaps >= 0.1 > margin: zero loss
    ordered = run_shared(shared_head(pairing="stream", margin=0.05), gold.double() / 10,
                         make_batch(gold))
    assert ordered.loss.item() == 0.0 and ordered.metrics["syd_rank_acc"].item() == 1.0
    # the same numbers as within-row pairs differ: stream pairing is not sentence pairing
    sent = run_shared(shared_head(pairing="sentence"), pred, make_batch(gold))
    assert sent.loss.item() != pytest.approx(out.loss.item())


def test_masked_positions_and_cross_sentence_pairs_do_not_count():
    gold = torch.tensor([[3.0, 1.0, 2.0, 0.0, 4.0, 1.0]])
    valid = torch.tensor([[True, True, True, False, True, True]])
    sid = torch.tensor([[0, 0, 0, 0, 1, 1]])
    pred = torch.tensor([[0.3, 0.1, 0.2, 0.9, 0.0, 0.5]], dtype=DT, requires_grad=True)
    head = shared_head()
    out = run_shared(head, pred, make_batch(gold, valid, sid))
    # sentence 0 without position 3: (0,1), (0,2), (2,1); sentence 1: (4,5)
    assert out.metrics["syd_rank_pairs"].item() == 4
    assert out.loss.item() == pytest.approx((0.8 + 0.9 + 0.9 + 1.5) / 4)
    (grad,) = torch.autograd.grad(out.loss, pred)
    assert grad[0, 3] == 0  # masked
    # wildly changing the masked position and cross-sentence orders changes nothing
    other = pred.detach().clone()
    other[0, 3] = -5.0
    other[0, 4:] += 10.0  # sentence 1 shifted as a whole: only cross-sentence diffs change
    again = run_shared(head, other, make_batch(gold, valid, sid))
    assert again.loss.item() == pytest.approx(out.loss.item())
    # no gold pairs at all: zero loss, no NaN
    none = run_shared(head, pred, make_batch(gold, torch.zeros_like(valid), sid))
    assert none.loss.item() == 0.0


def test_ranking_functions_layouts():
    gold = torch.tensor([[1.0, 0.0, 2.0]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    assert ranking_pairs(gold, valid, "sentence").shape == (1, 3, 3)
    assert ranking_pairs(gold, valid, "stream").shape == (3, 1, 1)
    loss, n, correct = ranking_loss(gold, ranking_pairs(gold, valid, "sentence"), "sentence")
    assert (n.item(), correct.item()) == (3, 3)
    assert loss.item() == 0.0  # gaps of 1 and 2 meet margin 1


def tiny_onlstm() -> ONLSTM:
    return ONLSTM(input_size=8, hidden_size=12, num_layers=2, chunk_size=2, dropout_input=0.0,
                  dropout_hidden=0.0, dropout_output=0.0, weight_drop=0.0)


def test_requires_per_mode_and_bind_errors():
    assert DistanceRankingHead(mode="split").requires == {"distance_features"}
    assert DistanceRankingHead(mode="shared").requires == {"distances"}
    assert DistanceRankingHead(mode="hidden").requires == {"layers"}
    assert DistanceRankingHead(mode="hidden", layer=None).requires == frozenset()
    assert DistanceRankingHead().needs_gold == {"distances"}
    with pytest.raises(ValueError, match=r"DistanceRankingHead requires.*AWDLSTM"):
        SyntaxLM(AWDLSTM(8, 12, 2), heads=[DistanceRankingHead(mode="split")], vocab_size=11)
    # every backbone declares its layer widths: hidden mode reads any layer of an AWD-LSTM
    head = bind_to(DistanceRankingHead(mode="hidden", layer=0), AWDLSTM(8, 12, 2))
    assert head.proj[0][0].in_features == 12
    with pytest.raises(ValueError, match="out of range"):
        bind_to(DistanceRankingHead(mode="split", layer=2), tiny_onlstm())
    with pytest.raises(ValueError, match="mode"):
        DistanceRankingHead(mode="split", layer=None)


def test_hidden_mode_on_any_backbone():
    torch.manual_seed(0)
    backbone = AWDLSTM(8, 12, 2, dropout_input=0, dropout_hidden=0, dropout_output=0,
                       weight_drop=0)
    head = DistanceRankingHead(mode="hidden", layer=None)
    bind_to(head, backbone)
    out = backbone(torch.randn(2, 5, 8))
    gold = torch.rand(2, 5)
    res = head(out, make_batch(gold), logits=None)
    assert res.structure.shape == (1, 2, 5)
    assert ((res.structure > 0) & (res.structure < 1)).all()
    res.loss.backward()
    assert backbone.rnns[0].lstm.weight_ih_l0.grad.abs().sum() > 0
    # on ONLSTM's per-layer outputs, sized from layer_sizes
    onlstm = tiny_onlstm()
    head = DistanceRankingHead(mode="hidden", layer=[0, -1])
    bind_to(head, onlstm)
    assert [mlp[0].in_features for mlp in head.proj] == [12, 8]
    assert head(onlstm(torch.randn(2, 5, 8)), make_batch(gold), None).structure.shape == (2, 2, 5)


def test_split_head_shapes_and_gradient_through_master_forget_logits():
    torch.manual_seed(0)
    backbone = tiny_onlstm()
    head = DistanceRankingHead(mode="split", layer=0, weight_drop=0.3)
    bind_to(head, backbone)
    assert head.proj[0].weight.shape == (6, 6)  # n x n on layer 0's h^f
    out = backbone(torch.randn(2, 7, 8))
    res = head(out, make_batch(torch.rand(2, 7)), logits=None)
    assert res.structure.shape == (1, 2, 7)
    res.loss.backward()
    first, second = backbone.cells
    # h^f of layer 0 reads only layer 0's weights; the master-forget rows get gradient
    assert first.hh.weight.grad[6:12].abs().sum() > 0
    assert first.ih.weight.grad.abs().sum() > 0
    assert second.ih.weight.grad is None or second.ih.weight.grad.abs().sum() == 0
    # two layers: structure (2, B, T), loss the mean of the per-layer losses
    both = DistanceRankingHead(mode="split", layer=[0, -1])
    bind_to(both, backbone)
    assert both.layer_indices == [0, 1]
    assert both.proj[1].weight.shape == (4, 4)
    with torch.no_grad():
        out = backbone(torch.randn(2, 7, 8))
        gold = torch.rand(2, 7)
        res = both(out, make_batch(gold), logits=None)
        torch.testing.assert_close(res.structure, both.distances(out))
        per_layer = []
        for k in range(2):
            one = DistanceRankingHead(mode="shared", layer=0)
            fake = BackboneOutput(hidden=out.hidden, distances=res.structure[k : k + 1])
            per_layer.append(one(fake, make_batch(gold), logits=None).loss)
        torch.testing.assert_close(res.loss, torch.stack(per_layer).mean())


def test_split_head_learns_the_gold_order():
    """A few dozen Adam steps on a tiny ONLSTM + split head lower the loss, raise rank_acc."""
    torch.manual_seed(0)
    backbone = tiny_onlstm()
    head = DistanceRankingHead(mode="split", layer=-1)
    bind_to(head, backbone)
    x = torch.randn(4, 12, 8)
    gold = torch.randint(0, 5, (4, 12)).float()
    sid = torch.arange(12).div(6, rounding_mode="floor").expand(4, 12)  # two sentences a row
    batch = make_batch(gold, sentence_ids=sid)
    params = [*backbone.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=0.02)
    history = []
    for _ in range(40):
        res = head(backbone(x), batch, logits=None)
        opt.zero_grad()
        res.loss.backward()
        opt.step()
        history.append((res.loss.item(), res.metrics["syd_rank_acc"].item()))
    (loss0, acc0), (loss1, acc1) = history[0], history[-1]
    assert loss1 < 0.9 * loss0
    assert acc1 > acc0 + 0.2


def test_no_gold_returns_distances_only():
    backbone = tiny_onlstm().eval()
    head = DistanceRankingHead()
    bind_to(head, backbone)
    out = backbone(torch.randn(2, 3, 8))
    tokens = torch.zeros(2, 3, dtype=torch.long)
    res = head(out, Batch(tokens, tokens, torch.ones(2, 3, dtype=torch.bool)), logits=None)
    assert res.loss is None and res.structure.shape == (1, 2, 3)



ONLSTM_CONFIGS = ["onlstm.yaml", "onlstm_syd.yaml"]  # the ablations are deltas on onlstm_syd


@pytest.mark.parametrize("name", ONLSTM_CONFIGS)
def test_config_builds(name, capsys):
    """The ON-LSTM configs name real arguments; backbone and heads build and bind (the
    configs as the CLI resolves them, onlstm_syd.yaml being a delta on onlstm.yaml)."""
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / name), "--print_config"]) == 0
    model = yaml.safe_load(capsys.readouterr().out)["model"]["init_args"]
    backbone = ONLSTM(**model.pop("backbone")["init_args"])
    for spec in model.pop("heads", []):
        assert spec["class_path"] == "synlm.heads.DistanceRankingHead"
        bind_to(DistanceRankingHead(**spec["init_args"]), backbone)
    assert set(model) <= set(inspect.signature(SyntaxLM).parameters)


def test_in_syntax_lm():
    """SyntaxLM checks requires, binds the head and returns its loss and distances."""
    torch.manual_seed(0)
    heads = [DistanceRankingHead(layer=[0, 1]),
             DistanceRankingHead(mode="shared", layer=-1, name="one_set")]
    lm = SyntaxLM(tiny_onlstm(), heads=heads, vocab_size=11)
    tokens = torch.randint(0, 11, (2, 6))
    batch = make_batch(torch.rand(2, 6))
    batch.tokens, batch.targets = tokens, tokens.roll(-1, 1)
    result = lm(batch)
    assert set(result.heads) == {"syd", "one_set"}
    assert "one_set_rank_acc" in result.heads["one_set"].metrics
    head_out = result.heads["syd"]
    assert head_out.structure.shape == (2, 2, 6)
    head_out.loss.backward()
    assert lm.backbone.cells[0].hh.weight.grad.abs().sum() > 0
    assert set(lm.induce(tokens)) == {"lm", "syd", "one_set"}
    assert {n: s.kind for n, s in lm.structures.items()} == {
        "lm": "distances", "syd": "distances", "one_set": "distances"}
    with pytest.raises(ValueError, match=r"DistanceRankingHead.*AWDLSTM"):
        SyntaxLM(AWDLSTM(8, 12, 2), heads=[DistanceRankingHead()], vocab_size=11)
