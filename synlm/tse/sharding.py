"""``synlm evaluate-syntax`` over several processes, one a device (``torchrun
--nproc_per_node N synlm evaluate-syntax ...``): ``joined`` joins the process group torchrun
describes (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``; NCCL between CUDA
devices, gloo on CPUs), and ``Sharded`` splits each call of a scorer: the sentences are cut
into blocks of ``SPAN`` in their order and rank r scores blocks r, r + N, ... (a slow beam
search spreads its long and short sentences alike, and a benchmark's neighbours, a minimal
pair or an item's conditions, which begin alike, are scored in one process, where a beam
search shares the words they begin with: ``synlm.transition.beam.prefix_leaders``), then
every rank gathers the others' (``all_gather_object``) and returns them in the sentences'
order. A sentence is scored from a fresh state alone, so the numbers are one
process's, but for the rounding of a float32 model batched with other sentences (below
1e-6 on the test's, tests/test_ddp_evaluate_syntax.py). Rank 0 alone shows progress,
prints and writes."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from synlm.tse.progress import adopt
from synlm.tse.scores import ScoredSentence


def joined(device: str = "cpu") -> tuple[int, int]:
    """This process's rank and the number of processes: (0, 1) unless torchrun started it
    (``WORLD_SIZE`` > 1), when the process group is joined first (once), over NCCL where
    ``device`` is a CUDA device, else gloo."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return dist.get_rank(), dist.get_world_size()


def local_device(device: str) -> str:
    """``cuda`` under torchrun: this process's own device, ``cuda:LOCAL_RANK``."""
    local = os.environ.get("LOCAL_RANK")
    return f"cuda:{local}" if device == "cuda" and local is not None else device


#: Consecutive sentences one process scores.
SPAN = 8


def owned(n: int, rank: int, world: int) -> list[int]:
    """The indices of ``n`` sentences that process ``rank`` of ``world`` scores, in order."""
    return [i for i in range(n) if i // SPAN % world == rank]


class Sharded:
    """``scorer`` with each call split over the ``world`` processes (module docstring);
    its other members are the scorer's own. ``progress`` (set by a ``ProgressScorer``) is
    told this rank's sentences times ``world``: about the sentences done on every rank."""

    def __init__(self, scorer: Any, rank: int, world: int) -> None:
        adopt(self, scorer)
        self.scorer, self.rank, self.world = scorer, rank, world
        self.progress: Callable[..., None] | None = None

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        import torch.distributed as dist

        shown = self.progress
        self.scorer.progress = None if shown is None else (
            lambda n, **told: shown(n * self.world, **told))
        try:
            mine = self.scorer.score([sentences[i] for i in
                                      owned(len(sentences), self.rank, self.world)])
        finally:
            self.scorer.progress = None
        shards: list[Any] = [None] * self.world
        dist.all_gather_object(shards, mine)
        scored: list[Any] = [None] * len(sentences)
        for rank, shard in enumerate(shards):
            for i, sentence in zip(owned(len(sentences), rank, self.world), shard, strict=True):
                scored[i] = sentence
        return scored


def sharded(show: Callable[[Any, str], Any], rank: int, world: int
            ) -> Callable[[Any, str], Any]:
    """``show`` (how a scorer shows its progress, ``synlm.tse.evaluation.Shown``) of each
    scorer ``Sharded`` over ``world`` processes (as it is for one)."""
    if world == 1:
        return show
    return lambda scorer, what: show(Sharded(scorer, rank, world), what)
