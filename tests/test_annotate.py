"""synlm annotate: a spaCy parser trained here on a few hundred UD English EWT sentences with
the shipped training config, run on raw lines and on a ROCStories CSV; CoNLL-U heads reused
from another parse; one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.data.annotation import annotate, read_input
from synlm.data.generation_corpora import ROCStories
from synlm.syntax import read_conllu

#: the first five sentences of EWT's dev split (fixtures/ud_english_ewt/SOURCE.md)
EWT_DEV_HEAD = Path(__file__).parent / "fixtures" / "ud_english_ewt" / "en_ewt-ud-dev.head.conllu"


def ewt(split: str) -> Path:
    """A split of the staged UD English EWT; skips the test when it is absent."""
    return staged("ud_english_ewt", f"en_ewt-ud-{split}.conllu")


def first_sentences(path: Path, n: int) -> str:
    return "\n\n".join(path.read_text(encoding="utf-8").split("\n\n")[:n]) + "\n\n"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """configs/spacy/parser_ewt.cfg, shrunk, trained on 300 EWT training sentences."""
    from spacy.cli.train import train
    from spacy.tokens import DocBin
    from spacy.training.converters import conllu_to_docs

    root = tmp_path_factory.mktemp("spacy")
    for split, n in (("train", 300), ("dev", 50)):
        text = first_sentences(ewt(split), n)
        DocBin(docs=list(conllu_to_docs(text, n_sents=10, no_print=True))).to_disk(
            root / f"{split}.spacy")
    train(REPO_CONFIGS / "spacy" / "parser_ewt.cfg", root / "out", overrides={
        "paths.train": str(root / "train.spacy"), "paths.dev": str(root / "dev.spacy"),
        "training.max_steps": 150, "training.eval_frequency": 150,
        "components.tok2vec.model.encode.width": 48, "components.tok2vec.model.encode.depth": 2,
        "components.parser.model.hidden_width": 32})
    return root / "out" / "model-last"


def uas(gold: list, predicted: list) -> float:
    pairs = [(g, p) for a, b in zip(gold, predicted) for g, p in zip(a.heads, b.heads)]
    return sum(g == p for g, p in pairs) / len(pairs)


def test_annotate_lines_keeps_tokens_and_parses(pipeline: Path, tmp_path: Path) -> None:
    gold = read_conllu(ewt("train"), first_sentences(ewt("train"), 40))
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(s.words) + "\n" for s in gold), encoding="utf-8")
    out = annotate(text, parser="spacy", model=str(pipeline))
    parsed = read_conllu(out)
    assert [s.words for s in parsed] == [s.words for s in gold]  # no re-tokenisation
    assert all(s.heads.count(0) == 1 for s in parsed)  # one sentence, one root, per line
    # 150 steps on 300 sentences learn something: far above attaching to the next word
    right = [type(s)(s.words, heads=[*range(2, len(s.words) + 1), 0]) for s in gold]
    assert uas(gold, parsed) > uas(gold, right) + 0.1
    stamp = out.stat().st_mtime_ns
    assert annotate(text, parser="spacy", model=str(pipeline)) == out  # cached
    assert out.stat().st_mtime_ns == stamp


def test_annotate_rocstories_through_the_cli(pipeline: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "stories.csv"
    csv.write_text("sentence1,sentence2,sentence3,sentence4,sentence5,label\n"
                   "[FEMALE] was hungry .,she made soup .,it was hot .,she waited .,"
                   "she ate it .,1\n", encoding="utf-8")
    out = tmp_path / "stories.conllu"
    assert main(["annotate", "--input", str(csv), "--format", "rocstories", "--model",
                 str(pipeline), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    parsed = read_conllu(out)
    assert [s.words for s in parsed][1] == ["she", "made", "soup", "."]
    assert parsed[0].source.endswith(":1") and len(parsed) == 5


def test_rocstories_story_heads_join_its_sentences_parses(pipeline: Path, tmp_path: Path
                                                         ) -> None:
    """A story's heads: each sentence's parse shifted by the words before it, each of the
    five roots attached to the story's ROOT (0); the corpus then declares dependency gold."""
    stories = tmp_path / "rocstories" / "ROCStories_test.csv"
    stories.parent.mkdir()
    staged_stories = staged("rocstories", "ROCStories_test.csv")
    stories.write_text("".join(staged_stories.read_text(encoding="utf-8").splitlines(True)[:4]),
                       encoding="utf-8")
    corpus = ROCStories(str(tmp_path), staged=True, parser=str(pipeline))
    assert corpus.gold == frozenset({"dependency"})
    unit = corpus.sentences("test")[2]
    parsed = read_conllu(annotate(stories, "rocstories", model=str(pipeline)))[10:15]
    offsets = [0]
    for sentence in parsed[:-1]:
        offsets.append(offsets[-1] + len(sentence.words))
    assert unit.words == [w for s in parsed for w in s.words]
    assert unit.heads == [h + o if h else 0 for s, o in zip(parsed, offsets) for h in s.heads]
    assert unit.heads.count(0) == 5


def test_heads_from_an_existing_conllu_parse(tmp_path: Path) -> None:
    gold_text = EWT_DEV_HEAD.read_text(encoding="utf-8")
    parse = tmp_path / "parse.conllu"
    parse.write_text(gold_text, encoding="utf-8")
    gold = read_conllu(parse)
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(s.words) + "\n" for s in gold), encoding="utf-8")
    out = annotate(text, parser="conllu", conllu=parse)
    assert [s.heads for s in read_conllu(out)] == [s.heads for s in gold]
    text.write_text("a different first line\n" + "".join(" ".join(s.words) + "\n"
                                                          for s in gold[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"parse.conllu:\d+: tokens .* differ from .*text.txt:1"):
        annotate(text, parser="conllu", conllu=parse)


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "blank.txt"
    bad.write_text("a sentence\n\nanother\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank.txt:2: empty line"):
        read_input(bad, "lines")
    csv = tmp_path / "stories.csv"
    csv.write_text("title,sentence1\nx,y\n", encoding="utf-8")
    assert main(["annotate", "--input", str(csv), "--format", "rocstories", "--model",
                 "x"]) == 2
    assert "expected a ROCStories header" in capsys.readouterr().err
    good = tmp_path / "good.txt"
    good.write_text("a sentence\n", encoding="utf-8")
    assert main(["annotate", "--input", str(good), "--model", str(tmp_path / "none")]) == 2
    assert "no spaCy pipeline" in capsys.readouterr().err
    assert main(["annotate", "--input", str(good), "--parser", "conllu"]) == 2
    assert "--parser conllu needs --conllu FILE" in capsys.readouterr().err
