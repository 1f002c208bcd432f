"""StructFormer (Shen et al. 2021): equal to the released code on a fixture, its distributions,
its structures decoded as the released evaluation decodes them, padding invariance, training.

The fixture (tests/fixtures/structformer/) was written by the released code,
google-research's ``structformer/`` as in github.com/yikangshen/UDGN at commit
17f03ddff2df4570db4e0eae151f06f6c12f9a2c ("initial code": ``structformer.py``,
``layers.py``, ``tree_utils.py``), run unpatched on torch 2.13 with
``torch.set_default_dtype(torch.float64)``: ``StructFormer(hidden_size=16, nlayers=2,
ntokens=24, nhead=2, dropout=0, dropatt=0, relative_bias=True, pos_emb=True, pad=1,
n_parser_layers=2, conv_size=9, relations=('head', 'child'), weight_act='softmax')`` after
``torch.manual_seed(0)``, its zero-initialised scalers, relative biases and biases then drawn
from N(0, 0.5²) / N(0, 0.1²) so that every term counts. ``weights.pt`` is its state dict;
``outputs.json`` holds, for four sentences (ids 3..23, ``<mask>`` = 2 at ``masked_positions``)
each run alone (batch size 1, as the released ``test_phrase_grammar.py`` runs): the parser's
distances and heights, the parent and dependent distributions (``head``, ``child``), each
layer's dependency masks (``att_mask``) and attention weights (the input of its attention
dropout), the logits, the masked-LM loss (``nn.CrossEntropyLoss(ignore_index=pad)`` over the
four sentences' masked words), and for the sentences unmasked the trees of
``tree_utils.build_tree`` (as ``tree_utils.mrg`` writes them, words ``w<id>``) and the heads
of ``test_phrase_grammar.test`` (argmax of ``head`` + 1, 0 for the highest word).
``loss_batched_released`` is the released loss with the four sentences in one padded batch,
which differs (its calibration margin is the batch's, and its relative bias of a head is
another head's when B > 1); synlm's batched rows equal the released sentences alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from nltk import Tree

from conftest import at_each_validation, fit_tiny_masked, run_cli
from synlm.backbones import StructFormer
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.loading import load_model
from synlm.metrics.structures import decode_heads
from synlm.model import SyntaxModel
from synlm.modules.structformer_parser import (
    constituent_probabilities,
    head_probabilities,
    parent_distribution,
)
from synlm.outputs import Batch
from synlm.syntax import distances_to_tree

FIXTURE = Path(__file__).parent / "fixtures" / "structformer"
EOS = 1  # any id: the token in front of a row takes no part

#: released parameter name prefix -> synlm's (SyntaxModel: embedding, decoder, backbone.*)
NAMES = [
    ("emb.", "embedding."), ("output_layer.", "decoder."),
    ("pos_emb.", "backbone.positions."), ("_rel_weight", "backbone.relation_logits"),
    ("_scaler", "backbone.log_scales"), ("norm.", "backbone.norm."),
    ("distance_ff.0.conv.", "backbone.parser.distance_conv.conv."),
    ("distance_ff.3.", "backbone.parser.distance_out."),
    ("height_ff.0.", "backbone.parser.height_in."),
    ("height_ff.3.", "backbone.parser.height_out."),
]
LAYER_NAMES = [
    ("self_attn.q_proj.", "attention.q."), ("self_attn.k_proj.", "attention.k."),
    ("self_attn.v_proj.", "attention.v."), ("self_attn.out_proj.", "attention.out."),
    ("self_attn.relative_bias", "attention.relative_bias"), ("feedforward.0.", "ffn_norm."),
    ("feedforward.1.", "fc1."), ("feedforward.4.", "fc2."), ("norm.", "attention_norm."),
]


def synlm_name(name: str) -> str:
    """The synlm name of a released parameter."""
    parts = name.split(".")
    if parts[0] == "parser_layers":  # parser_layers.i.0.conv.* -> parser.convs.i.conv.*
        return f"backbone.parser.convs.{parts[1]}.conv.{'.'.join(parts[4:])}"
    if parts[0] == "layers":
        rest = ".".join(parts[2:])
        for old, new in LAYER_NAMES:
            if rest.startswith(old):
                return f"backbone.layers.{parts[1]}.{new}{rest[len(old):]}"
    for old, new in NAMES:
        if name.startswith(old):
            return new + name[len(old):]
    raise KeyError(name)


@pytest.fixture(scope="module")
def released() -> dict:
    return json.loads((FIXTURE / "outputs.json").read_text())


def released_model(released: dict) -> SyntaxModel:
    c = released["config"]
    model = SyntaxModel(StructFormer(
        hidden_size=c["hidden_size"], num_layers=c["nlayers"], num_heads=c["nhead"],
        parser_layers=c["n_parser_layers"], conv_size=c["conv_size"], dropout=0.0,
        relative_bias=True, position_embedding=True), vocab_size=c["ntokens"]).double()
    state = torch.load(FIXTURE / "weights.pt", weights_only=True)
    mapped = {synlm_name(k): v for k, v in state.items()}
    assert set(mapped) == set(model.state_dict())
    model.load_state_dict(mapped)
    return model.eval()


def rows(sentences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[<eos>, w1..wn]`` right-padded with ``<eos>``, and their lengths."""
    T = max(map(len, sentences)) + 1
    tokens = torch.full((len(sentences), T), EOS, dtype=torch.long)
    for b, s in enumerate(sentences):
        tokens[b, 1:len(s) + 1] = torch.tensor(s)
    return tokens, torch.tensor([len(s) + 1 for s in sentences])


def masked_batch(released: dict) -> Batch:
    tokens, lengths = rows(released["sentences"])
    targets = tokens.clone()
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    for b, positions in enumerate(released["masked_positions"]):
        mask[b, [p + 1 for p in positions]] = True
    return Batch(tokens=tokens.masked_fill(mask, released["mask_id"]), targets=targets,
                 mask=mask, lengths=lengths)


def close(ours: torch.Tensor, theirs: object) -> None:
    torch.testing.assert_close(ours, torch.tensor(theirs, dtype=torch.float64),
                               rtol=0, atol=1e-10)


def test_equals_the_released_structformer(released: dict) -> None:
    """The four sentences in one padded batch: every intermediate of each row equals the
    released model's on that sentence alone (to 1e-10 in float64)."""
    model = released_model(released)
    batch = masked_batch(released)
    backbone = model.backbone
    with torch.no_grad():
        result = model(batch)
        x = model.embedding(batch.tokens)
        words = (torch.arange(x.size(1)) >= 1) & (torch.arange(x.size(1)) < batch.lengths[:, None])
        distance, height = backbone.parser(x, words)
        parent = parent_distribution(distance, height, backbone.log_scales.exp(), words)
        masks = backbone.dependency_masks(parent)  # (L, B, heads, T, T)
    out = result.backbone
    theirs = released["masked"]
    for b, sentence in enumerate(released["sentences"]):
        w = slice(1, len(sentence) + 1)
        close(distance[b, w], theirs["distance"][b])
        close(height[b, w], theirs["height"][b])
        close(out.distances[0, b, 2:len(sentence) + 1], theirs["distance"][b][:-1])
        close(parent[b, w, w], theirs["head"][b])
        close(out.arcs[b, w, w], theirs["head"][b])
        close(parent[b, w, w].T, theirs["child"][b])
        close(masks[:, b, :, w, w], theirs["att_mask"][b])
        close(torch.stack([out.head_attention[l][b, :, w, w] for l in range(2)]),
              theirs["attention"][b])
        close(result.logits[b, w], theirs["logits"][b])
    loss = F.cross_entropy(result.logits[batch.mask], batch.targets[batch.mask])
    assert loss.item() == pytest.approx(released["loss"], abs=1e-10)
    # SyntaxModel's log-probabilities of the targets are computed in float32
    assert -result.target_log_probs[batch.mask].mean().item() == pytest.approx(
        released["loss"], abs=1e-6)


def mrg(tree: Tree | str) -> str:
    """A tree as the released ``tree_utils.mrg`` writes it: ``( a ( b c ) )``."""
    if isinstance(tree, str):
        return tree
    return "( " + " ".join(mrg(child) for child in tree) + " )"


def test_structures_decode_to_the_released_trees_and_heads(released: dict) -> None:
    """The ``constituency`` distances through synlm's Algorithm 2 give the released
    ``build_tree`` trees; the ``dependency`` arcs through synlm's argmax decoder the released
    evaluation's heads (ROOT for the highest word)."""
    model = released_model(released)
    tokens, lengths = rows(released["sentences"])
    found = model.induce(tokens, lengths=lengths)
    assert set(found) == {"constituency", "dependency"}
    for b, sentence in enumerate(released["sentences"]):
        words = [f"w{t}" for t in sentence]
        n = len(sentence)
        tree = distances_to_tree(words, found["constituency"][0, b, 1:n + 1].numpy())
        assert mrg(tree) == released["trees"][b]
        assert decode_heads(found["dependency"][b], n) == released["heads"][b]
        close(found["constituency"][0, b, 2:n + 1], released["unmasked"]["distance"][b][:-1])


def test_the_distributions() -> None:
    """§4.2: p(l, r | i) is a distribution over the spans holding input i, p(j | l, r) over the
    inputs of [l, r]; a word's parent distribution plus the probability that it heads its own
    constituent is one. Each head's dependency mask is its convex mixture of p_p and p_d, and
    its attention lies between 0 and that mask, 0 towards a non-word."""
    torch.manual_seed(0)
    backbone = StructFormer(hidden_size=16, num_layers=2, num_heads=2, parser_layers=2,
                            conv_size=3, dropout=0.0).double().eval()
    with torch.no_grad():
        backbone.log_scales.normal_()
        x = torch.randn(3, 9, 16, dtype=torch.float64)
        lengths = torch.tensor([9, 6, 2])
        words = (torch.arange(9) >= 1) & (torch.arange(9) < lengths[:, None])
        distance, height = backbone.parser(x, words)
        scales = backbone.log_scales.exp()
        block = constituent_probabilities(distance, height, scales[0])  # (B, i, l, r)
        head = head_probabilities(height, scales[1])  # (B, l, r, j)
        parent = parent_distribution(distance, height, scales, words)
        out = backbone(x, lengths=lengths)
    index = torch.arange(9)
    spans = (index[:, None] <= index[None, :])
    torch.testing.assert_close(block.sum((2, 3))[words], torch.ones(int(words.sum()),
                                                                  dtype=torch.float64))
    holds = (index[None, :, None] <= index[:, None, None]) & (index[:, None, None] <= index)
    assert (block * ~holds).abs().max() == 0  # only spans l <= i <= r
    torch.testing.assert_close(head.sum(-1)[:, spans], torch.ones(3, int(spans.sum()),
                                                                 dtype=torch.float64))
    self_head = torch.einsum("bilr,blri->bi", block, head)
    torch.testing.assert_close((parent.sum(-1) + self_head)[words],
                               torch.ones(int(words.sum()), dtype=torch.float64))
    assert parent[~words].abs().max() == 0 and parent.transpose(1, 2)[~words].abs().max() == 0
    weights = backbone.relation_weights()  # (L, heads, 2)
    masks = backbone.dependency_masks(parent)
    mixture = torch.einsum("lh,bij->lbhij", weights[..., 0], parent) + torch.einsum(
        "lh,bji->lbhij", weights[..., 1], parent)
    torch.testing.assert_close(masks, mixture)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, dtype=torch.float64))
    for l in range(2):
        attention = out.head_attention[l]
        assert (attention >= 0).all() and (attention <= masks[l] + 1e-15).all()
        assert attention.transpose(-1, -2)[~words[:, None].expand(-1, 2, -1)].abs().max() == 0
    arcs = out.arcs
    assert ((arcs[:, :, 0] == 1) == (words & (height == height.masked_fill(
        ~words, -1e30).amax(-1, keepdim=True)))).all()


def tiny_backbone(dropout: float = 0.0) -> StructFormer:
    torch.manual_seed(0)
    return StructFormer(hidden_size=16, num_layers=2, num_heads=2, parser_layers=2,
                        conv_size=5, dropout=dropout, relative_bias=True).double()


def test_a_row_does_not_depend_on_its_batch() -> None:
    """A row alone, and the same row padded further in a batch beside others: the same
    hidden states, structures and attention over its own inputs; nothing towards padding."""
    backbone = tiny_backbone().eval()
    x = torch.randn(3, 10, 16, dtype=torch.float64)
    lengths = torch.tensor([6, 10, 3])
    batched = backbone(x, lengths=lengths)
    for b in range(3):
        n = int(lengths[b])
        alone = backbone(x[b:b + 1, :n], lengths=lengths[b:b + 1])
        for ours, theirs in [(batched.hidden[b, :n], alone.hidden[0]),
                             (batched.distances[:, b, :n], alone.distances[:, 0]),
                             (batched.arcs[b, :n, :n], alone.arcs[0]),
                             (batched.head_attention[1][b, :, :n, :n],
                              alone.head_attention[1][0])]:
            torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
        assert (batched.arcs[b, :, n:] == 0).all()
        assert (batched.head_attention[0][b, :, :, n:] == 0).all()


def test_in_training_a_row_does_not_depend_on_the_others() -> None:
    """With dropout and the same seed, changing the other rows and this row's padding leaves
    its outputs as they were."""
    backbone = tiny_backbone(dropout=0.3).train()
    x = torch.randn(3, 8, 16, dtype=torch.float64)
    lengths = torch.tensor([5, 8, 3])
    other = x.clone()
    other[1:] = torch.randn(2, 8, 16, dtype=torch.float64)
    other[0, 5:] = 7.0
    outs = []
    for inputs, sizes in [(x, lengths), (other, torch.tensor([5, 4, 8]))]:
        torch.manual_seed(1)
        outs.append(backbone(inputs, lengths=sizes))
    torch.testing.assert_close(outs[0].hidden[0, :5], outs[1].hidden[0, :5], rtol=0, atol=1e-12)
    torch.testing.assert_close(outs[0].arcs[0], outs[1].arcs[0], rtol=0, atol=1e-12)


def test_bad_settings_are_one_line() -> None:
    with pytest.raises(ValueError, match="relations must be distinct names"):
        StructFormer(hidden_size=8, num_heads=2, relations=("head", "parent"))
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        StructFormer(hidden_size=10, num_heads=4)
    with pytest.raises(ValueError, match="weight_act"):
        StructFormer(hidden_size=8, num_heads=2, weight_act="tanh")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``synlm fit --config structformer.yaml`` on the synthetic treebank with the model cut
    down, 4 epochs: its run folder."""
    return fit_tiny_masked(tmp_path_factory.mktemp("structformer"), "structformer.yaml",
                           "--model.backbone.init_args.hidden_size=16",
                           "--model.backbone.init_args.num_layers=2",
                           "--model.backbone.init_args.num_heads=2",
                           "--model.backbone.init_args.parser_layers=2",
                           "--model.backbone.init_args.conv_size=3")


def test_a_tiny_structformer_lowers_its_masked_loss(trained: Path) -> None:
    """The validation masked-LM loss (the same masks at every evaluation) falls every epoch."""
    losses = at_each_validation(trained)
    assert len(losses) == 4 and losses == sorted(losses, reverse=True), losses
    assert losses[-1] < losses[0] - 0.2, losses


def test_synlm_parse_lists_both_structures(trained: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert run_cli(["parse", "--ckpt_path", str(trained), "--list_structures"]) == 0
    assert json.loads(capsys.readouterr().out) == {"constituency": "distances",
                                                   "dependency": "arcs"}


def test_synlm_parse_writes_both_structures(trained: Path, tmp_path: Path) -> None:
    """``synlm parse --input`` writes a binary tree over the words (``constituency``) and the
    heads (``dependency``: one ROOT, no word its own head), the same as the model induces on
    the sentence's row ``[<eos>, w1..wn]`` alone (the row parse reads ends with another
    ``<eos>``, outside the length it gives)."""
    words = ["the", "dog", "saw", "a", "cat"]
    (tmp_path / "in.txt").write_text(" ".join(words) + "\n")
    found = {}
    for structure in ("constituency", "dependency"):
        out = tmp_path / f"{structure}.txt"
        assert run_cli(["parse", "--ckpt_path", str(trained), "--structure", structure,
                        "--input", str(tmp_path / "in.txt"), "--output", str(out)]) == 0
        (found[structure],) = out.read_text().splitlines()
    tree = Tree.fromstring(found["constituency"])
    assert tree.leaves() == words
    assert all(len(t) == 2 for t in tree.subtrees() if t.height() > 2)
    heads = [int(h) for h in found["dependency"].split()]
    assert heads.count(0) == 1 and all(h != d for d, h in enumerate(heads, 1))
    model = load_model(str(trained))
    tokens = torch.tensor([[model.vocab.eos_id, *model.vocab.encode(words)]])
    induced = model.induce(tokens, torch.tensor([len(words) + 1]))
    assert decode_heads(induced["dependency"][0], len(words)) == heads
    assert distances_to_tree(words, induced["constituency"][0, 0, 1:].numpy()) == tree


def test_validation_scores_the_structures_of_the_unmasked_sentences(trained: Path) -> None:
    """``val/uf1_constituency`` and ``val/uas_dependency`` of a masked LM score what the model
    induces on each validation sentence as written (what ``synlm parse`` reads), not on its
    masked row."""
    from synlm.metrics.structures import InducedStructureMetrics

    lm = load_model(str(trained))
    data = SynLMDataModule(SyntheticTreebank(n_train=64, n_valid=16, n_test=8),
                           mode="sentence", eval_mode="sentence", objective="masked")
    data.setup("validate")
    assert data.vocab.itos == lm.vocab.itos
    batch = next(iter(data.val_dataloader()))
    assert batch.mask.any()
    lm._eval_step(batch, "val")
    words = torch.where(batch.mask, batch.targets, batch.tokens)
    scored = {}
    for tokens in (words, batch.tokens):
        metrics = InducedStructureMetrics()
        metrics.update(lm.model.structure_values(lm.model.evaluate(tokens, lengths=batch.lengths)),
                       batch.trees)
        scored[tokens is words] = metrics.compute()
    logged = lm.parsing["val"].compute()
    assert logged == scored[True] and logged != scored[False]
