"""Tree regularisation (Nandi, Manning & Murty 2025, "Sneaking Syntax into Transformer Language
Models with Tree Regularization", NAACL; TreeReg): a loss L_TR on the hidden states of one
layer, added to next-word prediction, that makes the gold tree's constituents the spans whose
states are most independent of their context. The released regulariser
(``regularizer/regularizer_main.py``, ``scin_computer.py``) is followed exactly; at evaluation
the model is the plain LM and a batch without trees gets no loss.

Sentence w_1..w_n (tokens: words, or the subword pieces of words) is read as
``[<eos>, w_1, .., w_n]``; h_t is the chosen layer's state at the input w_t, the prefix
w_1..w_t (the state at the first ``<eos>``, the released code's SOS, is left out), restricted
to its first ⌊f·H⌋ dimensions (``fraction`` f, the released ``--sci_heads``).

(O) Orthogonal part: orth(h_j; h_i) = h_j − (h_j · ĥ_i) ĥ_i, ĥ_i = h_i / max(‖h_i‖, 1e-12)
    (``F.normalize``), what of the prefix up to j is independent of the prefix up to i.

(S) Span Contextual Independence Score of span (i, j), 1 ≤ i ≤ j ≤ n (§3.1, the released
    bidirectional form ``orth_bidir``): the span's state orthogonal to its left context, and
    the next token's state orthogonal to the span's::

        SCIN(i, j) = ‖orth(h_j; h_{i−1})‖ + ‖orth(h_{j+1}; h_j)‖,

    the first term 0 at the sentence start (i = 1), the second 0 at its end (j = n).

(L) For each constituent (i, j) of the gold tree, binarised right-factored (nltk's
    ``chomsky_normal_form()``, as the released data helpers)
    and covering three words or more, with gold split p (its left child is (i, p)), the
    candidate splits k run over i ≤ k < j where token k + 1 starts a word (a word's pieces are
    never split), and::

        ℓ(i, j) = −log softmax_k [SCIN(i, k) + SCIN(k + 1, j)]_p.

    A sentence's loss is the mean of ℓ over its constituents (0 without any: one or two
    words), L_TR the mean over the batch's sentences with trees. ``SyntaxLM`` adds
    ``weight`` · L_TR (1 in the released runs, which add −mean TreeReg score as it is).

SCIN(i, k) + SCIN(k + 1, j) is the released ``get_span_score``: chart(i, k) + chart(k + 1, j)
+ chart(k + 1, k + 1) + chart(j + 1, j + 1) with chart(a, b) = ‖orth(h_b; h_{a−1})‖ (0 for
a = 1 and past the end). The last term does not depend on k and leaves ℓ as it is; it is kept,
as released. All of the batch's chart is computed at once (the released dense path) and each
constituent's candidates gathered from it.

The released training loop computes L_TR on one optimiser step in ``--regularizer_steps``
(10 for BLLIP-LG, 2 for Sheared-LLaMA) to save compute; this head computes it on every
training batch with trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from nltk import Tree
from torch import Tensor

from synlm.errors import InputError, SettingError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.outputs import BackboneOutput, Batch, HeadOutput


def word_starts(sentence: Any) -> list[bool]:
    """Whether each token of ``sentence`` (a ``synlm.syntax.Sentence``) starts a word (its
    pieces: ``word_index``)."""
    index = sentence.word_index or list(range(len(sentence.words)))
    return [t == 0 or index[t] != index[t - 1] for t in range(len(index))]


def gold_splits(tree: Tree, starts: Sequence[bool]) -> list[tuple[int, int, int]]:
    """The constituents of ``tree`` (leaves: the tokens) that L_TR scores, as 0-based token
    ``(i, j, k)``: the span i..j (inclusive) of three words or more of the right-factored
    binarisation, its left child i..k. A node over children c_1..c_m gives the spans
    c_a..c_m split after c_a, a < m (unary chains give none)."""
    found: list[tuple[int, int, int]] = []

    def walk(node: Tree | str, start: int) -> int:
        if isinstance(node, str):
            return start + 1
        ends = [start]
        for child in node:
            ends.append(walk(child, ends[-1]))
        end = ends[-1]
        for begin, middle in pairwise(ends[:-1]):
            if sum(starts[begin + 1 : end]) >= 2:  # two candidate splits or more
                found.append((begin, end - 1, middle - 1))
        return end

    walk(tree, 0)
    return found


def orthogonal_norms(states: Tensor) -> Tensor:
    """C (B, N, N) from states h (B, N, D): C[b, i, j] = ‖orth(h_j; h_i)‖ (O)."""
    unit = F.normalize(states, dim=-1)  # (B, N, D) ĥ_i
    along = unit @ states.transpose(1, 2)  # (B, N, N) ĥ_i · h_j
    return (states[:, None] - along[..., None] * unit[:, :, None]).norm(dim=-1)


def split_scores(chart: Tensor, spans: Tensor, lengths: Tensor) -> Tensor:
    """SCIN(i, k) + SCIN(k + 1, j) (S, N) for each span row ``(b, i, j, p)`` of ``spans``
    (S, 4) and every k < N, from C = ``chart`` (B, N, N) and the rows' token counts
    ``lengths`` (B,) (0-based: chart(a, b) = C[a − 1, b], 0 for a = 0 or a = n)."""
    row, i, j = spans[:, 0], spans[:, 1], spans[:, 2]  # (S,)
    size = chart.size(-1)
    left = torch.where((i > 0)[:, None], chart[row, (i - 1).clamp_min(0)], 0.0)  # chart(i, k)
    right = chart[row, :, j]  # (S, N) chart(k + 1, j) = C[k, j]
    step = F.pad(chart.diagonal(1, 1, 2), (0, 1))[row]  # (S, N) chart(k + 1, k + 1) = C[k, k + 1]
    after = torch.where(j + 1 < lengths[row], chart[row, j, (j + 1).clamp_max(size - 1)],
                        0.0)  # (S,) chart(j + 1, j + 1)
    return left + right + step + after[:, None]


class TreeRegHead(SyntaxHead):
    """TreeReg (Nandi et al. 2025): L_TR on one layer's states given the gold trees
    (module docstring: O, S, L).

    Reads ``BackboneOutput.layers`` (any backbone that provides them: the Transformer, GPT-2,
    the recurrent stacks) and the rows' gold trees (``Batch.trees``, sentence mode); adds a
    loss only: the distribution is the LM's, no structure is induced (the released greedy
    decoder scores a split by sums that depend on the whole span, which neither a distance
    per gap nor span scores per end position hold), and a batch without trees gets no loss.

    Args:
        weight: the loss weight (1, as released).
        layer: the layer whose states are read, 0-based, negative from the top (the released
            ``--layer_id`` counts the embedding as 0: its ``--layer_id 12`` is ``layer: 11``).
        fraction: the share f of the layer's dimensions read, the first ⌊f·H⌋ (the released
            ``--sci_heads``, 0.25 in its runs).
        name: metric prefix (``train/{name}_loss``, ``train/{name}_acc``).

    Metrics: ``{name}_acc``, the share of scored constituents whose gold split scores
    highest (ties count), over the constituents plus one for each sentence without any (the
    released ``bracket_acc_train``).
    """

    def __init__(self, weight: float = 1.0, layer: int = -1, fraction: float = 0.25,
                 name: str = "treereg") -> None:
        super().__init__(name, weight, requires={"layers"}, needs_gold={"trees"})
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise SettingError("layer", layer, "one layer index (an integer)")
        if not 0 < fraction <= 1:
            raise SettingError("fraction", fraction, "a share of the dimensions in (0, 1]")
        self.layer = layer
        self.fraction = fraction
        self.layer_index = layer  # made 0..L-1 by bind()
        self.dims = 0  # ⌊f·H⌋, set by bind()

    def bind(self, context: HeadContext) -> None:
        """The layer as 0..L-1 of the backbone's L layers, and the dimensions read."""
        if context.backbone.bidirectional:
            raise InputError(f"{type(self).__name__} reads the prefix states of a left-to-right "
                             "model, but the backbone is bidirectional")
        sizes = context.backbone.layer_sizes
        n = len(sizes)
        if not -n <= self.layer < n:
            raise SettingError("layer", self.layer,
                               f"a layer index in -{n}..{n - 1} for the {n} backbone layers")
        self.layer_index = self.layer % n
        self.dims = int(self.fraction * sizes[self.layer_index])
        if self.dims < 1:
            raise SettingError("fraction", self.fraction,
                               f"at least one of the layer's {sizes[self.layer_index]} "
                               "dimensions")

    def gold(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
        """The batch's rows with trees (R,), their token counts (R,), which tokens start a
        word (R, N + 1; N = the batch's inputs − 1, False past a row), and the scored spans
        (S, 4): row among the R, i, j, gold k; None without a tree."""
        trees = batch.trees or []
        rows = [b for b, s in enumerate(trees) if getattr(s, "tree", None) is not None]
        if not rows:
            return None
        width = batch.tokens.size(1)
        starts = torch.zeros(len(rows), width, dtype=torch.bool)
        spans: list[tuple[int, int, int, int]] = []
        for r, b in enumerate(rows):
            sentence = trees[b]
            n = len(sentence.words)
            if n >= width:
                raise InputError(f"{type(self).__name__}: row {b}'s tree has {n} tokens but "
                                 f"the row reads {width - 1} after its <eos>")
            first = word_starts(sentence)
            starts[r, :n] = torch.tensor(first)
            spans += [(r, i, j, k) for i, j, k in gold_splits(sentence.tree, first)]
        lengths = torch.tensor([len(trees[b].words) for b in rows])
        found = torch.tensor(spans, dtype=torch.long).reshape(-1, 4)
        device = batch.tokens.device
        return (torch.tensor(rows, device=device), lengths.to(device), starts.to(device),
                found.to(device))

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor) -> HeadOutput:
        gold = self.gold(batch) if out.layers is not None else None
        if gold is None:
            return HeadOutput()  # no trees: no loss
        rows, lengths, starts, spans = gold
        states = out.layers[self.layer_index][rows, 1:, : self.dims]  # (R, N, D') past <eos>
        chart = orthogonal_norms(states)  # (R, N, N)
        scores = split_scores(chart, spans, lengths)  # (S, N)
        k = torch.arange(scores.size(1), device=scores.device)
        i, j, p = spans[:, 1:2], spans[:, 2:3], spans[:, 3]
        candidate = (k >= i) & (k < j) & starts[spans[:, 0], 1:]  # (S, N) k + 1 starts a word
        masked = scores.masked_fill(~candidate, float("-inf"))
        picked = masked.log_softmax(-1).gather(1, p[:, None])[:, 0]  # (S,) −ℓ(i, j)
        count = torch.bincount(spans[:, 0], minlength=len(rows))  # (R,) constituents a row
        total = picked.new_zeros(len(rows)).index_add(0, spans[:, 0], picked)
        loss = -(total / count.clamp_min(1)).mean()
        best = masked.gather(1, p[:, None])[:, 0] == masked.amax(-1)  # (S,)
        acc = best.sum() / count.clamp_min(1).sum()
        return HeadOutput(loss=loss, metrics={f"{self.name}_acc": acc.detach()})

    def extra_repr(self) -> str:
        return f"layer={self.layer}, fraction={self.fraction}, weight={self.weight}"
