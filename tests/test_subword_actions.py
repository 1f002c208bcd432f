"""Subword actions (rnng-pytorch's ``subword_end_mask``): the action mode over a subword
vocabulary (each word's pieces with a leading space, one ``SHIFT`` a piece), the RNNG over
pieces in teacher forcing and beam search, and scoring that reads no unknown word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from nltk import Tree
from test_action_transformer import random_model as random_transformer
from test_action_transformer_cli import TINY as TINY_TRANSFORMER
from test_cli import RESOLVED
from test_evaluate_syntax import toy_data
from test_in_order_rnng import all_parses as all_in_order_parses
from test_in_order_rnng import random_model
from test_rnng import TREES, all_parses, random_rnng
from test_rnng_cli import TINY_RNNG

from conftest import local_gpt2, metrics_of_test, run_cli
from synlm.catalog import REPO_CONFIGS
from synlm.data.datamodule import SynLMDataModule
from synlm.data.subwords import PretrainedTokenizer, SubwordVocab, TrainedBPE, TrainedUnigram
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import Vocab
from synlm.loading import load_model
from synlm.syntax.actions import (
    SHIFT,
    ActionError,
    ActionVocab,
    oracle,
    piece_actions,
    tree_of,
    without_preterminals,
    word_actions,
)
from synlm.transition.attention import named_policies
from synlm.transition.beam import BeamSettings, inside_word, search_batch, search_sentences
from synlm.transition.lm import TransitionLM
from synlm.transition.parser_state import FIRST_NT
from synlm.transition.rnng import RNNG, per_word
from synlm.tse.scoring import ModelScorer


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> SubwordVocab:
    """A small byte-level BPE trained on the synthetic treebank's words."""
    train = [s.words for s in SyntheticTreebank(n_train=100).sentences("train")]
    return TrainedBPE(vocab_size=280).vocab(train, tmp_path_factory.mktemp("bpe"))


def test_piece_actions_repeat_each_words_shift_and_word_actions_undo_them() -> None:
    actions = ["NT(S)", "NT(NP)", SHIFT, SHIFT, "REDUCE", "NT(VP)", SHIFT, "REDUCE", "REDUCE"]
    ends = [True, False, False, True, False, True]  # words of 1, 3 and 2 pieces
    pieces = piece_actions(actions, ends)
    assert pieces == ["NT(S)", "NT(NP)", SHIFT, SHIFT, SHIFT, SHIFT, "REDUCE", "NT(VP)",
                      SHIFT, SHIFT, "REDUCE", "REDUCE"]
    assert word_actions(pieces, ends) == actions
    with pytest.raises(ActionError, match=r"action 3 \(REDUCE\): inside a word"):
        word_actions(["NT(S)", SHIFT, SHIFT, "REDUCE", SHIFT, "REDUCE"], [True, False, True])
    with pytest.raises(ValueError, match="the last piece must end a word"):
        piece_actions(actions, [True, False])


def test_gpt2_tokenisation_gives_each_word_its_leading_space(tmp_path: Path) -> None:
    """GPT-2's tokenizer class (built here from a trained byte-level BPE, saved with
    ``save_pretrained``): a word's pieces in a sentence are those of the word with a leading
    space, as the released PLM encodes each word, not those of the bare word; the word ends
    read off the pieces are where ``split`` puts them."""
    from transformers import GPT2TokenizerFast

    trained = TrainedBPE(vocab_size=300).vocab(
        [s.words for s in SyntheticTreebank(n_train=100).sentences("train")], tmp_path)
    hf = GPT2TokenizerFast(tokenizer_object=trained.tokenizer, eos_token="<eos>")
    hf.save_pretrained(tmp_path / "gpt2")
    vocab = PretrainedTokenizer(str(tmp_path / "gpt2")).vocab([], tmp_path)
    ((pieces, word_index),) = vocab.split([["the", "doctor", "liked", "zebras"]])
    assert pieces[:1] == hf.tokenize(" the") == ["Ġthe"] != hf.tokenize("the")
    doctor = [p for p, w in zip(pieces, word_index, strict=True) if w == 1]
    assert doctor == hf.tokenize(" doctor") != hf.tokenize("doctor")
    assert doctor[0].startswith("Ġ") and not hf.tokenize("doctor")[0].startswith("Ġ")
    zebras = [p for p, w in zip(pieces, word_index, strict=True) if w == 3]
    assert len(zebras) > 1  # an unseen word: several pieces, none unknown
    ids = vocab.encode(pieces)
    assert ids == hf.encode(" the doctor liked zebras")
    ends = [i + 1 == len(word_index) or word_index[i + 1] != w for i, w in enumerate(word_index)]
    assert vocab.word_ends(ids) == ends and sum(ends) == 4


@pytest.mark.parametrize("subwords", [TrainedBPE(vocab_size=280), TrainedUnigram(320)],
                         ids=["bpe", "unigram"])
def test_action_mode_serves_pieces_word_ends_and_a_shift_per_piece(
        subwords: TrainedBPE | TrainedUnigram, tmp_path: Path) -> None:
    dm = SynLMDataModule(SyntheticTreebank(n_train=60, n_valid=12, n_test=12), mode="actions",
                         subwords=subwords, cache_dir=str(tmp_path), eval_batch_size=5)
    n_words = 0
    for batch in dm.val_dataloader():
        assert batch.word_ends is not None
        assert batch.n_words == sum(len(s.words) for s in batch.sentences)
        n_words += batch.n_words
        for b, sentence in enumerate(batch.sentences):
            n = int(batch.word_lengths[b])
            ends = batch.word_ends[b, :n].tolist()
            assert not batch.word_ends[b, n:].any() and sum(ends) == len(sentence.words)
            ids = batch.words[b, :n].tolist()
            assert dm.vocab.text(ids) == " ".join(sentence.words)
            actions = dm.action_vocab.decode([a for a in batch.actions[b].tolist() if a >= 0])
            assert actions.count(SHIFT) == n
            words = word_actions(actions, ends)
            assert words == oracle(sentence.tree)
            assert tree_of(words, sentence.words) == without_preterminals(sentence.tree)
    assert n_words == sum(len(s.words) for s in dm.corpus_sentences("valid"))
    word_level = SynLMDataModule(dm.corpus, mode="actions", cache_dir=str(tmp_path))
    assert word_level.action_vocab.itos == dm.action_vocab.itos  # actions unchanged


# ------------------------------------------------------------------ the RNNG over pieces
def pieces_of(trees: list[Tree], split: list[int], vocab: ActionVocab,
              order: str = "top_down"
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pieces (B, N), word ends (B, N), actions (B, A) in ``order``, lengths (B,)) of
    ``trees`` whose word k is ``split[k]`` pieces (ids: 1 + the word's index in the tree,
    then 0-based piece numbers offset past the words)."""
    rows = []
    for tree in trees:
        pieces, ends = [], []
        for k, _ in enumerate(tree.leaves()):
            count = split[k % len(split)]
            pieces += [1 + k] + [20 + j for j in range(count - 1)]
            ends += [False] * (count - 1) + [True]
        rows.append((pieces, ends, vocab.encode(piece_actions(oracle(tree, order), ends))))
    N, A = max(len(p) for p, _, _ in rows), max(len(a) for _, _, a in rows)
    w, e = torch.zeros(len(rows), N, dtype=torch.long), torch.zeros(len(rows), N, dtype=torch.bool)
    a = torch.full((len(rows), A), -1)
    for i, (pieces, ends, acts) in enumerate(rows):
        w[i, :len(pieces)], e[i, :len(ends)] = torch.tensor(pieces), torch.tensor(ends)
        a[i, :len(acts)] = torch.tensor(acts)
    return w, e, a, torch.tensor([len(p) for p, _, _ in rows])


def test_teacher_forcing_over_pieces_batched_equals_one_sentence() -> None:
    trees = [Tree.fromstring(t) for t in TREES]
    vocab = ActionVocab.from_trees(trees)
    model = random_rnng(24, len(vocab), legal_softmax=True)
    w, e, a, n = pieces_of(trees, [2, 1, 3], vocab)
    batched = model(w, a, n, word_ends=e)
    for i in range(len(trees)):
        wi, ei, ai, ni = pieces_of(trees[i:i + 1], [2, 1, 3], vocab)
        alone = model(wi, ai, ni, word_ends=ei)
        torch.testing.assert_close(batched.joint[i], alone.joint[0], rtol=0, atol=1e-12)
        words = per_word(batched.word_log_probs[i:i + 1], e[i:i + 1])[0]
        n_words = len(trees[i].leaves())
        # a word's log-probability is the sum over its pieces
        pieces = batched.word_log_probs[i, :int(n[i])]
        word_of = (e[i, :int(n[i])].long().cumsum(0) - e[i, :int(n[i])].long()).tolist()
        for k in range(n_words):
            expected = sum(p for p, j in zip(pieces.tolist(), word_of, strict=True) if j == k)
            assert words[k].item() == pytest.approx(expected, abs=1e-12)
        assert (words[n_words:] == 0).all()
    # with legal_softmax, a piece that continues its word leaves SHIFT the only action:
    # its action log-probability is 0
    continues = torch.zeros_like(a, dtype=torch.bool)
    for i in range(len(trees)):
        shifts = (a[i] == 0).nonzero()[:, 0]
        continues[i, shifts[1:]] = ~e[i, :len(shifts) - 1]  # the piece before continues
    assert continues.any()
    assert batched.action_log_probs[continues].abs().max() < 1e-12


def test_inside_word_allows_only_shift_in_search() -> None:
    ends = torch.tensor([[False, True, True]]).expand(4, -1)
    pointer = torch.tensor([0, 1, 2, 3])
    assert inside_word(pointer, ends).tolist() == [False, True, False, False]


def exact_over_pieces(model: torch.nn.Module) -> tuple[list[list[int]], torch.Tensor]:
    """Two words, the first of two pieces (pieces 1 4 2): every top-down parse over the two
    words, its first SHIFT twice (the only legal sequences: nothing but SHIFT inside a
    word), and its teacher-forced log p(x, y)."""
    vocab, ends = ActionVocab(["X"]), [False, True, True]
    parses = [vocab.encode(piece_actions(vocab.decode(p), ends)) for p in all_parses(model, 2)]
    A = max(map(len, parses))
    actions = torch.tensor([p + [-1] * (A - len(p)) for p in parses])
    out = model(PIECES.expand(len(parses), -1), actions, torch.full((len(parses),), 3),
                word_ends=PIECE_ENDS.expand(len(parses), -1))
    return parses, out.joint


PIECES, PIECE_ENDS = torch.tensor([[1, 4, 2]]), torch.tensor([[False, True, True]])


@pytest.mark.parametrize("kind", ["rnng", *sorted(named_policies())])
def test_beam_over_pieces_is_the_exact_marginal(kind: str) -> None:
    """The RNNG and each action Transformer: a beam holding every parse over the pieces gives
    log p(x) = the logsumexp of their joints, and the best of them first; without word ends
    the search also finds parses that open or close inside a word."""
    model = (random_rnng(6, 3, max_consecutive=2, legal_softmax=True) if kind == "rnng"
             else random_transformer(6, 3, kind, max_consecutive=2))
    parses, joint = exact_over_pieces(model)
    found = search_batch(model, PIECES, torch.tensor([3]), BeamSettings(100, 100, 1),
                         PIECE_ENDS)[0]
    assert len(found.parses) == len(parses)
    total = sum(found.word_log_probs) + found.end_log_prob
    assert total == pytest.approx(torch.logsumexp(joint, 0).item(), abs=1e-9)
    assert found.parses[0][1] == pytest.approx(joint.max().item(), abs=1e-9)
    assert list(found.parses[0][0]) == parses[int(joint.argmax())]
    free = search_batch(model, PIECES, torch.tensor([3]), BeamSettings(200, 200, 1))[0]
    assert len(free.parses) > len(parses)


def test_search_over_pieces_batched_equals_one_sentence() -> None:
    trees = [Tree.fromstring(t) for t in TREES]
    vocab = ActionVocab.from_trees(trees)
    model = random_rnng(24, len(vocab))
    w, e, _, n = pieces_of(trees, [2, 1, 3], vocab)
    settings = BeamSettings(10, 5, 1)
    together = search_batch(model, w, n, settings, e)
    alone = search_sentences(model, w, n, BeamSettings(10, 5, 1, batch_size=1), e)
    for one, other, ends in zip(alone, together, e, strict=True):
        assert one.parses[0][0] == other.parses[0][0]
        assert one.word_log_probs == pytest.approx(other.word_log_probs, abs=1e-12)
        path = vocab.decode(other.parses[0][0])
        assert word_actions(path, ends.tolist())  # no action inside a word


def test_in_order_nt_takes_every_piece_of_its_first_word() -> None:
    """(S (NP the dog) (VP barks)), "the" two pieces: SHIFT SHIFT NT(NP) SHIFT REDUCE ...
    NT(NP) puts NP under both pieces (rnng-pytorch's last_subword_begin_idx), the stack LSTM
    reads it on the state after the second piece, and REDUCE composes NP over the three
    pieces; inside "the" only SHIFT is legal, with no constituent open too."""
    tree = Tree.fromstring(TREES[0])
    vocab = ActionVocab.from_trees([tree])
    model = random_model(30, len(vocab))
    w, e, a, _ = pieces_of([tree], [2, 1, 1], vocab, "in_order")
    assert vocab.decode(a[0, :4].tolist()) == [SHIFT, SHIFT, "NT(NP)", SHIFT]
    state = model.initial_state(1, stack_size=8)
    emb = model.embedding.weight
    np_label = model.nt_embedding.weight[vocab.stoi["NT(NP)"] - FIRST_NT]
    for t in range(5):
        legal = state.parser.legal_actions(torch.tensor([4]), model.n_actions, model.limits)
        if t == 1:  # inside "the": SHIFT alone
            assert legal[0].tolist() == [True] + [False] * (model.n_actions - 1)
        pointer = state.parser.pointer.clamp(max=3)
        hidden, cell = state.hidden.clone(), state.cell.clone()
        state = model.advance(state, a[0, t:t + 1], w[0, pointer], e[0, pointer])
        if t == 2:  # NT(NP)
            torch.testing.assert_close(state.items[0, :3], torch.stack(
                [np_label, emb[w[0, 0]], emb[w[0, 1]]]), rtol=0, atol=1e-12)
            assert state.open_at[0, :1].tolist() == [1] and int(state.parser.top) == 3
            h, _ = model.stack_lstm(np_label[None], hidden[0, 2][None], cell[0, 2][None])
            torch.testing.assert_close(state.hidden[0, 3], h[0], rtol=0, atol=1e-12)
    children = [emb[w[0, 0]], emb[w[0, 1]], emb[w[0, 2]]]
    f = model.composition.forward_lstm(torch.stack([np_label, *children])[None])[0][0, -1]
    b = model.composition.backward_lstm(torch.stack([np_label, *children[::-1]])[None])[0][0, -1]
    composed = torch.relu(model.composition.output(torch.cat([f, b])))
    torch.testing.assert_close(state.items[0, 0], composed, rtol=0, atol=1e-12)
    assert int(state.parser.top) == 1


def test_in_order_over_pieces_batched_equals_one_sentence_and_beam_is_exact() -> None:
    trees = [Tree.fromstring(t) for t in TREES]
    vocab = ActionVocab.from_trees(trees)
    model = random_model(30, len(vocab), legal_softmax=True)
    w, e, a, n = pieces_of(trees, [2, 1, 3], vocab, "in_order")
    batched = model(w, a, n, word_ends=e)
    for i in range(len(trees)):
        wi, ei, ai, ni = pieces_of(trees[i:i + 1], [2, 1, 3], vocab, "in_order")
        torch.testing.assert_close(batched.joint[i], model(wi, ai, ni, word_ends=ei).joint[0],
                                   rtol=0, atol=1e-12)
    # two words, the first of two pieces: every in-order parse over two words, its first
    # SHIFT twice
    model = random_model(6, 3, max_consecutive=2, legal_softmax=True)
    small, ends = ActionVocab(["X"]), [False, True, True]
    finish = model.finish_action
    parses = [[*small.encode(piece_actions(small.decode(p[:-1]), ends)), finish]
              for p in all_in_order_parses(model, 2)]
    A = max(map(len, parses)) - 1
    actions = torch.tensor([p[:-1] + [-1] * (A - len(p) + 1) for p in parses])
    pieces, word_ends = torch.tensor([[1, 4, 2]]), torch.tensor([ends])
    joint = model(pieces.expand(len(parses), -1), actions, torch.full((len(parses),), 3),
                  word_ends=word_ends.expand(len(parses), -1)).joint
    found = search_batch(model, pieces, torch.tensor([3]), BeamSettings(400, 400, 1),
                         word_ends)[0]
    assert len(found.parses) == len(parses)
    total = sum(found.word_log_probs) + found.end_log_prob
    assert total == pytest.approx(torch.logsumexp(joint, 0).item(), abs=1e-10)
    assert list(found.parses[0][0]) == parses[int(joint.argmax())]


def test_rnng_over_pieces_reads_no_unknown_word(bpe: SubwordVocab) -> None:
    """Words the word-level vocabulary lacks are pieces of the subword one: the scorer reads
    none as unknown, and each word's log-probability is the sum over its pieces."""
    lm = TransitionLM(RNNG(len(bpe), 5, input_size=8, hidden_size=8, num_layers=1),
                      beam_size=6, word_beam_size=3)
    lm.vocab, lm.action_vocab = bpe, ActionVocab(["NP", "S", "VP"])
    words = ["zebras", "quixotically", "juggle", "xylophones"]
    assert all(w not in {t.lstrip("Ġ") for t in bpe.itos} for w in words[1:])
    (scored,) = ModelScorer(lm).score([words])
    assert scored.unknown == (False,) * 4
    ids, word_index, _ = ModelScorer(lm).encode(words)
    assert len(ids) > len(words)
    per_piece = scored.token_log_probs
    for k in range(4):
        expected = sum(lp for lp, w in zip(per_piece, word_index, strict=True) if w == k)
        assert scored.word_log_probs[k] == pytest.approx(expected, abs=1e-9)
    (tree,) = lm.parse([words])
    assert tree.leaves() == words


def test_a_word_level_rnng_reads_those_words_as_unknown() -> None:
    train = SyntheticTreebank(n_train=100).sentences("train")
    words = Vocab.build(s.words for s in train)
    lm = TransitionLM(RNNG(len(words), 5, input_size=8, hidden_size=8, num_layers=1),
                      beam_size=6, word_beam_size=3)
    lm.vocab, lm.action_vocab = words, ActionVocab(["NP", "S", "VP"])
    sentence = ["zebras", "quixotically", "juggle", "xylophones"]
    assert ModelScorer(lm).score([sentence])[0].unknown == (True,) * 4


# ------------------------------------------------------------------ the command line
#: Each subword config's tiny overrides: the tiny models of the RNNG and action Transformer
#: CLI tests, 300 trained pieces or the small local GPT-2's tokenizer.
TINY_SUBWORDS = {"rnng_bllip_bpe.yaml": TINY_RNNG, "rnng_in_order_bllip_bpe.yaml": TINY_RNNG,
                 "plm_mask_bllip_bpe.yaml": TINY_TRANSFORMER,
                 "tg_bllip_unigram.yaml": TINY_TRANSFORMER}


@pytest.mark.parametrize("config", sorted(TINY_SUBWORDS))
def test_the_subword_configs_fit_test_parse_and_score_with_no_unknown_word(
        config: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The config, tiny, on the synthetic treebank with 300 trained pieces (or the local
    GPT-2's):
    fit, test (the beam's perplexity per word), parse (trees over the input words) and
    evaluate-syntax on toy BLiMP and SyntaxGym copies, whose words the treebank lacks
    ("naps"), with no unknown word."""
    pretrained = "PretrainedTokenizer" in yaml.safe_load(
        (RESOLVED / config).read_text())["data"]["subwords"]["class_path"]
    vocab = (f"--data.subwords.init_args.name_or_path={local_gpt2()}" if pretrained
             else "--data.subwords.init_args.vocab_size=300")
    root = tmp_path / "run"
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / config), *TINY_SUBWORDS[config],
                    vocab, "--trainer.max_steps=3",
                    f"--trainer.default_root_dir={root}"]) == 0
    model = load_model(str(root))
    assert isinstance(model.vocab, SubwordVocab)
    logged = metrics_of_test(root, tmp_path / "test")
    for name in ("test/joint_ppl", "test/word_ppl", "test/beam_ppl"):
        assert 1.0 < float(logged[name]) < float("inf"), name
    assert 0.0 <= float(logged["test/uf1"]) <= 1.0  # the best parses, over words
    text = tmp_path / "in.txt"
    text.write_text("the zebra naps\n")
    capsys.readouterr()
    assert run_cli(["parse", "--ckpt_path", str(root), "--input", str(text),
                    "--format", "json"]) == 0
    (parsed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert parsed["words"] == ["the", "zebra", "naps"]
    data = toy_data(tmp_path / "data")
    assert run_cli(["evaluate-syntax", "--ckpt_path", str(root), "--data-dir", str(data),
                    "--benchmark", "blimp", "syntaxgym", "--suites",
                    "number_src", "--beam-size", "6", "--word-beam-size", "3"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["headline"]["blimp/unknown_share"] == 0.0
    assert report["headline"]["syntaxgym/unknown_share"] == 0.0
