"""What synlm's models, heads and DataModules can do, by type: the scorers, the lm-eval
model, generation, provenance and the commands check ``isinstance(model, Searches)`` (and
the others here) rather than probing for an attribute, and ``require`` turns a missing
capability of a model into one line naming the model and what it lacks. Protocols, so that
an object has a capability by having its members: ``SyntaxLM`` runs a backbone, induces
structures and samples, ``TransitionLM`` searches and parses, a loaded model names its
file, DM's mixture head keeps histories, ``SynLMDataModule`` serves gold. (What a scorer of
the syntactic benchmarks can say is ``synlm.tse.scores``'.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from synlm.errors import InputError


@runtime_checkable
class Searches(Protocol):
    """Scores a sentence by a search over the trees of its transition model ``model``
    (``synlm.transition.beam``, or particle filtering): the word log-probabilities are the
    search's, its settings are ``beam`` (``SearchSettings``) and the beam's sizes can be set;
    ``search_convention`` names the quantity it computes."""

    model: Any
    beam: Any

    @property
    def search_convention(self) -> str:
        """The surprisal convention of its search (``synlm.transition.types.CONVENTIONS``)."""

    def use_beam(self, beam_size: int | None = None, word_beam_size: int | None = None,
                 shift_size: int | None = None, convention: str | None = None,
                 max_memory_mb: float | None = None) -> None:
        """Search with these sizes, surprisal convention and memory budget from now on; one
        left unset keeps its value."""

    def search_ids(self, rows: Sequence[Sequence[int]]) -> list[Any]:
        """One ``SearchResult`` per sentence given as word ids."""


@runtime_checkable
class Parses(Protocol):
    """Gives each sentence's best tree of its own (a generative parser's)."""

    def parse(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        """An ``nltk.Tree`` per sentence, its words as leaves."""


@runtime_checkable
class InducesStructures(Protocol):
    """Induces named structures (distances, spans, arcs) from its states, which ``synlm
    parse`` decodes into trees or heads (``SyntaxLM.structures``, ``induce``)."""

    @property
    def structures(self) -> Mapping[str, Any]:
        """Each structure's name and kind."""

    def induce(self, tokens: Any, lengths: Any = None) -> dict[str, Any]:
        """The structures of a batch of token rows (``lengths``: the tokens of each, which a
        bidirectional backbone reads)."""


@runtime_checkable
class Samples(Protocol):
    """Generates text left to right, a token at a time from a carried state
    (``synlm.generation``)."""

    def step(self, tokens: Any, state: Any = None) -> tuple[Any, Any]:
        """The next token's log-probabilities and the state after ``tokens``."""


@runtime_checkable
class RunsBackbone(Protocol):
    """Runs a backbone under syntax heads (``SyntaxLM``): its network is ``backbone``."""

    backbone: Any


@runtime_checkable
class FromCheckpoint(Protocol):
    """Was read from a checkpoint by ``synlm.loading.load_model``, which names the file."""

    checkpoint_file: str


@runtime_checkable
class KeepsHistories(Protocol):
    """A head whose generation state is each row's history of past positions (DM's mixture,
    ``synlm.heads.dependency``): ``reset_rows`` empties the marked rows' (a sentence ended
    in ``synlm.generation.generate_stream``), and ``sampling == "released"`` makes
    ``synlm.generation`` keep the released DM-LSTM sampler's histories."""

    sampling: str

    def reset_rows(self, state: Any, rows: Any) -> Any:
        """``state`` with the history of the rows marked in ``rows`` (B,) emptied."""


@runtime_checkable
class ServesGold(Protocol):
    """A DataModule that builds the gold fields a model's heads train on when they ask
    (``SynLMDataModule``), and holds the corpus's ``vocab`` and ``normalization``, which
    ``SyntaxLM.setup`` takes (not part of the check: reading ``vocab`` builds it), and the
    ``objective`` its batches serve (``causal`` or ``masked``), which the backbone must fit."""

    objective: str

    def request(self, fields: frozenset[str], who: str,
                options: Mapping[str, Any] | None = None) -> None:
        """Serve ``fields`` from now on, built with ``options``; a field the corpus cannot
        supply is a one-line error naming ``who``."""


#: What each capability a command may ``require`` of a model is called in a message.
WHAT = {Searches: "search over trees", Parses: "trees of its own",
        InducesStructures: "induced structures", Samples: "left-to-right sampling"}

T = TypeVar("T")


def model_name(model: Any) -> str:
    """The model's class, and that of the transition model a searching recipe wraps:
    ``TransitionLM(RNNG)``."""
    if isinstance(model, Searches):
        return f"{type(model).__name__}({type(model.model).__name__})"
    return type(model).__name__


def require(model: Any, capability: type[T], what: str) -> T:
    """``model`` if it has ``capability``, else an ``InputError`` in one line: ``what`` (the
    flag or command asking) needs it and this model's class has none."""
    if not isinstance(model, capability):
        raise InputError(f"{what}: the model ({model_name(model)}) has no "
                         f"{WHAT[capability]} ({capability.__name__})")
    return model
