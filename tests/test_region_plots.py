"""SyntaxGym's region figure (``synlm.tse.plots.region_means``, ``region_figure``,
``plot_regions``): drawn from a small table of region surprisals, its lines are the means
computed by hand, its error bars the t intervals computed by hand, a panel a model and a
line a condition; ``evaluate-syntax --report`` draws it for a SyntaxGym run."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from numpy.testing import assert_allclose
from test_evaluate_syntax import evaluate, toy_data, unigram_model

from conftest import fake_models
from synlm.errors import InputError
from synlm.tse import plots

LN2 = math.log(2)
#: Student's t quantiles in closed form: with 2 degrees of freedom t(p) = (2p - 1) /
#: sqrt(2p(1 - p)); with 1 (Cauchy) t(p) = tan(pi (p - 1/2)). 4.3027 and 12.706, as tabled.
T_975_2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)
T_975_1 = math.tan(math.pi * 0.475)


def record(item: int, surprisals: dict[str, dict[str, float]], suite: str = "agr") -> dict:
    """An item record as the benchmark writes it: surprisals in nats."""
    return {"suite": suite, "item": item, "surprisals": {
        condition: {region: bits * LN2 for region, bits in regions.items()}
        for condition, regions in surprisals.items()}}


#: Three items of a suite (surprisals in bits): region 2 of ``match`` 1, 2, 3 (mean 2,
#: s 1); of ``mismatch`` 4, 4, 7 (mean 5, s sqrt 3); region 1 the same in both conditions.
RECORDS = [record(1, {"match": {"1": 2.0, "2": 1.0}, "mismatch": {"1": 2.0, "2": 4.0}}),
           record(2, {"match": {"1": 4.0, "2": 2.0}, "mismatch": {"1": 4.0, "2": 4.0}}),
           record(3, {"match": {"1": 6.0, "2": 3.0}, "mismatch": {"1": 6.0, "2": 7.0}}),
           {"suite": "agr", "item": 4, "no_parse": True},  # no surprisals: left out
           record(1, {"a": {"1": 1.0}}, suite="one_item")]


def test_the_means_and_t_intervals_computed_by_hand() -> None:
    means = plots.region_means(RECORDS)
    assert list(means) == ["agr", "one_item"]
    match, mismatch = means["agr"]["match"], means["agr"]["mismatch"]
    assert match[2].mean == pytest.approx(2.0) and match[2].n == 3
    half = T_975_2 * 1.0 / math.sqrt(3)
    assert (match[2].low, match[2].high) == pytest.approx((2.0 - half, 2.0 + half))
    half = T_975_2 * math.sqrt(3) / math.sqrt(3)
    assert (mismatch[2].low, mismatch[2].high) == pytest.approx((5.0 - half, 5.0 + half))
    assert match[1].mean == mismatch[1].mean == pytest.approx(4.0)
    lone = means["one_item"]["a"][1]  # one item: a mean, no interval
    assert (lone.mean, lone.low, lone.high, lone.n) == (pytest.approx(1.0), None, None, 1)
    two = plots.region_means(RECORDS[:2])["agr"]["match"][2]  # 1 and 2: s = 1/sqrt 2
    assert (two.low, two.high) == pytest.approx((1.5 - T_975_1 * 0.5, 1.5 + T_975_1 * 0.5))
    with pytest.raises(InputError, match="confidence"):
        plots.region_means(RECORDS, confidence=1.5)


def test_the_figure_plots_the_means_and_their_intervals() -> None:
    """A panel a model, a line a condition in the same colour in both, the regions in
    number order under their names, the error bars the intervals."""
    means = plots.region_means(RECORDS)["agr"]
    shifted = plots.region_means([  # every region 1 bit more
        record(r["item"], {c: {k: v / LN2 + 1 for k, v in regions.items()}
                           for c, regions in r["surprisals"].items()}) for r in RECORDS[:3]])["agr"]
    fig = plots.region_figure("agr", {"lstm": means, "rnng": shifted},
                              {1: "subject", 2: "verb"})
    lstm, rnng = fig.axes[:2]
    assert [ax.get_title() for ax in (lstm, rnng)] == ["lstm", "rnng"]
    assert [t.get_text() for t in lstm.get_xticklabels()] == ["subject", "verb"]
    lines = [{line.get_label(): line for line in ax.lines if line.get_label()[0] != "_"}
             for ax in (lstm, rnng)]  # the error bars' caps are unlabelled lines
    assert [list(panel) for panel in lines] == [["match", "mismatch"]] * 2
    match, mismatch = lines[0]["match"], lines[0]["mismatch"]
    # the regions at 0 and 1, each condition's points 0.025 aside
    assert_allclose(match.get_xydata(), [[-0.025, 4.0], [0.975, 2.0]])
    assert_allclose(mismatch.get_xydata(), [[0.025, 4.0], [1.025, 5.0]])
    assert_allclose(lines[1]["match"].get_xydata(), [[-0.025, 5.0], [0.975, 3.0]])
    assert lines[1]["match"].get_color() == match.get_color() != mismatch.get_color()
    bars = [c for c in lstm.collections if c.get_segments()]  # the error bars, by condition
    half = T_975_2 / math.sqrt(3)
    match_bars = sorted((seg[0][0], seg[0][1], seg[1][1]) for seg in bars[0].get_segments())
    assert_allclose(match_bars, [(-0.025, 4.0 - 2 * half, 4.0 + 2 * half),
                                 (0.975, 2.0 - half, 2.0 + half)])
    assert [t.get_text() for t in fig.texts] == ["agr", "region; bars: 95% t intervals over items"]


def test_report_draws_the_region_figure_of_a_syntaxgym_run(capsys, monkeypatch, tmp_path):
    fake_models(monkeypatch, lambda path: unigram_model())
    data = toy_data(tmp_path / "data")
    report = tmp_path / "report"
    out, _ = evaluate(capsys, "--ckpt_path", "a.ckpt", "b.ckpt", "--data-dir", str(data),
                      "--benchmark", "syntaxgym", "--suites", "number_src",
                      "--report", str(report))
    files = {Path(path) for path in out["report"]["files"]}
    assert {report / "regions" / "number_src.png", report / "regions" / "number_src.svg"} <= files
    assert (report / "regions" / "number_src.png").read_bytes()[:4] == b"\x89PNG"
    svg = ET.parse(report / "regions" / "number_src.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
