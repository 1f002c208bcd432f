"""``synlm evaluate-syntax`` over several processes, one a device (``torchrun
--nproc_per_node N synlm evaluate-syntax ...``): ``joined`` joins the process group torchrun
describes (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``; NCCL between CUDA
devices, gloo on CPUs), and ``Sharded`` splits each call of a scorer: rank r scores
sentences r, r + N, ... (a slow beam search spreads its long and short sentences alike),
then every rank gathers the others' (``all_gather_object``) and returns them in the
sentences' order. A sentence is scored from a fresh state alone, so the numbers are one
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
            mine = self.scorer.score(sentences[self.rank::self.world])
        finally:
            self.scorer.progress = None
        shards: list[Any] = [None] * self.world
        dist.all_gather_object(shards, mine)
        return [shards[i % self.world][i // self.world] for i in range(len(sentences))]


def sharded(show: Callable[[Any, str], Any], rank: int, world: int
            ) -> Callable[[Any, str], Any]:
    """``show`` (how a scorer shows its progress, ``synlm.tse.evaluation.Shown``) of each
    scorer ``Sharded`` over ``world`` processes (as it is for one)."""
    if world == 1:
        return show
    return lambda scorer, what: show(Sharded(scorer, rank, world), what)
