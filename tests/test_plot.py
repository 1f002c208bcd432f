"""``synlm plot``: learning curves from Lightning's metrics.csv, checked on the plotted data."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from synlm.commands import plot

# As Lightning's CSVLogger writes them: sorted columns, one row per logging call, empty cells
# for what that call did not log (step rows, validation rows, epoch-end rows).
RUN_A = """\
epoch,step,train/loss_epoch,train/loss_step,val/ppl,val/uf1
0,0,,5.5,,
0,1,,5.0,,
0,1,,,120.0,0.25
0,1,5.2,,,
1,2,,4.5,,
1,3,,4.0,,
1,3,,,80.0,0.35
1,3,4.2,,,
"""
RUN_B = """\
epoch,step,train/loss_epoch,train/loss_step,val/ppl
0,0,,6.0,
0,1,,5.8,
0,1,,,150.0
0,1,5.9,,
"""

TRAIN = "train/loss_epoch"


def write(path: Path, text: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.csv").write_text(text)
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """``runs/a`` (versions 0 and 2 with metrics, 3 without) and ``runs/b/version_0``."""
    write(tmp_path / "runs" / "a" / "version_0", RUN_B)
    a = write(tmp_path / "runs" / "a" / "version_2", RUN_A)
    (tmp_path / "runs" / "a" / "version_3" / "checkpoints").mkdir(parents=True)
    b = write(tmp_path / "runs" / "b" / "version_0", RUN_B)
    return a, b


def test_the_plotted_lines_are_the_csv_values(runs):
    a, b = runs
    loaded = [plot.read_run(a), plot.read_run(b / "metrics.csv")]
    assert [r.name for r in loaded] == ["a/version_2", "b/version_0"]
    fig = plot.figure(loaded, ["val/ppl", "train/loss_epoch", "val/uf1"])
    ppl, loss, uf1 = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["val/ppl", "train/loss_epoch", "val/uf1"]
    assert ppl.lines[0].get_xydata().tolist() == [[1, 120.0], [3, 80.0]]
    assert ppl.lines[1].get_xydata().tolist() == [[1, 150.0]]
    assert loss.lines[0].get_xydata().tolist() == [[1, 5.2], [3, 4.2]]
    assert len(uf1.lines) == 1  # run b logged no val/uf1
    assert uf1.lines[0].get_xydata().tolist() == [[1, 0.25], [3, 0.35]]
    assert [t.get_text() for t in ppl.get_legend().get_texts()] == ["a/version_2",
                                                                    "b/version_0"]
    by_epoch = plot.figure(loaded[:1], ["val/ppl"], x="epoch")
    assert by_epoch.axes[0].lines[0].get_xydata().tolist() == [[0, 120.0], [1, 80.0]]
    assert by_epoch.axes[0].get_xlabel() == "epoch"


def test_a_config_folder_stands_for_its_newest_version_with_metrics(runs, tmp_path):
    a, _ = runs
    assert plot.metrics_file(tmp_path / "runs" / "a") == a / "metrics.csv"
    write(tmp_path / "runs" / "a" / "version_10", RUN_B)  # 10 is newer than 2
    assert plot.read_run(tmp_path / "runs" / "a").name == "a/version_10"
    write(tmp_path / "runs" / "a" / "version_11", "epoch,step,test/ppl\n0,3,90.0\n")
    assert plot.read_run(tmp_path / "runs" / "a").name == "a/version_10"  # a test run


def test_default_metrics_are_validation_and_the_epoch_loss(runs):
    loaded = [plot.read_run(path) for path in runs]
    assert plot.default_metrics(loaded) == ["val/ppl", "val/uf1", "train/loss_epoch"]
    extra = plot.Run("c", Path("c"), ("step", "val/syd_loss", "val/uas", "val/ppl"), ())
    assert plot.default_metrics([extra]) == ["val/ppl", "val/uas"]  # headlines only
    other = plot.Run("d", Path("d"), ("step", "val/syd_loss", TRAIN), ())
    assert plot.default_metrics([other]) == ["val/syd_loss", TRAIN]  # no headline: all val/


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_main_writes_the_picture(runs, tmp_path, capsys, suffix, magic):
    a, b = runs
    output = tmp_path / "out" / f"curves{suffix}"
    assert plot.main([str(a), str(b), "--metrics", "val/ppl", "--output", str(output)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "output": str(output), "runs": ["a/version_2", "b/version_0"], "metrics": ["val/ppl"]}
    assert output.read_bytes().startswith(magic)
    if suffix == ".svg":
        ET.parse(output)  # well-formed


def test_the_default_output_is_beside_the_first_run(runs, capsys):
    a, b = runs
    assert plot.main([str(a.parent), str(b)]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == str(a / "plot.png")
    assert (a / "plot.png").read_bytes().startswith(b"\x89PNG")


def errors(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The message of a failing ``synlm plot``: exit code 2, one line on stderr."""
    assert plot.main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    return captured.err.strip()


def test_errors_are_one_line(runs, tmp_path, capsys):
    a, b = runs
    assert errors(capsys, str(a), str(b), "--metrics", "val/ppl", "val/nope") == \
        "synlm plot: --metrics: no run logged 'val/nope'; they have: train/loss_epoch, " \
        "train/loss_step, val/ppl, val/uf1"
    missing = tmp_path / "runs" / "c"
    assert errors(capsys, str(missing)) == f"synlm plot: no run at {missing}: expected a " \
        "metrics.csv, a run's version_N folder or a config's run folder"
    empty = tmp_path / "runs" / "a" / "version_3"
    assert errors(capsys, str(empty)) == f"synlm plot: {empty} holds no metrics.csv (looked " \
        "in it and in its version_N folders)"
    assert "--output curves.jpg: expected a name ending in .png" in \
        errors(capsys, str(a), "--output", "curves.jpg")
    not_lightning = tmp_path / "other.csv"
    not_lightning.write_text("a,b\n1,2\n")
    assert errors(capsys, str(not_lightning)) == f"synlm plot: {not_lightning} has no 'step' " \
        "column: expected a metrics.csv written by Lightning's CSVLogger"
    broken = write(tmp_path / "runs" / "d" / "version_0", "epoch,step,val/ppl\n0,0,high\n")
    assert errors(capsys, str(broken)) == f"synlm plot: {broken / 'metrics.csv'}:2: expected " \
        "numbers in 'step' and 'val/ppl', found '0' and 'high'"
