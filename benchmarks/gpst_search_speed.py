"""GPST search speed: the batched, cached searches of ``synlm.transition.gpst_search`` against
the per-sentence searches that rerun the model over each hypothesis's whole action prefix at
every step (the module as it was before its key/value caches: a file given by ``--old``, e.g.
``git show f36a840^:synlm/transition/gpst_search.py > old_search.py``), on the same random
``GPST`` in one process, one thread.

    OMP_NUM_THREADS=1 python benchmarks/gpst_search_speed.py --old old_search.py \\
        [--size small|gpst-small] [--sentences 8] [--words 8 12] [--beam 5] [--repeats 5]

Sizes: ``small`` (256 wide, 4 heads, 1 action + 2 generation layers, a 128-wide 2-layer
composition, 5,000 words) and ``gpst-small`` (GPST-small: 768 wide, 12 heads, 3 + 9 layers, a
256-wide 4-layer composition, GPT-2's 50,264 ids), ``torch.manual_seed(0)``, evaluation mode,
float32. The sentences: ``--sentences`` random word sequences of lengths spread evenly over
``--words`` (inclusive). One trial times the old search over the sentences one at a time,
then the new over all of them in one batch (and the two alternate, so that load from other
processes hits both alike); the ratio is the median of the trials' paired ratios (old / new).
Both searches (word-synchronous ``beam_search``, action-synchronous
``action_synchronous_search``) are timed; before timing, the first sentence's results from
both must agree (surprisals and scores to 1e-4, the same best parse), and that run is the
warm-up. Prints one JSON line per search.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from synlm.transition.gpst import GPST
from synlm.transition.gpst_search import action_synchronous_searches, beam_searches

SIZES: dict[str, dict[str, int]] = {
    "small": dict(vocab_size=5000, size=256, n_heads=4, action_layers=1, generation_layers=2,
                  compose_size=128, compose_heads=4, compose_ffn=512, compose_layers=2),
    "gpst-small": dict(vocab_size=50264),
}


def load_old(path: Path) -> ModuleType:
    """The per-sentence search module at ``path``."""
    spec = importlib.util.spec_from_file_location("old_gpst_search", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--old {path}: expected a Python file (the earlier gpst_search.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def timed(search: Any, *args: Any) -> float:
    """Seconds of ``search(*args)``."""
    begin = time.perf_counter()
    search(*args)
    return time.perf_counter() - begin


def one_at_a_time(search: Any, model: GPST, sentences: list[list[int]], beam: int) -> None:
    for sentence in sentences:
        search(model, torch.tensor(sentence), beam)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--words", type=int, nargs=2, default=(8, 12))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    old = load_old(args.old)
    torch.manual_seed(0)
    model = GPST(**SIZES[args.size], dropout=0.0).eval()
    shortest, longest = args.words
    lengths = torch.linspace(shortest, longest, args.sentences).round().long().tolist()
    sentences = [torch.randint(model.vocab_size, (n,)).tolist() for n in lengths]
    searches = {
        "word_synchronous": (old.beam_search, beam_searches),
        "action_synchronous": (old.action_synchronous_search, action_synchronous_searches),
    }
    torch.set_grad_enabled(False)
    for name, (old_search, new_search) in searches.items():
        first = torch.tensor(sentences[0])
        before, after = old_search(model, first, args.beam), new_search(
            model, [sentences[0]], args.beam)[0]
        assert before.parses[0][0] == after.parses[0][0], name
        for (_, a), (_, b) in zip(before.parses, after.parses, strict=True):
            assert abs(a - b) < 1e-4, (name, a, b)
        old_times, new_times = [], []
        for _ in range(args.repeats):
            old_times.append(timed(one_at_a_time, old_search, model, sentences, args.beam))
            new_times.append(timed(new_search, model, sentences, args.beam))
        ratios = [o / n for o, n in zip(old_times, new_times)]
        words = sum(lengths)
        print(json.dumps({
            "search": name, "size": args.size, "sentences": args.sentences,
            "words": words, "beam": args.beam, "threads": torch.get_num_threads(),
            "old_s": round(statistics.median(old_times), 3),
            "new_s": round(statistics.median(new_times), 3),
            "old_words_per_s": round(words / statistics.median(old_times), 2),
            "new_words_per_s": round(words / statistics.median(new_times), 2),
            "speedup_median_of_ratios": round(statistics.median(ratios), 2),
        }), flush=True)


if __name__ == "__main__":
    main()
