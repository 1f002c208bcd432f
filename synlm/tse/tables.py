"""Side-by-side tables: a ``Table`` of ``Cell``s (a value, its interval and the number of
pairs or items it rests on; a comparison's cell adds its p-value and the Holm-adjusted one),
written as Markdown (``to_markdown``), CSV (``to_csv``), LaTeX for a paper (``to_latex``: a
``table`` float, or a ``longtable`` for a long one; booktabs rules, the notes as its caption,
a ``\\label``) and a document that compiles alone (``to_latex_document``), or all four at
once (``write_tables``).
``synlm.tse.compare.comparison_table`` fills one from evaluated models."""

from __future__ import annotations

import csv
import io
import math
import re
import textwrap
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


def _cell_parts(value: float, cell: Cell, digits: int) -> list[str]:
    """The parts of a cell of ``value``: the value with its interval, its count, and a
    comparison's p (with ``(sign test)`` where that test gave it) and Holm p, where there
    are."""
    sign = "+" if cell.p is not None else ""  # a difference: signed
    head = _fixed(value, digits, sign)
    if cell.low is not None and cell.high is not None:
        head += f" [{_fixed(cell.low, digits, sign)}, {_fixed(cell.high, digits, sign)}]"
    parts = [head, f"(n={cell.n})"]
    if cell.p is not None:
        parts.append(f"p{p_text(cell.p, cell.p_bound)}"
                     + (" (sign test)" if cell.test == "sign" else ""))
    if cell.holm is not None:
        parts.append(f"Holm p{p_text(cell.holm, cell.holm_bound)}")
    return parts


def _cell_text(cell: Cell, digits: int, missing: str) -> str:
    """A cell on one line: ``value [low, high] (n=...) p=..., Holm p=...``."""
    if cell.value is None:
        return missing
    head, count, *tests = _cell_parts(cell.value, cell, digits)
    return " ".join([head, count, ", ".join(tests)]).rstrip()


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


#: What ``to_latex``'s tables need in a document's preamble, any of them.
LATEX_PACKAGES = ("booktabs", "graphicx", "longtable")
#: The most lines a table may take as a float; a longer one is a ``longtable``.
FLOAT_LINES = 40


def latex_text(text: str) -> str:
    """``text`` for LaTeX's text mode: ``latex_escape``, and ``<``, ``>`` and ``|`` as the
    characters they are (an OT1 font would print other glyphs for them)."""
    return latex_escape(text).replace("<", r"\textless{}").replace(
        ">", r"\textgreater{}").replace("|", r"\textbar{}")


def _stacked(lines: Sequence[str], align: str = "t") -> str:
    """Lines of LaTeX text stacked right-aligned in a one-column ``tabular`` whose first
    (``align`` ``t``) or last (``b``) line sits on the row's baseline; one line as it is."""
    return lines[0] if len(lines) == 1 else (
        rf"\begin{{tabular}}[{align}]{{@{{}}r@{{}}}}" + r"\\".join(lines) + r"\end{tabular}")


def _latex_cell(cell: Cell, digits: int, narrow: bool = False) -> str:
    """A cell as LaTeX (``_cell_parts``), ``--`` where there is nothing to measure: its
    value, interval and count on a line, a comparison's p and Holm p under them;
    ``narrow``, the value and interval, then the count and p, then the Holm p."""
    if cell.value is None:
        return "--"
    head, count, *tests = (latex_text(part) for part in _cell_parts(cell.value, cell, digits))
    if narrow:
        lines = [head, " ".join([count, *tests[:1]]), *tests[1:]]
    else:
        lines = [f"{head} {count}", *([", ".join(tests)] if tests else [])]
    return _stacked(lines)


#: A longtable's label column and the most its value columns take, in cm: the width of
#: ``to_latex_document``'s page.
LABEL_CM, COLUMN_CM = 5.5, 3.6


def _wrapped_label(name: str) -> str:
    """A row label in a column ``LABEL_CM`` wide, broken after a ``/`` or ``_`` where it
    must (a unit's long path)."""
    text = latex_text(name).replace("/", r"/\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")
    return rf"\parbox[t]{{{LABEL_CM}cm}}{{\raggedright {text}}}"


def _wrapped_header(name: str) -> str:
    """A column's name on lines of at most 16 characters where it can be broken at its
    spaces, stacked to the column's foot."""
    return _stacked([latex_text(line) for line in textwrap.wrap(name, 16)] or [""], "b")


def caption_text(table: Table) -> str:
    """The caption of the table: its title, then its notes, as one paragraph."""
    parts = [table.title] if table.title else []
    return " ".join(part if part.endswith(".") else part + "." for part in
                    [*parts, *table.notes])


def latex_lines(table: Table) -> int:
    """How many lines the table's rows take: a line a row, two where it has a comparison."""
    return sum(2 if any(c.p is not None for c in cells) else 1 for _, cells in table.rows)


def to_latex(table: Table, digits: int = 3, label: str = "tab:synlm") -> str:
    """The table in LaTeX for a paper (``\\usepackage`` booktabs, and graphicx or
    longtable, as its first line says): a ``table`` float, or, where its rows take more than
    ``FLOAT_LINES`` lines (``latex_lines``: a per-unit table of every paradigm), a
    ``longtable`` that breaks across pages, its header repeated on each. Either has the
    caption (``caption_text``: the title, then the notes that say what was scored, the
    conventions, the interval, test and correction; the title alone in a list of tables),
    the ``label``, and booktabs rules (``\\toprule``, ``\\midrule``, ``\\bottomrule``)
    around a left column of row labels and a right-aligned column each: a cell's value,
    interval and count, a comparison's p and Holm p under them (``--``: nothing to
    measure), every text escaped. A float's tabular wider than the line is scaled down to
    it, never beyond; a longtable, which cannot be scaled, is set smaller, its counts under
    its values, its Holm p under its p, its column names on lines of 16 characters and its
    labels broken after a ``/`` or ``_`` in a column ``LABEL_CM`` wide."""
    long = latex_lines(table) > FLOAT_LINES
    header = " & ".join(["measure", *(_wrapped_header(c) if long else latex_text(c)
                                      for c in table.columns)]) + r" \\"
    rows = [" & ".join([_wrapped_label(name) if long else latex_text(name),
                        *(_latex_cell(c, digits, narrow=long) for c in cells)]) + r" \\"
            for name, cells in table.rows]
    spec = "{l" + "r" * len(table.columns) + "}"
    short = f"[{{{latex_text(table.title)}}}]" if table.title else ""
    caption = rf"\caption{short}{{{latex_text(caption_text(table))}}}"
    needs = "% synlm evaluate-syntax: " + ", ".join(
        rf"\usepackage{{{p}}}" for p in ("booktabs", "longtable" if long else "graphicx"))
    if long:
        head = [r"\toprule", header, r"\midrule"]
        return "\n".join([
            needs, r"\begingroup", r"\footnotesize", r"\setlength{\tabcolsep}{4pt}",
            r"\setlength{\LTcapwidth}{\linewidth}",
            r"\begin{longtable}" + spec, caption + rf"\label{{{label}}} \\",
            *head, r"\endfirsthead", *head, r"\endhead", r"\bottomrule", r"\endfoot",
            *rows, r"\end{longtable}", r"\endgroup"]) + "\n"
    return "\n".join([
        needs, r"\begin{table}[htbp]", r"\centering", r"\small", caption,
        rf"\label{{{label}}}", r"\sbox0{%", r"\begin{tabular}" + spec, r"\toprule", header,
        r"\midrule", *rows, r"\bottomrule", r"\end{tabular}", "}%",
        r"\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi",
        r"\end{table}"]) + "\n"


def to_latex_document(table: Table, digits: int = 3, label: str = "tab:synlm") -> str:
    """``to_latex``'s table in a document that compiles alone (``pdflatex``): an
    ``article`` with the packages it needs and no page number, on A4 landscape pages, made
    wider for a longtable of more columns than fit (``LABEL_CM``, ``COLUMN_CM``)."""
    width = 29.7
    if latex_lines(table) > FLOAT_LINES:
        width = max(width, 3 + LABEL_CM + COLUMN_CM * len(table.columns))
    return "\n".join([
        r"\documentclass{article}",
        rf"\usepackage[paperwidth={width:g}cm,paperheight=21cm,margin=1.5cm]{{geometry}}",
        *(rf"\usepackage{{{p}}}" for p in LATEX_PACKAGES), r"\pagestyle{empty}",
        r"\begin{document}", to_latex(table, digits, label).rstrip("\n"),
        r"\end{document}"]) + "\n"


def latex_label(out_stem: Path) -> str:
    """The ``\\label`` of the table written as ``out_stem``: ``tab:<folder>-<name>``, its
    folder's name and its own, lower case, every character but a letter, digit or ``-`` a
    ``-`` (``report/headline``: ``tab:report-headline``)."""
    name = f"{out_stem.parent.name}-{out_stem.name}".strip("-").lower()
    return "tab:" + re.sub(r"[^a-z0-9-]+", "-", name)


def write_tables(table: Table, out_stem: Path) -> list[Path]:
    """``<out_stem>.md``, ``.csv``, ``.tex`` (``to_latex``, labelled
    ``latex_label(out_stem)``) and ``_standalone.tex`` (``to_latex_document``) side by side,
    each written whole or not at all (a temporary file, then a rename); their paths."""
    out_stem = Path(out_stem)
    label = latex_label(out_stem)
    paths = []
    for suffix, text in ((".md", to_markdown(table)), (".csv", to_csv(table)),
                         (".tex", to_latex(table, label=label)),
                         ("_standalone.tex", to_latex_document(table, label=label))):
        path = out_stem.with_name(out_stem.name + suffix)
        atomic_write_text(path, text)
        paths.append(path)
    return paths
