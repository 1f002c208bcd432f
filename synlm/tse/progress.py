"""A scorer's progress on stderr (``ProgressScorer``): a long evaluation shows how far it is
and about how long it has left, as a bar on a terminal and as a line at every tenth of its
sentences in a log file, each under the model's label and what it scores (``model_shown``:
every model of a several-model run, and each of its untrained copies, by name); or nothing
(``evaluate-syntax --no-progress``). It reads the ``progress`` callback of the scorer it
wraps (``ModelScorer``, ``HFScorer``, ``PLLScorer``: called with the number of sentences
after each batch; a ``JournaledScorer`` also with ``read=True`` for the sentences it read
from its journal). The time left is the time so far times the sentences left over those
scored in it (``time_left``), the sentences read from a journal counted as done and the
rate timed from their reading: the sentences of a benchmark come in its order, not by
length, so the rate so far is an unbiased guess once a few batches are done."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from synlm.tse.scores import ScoredSentence


def adopt(wrapper: Any, scorer: Any) -> None:
    """``scorer``'s public members, but ``score`` and ``progress``, as ``wrapper``'s own
    (words, syntaxgym_mapping, covers_end, convention, ...): a capability is checked with
    isinstance against a protocol, which from Python 3.12 looks members up statically,
    never through a ``__getattr__``."""
    for name in dir(scorer):
        if not name.startswith("_") and name not in ("score", "progress"):
            setattr(wrapper, name, getattr(scorer, name))


class ProgressScorer:
    """``scorer`` showing its progress on stderr under ``label`` (what it scores), after
    ``model`` (the model's label) where given: a bar with the time left on a terminal, else
    a plain line at every tenth of the sentences, after ``prog`` (``synlm evaluate-syntax:
    awd: blimp: 6,700/67,000 sentences, 12 s, about 1 min 48 s left``: a log file shows how
    far a long run is, of which model, and when it will end). The scorer's other members
    are its own."""

    def __init__(self, scorer: Any, label: str = "", prog: str = "synlm",
                 model: str = "") -> None:
        from rich.console import Console

        adopt(self, scorer)
        self.scorer, self.prog = scorer, prog
        self.label = f"{model}: {label}" if model else label
        self.console = Console(stderr=True)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        if self.console.is_terminal:
            return self._with_bar(sentences)
        total, done, journaled, shown = len(sentences), 0, 0, 0
        start = rated_from = time.monotonic()

        def log(n: int, read: bool = False) -> None:
            nonlocal done, journaled, shown, rated_from
            done, journaled = done + n, journaled + (n if read else 0)
            shows = done * 10 // max(total, 1) > shown or done == total
            if not (read or shows):
                return
            now = time.monotonic()
            rated_from = now if read else rated_from
            if shows:
                shown = done * 10 // max(total, 1)
                scored, left = done - journaled, total - done
                more = "" if not left or not scored else \
                    f", about {duration(time_left(now - rated_from, scored, scored + left))} left"
                print(f"{self.prog}: {self.label}: {done:,}/{total:,} sentences, "
                      f"{duration(now - start)}{more}", file=sys.stderr, flush=True)

        return self._scored(sentences, log)

    def _with_bar(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("sentences"), TimeElapsedColumn(), TextColumn("left"),
                   TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task(self.label, total=len(sentences))
            # a journal's sentences come as the first advance, which rich's rate leaves out
            return self._scored(sentences, lambda n, read=False: bar.advance(task, n))

    def _scored(self, sentences: Sequence[Sequence[str]],
                progress: Callable[..., None]) -> list[ScoredSentence]:
        self.scorer.progress = progress
        try:
            return self.scorer.score(sentences)
        finally:
            self.scorer.progress = None


def time_left(elapsed: float, done: int, total: int) -> float:
    """Seconds left after ``done`` of ``total`` sentences in ``elapsed`` seconds, at the
    rate so far."""
    return elapsed * (total - done) / max(done, 1)


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a duration: ``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600:,} h {s % 3600 // 60:02d} min"


def model_shown(label: str, untrained: Sequence[Any], prog: str, shown: bool = True
                ) -> Callable[[Any, str], Any]:
    """How one model's scorers show their progress (``synlm.tse.evaluation.Shown``): a
    scorer given with what it scores, under ``label``, the model's name in the tables; one of
    its ``untrained`` scorers (their order) under ``<label> untrained <k> of <n>``; the
    scorer itself unless ``shown``."""
    def show(scorer: Any, what: str) -> Any:
        if not shown:
            return scorer
        k = next((k for k, other in enumerate(untrained) if other is scorer), None)
        name = label if k is None else f"{label} untrained {k + 1} of {len(untrained)}"
        return ProgressScorer(scorer, what, prog, model=name)

    return show
