"""Action mode of ``SynLMDataModule`` (RNNG training data): batches hold the oracle's action ids
and the vocabulary's word ids, training batches hold sentences of similar length and are
redrawn per epoch, resumable and split across ranks; every treebank corpus serves them; bad
trees and settings are one-line errors naming file and line or the setting."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from nltk import Tree

from staged import staged
from synlm.data.batching import BucketLoader, collate_actions
from synlm.data.corpora import PTB, TextFiles
from synlm.data.datamodule import SynLMDataModule
from synlm.data.files import CorpusError
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.treebanks import (
    CTBSepsent,
    ParsedWikiText2,
    PTBConcatSyn,
    PTBSepsent,
    Treebank,
)
from synlm.data.unknown_words import word_class
from synlm.errors import InputError, SettingError
from synlm.outputs import ActionBatch
from synlm.syntax import read_trees
from synlm.syntax.actions import ORDERS, ActionVocab, oracle, tree_of, without_preterminals
from synlm.syntax.trees import base_label

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"


def synthetic(**kw) -> SyntheticTreebank:
    return SyntheticTreebank(n_train=300, n_valid=40, n_test=40, **kw)


def actions_dm(corpus=None, **kw) -> SynLMDataModule:
    return SynLMDataModule(corpus or synthetic(), mode="actions", **kw)


def at_epoch(dm: SynLMDataModule, epoch: int, rank: int = 0, world: int = 1) -> SynLMDataModule:
    """``dm`` as a trainer at ``epoch`` on rank ``rank`` of ``world`` would see it."""
    dm.trainer = SimpleNamespace(current_epoch=epoch, global_rank=rank, world_size=world)
    return dm


def positions(dm: SynLMDataModule, batches: list[ActionBatch]) -> list[list[int]]:
    """Each batch as the positions of its sentences among the split's action items."""
    index = {id(item.sentence): i for i, item in enumerate(dm.action_items("train"))}
    return [[index[id(s)] for s in batch.sentences] for batch in batches]


def round_trip(dm: SynLMDataModule, split: str) -> int:
    """Every action item of ``split`` builds its sentence's tree back over its words; returns
    how many there are."""
    items = dm.action_items(split)
    for item in items:
        actions = dm.action_vocab.decode(item.actions.tolist())
        assert tree_of(actions, item.sentence.words, dm.action_order) == \
            without_preterminals(item.sentence.tree)
    return len(items)


# --- what a batch holds ----------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
def test_batches_hold_the_oracles_action_ids_and_the_vocabularys_word_ids(order: str) -> None:
    dm = actions_dm(action_order=order, eval_batch_size=7)
    vocab, actions = dm.vocab, dm.action_vocab
    assert actions.itos == ["SHIFT", "REDUCE", "NT(NP)", "NT(PP)", "NT(S)", "NT(SBAR)",
                            "NT(VP)"]
    loader = dm.val_dataloader()
    batch = next(iter(loader))
    sentences = dm.sentences("valid")[:7]
    assert isinstance(batch, ActionBatch) and batch.sentences == sentences
    for row, s in enumerate(sentences):
        n, ids = len(s.words), actions.encode(oracle(s.tree, order))
        assert batch.word_lengths[row] == n and batch.action_lengths[row] == len(ids)
        assert batch.words[row, :n].tolist() == vocab.encode(s.words)  # no <eos>
        assert (batch.words[row, n:] == 0).all()
        assert batch.actions[row, : len(ids)].tolist() == ids
        assert (batch.actions[row, len(ids):] == -1).all()
        assert tree_of(actions.decode(ids), s.words, order) == without_preterminals(s.tree)
    assert batch.words.shape == (7, max(len(s.words) for s in sentences))
    assert batch.n_words == batch.word_lengths.sum() and batch.n_actions == \
        batch.action_lengths.sum()
    assert sum(b.n_words for b in loader) == sum(len(s.words) for s in dm.sentences("valid"))
    train = next(iter(dm.train_dataloader()))  # training rows hold the same ids
    for row, s in enumerate(train.sentences):
        ids = actions.encode(oracle(s.tree, order))
        assert train.actions[row, : len(ids)].tolist() == ids
        assert train.words[row, : len(s.words)].tolist() == vocab.encode(s.words)


def test_the_action_vocabulary_is_the_training_splits_and_saves_as_a_list() -> None:
    dm = actions_dm()
    assert dm.action_vocab is dm.action_vocab
    saved = dm.action_vocab.to_saved()
    assert saved == dm.action_vocab.itos and isinstance(saved, list)
    assert ActionVocab.from_saved(saved).itos == saved
    with pytest.raises(InputError, match=r"a saved action vocabulary is SHIFT, REDUCE, then "
                                         r"NT\(X\) by sorted label") as err:
        ActionVocab.from_saved(["SHIFT", "REDUCE", "NT(VP)", "NT(NP)"])
    assert "\n" not in str(err.value)


def test_a_batch_moves_its_tensors_and_keeps_its_sentences() -> None:
    batch = next(iter(actions_dm(eval_batch_size=3).val_dataloader()))
    moved = batch.to("meta")
    assert moved.words.device.type == "meta" and moved.actions.device.type == "meta"
    assert moved.sentences is batch.sentences and moved.n_actions == batch.n_actions


def test_collate_pads_words_with_zero_and_actions_with_minus_one() -> None:
    dm = actions_dm()
    items = dm.action_items("valid")[:2]
    batch = collate_actions(items)
    assert batch.words.dtype == batch.actions.dtype == torch.long
    for row, item in enumerate(items):
        assert batch.words[row].tolist() == [*item.words, *[0] * (batch.words.size(1)
                                                                   - len(item.words))]
        assert batch.actions[row].tolist() == [*item.actions, *[-1] * (batch.actions.size(1)
                                                                       - len(item.actions))]


# --- training batches ------------------------------------------------------------------------

def test_training_batches_hold_sentences_of_similar_length() -> None:
    dm = actions_dm(batch_size=16)
    batches = list(dm.train_dataloader())
    items = dm.action_items("train")
    order = positions(dm, batches)
    assert sorted(i for batch in order for i in batch) == list(range(len(items)))  # once each
    assert [len(batch) for batch in order].count(16) == len(items) // 16
    lengths = [batch.action_lengths for batch in batches]
    spread = sum(int(ls.max() - ls.min()) for ls in lengths)
    everything = torch.cat(lengths)
    # cut from the split sorted by length: the batches' ranges add up to no more than the split's
    assert spread <= int(everything.max() - everything.min())
    assert max(float(ls.max() / ls.min()) for ls in lengths) < 1.5 < \
        float(everything.max() / everything.min())
    shortest = [int(ls.min()) for ls in lengths]
    assert shortest != sorted(shortest)  # the batches in random order


def test_max_tokens_bounds_padded_actions() -> None:
    dm = actions_dm(max_tokens=200)
    batches = list(dm.train_dataloader())
    assert all(b.actions.numel() <= 200 for b in batches)
    assert all(b.actions.numel() == b.actions.size(0) * int(b.action_lengths.max())
               for b in batches)
    assert sorted(i for batch in positions(dm, batches) for i in batch) == \
        list(range(len(dm.action_items("train"))))
    assert len({b.actions.size(0) for b in batches}) > 1  # shorter sentences: more rows
    with pytest.raises(InputError, match=r"synthetic:train:\d+: \d+ actions, more than "
                                         r"data.max_tokens=20; raise max_tokens or set "
                                         r"data.max_length"):
        actions_dm(max_tokens=20).train_dataloader()


def test_max_length_drops_long_training_sentences_only() -> None:
    dm = actions_dm(max_length=8, batch_size=8, eval_batch_size=40)
    train = list(dm.train_dataloader())
    assert max(int(b.word_lengths.max()) for b in train) <= 8
    assert sum(b.words.size(0) for b in train) == sum(
        len(s.words) <= 8 for s in dm.sentences("train"))
    assert int(next(iter(dm.val_dataloader())).word_lengths.max()) > 8


def same(a: list[ActionBatch], b: list[ActionBatch]) -> bool:
    return len(a) == len(b) and all(torch.equal(x.actions, y.actions) and
                                    torch.equal(x.words, y.words) for x, y in zip(a, b))


def test_batches_are_redrawn_per_epoch_and_resume_mid_epoch() -> None:
    dm = actions_dm(batch_size=16)
    first = list(at_epoch(dm, 0).train_dataloader())
    assert same(first, list(at_epoch(dm, 0).train_dataloader()))
    second = list(at_epoch(dm, 1).train_dataloader())
    assert not same(first, second)
    assert sorted(map(sorted, positions(dm, second))) != sorted(map(sorted, positions(dm, first)))

    loader = at_epoch(dm, 1).train_dataloader()
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    state = loader.state_dict()
    assert state == {"epoch": 1, "consumed": 3}
    resumed = at_epoch(dm, 1).train_dataloader()
    resumed.load_state_dict(state)
    assert same(list(resumed), second[3:])
    assert same(list(resumed), second)  # the next pass starts the epoch over
    stale = at_epoch(dm, 2).train_dataloader()
    stale.load_state_dict(state)  # another epoch's position is ignored
    assert len(list(stale)) == len(stale)


@pytest.mark.parametrize("max_tokens", [None, 200])
def test_ddp_ranks_take_disjoint_batches_of_the_same_draw(max_tokens: int | None) -> None:
    dm = actions_dm(batch_size=16, max_tokens=max_tokens)
    whole = positions(dm, list(at_epoch(dm, 0).train_dataloader()))
    ranks = [positions(dm, list(at_epoch(dm, 0, rank, 3).train_dataloader()))
             for rank in range(3)]
    assert len({len(r) for r in ranks}) == 1  # every rank runs as many steps
    padded = whole + whole[: -len(whole) % 3]  # the first batches repeated to fill the ranks
    assert [padded[i::3] for i in range(3)] == ranks
    assert {i for r in ranks for b in r for i in b} == set(range(len(dm.action_items("train"))))


def test_bucket_loader_cuts_by_batch_size() -> None:
    lengths = np.array([5, 1, 4, 2, 3, 5, 1])
    loader = BucketLoader(list(range(7)), lengths, 2, None, seed=0, collate=lambda xs: xs)
    batches = list(loader)
    assert sorted(len(b) for b in batches) == [1, 2, 2, 2]
    assert sorted(i for b in batches for i in b) == list(range(7))
    assert sorted(sorted(lengths[b].tolist()) for b in batches) == [[1, 1], [2, 3], [4, 5], [5]]


def test_unknown_word_classes_map_rare_words() -> None:
    dm = actions_dm(SyntheticTreebank(n_train=60, n_valid=20, n_test=20), eval_batch_size=20,
                    unknown_words="classes", min_count=4)
    vocab, classes = dm.vocab, 0
    for batch in [*dm.train_dataloader(), *dm.val_dataloader()]:
        for row, s in enumerate(batch.sentences):
            ids = batch.words[row, : len(s.words)].tolist()
            assert ids == vocab.encode(s.words)
            for word, i in zip(s.words, ids):
                if vocab.is_unknown(i):
                    assert word not in vocab.stoi
                    assert vocab.itos[i] in (word_class(word, vocab.stoi), "<unk>")
                    classes += vocab.itos[i].startswith("UNK")
    assert classes > 0


# --- the treebank corpora --------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("corpus", ["PTBSepsent", "CTBSepsent", "PTBConcatSyn", "Treebank"])
def test_every_treebank_corpus_serves_actions_that_build_its_trees(corpus: str,
                                                                   order: str) -> None:
    made = {"PTBSepsent": lambda: PTBSepsent(str(FIXTURES), str(FIXTURES / "wsj")),
            "CTBSepsent": lambda: CTBSepsent(str(FIXTURES), str(FIXTURES / "ctb")),
            "PTBConcatSyn": lambda: PTBConcatSyn(str(FIXTURES), str(FIXTURES / "wsj")),
            # a BLLIP-style folder of .mrg files, split by files
            "Treebank": lambda: Treebank(str(FIXTURES), "wsj", valid_files=1, test_files=1)}
    dm = actions_dm(made[corpus](), action_order=order, batch_size=4)
    for split in ("train", "valid", "test"):
        with_trees = [s for s in dm.sentences(split) if s.tree is not None]
        assert round_trip(dm, split) == len(with_trees) > 0
        # as the corpus cleaned them: no empty elements, no function tags
        for item in dm.action_items(split):
            labels = [t.label() for t in item.sentence.tree.subtrees()]
            assert "-NONE-" not in labels and all(label == base_label(label) for label in labels)
    assert sum(b.words.size(0) for b in dm.train_dataloader()) == len(dm.action_items("train"))


def test_a_treebank_split_by_files_reads_them_once_for_its_three_splits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import synlm.data.treebanks as treebanks

    reads = []
    monkeypatch.setattr(treebanks, "read_trees",
                        lambda path, **kw: reads.append(path) or read_trees(path, **kw))
    corpus = Treebank(str(FIXTURES), "wsj", valid_files=1, test_files=1)
    splits = {split: corpus.sentences(split) for split in ("train", "valid", "test")}
    assert reads == [FIXTURES / "wsj"] and all(splits.values())
    assert corpus._untaken == {}  # each split's raw trees let go once taken
    assert len(corpus._trees("valid")) == len(splits["valid"]) and len(reads) == 2  # read anew
    whole = Treebank(str(FIXTURES), "wsj", valid_files=0, test_files=0)  # nothing held out
    assert len(whole.sentences("train")) == sum(map(len, splits.values()))
    assert whole.sentences("valid") == whole.sentences("test") == []
    assert {s.source.rsplit(":", 1)[0] for s in splits["valid"]}.isdisjoint(
        s.source.rsplit(":", 1)[0] for s in splits["train"] + splits["test"])


def test_sentences_without_trees_are_left_out() -> None:
    dm = actions_dm(PTBConcatSyn(str(FIXTURES), str(FIXTURES / "wsj")))
    train = dm.sentences("train")
    assert len(dm.action_items("train")) == sum(s.tree is not None for s in train) < len(train)


def write_parsed_wikitext(root: Path, trees: dict[str, list[str]]) -> ParsedWikiText2:
    """A ``ParsedWikiText2`` under ``root``: each split's trees and their words as text."""
    (root / "wikitext-2" / "trees").mkdir(parents=True)
    for split, lines in trees.items():
        words = [" ".join(Tree.fromstring(line).leaves()) for line in lines]
        (root / "wikitext-2" / f"{split}.txt").write_text("\n".join(words) + "\n")
        (root / "wikitext-2" / "trees" / f"{split}.trees").write_text("\n".join(lines) + "\n")
    return ParsedWikiText2(str(root))


def test_an_unlabelled_root_over_one_constituent_is_dropped(tmp_path: Path) -> None:
    good = ["( (S (NP (DT the) (NN cat)) (VP (VBD sat))) )",
            "(S (NP (DT a) (NN dog)) (VP (VBD ran)))"]
    dm = actions_dm(write_parsed_wikitext(tmp_path, {"train": good, "valid": good,
                                                     "test": good}))
    assert dm.action_vocab.labels == ["NP", "S", "VP"]
    first = dm.action_items("train")[0]
    assert dm.action_vocab.decode(first.actions.tolist())[0] == "NT(S)"


# --- one-line errors -------------------------------------------------------------------------

def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_corpus_without_trees_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        SynLMDataModule(PTB("/nonexistent"), mode="actions")
    assert one_line(err) == ("data.mode: actions needs constituency trees, but PTB has none; "
                             "use a corpus with trees, e.g. PTBConcatSyn or SyntheticTreebank")
    files = {s: str(tmp_path / "x.txt") for s in ("train", "valid", "test")}
    with pytest.raises(InputError, match="TextFiles has none"):
        SynLMDataModule(TextFiles(files), eval_mode="actions")


@pytest.mark.parametrize(("setting", "message"), [
    ({"action_order": "bottom_up"}, "action_order=bottom_up: expected one of top_down, "
                                    "in_order"),
    ({"tree_source": "random"}, "data.tree_source: random replaces trees"),
])
def test_settings_action_mode_cannot_take_are_refused(setting: dict, message: str) -> None:
    with pytest.raises(InputError) as err:
        actions_dm(**setting)
    assert one_line(err).startswith(message)
    if "action_order" in setting:
        assert isinstance(err.value, SettingError)


def test_a_split_without_trees_names_the_corpus() -> None:
    dm = actions_dm(PTBConcatSyn(str(FIXTURES), str(FIXTURES / "sample.mrg")))
    assert dm.action_items("train")  # the sample aligns to the training text only
    with pytest.raises(InputError) as err:
        dm.val_dataloader()
    assert one_line(err).startswith("action mode needs trees, but no valid sentence of "
                                    "PTBConcatSyn has one; use a corpus with trees in every "
                                    "split")


def sepsent(root: Path, train: str, valid: str = "(S (NP (DT a) (NN dog)) (VP (VBD ran)))"
            ) -> PTBSepsent:
    """A ``PTBSepsent`` over ``root/wsj`` with one file per split: ``train`` in section 02,
    ``valid`` in 22 and the test split a copy of it in 23."""
    for section, text in (("02", train), ("22", valid), ("23", valid)):
        (root / "wsj" / section).mkdir(parents=True)
        (root / "wsj" / section / f"wsj_{section}01.mrg").write_text(text)
    return PTBSepsent(str(root), str(root / "wsj"))


GOOD = "( (S (NP (DT the) (NN cat)) (VP (VBD sat))) )\n"


@pytest.mark.parametrize(("train", "line", "said"), [
    (GOOD + "( (S (NP (DT a) (NN dog)) (VP (VBD ran)))\n", 2,
     "expected ')' to close this bracket, found end of file"),
    (GOOD + "(S (NP (DT a) (NN dog))) (VP (VBD ran)))\n", 2,
     "unexpected ')' with no open bracket"),
    (GOOD + "( (S (NP ) (VP (VBD ran))) )\n", 2, "expected children in '(NP', found ')'"),
    (GOOD + "\n( )\n", 3, "expected a label or a subtree after '(', found ')'"),
])
def test_malformed_brackets_name_file_and_line(tmp_path: Path, train: str, line: int,
                                               said: str) -> None:
    dm = actions_dm(sepsent(tmp_path, train))
    with pytest.raises(CorpusError) as err:
        dm.train_dataloader()
    assert one_line(err) == f"{tmp_path}/wsj/02/wsj_0201.mrg:{line}: {said}"


def test_a_tree_without_a_constituent_names_file_and_line(tmp_path: Path) -> None:
    dm = actions_dm(sepsent(tmp_path, GOOD + "(NN dog)\n"))
    with pytest.raises(InputError) as err:
        dm.train_dataloader()
    assert one_line(err).startswith(f"{tmp_path}/wsj/02/wsj_0201.mrg:2: expected a constituent "
                                    "over words")


def test_a_label_the_training_split_lacks_names_file_line_and_label(tmp_path: Path) -> None:
    valid = "(S (NP (DT a) (NN dog)) (VP (VBD ran) (PP (IN in) (NP (DT the) (NN cat)))))"
    dm = actions_dm(sepsent(tmp_path, GOOD, valid))
    dm.train_dataloader()
    with pytest.raises(InputError) as err:
        dm.val_dataloader()
    assert one_line(err) == (f"{tmp_path}/wsj/22/wsj_2201.mrg:1: unknown action NT(PP): the "
                             "vocabulary's labels are NP, S, VP; the training split has no "
                             "constituent with this label")


@pytest.mark.parametrize(("tree", "said"), [
    ("(S (NP) (VP (VBD sat)))", "an empty constituent (NP) has no actions"),
    ("( (NP (DT a) (NN dog)) (VP (VBD sat)) )", "a bracket without a label; expected a label "
                                               "on every constituent"),
])
def test_empty_constituents_and_unlabelled_brackets_name_file_and_line(
        tmp_path: Path, tree: str, said: str) -> None:
    good = "(S (NP (DT the) (NN cat)) (VP (VBD sat)))"
    dm = actions_dm(write_parsed_wikitext(tmp_path, {"train": [good, tree], "valid": [good],
                                                     "test": [good]}))
    with pytest.raises(InputError) as err:
        dm.train_dataloader()
    assert one_line(err).startswith(f"{tmp_path}/wikitext-2/trees/train.trees:2: {said}")


# --- real data -------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
def test_ptb_concat_syn_with_the_nltk_sample_round_trips(order: str) -> None:
    staged("nltk_treebank", "treebank.zip")
    dm = actions_dm(PTBConcatSyn(str(staged("ptb").parent)), action_order=order,
                    batch_size=32)
    items = dm.action_items("train")
    assert round_trip(dm, "train") == dm.corpus.alignment_report("train").aligned > 3000
    assert {"NP", "VP", "S", "PP", "SBAR"} <= set(dm.action_vocab.labels)
    assert sum(b.words.size(0) for b in dm.train_dataloader()) == len(items)


def test_the_nltk_sample_as_a_treebank_round_trips_in_every_split() -> None:
    dm = actions_dm(Treebank(str(staged("nltk_treebank", "treebank.zip").parents[1])))
    assert [round_trip(dm, split) for split in ("train", "valid", "test")] == [3669, 127, 118]
