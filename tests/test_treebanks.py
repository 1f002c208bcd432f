"""Treebank corpora: PTB-Concat-Syn alignment, PTB-/CTB-Sepsent, UD, WikiText-2 with parses;
errors name the paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from staged import staged
from synlm.data.files import CorpusError
from synlm.data.treebanks import (
    CTBSepsent,
    ParsedWikiText2,
    PTBConcatSyn,
    PTBSepsent,
    Treebank,
    UDTreebank,
    mikolov_tokens,
    unkify,
)
from synlm.syntax import build_targets, read_trees

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"


def test_mikolov_normalisation():
    tree = read_trees(FIXTURES / "sample.mrg")[2][0]
    keep, tokens = mikolov_tokens(tree)
    assert tokens == ["acme", "corp.", "'s", "revenue", "rose", "N", "N", "to", "$", "N",
                      "million"]
    assert len(keep) == len(tokens)


def test_ptb_concat_syn_with_a_full_wsj_dir():
    corpus = PTBConcatSyn(data_dir=str(FIXTURES), treebank=str(FIXTURES / "wsj"))
    train = corpus.sentences("train")
    assert [s.tree is not None for s in train] == [False] + [True] * 4 + [False] + [True] * 10
    assert train[1].words == train[1].tree.leaves()
    assert train[1].words[:4] == ["the", "old", "miller", "sold"]
    report = corpus.alignment_report("train")
    assert (report.n_trees, report.aligned, report.unaligned) == (14, 14, [])
    test = corpus.sentences("test")
    assert all(s.tree is not None for s in test)
    # valid: one line differs from its tree ("bad" for "good"), one tree has no line at all
    corpus.sentences("valid")
    report = corpus.alignment_report("valid")
    assert report.aligned == 1 and len(report.unaligned) == 2
    assert report.unaligned[0] == (
        f"{FIXTURES}/wsj/21/wsj_2101.mrg:2: no identical line; closest "
        f"{FIXTURES}/ptb/ptb.valid.txt:2 has 'bad' at word 5, expected 'good'")
    targets = build_targets(train, span_window=4)
    assert targets.distance_mask.sum() == sum(len(s.words) + 1 for s in train if s.tree)


def test_ptb_concat_syn_strict_mismatch_is_one_line_error():
    corpus = PTBConcatSyn(data_dir=str(FIXTURES), treebank=str(FIXTURES / "wsj"), strict=True)
    assert len(corpus.sentences("test")) == 3
    with pytest.raises(CorpusError) as err:
        corpus.sentences("valid")
    assert str(err.value).startswith(f"{FIXTURES}/wsj/21/wsj_2101.mrg:2: no identical line")
    assert "(2 of 3 trees did not align" in str(err.value) and "\n" not in str(err.value)


def test_ptb_concat_syn_missing_files(tmp_path):
    with pytest.raises(CorpusError, match=r"missing .*ptb\.train\.txt.*SYNLM_DATA_DIR"):
        PTBConcatSyn(data_dir=str(tmp_path)).sentences("train")
    (tmp_path / "ptb").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "ptb" / f"ptb.{split}.txt").write_text(" a b \n")
    with pytest.raises(CorpusError) as err:
        PTBConcatSyn(data_dir=str(tmp_path)).sentences("train")
    assert str(err.value) == nltk_sample_missing("ptb_syn", tmp_path)


def nltk_sample_missing(what: str, data_dir: Path) -> str:
    """The line a missing NLTK WSJ sample under ``data_dir`` is: how to fetch it, and where."""
    path = data_dir / "nltk_treebank" / "treebank.zip"
    return (f"{what}: missing {path}; fetch NLTK's WSJ sample with `python -m nltk.downloader "
            f"-d DIR treebank` and copy DIR/corpora/treebank.zip to {path} "
            "(nltk_treebank/treebank.zip under SYNLM_DATA_DIR, or under data_dir)")


def test_a_missing_nltk_sample_says_how_to_fetch_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """configs/data/nltk_sample_trees.yaml's Treebank without the file: the library's
    error, and the command's one line; another missing path says only that it is missing."""
    with pytest.raises(CorpusError) as err:
        Treebank(data_dir=str(tmp_path)).sentences("train")
    assert str(err.value) == nltk_sample_missing("Treebank", tmp_path)
    with pytest.raises(CorpusError, match="Treebank: missing .*mine.mrg; point data_dir"):
        Treebank(data_dir=str(tmp_path), path="mine.mrg").sentences("train")
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path))
    assert run_cli(["fit", "--config", "rnng.yaml", "--config", "data/nltk_sample_trees.yaml",
                    "--trainer.default_root_dir", str(tmp_path / "runs")]) == 2
    assert capfd.readouterr().err.strip() == \
        "synlm: error: " + nltk_sample_missing("Treebank", tmp_path)


def test_ptb_sepsent():
    corpus = PTBSepsent(data_dir=str(FIXTURES), treebank=str(FIXTURES / "wsj"))
    train = corpus.sentences("train")
    assert len(train) == 12 and len(corpus.sentences("valid")) == 1  # 02 + 21, 22
    first = train[0]
    assert first.words[0] == "The" and first.words[-1] == "."  # kept: seen twice, punctuation
    assert first.words[1:3] == ["UNK-LC", "UNK-LC-er"]  # old, miller: singletons
    assert first.tree.leaves() == first.words
    assert corpus.cache_key().startswith("ptb_sepsent-")


def test_unkify_classes():
    known = {"apple"}
    assert unkify("apple", known) == "apple"
    assert unkify("Apple", known) == "UNK-INITC-KNOWNLC"
    assert unkify("IBM", known) == "UNK-CAPS"
    assert unkify("1989", known) == "UNK-NUM"
    assert unkify("walking", known) == "UNK-LC-ing"
    assert unkify("well-known", known) == "UNK-LC-DASH"
    assert unkify("cats", known) == "UNK-LC-s"


def test_ctb_sepsent():
    corpus = CTBSepsent(data_dir=str(FIXTURES))
    train = corpus.sentences("train")
    assert [s.words for s in train] == [["上海", "<unk>", "开发", "<unk>", "。"],
                                        ["上海", "<unk>", "开发", "<unk>", "。"]]
    assert train[0].source.endswith("chtb_0001.fid:5")
    assert corpus.sentences("test")[0].words == ["<unk>", "<unk>", "。"]
    with pytest.raises(CorpusError, match=r"missing .*nowhere.*LDC2005T01.*SYNLM_DATA_DIR"):
        CTBSepsent(treebank=str(FIXTURES / "nowhere")).sentences("train")


def test_ud_treebank(tmp_path):
    corpus = UDTreebank(files={"train": str(FIXTURES / "sample.conllu")})
    s1, _ = corpus.sentences("train")
    assert s1.heads == [2, 3, 0, 3, 3]
    with pytest.raises(CorpusError, match=r"missing .*en_ewt-ud-dev\.conllu.*UD_English-EWT"):
        UDTreebank(data_dir=str(tmp_path), language="en").sentences("valid")
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tA\n\n")
    with pytest.raises(CorpusError, match=r"bad\.conllu:1: expected"):
        UDTreebank(files={"train": str(bad)}).sentences("train")


def test_real_nltk_sample_aligns():
    staged("ptb", "ptb.train.txt")
    corpus = PTBConcatSyn(data_dir=str(staged("nltk_treebank", "treebank.zip").parent.parent))
    train = corpus.sentences("train")
    report = corpus.alignment_report("train")
    assert report.n_trees == 3914 and report.aligned >= 3900
    assert train[0].tree is None  # Mikolov's fake vocabulary line
    assert train[1].tree is not None and train[1].words[0] == "pierre"


def _wikitext(root: Path, trees: dict[str, str]) -> ParsedWikiText2:
    text = {"train": " = Title = \n\n the cat sat . It ran .\n",
            "valid": " a dog\n", "test": " a dog\n"}
    (root / "wikitext-2" / "trees").mkdir(parents=True)
    for split, lines in text.items():
        (root / "wikitext-2" / f"{split}.txt").write_text(lines)
        (root / "wikitext-2" / "trees" / f"{split}.trees").write_text(trees.get(split, lines))
    return ParsedWikiText2(data_dir=str(root))


def test_parsed_wikitext2_reads_line_aligned_parses(tmp_path):
    paragraph = "(ROOT (S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .)) (S (NP (PRP It)) " \
                "(VP (VBD ran)) (. .)))"
    corpus = _wikitext(tmp_path, {"train": f"\n\n{paragraph}\n",
                                  "valid": "(NP (DT a) (NN dog))\n",
                                  "test": "(NP (DT a) (NN dog))\n"})
    train = corpus.sentences("train")
    assert [s.tree is not None for s in train] == [False, False, True]
    assert train[2].tags == ["DT", "NN", "VBD", ".", "PRP", "VBD", "."]
    assert "constituency" in corpus.gold
    bad = _wikitext(tmp_path / "bad", {"valid": "(NP (DT a) (NN cat))\n"})
    with pytest.raises(CorpusError, match=r"valid.trees:1: the tree's 2 leaves are not the 2 "
                                          r"words of text line 1"):
        bad.sentences("valid")
    short = _wikitext(tmp_path / "short", {"train": "(X (Y a))\n"})
    with pytest.raises(CorpusError, match=r"train.trees: 1 lines for the 3 lines"):
        short.sentences("train")
