"""Time building all syntax targets (distances, PaLM spans, dependency sets) on one core.

    python benchmarks/targets.py [--sentences 50000] [--data-dir DIR]   # DIR: $SYNLM_DATA_DIR

Reports the seconds spent in ``build_targets`` (the corpus is read first, not timed) for
the seeded synthetic treebank and, when the staged PTB text and NLTK treebank are present,
for PTB-Concat-Syn (its train split: 42,068 lines of which ~3.9k carry trees), plus a
``full-trees`` variant of as many sentences, all with real trees (the ~3.9k gold trees
repeated), standing in for a full LDC WSJ.
"""

from __future__ import annotations

import argparse
import os
import time
from itertools import cycle, islice
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from synlm.data.files import default_data_dir
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.treebanks import PTBConcatSyn
from synlm.syntax import Sentence, build_targets


def timed(name: str, sentences: list[Sentence], repeat: int = 3) -> None:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        targets = build_targets(sentences, mode="stream", span_window=10)
        best = min(best, time.perf_counter() - start)
    n_words = sum(len(s.words) for s in sentences)
    with_trees = sum(s.tree is not None for s in sentences)
    print(f"{name:>24}: {len(sentences):6d} sentences ({with_trees} with trees, {n_words} words)"
          f" -> {best:.2f} s  [N={len(targets.distances)}, D={targets.dep_targets.shape[1]}]")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=50_000)
    p.add_argument("--data-dir", default=str(default_data_dir()))
    args = p.parse_args()

    synthetic = SyntheticTreebank(n_train=args.sentences).sentences("train")
    timed("synthetic", synthetic)
    if (Path(args.data_dir) / "nltk_treebank" / "treebank.zip").exists():
        ptb = PTBConcatSyn(data_dir=args.data_dir).sentences("train")
        timed("ptb_syn (NLTK sample)", ptb)
        with_trees = [s for s in ptb if s.tree is not None]
        timed("ptb_syn (full-trees)", list(islice(cycle(with_trees), len(ptb))))


if __name__ == "__main__":
    main()
