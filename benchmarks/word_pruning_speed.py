"""The RNNG family's beam search with its words pruned by their bound against the same search
scoring every word (``synlm.transition.beam.step_log_probs``), on BLiMP sentences, in one
process, the two alternating (pruned, every, every, pruned, ...):

    OMP_NUM_THREADS=1 SYNLM_DATA_DIR=/path/to/data python benchmarks/word_pruning_speed.py \\
        RUN [RUN ...] --pairs 12 --repeats 2 [--beam 100/10/1] [--batch-size 16]

``RUN``: a checkpoint of an RNNG, in-order RNNG or CAG (``synlm.loading.load_model``). The
sentences are both of the first pair of each of the first ``--pairs`` BLiMP paradigms (the
words ``synlm evaluate-syntax --benchmark blimp --subset 1`` scores), scored by
``ModelScorer`` in batches of ``--batch-size``. For each model: the CPU seconds of each
search (``time.process_time``), the median of the paired ratios (pruned ÷ every), the share
of the word softmax's rows the pruned search computed (rows scored ÷ rows whose ``SHIFT`` is
legal), and the largest difference of a word's log-probability between the two (float32
rounding: the word softmax runs on other rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from synlm.loading import load_model
from synlm.transition import beam
from synlm.transition.rnng import RNNGStep
from synlm.tse.blimp import read_blimp
from synlm.tse.scoring import ModelScorer

PRUNED = beam.step_log_probs


def every_word(model: Any, state: Any, words: torch.Tensor, legal: torch.Tensor,
               scores: torch.Tensor, shift_size: int, convention: dict[str, bool]
               ) -> torch.Tensor:
    """``step_log_probs`` scoring every word: the model's whole step."""
    return model.next_log_probs(state, words, legal, **convention).double()


class RowCount:
    """Counts the rows whose word bound and whose word the pruned search computes."""

    def __init__(self) -> None:
        self.bounded = self.scored = 0
        self.bounds, self.log_probs = RNNGStep.word_bounds, RNNGStep.word_log_probs

    def __enter__(self) -> RowCount:
        count = self

        def bounds(step: RNNGStep, rows: torch.Tensor) -> torch.Tensor:
            count.bounded += rows.numel()
            return count.bounds(step, rows)

        def log_probs(step: RNNGStep, rows: torch.Tensor) -> torch.Tensor:
            count.scored += rows.numel()
            return count.log_probs(step, rows)

        RNNGStep.word_bounds, RNNGStep.word_log_probs = bounds, log_probs
        return self

    def __exit__(self, *exc: object) -> None:
        RNNGStep.word_bounds, RNNGStep.word_log_probs = self.bounds, self.log_probs


def timed(scorer: ModelScorer, sentences: list[list[str]], step: Any) -> tuple[float, list]:
    """CPU seconds of one scoring of ``sentences`` with the search's step ``step``."""
    beam.step_log_probs = step
    try:
        start = time.process_time()
        scored = scorer.score(sentences)
        return time.process_time() - start, scored
    finally:
        beam.step_log_probs = PRUNED


def measure(run: str, pairs: int, repeats: int, sizes: tuple[int, int, int],
            batch_size: int) -> dict[str, Any]:
    model = load_model(run)
    model.use_beam(*sizes)
    scorer = ModelScorer(model, batch_size=batch_size)
    texts = [text for pair in read_blimp(subset=1)[:pairs] for text in (pair.good, *pair.bad)]
    sentences = [scorer.words(text) for text in texts]
    times: dict[str, list[float]] = {"pruned": [], "every": []}
    for round_ in range(repeats):
        for name in ("pruned", "every") if round_ % 2 == 0 else ("every", "pruned"):
            if name == "pruned":
                with RowCount() as count:
                    seconds, pruned = timed(scorer, sentences, PRUNED)
            else:
                seconds, every = timed(scorer, sentences, every_word)
            times[name].append(seconds)
    difference = max(abs(a - b) for x, y in zip(pruned, every) if x.parsed and y.parsed
                     for a, b in zip(x.word_log_probs, y.word_log_probs))
    return {"run": run, "sentences": len(sentences), "beam": "/".join(map(str, sizes)),
            "cpu_s": times, "ratio": statistics.median(
                p / e for p, e in zip(times["pruned"], times["every"])),
            "rows_scored": round(count.scored / count.bounded, 3),
            "max_word_difference": difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN")
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--beam", default="100/10/1")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    sizes = tuple(int(x) for x in args.beam.split("/"))
    for run in args.runs:
        print(json.dumps(measure(run, args.pairs, args.repeats, sizes,  # type: ignore[arg-type]
                                 args.batch_size)))


if __name__ == "__main__":
    main()
