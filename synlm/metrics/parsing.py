"""Unsupervised parsing metrics (docs/reference-implementations.md §7; docs/evaluation.md).

``ParsingF1`` accumulates, as DDP-summable tensors, the ON-LSTM/PRPN/SYD sentence-level mean
unlabeled F1 (the headline), the corpus-level micro F1 (URNNG), per-label recall (Du et al.
2020 Table 3 "accuracy by tag"), mean word depth, the R/L ratio (Du et al. Table 3) and the
percentages of left/right splits (PaLM Table 4) of the predicted trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from nltk import Tree
from torch import Tensor
from torchmetrics import Metric

from synlm.syntax.trees import (
    PALM_TAGS,
    WORD_TAGS,
    branching_counts,
    clean_tree,
    labeled_spans,
    leaf_depths,
    spans,
)

DEFAULT_LABELS = ("NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP", "QP")
#: Scalar sum states of ``ParsingF1``, in the order ``update`` accumulates them.
_SUMS = ("f1_sum", "n_sentences", "tp", "n_pred", "n_gold", "depth_sum", "n_words",
         "left_children", "right_children", "left_splits", "right_splits", "n_nodes")


@dataclass(frozen=True)
class Protocol:
    """How gold trees are prepared and short sentences scored.

    ``keep_tags``: POS tags kept (others, punctuation included, are removed with the
    constituents they leave empty). ``min_length``: sentences with fewer words (after removal)
    are skipped; 1- and 2-word sentences have no non-trivial span, so when kept they score
    F1 = 1 (ON-LSTM convention)."""

    name: str
    keep_tags: frozenset[str]
    min_length: int = 1


PROTOCOLS = {
    "onlstm": Protocol("onlstm", WORD_TAGS),  # ON-LSTM / PRPN / SYD test_phrase_grammar.py
    # PaLM keeps $ and # (docs/reference-implementations.md §4.5)
    "palm": Protocol("palm", PALM_TAGS),
    "urnng": Protocol("urnng", WORD_TAGS, min_length=2),  # length-1 sentences skipped
}


def evaluation_tree(tree: Tree, protocol: Protocol | str = "onlstm") -> Tree | None:
    """The gold tree as scored under ``protocol``: punctuation/empty elements removed by POS,
    function tags stripped; ``None`` if fewer than ``protocol.min_length`` words remain."""
    p = PROTOCOLS[protocol] if isinstance(protocol, str) else protocol
    out = clean_tree(tree, keep_tags=p.keep_tags)
    return out if out is not None and len(out.leaves()) >= p.min_length else None


def sentence_f1(pred: set[tuple[int, int]], gold: set[tuple[int, int]]) -> float:
    """ON-LSTM sentence F1 of two non-trivial span sets: P = |∩|/|pred|, R = |∩|/|gold|; an
    empty gold gives R = 1 and an empty prediction P = 1 when gold is empty too (so
    1-2 word sentences score 1); F1 = 2PR / (P + R + 1e-8)."""
    hit = len(pred & gold)
    r = hit / len(gold) if gold else 1.0
    p = hit / len(pred) if pred else (1.0 if not gold else 0.0)
    return 2 * p * r / (p + r + 1e-8)


class ParsingF1(Metric):
    """Unlabeled F1 and tree statistics of predicted trees against gold trees.

    ``update(preds, golds)``: ``preds`` are trees over the same words as ``golds`` (skeletons
    from a decoder or a baseline); ``golds`` are labelled evaluation trees (``evaluation_tree``).
    """

    full_state_update = False
    higher_is_better = True

    def __init__(self, labels: Sequence[str] = DEFAULT_LABELS, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.labels = tuple(labels)
        for name in _SUMS:
            self.add_state(name, torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        for name in ("label_hit", "label_total"):
            self.add_state(name, torch.zeros(len(self.labels), dtype=torch.float64),
                           dist_reduce_fx="sum")

    def update(self, preds: Sequence[Tree], golds: Sequence[Tree]) -> None:  # type: ignore[override]
        stats = [0.0] * len(_SUMS)
        hit = [0.0] * len(self.labels)
        total = [0.0] * len(self.labels)
        index = {label: i for i, label in enumerate(self.labels)}
        for pred, gold in zip(preds, golds, strict=True):
            n = len(gold.leaves())
            if len(pred.leaves()) != n:
                raise ValueError(f"predicted tree has {len(pred.leaves())} words, gold {n}")
            p, g = spans(pred), spans(gold)
            depths = leaf_depths(pred)
            lc, rc, ls, rs = branching_counts(pred)
            nodes = sum(1 for i, j in spans(pred, trivial=True) if j - i >= 3)
            row = (sentence_f1(p, g), 1, len(p & g), len(p), len(g), sum(depths), n, lc, rc,
                   ls, rs, nodes)
            stats = [a + b for a, b in zip(stats, row, strict=True)]
            for i, j, label in set(labeled_spans(gold)):
                if label in index and (i, j) in g:
                    total[index[label]] += 1
                    hit[index[label]] += (i, j) in p
        device = self.f1_sum.device
        for name, value in zip(_SUMS, stats, strict=True):
            setattr(self, name, getattr(self, name) + value)
        self.label_hit += torch.tensor(hit, dtype=torch.float64, device=device)
        self.label_total += torch.tensor(total, dtype=torch.float64, device=device)

    def compute(self) -> dict[str, Tensor]:
        def div(a: Tensor, b: Tensor) -> Tensor:
            return a / b if b > 0 else torch.tensor(float("nan"), dtype=torch.float64)

        precision, recall = div(self.tp, self.n_pred), div(self.tp, self.n_gold)
        out = {
            "uf1_sentence": div(self.f1_sum, self.n_sentences),
            "uf1_corpus": 2 * precision * recall / (precision + recall + 1e-8),
            "precision_corpus": precision,
            "recall_corpus": recall,
            "n_sentences": self.n_sentences,
            "depth": div(self.depth_sum, self.n_words),
            "rl_ratio": div(self.left_children, self.right_children),
            "left_splits_pct": 100 * div(self.left_splits, self.n_nodes),
            "right_splits_pct": 100 * div(self.right_splits, self.n_nodes),
        }
        for k, label in enumerate(self.labels):
            out[f"recall_{label}"] = div(self.label_hit[k], self.label_total[k])
        return out
