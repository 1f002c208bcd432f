"""Unsupervised parsing metrics (docs/reference-implementations.md §7; docs/evaluation.md).

``ParsingF1`` accumulates, as DDP-summable tensors, the ON-LSTM/PRPN/SYD sentence-level mean
unlabeled F1 (the headline), the corpus-level micro F1 (URNNG), per-label recall (Du et al.
2020 Table 3 "accuracy by tag"), mean word depth, the R/L ratio (Du et al. Table 3) and the
percentages of left/right splits (PaLM Table 4) of the predicted trees. Under the ``kim``
protocol it counts what Kim et al. 2019's ``compare_trees.py`` counts (``Protocol.kim``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from nltk import Tree
from torch import Tensor
from torchmetrics import Metric

from synlm.syntax.protocols import PROTOCOLS, Protocol, evaluation_tree
from synlm.syntax.trees import branching_counts, labeled_spans, leaf_depths, spans

__all__ = ["DEFAULT_LABELS", "PROTOCOLS", "ParsingF1", "Protocol", "evaluation_tree",
           "kim_label", "kim_spans", "sentence_f1"]

#: The term Kim et al.'s ``compare_trees.py`` adds to a sentence's span counts (after PRPN).
KIM_EPS = 1e-8
#: The labels whose recall ``ParsingF1`` reports by default.
DEFAULT_LABELS = ("NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP", "QP")
#: Scalar sum states of ``ParsingF1``, in the order ``update`` accumulates them.
_SUMS = ("f1_sum", "n_sentences", "tp", "n_pred", "n_gold", "depth_sum", "n_words",
         "left_children", "right_children", "left_splits", "right_splits", "n_nodes")


def sentence_f1(pred: set[tuple[int, int]], gold: set[tuple[int, int]],
                eps: float = 0.0) -> float:
    """ON-LSTM sentence F1 of two non-trivial span sets: P = |∩|/(|pred| + eps),
    R = |∩|/(|gold| + eps); an empty gold gives R = 1 and an empty prediction P = 1 when gold
    is empty too (so 1-2 word sentences score 1); F1 = 2PR / (P + R + 1e-8). ``eps``: 0 (the
    ON-LSTM's), or Kim et al.'s 1e-8 (``KIM_EPS``)."""
    hit = len(pred & gold)
    r = hit / (len(gold) + eps) if gold else 1.0
    p = hit / (len(pred) + eps) if pred else (1.0 if not gold else 0.0)
    return 2 * p * r / (p + r + 1e-8)


def kim_spans(tree: Tree) -> set[tuple[int, int]]:
    """Half-open spans of two or more words of every constituent but the root (the root's
    span only: a unary chain below it over the whole sentence keeps that span)."""
    return {(i, j) for i, j, _ in labeled_spans(tree)[1:] if j - i > 1}


def kim_label(label: str) -> str:
    """A gold label as Kim et al.'s label recall counts it: ``WHNP`` as ``NP``."""
    return label[2:] if label.startswith("WH") else label


class ParsingF1(Metric):
    """Unlabeled F1 and tree statistics of predicted trees against gold trees.

    ``update(preds, golds)``: ``preds`` are trees over the same words as ``golds`` (skeletons
    from a decoder or a baseline); ``golds`` are labelled evaluation trees (``evaluation_tree``).
    ``protocol``'s ``kim`` counts spans, F1s and label recalls as Kim et al. 2019.
    """

    full_state_update = False
    higher_is_better = True

    def __init__(self, labels: Sequence[str] = DEFAULT_LABELS,
                 protocol: Protocol | str = "onlstm", **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.labels = tuple(labels)
        self.kim = (PROTOCOLS[protocol] if isinstance(protocol, str) else protocol).kim
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
            p, g = (kim_spans(pred), kim_spans(gold)) if self.kim else (spans(pred), spans(gold))
            depths = leaf_depths(pred)
            lc, rc, ls, rs = branching_counts(pred)
            nodes = sum(1 for i, j in spans(pred, trivial=True) if j - i >= 3)
            f1 = sentence_f1(p, g, KIM_EPS if self.kim else 0.0)
            row = (f1, 1, len(p & g), len(p), len(g), sum(depths), n, lc, rc, ls, rs, nodes)
            stats = [a + b for a, b in zip(stats, row, strict=True)]
            for i, j, label in self._gold_labels(gold, g):
                if label in index:
                    total[index[label]] += 1
                    hit[index[label]] += (i, j) in p
        device = self.f1_sum.device
        for name, value in zip(_SUMS, stats, strict=True):
            setattr(self, name, getattr(self, name) + value)
        self.label_hit += torch.tensor(hit, dtype=torch.float64, device=device)
        self.label_total += torch.tensor(total, dtype=torch.float64, device=device)

    def _gold_labels(self, gold: Tree, scored: set[tuple[int, int]]
                     ) -> list[tuple[int, int, str]] | set[tuple[int, int, str]]:
        """The labelled gold spans whose recall is counted: each distinct one among the
        scored spans; Kim: each occurrence of two or more words off the whole sentence."""
        if not self.kim:
            return {(i, j, label) for i, j, label in labeled_spans(gold) if (i, j) in scored}
        n = len(gold.leaves())
        return [(i, j, kim_label(label)) for i, j, label in labeled_spans(gold)
                if j - i > 1 and (i, j) != (0, n)]

    def compute(self) -> dict[str, Tensor]:
        def div(a: Tensor, b: Tensor) -> Tensor:
            return a / b if b > 0 else torch.tensor(float("nan"), dtype=torch.float64)

        precision, recall = div(self.tp, self.n_pred), div(self.tp, self.n_gold)
        out = {
            "uf1_sentence": div(self.f1_sum, self.n_sentences),
            "uf1_corpus": self._corpus_f1(precision, recall),
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

    def _corpus_f1(self, precision: Tensor, recall: Tensor) -> Tensor:
        """2PR / (P + R + 1e-8); Kim: 2PR / (P + R), 0 when both are 0."""
        if not self.kim:
            return 2 * precision * recall / (precision + recall + 1e-8)
        total = precision + recall
        return 2 * precision * recall / total if total > 0 else torch.zeros_like(total)
