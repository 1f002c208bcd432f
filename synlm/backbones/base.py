"""The backbone contract: embeddings in, hidden states (and optional syntax) out.

Three pieces:

- ``BackboneSpec``: what a built backbone declares about itself (sizes, outputs, structures,
  recurrence). Heads bind to it; ``SyntaxLM`` checks heads against it.
- ``Backbone``: the base class of every backbone.
- ``RecurrentStack`` and ``LayerInsert``: a stack of recurrent layers run by one shared loop,
  into which a module can be inserted between two layers (PaLM's span attention sits
  between layers 2 and 3 of an AWD-LSTM or ON-LSTM stack).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from synlm import errors
from synlm.errors import InputError
from synlm.modules import LockedDropout
from synlm.modules.recorded import RecordsInit
from synlm.outputs import BackboneOutput, Structure

#: Optional ``BackboneOutput`` fields a backbone may promise in ``BackboneSpec.provides``.
OPTIONAL_FIELDS = frozenset(
    {"layers", "distances", "distance_features", "span_scores", "arcs", "attention",
     "head_attention", "aux_loss"}
)
#: The ``BackboneOutput`` field that carries a backbone's structure of each kind.
STRUCTURE_FIELDS = {"distances": "distances", "spans": "span_scores", "arcs": "arcs"}


@dataclass(frozen=True)
class BackboneSpec:
    """What a built backbone declares; heads size themselves from it in ``bind``.

    Attributes:
        input_size: width E of the embeddings it reads.
        output_size: width of ``hidden``, the decoder's input (= E for a tied decoder).
        layer_sizes: width of each entry of ``BackboneOutput.layers``.
        provides: the optional ``BackboneOutput`` fields it fills.
        recurrent: whether it carries a state across windows (stream mode).
        incremental: whether ``forward(x, state)`` with the ``state`` it returned continues
            the same sequences (generation): recurrent backbones by their state, Transformers
            by a key/value cache (which training never carries across windows).
        structures: what it induces; a backbone's structure of kind ``distances`` is
            ``out.distances``, of kind ``spans`` ``out.span_scores``, of kind ``arcs``
            ``out.arcs``.
        distance_feature_sizes: true width of each layer's ``distance_features``.
        span_slots: K, the number of spans scored per position in ``span_scores`` (0 when
            the backbone provides none).
        bidirectional: it attends both ways within a sentence (a masked-LM backbone): its
            ``forward(x, state=None, lengths=None)`` reads ``lengths`` (B,), the tokens of each
            row (positions at or past a row's length are padding, which no position attends
            to), and ``SyntaxModel`` passes it ``Batch.lengths``. Such a backbone predicts the
            token at each position from the whole sentence, so it trains only with the masked
            objective (``data.objective: masked``); it is neither recurrent nor incremental.
    """

    input_size: int
    output_size: int
    layer_sizes: tuple[int, ...]
    provides: frozenset[str]
    recurrent: bool
    incremental: bool = False
    structures: tuple[Structure, ...] = ()
    distance_feature_sizes: tuple[int, ...] = field(default=())
    span_slots: int = 0
    bidirectional: bool = False

    def __post_init__(self) -> None:
        if self.bidirectional and (self.recurrent or self.incremental):
            raise ValueError("a bidirectional backbone is neither recurrent nor incremental: "
                             "it reads whole sentences")
        unknown = self.provides - OPTIONAL_FIELDS
        if unknown:
            raise ValueError(f"provides {sorted(unknown)}: not BackboneOutput fields "
                             f"({sorted(OPTIONAL_FIELDS)})")
        for s in self.structures:
            if STRUCTURE_FIELDS.get(s.kind) not in self.provides:
                raise ValueError(f"structure {s.name!r} of kind {s.kind!r} needs the backbone "
                                 f"to provide {STRUCTURE_FIELDS.get(s.kind, 'a field')!r}")


class Backbone(RecordsInit, nn.Module):
    """Base class of every backbone.

    A backbone maps embedded inputs ``x`` (B, T, E) and a carried ``state`` to a
    ``BackboneOutput`` whose ``hidden`` is (B, T, ``spec.output_size``). ``SyntaxLM`` owns
    the token embedding and the tied decoder. Every backbone sets ``self.spec`` (a
    ``BackboneSpec``) in its constructor; the parametrised backbone tests check that what it
    returns matches what it declares.

    ``layers`` means the same for every backbone: the output of each layer of its stack,
    bottom to top, as the backbone passes it on (inner layers after the between-layer
    dropout, the top layer before the output dropout); ``spec.layer_sizes`` gives their
    widths. Activation regularisation reads ``hidden`` (AR) and ``layers[-1]`` (TAR).
    """

    spec: BackboneSpec

    def forward(self, x: Tensor, state: Any = None) -> BackboneOutput:  # pragma: no cover
        raise NotImplementedError

    def pretrained_embedding(self) -> Tensor | None:
        """The token embedding (V, E) this backbone was loaded with (a pretrained GPT-2's),
        which ``SyntaxLM`` copies into its own embedding (tied to the decoder); None: the
        embedding is initialised by ``SyntaxLM``."""
        return None


class InsertOutput(NamedTuple):
    """What a ``LayerInsert`` returns: the next layer's input, its carried state and the
    ``BackboneOutput`` fields it fills (keys in its ``provides``)."""

    hidden: Tensor  # (B, T, H_l), read by the next layer
    state: Any
    fields: dict[str, Tensor]


class LayerInsert(RecordsInit, nn.Module):
    """A module run between layer ``after`` and layer ``after + 1`` (0-based) of a
    ``RecurrentStack``: it reads layer ``after``'s output and returns exactly what the next
    layer reads (so any dropout on it is the insert's own).

    ``forward(h, raw, state)``: ``h`` is the output after the between-layer dropout, ``raw``
    the same output before it (PaLM mixes its context into the undropped output).
    ``provides`` and ``structures`` join the stack's spec, as do the ``BackboneSpec`` fields
    returned by ``spec_fields``. ``bind(size, dropout_hidden)`` is called once by the stack
    with the width of the layer it reads and the stack's between-layer dropout rate, to build
    size-dependent parts. Its ``state`` is carried across windows with the stack's and reset
    with it (``None`` at the start of a stream).
    """

    provides: ClassVar[frozenset[str]] = frozenset()
    structures: ClassVar[tuple[Structure, ...]] = ()

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def bind(self, size: int, dropout_hidden: float) -> None:
        """Build the parts whose sizes depend on the layer width ``size``."""

    def spec_fields(self) -> dict[str, Any]:
        """Extra ``BackboneSpec`` fields this insert sets (e.g. ``span_slots``)."""
        return {}

    def forward(self, h: Tensor, raw: Tensor, state: Any
                ) -> InsertOutput:  # pragma: no cover
        raise NotImplementedError


class KVCache(NamedTuple):
    """The state of a Transformer backbone: per layer, the keys and values (B, heads, S,
    head_dim) of the S positions seen so far. An immutable value: reusing it gives the same
    continuation (a plain tuple of the same fields is accepted)."""

    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]

    @property
    def length(self) -> int:
        return self.keys[0].size(2)


def causal_mask(T: int, S: int, device: torch.device) -> Tensor:
    """(T, S) bool, True where query t (the last T of S positions) may attend to key s."""
    query_positions = torch.arange(S - T, S, device=device)  # (T,)
    return torch.arange(S, device=device)[None, :] <= query_positions[:, None]


def attention_layer_index(layer: int | None, num_layers: int) -> int | None:
    """A Transformer's ``attention_layer`` (negative counts from the top) as 0..L-1; None
    stays None. Raises a one-line ValueError outside the stack."""
    if layer is not None and not -num_layers <= layer < num_layers:
        raise InputError(f"attention_layer {layer} is not one of the {num_layers} layers "
                         f"(0..{num_layers - 1} or -1..-{num_layers})")
    return None if layer is None else layer % num_layers


class StackState(NamedTuple):
    """The carried state of a ``RecurrentStack``: one entry per layer and per insert."""

    layers: list[Any]
    inserts: list[Any]


class RecurrentStack(Backbone):
    """A stack of recurrent layers with AWD-style locked dropout, run by one loop.

    ``forward``: ``window_weights()`` (per-layer weights prepared once per window, e.g. a
    DropConnect mask), input dropout, then for each layer ``run_layer`` and, between
    layers, the between-layer dropout and any ``LayerInsert`` placed there; ``hidden`` is
    the top layer after the output dropout. Subclasses implement ``run_layer`` and may add
    fields with ``add_outputs``. Layer widths are ``[hidden_size] * (L - 1) + [input_size]``
    (the top layer matches the embedding, for the tied decoder).

    State: a ``StackState`` (a plain tuple of the same fields is accepted); ``None`` means
    zeros.
    """

    provides: ClassVar[frozenset[str]] = frozenset({"layers"})
    structures: ClassVar[tuple[Structure, ...]] = ()

    def __init__(self, input_size: int, hidden_size: int, num_layers: int,
                 dropout_input: float, dropout_hidden: float, dropout_output: float,
                 inserts: Sequence[LayerInsert] = ()) -> None:
        super().__init__()
        for name, size in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):
            errors.at_least(name, size)
        for name, p in (("dropout_input", dropout_input), ("dropout_hidden", dropout_hidden),
                        ("dropout_output", dropout_output)):
            errors.probability(name, p)
        self.input_size = input_size
        self.layer_sizes = [hidden_size] * (num_layers - 1) + [input_size]
        self.drop_input = LockedDropout(dropout_input)
        self.drop_hidden = LockedDropout(dropout_hidden)
        self.drop_output = LockedDropout(dropout_output)
        self.inserts = nn.ModuleList(inserts)
        self._insert_at = {}
        for i, insert in enumerate(inserts):
            if not 0 <= insert.after < num_layers - 1:
                raise InputError(f"{type(insert).__name__}(after={insert.after}): an insert "
                                 f"sits between two of the {num_layers} layers, so after must "
                                 f"be in 0..{num_layers - 2}")
            if insert.after in self._insert_at:
                raise InputError(f"two inserts after layer {insert.after}")
            self._insert_at[insert.after] = i

    def bind_inserts(self) -> None:
        """Build the inserts for the layer widths; subclasses call it after their layers."""
        for insert in self.inserts:
            insert.bind(self.layer_sizes[insert.after], self.drop_hidden.p)

    def make_spec(self, provides: frozenset[str] = frozenset(),
                  structures: tuple[Structure, ...] = (), **extra: Any) -> BackboneSpec:
        """This stack's spec: its own outputs plus its inserts'."""
        for insert in self.inserts:
            provides = provides | insert.provides
            structures = structures + insert.structures
            extra |= insert.spec_fields()
        return BackboneSpec(
            input_size=self.input_size, output_size=self.input_size,
            layer_sizes=tuple(self.layer_sizes), provides=frozenset({"layers"}) | provides,
            recurrent=True, incremental=True, structures=structures, **extra)

    # ------------------------------------------------------------------ subclass hooks
    def window_weights(self) -> list[Any]:
        """Per-layer values prepared once per window and passed to ``run_layer``."""
        return [None] * len(self.layer_sizes)

    def run_layer(self, index: int, x: Tensor, state: Any, weight: Any
                  ) -> tuple[Tensor, Any, Any]:  # pragma: no cover
        """Layer ``index`` over the window: x (B, T, I) -> (y (B, T, H_l), new state, extra);
        ``state`` is ``None`` at the start of a stream."""
        raise NotImplementedError

    def add_outputs(self, out: BackboneOutput, extras: list[Any]) -> None:
        """Fill subclass-specific fields of ``out`` from the per-layer ``extras``."""

    # ------------------------------------------------------------------ the loop
    def forward(self, x: Tensor, state: StackState | None = None) -> BackboneOutput:
        # x: (B, T, E)
        n = len(self.layer_sizes)
        st = StackState([None] * n, [None] * len(self.inserts)) if state is None \
            else StackState(*state)
        weights = self.window_weights()
        h = self.drop_input(x)
        layer_states, insert_states = [], list(st.inserts)
        layers, extras, fields = [], [], {}
        for l in range(n):
            y, s, extra = self.run_layer(l, h, st.layers[l], weights[l])  # (B, T, H_l)
            layer_states.append(s)
            extras.append(extra)
            h = y if l == n - 1 else self.drop_hidden(y)
            layers.append(h)
            if l in self._insert_at:
                i = self._insert_at[l]
                h, insert_states[i], more = self.inserts[i](h, y, st.inserts[i])
                fields.update(more)
        out = BackboneOutput(hidden=self.drop_output(layers[-1]),  # (B, T, E)
                             state=StackState(layer_states, insert_states), layers=layers)
        self.add_outputs(out, extras)
        for name, value in fields.items():
            setattr(out, name, value)
        return out
