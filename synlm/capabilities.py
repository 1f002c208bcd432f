"""What a loaded model can do, by type: the scorers, the lm-eval model and the commands
check ``isinstance(model, Searches)`` (and the others here) rather than probing for a
method, and ``require`` turns a missing capability into one line naming the model and what
it lacks. Protocols, so that a model has a capability by having its methods: ``SyntaxLM``
induces structures and samples, ``TransitionLM`` searches and parses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from synlm.errors import InputError


@runtime_checkable
class Searches(Protocol):
    """Scores a sentence by beam search over its trees (``synlm.transition.beam``): the
    word log-probabilities are the beam's, and the beam's sizes can be set."""

    def use_beam(self, beam_size: int | None = None, word_beam_size: int | None = None,
                 shift_size: int | None = None, convention: str | None = None) -> None:
        """Search with these sizes and surprisal convention from now on; one left unset
        keeps its value."""

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

    def induce(self, tokens: Any) -> dict[str, Any]:
        """The structures of a batch of token rows."""


@runtime_checkable
class Samples(Protocol):
    """Generates text left to right, a token at a time from a carried state
    (``synlm.generation``)."""

    def step(self, tokens: Any, state: Any = None) -> tuple[Any, Any]:
        """The next token's log-probabilities and the state after ``tokens``."""


#: What each capability is called in a message.
WHAT = {Searches: "beam search over trees", Parses: "trees of its own",
        InducesStructures: "induced structures", Samples: "left-to-right sampling"}

T = TypeVar("T")


def model_name(model: Any) -> str:
    """The model's class, and that of the model a recipe wraps: ``TransitionLM(RNNG)``."""
    inner = type(getattr(model, "model", None))
    transition = any(c.__name__ == "TransitionModel" for c in inner.__mro__)
    return f"{type(model).__name__}({inner.__name__})" if transition else type(model).__name__


def require(model: Any, capability: type[T], what: str) -> T:
    """``model`` if it has ``capability``, else an ``InputError`` in one line: ``what`` (the
    flag or command asking) needs it and this model's class has none."""
    if not isinstance(model, capability):
        raise InputError(f"{what}: the model ({model_name(model)}) has no "
                         f"{WHAT[capability]} ({capability.__name__})")
    return model
