"""The files and the terminal table of ``synlm evaluate-syntax``, from the models it scored
(``synlm.tse.evaluation.Evaluated``): every record as JSON lines (``write_records``),
SyntaxGym's region surprisals, the side-by-side report folder (``write_report``: tables in
Markdown, CSV and LaTeX, plots), each written whole with the run's provenance beside it
(``write_outputs``); the headline table the command shows on stderr (``headline_table``);
and the per-token surprisals of one's own sentences (``sentence_surprisals``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synlm.data.vocab import atomic_write_text
from synlm.errors import InputError
from synlm.tse.evaluation import Evaluated, Results, Spread, by_label, headline
from synlm.tse.scores import SearchesTrees
from synlm.tse.units import GROUP_UNITS

if TYPE_CHECKING:
    from rich.table import Table

    from synlm.tse import tables

#: label -> its results, one a seed.
Models = dict[str, list[Results]]
#: The report's accuracy figures: benchmark, its groups (``synlm.tse.plots.plot_units``), and
#: the file name.
FIGURES = (("syntaxgym", "circuits", "circuits"), ("blimp", "phenomena", "phenomena"),
           ("pairs", "phenomena", "pairs_phenomena"))


def write_records(path: str, runs: Sequence[Evaluated]) -> int:
    """Every record of ``runs`` as JSON lines (with ``model``, the label, when there are
    several; and ``source`` when a label names several runs), written whole or not at all;
    how many."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    count = 0
    seeds = len({run.name for run in runs}) < len(runs)
    with partial.open("w", encoding="utf-8") as out:
        for run in runs:
            extra = {"model": run.name} if len(runs) > 1 else {}
            if seeds:
                extra["source"] = run.source
            for result in run.results.values():
                for record in result.records:
                    out.write(json.dumps({**extra, **record}) + "\n")
                    count += 1
    os.replace(partial, target)
    return count


def table_models(runs: list[Evaluated], config: bool = False) -> tuple[Models, Models | None]:
    """The models of the tables, label -> its results (one a seed: a label's runs, or a
    config's untrained seeds where ``config``), and each one's untrained baseline where
    scored."""
    if config:
        return {runs[0].name: runs[0].untrained}, None
    groups = by_label(runs)
    models = {label: [run.results for run in group] for label, group in groups.items()}
    baselines = {label: group[0].untrained for label, group in groups.items()
                 if group[0].untrained}
    return models, baselines or None


def headline_table(models: Models, spread: Spread, resamples: int | None = None,
                   report: tables.Table | None = None) -> Table:
    """The headline of each model (label -> its results, one a seed) side by side, a
    ``rich`` table, each value with its interval and the number of pairs or items it rests
    on (several seeds: their mean ± their standard deviation, from ``spread``, then the
    interval of the mean). The numbers are the model columns of ``report``, the report's
    headline table, else of ``synlm.tse.compare.comparison_table`` over ``resamples`` (None:
    ``synlm.tse.statistics.RESAMPLES``), which are the same; so is an in-vocabulary row only
    where it differs from its plain row, and so are the notes on conventions that differ
    between the models. A row's name is never cut: its column is as wide as the longest."""
    from rich.table import Table
    from rich.text import Text

    from synlm.tse.compare import comparison_table
    from synlm.tse.measures import named_columns
    from synlm.tse.statistics import RESAMPLES

    resamples = resamples or RESAMPLES
    numbers = report or comparison_table(models, resamples=resamples, comparisons=False)
    shown_columns = [numbers.columns.index(name) for name, _ in named_columns(models, None)]
    spreads = [spread([headline(r) for r in runs], digits=4) for runs in models.values()]
    mixed = [note for note in numbers.notes if note.startswith("Mixed")]
    table = Table(title="Targeted syntactic evaluation", title_justify="left",
                  caption=Text("\n".join([
                      f"[low, high]: the 95% item-bootstrap percentile interval ({resamples:,} "
                      "resamples), as the report's headline table", *mixed])),
                  caption_justify="left")
    table.add_column("benchmark/measure", no_wrap=True,
                     min_width=max((len(key) for key, _ in numbers.rows), default=0))
    for k in shown_columns:  # Text: a label is never read as markup
        table.add_column(Text(numbers.columns[k]), justify="right", overflow="fold")
    for key, cells in numbers.rows:
        shown = []
        for cell, seeds in zip([cells[k] for k in shown_columns], spreads):
            std = seeds.get(f"{key}_std")
            interval = (f" [{cell.low:.4f}, {cell.high:.4f}]"
                        if cell.low is not None and cell.high is not None else "")
            shown.append(Text("-" if cell.value is None else f"{cell.value:.4f}" + (
                f" ± {std:.4f}" if std is not None else "") + interval + f" (n={cell.n})"))
        table.add_row(Text(key), *shown)
    return table


def write_report(folder: Path, models: Models, baselines: Models | None = None,
                 units: Sequence[str] = GROUP_UNITS, resamples: int | None = None
                 ) -> tuple[dict[str, Any], tables.Table]:
    """The side-by-side tables (headline, and per unit for the ``units`` chosen: bootstrap
    intervals from ``resamples`` resamples (None: ``synlm.tse.statistics.RESAMPLES``),
    two-level over seeds, each model's untrained column, each model against the
    first with its paired test and Holm's adjustment; ``synlm.tse.tables.write_tables``),
    the plots (``FIGURES``: the accuracy of each SyntaxGym circuit, BLiMP phenomenon and
    ``--pairs`` phenomenon of the benchmarks every model has; SyntaxGym's region figure of
    each suite in ``regions/``), and the report: ``files``, what was written, and
    ``paired``, the headline table's comparisons (column -> measure -> the test: its p,
    ``p_bound``, which ``test`` gave it, Holm's p); and the headline table."""
    from synlm.tse import compare, plots, statistics, tables

    resamples = resamples or statistics.RESAMPLES
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    headline_cells = compare.comparison_table(models, baselines, resamples=resamples)
    written += tables.write_tables(headline_cells, folder / "headline")
    written += tables.write_tables(compare.comparison_table(
        models, baselines, level="unit", units=units, resamples=resamples), folder / "unit")
    for benchmark, kind, name in FIGURES:
        if all(benchmark in results for runs in models.values() for results in runs):
            written += plots.plot_units(models, benchmark, folder / name, kind=kind,
                                        baselines=baselines, resamples=resamples)
    written += plots.plot_regions(models, folder / "regions")  # SyntaxGym's, a suite each
    report: dict[str, Any] = {"files": [str(path) for path in written]}
    tested = [k for k, t in enumerate(tables.tested_columns(headline_cells)) if t]
    if tested:
        report["paired"] = {headline_cells.columns[k]: {
            label: {"difference": cells[k].value, "low": cells[k].low, "high": cells[k].high,
                    "p_value": cells[k].p, "p_bound": cells[k].p_bound, "test": cells[k].test,
                    "holm": cells[k].holm, "holm_bound": cells[k].holm_bound,
                    "items": cells[k].n, "resamples": headline_cells.resamples}
            for label, cells in headline_cells.rows if cells[k].p is not None}
            for k in tested}
    return report, headline_cells


def write_outputs(runs: list[Evaluated], summary: dict[str, Any], *, config: bool = False,
                  output: str | None = None, regions: str | None = None,
                  report: str | None = None, units: Sequence[str] | None = None,
                  resamples: int | None = None) -> tables.Table | None:
    """The files asked for, each written whole, with ``summary["provenance"]`` beside each
    (``synlm.tse.provenance``), and what was written added to ``summary``: every record to
    ``output`` (JSON lines), SyntaxGym's region surprisals to ``regions``, the ``report``
    folder (``write_report`` over ``units``, default ``GROUP_UNITS``); a config's untrained
    seeds (``config``) are written as models ``seed 0``, ``seed 1``, ... The report's
    headline table (None without ``report``)."""
    from synlm.tse import provenance

    scored = runs if not config else [
        Evaluated(f"seed {seed}", r, [], runs[0].vocab_size)
        for seed, r in enumerate(runs[0].untrained)]
    if output:
        summary["output"] = output
        summary["records"] = write_records(output, scored)
    if regions:
        from synlm.tse.surprisal_tables import region_table

        records = [{"model": run.name, **r} if len(scored) > 1 else r for run in scored
                   if "syntaxgym" in run.results for r in run.results["syntaxgym"].records
                   if "surprisals" in r]  # an item without a parse has none
        atomic_write_text(Path(regions), region_table(records))
        summary["regions"] = regions
    headline_cells = None
    if report:
        summary["report"], headline_cells = write_report(
            Path(report), *table_models(runs, config), units=units or GROUP_UNITS,
            resamples=resamples)
        summary["report"]["files"].append(str(provenance.write(
            Path(report) / provenance.REPORT_FILE, summary["provenance"])))
    for path in filter(None, (output, regions)):
        provenance.write_beside(path, summary["provenance"])
    return headline_cells


#: How ``--sentences`` lines become the words a model reads (``--tokenise``), the first the
#: default.
TOKENISATIONS = ("whitespace", "treebank")


def line_words(scorer: Any, line: str, tokenise: str = "whitespace") -> list[str]:
    """A ``--sentences`` line as the words ``scorer`` reads: ``whitespace``, its
    whitespace-separated tokens exactly as they are (pre-tokenised text, as rnng-pytorch's
    ``beam_search.py`` and lm-zoo read it; a word outside the vocabulary is its unknown
    token); ``treebank``, raw text read as a benchmark's sentences are (``Scorer.words``: a
    synlm model's NLTK Treebank tokens in its corpus's normalisation, a Hugging Face model's
    whitespace-separated words for its own tokenizer)."""
    if tokenise not in TOKENISATIONS:
        raise InputError(f"--tokenise {tokenise}: expected one of {', '.join(TOKENISATIONS)}")
    return line.split() if tokenise == "whitespace" else scorer.words(line)


def sentence_surprisals(scorer: Any, path: str, out: str,
                        tokenise: str = "whitespace") -> tuple[int, list[int]]:
    """lm-zoo's ``get-surprisals`` table of the sentences in ``path`` (one a line, read as
    ``tokenise`` says: ``line_words``), in bits, written to ``out`` (a sentence without a
    parse left out); how many sentences, and the line numbers of those without a parse."""
    from synlm.tse.surprisal_tables import token_table

    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--sentences: cannot read {path} ({err})") from None
    numbered = [(number, line_words(scorer, line, tokenise))
                for number, line in enumerate(lines, 1) if line]
    if not numbered:
        raise InputError(f"--sentences: {path} holds no sentence")
    if isinstance(scorer, SearchesTrees) and scorer.convention is not None:
        empty = next((number for number, words in numbered if not words), None)
        if empty is not None:
            raise InputError(f"--sentences: {path}:{empty}: no words (after the corpus's "
                             "normalisation); a transition LM generates at least one")
    scored = scorer.score([words for _, words in numbered])
    atomic_write_text(Path(out), token_table(scored))
    return len(numbered), [number for (number, _), s in zip(numbered, scored) if not s.parsed]
