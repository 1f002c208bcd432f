"""What ``synlm evaluate-syntax --report`` writes goes into a paper as it is: the LaTeX table
(a float with booktabs rules, its caption the notes, a label; a document beside it that
compiles, compiled here where a TeX engine is installed, its structure checked everywhere),
the caption and notes naming the models of mixed conventions and counting what was scored,
the figure of one's own ``--pairs``, and the progress lines naming each model."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_evaluate_syntax import unigram_model
from test_export_hf import save_checkpoint
from test_tse_compare import blimp_result, ml_record, syntaxgym_result

from conftest import run_cli
from synlm.loading import mean_and_std
from synlm.tse import compare, progress, reports, tables
from synlm.tse.benchmarks import BenchmarkResult
from synlm.tse.progress import model_shown
from synlm.tse.scores import ScoredSentence

#: A row name and a model label with each character LaTeX treats specially.
SUITE = "my_suite 100% & co #1"
LABEL = "LSTM_2 (50% data) & more"


def _with(results: dict[str, Any], **convention: Any) -> dict[str, Any]:
    """``results`` with every benchmark scored under ``convention``."""
    return {name: dataclasses.replace(result, convention=dict(convention))
            for name, result in results.items()}


def _results(blimp: str, suite: str) -> dict[str, Any]:
    return {"blimp": blimp_result({"wh_island": ("island_effects", blimp, "0" * len(blimp))}),
            "syntaxgym": syntaxgym_result({SUITE: (suite, "0" * len(suite))})}


#: The first model counts the end of the sentence, the second does not; the third is a
#: transition LM searched under the given-length convention, its end term 0.
WITH_EOS = _with(_results("1101101101", "11011011"), eos=True, reference=False,
                 text="synlm's: with the end-of-sentence term")
WITHOUT_EOS = _with(_results("1111101111", "11111011"), eos=False, reference=True,
                    text="the reference scorer's: no end-of-sentence term")
RNNG = _with(_results("1111111111", "11111111"), eos=True, reference=False,
             text="synlm's: with the end-of-sentence term",
             search_convention="renormalised_given_length",
             eos_term="0 by construction: --eos changes nothing")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[tables.Table, list[Path]]:
    """The per-suite table of three models of mixed conventions, written as a report's."""
    table = compare.comparison_table({LABEL: WITH_EOS, "gpt2": WITHOUT_EOS, "rnng": RNNG},
                                     level="unit", units=("paradigm", "suite"),
                                     resamples=200)
    return table, tables.write_tables(table, tmp_path_factory.mktemp("x") / "report" / "unit")


def _caption(tex: str) -> str:
    return re.search(r"^\\caption\[\{[^\n]*?\}\]\{(.*?)\}(?:\\label.*)?$", tex,
                     re.M).group(1)  # type: ignore[union-attr]


def _outside_cells(line: str) -> str:
    """A tabular row with its stacked cells (one-column tabulars) and wrapped labels
    (parboxes) replaced by ``CELL``."""
    line = re.sub(r"\\begin\{tabular\}\[[tb]\]\{@\{\}r@\{\}\}.*?\\end\{tabular\}", "CELL",
                  line)
    return re.sub(r"\\parbox\[t\]\{[\d.]+cm\}\{\\raggedright .*?\}(?= & )", "CELL", line)


def check_latex_structure(tex: str, columns: int) -> list[str]:
    """The rows of the outer tabular or longtable of ``tex`` (their first cells), after
    checking what a TeX engine would refuse or misprint: every environment closed in order,
    braces balanced, booktabs' rules in order (a longtable's header twice: its first page's
    and the others'), every row of ``columns`` cells, no unescaped ``_ & % # $`` in a cell
    and no ``%`` but at the ends of the lines that open and close a float's saved box (and
    the comment that heads the file)."""
    opened = []
    for kind, name in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            opened.append(name)
        else:
            assert opened.pop() == name
    assert not opened
    depth = 0
    for char in re.sub(r"\\[{}]", "", tex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    outer = re.search(r"\\begin\{(tabular|longtable)\}\{(lr+)\}\n", tex)
    assert outer is not None and len(outer.group(2)) == columns
    long = outer.group(1) == "longtable"
    rules = re.findall(r"\\(toprule|midrule|bottomrule)", tex)
    assert rules == ["toprule", "midrule"] * (2 if long else 1) + ["bottomrule"]
    lines = tex.splitlines()
    header = lines[lines.index(r"\toprule") + 1]
    first, last = ((lines.index(r"\endfoot"), lines.index(r"\end{longtable}")) if long else
                   (lines.index(r"\midrule"), lines.index(r"\bottomrule")))
    rows = [header, *lines[first + 1:last]]
    for row in rows:
        assert row.endswith(r" \\")
        plain = _outside_cells(row[:-3])
        assert len(re.findall(r"(?<!\\)&", plain)) == columns - 1, row
        assert not re.search(r"(?<!\\)[_%#$]", row), row
    for number, line in enumerate(lines):
        stripped = re.sub(r"\\%", "", line)
        if "%" in stripped:
            assert (number == 0 and line.startswith("% ")) or stripped in (r"\sbox0{%", "}%")
    return [_outside_cells(row).split(" & ")[0] for row in rows[1:]]


def test_the_latex_is_a_captioned_labelled_booktabs_float(written) -> None:
    """The ``.tex`` is a ``table`` float: its caption is the title and every note (what was
    scored, the conventions, the interval, the test, Holm's correction), escaped; its label
    is the report folder's and the table's names; each row name escaped in full."""
    table, paths = written
    tex = paths[2].read_text()
    assert tex.splitlines()[1:4] == [r"\begin{table}[htbp]", r"\centering", r"\small"]
    assert r"\label{tab:report-unit}" in tex
    names = check_latex_structure(tex, 1 + len(table.columns))
    assert names == [tables.latex_escape(name) for name, _ in table.rows]
    assert r"syntaxgym/no circuit/my\_suite 100\% \& co \#1/accuracy" in names
    caption = _caption(tex)
    assert caption == tables.latex_text(tables.caption_text(table))
    for words in ("Scored: BLiMP, 1 paradigm of 1 phenomenon (10 pairs); SyntaxGym, 1 suite "
                  "(8 items).", "95\\% percentile interval from 200 item-bootstrap resamples",
                  "the exact two-sided sign test", "Holm's step-down method over the"):
        assert words in caption
    assert "31" not in caption  # one suite was scored, never the paper's 31
    header = re.search(r"\\toprule\n(.*) \\\\\n", tex).group(1)  # type: ignore[union-attr]
    assert header.split(" & ")[1] == r"LSTM\_2 (50\% data) \& more"


def test_a_table_of_mixed_conventions_says_which_model_used_which(written) -> None:
    """Three models, one with ``<eos>``, one without, one a transition LM whose surprisal is
    renormalised given the length: the title flags both mixes, and the Markdown notes and
    the LaTeX caption name each model under its convention."""
    table, paths = written
    assert table.title.endswith("(mixed surprisal conventions; mixed end-of-sentence "
                                "conventions)")
    eos = (f"Mixed end-of-sentence conventions: BLiMP: {LABEL}, rnng with the end-of-sentence "
           f"term (<eos>); gpt2 without the end-of-sentence term; SyntaxGym: {LABEL}, rnng "
           "with the end-of-sentence term (<eos>); gpt2 without the end-of-sentence term.")
    surprisal = (f"Mixed surprisal conventions: {LABEL}, gpt2 score log p(x_i | x_<i); rnng "
                 "score log p(x_i | x_<i, n), renormalised over the legal actions given the "
                 "length, the end term 0 by construction.")
    markdown = paths[0].read_text()
    assert f"- {eos}\n" in markdown and f"- {surprisal}\n" in markdown
    assert markdown.splitlines()[0] == table.title
    caption = _caption(paths[2].read_text())
    assert tables.latex_text(eos) in caption and tables.latex_text(surprisal) in caption
    assert r"rnng with the end-of-sentence term (\textless{}eos\textgreater{})" in caption


def test_the_stderr_table_says_which_model_used_which() -> None:
    """Under the stderr table, beside what its intervals are, the note on mixed conventions
    (wrapped to the table's width)."""
    shown = io.StringIO()
    Console(file=shown, width=300).print(reports.headline_table(
        {LABEL: [WITH_EOS], "gpt2": [WITHOUT_EOS]}, mean_and_std, resamples=200))
    words = " ".join(shown.getvalue().split())
    assert "[low, high]: the 95% item-bootstrap percentile interval (200 resamples)" in words
    assert f"Mixed end-of-sentence conventions: BLiMP: {LABEL} with the end-of-sentence term " \
        "(<eos>); gpt2 without the end-of-sentence term;" in words


def test_the_stderr_table_is_the_model_columns_of_the_reports_headline_table() -> None:
    """Given the report's headline table (untrained and comparison columns beside the
    models'), the stderr table shows its model columns, which are what it computes alone."""
    models = {"a": [WITH_EOS], "b": [WITHOUT_EOS]}
    report = compare.comparison_table(models, {"a": [RNNG]}, resamples=200)
    assert report.columns == ["a", "a untrained", "b", "b - a"]

    def shown(**given: Any) -> str:
        out = io.StringIO()
        Console(file=out, width=300).print(reports.headline_table(models, mean_and_std, 200,
                                                                  **given))
        return out.getvalue()

    alone = shown()
    assert shown(report=report) == alone
    header = next(line for line in alone.splitlines() if "benchmark/measure" in line)
    assert [name.strip() for name in header.split("┃")[1:-1]] == ["benchmark/measure", "a",
                                                                  "b"]


def test_models_of_one_quantity_get_their_convention_and_no_flag() -> None:
    """Models scored alike: each benchmark's end-of-sentence text, no flag. A transition LM
    searched over every action beside a plain LM: the same quantity (its beam approximates
    log p(x_i | x_<i)), no flag; a masked LM's pseudo-log-likelihood beside them is flagged."""
    table = compare.comparison_table({"a": WITHOUT_EOS, "b": WITHOUT_EOS}, resamples=200)
    assert "mixed" not in table.title
    assert not any(note.startswith("Mixed") for note in table.notes)
    assert "End of sentence: BLiMP: the reference scorer's: no end-of-sentence term; " \
        "SyntaxGym: the reference scorer's: no end-of-sentence term." in table.notes
    searched = _with(WITHOUT_EOS, eos=False, search_convention="all_actions")
    assert "mixed" not in compare.comparison_table({"a": WITHOUT_EOS, "plm": searched},
                                                   resamples=200).title
    masked = _with(WITHOUT_EOS, eos=False, pll="original", pll_text="pseudo-log-likelihood, "
                   "each token masked alone")
    table = compare.comparison_table({"a": WITHOUT_EOS, "plm": searched, "bert": masked},
                                     resamples=200)
    assert table.title.endswith("(mixed surprisal conventions)")
    assert "Mixed surprisal conventions: a, plm score log p(x_i | x_<i); bert score a " \
        "pseudo-log-likelihood, each token masked alone." in table.notes


def test_the_scored_note_counts_each_benchmark_and_each_column_where_they_differ() -> None:
    """Marvin & Linzen's Table 1 rows and sections; columns scored on different items (a
    --subset, say) each get their own count."""
    ml = BenchmarkResult("marvin_linzen", {}, [
        ml_record("simple_agrmt", True), ml_record("sent_comp", False),
        ml_record("simple_reflexives", True)], {"marvin_linzen/agreement/accuracy": 0.5})
    fewer = {"blimp": blimp_result({"wh_island": ("island_effects", "110", "000")})}
    table = compare.comparison_table({"a": {**WITH_EOS, "marvin_linzen": ml}, "b": fewer},
                                     comparisons=False, resamples=200)
    assert table.notes[0] == (
        "Scored: a: BLiMP, 1 paradigm of 1 phenomenon (10 pairs); SyntaxGym, 1 suite (8 "
        "items); Marvin & Linzen, 3 Table 1 rows of 2 sections (3 items); b: BLiMP, 1 paradigm "
        "of 1 phenomenon (3 pairs).")


def compiled_cleanly(document: Path, folder: Path) -> bool:
    """Whether ``document`` compiles to a PDF without an overfull line or a float too large
    for its page, with the first TeX engine on PATH (pdflatex, lualatex, tectonic); False
    where there is none."""
    engine = next((e for e in ("pdflatex", "lualatex", "tectonic") if shutil.which(e)), None)
    if engine is None:
        return False
    source = folder / document.name
    shutil.copy(document, source)
    args = [engine, source.name] if engine == "tectonic" else [
        engine, "-interaction=nonstopmode", "-halt-on-error", source.name]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert source.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
    log = source.with_suffix(".log")
    text = log.read_text(errors="replace") if log.exists() else done.stdout + done.stderr
    assert "Overfull" not in text and "Float too large" not in text
    return True


def test_the_standalone_document_compiles(written, tmp_path: Path) -> None:
    """``_standalone.tex`` is an article holding the float, with the packages it needs; a TeX
    engine on PATH (pdflatex, lualatex or tectonic) compiles it to a PDF without an
    overfull line (a wide table is scaled to the line); the structure is checked either
    way."""
    table, paths = written
    document = paths[3].read_text()
    assert paths[3].name == "unit_standalone.tex"
    assert document.startswith("\\documentclass{article}\n")
    for package in ("booktabs", "graphicx", "longtable"):
        assert rf"\usepackage{{{package}}}" in document
    body = document.split("\\begin{document}\n", 1)[1].removesuffix("\\end{document}\n")
    assert body == paths[2].read_text()
    check_latex_structure(body, 1 + len(table.columns))
    compiled_cleanly(paths[3], tmp_path)


def test_a_table_longer_than_a_page_is_a_longtable(tmp_path: Path) -> None:
    """45 paradigms, each model against the first: 90 lines, more than a float's 40, so a
    longtable breaking across pages, its header on each, the same caption and label; its
    long labels wrap, and the standalone document compiles without an overfull line."""
    paradigms = {f"{SUITE} {k}": ("island_effects", "1101101101", "0" * 10) for k in range(45)}
    other = {f"{SUITE} {k}": ("island_effects", "1111101111", "0" * 10) for k in range(45)}
    table = compare.comparison_table(
        {LABEL: {"blimp": blimp_result(paradigms)}, "gpt2": {"blimp": blimp_result(other)}},
        level="unit", units=("paradigm",), resamples=200)
    assert tables.latex_lines(table) == 2 * len(table.rows) > tables.FLOAT_LINES
    paths = tables.write_tables(table, tmp_path / "report" / "unit")
    tex = paths[2].read_text()
    assert tex.splitlines()[0] == r"% synlm evaluate-syntax: \usepackage{booktabs}, " \
        r"\usepackage{longtable}"
    assert r"\begin{longtable}{lrrr}" in tex and r"\begin{table}" not in tex
    assert f"{_caption(tex)}}}\\label{{tab:report-unit}} \\\\" in tex
    assert _caption(tex) == tables.latex_text(tables.caption_text(table))
    names = check_latex_structure(tex, 4)
    assert len(names) == 45 and set(names) == {"CELL"}  # each label wrapped
    assert r"{\raggedright blimp/\allowbreak{}island\_\allowbreak{}effects/" in tex
    compiled_cleanly(paths[3], tmp_path)


# --------------------------------------------------------- the command: --pairs, progress


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_pairs_of_ones_own_get_a_figure_and_counted_notes(capsys, tmp_path: Path) -> None:
    """``--pairs`` alone with ``--report``: the figure of its phenomena beside the tables
    (PNG and SVG, listed in the report's files), drawn with the model's label and each
    phenomenon; the notes count the pairs scored and say nothing of the papers' sets."""
    pairs = tmp_path / "mine.jsonl"
    pairs.write_text("".join(json.dumps(line) + "\n" for line in [
        {"sentence_good": "The cats sleep.", "sentence_bad": "The cats sleeps.",
         "UID": "agree", "linguistics_term": "agreement"},
        {"sentence_good": "The cat sleeps.", "sentence_bad": "The cat sleep.",
         "UID": "agree", "linguistics_term": "agreement"},
        {"sentence_good": "The cat sleep.", "sentence_bad": "The cat cat sleep.",
         "UID": "length", "linguistics_term": "length"}]))
    ckpt = save_checkpoint(unigram_model(), tmp_path / "unigram.ckpt")
    report = tmp_path / "report"
    assert run_cli(["evaluate-syntax", "--ckpt_path", str(ckpt), "--label", "my LSTM",
                    "--pairs", str(pairs), "--report", str(report), "--resamples", "200"]) == 0
    captured = capsys.readouterr()
    files = json.loads(captured.out.strip().splitlines()[-1])["report"]["files"]
    png, svg = report / "pairs_phenomena.png", report / "pairs_phenomena.svg"
    assert {str(png), str(svg)} <= set(files)
    width, height = _png_size(png)
    assert width > 500 and height > 200 and png.stat().st_size > 10_000
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    drawn = re.findall(r"<!-- (.*?) -->", svg.read_text())  # each text matplotlib drew
    assert {"pairs phenomena", "my LSTM", "agreement", "length", "50%"} <= set(drawn)
    notes = (report / "headline.md").read_text()
    assert "- Scored: pairs (--pairs), 2 paradigms of 2 phenomena (3 pairs).\n" in notes
    assert "- Aggregates as each paper's: pairs (--pairs), the unweighted mean over " \
        "paradigms, as BLiMP's.\n" in notes
    assert "SyntaxGym" not in notes and "31" not in notes
    # five sentences: "The cat sleep." is scored once for its two pairs
    assert "synlm evaluate-syntax: my LSTM: pairs: 5/5 sentences" in captured.err


class Counting:
    """A scorer that reports its progress a sentence at a time, as ModelScorer does."""

    progress = None

    def score(self, sentences: list[list[str]]) -> list[ScoredSentence]:
        for _ in sentences:
            self.progress(1)  # type: ignore[misc]
        return [ScoredSentence(tuple(s), (0.0,) * len(s), (False,) * len(s), None, tuple(s),
                               (0.0,) * len(s)) for s in sentences]


def test_each_progress_line_names_its_model(capsys) -> None:
    """In a log file each line names the model by its label, and an untrained copy by the
    label, its number and how many there are."""
    trained, untrained = Counting(), [Counting(), Counting()]
    show = model_shown("AWD-LSTM", untrained, "synlm evaluate-syntax")
    show(trained, "blimp").score([["a"]] * 20)
    show(untrained[1], "syntaxgym").score([["a"]] * 2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "synlm evaluate-syntax: AWD-LSTM: blimp: 2/20 sentences, 0 s, " \
        "about 0 s left"
    assert len(lines) == 12  # a line a tenth of the 20, then both of the 2
    assert all(line.startswith("synlm evaluate-syntax: AWD-LSTM: blimp: ") for line in lines[:10])
    assert lines[-1] == "synlm evaluate-syntax: AWD-LSTM untrained 2 of 2: syntaxgym: " \
        "2/2 sentences, 0 s"


def test_a_progress_line_says_how_long_is_left_at_the_rate_so_far(capsys, monkeypatch) -> None:
    """A clock 5 s on at each reading: the first line, after 2 of 20 sentences in 5 s, says
    45 s are left; the last says none; a run of hours reads in hours and minutes."""
    clock = iter(range(0, 10**6, 5))
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    model_shown("RNNG", [], "synlm evaluate-syntax")(Counting(), "blimp").score([["a"]] * 20)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "synlm evaluate-syntax: RNNG: blimp: 2/20 sentences, 5 s, about 45 s left"
    assert lines[1] == "synlm evaluate-syntax: RNNG: blimp: 4/20 sentences, 10 s, about 40 s left"
    assert lines[-1] == "synlm evaluate-syntax: RNNG: blimp: 20/20 sentences, 50 s"
    assert progress.time_left(3_600.0, 6_700, 67_000) == 32_400.0
    assert [progress.duration(s) for s in (42.4, 185, 7_620, 32_400)] == \
        ["42 s", "3 min 05 s", "2 h 07 min", "9 h 00 min"]


def test_no_progress_shows_none(capsys, tmp_path: Path) -> None:
    """``--no-progress``: no progress line on stderr, the same JSON on stdout."""
    ckpt = save_checkpoint(unigram_model(), tmp_path / "unigram.ckpt")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "The cats sleep.",
                                 "sentence_bad": "The cats sleeps."}) + "\n")
    outs = []
    for flags in ([], ["--no-progress"]):
        assert run_cli(["evaluate-syntax", "--ckpt_path", str(ckpt), "--pairs", str(pairs),
                        *flags]) == 0
        captured = capsys.readouterr()
        outs.append(json.loads(captured.out.strip().splitlines()[-1]))
        assert ("sentences, " in captured.err) == (not flags)
    assert outs[0]["headline"] == outs[1]["headline"]
