"""Typed containers passed between the data, the backbones, the heads and the LM.

Shapes use B = batch, T = time steps, H = hidden size, L = layers, V = vocabulary,
K = span slots, D = most dependents of one token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor

#: Optional ``Batch`` fields that carry gold syntax; a head names the ones it reads.
GOLD_FIELDS = frozenset({"distances", "spans", "dep_targets", "trees", "path_lengths",
                         "dep_path_lengths"})

#: The kinds of structure a model can induce, and the layout of their values:
#: ``distances`` (L, B, T): a syntactic distance per input (the gap before it) and layer,
#: decoded into binary trees (Du et al. 2020 Algorithm 2/3);
#: ``spans`` (B, T, K): scores of the K spans ending at the word before each input,
#: decoded by PaLM's greedy right-child decoder (Peng et al. 2019 §2.2);
#: ``arcs`` (B, T, T): ``[b, d, h]`` scores input ``h`` as the head of input ``d`` (row 0, the
#: ``<eos>`` before the sentence, stands for ROOT), decoded by an argmax per dependent or as a
#: single-rooted maximum spanning tree (``synlm.metrics.arcs``) and scored by attachment.
StructureKind = Literal["distances", "spans", "arcs"]
STRUCTURE_KINDS: tuple[str, ...] = ("distances", "spans", "arcs")


@dataclass(frozen=True)
class Structure:
    """A structure a backbone or head declares it can induce: its ``name`` (the key of its
    metrics, ``val/uf1_<name>``, and of ``synlm parse --structure``) and its ``kind``.
    ``layers``: which rows of a backbone's (L, B, T) distances are this structure (None:
    all; PRPN-SYD's ``lm`` is row 0, its row 1 being the ranking head's ``syd``)."""

    name: str
    kind: StructureKind
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in STRUCTURE_KINDS:
            raise ValueError(f"structure {self.name!r}: kind must be one of {STRUCTURE_KINDS}, "
                             f"not {self.kind!r}")


@dataclass
class Batch:
    """One training or evaluation batch, batch-first.

    ``tokens[b, t]`` is the input at step t and ``targets[b, t]`` the token to predict
    there. ``mask`` marks the positions that count in the loss (padding is False).
    Each gold field comes with its own mask, so a corpus where only some sentences
    have trees trains a head on those alone.
    """

    tokens: Tensor  # (B, T) long
    targets: Tensor  # (B, T) long
    mask: Tensor  # (B, T) bool
    sentence_ids: Tensor | None = None  # (B, T) long, the sentence each input token is in
    distances: Tensor | None = None  # (B, T) float, gold distance of the gap before token t
    distance_mask: Tensor | None = None  # (B, T) bool
    spans: Tensor | None = None  # (B, T, K) float, PaLM span targets (rows sum to 1)
    span_mask: Tensor | None = None  # (B, T) bool
    dep_targets: Tensor | None = None  # (B, T, D) long, future dependents (padded)
    dep_mask: Tensor | None = None  # (B, T, D) bool
    dep_rows: Tensor | None = None  # (B, T) bool, inputs of sentences with heads (empty sets too)
    word_ends: Tensor | None = None  # (B, T) bool, subwords: the target ends a word (or is <eos>)
    trees: list[Any] | None = None  # sentence mode: one gold tree (or None) per row
    lengths: Tensor | None = None  # (B,) long, sentence mode: tokens per row
    n_targets: int = 0  # mask.sum(), counted on the host when the batch is built
    # sentence mode: (B, W, W) long, the edges between two words of [<eos>, w1..wn, <eos>]
    # in the row's constituency tree (synlm.syntax.paths; subwords: their words), W = the
    # batch's most words + 2, 0 past a row's words
    path_lengths: Tensor | None = None
    path_mask: Tensor | None = None  # (B,) bool, rows with a tree
    dep_path_lengths: Tensor | None = None  # (B, W, W) long, the same in the dependency tree
    dep_path_mask: Tensor | None = None  # (B,) bool, rows with heads

    def to(self, device: torch.device | str) -> Batch:
        """The batch with its tensors on ``device`` (Lightning calls this to move it);
        the gold trees stay where they are."""
        return Batch(**{name: value.to(device) if isinstance(value, Tensor) else value
                        for name, value in vars(self).items()})


@dataclass
class ActionBatch:
    """One batch of sentences with their trees as RNNG actions (``SynLMDataModule`` in
    ``actions`` mode), batch-first. ``words[b]`` are sentence b's word ids (no ``<eos>``) and
    ``actions[b]`` the ids (``synlm.syntax.actions.ActionVocab``) of the actions that build
    its tree, in the DataModule's ``action_order``; each row is padded past its length.

    Over subwords, ``words[b]`` are the pieces of sentence b's words, ``word_ends`` marks the
    piece that ends each word (rnng-pytorch's ``subword_end_mask``) and ``actions[b]`` has
    one ``SHIFT`` a piece (``synlm.syntax.actions.piece_actions``); ``word_lengths`` then
    counts pieces and ``n_words`` words."""

    words: Tensor  # (B, N) long, word (or piece) ids, padded with 0
    actions: Tensor  # (B, A) long, action ids, padded with -1
    word_lengths: Tensor  # (B,) long, words (or pieces) per row
    action_lengths: Tensor  # (B,) long
    sentences: list[Any]  # the gold ``Sentence`` of each row (its tree, for parsing F1)
    n_words: int  # the words of the batch, counted on the host when the batch is built
    n_actions: int  # action_lengths.sum(), likewise
    word_ends: Tensor | None = None  # (B, N) bool, subwords: the piece ends its word
    #: (B,) long, documents streamed (``data.document_order: streamed``): the chunk of its
    #: document each row reads, 0 where a document starts (its memory emptied)
    chunk: Tensor | None = None

    @property
    def n_targets(self) -> int:
        """The words the batch generates: what tokens per second count, as for ``Batch``."""
        return self.n_words

    def to(self, device: torch.device | str) -> ActionBatch:
        """The batch with its tensors on ``device``; the sentences stay where they are."""
        return ActionBatch(**{name: value.to(device) if isinstance(value, Tensor) else value
                              for name, value in vars(self).items()})


@dataclass
class BackboneOutput:
    """What a backbone returns for one window. Optional fields are listed in
    ``Backbone.provides``."""

    hidden: Tensor  # (B, T, H) fed to the tied decoder
    state: Any = None  # recurrent state for the next window; SyntaxLM detaches it
    layers: list[Tensor] | None = None  # every layer's output (B, T, H_l), see Backbone
    distances: Tensor | None = None  # (L, B, T) syntactic distances computed by the model
    distance_features: Tensor | None = None  # (L, B, T, n) what a distance head may re-read
    span_scores: Tensor | None = None  # (B, T, K) span-attention scores (PaLM)
    arcs: Tensor | None = None  # (B, T, T) dependency arc scores, the ``arcs`` layout
    attention: Tensor | None = None  # (B, T, S) head-averaged attention over S = cached + T
    aux_loss: Tensor | None = None  # scalar added to the loss unweighted
    # layer -> (B, heads, T, S) each head's attention probabilities, computed when first read
    head_attention: Mapping[int, Tensor] | None = None


@dataclass
class HeadOutput:
    """What a syntax head returns. ``loss`` is unweighted: SyntaxLM multiplies it by the
    head's ``weight``."""

    loss: Tensor | None = None
    log_probs: Tensor | None = None  # (B, T, V) replacement next-token distribution
    target_log_probs: Tensor | None = None  # (B, T) log p(target) under that distribution
    metrics: dict[str, Tensor] = field(default_factory=dict)  # logged as {stage}/{name}
    structure: Tensor | None = None  # the head's induced structure, in its kind's layout
    state: Any = None  # an incremental head's own state after the window (generation)


class StepState(NamedTuple):
    """The state ``SyntaxLM.step`` returns and continues from: the backbone's, and the own
    state of each incremental head, by name (``SyntaxHead.incremental``)."""

    backbone: Any
    heads: dict[str, Any]


@dataclass
class LMOutput:
    """What ``SyntaxLM.forward`` returns."""

    logits: Tensor  # (B, T, V) from the tied decoder
    target_log_probs: Tensor  # (B, T) log-probability of each target under the used dist.
    backbone: BackboneOutput
    heads: dict[str, HeadOutput]
    state: Any = None
