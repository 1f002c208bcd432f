"""Decode a model's induced structures and score them against gold, one decoder per kind.

The kinds and their layouts are ``synlm.outputs.STRUCTURE_KINDS``; every structure is
computed for rows ``[<eos>, w1..wn]`` (input ``i`` is word ``i``):

- ``distances`` (L, B, T): per layer, the values at inputs 1..n are the per-word distances of
  ``distances_to_tree`` (Du et al. 2020 Algorithm 2, or 3 with ``biased``);
- ``spans`` (B, T, K): ``palm_tree``, PaLM's greedy right-child decoder (Peng et al. 2019
  §2.2), over rows 0..n+1;
- ``arcs`` (B, T, T): each word's head by a decoder of ``synlm.metrics.arcs``: the argmax
  over rows 0..n other than itself, or the best single-rooted maximum spanning tree.

Trees are scored with sentence-level unlabelled F1 (``ParsingF1``, the ON-LSTM/PRPN/SYD
convention), arcs with unlabelled attachment score over every word. Validation decodes arcs
by the argmax, as the released training loops of StructFormer and UDGN do (UDGN's
``main.py`` validates each epoch with the argmax and decodes trees only in its final test);
``synlm parse --arcs-decoder`` chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import torch
from nltk import Tree
from torch import Tensor
from torchmetrics import Metric

from synlm.metrics.arcs import ARC_DECODERS, argmax_heads, spanning_tree_heads
from synlm.metrics.parsing import PROTOCOLS, ParsingF1, Protocol, evaluation_tree
from synlm.syntax import Sentence, distances_to_tree, palm_tree

TREE_KINDS = ("distances", "spans")


def prune_leaves(tree: Tree | str, keep: Sequence[bool]) -> Tree:
    """``tree`` without the leaves whose ``keep`` is False; nodes left with one child are
    replaced by it (a binary tree stays binary)."""
    flags = iter(keep)

    def walk(t: Tree | str) -> Tree | str | None:
        if isinstance(t, str):
            return t if next(flags) else None
        kids = [k for k in (walk(c) for c in t) if k is not None]
        if not kids:
            return None
        return kids[0] if len(kids) == 1 else Tree(t.label(), kids)

    out = walk(tree)
    return out if isinstance(out, Tree) else Tree("X", [out])


def decode_trees(kind: str, values: Tensor, rows: Sequence[tuple[int, Sentence]],
                 keep: Sequence[np.ndarray], biased: bool = False) -> list[list[Tree]]:
    """Trees for ``rows`` (batch index, sentence) over the words that ``keep`` marks.

    ``distances``: one list per layer; the distances of dropped words are removed before
    decoding (ON-LSTM's protocol). ``spans``: one list; the whole sentence is decoded, then
    the dropped words are pruned. A row shorter than n + 2 inputs decodes with zero scores
    for the spans ending at its last word.
    """
    values = values.detach().float().cpu()
    if kind == "distances":
        return [[distances_to_tree([w for w, k in zip(s.words, mask) if k],
                                   values[layer, b, 1:len(s.words) + 1].numpy()[mask],
                                   biased=biased)
                 for (b, s), mask in zip(rows, keep)]
                for layer in range(values.size(0))]
    if kind == "spans":
        n_max = max(len(s.words) for _, s in rows)
        padded = torch.nn.functional.pad(values, (0, 0, 0, max(0, n_max + 2 - values.size(1))))
        return [[prune_leaves(palm_tree(s.words, padded[b, :len(s.words) + 2].numpy()), mask)
                 for (b, s), mask in zip(rows, keep)]]
    raise ValueError(f"no tree decoder for structure kind {kind!r}; tree kinds: {TREE_KINDS}")


def scored_rows(sentences: Sequence[Sentence], protocol: Protocol | str = "onlstm"
                ) -> tuple[list[tuple[int, Sentence]], list[Tree], list[np.ndarray]]:
    """What tree kinds are scored on among ``sentences`` (a batch's rows): (row index,
    sentence) of each sentence with a gold tree that ``protocol`` keeps, its evaluation tree
    (``evaluation_tree``: punctuation removed) and which of its words that tree keeps, the
    ``keep`` of ``decode_trees``."""
    protocol = PROTOCOLS[protocol] if isinstance(protocol, str) else protocol
    treed = [(b, s) for b, s in enumerate(sentences) if s.tree is not None]
    golds = [evaluation_tree(s.tree, protocol) for _, s in treed]
    rows = [row for row, gold in zip(treed, golds) if gold is not None]
    keep = [np.array([tag in protocol.keep_tags for _, tag in s.tree.pos()]) for _, s in rows]
    return rows, [gold for gold in golds if gold is not None], keep


def decode_heads(values: Tensor, n: int, decoder: str = "argmax") -> list[int]:
    """Heads (1-based, 0 = ROOT) of words 1..n from arc scores (T, T) by ``decoder``
    (``ARC_DECODERS``): ``argmax``, row d's argmax over rows 0..n, itself excluded
    (``argmax_heads``); ``tree``, the best single-rooted maximum spanning tree
    (``spanning_tree_heads``)."""
    if decoder == "argmax":
        return argmax_heads(values, n)
    if decoder == "tree":
        return spanning_tree_heads(values, n)
    raise ValueError(f"no arc decoder {decoder!r}; decoders: {ARC_DECODERS}")


class AttachmentScore(Metric):
    """Unlabelled attachment score: the share of words whose predicted head is the gold
    one, summed over sentences and ranks."""

    full_state_update = False
    higher_is_better = True

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.add_state("correct", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("total", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, preds: Sequence[Sequence[int]], golds: Sequence[Sequence[int]]) -> None:  # type: ignore[override]
        for pred, gold in zip(preds, golds, strict=True):
            self.correct += sum(p == g for p, g in zip(pred, gold, strict=True))
            self.total += len(gold)

    def compute(self) -> Tensor:
        return self.correct / self.total if self.total > 0 else self.correct * float("nan")


class InducedStructureMetrics(torch.nn.Module):
    """Scores of every structure a model induces, per structure (and layer).

    ``update(structures, sentences)``: ``structures`` maps a name to its ``(kind, values)``;
    ``sentences`` are the gold ``Sentence`` of each row. Tree kinds are scored on rows with a
    gold tree, keys ``uf1_<name>`` for one-layer structures and ``uf1_<name>_l<layer>``
    otherwise; punctuation (POS outside ``protocol``'s tags) is dropped as in
    ``synlm parse``. Arcs are scored on rows with gold heads, key ``uas_<name>``, each
    word's head the argmax of its row (``decode_heads``).
    """

    def __init__(self, biased: bool = False, protocol: str = "onlstm") -> None:
        super().__init__()
        self.biased = biased
        self.protocol = PROTOCOLS[protocol]
        self.metrics = torch.nn.ModuleDict()

    def _metric(self, key: str, make: Callable[[], Metric], like: Tensor) -> Metric:
        if key not in self.metrics:
            self.metrics[key] = make().to(like.device)
        return self.metrics[key]

    def update(self, structures: dict[str, tuple[str, Tensor]],
               sentences: Sequence[Sentence]) -> None:
        rows, golds, keep = scored_rows(sentences, self.protocol)
        headed = [(b, s) for b, s in enumerate(sentences) if s.heads is not None]
        for name, (kind, values) in structures.items():
            if kind == "arcs":
                if headed:
                    preds = [decode_heads(values[b], len(s.words)) for b, s in headed]
                    self._metric(f"uas_{name}", AttachmentScore, values).update(
                        preds, [s.heads for _, s in headed])
                continue
            if not rows:
                continue
            layers = decode_trees(kind, values, rows, keep, self.biased)
            for layer, preds in enumerate(layers):
                key = f"uf1_{name}" if len(layers) == 1 else f"uf1_{name}_l{layer}"
                self._metric(key, partial(ParsingF1, protocol=self.protocol),
                             values).update(preds, golds)

    def compute(self) -> dict[str, Tensor]:
        """``uf1_*`` (sentence-level F1) and ``uas_*`` per structure key, in percent: the
        unit of ``synlm parse`` and of the papers' tables (the ``ParsingF1`` and
        ``AttachmentScore`` metric objects return fractions, as torchmetrics does)."""
        out = {}
        for key, metric in self.metrics.items():
            value = metric.compute()
            out[key] = 100 * (value["uf1_sentence"] if isinstance(value, dict) else value)
        return out

    def reset(self) -> None:
        for metric in self.metrics.values():
            metric.reset()
