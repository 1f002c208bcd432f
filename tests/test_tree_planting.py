"""Tree-planting (Yoshida et al. 2024): path lengths and supervision on hand-drawn trees, the
gold the DataModule serves (words and subwords), the KL against hand-set attention, the
composition with the Transformer and GPT-2, learning, causality, evaluation without gold,
golden values and the shipped configs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from nltk import Tree

from conftest import TINY_OVERRIDES, local_gpt2, run_cli
from staged import staged
from synlm import SynLMDataModule, SyntaxLM
from synlm.backbones import AWDLSTM, GPT2, Transformer
from synlm.backbones import transformer as transformer_module
from synlm.catalog import REPO_CONFIGS
from synlm.data.subwords import TrainedBPE
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.treebanks import PTBConcatSyn, UDTreebank
from synlm.errors import InputError, SettingError
from synlm.heads import TreePlantingHead
from synlm.heads.tree_planting import supervision, word_maps
from synlm.outputs import BackboneOutput, Batch
from synlm.syntax import Sentence
from synlm.syntax.heads import tree_to_heads
from synlm.syntax.paths import (
    constituency_path_lengths,
    dependency_path_lengths,
    path_lengths,
    word_heads,
    word_tree,
)
from synlm.syntax.subwords import project_sentence

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"
THREE = "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"
DEEP = ("(S (NP (NP (DT the) (NN cat)) (PP (IN near) (NP (DT the) (NN door)))) "
        "(VP (VBD slept)) (. .))")


# --- D: distances, rows and columns [BOS, w1..wn, EOS] ------------------------------------

def test_constituency_distances_of_a_three_word_sentence() -> None:
    """Edges between leaves through the preterminals; BOS and EOS hang from a new root above
    S: the–dog via DT NP NN (4), the–barks via DT NP S VP VBZ (6), BOS–the via X S NP DT (5)."""
    want = [[0, 5, 5, 5, 2],
            [5, 0, 4, 6, 5],
            [5, 4, 0, 6, 5],
            [5, 6, 6, 0, 5],
            [2, 5, 5, 5, 0]]
    assert constituency_path_lengths(Tree.fromstring(THREE)).tolist() == want


def test_constituency_distances_of_a_deeper_tree() -> None:
    """Leaf depths under the new root: the 5, cat 5, near 5, the 6, door 6, slept 4, . 3,
    BOS and EOS 1; D = depth_i + depth_j − 2 depth(lca)."""
    want = [[0, 6, 6, 6, 7, 7, 5, 4, 2],
            [6, 0, 4, 6, 7, 7, 7, 6, 6],
            [6, 4, 0, 6, 7, 7, 7, 6, 6],
            [6, 6, 6, 0, 5, 5, 7, 6, 6],
            [7, 7, 7, 5, 0, 4, 8, 7, 7],
            [7, 7, 7, 5, 4, 0, 8, 7, 7],
            [5, 7, 7, 7, 8, 8, 0, 5, 5],
            [4, 6, 6, 6, 7, 7, 5, 0, 4],
            [2, 6, 6, 6, 7, 7, 5, 4, 0]]
    assert constituency_path_lengths(Tree.fromstring(DEEP)).tolist() == want


def test_dependency_distances_of_a_three_word_sentence() -> None:
    """the → dog → barks (root); BOS and EOS depend on barks."""
    want = [[0, 3, 2, 1, 2],
            [3, 0, 1, 2, 3],
            [2, 1, 0, 1, 2],
            [1, 2, 1, 0, 1],
            [2, 3, 2, 1, 0]]
    assert dependency_path_lengths([2, 3, 0]).tolist() == want


def test_dependency_distances_of_a_deeper_tree() -> None:
    """the cat near the door slept .: the→cat→slept, near→cat, the→door→near, .→slept."""
    want = [[0, 3, 2, 3, 5, 4, 1, 2, 2],
            [3, 0, 1, 2, 4, 3, 2, 3, 3],
            [2, 1, 0, 1, 3, 2, 1, 2, 2],
            [3, 2, 1, 0, 2, 1, 2, 3, 3],
            [5, 4, 3, 2, 0, 1, 4, 5, 5],
            [4, 3, 2, 1, 1, 0, 3, 4, 4],
            [1, 2, 1, 2, 4, 3, 0, 1, 1],
            [2, 3, 2, 3, 5, 4, 1, 0, 2],
            [2, 3, 2, 3, 5, 4, 1, 2, 0]]
    assert dependency_path_lengths([2, 6, 2, 5, 3, 0, 6]).tolist() == want


@pytest.mark.parametrize("heads", [[0, 0, 1], [2, 1, 0], [2, 4, 0]])
def test_heads_that_are_not_one_rooted_tree_give_no_distances(heads: list[int]) -> None:
    assert dependency_path_lengths(heads) is None


# --- S: the supervision attention ---------------------------------------------------------

def _softmax_of_negatives(*distances: float) -> list[float]:
    weights = [math.exp(-d) for d in distances]
    return [w / sum(weights) for w in weights]


def test_supervision_of_a_three_word_sentence_by_hand() -> None:
    """The input predicting word k reads the words l < k, weighted by exp(−D(k, l)): the
    predicted word's distances, not the reading word's."""
    s = supervision(torch.from_numpy(dependency_path_lengths([2, 3, 0]))).numpy()
    want = [[1.0, 0.0, 0.0, 0.0],
            [*_softmax_of_negatives(2, 1), 0.0, 0.0],  # predicting "dog": BOS 2, the 1
            [*_softmax_of_negatives(1, 2, 1), 0.0],  # "barks": BOS 1, the 2, dog 1
            _softmax_of_negatives(2, 3, 2, 1)]  # EOS: BOS 2, the 3, dog 2, barks 1
    np.testing.assert_allclose(s, want, rtol=0, atol=1e-12)
    c = supervision(torch.from_numpy(constituency_path_lengths(Tree.fromstring(THREE))),
                    decay=0.5).numpy()
    np.testing.assert_allclose(c[3], _softmax_of_negatives(1.0, 2.5, 2.5, 2.5), atol=1e-12)


def test_supervision_of_the_deeper_tree_by_hand() -> None:
    """Row k − 1 for the predicted word k: "door" (k = 5) reads BOS, the, cat, near, the at
    7, 7, 7, 5, 4; EOS (k = 8) reads every word."""
    s = supervision(torch.from_numpy(constituency_path_lengths(Tree.fromstring(DEEP)))).numpy()
    np.testing.assert_allclose(s[4], [*_softmax_of_negatives(7, 7, 7, 5, 4), 0, 0, 0],
                               atol=1e-12)
    np.testing.assert_allclose(s[7], _softmax_of_negatives(2, 6, 6, 6, 7, 7, 5, 4), atol=1e-12)
    np.testing.assert_allclose(s.sum(1), np.ones(8), atol=1e-12)
    assert not np.triu(s, 1).any()


# --- subwords: a word's pieces share its distances ----------------------------------------

def _word_sentence() -> Sentence:
    tree = Tree.fromstring(DEEP)
    return Sentence(tree.leaves(), tree=tree, heads=[2, 6, 2, 5, 3, 0, 6])


def _pieces() -> tuple[list[str], list[int]]:
    # "cat" as two pieces, "door" as three
    return (["the", "c", "at", "near", "the", "d", "o", "or", "slept", "."],
            [0, 1, 1, 2, 3, 4, 4, 4, 5, 6])


def test_subword_sentences_give_their_words_distances() -> None:
    """The projected tree's WORD constituents fold back into words and the projected heads
    back into word heads, so both kinds of distance are the words'."""
    words = _word_sentence()
    pieces = project_sentence(words, *_pieces())
    assert word_tree(pieces) == words.tree
    assert word_heads(pieces) == words.heads
    for kind in ("constituency", "dependency"):
        np.testing.assert_array_equal(path_lengths(pieces, kind), path_lengths(words, kind))
    no_heads = Sentence(words.words, tree=words.tree)  # heads by Collins' rules
    assert word_heads(no_heads) == tree_to_heads(words.tree)
    assert word_heads(project_sentence(no_heads, *_pieces())) == word_heads(no_heads)


# --- L_TREE: the loss against hand-set attention -------------------------------------------

def _kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


def _gold_batch(sentences: list[Sentence], n_tokens: int, kind: str = "dependency",
                word_ends: list[list[bool]] | None = None) -> Batch:
    """Rows of ``n_tokens`` inputs (``<eos>`` and each sentence's tokens, padded) with the
    path lengths of ``kind`` as the DataModule serves them (a row without that gold: mask
    False)."""
    found = [path_lengths(s, kind) for s in sentences]
    side = max((d.shape[0] for d in found if d is not None), default=0)
    lengths = torch.zeros(len(sentences), side, side, dtype=torch.long)
    for b, d in enumerate(found):
        if d is not None:
            lengths[b, : d.shape[0], : d.shape[0]] = torch.from_numpy(d)
    tokens = torch.zeros(len(sentences), n_tokens, dtype=torch.long)
    words = torch.tensor([len(s.words) for s in sentences])
    mask = torch.arange(n_tokens)[None, :] <= words[:, None]  # <eos> and the tokens
    field, rows = ("path_lengths", "path_mask") if kind == "constituency" else \
        ("dep_path_lengths", "dep_path_mask")
    gold = {field: lengths, rows: torch.tensor([d is not None for d in found])}
    return Batch(tokens=tokens, targets=tokens, mask=mask, trees=sentences,
                 word_ends=None if word_ends is None else torch.tensor(word_ends), **gold)


def _hand_attention(rows: list[list[float]]) -> torch.Tensor:
    """(1, 1, T, T) from the causal rows given."""
    T = len(rows)
    a = torch.zeros(1, 1, T, T, dtype=torch.double)
    for t, row in enumerate(rows):
        a[0, 0, t, : len(row)] = torch.tensor(row, dtype=torch.double)
    return a


def test_kl_equals_a_hand_computation() -> None:
    """Three words, one planted head: the mean over the four predicted words of
    KL(S_k ‖ A_{k−1}), the first row (BOS alone) counted with KL 0."""
    sentence = Sentence(["the", "dog", "barks"], heads=[2, 3, 0])
    rows = [[1.0], [0.6, 0.4], [0.2, 0.3, 0.5], [0.1, 0.2, 0.3, 0.4]]
    out = BackboneOutput(hidden=torch.zeros(1, 4, 2), head_attention={0: _hand_attention(rows)})
    head = TreePlantingHead(tree="dependency", layers=0, heads=0)
    result = head(out, _gold_batch([sentence], 4), torch.zeros(1, 4, 3))
    s = [[1.0], _softmax_of_negatives(2, 1), _softmax_of_negatives(1, 2, 1),
         _softmax_of_negatives(2, 3, 2, 1)]
    want = sum(_kl(p, q) for p, q in zip(s, rows)) / 4
    assert result.loss.item() == pytest.approx(want, abs=1e-12)
    # the most attended word is a nearest one for "barks" (dog, D 1) and EOS (barks, D 1),
    # not for "dog" (BOS at 0.6, the nearest being "the")
    assert result.metrics["tpt_top1"].item() == pytest.approx(2 / 3)


def test_kl_over_subwords_reads_word_level_attention() -> None:
    """Pieces [<eos>, the, do, g, barks]: the queries predicting "dog"'s pieces (at "the" and
    "do") are summed, their keys grouped by word, the mass on "do" (inside "dog" itself)
    dropped and the row renormalised."""
    words = Sentence(["the", "dog", "barks"], heads=[2, 3, 0])
    pieces = project_sentence(words, ["the", "do", "g", "barks"], [0, 1, 1, 2])
    rows = [[1.0],                      # <eos> predicts "the"
            [0.6, 0.4],                 # "the" predicts "do"
            [0.1, 0.2, 0.7],            # "do" predicts "g": 0.7 on "do" is dropped
            [0.1, 0.1, 0.3, 0.5],       # "g" predicts "barks"
            [0.1, 0.2, 0.2, 0.2, 0.3]]  # "barks" predicts EOS
    batch = _gold_batch([pieces], 5, word_ends=[[True, False, True, True, True]])
    key_word, query_word = word_maps(batch)
    assert key_word.tolist() == [[0, 1, 2, 2, 3]] and query_word.tolist() == [[1, 2, 2, 3, 4]]
    out = BackboneOutput(hidden=torch.zeros(1, 5, 2), head_attention={0: _hand_attention(rows)})
    result = TreePlantingHead(tree="dependency", layers=0)(out, batch, torch.zeros(1, 5, 3))
    dog = [0.6 + 0.1, 0.4 + 0.2]
    word_rows = [[1.0], [x / sum(dog) for x in dog], [0.1, 0.1, 0.3 + 0.5],
                 [0.1, 0.2, 0.2 + 0.2, 0.3]]
    s = [[1.0], _softmax_of_negatives(2, 1), _softmax_of_negatives(1, 2, 1),
         _softmax_of_negatives(2, 3, 2, 1)]
    want = sum(_kl(p, q) for p, q in zip(s, word_rows)) / 4
    assert result.loss.item() == pytest.approx(want, abs=1e-12)


def test_rows_without_gold_are_left_out_and_a_batch_without_gold_has_no_loss() -> None:
    """A padded row without heads beside one with: the loss is the latter's alone."""
    gold = Sentence(["the", "dog", "barks"], heads=[2, 3, 0])
    bare = Sentence(["a", "cat", "sleeps", "now"])
    a = _hand_attention([[1.0], [0.6, 0.4], [0.2, 0.3, 0.5], [0.1, 0.2, 0.3, 0.4],
                         [0.1, 0.1, 0.2, 0.3, 0.3]])
    head = TreePlantingHead(tree="dependency", layers=0)
    alone = head(BackboneOutput(hidden=torch.zeros(1, 4, 2), head_attention={0: a[..., :4, :4]}),
                 _gold_batch([gold], 4), torch.zeros(1, 4, 3)).loss
    out = BackboneOutput(hidden=torch.zeros(2, 5, 2), head_attention={0: torch.cat([a, a])})
    both = _gold_batch([bare, gold], 5)
    assert both.mask[1].tolist() == [True] * 4 + [False]
    assert head(out, both, torch.zeros(2, 5, 3)).loss.item() == pytest.approx(alone.item())
    assert head(out, _gold_batch([bare, bare], 5), torch.zeros(2, 5, 3)).loss is None
    both.dep_path_lengths = both.dep_path_mask = None
    assert head(out, both, torch.zeros(2, 5, 3)).loss is None


# --- arguments and requirements ------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    ({"tree": "phrase"}, "tree"), ({"layers": []}, "layers"), ({"heads": [0, 0]}, "heads"),
    ({"heads": -1}, "heads"), ({"decay": 0.0}, "decay")])
def test_bad_arguments_are_one_line_setting_errors(kwargs: dict, name: str) -> None:
    with pytest.raises(SettingError) as err:
        TreePlantingHead(**kwargs)
    assert err.value.name == name and "\n" not in str(err.value)


def test_a_backbone_without_attention_is_refused_in_one_line() -> None:
    lstm = AWDLSTM(input_size=8, hidden_size=8, num_layers=2, dropout_input=0.0,
                   dropout_hidden=0.0, dropout_output=0.0, weight_drop=0.0)
    with pytest.raises(InputError) as err:
        SyntaxLM(lstm, heads=[TreePlantingHead()], vocab_size=10)
    message = str(err.value)
    assert "\n" not in message and "TreePlantingHead requires ['head_attention']" in message
    assert "AWDLSTM does not provide" in message


def test_layers_and_heads_outside_the_backbone_are_one_line_errors() -> None:
    with pytest.raises(SettingError, match=r"layer indices in -2\.\.1"):
        SyntaxLM(_transformer(), heads=[TreePlantingHead(layers=2)], vocab_size=10)
    data = _data(tree="constituency")
    model = SyntaxLM(_transformer(), heads=[TreePlantingHead(tree="constituency", heads=[5])],
                     vocab_size=data.vocab_size)
    with pytest.raises(InputError, match=r"have 2 heads \(0\.\.1\)"):
        model(next(iter(data.train_dataloader())))


# --- the gold the DataModule serves ---------------------------------------------------------

def test_the_gold_kind_is_checked_against_the_corpus(tmp_path: Path) -> None:
    """Each kind of tree is its own gold field: a corpus without it, stream mode or random
    trees fail at setup in one line."""
    assert TreePlantingHead(tree="constituency").needs_gold == {"path_lengths"}
    assert TreePlantingHead(tree="dependency").needs_gold == {"dep_path_lengths"}
    ud = SynLMDataModule(UDTreebank(files={s: str(FIXTURES / "sample.conllu")
                                           for s in ("train", "valid", "test")}),
                         mode="sentence", cache_dir=str(tmp_path))
    ud.request(frozenset({"dep_path_lengths"}), who="TreePlantingHead")
    with pytest.raises(InputError) as err:
        ud.request(frozenset({"path_lengths"}), who="TreePlantingHead")
    assert str(err.value).startswith("TreePlantingHead needs constituency gold (path_lengths) "
                                     "but UDTreebank has only dependency gold")
    corpus = SyntheticTreebank(n_train=20, n_valid=4, n_test=4)
    stream = SynLMDataModule(corpus, mode="stream", eval_mode="sentence",
                             cache_dir=str(tmp_path))
    with pytest.raises(InputError) as err:
        stream.request(frozenset({"path_lengths"}), who="TreePlantingHead")
    assert str(err.value) == ("TreePlantingHead needs path_lengths, which training in sentence "
                              "mode serves, but data.mode is stream; set data.mode: sentence")
    random = SynLMDataModule(corpus, mode="sentence", tree_source="random",
                             cache_dir=str(tmp_path))
    with pytest.raises(InputError, match=r"tree_source: random would not replace; use "
                                         r"tree_source: gold$"):
        random.request(frozenset({"dep_path_lengths"}), who="TreePlantingHead")


@pytest.mark.parametrize("subwords", [False, True])
def test_the_datamodule_serves_each_rows_path_lengths(subwords: bool) -> None:
    """Sentence mode: each row's (n + 2, n + 2) path lengths over its words, padded with 0,
    and a word numbering of the inputs (from ``word_ends`` with subwords) that ends at EOS,
    word n + 1."""
    data = _data(subwords, tree="constituency")
    data.request(frozenset({"dep_path_lengths"}), who="test")
    batch = next(iter(data.train_dataloader()))
    _, query_word = word_maps(batch)
    for b, sentence in enumerate(batch.trees):
        n = sentence.word_index[-1] + 1 if subwords else len(sentence.words)
        for field, kind in (("path_lengths", "constituency"), ("dep_path_lengths",
                                                               "dependency")):
            got = getattr(batch, field)[b]
            np.testing.assert_array_equal(got[: n + 2, : n + 2].numpy(),
                                          path_lengths(sentence, kind))
            assert not got[n + 2 :].any() and not got[:, n + 2 :].any()
        assert query_word[b].max().item() == n + 1
    assert batch.path_mask.all() and batch.dep_path_mask.all()
    assert (batch.word_ends is not None) == subwords


# --- with the backbones ---------------------------------------------------------------------

def _data(subwords: bool = False, tree: str | None = None) -> SynLMDataModule:
    """A small synthetic treebank in sentence mode, with the path lengths of ``tree``."""
    data = SynLMDataModule(SyntheticTreebank(n_train=40, n_valid=8, n_test=8), mode="sentence",
                           batch_size=6, subwords=TrainedBPE(vocab_size=300) if subwords
                           else None)
    if tree is not None:
        data.request(frozenset(TreePlantingHead(tree=tree).needs_gold), who="test")
    return data


def _transformer(**kw: object) -> Transformer:
    return Transformer(**{"input_size": 16, "num_layers": 2, "num_heads": 2, "ffn_size": 32,
                          "dropout": 0.0, "attention_layer": None, **kw})


def _gpt2() -> GPT2:
    return GPT2(n_embd=16, n_head=2, n_layer=2, n_positions=64, dropout=0.0,
                attention_layer=None)


def _model(backbone: str, seed: int = 0, **head: object) -> tuple[SyntaxLM, Batch]:
    """A tiny float64 model with the head on layer 0 and a first training batch with gold:
    the Transformer on words (constituency), GPT-2 on BPE pieces (dependency)."""
    subwords = backbone == "GPT2"
    options = {"tree": "dependency" if subwords else "constituency", "layers": 0, **head}
    data = _data(subwords, tree=str(options["tree"]))
    torch.manual_seed(seed)
    made = _gpt2() if subwords else _transformer()
    model = SyntaxLM(made, heads=[TreePlantingHead(**options)], vocab_size=data.vocab_size,
                     decoder_bias=False, init_std=0.25, scale_lr_by_window=False)
    return model.double(), next(iter(data.train_dataloader()))


def _planted_weights(model: SyntaxLM, layer: int) -> torch.Tensor:
    backbone = model.model.backbone
    if isinstance(backbone, GPT2):
        return backbone.model.h[layer].attn.c_attn.weight
    return backbone.layers[layer].attn.qkv.weight


@pytest.mark.parametrize("backbone", ["Transformer", "GPT2"])
def test_the_loss_reaches_the_planted_layers_attention_weights_only(backbone: str) -> None:
    """Layer 0 planted: its q|k weights get a gradient from the loss, layer 1 none."""
    model, batch = _model(backbone)
    result = model(batch)
    loss = result.heads["tpt"].loss
    assert loss is not None and torch.isfinite(loss) and loss > 0
    loss.backward()
    planted, above = _planted_weights(model, 0).grad, _planted_weights(model, 1).grad
    assert planted is not None and planted.abs().sum() > 0
    assert above is None or above.abs().sum() == 0


@pytest.mark.parametrize("backbone", ["Transformer", "GPT2"])
def test_thirty_steps_on_one_batch_plant_the_tree(backbone: str) -> None:
    """The LM and tree-planting losses together, Adam on one batch: the planted head's KL
    falls well below its start and its most attended words become the nearest ones."""
    model, batch = _model(backbone, weight=1.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    seen = []
    for _ in range(30):
        optimizer.zero_grad()
        result = model(batch)
        tpt = result.heads["tpt"]
        seen.append((tpt.loss.item(), tpt.metrics["tpt_top1"].item()))
        loss = -result.target_log_probs[batch.mask].mean() + tpt.loss
        loss.backward()
        optimizer.step()
    assert seen[-1][0] < 0.5 * seen[0][0]
    assert seen[-1][1] > seen[0][1]


@pytest.mark.parametrize("backbone", ["Transformer", "GPT2"])
def test_the_distribution_is_the_lms_and_stays_causal(backbone: str) -> None:
    """The head replaces nothing: log-probabilities equal those of the same weights without
    it; changing a later token leaves every earlier log-probability as it was."""
    model, batch = _model(backbone)
    model.eval()
    with torch.no_grad():
        with_head = model(batch).target_log_probs
        model.model.heads = torch.nn.ModuleList()
        torch.testing.assert_close(model(batch).target_log_probs, with_head)
    tokens = batch.tokens[:1, :8]
    changed = tokens.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % model.model.embedding.num_embeddings
    a, b = model.log_probs(tokens), model.log_probs(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5])


@pytest.mark.parametrize("backbone", ["Transformer", "GPT2"])
def test_evaluation_without_gold_has_no_loss_and_reads_no_attention(
        backbone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raw tokens (scoring, generation): no loss, and no layer's probabilities computed."""
    model, batch = _model(backbone)
    computed = []
    if backbone == "Transformer":
        probabilities = transformer_module.attention_probabilities
        monkeypatch.setattr(transformer_module, "attention_probabilities",
                            lambda *args: computed.append(1) or probabilities(*args))
    else:
        probabilities = GPT2._head_attention
        monkeypatch.setattr(GPT2, "_head_attention",
                            lambda self, *a: computed.append(1) or probabilities(self, *a))
    result = model.model.evaluate(batch.tokens)
    assert result.heads["tpt"].loss is None and not result.heads["tpt"].metrics
    assert computed == []
    model(batch)  # with gold: the planted layer alone
    assert computed == [1]


# --- golden values ---------------------------------------------------------------------------

#: The head's loss on the first batch of a seeded tiny model (float64): the Transformer
#: with constituency distances on words, GPT-2 with dependency distances on BPE pieces.
GOLDEN = {"Transformer": 0.7193162802326386, "GPT2": 0.4238454014221201}


@pytest.mark.parametrize("backbone", sorted(GOLDEN))
def test_golden_loss(backbone: str) -> None:
    model, batch = _model(backbone, seed=1)
    loss = model.eval()(batch).heads["tpt"].loss.item()
    assert loss == pytest.approx(GOLDEN[backbone], abs=1e-6), f"{backbone}: {loss!r}"


# --- staged PTB trees -----------------------------------------------------------------------

def _path_lengths(edges: dict[int, set[int]], start: int, m: int) -> list[int]:
    found, frontier = {start: 0}, [start]
    for node in frontier:
        for other in edges[node]:
            if other not in found:
                found[other] = found[node] + 1
                frontier.append(other)
    return [found[i] for i in range(m)]


def test_distances_equal_path_lengths_on_the_nltk_sample_trees() -> None:
    """On PTB-Concat-Syn's trees (preterminals, unary chains, punctuation): D equals a
    breadth-first search over the tree with BOS and EOS added; likewise for the heads."""
    staged("nltk_treebank", "treebank.zip")
    corpus = PTBConcatSyn(str(staged("ptb").parent))
    sentences = [s for s in corpus.sentences("train") if s.tree is not None][:150]
    assert sentences
    for s in sentences:
        tree = Tree("X", ["<s>", s.tree, "</s>"])
        positions = tree.treepositions()
        index = {p: i for i, p in enumerate(positions)}
        edges: dict[int, set[int]] = {i: set() for i in range(len(positions))}
        for p in positions[1:]:
            edges[index[p]].add(index[p[:-1]])
            edges[index[p[:-1]]].add(index[p])
        leaves = [index[p] for p in tree.treepositions("leaves")]
        want = [[row[j] for j in leaves]
                for row in (_path_lengths(edges, i, len(positions)) for i in leaves)]
        assert constituency_path_lengths(s.tree).tolist() == want, s.source
        heads = tree_to_heads(s.tree)
        n = len(heads)
        root = heads.index(0) + 1
        arcs: dict[int, set[int]] = {i: set() for i in range(n + 2)}
        for d, h in [*enumerate(heads, 1), (0, root), (n + 1, root)]:
            if h:
                arcs[d].add(h)
                arcs[h].add(d)
        want = [_path_lengths(arcs, i, n + 2) for i in range(n + 2)]
        assert dependency_path_lengths(heads).tolist() == want, s.source


# --- the shipped configs --------------------------------------------------------------------

TINY_TRANSFORMER = ["--model.backbone.init_args.input_size=16",
                    "--model.backbone.init_args.num_layers=2",
                    "--model.backbone.init_args.num_heads=2",
                    "--model.backbone.init_args.ffn_size=32", "--model.init_std=0.25",
                    "--trainer.accumulate_grad_batches=1"]


@pytest.mark.parametrize("config", ["tpt_transformer.yaml", "tpt_gpt2.yaml"])
def test_shipped_configs_fit(config: str, tmp_path: Path) -> None:
    """Each config trains a few steps through the CLI on the synthetic treebank, logging
    the tree-planting loss, and validates as a plain LM."""
    sizes = TINY_TRANSFORMER if "transformer" in config else \
        [f"--model.backbone.init_args.pretrained={local_gpt2()}"]
    args = ["fit", "--config", str(REPO_CONFIGS / config), *TINY_OVERRIDES, *sizes,
            "--data.max_tokens=128", "--trainer.max_steps=2", "--trainer.limit_val_batches=1",
            "--trainer.val_check_interval=2", "--trainer.num_sanity_val_steps=0",
            "--trainer.log_every_n_steps=1", f"--trainer.default_root_dir={tmp_path}"]
    assert run_cli(args) == 0
    metrics = (tmp_path / "version_0" / "metrics.csv").read_text()
    assert "train/tpt_loss_step" in metrics and "train/tpt_top1_step" in metrics
    assert "val/ppl" in metrics
