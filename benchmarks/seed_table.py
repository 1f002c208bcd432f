"""The parsing figures of ``benchmarks/induction_budget.sh`` as one Markdown table: for each
model, each figure's mean over the seeds that have it, with their range, and the last
validation perplexity of each seed (``val/ppl``, or ``val/mlm_ppl`` for a masked LM).

    python benchmarks/seed_table.py OUT_DIR NAME [NAME ...]
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

#: (file suffix, JSON key, column) of each figure.
FIGURES = [("uf1", "uf1_sentence", "UF1 sent. (kim)"), ("uf1", "uf1_corpus", "UF1 corpus"),
           ("dda", "dda", "directed"), ("dda", "uda", "undirected")]


def last_validation(run: Path) -> str:
    """The run's last validation perplexity (``val/ppl`` or ``val/mlm_ppl``), or a dash."""
    for metrics in sorted(run.glob("version_*/metrics.csv"), reverse=True):
        rows = list(csv.DictReader(metrics.open()))
        for key in ("val/ppl", "val/mlm_ppl"):
            values = [r[key] for r in rows if r.get(key)]
            if values:
                return f"{float(values[-1]):.1f}"
    return "—"


def cell(values: list[float]) -> str:
    if not values:
        return "—"
    mean = sum(values) / len(values)
    return f"{mean:.2f} [{min(values):.2f}, {max(values):.2f}]" if len(values) > 1 \
        else f"{mean:.2f}"


def main(out: Path, names: list[str]) -> None:
    seeds = sorted(out.glob("seed_*"))
    print("| model | seeds | val ppl (a seed each) | "
          + " | ".join(column for _, _, column in FIGURES) + " |")
    print("|---|---:|---:|" + "---:|" * len(FIGURES))
    for name in names:
        trained = [s for s in seeds if (s / name / "finished").exists()]
        ppl = " / ".join(last_validation(s / name) for s in trained)
        cells = []
        for suffix, key, _ in FIGURES:
            files = [s / f"{name}.{suffix}.json" for s in trained]
            cells.append(cell([json.loads(f.read_text())[key] for f in files if f.exists()
                               and f.stat().st_size]))
        print(f"| {name} | {len(trained)} | {ppl or '—'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
