"""Transformer Grammars with Transformer-XL memory (synlm.transition.attention.tg
``tg_chunks``, ``TGPolicy(sequence_length=..., memory_length=...)``): the chunks, memory and
relative positions equal to the released masking code's on documents of the NLTK sample at
small chunk lengths (tests/fixtures/tg_memory, made by benchmarks/tg_memory_reference.py);
chunked teacher forcing equal to reading the whole row where the memory holds the stack;
documents in the action mode (one a source file); the document config; one-line errors for
settings the model cannot honour."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest
import torch
from nltk import Tree
from torch import Tensor

from conftest import metrics_of_test, run_cli
from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.data.datamodule import SynLMDataModule
from synlm.data.treebanks import Treebank
from synlm.errors import InputError, SettingError
from synlm.syntax import Sentence
from synlm.syntax.actions import REDUCE, oracle
from synlm.syntax.documents import DOC, documents
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention.tg import TGPolicy, tg_chunks, tg_layout
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.parser_state import SHIFT

FIXTURE = Path(__file__).parent / "fixtures" / "tg_memory" / "reference.json"


@cache
def reference() -> dict:
    """The released code's chunks (benchmarks/tg_memory_reference.py)."""
    return json.loads(FIXTURE.read_text())


def records() -> list[dict]:
    return reference()["documents"]


def padded(sequences: list[list[int]]) -> Tensor:
    """Action sequences right-padded with -1."""
    width = max(map(len, sequences))
    return torch.tensor([s + [-1] * (width - len(s)) for s in sequences])


# --- the released chunks -----------------------------------------------------------------------

def test_the_fixture_binds_the_memory_and_cuts_constituents() -> None:
    """The fixture ran the paper's settings with the smart memory, at lengths where the
    memory cannot hold every key a token attends (documents of several sentences)."""
    ref = reference()["reference"]
    assert ref["rule"] == "StackComposeDoubleClosingNT" and ref["gather_into_new_memory"]
    assert ref["relative_pos"] == "delta_depth" and ref["transparency_prob"] == 0.0
    lengths = {r["sequence_length"] for r in records()}
    assert len(lengths) == 2 and min(lengths) <= 8
    lost = 0
    for record in records():
        layout = tg_layout(torch.tensor([record["actions"]]))
        for chunk, start in zip(record["chunks"], range(0, 10**6, record["sequence_length"])):
            for i, query in enumerate(chunk["queries"]):
                attended = len(query["attend"]) + len(query["attend_memory"])
                lost += int(layout.mask[0, start + i].sum()) - attended
    assert lost > 500
    assert max(len(r["chunks"]) for r in records()) >= 10


@pytest.mark.parametrize("index", range(len(records())),
                         ids=[f"{r['source'].rsplit('/', 1)[-1]}-{r['sequence_length']}"
                              for r in records()])
def test_chunks_equal_the_released_codes(index: int) -> None:
    """Per chunk: the token each memory slot holds, the next memory's sources, and per
    query the memory slots and chunk tokens it attends with their relative positions."""
    record = records()[index]
    L = record["sequence_length"]
    chunks = tg_chunks(tg_layout(torch.tensor([record["actions"]])), L, L)
    assert len(chunks) == len(record["chunks"])
    for k, (chunk, expected) in enumerate(zip(chunks, record["chunks"], strict=True)):
        assert chunk.start == k * L
        assert chunk.memory[0].tolist() == expected["memory"], k
        update = chunk.update[0]
        assert [[n, int(update[n])] for n in range(L) if update[n] >= 0] == \
            expected["update"], k
        allowed, relative = chunk.allowed[0, 0], chunk.relative[0]
        for i, query in enumerate(expected["queries"]):
            held, own = allowed[i, :L], allowed[i, L:]
            assert held.nonzero()[:, 0].tolist() == query["attend_memory"], (k, i)
            assert own.nonzero()[:, 0].tolist() == query["attend"], (k, i)
            assert relative[i, :L][held].tolist() == query["relative_memory"], (k, i)
            assert relative[i, L:][own].tolist() == query["relative"], (k, i)
            assert not relative[i][~allowed[i]].any()


# --- chunked teacher forcing -------------------------------------------------------------------

def fixture_batch(n: int = 2) -> tuple[Tensor, Tensor, Tensor, int]:
    """The ``n`` shortest distinct documents of the fixture as a batch: word ids (a random
    word a SHIFT), actions, lengths, and the action vocabulary's size."""
    seen, docs = set(), []
    for record in sorted(records(), key=lambda r: len(r["actions"])):
        if record["source"] not in seen:
            seen.add(record["source"])
            docs.append(record["actions"])
    docs = docs[:n]
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([sum(a == SHIFT for a in d) for d in docs])
    words = torch.randint(1, 30, (n, int(lengths.max())), generator=gen)
    return words, padded(docs), lengths, len(reference()["actions_itos"])


def largest_carried_stack(actions: Tensor, sequence_length: int) -> int:
    """The most tokens on a row's stack after the last token of a chunk that another chunk
    of the row follows: what the memory must hold."""
    layout = tg_layout(actions)
    T = layout.source.size(1)
    t = torch.arange(T)
    on = (t[None, None, :] <= t[None, :, None]) & (layout.popped_at[:, None, :] > t[None, :, None])
    sizes = on.sum(-1)  # (B, T): after each token
    ends = t[sequence_length - 1::sequence_length]
    followed = ends[None, :] + 1 < layout.lengths[:, None]  # (B, chunks)
    return int(torch.where(followed, sizes[:, ends], 0).max())


def tg(n_actions: int, **memory: int) -> ActionTransformer:
    torch.manual_seed(0)
    return ActionTransformer(30, n_actions, TGPolicy(**memory), size=16, num_layers=2,
                             num_heads=2, dropout=0.0).eval()


@pytest.mark.parametrize("sequence_length", [5, 8, 23])
def test_chunked_equals_unchunked_where_the_memory_holds_the_stack(sequence_length: int
                                                                   ) -> None:
    """With as many memory slots as the largest stack carried across a chunk boundary,
    every key a token attends is in its chunk or the memory: the log-probabilities equal
    those of the whole rows (1e-5); one slot fewer loses the start token at that boundary
    and changes them."""
    words, actions, lengths, n_actions = fixture_batch()
    whole = tg(n_actions)
    slots = largest_carried_stack(actions, sequence_length)
    chunked = tg(n_actions, sequence_length=sequence_length, memory_length=slots)
    chunked.load_state_dict(whole.state_dict())
    with torch.no_grad():
        expected, out = whole(words, actions, lengths), chunked(words, actions, lengths)
    assert out.action_log_probs.shape == expected.action_log_probs.shape
    torch.testing.assert_close(out.action_log_probs, expected.action_log_probs,
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(out.word_log_probs, expected.word_log_probs, atol=1e-5, rtol=0)
    short = tg(n_actions, sequence_length=sequence_length, memory_length=slots - 1)
    short.load_state_dict(whole.state_dict())
    with torch.no_grad():
        assert (short(words, actions, lengths).joint - expected.joint).abs().max() > 1e-4


def test_the_fused_kernel_reads_the_chunks_as_the_unfused_one() -> None:
    """flex_attention over a chunk's block mask of ``[memory | chunk]`` keys, TG's relative
    term as its score_mod, equals the unfused attention (1e-5, float32)."""
    words, actions, lengths, n_actions = fixture_batch()
    unfused = tg(n_actions, sequence_length=8, memory_length=6)
    fused = tg(n_actions, sequence_length=8, memory_length=6)
    fused.attention_kernel = "fused"
    with torch.no_grad():
        expected, out = unfused(words, actions, lengths), fused(words, actions, lengths)
    torch.testing.assert_close(out.action_log_probs, expected.action_log_probs, atol=1e-5,
                               rtol=0)


def test_no_gradient_crosses_a_chunk_boundary_through_the_memory() -> None:
    """The memory is detached (the released stop_gradient): the start token, read in the
    first chunk and held in memory ever after, gets no gradient from a later chunk's
    action; from one of the first chunk it does."""
    words, actions, lengths, n_actions = fixture_batch(1)
    model = tg(n_actions, sequence_length=6)
    out = model(words, actions, lengths)
    last = int((actions[0] >= 0).sum()) - 1
    grad, = torch.autograd.grad(out.action_log_probs[0, last], model.start, retain_graph=True)
    assert not grad.any()
    grad, = torch.autograd.grad(out.action_log_probs[0, 2], model.start)
    assert grad.any()


# --- settings it cannot honour -----------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"memory_length": 8}, r"^memory_length=8: expected unset: memory needs a sequence_length"),
    ({"sequence_length": 0}, r"^sequence_length=0: expected a whole"),
])
def test_memory_the_policy_cannot_honour_is_a_one_line_error(kwargs: dict, message: str) -> None:
    with pytest.raises(SettingError, match=message) as err:
        TGPolicy(**kwargs)
    assert "\n" not in str(err.value)


def test_search_past_one_chunk_is_a_one_line_error() -> None:
    """Search reads a sentence as one chunk (its cache holds all of it): a sentence of more
    tokens than sequence_length would be read otherwise than teacher forcing reads it."""
    torch.manual_seed(0)
    model = ActionTransformer(30, 6, TGPolicy(sequence_length=5), size=16, num_layers=1,
                              num_heads=2, max_consecutive=1).eval()
    words = torch.tensor([[1, 2]])
    with torch.no_grad():
        results = search_sentences(model, words[:, :1], torch.tensor([1]), BeamSettings(4, 2, 1))
    assert results[0].parsed  # <s> (A w A) A): five tokens
    with pytest.raises(SettingError, match=r"^sequence_length=5: expected at least \d+, or "
                                           r"unset: search reads a sentence as one chunk"):
        search_sentences(model, words, torch.tensor([2]), BeamSettings(4, 2, 1))


# --- documents ---------------------------------------------------------------------------------

def test_documents_are_the_sentences_of_one_file_under_doc() -> None:
    """Consecutive sentences of a file make one document: words in order, the tree
    (DOC t1 t2), the file as its source; a sentence without a file:line source is one
    line."""
    def sentence(text: str, source: str | None) -> Sentence:
        tree = Tree.fromstring(text)
        return Sentence(tree.leaves(), tree=tree, source=source)

    out = documents([sentence("(S (NP a) (VP b))", "x/f1.mrg:1"),
                     sentence("(S (NP c))", "x/f1.mrg:4"),
                     sentence("(S (VP d))", "x/f2.mrg:1")], "train")
    assert [d.source for d in out] == ["x/f1.mrg", "x/f2.mrg"]
    assert out[0].words == ["a", "b", "c"]
    assert str(out[0].tree) == "(DOC (S (NP a) (VP b)) (S (NP c)))"
    assert out[1].tree.label() == DOC
    with pytest.raises(InputError, match=r"^valid sentence 2: no file:line source to group "
                                         r"documents by \(data.action_unit: document\)"):
        documents([sentence("(S a)", "f.mrg:1"), sentence("(S b)", None)], "valid")


def test_the_nltk_sample_in_documents_one_a_file() -> None:
    """``action_unit: document``: a row a .mrg file of the split (10 test files), its words
    the file's sentences' in order, its actions NT(DOC), theirs, REDUCE."""

    corpus = Treebank(str(staged("nltk_treebank", "treebank.zip").parents[1]))
    sentences = SynLMDataModule(corpus, mode="actions").action_items("test")
    dm = SynLMDataModule(corpus, mode="actions", action_unit="document", test_batch_size=4)
    items = dm.action_items("test")
    assert len(items) == 10 and "NT(DOC)" in dm.action_vocab.itos
    assert [w for item in sentences for w in item.words] == \
        [w for item in items for w in item.words]
    first = [s for s in sentences if s.sentence.source.rsplit(":", 1)[0] ==
             items[0].sentence.source]
    vocab = dm.action_vocab
    assert vocab.decode(items[0].actions.tolist()) == \
        ["NT(DOC)", *[a for s in first for a in oracle(s.sentence.tree)], REDUCE]
    batch = next(iter(dm.test_dataloader()))
    assert batch.words.size(0) == 4 and batch.n_words == sum(len(i.words) for i in items[:4])
    with pytest.raises(SettingError, match=r"^action_unit=paragraph: expected sentence \| "
                                           r"document"):
        SynLMDataModule(corpus, mode="actions", action_unit="paragraph")


def test_the_document_config_trains_and_tests_documents(tmp_path: Path) -> None:
    """configs/tg_document.yaml, tiny, on the NLTK sample: a few steps of chunked teacher
    forcing, then ``synlm test`` logs the document-level perplexity and no beam search."""

    staged("nltk_treebank", "treebank.zip")
    torch.set_num_threads(1)
    tiny = ["--model.init_args.model.init_args.size=16",
            "--model.init_args.model.init_args.num_layers=1",
            "--model.init_args.model.init_args.num_heads=2",
            "--model.init_args.model.init_args.ffn_size=32",
            "--model.init_args.model.init_args.attention.init_args.sequence_length=64",
            "--data.corpus.init_args.valid_files=2", "--data.corpus.init_args.test_files=2",
            "--trainer.accelerator=cpu", "--trainer.devices=1",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
            "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=1",
            "--trainer.max_epochs=1", "--trainer.log_every_n_steps=1"]
    root = tmp_path / "run"
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "tg_document.yaml"), *tiny,
                    f"--trainer.default_root_dir={root}"]) == 0
    logged = metrics_of_test(root, tmp_path / "test")
    for name in ("test/doc_ppl", "test/joint_ppl", "test/word_ppl"):
        assert 1.0 < float(logged[name]) < math.inf, name
    assert "test/beam_ppl" not in logged and "test/uf1" not in logged
    # the same log p(x, y) of the two test documents, per word and per action and word
    corpus = Treebank(str(staged("nltk_treebank", "treebank.zip").parents[1]), valid_files=2,
                      test_files=2)
    items = SynLMDataModule(corpus, mode="actions", action_unit="document").action_items("test")
    assert len(items) == 2
    words, actions = sum(len(i.words) for i in items), sum(len(i.actions) for i in items)
    assert math.log(float(logged["test/doc_ppl"])) * words == pytest.approx(
        math.log(float(logged["test/joint_ppl"])) * (words + actions), rel=1e-4)
