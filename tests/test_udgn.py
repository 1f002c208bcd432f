"""UDGN (Shen et al. 2022) against the released code, and its contracts.

``tests/fixtures/udgn/udgn_reference.pt`` was written by running the released code,
github.com/yikangshen/UDGN at commit 1bd52ecc7b348ca591957f8001867a273e080929
(``models.UDGN``, ``layers.DGNLayer``, ``test_phrase_grammar.dms`` with ufal.chu_liu_edmonds
1.0.3), unpatched, with this repository's torch, in float64: ``UDGN(emb_size=16,
head_size=4, nlayers=2, ntokens=12, nhead=2, dropout=0, parser_dropout=0, dropatt=0,
pos_emb=False, pad=1, n_parser_layers=2)``, every parameter moved off its initialisation by
N(0, 0.1²) noise (N(0, 1) on ``parser_ff``, for varied trees) under ``torch.manual_seed(0)``,
in eval mode; four rows of 6, 5, 3 and 2 words padded with ``<pad>`` (id 1), six positions
replaced by ``<mask>`` (id 2). It holds the state dict and, for the masked rows, the parser's
p and logits, the dependency probabilities, the head distribution, every layer's output,
attention and gates σ(g) (read by a hook on the projection), the logits of every position and
the masked-LM loss (the mean cross-entropy over the masked positions); for the unmasked rows,
one sentence a batch as ``test_phrase_grammar.test`` runs them, the heads of its ``tree``
(Chu-Liu-Edmonds) and ``argmax`` rules; and 20 random head distributions (3·N(0, 1) logits,
sizes 1 to 12) with their ``dms`` heads. The released code's own evaluation was called as
``dms`` directly: ``test()`` converts with ``numpy.float``, which numpy 2 no longer has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from conftest import at_each_validation, fit_tiny_masked, run_cli
from synlm.backbones import UDGN
from synlm.metrics.structures import decode_heads
from synlm.model import SyntaxModel
from synlm.outputs import Batch

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "udgn" / "udgn_reference.pt"
TINY = dict(head_size=4, num_layers=2, num_heads=2, parser_layers=2)


@pytest.fixture(scope="module")
def ref() -> dict[str, Any]:
    return torch.load(FIXTURE, weights_only=True)


def released_names(name: str) -> str:
    """The synlm ``SyntaxModel`` parameter that holds the released ``UDGN``'s ``name``."""
    if name.startswith("layers."):
        return "backbone." + name.replace("self_attn.", "attention.").replace(
            "rels_bias", "rel_bias")
    for old, new in (("parser_layers.", "backbone.parser.lstm."),
                     ("parser_ff.", "backbone.parser.ff."), ("norm.", "backbone.norm."),
                     ("output_layer.bias", "decoder.bias")):
        if name.startswith(old):
            return name.replace(old, new)
    raise KeyError(name)


def released_model(ref: dict[str, Any]) -> SyntaxModel:
    """A float64 ``SyntaxModel`` holding the fixture's weights: the embedding is
    [emb | parser_emb], the released output layer the tied decoder with its bias."""
    sd = ref["state_dict"]
    model = SyntaxModel(UDGN(emb_size=16, dropout=0.0, dropout_parser=0.0,
                             dropout_attention=0.0, **TINY), vocab_size=12).double().eval()
    assert torch.equal(sd["output_layer.weight"], sd["emb.weight"])  # tied in the release
    state = {released_names(k): v for k, v in sd.items()
             if k not in ("emb.weight", "parser_emb.weight", "output_layer.weight")}
    state["embedding.weight"] = torch.cat([sd["emb.weight"], sd["parser_emb.weight"]], dim=1)
    state["decoder.weight"] = state["embedding.weight"]
    model.load_state_dict(state, strict=True)
    return model


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=0.0, atol=1e-10)


EOS = 4  # any id: the leading <eos> of a synlm row, which UDGN leaves out


def with_eos(rows: torch.Tensor) -> torch.Tensor:
    """Rows ``[<eos>, w1..wn]`` of the released rows ``[w1..wn]`` (B, T) -> (B, T + 1)."""
    return torch.cat([torch.full_like(rows[:, :1], EOS), rows], dim=1)


def test_equals_the_released_code(ref: dict[str, Any]) -> None:
    """Over synlm's rows ``[<eos>, w1..wn]``, the parser, the dependency graph, each layer's
    output, attention and gates, the logits and the masked-LM loss equal what the released
    code computes over ``[w1..wn]``, to 1e-10 (float64)."""
    model = released_model(ref)
    tokens, lengths = with_eos(ref["tokens"]), ref["lengths"] + 1
    run = model.backbone.run(model.embedding(tokens), lengths)
    valid = torch.arange(ref["tokens"].size(1))[None, :] < ref["lengths"][:, None]  # (B, N)
    close(run.p[valid], ref["p"][valid])
    close(run.parser_logits, ref["parser_logits"])
    close(run.dep, ref["dependency"])
    close(run.head, ref["head"])
    for layer in range(2):
        close(run.layers[layer], ref["layers"][layer + 1])
        close(run.attention[layer], ref["attention"][layer])
        close(run.gates[layer].flatten(2), ref["gates"][layer])
    masked = F.pad(ref["masked_at"], (1, 0), value=False)  # the <eos> is never masked
    targets = with_eos(ref["words"])
    batch = Batch(tokens=tokens, targets=targets, mask=masked, lengths=lengths)
    out = model(batch)
    close(out.logits[:, 1:], ref["logits"])
    loss = F.cross_entropy(out.logits[masked], targets[masked])  # float64
    close(loss, ref["loss"])
    assert abs(loss.item() - 2.6016446243638742) < 1e-12
    # SyntaxModel's own log-probabilities (computed in float32)
    assert abs(-out.target_log_probs[masked].mean().item() - ref["loss"].item()) < 1e-6
    close(out.backbone.arcs[:, 1:, 1:], ref["head"])
    assert torch.all(out.backbone.arcs[:, 0] == 0) and torch.all(out.backbone.arcs[:, :, 0] == 0)
    assert torch.all(out.backbone.hidden[:, 0] == 0)


def test_heads_are_the_released_evaluations(ref: dict[str, Any]) -> None:
    """The ``tree`` decoder on the ``dep`` arcs is ``test_phrase_grammar.dms``
    (Chu-Liu-Edmonds, the best single root; the released root heads itself, here 0 = ROOT) on
    the fixture's sentences and on 20 random distributions (under a zero ROOT column, as
    ``dep`` has); the ``argmax`` decoder is its ``argmax`` rule."""
    model = released_model(ref)
    lengths = ref["lengths"]
    arcs = model.induce(with_eos(ref["words"]), lengths + 1)["dep"]  # (B, T, T)
    close(arcs[:, 1:, 1:], ref["plain_head"])

    def released(heads: list[int]) -> list[int]:  # 1-based, 0 = ROOT -> 0-based, root: itself
        return [d if h == 0 else h - 1 for d, h in enumerate(heads)]

    for b, n in enumerate(lengths.tolist()):
        assert released(decode_heads(arcs[b], n, "tree")) == ref["heads_tree"][b]
        assert released(decode_heads(arcs[b], n)) == ref["heads_argmax"][b]
    assert ref["heads_tree"] == [[3, 3, 3, 3, 2, 2], [2, 2, 2, 2, 2], [1, 1, 1], [1, 1]]
    assert len(ref["mst_cases"]) == 20
    for case in ref["mst_cases"]:
        head = F.pad(case["head"], (1, 0, 1, 0))  # (n + 1, n + 1): a zero ROOT row and column
        assert released(decode_heads(head, head.size(0) - 1, "tree")) == case["heads"]


def tiny_model(seed: int = 0) -> SyntaxModel:
    torch.manual_seed(seed)
    return SyntaxModel(UDGN(emb_size=8, **TINY), vocab_size=20).double()


def test_a_row_reads_the_same_alone_and_padded() -> None:
    """A row's outputs and arcs within its length do not depend on its padding (its content
    or how far it reaches) nor on the other rows of its batch, in eval mode."""
    model = tiny_model().eval()
    gen = torch.Generator().manual_seed(3)
    rows = [torch.cat([torch.tensor([0]), torch.randint(3, 20, (n,), generator=gen)])
            for n in (7, 4, 1)]  # [<eos>, w1..wn]
    T = 9
    tokens = torch.randint(0, 20, (3, T), generator=gen)  # padding: random tokens
    for b, row in enumerate(rows):
        tokens[b, :len(row)] = row
    lengths = torch.tensor([len(r) for r in rows])
    batched = model.evaluate(tokens, lengths=lengths)
    for b, row in enumerate(rows):
        n = len(row)
        alone = model.evaluate(row[None, :], lengths=torch.tensor([n]))
        torch.testing.assert_close(batched.logits[b, :n], alone.logits[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(batched.backbone.arcs[b, :n, :n], alone.backbone.arcs[0],
                                   rtol=0, atol=1e-12)
        assert torch.all(batched.backbone.arcs[b, :, n:] == 0)


def test_the_dep_structure_is_the_head_distribution() -> None:
    """``induce`` gives ``dep`` (arcs): p(h | d) over the words of the row without d itself
    (with it, each row sums to 1), zero at the ``<eos>`` (its row and the ROOT column);
    synlm's argmax decoder reads it."""
    model = tiny_model().eval()
    assert {n: s.kind for n, s in model.structures.items()} == {"dep": "arcs"}
    tokens = torch.tensor([[0, 5, 6, 7, 8], [0, 9, 10, 0, 0]])
    lengths = torch.tensor([5, 3])
    arcs = model.induce(tokens, lengths)["dep"]  # (B, T, T)
    p = model.backbone.run(model.embedding(tokens), lengths).p  # (B, T-1, T-1)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 4, dtype=torch.float64))
    torch.testing.assert_close(arcs[:, 1:, 1:], p - torch.diag_embed(p.diagonal(dim1=1, dim2=2)))
    assert torch.all(arcs[:, 0] == 0) and torch.all(arcs[:, :, 0] == 0)
    assert torch.all(arcs[1, :, 3:] == 0)
    heads = decode_heads(arcs[0], 4)
    assert len(heads) == 4 and all(1 <= h <= 4 and h != d for d, h in enumerate(heads, 1))


def test_the_parser_half_of_the_embedding_learns_through_the_parser_alone() -> None:
    """``hidden`` is [h; 0]: the tied decoder gives the parser embedding (columns E:) no
    gradient of its own; the masked loss reaches it through the parser, for the words (not
    the leading ``<eos>``)."""
    model = tiny_model().eval()
    tokens = torch.tensor([[0, 5, 2, 7]])
    batch = Batch(tokens=tokens, targets=torch.tensor([[0, 5, 6, 7]]),
                  mask=torch.tensor([[False, False, True, False]]), lengths=torch.tensor([4]))
    out = model(batch)
    assert torch.all(out.backbone.hidden[..., 8:] == 0)
    loss = -out.target_log_probs[batch.mask].sum()
    grad = torch.autograd.grad(loss, model.embedding.weight)[0]  # (V, 2E)
    parser_rows = grad[:, 8:].abs().sum(-1)
    assert torch.all(parser_rows[[2, 5, 7]] > 0)  # the words the parser read
    assert torch.all(parser_rows[[0, 1, 3, 4, 6, 8]] == 0)
    assert torch.all(grad[:, :8].abs().sum(-1) > 0)  # the decoder's rows: every word


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``synlm fit --config udgn.yaml`` on the synthetic treebank with the model cut down,
    4 epochs: its run folder."""
    return fit_tiny_masked(tmp_path_factory.mktemp("udgn"), "udgn.yaml",
                           "--model.backbone.init_args.emb_size=16",
                           "--model.backbone.init_args.head_size=4",
                           "--model.backbone.init_args.num_layers=2",
                           "--model.backbone.init_args.num_heads=2",
                           "--model.backbone.init_args.parser_layers=2")


def test_a_tiny_udgn_lowers_its_masked_loss(trained: Path) -> None:
    """The validation masked-LM loss (the same masks at every evaluation) falls every epoch."""
    losses = at_each_validation(trained)
    assert len(losses) == 4 and losses == sorted(losses, reverse=True), losses
    assert losses[-1] < losses[0] - 0.2, losses


def test_synlm_parse_lists_the_dep_structure(trained: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert run_cli(["parse", "--ckpt_path", str(trained), "--list_structures"]) == 0
    assert capsys.readouterr().out.strip() == '{"dep": "arcs"}'


def test_synlm_parse_writes_the_heads_of_dep(trained: Path, tmp_path: Path) -> None:
    """``synlm parse --input`` writes each sentence's heads: the argmax of ``dep`` per word,
    never the word itself nor ROOT (the released ``argmax`` rule)."""
    (tmp_path / "in.txt").write_text("the dog saw a cat\n")
    out = tmp_path / "heads.txt"
    assert run_cli(["parse", "--ckpt_path", str(trained), "--input", str(tmp_path / "in.txt"),
                    "--output", str(out)]) == 0
    (line,) = out.read_text().splitlines()
    heads = [int(h) for h in line.split()]
    assert len(heads) == 5 and all(1 <= h <= 5 and h != d for d, h in enumerate(heads, 1))


def test_synlm_parse_decodes_trees_as_the_released_evaluation(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``synlm parse --arcs-decoder tree`` on the tiny UDGN: each sentence's heads are one
    tree with a single word on ROOT, the released evaluation's ``dms`` over the sentence's
    ``dep`` arcs; on bracketed trees the JSON names the decoder and the figures are those
    of the decoded trees."""
    from synlm.data.normalization import normalizer
    from synlm.loading import load_model
    from synlm.parsing import tree_dependency_scores
    from synlm.syntax import read_trees

    (tmp_path / "in.txt").write_text("the dog saw a cat\nthe cat\n")
    out = tmp_path / "heads.txt"
    capsys.readouterr()
    assert run_cli(["parse", "--ckpt_path", str(trained), "--input", str(tmp_path / "in.txt"),
                    "--output", str(out), "--arcs-decoder", "tree"]) == 0
    assert json.loads(capsys.readouterr().out) == {"n_sentences": 2, "output": str(out),
                                                   "arcs_decoder": "tree"}
    model = load_model(str(trained))
    normalize = normalizer(model.normalization)
    for line, words in zip(out.read_text().splitlines(), (["the", "dog", "saw", "a", "cat"],
                                                         ["the", "cat"])):
        heads = [int(h) for h in line.split()]
        assert heads.count(0) == 1 and len(heads) == len(words)
        ids = model.vocab.encode([normalize(w) for w in words])
        tokens = torch.tensor([[model.vocab.eos_id, *ids]])
        arcs = model.induce(tokens, torch.tensor([len(words) + 1]))["dep"][0]
        assert heads == decode_heads(arcs, len(words), "tree")
    gold = Path(__file__).parent / "fixtures" / "attachment" / "gold.mrg"
    assert run_cli(["parse", "--ckpt_path", str(trained), "--treebank", str(gold),
                    "--arcs-decoder", "tree"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (got["arcs_decoder"], got["n_sentences"], got["n_words"]) == ("tree", 14, 95)
    want = tree_dependency_scores(model, "dep", [t for t, _ in read_trees(gold)],
                                  decoder="tree")
    assert want is not None and {k: got[k] for k in want} == want
