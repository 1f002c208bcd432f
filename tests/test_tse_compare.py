"""Comparing evaluated models (synlm.tse.compare, .measures, .statistics, .tables, .plots):
per-unit outcomes, the item bootstrap, the paired randomisation test, the side-by-side
tables in Markdown, CSV and LaTeX, and the plots.
Every result is built by hand from a few records: no model, no benchmark data."""

from __future__ import annotations

import functools
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from synlm.errors import InputError
from synlm.tse import compare, measures, plots, statistics, tables
from synlm.tse.benchmarks import BenchmarkResult, score_benchmarks
from synlm.tse.blimp import summarize_blimp
from synlm.tse.minimal_pairs import MinimalPair
from synlm.tse.scores import ScoredSentence
from synlm.tse.syntaxgym import is_excluded, parse_suite, sg_score


def blimp_result(paradigms: dict[str, tuple[str, str, str]]) -> BenchmarkResult:
    """BLiMP records from {UID: (phenomenon, outcomes, unknowns)}, outcomes and unknowns as
    strings of 1 and 0; the summary and headline as ``synlm.tse.benchmarks`` makes them."""
    records = [{"benchmark": "blimp", "UID": uid, "phenomenon": phenomenon, "pairID": str(i),
                "correct": c == "1", "unknown": u == "1"}
               for uid, (phenomenon, outcomes, unknowns) in paradigms.items()
               for i, (c, u) in enumerate(zip(outcomes, unknowns))]
    overall = summarize_blimp(records)["overall"]
    return BenchmarkResult("blimp", {}, records, {
        f"blimp/{m}": overall[m] for m in ("accuracy", "in_vocabulary_accuracy",
                                           "unknown_share")})


def syntaxgym_result(suites: dict[str, tuple[str, str]]) -> BenchmarkResult:
    """SyntaxGym item records from {suite: (outcomes, unknowns)}; the headline is the SG
    score over the suites the paper scores."""
    records = [{"benchmark": "syntaxgym", "suite": suite, "item": i + 1, "correct": c == "1",
                "unknown": u == "1", "surprisals": {}}
               for suite, (outcomes, unknowns) in suites.items()
               for i, (c, u) in enumerate(zip(outcomes, unknowns))]

    def accuracy(outcomes: str) -> float:
        return outcomes.count("1") / len(outcomes)

    known = {s: accuracy("".join(c for c, u in zip(o, k) if u == "0"))
             for s, (o, k) in suites.items() if "0" in k}
    included = [k for s, (_, k) in suites.items() if not is_excluded(s)]
    return BenchmarkResult("syntaxgym", {}, records, {
        "syntaxgym/sg_score": sg_score({s: accuracy(o) for s, (o, _) in suites.items()}).score,
        "syntaxgym/in_vocabulary_sg_score": sg_score(known).score,
        "syntaxgym/unknown_share": sum(accuracy(k) for k in included) / len(included)})


AWD = {"blimp": blimp_result({"anaphor_gender_agreement": ("anaphor_agreement", "1101", "0010"),
                              "wh_island": ("island_effects", "110", "000")}),
       "syntaxgym": syntaxgym_result({"number_src": ("1101", "0000"),
                                      "npi_orc_any": ("011", "100"),
                                      "nn-nv-rpl": ("10", "00")})}
ONLSTM = {"blimp": blimp_result({"anaphor_gender_agreement": ("anaphor_agreement", "1111",
                                                              "0010"),
                                 "wh_island": ("island_effects", "010", "000")}),
          "syntaxgym": syntaxgym_result({"number_src": ("1111", "0000"),
                                         "npi_orc_any": ("111", "100"),
                                         "nn-nv-rpl": ("00", "00")})}
UNTRAINED = [{"blimp": blimp_result({"anaphor_gender_agreement": ("anaphor_agreement", "0101",
                                                                  "0010"),
                                     "wh_island": ("island_effects", "100", "000")}),
              "syntaxgym": syntaxgym_result({"number_src": ("0000", "0000"),
                                             "npi_orc_any": ("001", "100"),
                                             "nn-nv-rpl": ("11", "00")})},
             {"blimp": blimp_result({"anaphor_gender_agreement": ("anaphor_agreement", "1001",
                                                                  "0010"),
                                     "wh_island": ("island_effects", "000", "000")}),
              "syntaxgym": syntaxgym_result({"number_src": ("0100", "0000"),
                                             "npi_orc_any": ("000", "100"),
                                             "nn-nv-rpl": ("01", "00")})}]


def ml_record(template: str, correct: bool, unknown: bool = False,
              **comparisons: bool) -> dict[str, Any]:
    return {"benchmark": "marvin_linzen", "template": template, "case": "c", "index": 0,
            "correct": correct, "unknown": unknown, **comparisons}


# ---------------------------------------------------------------------------- outcomes


def test_item_outcomes_are_each_units_items_in_record_order() -> None:
    """A BLiMP paradigm, a SyntaxGym suite, a Marvin & Linzen Table 1 row (its _anim and
    _inanim templates pooled, rows in Table 1's order); a record field chosen by name, records
    without it left out; in vocabulary, the unknown ones out and a unit left empty gone."""
    assert measures.item_outcomes(AWD["blimp"]) == {
        "anaphor_gender_agreement": [True, True, False, True], "wh_island": [True, True, False]}
    assert measures.item_outcomes(AWD["blimp"], in_vocabulary=True) == {
        "anaphor_gender_agreement": [True, True, True], "wh_island": [True, True, False]}
    assert measures.item_outcomes(AWD["syntaxgym"], "unknown")["npi_orc_any"] == [True, False,
                                                                                  False]
    npi = {"grammatical_gt_intrusive": True}
    ml = BenchmarkResult("marvin_linzen", {}, [
        ml_record("prep_inanim", True), ml_record("simple_npi_anim", False, **npi),
        ml_record("simple_agrmt", False, unknown=True), ml_record("prep_anim", False)], {})
    assert measures.item_outcomes(ml) == {
        "Subject-verb agreement/Simple": [False],
        "Subject-verb agreement/Across a prepositional phrase": [True, False],
        "Negative polarity items/Simple": [False]}
    assert measures.item_outcomes(ml, in_vocabulary=True) == {
        "Subject-verb agreement/Across a prepositional phrase": [True, False],
        "Negative polarity items/Simple": [False]}
    assert measures.item_outcomes(ml, "grammatical_gt_intrusive") == {
        "Negative polarity items/Simple": [True]}
    with pytest.raises(InputError, match="no record has the field 'typo'"):
        measures.item_outcomes(ml, "typo")


# --------------------------------------------------------------------------- bootstrap


def test_the_bootstrap_interval_holds_the_estimate_and_narrows_with_more_items() -> None:
    few = [True] * 7 + [False] * 3
    low, high = statistics.bootstrap_interval(few)
    assert low < 0.7 < high
    many_low, many_high = statistics.bootstrap_interval(few * 100)
    assert many_low < 0.7 < many_high
    assert many_high - many_low < (high - low) / 5  # about 1/sqrt(100) as wide
    assert statistics.bootstrap_interval({"x": few}) == (low, high)  # one unit, as a mapping


def test_the_bootstrap_interval_of_a_fixed_seed() -> None:
    """Two units (24 of 37 right, 9 of 23) resampled within themselves, 1,000 times from
    default_rng(0): the percentile intervals (the 25th smallest and largest of the 1,000) of
    the mean of the unit accuracies (0.5200) and of the pooled accuracy (33/60 = 0.55),
    golden values; another seed, another interval."""
    units = {"a": [i % 3 != 0 for i in range(37)], "b": [i % 5 in (1, 3) for i in range(23)]}
    interval = functools.partial(statistics.bootstrap_interval, units, resamples=1000)
    assert interval() == pytest.approx((0.3954172, 0.6392479))
    assert interval(statistics.pooled) == pytest.approx((0.4333333, 0.6666667))
    assert interval(level=0.9) == pytest.approx((0.4142186, 0.6204465))
    assert interval(seed=3) == pytest.approx((0.4059929, 0.6609871))


def test_a_model_against_itself_differs_by_nothing() -> None:
    outcomes = {"a": [True, False, True, True], "b": [False, True]}
    test = statistics.paired_test(outcomes, outcomes)
    assert test["difference"] == test["low"] == test["high"] == 0.0
    assert test["p_value"] == 1.0
    assert (test["units"], test["items"], test["resamples"]) == (2, 6, statistics.RESAMPLES)
    assert (test["seeds_a"], test["seeds_b"]) == (1, 1)


def test_90_against_50_of_the_same_100_items_is_significant() -> None:
    """Model A right on 90 items, B on 50 of them: the 40 items where they differ all favour
    A, so every resampled difference is above 0 (none is 0 unless all 100 draws miss those
    40 items): p is only the bound 2 / R (R = 10,000), flagged, and the interval excludes 0."""
    a = [True] * 90 + [False] * 10
    b = [True] * 50 + [False] * 50
    test = statistics.paired_test(a, b)
    assert (test["a"], test["b"]) == (0.9, 0.5)
    assert test["difference"] == pytest.approx(0.4)
    assert (test["p_value"], test["p_bound"], test["test"]) == (0.0002, True, "bootstrap")
    assert 0 < 0.25 < test["low"] < 0.4 < test["high"] < 0.55
    reverse = statistics.paired_test(b, a)
    assert reverse["difference"] == pytest.approx(-0.4)
    assert reverse["p_value"] == test["p_value"]


def test_the_paired_test_needs_the_same_items() -> None:
    with pytest.raises(InputError, match="unit 'a' has 3 items in one and 2 in another"):
        statistics.paired_test({"a": [True, False, True]}, {"a": [True, False]})
    with pytest.raises(InputError, match="different units"):
        statistics.paired_test({"a": [True]}, {"b": [True]})


def test_paired_tests_compare_two_models_on_each_headline_measure() -> None:
    """Every headline measure both have but the unknown share; in vocabulary, the items in
    vocabulary for both models (here one item less than each model's own)."""
    other = {"blimp": blimp_result({"anaphor_gender_agreement": ("anaphor_agreement", "1111",
                                                                 "1000"),
                                    "wh_island": ("island_effects", "010", "000")})}
    tests = compare.paired_tests(AWD, other)
    assert list(tests) == ["blimp/accuracy", "blimp/in_vocabulary_accuracy"]
    assert tests["blimp/accuracy"]["a"] == pytest.approx((3 / 4 + 2 / 3) / 2)
    assert tests["blimp/accuracy"]["b"] == pytest.approx((1 + 1 / 3) / 2)
    assert tests["blimp/accuracy"]["items"] == 7
    assert tests["blimp/in_vocabulary_accuracy"]["items"] == 5
    assert tests["blimp/in_vocabulary_accuracy"]["a"] == pytest.approx((2 / 2 + 2 / 3) / 2)


# ------------------------------------------------------------------------------ tables

MARKDOWN = """\
Targeted syntactic evaluation: headline measures

| measure | awd | awd untrained (2 seeds) | onlstm |
|---|---:|---:|---:|
| blimp/accuracy | 0.708 [0.375, 1.000] (n=7) | 0.333 [0.062, 0.667] (n=7) | 0.667 [0.500, 1.000] (n=7) |
| blimp/in_vocabulary_accuracy | 0.833 [0.500, 1.000] (n=6) | 0.417 [0.167, 0.667] (n=6) | 0.667 [0.500, 1.000] (n=6) |
| blimp/unknown_share | 0.125 (n=7) | 0.125 (n=7) | 0.125 (n=7) |
| syntaxgym/sg_score | 0.708 [0.292, 1.000] (n=7) | 0.146 [0.000, 0.354] (n=7) | 1.000 [1.000, 1.000] (n=7) |
| syntaxgym/in_vocabulary_sg_score | 0.875 [0.625, 1.000] (n=6) | 0.188 [0.000, 0.500] (n=6) | 1.000 [1.000, 1.000] (n=6) |
| syntaxgym/unknown_share | 0.167 (n=7) | 0.167 (n=7) | 0.167 (n=7) |

- Scored: BLiMP, 2 paradigms of 2 phenomena (7 pairs); SyntaxGym, 3 suites (9 items; 1 of the suites left out of the SG score, as the paper does).
- Each value: the measure [its 95% percentile interval from 1000 item-bootstrap resamples, items resampled within each paradigm, suite or Table 1 row (Efron & Tibshirani 1993), seed 0] (n: the pairs or items it rests on; in_vocabulary: those without an unknown word where it matters; an in_vocabulary row only where it differs from its plain row).
- Aggregates as each paper's: BLiMP, the unweighted mean over paradigms; SyntaxGym, the mean over the suites scored but those the paper leaves out (in vocabulary, those with an in-vocabulary item).
- untrained: the model's configuration before training.
- Several seeds: their mean, and the interval of that mean from a two-level bootstrap: each resample draws the seeds with replacement, then the items within each unit, the same items for every drawn seed (the seeds were scored on the same items).
- unknown_share: no interval (a property of the vocabulary and the data).
"""  # noqa: E501

CSV = """\
measure,awd,awd low,awd high,awd n,awd untrained (2 seeds),awd untrained (2 seeds) low,awd untrained (2 seeds) high,awd untrained (2 seeds) n,onlstm,onlstm low,onlstm high,onlstm n
blimp/accuracy,0.708333,0.375000,1.000000,7,0.333333,0.062500,0.666667,7,0.666667,0.500000,1.000000,7
blimp/in_vocabulary_accuracy,0.833333,0.500000,1.000000,6,0.416667,0.166667,0.666667,6,0.666667,0.500000,1.000000,6
blimp/unknown_share,0.125000,,,7,0.125000,,,7,0.125000,,,7
syntaxgym/sg_score,0.708333,0.291667,1.000000,7,0.145833,0.000000,0.354167,7,1.000000,1.000000,1.000000,7
syntaxgym/in_vocabulary_sg_score,0.875000,0.625000,1.000000,6,0.187500,0.000000,0.500000,6,1.000000,1.000000,1.000000,6
syntaxgym/unknown_share,0.166667,,,7,0.166667,,,7,0.166667,,,7
"""  # noqa: E501

LATEX = r"""% synlm evaluate-syntax: \usepackage{booktabs}, \usepackage{graphicx}
\begin{table}[htbp]
\centering
\small
\caption[{Targeted syntactic evaluation: headline measures}]{Targeted syntactic evaluation: headline measures. Scored: BLiMP, 2 paradigms of 2 phenomena (7 pairs); SyntaxGym, 3 suites (9 items; 1 of the suites left out of the SG score, as the paper does). Each value: the measure [its 95\% percentile interval from 1000 item-bootstrap resamples, items resampled within each paradigm, suite or Table 1 row (Efron \& Tibshirani 1993), seed 0] (n: the pairs or items it rests on; in\_vocabulary: those without an unknown word where it matters; an in\_vocabulary row only where it differs from its plain row). Aggregates as each paper's: BLiMP, the unweighted mean over paradigms; SyntaxGym, the mean over the suites scored but those the paper leaves out (in vocabulary, those with an in-vocabulary item). untrained: the model's configuration before training. Several seeds: their mean, and the interval of that mean from a two-level bootstrap: each resample draws the seeds with replacement, then the items within each unit, the same items for every drawn seed (the seeds were scored on the same items). unknown\_share: no interval (a property of the vocabulary and the data).}
\label{tab:synlm}
\sbox0{%
\begin{tabular}{lrrr}
\toprule
measure & awd & awd untrained (2 seeds) & onlstm \\
\midrule
blimp/accuracy & 0.708 [0.375, 1.000] (n=7) & 0.333 [0.062, 0.667] (n=7) & 0.667 [0.500, 1.000] (n=7) \\
blimp/in\_vocabulary\_accuracy & 0.833 [0.500, 1.000] (n=6) & 0.417 [0.167, 0.667] (n=6) & 0.667 [0.500, 1.000] (n=6) \\
blimp/unknown\_share & 0.125 (n=7) & 0.125 (n=7) & 0.125 (n=7) \\
syntaxgym/sg\_score & 0.708 [0.292, 1.000] (n=7) & 0.146 [0.000, 0.354] (n=7) & 1.000 [1.000, 1.000] (n=7) \\
syntaxgym/in\_vocabulary\_sg\_score & 0.875 [0.625, 1.000] (n=6) & 0.188 [0.000, 0.500] (n=6) & 1.000 [1.000, 1.000] (n=6) \\
syntaxgym/unknown\_share & 0.167 (n=7) & 0.167 (n=7) & 0.167 (n=7) \\
\bottomrule
\end{tabular}
}%
\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi
\end{table}
"""  # noqa: E501


@pytest.fixture(scope="module")
def table() -> tables.Table:
    return compare.comparison_table({"awd": AWD, "onlstm": ONLSTM}, {"awd": UNTRAINED},
                                    comparisons=False, resamples=1000)


def test_the_headline_table_in_markdown_csv_and_latex(table: tables.Table) -> None:
    """Two models, the first with its untrained baseline over two seeds (their mean, its
    interval from the two-level bootstrap): each value with its interval and its count;
    SyntaxGym's scores leave out the excluded nn-nv-rpl, and the notes count what was scored
    (3 suites, one of them left out), never the paper's 31; the LaTeX is a table float, its
    caption the title and the notes, a booktabs tabular."""
    assert table.columns == ["awd", "awd untrained (2 seeds)", "onlstm"]
    assert tables.to_markdown(table) == MARKDOWN
    assert tables.to_csv(table) == CSV
    assert tables.to_latex(table) == LATEX


def test_the_table_values_are_the_headline_and_the_seed_mean(table: tables.Table) -> None:
    rows = dict(table.rows)
    for name, results in (("awd", AWD), ("onlstm", ONLSTM)):
        column = table.columns.index(name)
        for key, value in results["blimp"].headline.items():
            assert rows[key][column].value == pytest.approx(value, abs=5e-5)
        for key, value in results["syntaxgym"].headline.items():
            assert rows[key][column].value == pytest.approx(value)
    seeds = [run["blimp"].headline["blimp/accuracy"] for run in UNTRAINED]
    assert rows["blimp/accuracy"][1].value == pytest.approx(sum(seeds) / 2, abs=5e-5)
    # one model, one result: the interval is bootstrap_interval's with the same seed
    assert (rows["blimp/accuracy"][0].low, rows["blimp/accuracy"][0].high) == \
        statistics.bootstrap_interval(measures.item_outcomes(AWD["blimp"]))


def test_latex_escapes_its_special_characters(table: tables.Table) -> None:
    assert tables.latex_escape("in_vocabulary 95% a&b #1 $x {y} ~^\\") == (
        r"in\_vocabulary 95\% a\&b \#1 \$x \{y\} \textasciitilde{}\textasciicircum{}"
        r"\textbackslash{}")
    body = [line for line in tables.to_latex(table).splitlines() if not line.startswith("%")]
    assert all("_" not in line.replace(r"\_", "") for line in body)


def test_write_tables_writes_the_three_files_whole(table: tables.Table, tmp_path: Path) -> None:
    paths = tables.write_tables(table, tmp_path / "out" / "headline")
    assert [p.name for p in paths] == ["headline.md", "headline.csv", "headline.tex",
                                       "headline_standalone.tex"]
    assert paths[0].read_text() == MARKDOWN and paths[1].read_text() == CSV
    assert paths[2].read_text() == LATEX.replace(r"\label{tab:synlm}",
                                                 r"\label{tab:out-headline}")
    assert paths[3].read_text() == tables.to_latex_document(table, label="tab:out-headline")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)


def test_the_unit_table_lists_groups_then_their_units() -> None:
    """BLiMP phenomena then paradigms; SyntaxGym circuits then suites, the excluded suite
    last; Marvin & Linzen sections then rows, under each section's headline measures (the
    NPI rows: their pairwise comparisons); an in-vocabulary row only where it differs from
    its plain row (no Marvin & Linzen record here has an unknown word)."""
    npi = {"grammatical_gt_intrusive": True, "intrusive_gt_ungrammatical": False}
    ml = BenchmarkResult("marvin_linzen", {}, [
        ml_record("simple_agrmt", True), ml_record("simple_npi_anim", True, **npi)], {
        "marvin_linzen/agreement/accuracy": 1.0,
        "marvin_linzen/agreement/in_vocabulary_accuracy": 1.0,
        "marvin_linzen/agreement/unknown_share": 0.0,
        "marvin_linzen/npi/grammatical_gt_intrusive": 1.0,
        "marvin_linzen/npi/intrusive_gt_ungrammatical": 0.0,
        "marvin_linzen/npi/unknown_share": 0.0})
    table = compare.comparison_table({"awd": {**AWD, "marvin_linzen": ml}}, level="unit",
                                     resamples=10)
    labels = [label for label, _ in table.rows]
    assert labels[:4] == ["blimp/anaphor_agreement/accuracy",
                          "blimp/anaphor_agreement/in_vocabulary_accuracy",
                          "blimp/anaphor_agreement/anaphor_gender_agreement/accuracy",
                          "blimp/anaphor_agreement/anaphor_gender_agreement/"
                          "in_vocabulary_accuracy"]
    assert [label for label in labels if label.startswith("syntaxgym")
            and label.endswith("/accuracy") and "in_vocabulary" not in label] == [
        "syntaxgym/Licensing/accuracy", "syntaxgym/Licensing/npi_orc_any/accuracy",
        "syntaxgym/Agreement/accuracy", "syntaxgym/Agreement/number_src/accuracy",
        "syntaxgym/excluded/nn-nv-rpl/accuracy"]
    assert [label for label in labels if label.startswith("marvin_linzen")] == [
        "marvin_linzen/Subject-verb agreement/accuracy",
        "marvin_linzen/Subject-verb agreement/Simple/accuracy",
        "marvin_linzen/Negative polarity items/grammatical_gt_intrusive",
        "marvin_linzen/Negative polarity items/intrusive_gt_ungrammatical",
        "marvin_linzen/Negative polarity items/Simple/grammatical_gt_intrusive",
        "marvin_linzen/Negative polarity items/Simple/intrusive_gt_ungrammatical"]
    rows = dict(table.rows)
    assert rows["syntaxgym/Licensing/npi_orc_any/in_vocabulary_accuracy"][0].n == 2
    assert rows["marvin_linzen/Negative polarity items/intrusive_gt_ungrammatical"][0].value == 0


def test_a_baseline_must_name_a_model() -> None:
    with pytest.raises(InputError, match="baseline 'gpt2' names no model"):
        compare.comparison_table({"awd": AWD}, {"gpt2": UNTRAINED})


# -------------------------------------------------------- against the benchmarks' headline

LOG_P = {"the": -1.0, "cat": -3.0, "cats": -4.0, "sleeps": -2.0, "sleep": -2.5, "no": -3.0,
         "ever": -2.0, "have": -1.5, "most": -2.0}


class TableScorer:
    """Each word's log-probability from ``LOG_P``; a word outside it is unknown, -9."""

    def words(self, text: str) -> list[str]:
        return text.lower().replace(".", "").split()

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        out = []
        for words in sentences:
            log_probs = tuple(LOG_P.get(w, -9.0) for w in words)
            unknown = tuple(w not in LOG_P for w in words)
            out.append(ScoredSentence(tuple(words), log_probs, unknown, -1.0,
                                      tuple("<unk>" if u else w for w, u in zip(words, unknown)),
                                      log_probs))
        return out


def suite(name: str) -> Any:
    def condition(label: str, subject: str, verb: str) -> dict[str, Any]:
        return {"condition_name": label, "regions": [
            {"region_number": 1, "content": f"The {subject}"},
            {"region_number": 2, "content": verb}]}

    items = [(1, "cat", "sleeps", "sleep"), (2, "cats", "sleep", "sleeps"),
             (3, "dog", "sleeps", "sleep")]
    return parse_suite({
        "meta": {"name": name}, "region_meta": {"1": "subject", "2": "verb"},
        "predictions": [{"type": "formula", "formula": "(2;%match%) < (2;%mismatch%)"}],
        "items": [{"item_number": n, "conditions": [condition("match", s, good),
                                                     condition("mismatch", s, bad)]}
                  for n, s, good, bad in items]}, name)


def test_the_table_recomputes_what_the_benchmarks_report() -> None:
    """Results scored by ``score_benchmarks`` itself: every headline measure is a row, and
    its value is the headline's (rounded there to 4 places); an in-vocabulary measure equal
    to its plain one (here BLiMP's: no pair has an unknown word where it matters) has no
    row."""
    blimp = [MinimalPair({"UID": uid, "phenomenon": phenomenon, "pairID": i}, good, (bad,))
             for uid, phenomenon, pairs in [
                 ("agreement", "subject_verb_agreement",
                  [("the cat sleeps", "the cat sleep"), ("the cats sleep", "the cats sleeps"),
                   ("the dog sleeps", "the dog sleep")]),
                 ("npi", "npi_licensing", [("no cat have ever", "most cat have ever")])]
             for i, (good, bad) in enumerate(pairs)]
    ml = [MinimalPair({"template": template, "case": "c", "index": i}, good, bad)
          for i, (template, good, bad) in enumerate([
              ("simple_agrmt", "the cat sleeps", ("the cat sleep",)),
              ("simple_agrmt", "the cats sleep", ("the cats sleeps",)),
              ("prep_anim", "the cat the dog sleeps", ("the cat the dog sleep",)),
              ("simple_npi_anim", "no cats have ever", ("most cats have ever",
                                                        "the cats no have ever"))])]
    gym = [suite("number_src"), suite("nn-nv-rpl")]
    results = score_benchmarks({"blimp": blimp, "marvin_linzen": ml, "syntaxgym": gym},
                               TableScorer())
    table = compare.comparison_table({"m": results}, resamples=20)
    rows = {label: cells[0] for label, cells in table.rows}
    for result in results.values():
        for key, value in result.headline.items():
            if value is None:
                assert key not in rows or rows[key].value is None
            elif key not in rows:
                assert key.replace("in_vocabulary_", "") in rows
                assert value == result.headline[key.replace("in_vocabulary_", "")]
            else:
                assert rows[key].value == pytest.approx(value, abs=5e-5), key
    assert rows["blimp/accuracy"].n == 4 and rows["syntaxgym/sg_score"].n == 3
    assert math.isclose(rows["syntaxgym/sg_score"].value, 2 / 3)


# ------------------------------------------------------------------------------- plots


def test_the_plots_are_png_and_svg(tmp_path: Path) -> None:
    models = {"awd": AWD, "onlstm": ONLSTM}
    paths = plots.plot_units(models, "syntaxgym", tmp_path / "circuits", kind="circuits",
                             baselines={"awd": UNTRAINED}, resamples=50)
    assert paths == [tmp_path / "circuits.png", tmp_path / "circuits.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(paths[1]).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    paths = plots.plot_units(models, "blimp", tmp_path / "phenomena.png", kind="phenomena",
                             intervals=False)
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "circuits.png", "circuits.svg", "phenomena.png", "phenomena.svg"]
    with pytest.raises(InputError, match="circuits are groups of syntaxgym"):
        plots.plot_units(models, "blimp", tmp_path / "x", kind="circuits")
