"""ROCStories and WMT News: files, the staged fallback, stories as context and ending,
checksummed downloads, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_stories
from synlm.data.datamodule import SynLMDataModule
from synlm.data.files import CorpusError, RemoteFile, git_blob_of
from synlm.data.generation_corpora import ROCStories, WMTNews


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    write_stories(tmp_path / "rocstories" / "ROCStories_dev.csv", 6)
    write_stories(tmp_path / "rocstories" / "ROCStories_test.csv", 3, start=100)
    news = tmp_path / "emnlp2017_news"
    news.mkdir()
    (news / "valid.txt").write_text("".join(f"The market rose {i} % .\n" for i in range(5)))
    (news / "test.txt").write_text("Shares fell .\nIt ' s late .\n")
    return tmp_path


def test_staged_rocstories_trains_on_dev_and_keeps_test(data_dir: Path) -> None:
    corpus = ROCStories(str(data_dir), staged=True, held_out=2)
    train, valid, test = (corpus.sentences(s) for s in ("train", "valid", "test"))
    assert [len(train), len(valid), len(test)] == [4, 2, 3]
    story = "[MALE] woke up 0 . he ate . he ran . it rained . he slept 0 ."
    assert " ".join(train[0].words) == story
    assert valid[-1].words[3] == "5" and test[0].words[3] == "100"  # dev's tail; test untouched
    assert corpus.gold == frozenset()  # no parser, no dependency gold


def test_stories_split_context_and_ending(data_dir: Path) -> None:
    story = ROCStories(str(data_dir), staged=True, held_out=2).stories("test")[1]
    assert " ".join(story.context) == "[MALE] woke up 101 . he ate . he ran . it rained ."
    assert " ".join(story.ending) == "he slept 101 ."
    with pytest.raises(CorpusError, match="only the test split"):
        ROCStories(str(data_dir), staged=True).stories("valid")


def test_missing_train_file_names_the_staged_fallback(data_dir: Path) -> None:
    with pytest.raises(CorpusError, match=r"missing .*ROCStories_train\.csv.*staged: true"):
        ROCStories(str(data_dir)).sentences("train")
    with pytest.raises(CorpusError, match=r"missing .*emnlp2017_news/train\.txt"):
        WMTNews(str(data_dir)).sentences("train")


def test_bad_story_file_names_file_and_line(data_dir: Path) -> None:
    bad = data_dir / "rocstories" / "ROCStories_test.csv"
    bad.write_text("sentence1,sentence2\na,b\n")
    with pytest.raises(CorpusError, match=r"ROCStories_test\.csv:1: expected a ROCStories "
                                          "header.*missing sentence3"):
        ROCStories(str(data_dir), staged=True).sentences("test")
    write_stories(bad, 2)
    bad.write_text(bad.read_text().replace("he ate .", "", 1))
    with pytest.raises(CorpusError, match=r"ROCStories_test\.csv:2:sentence2: empty sentence"):
        ROCStories(str(data_dir), staged=True).sentences("test")


def test_staged_news_through_the_datamodule(data_dir: Path, tmp_path: Path) -> None:
    dm = SynLMDataModule(WMTNews(str(data_dir), staged=True, held_out=1), mode="sentence",
                         cache_dir=str(tmp_path / "cache"))
    assert [len(dm.sentences(s)) for s in ("train", "valid", "test")] == [4, 1, 2]
    assert dm.vocab.encode(["'", "Shares"]) != [dm.vocab.unk_id] * 2  # test words in the vocab
    key = dm.corpus.cache_key()
    assert "staged1" in key and key != WMTNews(str(data_dir), staged=True).cache_key()


def test_download_checks_sha256_or_git_blob(tmp_path: Path) -> None:
    source = tmp_path / "remote.txt"
    source.write_text("one line\n")
    blob = git_blob_of(source)
    assert blob == "e3c0674801dab4e79d2b763c3909bb53b082ef48"  # `git hash-object`
    got = RemoteFile("a.txt", source.as_uri(), git_blob=blob).fetch(tmp_path / "a" / "a.txt")
    assert got.read_text() == "one line\n"
    with pytest.raises(CorpusError, match="git blob .*, expected 0000"):
        RemoteFile("b.txt", source.as_uri(), git_blob="0" * 40).fetch(tmp_path / "b" / "b.txt")
    assert not (tmp_path / "b" / "b.txt").exists()  # nothing half-written
