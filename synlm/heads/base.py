"""The syntax-head contract: bind to the assembled model, read a backbone's output (and gold
syntax), return a loss term, a replacement next-token distribution and/or a structure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from synlm.backbones.base import BackboneSpec
from synlm.modules.recorded import RecordsInit
from synlm.outputs import BackboneOutput, Batch, HeadOutput, StructureKind


@dataclass(frozen=True)
class HeadContext:
    """The assembled model a head binds to (``SyntaxHead.bind``).

    A head may keep the context (a plain dataclass) and call its modules in ``forward``;
    assigning ``context.embedding`` or ``context.decoder`` to an attribute of the head
    would register the shared weights a second time, so keep the context instead.
    """

    vocab_size: int
    embedding: nn.Embedding  # (V, E) token embedding
    decoder: nn.Linear  # E -> V, tied to the embedding unless ``tie_weights=False``
    backbone: BackboneSpec


class SyntaxHead(RecordsInit, nn.Module):
    """Base class of every syntax head. A head can do any of three things:

    - add a loss term: return ``HeadOutput.loss`` (unweighted; ``SyntaxLM`` multiplies it by
      ``weight``) when the batch has the gold it needs;
    - replace the next-token distribution (``replaces_distribution``): return
      ``target_log_probs`` (B, T) on every call, and ``log_probs`` (B, T, V) whenever
      ``log_probs_needed`` is set on the call (``SyntaxLM.log_probs``); returning
      nothing is an error, never a silent fall-back to the decoder; at most one per model;
    - induce a structure (``structure_kind`` not None): return ``HeadOutput.structure`` in
      that kind's layout (``synlm.outputs.STRUCTURE_KINDS``), named ``name``.

    A replacing head that reads more than the current window (DM's mixture over past
    positions) sets ``incremental``: ``forward`` then also takes ``state``, what it returned
    as ``HeadOutput.state`` for the previous window of the same sequences (None: a fresh
    start), so that generation feeds one token at a time (``SyntaxLM.step``); training never
    passes one. A replacing head without it is re-run over the whole sequence.

    ``requires`` names the ``BackboneOutput`` fields the head reads (checked against the
    backbone's spec when ``SyntaxLM`` is built); ``needs_gold`` names the ``Batch`` fields
    it trains on (checked against the corpus's gold at setup). ``forward`` is called on
    every batch, also without gold (raw text, evaluation on a corpus without trees): then
    the gold fields are ``None`` and the head returns no loss. ``bind(context)`` is called
    once, after the embedding, decoder and backbone exist.
    """

    def __init__(self, name: str, weight: float = 1.0, *, requires: Iterable[str] = (),
                 needs_gold: Iterable[str] = (), replaces_distribution: bool = False,
                 incremental: bool = False, structure_kind: StructureKind | None = None) -> None:
        """Every head says what it is here, once, from its own constructor's arguments.

        Args:
            name: short name used in output and metric keys (``train/{name}_loss``,
                ``val/uf1_{name}``).
            weight: the loss term's weight.
            requires: the ``BackboneOutput`` fields it reads.
            needs_gold: the ``Batch`` fields it trains on.
            replaces_distribution: it gives the next-token distribution.
            incremental: its ``forward`` carries a ``state`` across windows.
            structure_kind: the kind of structure it induces, if any.
        """
        super().__init__()
        if not isinstance(name, str):  # a head written for the class-variable contract
            raise TypeError(f"{type(self).__name__}: SyntaxHead.__init__ takes the head's name "
                            f"first, then its weight and what it is: super().__init__('name', "
                            f"weight, requires=..., needs_gold=...), not {name!r}")
        self.name = name
        self.weight = weight
        self.requires = frozenset(requires)
        self.needs_gold = frozenset(needs_gold)
        self.replaces_distribution = replaces_distribution
        self.incremental = incremental
        self.structure_kind: StructureKind | None = structure_kind

    def bind(self, context: HeadContext) -> None:
        """Build layers whose sizes depend on the model. Called once by ``SyntaxLM``."""

    def gold_options(self) -> dict[str, Any]:
        """Data settings the head's gold depends on, handed to the DataModule with its
        ``needs_gold`` at setup (e.g. ``{"span_window": 20}``); a conflicting explicit
        setting fails there in one line."""
        return {}

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor,
                log_probs_needed: bool = False) -> HeadOutput:
        """``out``: the backbone's output; ``logits`` (B, T, V): the tied decoder's."""
        raise NotImplementedError  # pragma: no cover
