"""UDGN: the Unsupervised Dependency Graph Network (Shen et al. 2022), a masked language
model whose attention reads the dependency graph its own parser induces.

A sentence's words go through two paths (the parts are in ``synlm.modules.udgn_parts``):

1. the dependency parser: a bidirectional LSTM over a second word embedding gives each word d
   a distribution p(h | d) over the words of its row (``DependencyParser``); without
   self-attachment this is ``head``, and the probability that two words are linked in
   either direction is dep(d, h) = head(d, h) + head(h, d) − head(d, h)·head(h, d)
   (``dependency_graph``);
2. the Dependency Graph Network: ``num_layers`` residual layers of competitive gated
   heads over the token embeddings (``DGNLayer``): for each pair (d, h) the heads compete
   through a softmax over the heads, the pair is read in proportion to dep(d, h), each head
   reads tanh(v) and gates what it read with σ(g); a final LayerNorm and dropout.

The masked-LM objective predicts each masked word from the top layer through the
tied decoder; the parser learns only through that loss.

What follows the released code (yikangshen/UDGN ``models.py`` ``UDGN``, ``layers.py``)
rather than what ``SyntaxModel`` does alone:

- the released model has two token embeddings, the language model's ``emb`` (tied to the
  output layer, which has a bias) and the parser's ``parser_emb``, both U(−0.1, 0.1).
  ``SyntaxModel``'s embedding holds both side by side, (V, 2E) = [emb | parser_emb] (its
  ``init_range: 0.1`` draws them as the released code does), and ``hidden`` is [h; 0]
  (B, T, 2E): the tied decoder computes h · embᵀ + b, the released output layer, and gives
  the parser's half no gradient of its own;
- the released rows are the words alone; synlm's sentence rows are ``[<eos>, w1..wn]``, and
  the backbone leaves the ``<eos>`` out, so that over the words it computes exactly what
  the released model computes (its outputs at position 0 are zero; the masked objective
  never masks it).

Structure: ``dep`` (kind ``arcs``), the parser's ``head``, ``[b, d, h]`` = p(h | d) over
the words (zero diagonal), with a zero ROOT column (position 0): decoded by synlm's argmax
per word it gives the released training log's ``argmax`` rule, which never attaches a word
to ROOT. The released evaluation (``test_phrase_grammar.py``, the README's figures) decodes
it with Chu-Liu-Edmonds and the best single root: ``synlm.metrics.arcs``' ``tree`` decoder
(``synlm parse --arcs-decoder tree``), which on the zero ROOT column is the released ``dms``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.backbones.base import Backbone, BackboneSpec
from synlm.errors import InputError
from synlm.modules.udgn_parts import (
    EDGE_EPS,
    DependencyParser,
    DGNLayer,
    dependency_graph,
    direction_features,
    key_mask,
)
from synlm.outputs import BackboneOutput, Structure


class UDGNPass(NamedTuple):
    """Everything one UDGN pass computes over the words of its rows (B = batch, N = T − 1
    word positions, E = emb_size, K = heads, D = head_size)."""

    p: Tensor  # (B, N, N) the parser's p(h | d), self-attachment included
    parser_logits: Tensor  # (B, N, N) its logits, −inf at padded heads
    dep: Tensor  # (B, N, N) the probability of an edge between d and h
    head: Tensor  # (B, N, N) p without its diagonal: the ``dep`` structure
    layers: list[Tensor]  # each DGN layer's output (B, N, E)
    attention: list[Tensor]  # each layer's a (B, N, N, K)
    gates: list[Tensor]  # each layer's σ(g) (B, N, K, D)
    hidden: Tensor  # (B, N, E) dropout(LayerNorm(top layer))


class UDGN(Backbone):
    """The UDGN encoder over ``SyntaxModel``'s [emb | parser_emb] embeddings.

    Args (the released ``main.py`` defaults):
        emb_size: E, the width of each of the two embeddings and of the layers (512); the
            model's embedding is 2E wide.
        head_size: D, the width of one head's queries, keys, values and gates (128).
        num_layers: DGN layers (8).
        num_heads: K, competing heads per layer (8).
        parser_layers: layers of the parser's bidirectional LSTM (3).
        dropout: on the embeddings, on each head's gated output, on each layer's residual
            branch and on the output (0.2).
        dropout_parser: on the parser's embeddings, between its LSTM layers and on its
            output (0.2).
        dropout_attention: on the attention weights (0.1).
    """

    def __init__(self, emb_size: int = 512, head_size: int = 128, num_layers: int = 8,
                 num_heads: int = 8, parser_layers: int = 3, dropout: float = 0.2,
                 dropout_parser: float = 0.2, dropout_attention: float = 0.1) -> None:
        super().__init__()
        for name, size in (("emb_size", emb_size), ("head_size", head_size),
                           ("num_layers", num_layers), ("num_heads", num_heads),
                           ("parser_layers", parser_layers)):
            errors.at_least(name, size)
        for name, p in (("dropout", dropout), ("dropout_parser", dropout_parser),
                        ("dropout_attention", dropout_attention)):
            errors.probability(name, p)
        self.emb_size = emb_size
        self.parser = DependencyParser(emb_size, parser_layers, dropout_parser)
        self.layers = nn.ModuleList(
            DGNLayer(emb_size, head_size, num_heads, dropout, dropout_attention)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(emb_size)
        self.drop = nn.Dropout(dropout)
        self.spec = BackboneSpec(
            input_size=2 * emb_size, output_size=2 * emb_size,
            layer_sizes=(emb_size,) * num_layers, provides=frozenset({"layers", "arcs"}),
            recurrent=False, bidirectional=True, structures=(Structure("dep", "arcs"),))

    def run(self, x: Tensor, lengths: Tensor | None = None) -> UDGNPass:
        """The released model over the words of rows ``[<eos>, w1..wn]``: ``x`` (B, T, 2E) =
        [emb | parser_emb], ``lengths`` (B,) the inputs of each row (None: all T). The
        leading ``<eos>`` is left out (the released rows are the words alone), so every
        tensor of the pass is over the T − 1 words, and positions past a row's length are
        padding, which no other position reads. A row without words is read as one word."""
        B, T, _ = x.shape
        if T < 2:
            raise InputError(f"UDGN reads rows [<eos>, w1..wn] with at least one word; got "
                             f"{T} position(s)")
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.long, device=x.device)
        n = (lengths - 1).clamp(min=1)  # (B,) words per row
        words, parser_words = x[:, 1:].split(self.emb_size, dim=-1)  # (B, T-1, E) each
        p, parser_logits = self.parser(parser_words, n)  # (B, T-1, T-1)
        dep, head = dependency_graph(p)
        log_dep = (dep + EDGE_EPS).log()  # (B, T-1, T-1)
        keys = key_mask(n, T - 1)  # (B, 1, T-1)
        rels = direction_features(T - 1, x)  # (T-1, T-1, 2)
        h = self.drop(words)
        layers, attention, gates = [], [], []
        for layer in self.layers:
            h, a, g = layer(h, log_dep, keys, rels)  # (B, T-1, E), (.., K), (.., K, D)
            layers.append(h)
            attention.append(a)
            gates.append(g)
        hidden = self.drop(self.norm(h))  # (B, T-1, E)
        return UDGNPass(p, parser_logits, dep, head, layers, attention, gates, hidden)

    def forward(self, x: Tensor, state: Any = None, lengths: Tensor | None = None
                ) -> BackboneOutput:
        """``x`` (B, T, 2E) for rows ``[<eos>, w1..wn]``, ``lengths`` (B,) -> ``hidden``
        [h; 0] (B, T, 2E), ``layers`` (B, T, E) and the ``dep`` arcs (B, T, T), zero at the
        ``<eos>`` (position 0: its row, and the ROOT column). No state is carried (``state``
        is ignored)."""
        run = self.run(x, lengths)
        return BackboneOutput(
            hidden=F.pad(run.hidden, (0, self.emb_size, 1, 0)),  # (B, T, 2E)
            layers=[F.pad(layer, (0, 0, 1, 0)) for layer in run.layers],
            arcs=F.pad(run.head, (1, 0, 1, 0)))  # (B, T, T)
