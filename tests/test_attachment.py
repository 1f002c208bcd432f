"""Directed and undirected dependency accuracy on constituency trees (``synlm.metrics.attachment``,
``synlm.syntax.head_rules``, ``synlm parse`` on an arcs structure).

``fixtures/attachment``: 14 hand-written PTB trees (``gold.mrg``: punctuation, traces, ``$``,
a PRN in brackets, a FRAG opening with a quotation mark, repeated words, a one-word sentence,
an NP headed by ``$``, an escaped ``3\\/4``), 7 sets of predicted heads (gold, right and left
chains, all to the last word, 3 random with seed 0) and what the released evaluation code
computes on them (``reference.json``), against two gold files. First the trees' heads by
``tree_heads(tree, "yamada")``, written (every token but traces, with its tag) as the CoNLL
file both codes read; then ``gold.stanford.conllx``, CoreNLP's Stanford basic dependencies of
the trees (stanfordnlp/CoreNLP 1b7edd19c4d0d7b1f13a2591425b9b60a0b1af7a compiled from source,
``EnglishGrammaticalStructure -treeFile gold.mrg -basic -conllx``), the papers' gold. On each,
StructFormer's ``tree_utils.evald`` (yikangshen/UDGN 17f03ddff2df4570db4e0eae151f06f6c12f9a2c,
directed and undirected, over ``DependencyGraph``s built as its ``test_phrase_grammar.test``
builds them) gave ``dda_words`` and ``uda_words``, and UDGN's ``data_dep.Corpus.tokenize`` and
``test_phrase_grammar.test(mode="argmax")`` (1bd52ecc7b348ca591957f8001867a273e080929, the
model replaced by one-hot heads; the file's column 4 given the PTB tag, as its files had it)
gave the gold heads and ``dda``, ``uda`` (nltk 3.10.4, torch 2.13, float64 Python floats).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from test_dependency_head import lstm

from staged import staged
from synlm.backbones.structformer import StructFormer
from synlm.backbones.udgn import UDGN
from synlm.cli import main as cli_main
from synlm.commands import parse
from synlm.data.normalization import normalizer
from synlm.data.vocab import Vocab
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.lm import SyntaxLM
from synlm.metrics.attachment import KEYS, DependencyAccuracy, sentence_counts
from synlm.outputs import BackboneOutput, Batch, HeadOutput, Structure
from synlm.parsing import dependency_accuracy, model_heads
from synlm.syntax import read_malt_zip, read_trees
from synlm.syntax.head_rules import (
    HEAD_RULES,
    evaluation_dependencies,
    evaluation_heads,
    kept_heads,
    read_gold_heads,
    tree_heads,
)
from synlm.syntax.trees import WORD_TAGS

FIXTURE = Path(__file__).parent / "fixtures" / "attachment"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
TREES = [t for t, _ in read_trees(FIXTURE / "gold.mrg")]
STANFORD = REFERENCE["stanford"]
CONVERTED = FIXTURE / "gold.stanford.conllx"


def scores(pred: list[int], gold: list[int], words: list[str]) -> dict[str, float]:
    metric = DependencyAccuracy()
    metric.update([pred], [gold], [words])
    return metric.compute()


def test_gold_heads_are_the_released_reading_of_the_converted_trees() -> None:
    """Punctuation, ``$`` and traces dropped, a word under one re-attached above it: the
    words and heads UDGN's ``data_dep`` reads from the converted file."""
    got = [evaluation_heads(t) for t in TREES]
    assert [w for w, _, _ in got] == [s for _, _, s in got] == REFERENCE["words"]
    assert [h for _, h, _ in got] == REFERENCE["gold_heads"]


@pytest.mark.parametrize("name", sorted(REFERENCE["predictions"]))
def test_accuracies_equal_the_released_code(name: str) -> None:
    case = REFERENCE["predictions"][name]
    metric = DependencyAccuracy()
    metric.update(case["heads"], REFERENCE["gold_heads"], REFERENCE["words"])
    got = metric.compute()
    for key in KEYS:
        assert got[key] == pytest.approx(case[key], abs=1e-12), key
    assert (metric.n_sentences, metric.n_words) == (14, 95)


def test_the_fixture_tells_positions_from_words() -> None:
    """Repeated words (two ``the``, two ``old``) let StructFormer's word pairs match another
    occurrence's arc: its figures exceed UDGN's on the same heads."""
    flat = REFERENCE["predictions"]["flat_last"]
    assert (flat["dda"], flat["dda_words"]) == pytest.approx((11 / 95, 19 / 95))


def test_a_chain() -> None:
    """Gold: a right chain a->b->c->d->ROOT; predicted: the left chain. No arc has its
    direction, three of four have their words (the root pair does not)."""
    words, gold, left = list("abcd"), [2, 3, 4, 0], [0, 1, 2, 3]
    assert scores(gold, gold, words) == dict.fromkeys(KEYS, 1.0)
    assert scores(left, gold, words) == {"dda": 0.0, "uda": 0.75, "dda_words": 0.0,
                                         "uda_words": 0.75}


def test_a_flat_tree() -> None:
    """A flat NP's words all depend on its head noun; every word on ROOT gets the root."""
    (tree,) = read_trees_text("(NP (DT the) (JJ big) (NN dog))")
    words, gold, _ = evaluation_heads(tree)
    assert (words, gold) == (["the", "big", "dog"], [3, 3, 0])
    assert scores([0, 0, 0], gold, words) == dict.fromkeys(KEYS, pytest.approx(1 / 3))


def test_punctuation_is_removed_and_its_dependents_climb() -> None:
    """``;`` and ``.`` go; a word whose head is dropped takes that token's head, up to the
    root, so a dropped root leaves several roots."""
    (tree,) = read_trees_text("(S (NP (PRP He)) (VP (VBD ran)) (: ;) "
                              "(S (NP (PRP she)) (VP (VBD walked))) (. .))")
    assert tree_heads(tree)[2] == [2, 0, 2, 5, 2, 2]
    assert evaluation_heads(tree)[:2] == (["He", "ran", "she", "walked"], [2, 0, 4, 2])
    assert kept_heads([2, 0, 2], [True, False, True]) == [0, 0]
    assert kept_heads([3, 3, 4, 0], [True, False, False, True]) == [2, 0]
    frag = TREES[3]  # `` Not this year . '': no entry for FRAG, its first child but the quote
    assert evaluation_heads(frag)[:2] == (["Not", "this", "year"], [0, 3, 1])
    assert evaluation_heads(frag, "collins")[:2] == (["Not", "this", "year"], [0, 3, 0])
    money = TREES[12]  # $ 5 million .: QP's head is $, which is dropped
    assert (tree_heads(money)[2], evaluation_heads(money)[1]) == ([0, 1, 1, 1], [0, 0])


def test_undirected_is_never_below_directed() -> None:
    rng = random.Random(1)
    for words, gold in zip(REFERENCE["words"], REFERENCE["gold_heads"]):
        n = len(words)
        for _ in range(20):
            pred = [rng.choice([h for h in range(n + 1) if h != i]) for i in range(1, n + 1)]
            dda, uda, dda_words, uda_words = sentence_counts(pred, gold, words)
            assert uda >= dda and uda_words >= dda_words


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="2 predicted heads, 3 gold heads and 3 words"):
        sentence_counts([0, 1], [0, 1, 1], list("abc"))
    with pytest.raises(ValueError, match="head rules must be one of"):
        tree_heads(TREES[0], "stanford")
    assert DependencyAccuracy().compute()["dda"] != DependencyAccuracy().compute()["dda"]  # NaN


def test_filters_keep_the_protocol_and_max_length() -> None:
    words, _, _ = evaluation_dependencies(TREES, max_length=4)
    assert [len(w) for w in words] == [3, 4, 4, 1, 2]
    words, _, _ = evaluation_dependencies(TREES, "urnng", max_length=4)  # 2 words or more
    assert [len(w) for w in words] == [3, 4, 4, 2]


def test_yamada_rules_give_the_nltk_dependency_treebank() -> None:
    """The head rules against NLTK's ``dependency_treebank`` (the same 3,914 sentences,
    converted Penn2Malt's way): after the punctuation rule, Yamada & Matsumoto's table gives
    82,331 of its 82,369 words their head (3,901 sentences whole), Collins' 72,578; before
    it, 94,042 of the 94,084 tokens."""
    trees = read_trees(staged("nltk_treebank", "treebank.zip"))
    deps = read_malt_zip(staged("nltk_treebank", "dependency_treebank.zip"))
    for rules, want in (("yamada", (94042, 82331, 3901)), ("collins", (80375, 72578, 1554))):
        all_same = same = whole = words = 0
        for (tree, _), dep in zip(trees, deps, strict=True):
            tokens, tags, heads = tree_heads(tree, rules)
            assert tokens == dep.words
            all_same += sum(a == b for a, b in zip(heads, dep.heads))
            keep = [tag in WORD_TAGS for tag in tags]
            ours, theirs = kept_heads(heads, keep), kept_heads(dep.heads, keep)
            same += sum(a == b for a, b in zip(ours, theirs))
            whole += ours == theirs
            words += len(ours)
        assert (all_same, same, whole, words) == (*want, 82369), rules


def read_trees_text(text: str) -> list:
    from synlm.syntax import read_brackets

    return [t for t, _ in read_brackets(text, "test")]


class LeftChainLM:
    """An arcs structure whose every word heads the next: word 1 on ROOT (row 0)."""

    vocab = Vocab(["<eos>", "<unk>"])
    normalization = "ptb"
    structures = {"arcs": Structure("arcs", "arcs")}

    def induce(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> dict[str, torch.Tensor]:
        B, T = tokens.shape
        return {"arcs": torch.diag(torch.ones(T - 1), -1).expand(B, T, T)}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert parse.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_parse_reports_the_accuracies_of_an_arcs_structure(capsys, monkeypatch) -> None:
    monkeypatch.setattr("synlm.loading.load_model", lambda path: LeftChainLM())
    got = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"))
    want = REFERENCE["predictions"]["left_chain"]
    assert got == {"treebank": str(FIXTURE / "gold.mrg"), "structure": "arcs",
                   "protocol": "onlstm", "head_rules": "yamada", "gold_heads": None,
                   "arcs_decoder": "argmax",
                   "max_length": None,
                   **{k: round(100 * want[k], 2) for k in KEYS},
                   "n_sentences": 14, "n_words": 95, "unknown_share": 1.0}
    short = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"),
                "--max-length", "4", "--head-rules", "collins")
    assert (short["n_sentences"], short["n_words"], short["head_rules"]) == (5, 14, "collins")
    with pytest.raises(SystemExit, match="2"):
        parse.main(["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"),
                    "--head-rules", "penn"])
    assert "invalid choice: 'penn'" in capsys.readouterr().err


class BilinearArcsHead(SyntaxHead):
    """Arcs from a bilinear score of the hidden states (docs/design.md's structure head)."""

    def __init__(self) -> None:
        super().__init__("arcs", structure_kind="arcs")

    def bind(self, context: HeadContext) -> None:
        size = context.backbone.output_size
        self.bilinear = torch.nn.Bilinear(size, size, 1)

    def forward(self, out: BackboneOutput, batch: Batch, logits: torch.Tensor) -> HeadOutput:
        h = out.hidden  # (B, T, H)
        T = h.size(1)
        pairs = (h[:, :, None].expand(-1, -1, T, -1), h[:, None].expand(-1, T, -1, -1))
        return HeadOutput(structure=self.bilinear(*pairs).squeeze(-1))  # (B, T, T)


def test_parse_scores_a_model_that_induces_arcs(capsys, monkeypatch) -> None:
    """A SyntaxLM (a tiny AWD-LSTM under an untrained arcs head) end to end: the command's
    figures are those of its argmax heads against the fixture's gold heads."""
    normalize = normalizer("ptb")
    words = sorted({normalize(w) for s in REFERENCE["words"] for w in s})
    vocab = Vocab(["<eos>", "<unk>", *words])
    torch.manual_seed(0)
    model = SyntaxLM(lstm(), heads=[BilinearArcsHead()], vocab_size=len(vocab.itos)).eval()
    model.vocab, model.normalization = vocab, "ptb"
    monkeypatch.setattr("synlm.loading.load_model", lambda path: model)
    got = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"))
    heads = model_heads(model, REFERENCE["words"], "arcs")
    assert {k: got[k] for k in (*KEYS, "n_sentences", "n_words")} == dependency_accuracy(
        heads, REFERENCE["gold_heads"], REFERENCE["words"])
    assert got["structure"] == "arcs" and got["unknown_share"] == 0.0
    assert 0 < got["dda"] < 100 and got["uda"] >= got["dda"]


def test_the_head_rules_offered_are_the_modules_own() -> None:
    assert tuple(sorted(HEAD_RULES)) == parse.HEAD_RULES


@pytest.mark.parametrize("backbone", [
    lambda: StructFormer(hidden_size=16, num_layers=2, num_heads=2, parser_layers=2,
                         conv_size=3, relative_bias=True),
    lambda: UDGN(emb_size=8, head_size=4, num_layers=2, num_heads=2, parser_layers=2),
], ids=["StructFormer", "UDGN"])
def test_a_bidirectional_backbone_reads_each_sentence_alone(capsys, monkeypatch,
                                                            backbone) -> None:
    """StructFormer's and UDGN's arcs, read with each row's length: the figures of one
    sentence a batch and of all in one batch (padded to the longest) are the same."""
    normalize = normalizer("ptb")
    vocab = Vocab(["<eos>", "<unk>",
                   *sorted({normalize(w) for s in REFERENCE["words"] for w in s})])
    torch.manual_seed(0)
    model = SyntaxLM(backbone(), vocab_size=len(vocab.itos)).eval()
    model.vocab, model.normalization = vocab, "ptb"
    name = next(n for n, s in model.structures.items() if s.kind == "arcs")
    monkeypatch.setattr("synlm.loading.load_model", lambda path: model)
    bank = str(FIXTURE / "gold.mrg")
    alone = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", name,
                "--batch-size", "1")
    together = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--structure", name)
    assert alone == together and alone["structure"] == name and alone["n_words"] == 95


def test_untrained_models_give_the_mean_and_std_of_each_accuracy(capsys, tmp_path) -> None:
    """``--config`` with an arcs structure: each figure's mean and std over the seeds'
    models, as for trees."""
    import yaml

    config = tmp_path / "arcs.yaml"
    config.write_text(yaml.safe_dump({
        "seed_everything": 1,
        "model": {"backbone": {"class_path": "AWDLSTM", "init_args": {
            "input_size": 16, "hidden_size": 24, "num_layers": 2}},
            "heads": [{"class_path": "test_attachment.BilinearArcsHead"}]},
        "data": {"corpus": {"class_path": "SyntheticTreebank"}, "mode": "sentence"}}))
    args = ["parse", "--config", str(config), "--treebank", str(FIXTURE / "gold.mrg")]
    assert cli_main([*args, "--seeds", "2"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (got["n_models"], got["n_sentences"], got["n_words"]) == (2, 14, 95)
    assert got["trees"] == f"{config}:arcs:untrained:seeds 0-1"
    assert got["head_rules"] == "yamada" and got["dda_std"] > 0 and got["uda"] >= got["dda"]
    assert cli_main([*args, "--gold-heads", str(CONVERTED)]) == 0
    stanford = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (stanford["head_rules"], stanford["gold_heads"]) == (None, str(CONVERTED))
    assert stanford["dda"] != got["dda"] and stanford["n_words"] == 95


def test_a_converters_heads_are_read_as_the_released_code_reads_them() -> None:
    """CoreNLP's Stanford basic dependencies of the trees (``gold.stanford.conllx``: its
    ``EnglishGrammaticalStructure -basic -conllx``, stanfordnlp/CoreNLP
    1b7edd19c4d0d7b1f13a2591425b9b60a0b1af7a, brackets written ``(``): after the punctuation
    rule, the heads UDGN's ``data_dep`` reads from the same file (its column 4 given the PTB
    tag, as its files had it)."""
    gold = evaluation_dependencies(TREES, converted=read_gold_heads(str(CONVERTED), TREES))
    assert (gold.words, gold.heads) == (REFERENCE["words"], STANFORD["gold_heads"])
    assert gold.gold_words[-1] == ["It", "rose", "3/4", "to", "3/4"]  # the tree's 3\\/4


@pytest.mark.parametrize("name", sorted(STANFORD["predictions"]))
def test_accuracies_against_a_converter_equal_the_released_code(name: str) -> None:
    """The same predicted heads (``gold``: the Yamada heads) against the Stanford heads; the
    word pairs name the file's ``3/4`` on the gold side, the tree's ``3\\/4`` on the other."""
    gold = evaluation_dependencies(TREES, converted=read_gold_heads(str(CONVERTED), TREES))
    metric = DependencyAccuracy()
    metric.update(REFERENCE["predictions"][name]["heads"], gold.heads, gold.words,
                  gold.gold_words)
    got, want = metric.compute(), STANFORD["predictions"][name]
    for key in KEYS:
        assert got[key] == pytest.approx(want[key], abs=1e-12), key


def test_parse_scores_against_a_converters_heads(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("synlm.loading.load_model", lambda path: LeftChainLM())
    bank = str(FIXTURE / "gold.mrg")
    got = run(capsys, "--ckpt_path", "x.ckpt", "--treebank", bank, "--gold-heads",
              str(CONVERTED))
    want = STANFORD["predictions"]["left_chain"]
    assert (got["head_rules"], got["gold_heads"]) == (None, str(CONVERTED))
    assert {k: got[k] for k in KEYS} == {k: round(100 * want[k], 2) for k in KEYS}
    blocks = CONVERTED.read_text(encoding="utf-8").split("\n\n")
    short = tmp_path / "short.conllx"
    short.write_text("\n\n".join(blocks[:12]) + "\n", encoding="utf-8")
    renamed = tmp_path / "renamed.conllx"
    renamed.write_text("\n\n".join(blocks).replace("\tcat\t", "\tdog\t"), encoding="utf-8")
    for path, error in (
            (short, f"--gold-heads: {short}: 12 sentences for the 14 trees of --treebank; "
                    "expected one a tree, in order"),
            (renamed, f"--gold-heads: {renamed}:20: the words 'The dog saw the dog and the "
                      "bird .' are not its tree's 'The cat saw the dog and the bird .' (traces "
                      "left out)")):
        assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", bank, "--gold-heads",
                           str(path)]) == 2
        assert capsys.readouterr().err.strip() == f"synlm parse: {error}"
    monkeypatch.setattr(LeftChainLM, "structures", {"arcs": Structure("arcs", "distances")})
    assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", bank, "--gold-heads",
                       str(CONVERTED)]) == 2
    assert capsys.readouterr().err.strip() == "synlm parse: --gold-heads: 'arcs' gives trees, " \
        "scored against the treebank's own; the gold heads score an arcs structure"
    for wrong in (["--ckpt_path", "x.ckpt", "--treebank", "x.conllu"],
                  ["--baseline", "right-branching", "--treebank", bank]):
        assert parse.main([*wrong, "--gold-heads", str(CONVERTED)]) == 2
        assert capsys.readouterr().err.strip() == (
            "synlm parse: --gold-heads FILE gives the gold heads of --treebank's trees for an "
            "arcs structure: give bracketed trees and --ckpt_path or --config")


def test_a_malformed_gold_file_is_one_line(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("synlm.loading.load_model", lambda path: LeftChainLM())
    bad = tmp_path / "bad.conllx"
    bad.write_text("1\tThe\t_\tDT\tDT\t_\tx\tdet\t_\t_\n", encoding="utf-8")
    assert parse.main(["--ckpt_path", "x.ckpt", "--treebank", str(FIXTURE / "gold.mrg"),
                       "--gold-heads", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"synlm parse: --gold-heads: {bad}:1: expected ") and "\n" not in err
