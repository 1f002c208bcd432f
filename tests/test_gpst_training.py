"""GPST's training forward (``synlm.transition.gpst_structured``: parser, pruned chart,
inside-outside pass, generative losses) against the released code, and the binary action
orders (``synlm.syntax.binary_actions``).

Fixture (``tests/fixtures/gpst/training.json``, ``training_weights.pt``):
ant-research/StructuredLM_RTDT at commit 3164bda63684f68866e578734a05d9983f4ef63b,
``create_model("r2d2-gen-fast", ...)`` with a tiny random model (GPT-2: 16 wide, 2 heads,
2 action + 2 generation layers, vocabulary 23; composition 8 wide, 2 heads, feed-forward
16, 2 layers, split scores 4 wide, one outside layer, window 2; parser 8 wide, one layer,
2 heads, score MLP 16; the configs are in the JSON), every parameter drawn N(0, 0.3)
(matrices) or N(0, 0.2), norm gains + 1, seed 0; float64 on the CPU, in training mode with
every dropout 0, its C++ extension built for the CPU. Recorded: ``FastGenerativeR2D2
.forward`` on one batch of four sentences (3, 6, 9 and 10 words) with (coeff, temperature,
seed before the call) = (0, 1, 0), (1, 1, 7), (1, 0.5, 11): the parser's split scores and
merge order, each composition step's spans and split points (from the extension's cache
ids), the induced trees' split targets, and the losses (words, actions, parser,
inside-outside, their released sum). To run it in float64: the ``TensorCache`` buffers take
float64 (released: float32), ``RMSNorm`` computes in the input's precision, and the parser
loss skips its ``.float()``; as the generative fixture (``test_gpst.py``) notes, imports
that transformers 5 removed are skipped and ``fast_parser.py`` imports ``ModelArgs,
Transformer``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.binary_actions import (
    REDUCE,
    SHIFT,
    actions_tree,
    binary_actions,
    postorder,
    span_actions,
)
from synlm.transition.gpst_chart import build_chart, merge_spans
from synlm.transition.gpst_convert import released_structured_state_dict
from synlm.transition.gpst_structured import StructuredGPST

FIXTURES = Path(__file__).parent / "fixtures" / "gpst"
RELEASED = json.loads((FIXTURES / "training.json").read_text())
SENTENCES = RELEASED["sentences"]


def released_model(dtype: torch.dtype = torch.float64) -> StructuredGPST:
    g, r = RELEASED["gpt_config"], RELEASED["r2d2_config"]
    model = StructuredGPST(
        g["vocab_size"], g["n_embd"], g["n_head"], g["action_layer_num"],
        g["n_layer"] - g["action_layer_num"], r["hidden_size"], r["num_attention_heads"],
        r["intermediate_size"], r["encoder_num_hidden_layers"], g["n_positions"], 0.0,
        r["const_size"], r["decoder_num_hidden_layers"], r["window_size"],
        r["parser_input_dim"], r["parser_hidden_dim"], r["parser_num_layers"],
        r["parser_nhead"], r["parser_max_len"]).to(dtype).train()
    state = torch.load(FIXTURES / "training_weights.pt", weights_only=True)
    model.load_state_dict(released_structured_state_dict(state), strict=True)
    return model


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, SENTENCES))
    return (torch.tensor([s + [0] * (width - len(s)) for s in SENTENCES]),
            torch.tensor([len(s) for s in SENTENCES]))


def released_split_targets(spans: list[tuple[int, int]]) -> list[int]:
    """The released ``split_targets`` order: the splits top-down, the right child first."""
    children = {spans[t]: (spans[t - 1][0] - 1) for t in range(len(spans))
                if spans[t][0] < spans[t][1]}
    out, stack = [], [spans[-1]]
    while stack:
        i, j = stack.pop()
        if i < j:
            k = children[i, j]
            out.append(k)
            stack.extend([(i, k), (k + 1, j)])
    return out


@pytest.mark.parametrize("run", RELEASED["runs"], ids=lambda r: f"seed{r['seed']}")
def test_the_training_forward_equals_the_released_code(run: dict) -> None:
    model = released_model()
    words, lengths = batch()
    torch.manual_seed(run["seed"])  # the parser's noise is the first draw, as released
    out = model(words, lengths, noise=run["coeff"], temperature=run["temperature"])
    expected = {"words": "gpt_loss", "actions": "action_loss", "parser": "parser_loss",
                "inside_outside": "inside_outside_loss", "loss": "loss"}
    for ours, theirs in expected.items():
        assert abs(getattr(out, ours).item() - run[theirs]) < 1e-10, ours
    assert out.height.item() == 0.0  # every sentence is under the height threshold 15
    for b, spans in enumerate(out.trees):
        n = len(SENTENCES[b])
        assert released_split_targets(spans) == run["split_targets"][b][:n - 1]
        assert out.tree_actions[b] == span_actions(spans)
        assert len(spans) == 2 * n - 1


@pytest.mark.parametrize("run", RELEASED["runs"], ids=lambda r: f"seed{r['seed']}")
def test_parser_and_chart_equal_the_released_code(run: dict) -> None:
    model = released_model()
    words, lengths = batch()
    with torch.no_grad():
        scores = model.parser.scores(words, lengths)
    torch.testing.assert_close(scores, torch.tensor(run["split_scores"], dtype=torch.float64),
                               rtol=0, atol=1e-12)
    orders = [row[:len(s) - 1] for row, s in zip(run["merge_order"], SENTENCES)]
    if run["coeff"] == 0:
        assert model.eval().parser.merge_orders(scores, lengths) == orders
    chart = build_chart(lengths.tolist(), orders, RELEASED["r2d2_config"]["window_size"])
    ours = [[[c.b, c.i, c.j, c.splits] for c in (chart.cells[t] for t in step.targets.tolist())]
            for step in chart.steps]
    assert ours == run["chart"]


def test_the_trained_parts_get_gradients_and_float32_runs() -> None:
    model = released_model(torch.float32)
    words, lengths = batch()
    out = model(words, lengths, noise=0.0)
    out.loss.backward()
    for name in ("parser.score.0.weight", "inside_outside.left_score.0.weight",
                 "inside_outside.parent_out.0.weight", "inside_outside.root",
                 "generative.compose.layers.0.ffn_in.weight", "generative.up.weight",
                 "outside_head.0.weight"):
        grad = model.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, name
    assert abs(out.loss.item() - RELEASED["runs"][0]["loss"]) < 1e-4


def test_one_word_sentences_and_merge_spans() -> None:
    model = released_model()
    out = model(torch.tensor([[5, 0, 0], [3, 9, 4]]), torch.tensor([1, 3]), noise=0.0)
    assert out.tree_actions[0] == [SHIFT] and len(out.tree_actions[1]) == 5
    assert torch.isfinite(out.loss)
    assert merge_spans([1, 0, 2], 4) == [(1, 2), (0, 2), (0, 3)]
    with pytest.raises(ValueError, match="permutation"):
        build_chart([3], [[0, 0]])


def test_binary_actions_of_a_gold_tree_and_back() -> None:
    tree = Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat)) "
                           "(PP (IN on) (NN mat))))")
    actions = binary_actions(tree)
    assert actions == [0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    assert str(actions_tree(actions, tree.leaves())) == (
        "(X (X the dog) (X saw (X (X a cat) (X on mat))))")
    splits = {(0, 3): 1, (0, 1): 0, (2, 3): 2}
    spans = postorder(4, lambda i, j: splits[i, j])
    assert spans == [(0, 0), (1, 1), (0, 1), (2, 2), (3, 3), (2, 3), (0, 3)]
    assert span_actions(spans) == [SHIFT, SHIFT, REDUCE, SHIFT, SHIFT, REDUCE, REDUCE]
    with pytest.raises(InputError, match="REDUCE with 1"):
        actions_tree([SHIFT, REDUCE], ["a"])
    with pytest.raises(InputError, match="split 3 of span"):
        postorder(2, lambda i, j: 3)


#: released parameter -> ours, for the recorded gradients (GPT-2's none among them).
GRADIENTS = {
    "r2d2.parser.score_mlp.0.weight": "parser.score.0.weight",
    "r2d2.parser.encoder.layers.0.attention.wq.weight": "parser.layers.0.wq.weight",
    "r2d2.inside_enc.left_linear.0.weight": "inside_outside.left_score.0.weight",
    "r2d2.inside_enc.layers.0.linear1.weight": "generative.compose.layers.0.ffn_in.weight",
    "r2d2.outside_enc.layers.0.linear1.weight": "inside_outside.outside_layers.0.ffn_in.weight",
    "r2d2.outside_enc.parent_linear.0.weight": "inside_outside.parent_out.0.weight",
    "r2d2.outside_root_embedding": "inside_outside.root",
    "up_scale.weight": "generative.up.weight", "down_scale.weight": "generative.down.weight",
    "classifier.weight": "generative.embedding.weight",
    "insideoutside_dense.0.weight": "outside_head.0.weight",
    "action_mlp.4.weight": "generative.action_head.4.weight",
    "dense.0.weight": "generative.word_head.0.weight",
}


@pytest.mark.parametrize("mode", ["sum", "split"])
def test_gradients_equal_the_released_trainers(mode: str) -> None:
    """``sum``: trainer/ddp_trainer.py (one backward of the sum); ``split``: the GPST-small
    script's trainer/ddp_trainer_nosync.py (the structural loss, then the generative loss
    with the weighted sums' split weights cut off)."""
    model = released_model()
    words, lengths = batch()
    out = model(words, lengths, noise=0.0)
    if mode == "sum":
        out.loss.backward()
    else:
        out.structural.backward(retain_graph=True)
        with model.inside_outside.weights_frozen():
            out.generative.backward()
    for theirs, ours in GRADIENTS.items():
        expected = torch.tensor(RELEASED["grads"][mode][theirs], dtype=torch.float64)
        torch.testing.assert_close(model.get_parameter(ours).grad, expected, rtol=0,
                                   atol=1e-10, msg=ours)
