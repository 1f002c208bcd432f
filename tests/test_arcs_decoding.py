"""The decoders of an ``arcs`` structure (``synlm.metrics.arcs``, ``decode_heads``,
``synlm parse --arcs-decoder``): the argmax per word and the best single-rooted maximum
spanning tree. The tree decoder's equality to UDGN's released ``dms`` is in
``tests/test_udgn.py``; here it is checked against every single-rooted tree of small
sentences, and its trees' shape on random scores."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_attachment import LeftChainLM

from synlm.commands import parse
from synlm.metrics.arcs import ARC_DECODERS, TREE_EPS, arborescence, argmax_heads
from synlm.metrics.structures import decode_heads
from synlm.parsing import model_heads, tree_dependency_scores
from synlm.syntax import read_trees

FIXTURE = Path(__file__).parent / "fixtures" / "attachment"


def random_arcs(n: int, generator: torch.Generator, pad: int = 0) -> torch.Tensor:
    """(n + 1 + pad, n + 1 + pad) float64 arc values in the ``arcs`` layout: each word's row
    a distribution over ROOT and the words (3·N(0, 1) logits), row 0 and the padding zero."""
    T = n + 1 + pad
    values = torch.zeros(T, T, dtype=torch.float64)
    logits = 3 * torch.randn(n, n + 1, generator=generator, dtype=torch.float64)
    values[1:n + 1, :n + 1] = logits.softmax(-1)
    return values


def is_single_rooted_tree(heads: list[int]) -> bool:
    """Exactly one word on ROOT (0) and every word reaches ROOT without a cycle."""
    n = len(heads)
    if sorted(heads).count(0) != 1 or not all(0 <= h <= n for h in heads):
        return False
    for d in range(1, n + 1):
        seen, node = set(), d
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node - 1]
    return True


def tree_score(values: torch.Tensor, heads: list[int]) -> float:
    """Σ_d log(values[d, h_d] + 10⁻⁹), in float64."""
    return float(sum(np.log(values[d, h].item() + TREE_EPS) for d, h in enumerate(heads, 1)))


@pytest.mark.parametrize("n", range(1, 21))
def test_the_tree_decoder_gives_a_single_rooted_tree(n: int) -> None:
    """On random scores (padding past n included) every word reaches ROOT, one word hangs
    from it, and there is no cycle, where the argmax heads often are no tree."""
    gen = torch.Generator().manual_seed(n)
    for _ in range(5):
        values = random_arcs(n, gen, pad=2)
        heads = decode_heads(values, n, "tree")
        assert len(heads) == n and is_single_rooted_tree(heads), heads
        assert decode_heads(values[:n + 1, :n + 1], n, "tree") == heads  # padding unread


@pytest.mark.parametrize("n", range(1, 7))
def test_the_tree_decoder_finds_the_best_single_rooted_tree(n: int) -> None:
    """Against every head assignment of n ≤ 6 words that is a single-rooted tree: the decoded
    tree is the one of greatest score (random scores: one best tree), and it scores at least
    what the argmax heads score only when those heads are such a tree."""
    gen = torch.Generator().manual_seed(100 + n)
    for _ in range(3):
        values = random_arcs(n, gen)
        trees = [list(h) for h in itertools.product(range(n + 1), repeat=n)
                 if all(h[d] != d + 1 for d in range(n)) and is_single_rooted_tree(list(h))]
        best = max(trees, key=lambda h: tree_score(values, h))
        heads = decode_heads(values, n, "tree")
        assert heads == best
        argmax = decode_heads(values, n)
        if is_single_rooted_tree(argmax):
            assert argmax == heads
        else:
            assert tree_score(values, argmax) > tree_score(values, heads)


def test_arborescence_on_a_cycle() -> None:
    """Words 1 and 2 prefer each other (a cycle); rooted at word 0 the cycle is broken where
    it loses least: 2 takes 0 (log score −1 against its cycle arc's 0) and 1 keeps 2."""
    score = np.array([[-np.inf, -5.0, -5.0],
                      [-5.0, -np.inf, 0.0],
                      [-1.0, 0.0, -np.inf]])
    assert arborescence(score, 0).tolist() == [-1, 2, 0]


def test_the_argmax_decoder_is_the_default_and_the_row_argmax() -> None:
    """``decode_heads`` without a decoder is each word's argmax over ROOT and the other words
    (its own column excluded, padding unread); an unknown decoder is a ValueError."""
    values = torch.tensor([[0.0, 0.0, 0.0, 0.0],
                           [0.1, 0.9, 0.5, 0.0],   # word 1: itself excluded -> word 2
                           [0.2, 0.7, 0.0, 0.9],   # word 2: column 3 is padding -> word 1
                           [0.0, 0.0, 0.0, 0.0]])
    assert decode_heads(values, 2) == argmax_heads(values, 2) == [2, 1]
    assert decode_heads(values, 2, "tree") == [2, 0]
    with pytest.raises(ValueError, match="no arc decoder 'mst'"):
        decode_heads(values, 2, "mst")


def test_the_decoders_offered_are_the_metrics_own() -> None:
    """``--arcs-decoder``'s choices are named without importing the metrics (torch)."""
    assert ARC_DECODERS == parse.ARC_DECODERS


def test_the_flag_is_refused_where_nothing_decodes_arcs(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert parse.main(["--baseline", "right-branching", "--treebank",
                       str(FIXTURE / "gold.mrg"), "--arcs-decoder", "tree"]) == 2
    assert capsys.readouterr().err.strip() == (
        "synlm parse: --arcs-decoder decodes a model's arcs structure: give --ckpt_path or "
        "--config")
    with pytest.raises(SystemExit, match="2"):
        parse.main(["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"),
                    "--arcs-decoder", "mst"])
    assert "invalid choice: 'mst'" in capsys.readouterr().err


def test_parse_records_the_decoder(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON of an arcs structure on constituency trees names its decoder; the tree
    decoder's figures are those of its heads (``model_heads(..., decoder="tree")``)."""
    monkeypatch.setattr("synlm.loading.load_model", lambda path: LeftChainLM())
    args = ["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg")]
    for decoder in ("argmax", "tree"):
        assert parse.main([*args, "--arcs-decoder", decoder]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["arcs_decoder"] == decoder
    model = LeftChainLM()
    assert model_heads(model, [["a", "b", "c"]], "arcs", decoder="tree") == [[0, 1, 2]]
    trees = [t for t, _ in read_trees(FIXTURE / "gold.mrg")]
    want = tree_dependency_scores(model, "arcs", trees, decoder="tree")
    assert want is not None and {k: got[k] for k in want} == want
