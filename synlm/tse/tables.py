"""Side-by-side tables: a ``Table`` of ``Cell``s (a value, its interval and the number of
pairs or items it rests on; a comparison's cell adds its p-value and the Holm-adjusted one),
written as Markdown (``to_markdown``), CSV (``to_csv``) and a booktabs LaTeX ``tabular``
(``to_latex``), or all three at once (``write_tables``).
``synlm.tse.compare.comparison_table`` fills one from evaluated models."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synlm.data.vocab import atomic_write_text


@dataclass(frozen=True)
class Cell:
    """One figure of a table: the ``value`` (None where there is nothing to measure: no such
    benchmark, or no pair or item left), its interval (``low``, ``high``; None without one)
    and ``n``, the number of pairs or items it rests on (in vocabulary: those without an
    unknown word where it matters). A comparison's cell (a difference) also has its two-sided
    ``p`` (``p_bound``: only an upper bound, a bootstrap p of 0, which says p < 2 / R), the
    ``test`` that gave it (``synlm.tse.statistics.TESTS``), and ``holm``, p adjusted over the
    table's comparisons (``holm_bound``: an upper bound, set by a bound p; NaN: the p was NaN,
    left out of the adjustment)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    p: float | None = None
    holm: float | None = None
    holm_bound: bool = False
    p_bound: bool = False
    test: str | None = None


@dataclass(frozen=True)
class Table:
    """Side-by-side numbers: ``columns`` names the value columns (the row labels come
    first, under ``measure``); each row is a label and a ``Cell`` a column. ``resamples``:
    those behind the comparisons' bootstraps (0: no comparison)."""

    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    title: str = ""
    notes: list[str] = field(default_factory=list)
    resamples: int = 0


def p_digits(p: float) -> str:
    """A p to three significant digits, never in exponent form, so that it reads against
    its bound and the 0.05 it is held to (0.0002 is ``0.0002``, not ``0.000``; 0.0495 is
    ``0.0495``, not ``0.050``; 1 is ``1``)."""
    return np.format_float_positional(p, precision=3, unique=False, fractional=False,
                                      trim="-")


def p_text(p: float, bound: bool = False) -> str:
    """A p (or Holm p) as the Markdown and LaTeX write it after ``p``: ``=0.0123``, an upper
    bound ``<0.0002``, a NaN (no test) `` n/a``."""
    if math.isnan(p):
        return " n/a"
    return ("<" if bound else "=") + p_digits(p)


def _fixed(value: float, digits: int, sign: str = "") -> str:
    """``value`` to ``digits`` places (``sign`` ``+``: signed); one that rounds to zero is
    written as zero, never ``-0.000`` (a difference of -1e-17 is no negative difference)."""
    return f"{value if round(value, digits) else 0.0:{sign}.{digits}f}"


def _cell_text(cell: Cell, digits: int, missing: str) -> str:
    if cell.value is None:
        return missing
    sign = "+" if cell.p is not None else ""  # a difference: signed
    text = _fixed(cell.value, digits, sign)
    if cell.low is not None and cell.high is not None:
        text += f" [{_fixed(cell.low, digits, sign)}, {_fixed(cell.high, digits, sign)}]"
    text += f" (n={cell.n})"
    if cell.p is not None:
        text += f" p{p_text(cell.p, cell.p_bound)}" + (" (sign test)" if cell.test == "sign"
                                                       else "")
    if cell.holm is not None:
        text += f", Holm p{p_text(cell.holm, cell.holm_bound)}"
    return text


def tested_columns(table: Table) -> list[bool]:
    """Whether each column holds comparisons (a cell with a p-value)."""
    return [any(cells[k].p is not None for _, cells in table.rows)
            for k in range(len(table.columns))]


def to_markdown(table: Table, digits: int = 3) -> str:
    """The table in Markdown: the title, the table (``value [low, high] (n=...)``, ``—``
    where there is nothing to measure), the notes as a list."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", r"\|") for c in cells) + " |"

    lines = [table.title, ""] if table.title else []
    lines += [line(["measure", *table.columns]),
              "|" + "|".join(["---", *["---:"] * len(table.columns)]) + "|"]
    lines += [line([label, *(_cell_text(c, digits, "—") for c in cells)])
              for label, cells in table.rows]
    if table.notes:
        lines += ["", *(f"- {note}" for note in table.notes)]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """The table's numbers as CSV (``csv`` module): ``measure``, then for each column its
    value and ``<column> low``, ``<column> high``, ``<column> n``; a comparison's column adds
    ``<column> p``, ``<column> p bound`` (1: the p is only an upper bound, p < it),
    ``<column> sign test`` (1: the exact sign test gave the p, 0: the bootstrap),
    ``<column> holm`` and ``<column> holm bound``. Every column but ``measure`` is a number
    or empty: fractions to 6 places, p-values to 6 significant digits (a p of 0.0002 is not
    0.000200's rounding of another), flags 0 or 1, empty where there is none (a NaN p: no
    test). The title and notes are the Markdown and LaTeX files'."""
    tested = tested_columns(table)
    parts = [("", " low", " high", " n",
              *((" p", " p bound", " sign test", " holm", " holm bound") if t else ()))
             for t in tested]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["measure", *(f"{c}{part}" for c, names in zip(table.columns, parts)
                                  for part in names)])

    def text(value: float | None) -> str:
        return "" if value is None else _fixed(value, 6)

    def p_number(p: float | None) -> str:
        return "" if p is None or math.isnan(p) else f"{p:.6g}"

    def flag(p: float | None, on: bool) -> str:
        return "" if p is None or math.isnan(p) else str(int(on))

    for label, cells in table.rows:
        writer.writerow([label, *(part for cell, t in zip(cells, tested) for part in (
            *map(text, (cell.value, cell.low, cell.high)), cell.n,
            *((p_number(cell.p), flag(cell.p, cell.p_bound), flag(cell.p, cell.test == "sign"),
               p_number(cell.holm), flag(cell.holm, cell.holm_bound)) if t else ())))])
    return out.getvalue()


_LATEX_SPECIAL = re.compile(r"[\\&%$#_{}~^]")
_LATEX = {"\\": r"\textbackslash{}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``_`` as ``\\_``, ...)."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX.get(m.group(), "\\" + m.group()), text)


def to_latex(table: Table, digits: int = 3) -> str:
    """The table as a booktabs ``tabular`` (``\\usepackage{booktabs}``), labels and headers
    escaped, ``--`` where there is nothing to measure; the title and notes as ``%`` comments
    (the caption is the paper's to write)."""
    lines = [f"% {table.title}"] if table.title else []
    lines += [r"\begin{tabular}{l" + "r" * len(table.columns) + "}", r"\toprule",
              " & ".join(latex_escape(c) for c in ["measure", *table.columns]) + r" \\",
              r"\midrule"]
    lines += [" & ".join([latex_escape(label),
                          *(latex_escape(_cell_text(c, digits, "--"))
                            .replace("<", "$<$") for c in cells)]) + r" \\"
              for label, cells in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}", *(f"% {note}" for note in table.notes)]
    return "\n".join(lines) + "\n"


def write_tables(table: Table, out_stem: Path) -> list[Path]:
    """``<out_stem>.md``, ``.csv`` and ``.tex`` side by side, each written whole or not at
    all (a temporary file, then a rename); their paths."""
    out_stem = Path(out_stem)
    paths = []
    for suffix, text in ((".md", to_markdown(table)), (".csv", to_csv(table)),
                         (".tex", to_latex(table))):
        path = out_stem.with_name(out_stem.name + suffix)
        atomic_write_text(path, text)
        paths.append(path)
    return paths
