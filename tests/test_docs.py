"""The documentation site builds with ``mkdocs build --strict`` (every page in the nav, every
link and anchor resolving, the API pages rendered from the docstrings), its CLI page holds the
``--help`` of every subcommand, generated from the parsers by ``docs/hooks.py``, and the API
pages document the model. mkdocs is in the dev extra: without it this fails."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("fit", "validate", "test", "predict", "parse", "evaluate-syntax", "export-hf",
               "plot", "generate", "evaluate-generation", "annotate", "cp")


def page_text(site: Path, page: str) -> str:
    """The text of a built page, tags removed."""
    return html.unescape(re.sub(r"<[^>]+>", "", (site / f"{page}.html").read_text()))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    return out


def test_cli_page_has_the_help_of_every_subcommand(site: Path) -> None:
    text = page_text(site, "cli")
    for command in SUBCOMMANDS:
        assert f"$ synlm {command} --help" in text, command
        assert re.search(rf"usage: synlm (\[options\] )?{command} ", text), command
    assert "--list-structures" in text  # synlm parse's options, in full
    assert "more lines: synlm fit --help-all" in text  # LightningCLI's, abridged
    assert "$ synlm ls" in text and "AWDLSTM" in text and "quickstart.yaml" in text


def test_links_open_pages_from_a_file_url(site: Path) -> None:
    """Opened without a server (file://), a link to a folder shows its listing: every
    internal link names a page's file."""
    hrefs = re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', (site / "quickstart.html").read_text())
    pages = [h for h in hrefs if not h.startswith(("assets/", "../assets/"))]
    assert "cli.html" in pages and "training.html" in pages
    assert not [h for h in pages if h.endswith("/") or h in ("", ".")], pages


def test_api_pages_document_the_model(site: Path) -> None:
    model = page_text(site, "api/model")
    assert "synlm.SyntaxLM" in model and "synlm.lightning_cli.from_config" in model
    assert "induce" in model  # a method, from its docstring
    for page, name in [("api/backbones", "AWDLSTM"), ("api/heads", "DistanceRankingHead"),
                       ("api/data", "SynLMDataModule"), ("api/data", "CTBSepsent"),
                       ("api/metrics", "ParsingF1"), ("api/callbacks", "NTASGD"),
                       ("api/viz", "distance_bars"), ("api/runs", "resolve_checkpoint"),
                       ("api/tse", "ModelScorer"), ("api/tse", "sg_score")]:
        assert name in page_text(site, page), (page, name)
