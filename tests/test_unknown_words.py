"""Berkeley-style unknown-word classes: signatures, the ``classes`` word vocabulary of
``SynLMDataModule(unknown_words="classes")``, its saved forms and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_OVERRIDES
from synlm.catalog import REPO_CONFIGS
from synlm.data.corpora import PTB, TextFiles
from synlm.data.datamodule import SynLMDataModule
from synlm.data.subwords import TrainedBPE, load_vocab
from synlm.data.unknown_words import is_signature, unkify
from synlm.data.vocab import Vocab

KNOWN = {"apple", "walk"}


@pytest.mark.parametrize(("word", "signature"), [
    ("apple", "apple"),                     # known: itself
    ("Apple", "UNK-INITC-KNOWNLC"),         # capitalised, lowercase form known
    ("Banana", "UNK-INITC"),                # capitalised
    ("IBM", "UNK-CAPS"),                    # all caps
    ("3Com", "UNK-CAPS-NUM"),               # caps after a digit
    ("1989", "UNK-NUM"),                    # digits
    ("F-16", "UNK-INITC-NUM-DASH"),         # capital, digits, dash
    ("well-known", "UNK-LC-DASH"),          # dash: no suffix
    ("walked", "UNK-LC-ed"),
    ("walking", "UNK-LC-ing"),
    ("cats", "UNK-LC-s"),
    ("glass", "UNK-LC"),                    # -ss is no plural
    ("quickly", "UNK-LC-ly"),
    ("city", "UNK-LC"),                     # too short for a suffix
    (",", "UNK"),
    ("\u216b", "UNK-CAPS"),                # a Roman numeral: upper case, no letter
    ("3\u217b", "UNK-NUM"),                # lower case counted among letters only
    ("\u217b", "UNK"),
])
def test_signatures(word: str, signature: str) -> None:
    assert unkify(word, KNOWN) == signature
    assert is_signature(signature) == (word not in KNOWN)


def test_unkify_is_still_importable_from_treebanks() -> None:
    from synlm.data import treebanks

    assert treebanks.unkify is unkify


def test_only_signatures_are_signatures() -> None:
    assert not any(map(is_signature, ["<unk>", "UNKNOWN", "unk-lc", "UNK-LC-xyz", "UNK-"]))


def write(folder: Path, lines: dict[str, str]) -> dict[str, str]:
    """A ``TextFiles`` corpus's files: each split's text written under ``folder``."""
    for split, text in lines.items():
        (folder / f"{split}.txt").write_text(text)
    return {split: str(folder / f"{split}.txt") for split in lines}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """A tiny corpus of raw words: ``cat``, ``barked`` and ``loudly`` are train singletons."""
    train = "the dog walked .\nthe cat walked .\nthe dog barked loudly .\n"
    return write(tmp_path, {"train": train, "valid": "the cat jumped .\n",
                            "test": "the Zebra jumped 42 .\n"})


def data(files: dict[str, str], tmp_path: Path, **kw) -> SynLMDataModule:
    return SynLMDataModule(TextFiles(files), cache_dir=str(tmp_path / "cache"), **kw)


def words(dm: SynLMDataModule, split: str) -> list[str]:
    """The split's stream as the model reads it, words decoded."""
    return dm.vocab.decode(dm.stream(split)[0]["tokens"].tolist())


def test_train_singletons_become_their_classes(files: dict[str, str], tmp_path: Path) -> None:
    dm = data(files, tmp_path, unknown_words="classes")
    assert dm.min_count == 2
    assert dm.vocab.itos == ["<eos>", "the", "dog", "walked", ".", "UNK-LC", "UNK-LC-ed",
                             "UNK-LC-ly", "<unk>"]  # training words only, in first appearance
    assert words(dm, "train")[5:15] == ["<eos>", "the", "UNK-LC", "walked", ".",
                                        "<eos>", "the", "dog", "UNK-LC-ed", "UNK-LC-ly"]
    # valid/test: a word unseen in training reads as its class, or <unk> if that is unseen too
    assert words(dm, "valid") == ["<eos>", "the", "UNK-LC", "UNK-LC-ed", ".", "<eos>"]
    assert words(dm, "test") == ["<eos>", "the", "<unk>", "UNK-LC-ed", "<unk>", ".", "<eos>"]
    # raw text a user scores: the same
    assert dm.vocab.decode(dm.vocab.encode(["dog", "sprinted", "Zebra"])) == [
        "dog", "UNK-LC-ed", "<unk>"]


def test_classes_already_in_the_text_stay_themselves(tmp_path: Path) -> None:
    """A corpus that made its own classes (PTBSepsent's text) keeps them as they are."""
    files = write(tmp_path, {"train": "the UNK-INITC-NUM saw it .\nthe dog saw it .\n",
                             "valid": "the dog .\n", "test": "the UNK-CAPS-DASH .\n"})
    vocab = data(files, tmp_path, unknown_words="classes").vocab
    assert "UNK-INITC-NUM" in vocab.stoi and "dog" not in vocab.stoi  # seen once each
    assert vocab.decode(vocab.encode(["UNK-CAPS-DASH", "F-16", "dog"])) == [
        "<unk>", "<unk>", "UNK-LC"]  # a class unseen in training is <unk>, not classed again


def test_min_count_raises_the_threshold(files: dict[str, str], tmp_path: Path) -> None:
    vocab = data(files, tmp_path, unknown_words="classes", min_count=3).vocab
    assert vocab.itos == ["<eos>", "the", "UNK-LC", "UNK-LC-ed", ".", "UNK-LC-ly", "<unk>"]


def test_is_unknown(files: dict[str, str], tmp_path: Path) -> None:
    classes = data(files, tmp_path, unknown_words="classes").vocab
    unknown = {classes.stoi[w] for w in ("UNK-LC", "UNK-LC-ed", "UNK-LC-ly", "<unk>")}
    assert classes.unknown_ids == unknown
    assert [classes.is_unknown(i) for i in classes.encode(["the", "cat", "Zebra", "."])] == [
        False, True, True, False]
    plain = data(files, tmp_path).vocab
    assert plain.unknown_ids == {plain.unk_id}
    assert [plain.is_unknown(i) for i in plain.encode(["cat", "zzz"])] == [False, True]
    assert not Vocab(["<eos>", "a"], unk=None).unknown_ids  # no unknown token: none unknown


def test_classes_survive_checkpoints_and_the_cache(files: dict[str, str],
                                                   tmp_path: Path) -> None:
    vocab = data(files, tmp_path, unknown_words="classes").vocab
    raw = ["the", "Zebra", "sprinted", "cat"]
    for copy in (load_vocab(vocab.to_saved()), load_vocab(json.loads(json.dumps(
            vocab.to_saved())))):
        assert (copy.itos, copy.unknown_words) == (vocab.itos, "classes")
        assert copy.encode(raw) == vocab.encode(raw)
    vocab.save(tmp_path / "v.json")
    loaded = Vocab.load(tmp_path / "v.json")
    assert (loaded.itos, loaded.unknown_words, loaded.encode(raw)) == (
        vocab.itos, "classes", vocab.encode(raw))
    cached = data(files, tmp_path, unknown_words="classes").vocab  # read from the cache
    assert (cached.itos, cached.unknown_words) == (vocab.itos, "classes")


def test_default_is_the_vocabulary_of_before(files: dict[str, str], tmp_path: Path) -> None:
    dm = data(files, tmp_path)
    every = [s.words for split in ("train", "valid", "test")
             for s in TextFiles(files).sentences(split)]
    assert dm.vocab.itos == Vocab.build(every).itos == [
        "<eos>", "the", "dog", "walked", ".", "cat", "barked", "loudly", "jumped", "Zebra", "42",
        "<unk>"]
    assert dm.unknown_words == "unk" and dm.min_count is None
    assert dm.vocab.to_saved() == dm.vocab.itos  # checkpoints store a plain list, as before
    assert load_vocab(dm.vocab.itos).unknown_words == "unk"  # an old checkpoint's list
    assert dm.cache_key == dm.corpus.cache_key()
    cached = tmp_path / "cache" / dm.corpus.cache_key() / "vocab.json"
    assert json.loads(cached.read_text()) == dm.vocab.itos


def test_caches_never_mix(files: dict[str, str], tmp_path: Path) -> None:
    modules = [data(files, tmp_path), data(files, tmp_path, unknown_words="classes"),
               data(files, tmp_path, unknown_words="classes", min_count=3)]
    assert len({dm.cache_key for dm in modules}) == 3
    assert len({tuple(dm.vocab.itos) for dm in modules}) == 3
    folder = tmp_path / "cache" / modules[0].corpus.cache_key()
    assert sorted(p.name for p in folder.glob("vocab*.json")) == [
        "vocab-classes-2.json", "vocab-classes-3.json", "vocab.json"]


@pytest.mark.parametrize(("options", "names"), [
    ({"unknown_words": "classes", "subwords": TrainedBPE(300)}, "data.subwords"),
    ({"unknown_words": "classes", "vocab_file": "v.json"}, "data.vocab_file"),
    ({"unknown_words": "classes", "min_count": 1}, "data.min_count"),
    ({"min_count": 3}, "data.min_count"),
    ({"unknown_words": "words"}, "data.unknown_words"),
    ({"unknown_words": "berkeleyrule"}, "vocab.json"),
    ({"unknown_words": "berkeleyrule2"}, "vocab.json"),
])
def test_senseless_settings_are_one_line(files: dict[str, str], tmp_path: Path,
                                         options: dict, names: str) -> None:
    with pytest.raises(ValueError, match=names) as err:
        data(files, tmp_path, **options)
    assert "\n" not in str(err.value) and "data.unknown_words" in str(err.value)


def test_a_corpus_with_unk_in_its_text_is_refused(tmp_path: Path) -> None:
    for name in ("train", "valid", "test"):  # Mikolov's PTB: rare words already <unk>
        path = tmp_path / "ptb" / f"ptb.{name}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(" the <unk> said N \n")
    dm = SynLMDataModule(PTB(data_dir=str(tmp_path)), unknown_words="classes",
                         cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"data.unknown_words: classes needs raw words.*PTB")\
            as err:
        dm.vocab  # noqa: B018
    assert "\n" not in str(err.value)


def test_the_cli_takes_the_option() -> None:
    from synlm.lightning_cli import from_config

    model = from_config(REPO_CONFIGS / "quickstart.yaml",
                        [*TINY_OVERRIDES, "--data.unknown_words=classes", "--data.min_count=10"])
    dm = model.datamodule
    assert (dm.unknown_words, dm.min_count) == ("classes", 10)
    assert {"UNK-LC", "UNK-LC-ed"} <= set(dm.vocab.itos)  # doctor, waited
    assert "doctor" not in dm.vocab.stoi  # seen 5 times in training
    assert model.hparams.vocab_size == len(dm.vocab)
