"""TreeReg (Nandi, Manning & Murty 2025): the released regulariser's loss, SCIN chart,
accuracy and gradient on fixed states; the gold splits; a hand computation; rows without
trees; arguments and backbones refused in one line; learning, composition with the
tree-planting head, and the shipped configs through the CLI.

``fixtures/tree_reg/treereg.json`` is the output of the released ``TreeRegularizer``
(github.com/ananjan-nandi-9/tree_regularization at commit
106ebd3bcc69ef5a642cfefee1af3237ccdb5dad, ``src/regularizer/regularizer_main.py`` and
``scin_computer.py`` unchanged, run with torch 2.13 in float64) on four sentences (13, 5, 11
and 2 tokens; three words cut into two or three pieces): ``orth_bidir=True``,
``sci_heads`` 0.25 of 32 dimensions of layer 1 of three random (4, 14, 32) layers, the SOS
position dropped (``trainer_main.py``: ``hidden_states[:, 1:, :]``), parses from the
released ``generic_tree_helper.py`` path (``reformat_tree_generic``,
``chomsky_normal_form()``, ``tree_to_parse_decisions(check=False)``), word boundaries from
``get_word_boundaries``. It holds the states, the sentences (tree, pieces, word of each
piece), the released parse decisions and boundaries, every SCIN chart entry, each sentence's
score, the bracketing accuracy, the loss −mean(scores) and its gradient on the layer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from nltk import Tree

from conftest import TINY_OVERRIDES, local_gpt2, run_cli
from synlm import SynLMDataModule, SyntaxLM
from synlm.backbones import GPT2, Transformer
from synlm.backbones.base import Backbone, BackboneSpec
from synlm.catalog import REPO_CONFIGS
from synlm.data.corpora import TextFiles
from synlm.data.subwords import TrainedBPE
from synlm.data.synthetic import SyntheticTreebank
from synlm.errors import InputError, SettingError
from synlm.heads import TreePlantingHead, TreeRegHead
from synlm.heads.base import HeadContext
from synlm.heads.tree_reg import gold_splits, orthogonal_norms, word_starts
from synlm.outputs import BackboneOutput, Batch
from synlm.syntax import Sentence
from synlm.syntax.subwords import project_sentence

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "tree_reg" / "treereg.json")
                     .read_text())


def _bound(head: TreeRegHead, sizes: tuple[int, ...]) -> TreeRegHead:
    spec = BackboneSpec(input_size=sizes[-1], output_size=sizes[-1], layer_sizes=sizes,
                        provides=frozenset({"layers"}), recurrent=False)
    head.bind(HeadContext(10, torch.nn.Embedding(10, sizes[-1]),
                          torch.nn.Linear(sizes[-1], 10), spec))
    return head


def _batch(sentences: list[Sentence | None], width: int) -> Batch:
    """Rows ``[<eos>, w_1..w_n]`` padded to ``width`` inputs, with their gold sentences."""
    lengths = torch.tensor([len(s.words) + 1 if s else 2 for s in sentences])
    mask = torch.arange(width)[None] < lengths[:, None]
    zeros = torch.zeros(len(sentences), width, dtype=torch.long)
    return Batch(tokens=zeros, targets=zeros, mask=mask, trees=sentences, lengths=lengths)


def _fixture_sentences() -> list[Sentence]:
    found = []
    for s in FIXTURE["sentences"]:
        tree = Tree.fromstring(s["tree"])
        found.append(project_sentence(Sentence(tree.leaves(), tree), s["pieces"],
                                      s["word_index"]))
    return found


def _fixture_states() -> list[torch.Tensor]:
    return [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in FIXTURE["states"]]


# --- equal to the released regulariser ------------------------------------------------------

def test_the_loss_accuracy_and_gradient_equal_the_released_regulariser() -> None:
    settings = FIXTURE["settings"]
    assert FIXTURE["commit"] == "106ebd3bcc69ef5a642cfefee1af3237ccdb5dad"
    states = _fixture_states()
    head = _bound(TreeRegHead(layer=settings["layer"], fraction=settings["sci_heads"]),
                  (settings["hidden_size"],) * len(states))
    sentences = _fixture_sentences()
    result = head(BackboneOutput(hidden=states[-1], layers=states),
                  _batch(sentences, states[0].size(1)), torch.zeros(0))
    assert result.loss.item() == pytest.approx(FIXTURE["loss"], abs=1e-12)
    assert result.metrics["treereg_acc"].item() == pytest.approx(FIXTURE["accuracy"], abs=1e-12)
    result.loss.backward()
    want = torch.tensor(FIXTURE["grad"], dtype=torch.float64)
    torch.testing.assert_close(states[1].grad, want, atol=1e-12, rtol=0)
    assert states[0].grad is None and states[2].grad is None
    assert not states[1].grad[:, 0].any() and not states[1].grad[..., 8:].any()


def test_each_sentences_score_equals_the_released_one() -> None:
    """One sentence with a tree beside rows without: the loss is −its score alone."""
    states = _fixture_states()
    head = _bound(TreeRegHead(layer=1), (32, 32, 32))
    sentences = _fixture_sentences()
    for b, want in enumerate(FIXTURE["sentence_scores"]):
        rows: list[Sentence | None] = [None] * len(sentences)
        rows[b] = sentences[b]
        loss = head(BackboneOutput(hidden=states[-1], layers=states),
                    _batch(rows, states[0].size(1)), torch.zeros(0)).loss
        assert loss.item() == pytest.approx(-want, abs=1e-12)


def test_the_scin_chart_equals_the_released_one() -> None:
    """chart(i, j) = ‖orth(h_j; h_{i−1})‖ = C[i − 1, j], 0 at the start and past the end."""
    states = torch.tensor(FIXTURE["states"][1], dtype=torch.float64)[:, 1:, :8]
    chart = orthogonal_norms(states)
    for b, (entries, sentence) in enumerate(zip(FIXTURE["charts"], _fixture_sentences())):
        n = len(sentence.words)
        for i, j, value in entries:
            got = 0.0 if i == 0 or i == n else chart[b, i - 1, j].item()
            assert got == pytest.approx(value, abs=1e-12), (b, i, j)


def test_the_gold_splits_are_the_released_parse_decisions() -> None:
    """Every released decision over three words or more, as (i, j + 1): k + 1."""
    for sentence, parse, starts in zip(_fixture_sentences(), FIXTURE["parses"],
                                       FIXTURE["word_boundaries"]):
        assert word_starts(sentence) == [bool(x) for x in starts]
        scored = {key: split for key, split in parse.items()
                  if sum(starts[int(key.split()[0]) + 1 : int(key.split()[1])]) >= 2}
        got = {f"{i} {j + 1}": k + 1 for i, j, k in gold_splits(sentence.tree,
                                                                word_starts(sentence))}
        assert got == scored


def test_a_three_word_span_by_hand() -> None:
    """h = (1, 0), (1, 1), (0, 1) for "a b c", split a | b c: candidates k = 0, scored
    ‖orth(h_2; h_0)‖ + ‖orth(h_1; h_0)‖ = 1 + 1, and k = 1, scored 2 ‖orth(h_2; h_1)‖ = √2
    (SCIN(1, 2) has no left context; SCIN(3, 3) is counted in both of its terms)."""
    tree = Tree.fromstring("(S (A a) (B (B b) (C c)))")
    states = torch.tensor([[[5.0, 5.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]],
                          dtype=torch.float64)
    head = _bound(TreeRegHead(layer=0, fraction=1.0), (2,))
    result = head(BackboneOutput(hidden=states, layers=[states]),
                  _batch([Sentence(tree.leaves(), tree)], 4), torch.zeros(0))
    want = -math.log(math.exp(2) / (math.exp(2) + math.exp(math.sqrt(2))))
    assert result.loss.item() == pytest.approx(want, abs=1e-12)
    assert result.metrics["treereg_acc"].item() == 1.0


def test_no_tree_no_loss_and_short_sentences_score_zero() -> None:
    states = torch.randn(2, 4, 4, dtype=torch.float64)
    head = _bound(TreeRegHead(layer=0, fraction=1.0), (4,))
    out = BackboneOutput(hidden=states, layers=[states])
    assert head(out, _batch([None, None], 4), torch.zeros(0)).loss is None
    two = Tree.fromstring("(S (A a) (B b))")
    result = head(out, _batch([Sentence(two.leaves(), two), None], 4), torch.zeros(0))
    assert result.loss.item() == 0.0 and result.metrics["treereg_acc"].item() == 0.0


# --- arguments and backbones ----------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [({"fraction": 0.0}, "fraction"),
                                          ({"fraction": 1.5}, "fraction"),
                                          ({"layer": 1.5}, "layer")])
def test_bad_arguments_are_one_line_setting_errors(kwargs: dict, name: str) -> None:
    with pytest.raises(SettingError) as err:
        TreeRegHead(**kwargs)
    assert err.value.name == name and "\n" not in str(err.value)


def test_a_layer_outside_the_stack_is_a_one_line_error() -> None:
    with pytest.raises(SettingError) as err:
        SyntaxLM(_transformer(), heads=[TreeRegHead(layer=2)], vocab_size=10)
    assert str(err.value) == "layer=2: expected a layer index in -2..1 for the 2 backbone layers"
    with pytest.raises(SettingError, match=r"^fraction=0\.01: expected at least one of the "
                                           r"layer's 16 dimensions$"):
        SyntaxLM(_transformer(), heads=[TreeRegHead(fraction=0.01)], vocab_size=10)


class _Bare(Backbone):
    """A backbone that returns its top states alone (no ``layers``)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.spec = BackboneSpec(input_size=4, output_size=4, layer_sizes=(4,),
                                 provides=frozenset(), recurrent=False)

    def forward(self, x: torch.Tensor, state: object = None) -> BackboneOutput:
        return BackboneOutput(hidden=self.linear(x))


def test_a_backbone_without_layers_is_refused_in_one_line() -> None:
    with pytest.raises(InputError) as err:
        SyntaxLM(_Bare(), heads=[TreeRegHead()], vocab_size=10)
    message = str(err.value)
    assert "\n" not in message and "TreeRegHead requires ['layers']" in message
    assert "_Bare does not provide" in message


def test_a_bidirectional_backbone_is_refused_in_one_line() -> None:
    spec = BackboneSpec(input_size=4, output_size=4, layer_sizes=(4,),
                        provides=frozenset({"layers"}), recurrent=False, bidirectional=True)
    with pytest.raises(InputError, match="reads the prefix states of a left-to-right model, but "
                                         "the backbone is bidirectional$"):
        TreeRegHead(layer=0).bind(HeadContext(10, torch.nn.Embedding(10, 4),
                                              torch.nn.Linear(4, 10), spec))


def test_a_corpus_without_trees_is_refused_at_setup_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("the dog barks\n")
    data = SynLMDataModule(TextFiles({s: str(text) for s in ("train", "valid", "test")}),
                           mode="sentence", cache_dir=str(tmp_path))
    with pytest.raises(InputError) as err:
        data.request(frozenset(TreeRegHead().needs_gold), who="TreeRegHead")
    message = str(err.value)
    assert "\n" not in message and message.startswith("TreeRegHead needs gold sentences (trees)")
    assert "TextFiles has no gold syntax" in message


# --- with the backbones ---------------------------------------------------------------------

def _transformer() -> Transformer:
    return Transformer(input_size=16, num_layers=2, num_heads=2, ffn_size=32, dropout=0.0,
                       attention_layer=None)


def _model(backbone: str, *heads: object) -> tuple[SyntaxLM, Batch]:
    """A tiny float64 model with TreeReg on layer 0 (and ``heads``) and a first training
    batch of the synthetic treebank: the Transformer on words, GPT-2 on BPE pieces."""
    subwords = backbone == "GPT2"
    data = SynLMDataModule(SyntheticTreebank(n_train=40, n_valid=8, n_test=8), mode="sentence",
                           batch_size=6, subwords=TrainedBPE(vocab_size=300) if subwords
                           else None)
    torch.manual_seed(0)
    made = GPT2(n_embd=16, n_head=2, n_layer=2, n_positions=64, dropout=0.0,
                attention_layer=None) if subwords else _transformer()
    model = SyntaxLM(made, heads=[TreeRegHead(layer=0, fraction=0.5), *heads],
                     vocab_size=data.vocab_size, decoder_bias=False, init_std=0.25,
                     scale_lr_by_window=False)
    for head in model.heads:
        data.request(frozenset(head.needs_gold), who=type(head).__name__)
    return model.double(), next(iter(data.train_dataloader()))


@pytest.mark.parametrize("backbone", ["Transformer", "GPT2"])
def test_training_on_one_batch_lowers_the_loss(backbone: str) -> None:
    """The LM and TreeReg losses together, Adam on one batch: L_TR falls well below its
    start and the gold splits come to score highest."""
    model, batch = _model(backbone)
    assert (batch.word_ends is not None) == (backbone == "GPT2")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = model(batch).heads["treereg"]
    for _ in range(30):
        optimizer.zero_grad()
        result = model(batch)
        (result.heads["treereg"].loss - result.target_log_probs[batch.mask].mean()).backward()
        optimizer.step()
    after = model(batch).heads["treereg"]
    assert after.loss < 0.5 * before.loss
    assert after.metrics["treereg_acc"] > before.metrics["treereg_acc"]


def test_it_composes_with_the_tree_planting_head() -> None:
    """Both losses from one forward; each reaches the layer it reads (TreeReg layer 0's
    output, tree-planting layer 1's attention)."""
    model, batch = _model("Transformer", TreePlantingHead(tree="constituency", layers=1))
    result = model(batch)
    assert set(result.heads) == {"treereg", "tpt"}
    treereg, tpt = result.heads["treereg"].loss, result.heads["tpt"].loss
    assert treereg is not None and tpt is not None and treereg > 0 and tpt > 0
    treereg.backward()
    layers = model.model.backbone.layers
    assert layers[0].attn.qkv.weight.grad.abs().sum() > 0
    assert layers[1].attn.qkv.weight.grad is None or not layers[1].attn.qkv.weight.grad.any()


def test_evaluation_without_trees_has_no_loss() -> None:
    model, batch = _model("Transformer")
    result = model.model.evaluate(batch.tokens)
    assert result.heads["treereg"].loss is None and not result.heads["treereg"].metrics


# --- the shipped configs --------------------------------------------------------------------

TINY_TRANSFORMER = ["--model.backbone.init_args.input_size=16",
                    "--model.backbone.init_args.num_layers=3",
                    "--model.backbone.init_args.num_heads=2",
                    "--model.backbone.init_args.ffn_size=32", "--model.init_std=0.25",
                    "--trainer.accumulate_grad_batches=1"]


def _fit(config: str, root: Path, *extra: str) -> list[float]:
    """``synlm fit`` of ``config`` on the synthetic treebank; the L_TR logged at each step."""
    steps = 40 if "transformer" in config else 2
    args = ["fit", "--config", str(REPO_CONFIGS / config), *TINY_OVERRIDES,
            "--data.max_tokens=128", f"--trainer.max_steps={steps}",
            "--trainer.limit_val_batches=1", "--trainer.val_check_interval=1.0",
            "--trainer.num_sanity_val_steps=0", "--trainer.log_every_n_steps=1",
            f"--trainer.default_root_dir={root}", *extra]
    assert run_cli(args) == 0
    lines = (root / "version_0" / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert "train/treereg_acc_step" in header and "val/ppl" in header
    column = header.index("train/treereg_loss_step")
    losses = [float(row.split(",")[column]) for row in lines[1:] if row.split(",")[column]]
    assert len(losses) == steps
    return losses


def test_the_transformer_config_fits_and_lowers_its_loss(tmp_path: Path) -> None:
    """treereg_transformer.yaml through the CLI (a tiny 3-layer model, TreeReg on its
    layer 0, a higher learning rate without warm-up): it logs L_TR and the bracketing
    accuracy and validates as a plain LM; after 40 steps L_TR is below that of the same run
    with the head's weight 0 (the LM alone, the loss only measured)."""
    tiny = ["--model.backbone.init_args.input_size=16",
            "--model.backbone.init_args.num_layers=3",
            "--model.backbone.init_args.num_heads=2",
            "--model.backbone.init_args.ffn_size=32", "--model.init_std=0.25",
            "--trainer.accumulate_grad_batches=1", "--optimizer.init_args.lr=3e-3",
            "--lr_scheduler.init_args.warmup_steps=1"]
    trained = _fit("treereg_transformer.yaml", tmp_path / "trained", *tiny)
    measured = _fit("treereg_transformer.yaml", tmp_path / "measured", *tiny,
                    "--model.heads.init_args.weight=0.0")
    assert trained[0] == measured[0]
    assert sum(trained[-10:]) < 0.9 * sum(measured[-10:]), (trained, measured)


def test_the_gpt2_config_fits(tmp_path: Path) -> None:
    """treereg_gpt2.yaml through the CLI on a small local GPT-2 and its BPE."""
    _fit("treereg_gpt2.yaml", tmp_path, f"--model.backbone.init_args.pretrained={local_gpt2()}",
         "--model.heads.init_args.layer=0", "--trainer.accumulate_grad_batches=1",
         "--trainer.val_check_interval=2")
