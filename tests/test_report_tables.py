"""Paper-ready tables (synlm.tse.compare, .statistics, .tables; synlm evaluate-syntax's
--label, --units and --report): a labelled table with each model against the first (golden
Markdown and LaTeX), the p-value that inverts the paired interval, Holm's adjustment worked
by hand, the two-level bootstrap's coverage on simulated seeds and items of a known mean,
the bootstraps against scipy.stats on data whose answer is known, default labels, a report
mixing a synlm checkpoint and a Hugging Face model, and the one-line errors."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import scipy.stats
from test_evaluate_syntax import toy_data, unigram_model
from test_export_hf import save_checkpoint
from test_tse_compare import blimp_result, syntaxgym_result

from conftest import local_gpt2, run_cli
from synlm.errors import InputError
from synlm.runtime.labels import default_labels
from synlm.tse import compare, statistics, tables

# ------------------------------------------------------------ a labelled table, golden


def _pair(uid: str, phenomenon: str, outcomes: str, unknown: str | None = None
          ) -> dict[str, tuple[str, str, str]]:
    return {uid: (phenomenon, outcomes, unknown or "0" * len(outcomes))}


#: A word-level model that reads some deciding words as unknown, and a subword model that
#: reads none and is right more often.
LSTM = {"blimp": blimp_result({**_pair("anaphor_gender_agreement", "anaphor_agreement",
                                       "110100101101", "000100000100"),
                               **_pair("wh_island", "island_effects", "0110101001")}),
        "syntaxgym": syntaxgym_result({"number_src": ("10110100", "00000011")})}
GPT2 = {"blimp": blimp_result({**_pair("anaphor_gender_agreement", "anaphor_agreement",
                                       "111111111101"),
                               **_pair("wh_island", "island_effects", "1110111011")}),
        "syntaxgym": syntaxgym_result({"number_src": ("11110110", "00000000")})}

MARKDOWN = """\
Targeted syntactic evaluation: headline measures

| measure | LSTM (PTB) | GPT-2 | GPT-2 - LSTM (PTB) |
|---|---:|---:|---:|
| blimp/accuracy | 0.542 [0.333, 0.767] (n=22) | 0.858 [0.675, 1.000] (n=22) | +0.317 [+0.125, +0.517] (n=22) p=0.0156 (sign test), Holm p=0.0625 |
| blimp/in_vocabulary_accuracy | 0.500 [0.300, 0.750] (n=20) | 0.858 [0.675, 1.000] (n=22) | +0.350 [+0.150, +0.550] (n=20) p=0.0156 (sign test), Holm p=0.0625 |
| blimp/unknown_share | 0.083 (n=22) | 0.000 (n=22) | — |
| syntaxgym/sg_score | 0.500 [0.250, 0.875] (n=8) | 0.750 [0.375, 1.000] (n=8) | +0.250 [+0.000, +0.625] (n=8) p=0.5 (sign test), Holm p=1 |
| syntaxgym/in_vocabulary_sg_score | 0.667 [0.333, 1.000] (n=6) | 0.750 [0.375, 1.000] (n=8) | +0.167 [+0.000, +0.500] (n=6) p=1 (sign test), Holm p=1 |
| syntaxgym/unknown_share | 0.250 (n=8) | 0.000 (n=8) | — |

"""  # noqa: E501

LATEX = r"""% synlm evaluate-syntax: \usepackage{booktabs}, \usepackage{graphicx}
\begin{table}[htbp]
\centering
\small
\caption[{Targeted syntactic evaluation: headline measures}]{Targeted syntactic evaluation: headline measures. Scored: BLiMP, 2 paradigms of 2 phenomena (22 pairs); SyntaxGym, 1 suite (8 items). Each value: the measure [its 95\% percentile interval from 1000 item-bootstrap resamples, items resampled within each paradigm, suite or Table 1 row (Efron \& Tibshirani 1993), seed 0] (n: the pairs or items it rests on; in\_vocabulary: those without an unknown word where it matters; an in\_vocabulary row only where it differs from its plain row). Aggregates as each paper's: BLiMP, the unweighted mean over paradigms; SyntaxGym, the mean over the suites scored but those the paper leaves out (in vocabulary, those with an in-vocabulary item). unknown\_share: no interval (a property of the vocabulary and the data). \textless{}model\textgreater{} - LSTM (PTB): the difference of the model and LSTM (PTB) on the same items (in vocabulary: those in vocabulary for both), its 95\% paired-bootstrap percentile interval (the items drawn alike for both models) and a two-sided p. Where at least 20 items differ between the two, p inverts that interval: p = 2 min(\#\{d* \textless{}= 0\}, \#\{d* \textgreater{}= 0\}) / R over the R resampled differences d*, so p \textless{} 0.05 exactly when the interval excludes 0 (one bootstrap gives both); a p of 0 (every resample on one side) says only p \textless{} 0.002 and is shown so. Where fewer differ, the resamples fall on one side however little the evidence, so p is the exact two-sided sign test over the items' paired differences (ties dropped), marked (sign test); its interval is the bootstrap's still, and the two may disagree. Holm p: adjusted by Holm's step-down method over the 4 comparisons of this table (family-wise error rate 0.05); a bound p sets a bound (shown \textless{}), a comparison without a p (n/a) is left out, and the least a bootstrap p of this table can be adjusted to is 0.008.}
\label{tab:synlm}
\sbox0{%
\begin{tabular}{lrrr}
\toprule
measure & LSTM (PTB) & GPT-2 & GPT-2 - LSTM (PTB) \\
\midrule
blimp/accuracy & 0.542 [0.333, 0.767] (n=22) & 0.858 [0.675, 1.000] (n=22) & \begin{tabular}[t]{@{}r@{}}+0.317 [+0.125, +0.517] (n=22)\\p=0.0156 (sign test), Holm p=0.0625\end{tabular} \\
blimp/in\_vocabulary\_accuracy & 0.500 [0.300, 0.750] (n=20) & 0.858 [0.675, 1.000] (n=22) & \begin{tabular}[t]{@{}r@{}}+0.350 [+0.150, +0.550] (n=20)\\p=0.0156 (sign test), Holm p=0.0625\end{tabular} \\
blimp/unknown\_share & 0.083 (n=22) & 0.000 (n=22) & -- \\
syntaxgym/sg\_score & 0.500 [0.250, 0.875] (n=8) & 0.750 [0.375, 1.000] (n=8) & \begin{tabular}[t]{@{}r@{}}+0.250 [+0.000, +0.625] (n=8)\\p=0.5 (sign test), Holm p=1\end{tabular} \\
syntaxgym/in\_vocabulary\_sg\_score & 0.667 [0.333, 1.000] (n=6) & 0.750 [0.375, 1.000] (n=8) & \begin{tabular}[t]{@{}r@{}}+0.167 [+0.000, +0.500] (n=6)\\p=1 (sign test), Holm p=1\end{tabular} \\
syntaxgym/unknown\_share & 0.250 (n=8) & 0.000 (n=8) & -- \\
\bottomrule
\end{tabular}
}%
\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi
\end{table}
"""  # noqa: E501


@pytest.fixture(scope="module")
def labelled() -> tables.Table:
    return compare.comparison_table({"LSTM (PTB)": LSTM, "GPT-2": GPT2}, resamples=1000)


def test_a_labelled_table_with_the_paired_test_in_markdown_and_latex(labelled) -> None:
    """A column per label, then the second model against the first: the difference, its
    paired interval, its p and Holm's p over the table's four comparisons (the unknown
    shares have none), each beside its count. Fewer than 20 items differ between the two
    models on every row, so each p is the exact sign test's: BLiMP's 7 differing pairs all
    favour GPT-2, 2 / 2^7 = 0.0156 (the bootstrap's resamples all fell on one side: it said
    p < 0.002), SyntaxGym's 3 against 1, 2 (1 + 4) / 16 = 0.625 ... as the golden has it."""
    assert tables.to_markdown(labelled).startswith(MARKDOWN)
    assert tables.to_latex(labelled) == LATEX
    note = labelled.notes[-1]
    assert "p < 0.05 exactly when the interval excludes 0" in note
    assert "Where at least 20 items differ between the two" in note
    assert "Holm's step-down method over the 4 comparisons of this table" in note
    header, *rows = (line.split(",") for line in tables.to_csv(labelled).splitlines())
    assert header[-5:] == ["GPT-2 - LSTM (PTB) p", "GPT-2 - LSTM (PTB) p bound",
                           "GPT-2 - LSTM (PTB) sign test", "GPT-2 - LSTM (PTB) holm",
                           "GPT-2 - LSTM (PTB) holm bound"]
    # p, its bound flag, its test, Holm p, its bound flag: numbers only
    assert {row[0]: row[-5:] for row in rows} == {
        "blimp/accuracy": ["0.015625", "0", "1", "0.0625", "0"],
        "blimp/in_vocabulary_accuracy": ["0.015625", "0", "1", "0.0625", "0"],
        "blimp/unknown_share": ["", "", "", "", ""],
        "syntaxgym/sg_score": ["0.5", "0", "1", "1", "0"],
        "syntaxgym/in_vocabulary_sg_score": ["1", "0", "1", "1", "0"],
        "syntaxgym/unknown_share": ["", "", "", "", ""]}


def test_many_differing_items_take_the_bootstrap_and_its_bound() -> None:
    """40 pairs, B right on the 25 A gets wrong: at least 20 items differ, so p is the
    bootstrap's; every one of 1,000 resamples lies above 0, so p is only the bound
    2 / 1000, written p<0.002 (never p=0 nor p=0.000), 0.002 with its bound flag 1 in the
    CSV, and the Holm p over the table's one comparison is that bound too."""
    a = {"blimp": blimp_result(_pair("wh_island", "island_effects", "1" * 15 + "0" * 25))}
    b = {"blimp": blimp_result(_pair("wh_island", "island_effects", "1" * 40))}
    table = compare.comparison_table({"a": a, "b": b}, resamples=1000)
    cell = dict(table.rows)["blimp/accuracy"][2]
    assert (cell.p, cell.p_bound, cell.test) == (0.002, True, "bootstrap")
    assert (cell.holm, cell.holm_bound) == (0.002, True)
    assert "(n=40) p<0.002, Holm p<0.002 |" in tables.to_markdown(table)
    assert r"(n=40)\\p\textless{}0.002, Holm p\textless{}0.002\end{tabular}" in \
        tables.to_latex(table)
    row = next(line for line in tables.to_csv(table).splitlines()
               if line.startswith("blimp/accuracy,"))
    assert row.split(",")[-5:] == ["0.002", "1", "0", "0.002", "1"]


def test_p_values_are_written_to_be_read_against_their_bound() -> None:
    """A p of 0.0002 is p=0.0002, not p=0.000, beside a bound p<0.0002; three significant
    digits, never an exponent; a NaN p (no test) is n/a, its CSV columns empty. Every CSV
    column but the measure is a number or empty."""
    assert [tables.p_text(p) for p in (0.0002, 0.0495, 0.25, 1.0, 2 ** -18)] == [
        "=0.0002", "=0.0495", "=0.25", "=1", "=0.00000381"]
    assert tables.p_text(0.0002, bound=True) == "<0.0002"
    assert tables.p_text(float("nan")) == " n/a"
    table = tables.Table(["b - a"], [
        ("exact", [tables.Cell(0.1, 0.05, 0.15, 900, 0.0002, 0.0004, False, False,
                               "bootstrap")]),
        ("bound", [tables.Cell(0.2, 0.15, 0.25, 900, 0.0002, 0.0004, True, True,
                               "bootstrap")]),
        ("untested", [tables.Cell(0.0, -0.1, 0.1, 3, float("nan"), float("nan"))])],
        resamples=10_000)
    markdown = tables.to_markdown(table)
    assert "(n=900) p=0.0002, Holm p=0.0004 |" in markdown
    assert "(n=900) p<0.0002, Holm p<0.0004 |" in markdown
    assert "(n=3) p n/a, Holm p n/a |" in markdown
    assert r"(n=900)\\p\textless{}0.0002, Holm p\textless{}0.0004\end{tabular}" in \
        tables.to_latex(table)
    rows = [line.split(",") for line in tables.to_csv(table).splitlines()]
    assert rows[0][-5:] == ["b - a p", "b - a p bound", "b - a sign test", "b - a holm",
                            "b - a holm bound"]
    assert rows[1][-5:] == ["0.0002", "0", "0", "0.0004", "0"]
    assert rows[2][-5:] == ["0.0002", "1", "0", "0.0004", "1"]
    assert rows[3][-5:] == ["", "", "", "", ""]
    for row in rows[1:]:
        for value in row[1:]:
            assert value == "" or float(value) == float(value)


def test_a_difference_that_rounds_to_zero_is_written_as_zero() -> None:
    """A mean difference of -1e-17 (two equal accuracies, summed in another order) is +0.000
    in the Markdown and LaTeX and 0.000000 in the CSV, never a negative zero."""
    table = tables.Table(["b - a"], [("blimp/accuracy", [tables.Cell(-1e-17, -0.0004, 0.04,
                                                                     670, 1.0, 1.0)])])
    assert "+0.000 [+0.000, +0.040] (n=670)" in tables.to_markdown(table)
    assert "+0.000 [+0.000, +0.040]" in tables.to_latex(table)
    assert tables.to_csv(table).splitlines()[1].startswith("blimp/accuracy,0.000000,-0.000400,")


def test_the_table_and_the_paired_tests_agree(labelled) -> None:
    """The comparison column is ``paired_tests`` of the two models, measure by measure: the
    same difference, interval and p; Holm over the same four tests."""
    tests = compare.paired_tests(LSTM, GPT2, resamples=1000)
    rows = dict(labelled.rows)
    for key, test in tests.items():
        cell = rows[key][2]
        assert cell.value == pytest.approx(-test["difference"])
        assert (cell.low, cell.high) == pytest.approx((-test["high"], -test["low"]), abs=1e-12)
        assert (cell.p, cell.holm) == pytest.approx((test["p_value"], test["holm"]))
        assert (cell.p_bound, cell.test, cell.holm_bound) == (
            test["p_bound"], test["test"], test["holm_bound"])


def test_in_vocabulary_rows_only_where_they_differ() -> None:
    """Two subword models (no unknown word): the in-vocabulary rows repeat the plain ones
    and are left out; the unit table shows the units chosen."""
    table = compare.comparison_table({"a": GPT2, "b": GPT2}, resamples=50)
    assert [label for label, _ in table.rows] == [
        "blimp/accuracy", "blimp/unknown_share", "syntaxgym/sg_score",
        "syntaxgym/unknown_share"]
    assert dict(table.rows)["blimp/accuracy"][2].p == 1.0  # a model against itself
    units = compare.comparison_table({"LSTM": LSTM}, level="unit", units=["paradigm"],
                                     resamples=50)
    assert [label for label, _ in units.rows] == [
        "blimp/anaphor_agreement/anaphor_gender_agreement/accuracy",
        "blimp/anaphor_agreement/anaphor_gender_agreement/in_vocabulary_accuracy",
        "blimp/island_effects/wh_island/accuracy"]
    groups = compare.comparison_table({"LSTM": LSTM}, level="unit",
                                      units=["phenomenon", "circuit"], resamples=50)
    assert [label for label, _ in groups.rows] == [
        "blimp/anaphor_agreement/accuracy", "blimp/anaphor_agreement/in_vocabulary_accuracy",
        "blimp/island_effects/accuracy", "syntaxgym/Agreement/accuracy",
        "syntaxgym/Agreement/in_vocabulary_accuracy"]


# ---------------------------------------------------------------- p, interval, Holm


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_p_is_below_alpha_exactly_when_the_interval_excludes_0(level: float) -> None:
    """On 200 sets of resampled differences, shifted from clearly below 0 to clearly above
    (some with ties at 0), the p-value and the percentile interval of the same draws agree
    at every level."""
    rng = np.random.default_rng(0)
    alpha = round(1 - level, 6)
    agreements = set()
    for shift in np.linspace(-0.3, 0.3, 200):
        draws = np.round(rng.normal(shift, 0.1, size=1000), 2)  # rounded: ties at 0
        low, high = statistics.percentile_interval(draws, level)
        excludes = low > 0 or high < 0
        assert (statistics.inversion_p_value(draws) < alpha) == excludes, shift
        agreements.add(excludes)
    assert agreements == {True, False}  # both cases were met


def test_holm_against_a_hand_worked_example() -> None:
    """Four p-values 0.01, 0.04, 0.03, 0.005 (m = 4). Sorted: 0.005 x 4 = 0.02, 0.01 x 3 =
    0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04, raised to the 0.06 before it. At 0.05 Holm
    rejects the first two (0.005 and 0.01), where Bonferroni (x 4) rejects them too and the
    unadjusted test all four; a p of 0.4 among three: 1.0 at most."""
    assert statistics.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert statistics.holm([0.4, 0.5, 0.001]) == pytest.approx([0.8, 0.8, 0.003])
    assert statistics.holm([]) == []


def test_holm_of_a_bound_p_is_a_bound() -> None:
    """A bootstrap p of 0 says only p < 2 / R: it enters Holm's adjustment as 2 / R, flagged
    a bound, and the adjusted p it sets (its own, and a larger exact p's it raises) is an
    upper bound."""
    adjusted, bounds = statistics.holm_bounds([0.002, 0.002, 0.22, 0.716],
                                              [True, False, False, False])
    assert adjusted == pytest.approx([0.008, 0.008, 0.44, 0.716])  # 4 x 0.002; 3 x 0.002 < it
    assert bounds == [True, True, False, False]
    adjusted, bounds = statistics.holm_bounds([0.002, 0.01], [True, False])
    assert adjusted == pytest.approx([0.004, 0.01]) and bounds == [True, False]
    assert statistics.holm_bounds([0.6, 0.6], [True, True]) == ([1.0, 1.0], [False, False])
    assert statistics.holm([0.0, 0.01]) == pytest.approx([0.0, 0.01])  # no bound given


def test_holm_leaves_a_nan_p_out() -> None:
    """A NaN p (a comparison that could not be tested) is left out, as R's p.adjust leaves
    out NA: the other three are adjusted over m = 3 (0.01 x 3 = 0.03, 0.03 x 2 = 0.06,
    0.04 x 1 raised to 0.06), not over 4 and not all turned into 1, and its own Holm p is
    NaN, not a bound; all NaN: all NaN."""
    nan = float("nan")
    adjusted, bounds = statistics.holm_bounds([0.01, nan, 0.04, 0.03])
    assert adjusted[0::2] + adjusted[3:] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[1]) and bounds == [False] * 4
    assert statistics.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert all(map(math.isnan, statistics.holm([nan, nan])))
    with pytest.raises(InputError, match="2 p-values but 1 bound flags"):
        statistics.holm_bounds([0.1, 0.2], [True])


def test_the_exact_sign_test() -> None:
    """Two-sided, ties dropped, Binomial(m, 1/2): one differing item 1; three items all
    right for one model and all wrong for the other 2 / 8 = 0.25; 10 of 10 one way
    2 / 1024; 8 against 2, 2 (1 + 10 + 45) / 1024 = 0.109375; no item differs: 1; seed
    means (fractions) count by their sign."""
    assert statistics.sign_test(np.array([1.0])) == 1.0
    assert statistics.sign_test(np.array([1.0, 1.0, 1.0, 0.0, 0.0])) == 0.25
    assert statistics.sign_test(np.ones(10)) == 2 / 1024
    assert statistics.sign_test(np.array([1.0] * 8 + [-1.0] * 2 + [0.0] * 30)) == 0.109375
    assert statistics.sign_test(np.zeros(4)) == 1.0
    assert statistics.sign_test(np.array([1 / 3, 2 / 3, -1 / 3])) == 1.0
    # the same as scipy's exact binomial test on the counts
    assert statistics.sign_test(np.array([1.0] * 13 + [-1.0] * 4)) == pytest.approx(
        scipy.stats.binomtest(13, 17, 0.5).pvalue)


def test_few_items_take_the_sign_test_never_a_p_of_0() -> None:
    """Three items, A right on all, B wrong on all: every bootstrap resample lies above 0
    (the bootstrap's p would be 0), but three items cannot say more than the sign test's
    0.25; one item: 1. A model against itself: 1. Twenty differing items all one way: the
    bootstrap's bound (p < 2 / R)."""
    test = statistics.paired_test([True] * 3, [False] * 3, resamples=1000)
    assert (test["p_value"], test["p_bound"], test["test"]) == (0.25, False, "sign")
    assert (test["low"], test["high"]) == (1.0, 1.0)
    assert statistics.paired_test([True], [False])["p_value"] == 1.0
    seeds = statistics.paired_difference([[True] * 3] * 2, [[False] * 3, [True] * 3])
    assert (seeds["p_value"], seeds["test"]) == (0.25, "sign")  # differences of 1/2
    many = statistics.paired_test([True] * 20, [False] * 20, resamples=1000)
    assert (many["p_value"], many["p_bound"], many["test"]) == (0.002, True, "bootstrap")


# --------------------------------------------------------- the two-level bootstrap


def _simulated(rng: np.random.Generator, seeds: int, items: int, seed_spread: float
               ) -> list[dict[str, np.ndarray]]:
    """Outcomes of ``seeds`` seeds on two units of ``items`` items each: item i of seed s is
    right with probability 0.6 + a_s + b_i, a_s ~ U(-seed_spread, seed_spread) and
    b_i ~ U(-0.25, 0.25); the mean over seeds, items and draws is 0.6."""
    a = rng.uniform(-seed_spread, seed_spread, size=(seeds, 1))
    units = {}
    for unit in ("u1", "u2"):
        p = 0.6 + a + rng.uniform(-0.25, 0.25, size=(1, items))  # (S, n)
        units[unit] = rng.random((seeds, items)) < p
    return [{unit: outcomes[s] for unit, outcomes in units.items()} for s in range(seeds)]


def _item_only(seeds: list[dict[str, np.ndarray]], resamples: int, seed: int
               ) -> tuple[float, float]:
    """The interval of the seed mean with the seeds held fixed (items resampled only)."""
    _, resampled, items = statistics.unit_accuracies(seeds, resamples,
                                                     np.random.default_rng(seed))
    return statistics.percentile_interval(
        statistics.mean_of_units(resampled, items).mean(axis=0), 0.95)


def test_the_two_level_bootstrap_covers_the_mean_over_seeds_and_items() -> None:
    """300 simulated models of 10 seeds on 2 x 40 items, the seeds' spread as large as the
    items': the 95% two-level interval (seeds, then items) holds the true mean 0.6 at least
    as often as it says (a little more: the items' noise within a seed is counted by both
    levels); the item bootstrap with the seeds held fixed leaves the seed variance out and
    holds it far less often (0.75)."""
    rng = np.random.default_rng(1)
    two_level = item_only = 0
    runs = 300
    for k in range(runs):
        seeds = _simulated(rng, seeds=10, items=40, seed_spread=0.15)
        low, high = statistics.seed_interval(seeds, resamples=300, seed=k)
        two_level += low <= 0.6 <= high
        low, high = _item_only(seeds, 300, k)
        item_only += low <= 0.6 <= high
    assert 0.92 <= two_level / runs <= 0.995 and item_only / runs < 0.85
    assert (two_level, item_only) == (293, 226)  # 97.7% and 75.3%, as the docs say


def test_paired_comparison_over_seeds() -> None:
    """Two models of three seeds each on the same items, B right on every item A is right on
    and more: the difference is the difference of the seed means, its interval excludes 0
    and p is below 0.05 (not 0: each model's seeds are drawn on their own, so a resample can
    pair A's best seed with B's worst); one seed against itself differs by nothing."""
    rng = np.random.default_rng(2)
    a = [{"u": rng.random(60) < 0.5} for _ in range(3)]
    b = [{"u": s["u"] | (rng.random(60) < 0.5)} for s in a]
    test = statistics.paired_difference(b, a, resamples=500)
    mean = [float(np.mean([s["u"].mean() for s in seeds])) for seeds in (b, a)]
    assert test["difference"] == pytest.approx(mean[0] - mean[1])
    assert 0 < test["low"] <= test["difference"] <= test["high"]
    assert 0 < test["p_value"] < 0.05 and (test["seeds_a"], test["seeds_b"]) == (3, 3)
    assert test["test"] == "bootstrap" and not test["p_bound"]
    same = statistics.paired_difference(a[:1], a[:1], resamples=100)
    assert (same["difference"], same["low"], same["high"], same["p_value"]) == (0, 0, 0, 1)


# ------------------------------------------------------------- against scipy.stats


def _exact_quantiles(units: list[np.ndarray], level: float) -> tuple[float, float]:
    """The exact percentile interval of the stratified bootstrap's mean of unit accuracies
    for binary outcomes: a unit of n items, k right, resamples to Binomial(n, k/n) / n, the
    units independently; their mean's distribution by convolution over its lattice."""
    support, mass = np.zeros(1), np.ones(1)
    for outcomes in units:
        n, k = outcomes.size, int(outcomes.sum())
        values = np.arange(n + 1) / n / len(units)
        probs = scipy.stats.binom.pmf(np.arange(n + 1), n, k / n)
        support = (support[:, None] + values[None, :]).ravel()
        mass = (mass[:, None] * probs[None, :]).ravel()
    order = np.argsort(support)
    cdf = np.cumsum(mass[order])
    pick = [support[order][np.searchsorted(cdf, q)] for q in ((1 - level) / 2, (1 + level) / 2)]
    return float(pick[0]), float(pick[1])


def test_the_bootstraps_against_scipy_and_the_exact_answer() -> None:
    """Two units (13 of 20 right, 11 of 30): the stratified bootstrap's interval of the
    mean of unit accuracies, synlm's and scipy.stats.bootstrap's (each unit a sample,
    resampled on its own: paired=False), both within 0.02 of the exact quantiles; the paired
    interval of a difference, synlm's and scipy's (paired=True), within 0.02 of each other."""
    units = [np.arange(20) % 3 != 0, np.arange(30) % 30 < 11]
    units[0][:1] = False  # 13 of 20
    exact = _exact_quantiles(units, 0.95)
    ours = statistics.bootstrap_interval({"a": units[0], "b": units[1]}, resamples=20000)
    theirs = scipy.stats.bootstrap(
        units, lambda a, b, axis: (a.mean(axis=axis) + b.mean(axis=axis)) / 2,
        paired=False, vectorized=True, n_resamples=20000, method="percentile",
        random_state=np.random.default_rng(0)).confidence_interval
    assert ours == pytest.approx(exact, abs=0.02)
    assert (theirs.low, theirs.high) == pytest.approx(exact, abs=0.02)
    rng = np.random.default_rng(3)
    a, b = rng.random(80) < 0.7, rng.random(80) < 0.5
    test = statistics.paired_test(a, b, resamples=20000)
    paired = scipy.stats.bootstrap(
        (a, b), lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis), paired=True,
        vectorized=True, n_resamples=20000, method="percentile",
        random_state=np.random.default_rng(0)).confidence_interval
    assert (test["low"], test["high"]) == pytest.approx((paired.low, paired.high), abs=0.02)


# ------------------------------------------------------------------------- labels


def test_default_labels_are_the_run_or_model_folders_own_names() -> None:
    assert default_labels(["runs/awd", "runs/onlstm/version_0/checkpoints/last.ckpt",
                           "/data/models/gpt2/", "EleutherAI/pythia-70m", "a.ckpt"]) == [
        "awd", "onlstm", "gpt2", "pythia-70m", "a"]
    assert default_labels(["x/awd", "y/awd/version_1", "runs/z"]) == ["x/awd", "y/awd", "z"]
    assert default_labels(["runs/awd", "runs/awd"]) == ["awd", "awd (2)"]


# ----------------------------------------------------------- the command: mixed models


def evaluate(capsys: pytest.CaptureFixture, *args: str) -> tuple[dict, str]:
    assert run_cli(["evaluate-syntax", *args]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_a_synlm_checkpoint_beside_a_hugging_face_model_in_one_report(capsys, tmp_path):
    """``--hf`` between two ``--ckpt_path``s: three models in command-line order, labelled
    by --label, in one JSON object, one stderr table (each value beside its count) and one
    report whose tables compare each model with the first; the same label given to both
    checkpoints makes them two seeds of one model."""
    data = toy_data(tmp_path / "data")
    ckpt = save_checkpoint(unigram_model(), tmp_path / "unigram.ckpt")
    gpt2 = local_gpt2()
    report = tmp_path / "report"
    common = ["--data-dir", str(data), "--benchmark", "blimp", "syntaxgym", "--suites",
              "number_src"]
    out, err = evaluate(capsys, "--ckpt_path", str(ckpt), "--hf", str(gpt2), "--ckpt_path",
                        str(ckpt), "--label", "unigram", "GPT-2", "again", "--report",
                        str(report), "--units", "paradigm", "suite", "--resamples", "300",
                        *common)
    assert list(out["models"]) == ["unigram", "GPT-2", "again"]
    assert out["models"]["GPT-2"]["model"] == str(gpt2)
    assert out["models"]["unigram"]["headline"]["blimp/accuracy"] == 0.625
    headline = (report / "headline.md").read_text()
    assert "| measure | unigram | GPT-2 | again | GPT-2 - unigram | again - unigram |" in headline
    assert "Holm p" in headline and "blimp/in_vocabulary_accuracy" in headline
    assert "from 300 item-bootstrap resamples" in headline  # --resamples
    assert "from 300 item-bootstrap resamples" in (report / "unit.md").read_text()
    assert r"GPT-2 - unigram & again - unigram \\" in (report / "headline.tex").read_text()
    paired = out["report"]["paired"]
    assert list(paired) == ["GPT-2 - unigram", "again - unigram"]
    assert paired["again - unigram"]["blimp/accuracy"]["difference"] == 0.0
    assert paired["again - unigram"]["blimp/accuracy"]["p_value"] == 1.0
    unit = (report / "unit.md").read_text()
    assert "blimp/subject_verb_agreement/toy_agreement/accuracy" in unit
    assert "blimp/subject_verb_agreement/accuracy |" not in unit  # phenomena not chosen
    assert "syntaxgym/Agreement/number_src/accuracy" in unit
    for label in ("unigram", "GPT-2", "again"):  # each progress line names its model
        assert f"synlm evaluate-syntax: {label}: blimp: 9/9 sentences" in err
        assert f"synlm evaluate-syntax: {label}: syntaxgym: 4/4 sentences" in err
    # the stderr table: each value with the headline table's interval, full row names
    with (report / "headline.csv").open() as rows:
        csv_row = next(row for row in csv.DictReader(rows)
                       if row["measure"] == "blimp/in_vocabulary_accuracy")
    shown = (f"{float(csv_row['unigram']):.4f} [{float(csv_row['unigram low']):.4f}, "
             f"{float(csv_row['unigram high']):.4f}] (n={csv_row['unigram n']})")
    assert shown == "0.6667 [0.5000, 1.0000] (n=4)"
    row = next(line for line in err.splitlines() if "blimp/in_vocabulary_accuracy" in line)
    assert row.split("│")[2].strip() == shown
    assert "(300 resamples), as the report's headline table" in err
    assert str(tmp_path) not in err  # labels, never paths
    seeds, _ = evaluate(capsys, "--ckpt_path", str(ckpt), str(ckpt), "--hf", str(gpt2),
                        "--label", "unigram", "unigram", "GPT-2", "--report",
                        str(tmp_path / "seeds"), *common)
    assert seeds["models"]["unigram"]["models"] == [str(ckpt), str(ckpt)]
    assert seeds["models"]["unigram"]["headline"]["n_models"] == 2
    assert "| unigram (2 seeds) | GPT-2 | GPT-2 - unigram |" in \
        (tmp_path / "seeds" / "headline.md").read_text()
    defaults, _ = evaluate(capsys, "--hf", str(gpt2), "--ckpt_path", str(ckpt), *common)
    assert list(defaults["models"]) == ["gpt2-local", "unigram"]


@pytest.mark.parametrize(("args", "message"), [
    (["--ckpt_path", "a.ckpt", "--hf", "m", "--label", "one"],
     "--label: 1 labels for 2 models (1 --ckpt_path, 1 --hf); give one label a model"),
    (["--ckpt_path", "a.ckpt", "--label", ""], "--label: label 1 is empty"),
    (["--ckpt_path", "a.ckpt", "--resamples", "300"], "--resamples: the bootstrap behind "
     "--report's tables; add --report DIR"),
    (["--ckpt_path", "a.ckpt", "--units", "suite"], "--units: the rows of --report's unit "
     "table; add --report DIR"),
    (["--ckpt_path", "a.ckpt", "--benchmark", "blimp", "--report", "r", "--units", "suite"],
     "--units suite: a unit of syntaxgym, which is not scored here; add it to --benchmark, "
     "or choose among phenomenon, paradigm"),
    (["--ckpt_path", "a.ckpt", "--config", "c.yaml"], "--config scores a config's untrained "
     "models alone"),
    (["--benchmark", "blimp"], "give the models to score: --ckpt_path RUN and --hf MODEL"),
    (["--ckpt_path", "a.ckpt", "--hf", "m", "--sentences", "s.txt", "--surprisals", "s.tsv"],
     "--sentences: the surprisals of one model"),
])
def test_bad_labels_units_and_mixes_are_one_line(capsys, args, message, tmp_path,
                                                monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.txt").write_text("the dog barks\n")  # a readable --sentences file
    assert run_cli(["evaluate-syntax", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
