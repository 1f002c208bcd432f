"""Tree-planting (Yoshida, Someya & Oseki 2024, "Tree-Planted Transformers: Unidirectional
Transformer Language Models with Implicit Syntactic Supervision", Findings of ACL): chosen
attention heads of a unidirectional Transformer LM are pulled towards a *supervision
attention* S derived from each sentence's gold tree by a loss L_TREE added to next-word
prediction, L = L_NWP + λ L_TREE. Trees are read at training time only; at evaluation the
model is the plain LM (exact surprisal, no beam, no parse), and a batch without gold gets no
loss.

Sentence w_1..w_n is read as ``[<eos>, w_1, .., w_n]`` with targets ``[w_1, .., w_n, <eos>]``
(``synlm.syntax.targets``); word 0, the first ``<eos>``, plays the paper's BOS and word n + 1,
the final target, its EOS.

(D) Syntactic distance, D_ij = CountEdge(w_i, w_j): the number of edges on the tree path
    between words i and j, built by the DataModule (``Batch.path_lengths``,
    ``Batch.dep_path_lengths``; ``synlm.syntax.paths``).

    - ``constituency``: between the two leaves of the treebank tree, part-of-speech
      preterminals and unary nodes included, with BOS and EOS as leaves under a new root above
      the tree's (the released preprocess_constituency.py adds them so).
    - ``dependency``: between the two words of the dependency tree (the sentence's heads, or
      heads by Collins' rules from its tree), with BOS and EOS as dependents of the root word
      (the released preprocess_dependency.py). A sentence whose heads are not one rooted tree
      gets no supervision.

(S) Supervision attention, decreasing exponentially with the distance and shaped for a
    unidirectional LM: the input at t, which predicts word k = t + 1, is supervised over the
    words it may read, l ≤ t, by their distances to the word it *predicts*::

        S_{k,l} = exp(−β D_{k,l}) / Σ_{l' < k} exp(−β D_{k,l'}),    l < k,

    a softmax of negative distances; β = ``decay`` is 1 in the paper and the released code
    (exp(−D), rows normalised), an argument here.

(L) L_TREE: the KL divergence from the supervision to the word-level attention Â of each
    planted head, KL(S_k ‖ Â_k) = Σ_l S_{k,l} log(S_{k,l} / Â_{k,l}) (torch's ``KLDivLoss`` on
    log Â, as the released train.py computes it), averaged over the planted layers, the
    planted heads and every predicted word k of the sentences with gold (one term each, as
    the released ``none`` reduction; the BOS-only row k = 1 counts, with KL 0). ``SyntaxLM``
    adds ``weight`` · L_TREE to the next-word loss (λ = 0.5 in the released example, which
    plants one head, head 0 of the top layer of a 12-layer GPT-2).

Â_k is the *word-level* attention of a planted head. Without subwords it is the head's
attention row at t = k − 1 itself. With subwords (GPT-2's BPE, ``Batch.word_ends``), as the
released train.py compresses it: the queries that predict a piece of word k are summed,
the keys of each earlier word l < k are summed, the mass on word k's own earlier pieces is
dropped and the row renormalised::

    Â_{k,l} ∝ Σ_{t : target(t) ∈ word k} Σ_{s ≤ t : s ∈ word l} A_{t,s},    l < k.

The distances and the supervision are those of the words; a word's pieces share them (which
pieces make a word: ``Batch.word_ends``). The head reads ``BackboneOutput.head_attention``
(the backbone's per-head probabilities before attention dropout; the released code reads
Hugging Face's ``output_attentions``, taken after it), computed for the planted layers only
and only when a batch has trees.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from synlm.errors import InputError, SettingError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.outputs import BackboneOutput, Batch, HeadOutput

TreeKind = Literal["constituency", "dependency"]

#: The gold ``Batch`` field of each kind of tree, and its row mask.
GOLD = {"constituency": ("path_lengths", "path_mask"),
        "dependency": ("dep_path_lengths", "dep_path_mask")}

#: Where Â is 0, log Â is taken at this floor (the released train.py's epsilon).
FLOOR = 1e-30


def supervision(distances: Tensor, decay: float = 1.0) -> Tensor:
    """S: (..., W − 1, W − 1) from path lengths (..., W, W) over ``[BOS, w_1..w_n, EOS]``
    (padded past the words): row k − 1 is S_k over the words l < k (columns l = 0..W − 2; 0
    where l ≥ k), S_{k,l} = softmax_l(−β D_{k,l}), for the predicted words k = 1..W − 1."""
    logits = -decay * distances[..., 1:, :-1].to(torch.float64)  # [k - 1, l]
    size = logits.size(-1)
    allowed = torch.ones(size, size, dtype=torch.bool, device=logits.device).tril()
    return logits.masked_fill(~allowed, float("-inf")).softmax(-1)


def word_maps(batch: Batch) -> tuple[Tensor, Tensor]:
    """The word each input is read as, as a key (B, T), and the word it predicts, as a query
    (B, T), in ``[BOS, w_1..w_n, EOS]`` numbering (−1: padding): input t predicts word 1 +
    the number of words the targets before t end (``Batch.word_ends``; without subwords,
    word t + 1), and is read as the word input t − 1 predicts (input 0: BOS)."""
    mask = batch.mask  # (B, T)
    if batch.word_ends is None:
        query = torch.arange(1, mask.size(1) + 1, device=mask.device).expand_as(mask)
    else:
        ends = batch.word_ends.long()
        query = 1 + ends.cumsum(1) - ends  # (B, T) 1 + the word ends before t
    key = torch.cat([torch.zeros_like(query[:, :1]), query[:, :-1]], dim=1)  # token t's word
    return key.masked_fill(~mask, -1), query.masked_fill(~mask, -1)


def word_attention(attention: Tensor, key_word: Tensor, query_word: Tensor, size: int
                   ) -> Tensor:
    """Â (..., B, H, size, size) from token attention (..., B, H, T, T): row k − 1 sums the
    queries predicting a piece of word k, column l the keys in word l; l ≥ k dropped, rows
    renormalised (the identity without subwords)."""
    words = torch.arange(size, device=attention.device)
    queries = (query_word[:, None, :] == words[None, :, None] + 1).to(attention.dtype)
    keys = (key_word[:, :, None] == words[None, None, :]).to(attention.dtype)
    summed = queries[:, None] @ attention @ keys[:, None]  # (..., B, H, size, size)
    summed = summed * torch.ones(size, size, device=attention.device).tril().to(attention.dtype)
    return summed / summed.sum(-1, keepdim=True).clamp_min(FLOOR)


class TreePlantingHead(SyntaxHead):
    """Tree-planting (Yoshida et al. 2024): L_TREE, a loss pulling chosen heads' attention
    towards the supervision S derived from gold trees (module docstring: D, S, L).

    Needs a backbone that provides ``head_attention`` (the Transformer, GPT-2) and training
    in sentence mode on a corpus with gold of the chosen kind (the DataModule builds the path
    lengths); induces no structure, leaves the next-token distribution alone, and returns no
    loss without gold (evaluation, scoring, generation), computing no attention then.

    Args:
        weight: λ, the loss weight (0.5 in the released example).
        layers: the planted layer(s), 0-based, negative from the top (default the top layer,
            as the released example plants layer 11 of 12).
        heads: the planted head indices in each planted layer (default ``[0]``: one head,
            the paper's best setting).
        tree: ``constituency`` or ``dependency`` distances (D).
        decay: β in S ∝ exp(−β D) (S); 1, the paper's exponential.
        name: metric prefix (``train/{name}_loss``, ``train/{name}_top1``).

    Metrics: ``{name}_top1``, the share of supervised words with two or more earlier words
    whose most attended earlier word is one of the syntactically nearest (over the planted
    heads).
    """

    def __init__(self, weight: float = 0.5, layers: int | list[int] = -1,
                 heads: int | list[int] = 0, tree: TreeKind = "dependency",
                 decay: float = 1.0, name: str = "tpt") -> None:
        if tree not in GOLD:
            raise SettingError("tree", tree, "'constituency' or 'dependency'")
        super().__init__(name, weight, requires={"head_attention"}, needs_gold={GOLD[tree][0]})
        self.layers = [layers] if isinstance(layers, int) else list(layers)
        self.heads = [heads] if isinstance(heads, int) else list(heads)
        if not self.layers or len(set(self.layers)) != len(self.layers):
            raise SettingError("layers", layers, "one layer index or a list of distinct ones")
        if not self.heads or len(set(self.heads)) != len(self.heads) or min(self.heads) < 0:
            raise SettingError("heads", heads, "one head index >= 0 or a list of distinct ones")
        if not decay > 0:
            raise SettingError("decay", decay, "a number > 0")
        self.tree = tree
        self.decay = decay
        self.layer_indices = list(self.layers)  # made 0..L-1 by bind()

    def bind(self, context: HeadContext) -> None:
        """The planted layers as 0..L-1 of the backbone's L layers."""
        n = len(context.backbone.layer_sizes)
        for layer in self.layers:
            if not -n <= layer < n:
                raise SettingError("layers", self.layers,
                                   f"layer indices in -{n}..{n - 1} for the {n} backbone layers")
        self.layer_indices = [layer % n for layer in self.layers]

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor) -> HeadOutput:
        field, mask_field = GOLD[self.tree]
        distances, rows = getattr(batch, field), getattr(batch, mask_field)  # (B, W, W), (B,)
        if distances is None or rows is None or out.head_attention is None \
                or not bool(rows.any()):
            return HeadOutput()  # no gold: no loss, and no attention is computed
        first = out.head_attention[self.layer_indices[0]]  # (B, H, T, S)
        if max(self.heads) >= first.size(1):
            raise InputError(f"TreePlantingHead heads={self.heads}: the backbone's layers "
                             f"have {first.size(1)} heads (0..{first.size(1) - 1})")
        if first.size(2) != first.size(3):
            raise ValueError("TreePlantingHead reads a window without a key/value cache")
        attention = torch.stack([out.head_attention[layer][:, self.heads]
                                 for layer in self.layer_indices])  # (L_p, B, H_p, T, T)
        target = supervision(distances, self.decay).to(first.dtype)  # (B, K, K), K = W − 1
        key_word, query_word = word_maps(batch)  # (B, T)
        size = target.size(-1)
        predicted = word_attention(attention, key_word, query_word, size)  # (L_p, B, H_p, K, K)
        target = target[None, :, None]  # (1, B, 1, K, K)
        kl = (torch.xlogy(target, target)
              - target * predicted.clamp_min(FLOOR).log()).sum(-1)  # (L_p, B, H_p, K)
        words = torch.arange(size, device=kl.device)
        predicts = (query_word[:, :, None] == words[None, None, :] + 1).any(1)  # (B, K)
        supervised = (predicts & rows[:, None])[None, :, None].expand_as(kl)
        count = supervised.sum()
        loss = (kl * supervised).sum() / count.clamp_min(1)
        nearest = target.amax(-1)  # (1, B, 1, K) the largest supervision of each row
        chosen = target.expand_as(predicted).gather(-1, predicted.argmax(-1, keepdim=True))
        hit = chosen[..., 0] >= nearest * (1 - 1e-6)  # the most attended word is a nearest
        several = supervised & (words >= 1)  # words with two or more earlier words
        top1 = (hit & several).sum() / several.sum().clamp_min(1)
        return HeadOutput(loss=loss, metrics={f"{self.name}_top1": top1.detach()})

    def extra_repr(self) -> str:
        return (f"tree={self.tree}, layers={self.layers}, heads={self.heads}, "
                f"decay={self.decay}, weight={self.weight}")
