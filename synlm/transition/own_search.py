"""What a recipe whose model searches its trees its own way shares (``PushdownLM``,
``GPSTLM``): the beam's settings as ``Searches.beam``, the one-line refusal of the top-down
searches' other settings, and the sentences encoded as its training corpus was read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from synlm import errors
from synlm.data.datamodule import SynLMDataModule
from synlm.data.normalization import encode_words
from synlm.errors import InputError


@dataclass(frozen=True)
class OwnBeam:
    """A search with a beam size and one convention, its sentences batched while their
    caches fit in ``max_memory_mb`` (a sentence's beam is searched whole)."""

    beam_size: int
    convention: str
    max_memory_mb: float = 2048.0
    #: How the search goes, after its beam size (``describe``).
    manner: ClassVar[str] = ""

    def describe(self) -> str:
        return f"beam {self.beam_size}{self.manner}"

    def end_is_certain(self, model: Any) -> bool:
        """The end of a sentence is scored, never certain."""
        return False


def refuse_other_settings(who: str, beam: OwnBeam, **settings: Any) -> None:
    """One line naming the first of ``settings`` that is given (not None) and that the
    search ``beam`` of ``who`` does not have."""
    given = next((name for name, value in settings.items() if value is not None), None)
    if given:
        raise InputError(f"{given}: {who} searches by {beam.describe()} alone")


def encoded(recipe: Any, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
    """Each sentence's word ids in ``recipe.vocab``, its words normalised as the training
    corpus was read (``recipe.normalization``)."""
    if recipe.vocab is None:
        raise InputError("the model has no vocabulary (it was never set up on data)")
    return encode_words(recipe.vocab, recipe.normalization, sentences)


def sentence_data(recipe: Any) -> SynLMDataModule | None:
    """``recipe``'s synlm DataModule (None for another), refused in one line unless it reads
    sentences (``data.mode: sentence``), the only batches such a recipe trains on."""
    datamodule = recipe.datamodule
    if not isinstance(datamodule, SynLMDataModule):
        return None
    if datamodule.mode != "sentence":
        raise errors.SettingError("data.mode", datamodule.mode,
                                  f"sentence for the recipe {type(recipe).__name__}")
    return datamodule
