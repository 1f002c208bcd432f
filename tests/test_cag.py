"""synlm's CAG computes the released one's function (osekilab/CAG at commit
d870345c0c54a9ce7cf7e5758591a54dba89f723, Yoshida & Oseki 2022): with the released model's
float64 weights transplanted, the teacher-forced action and word log-probabilities, and
word-synchronous beam search's surprisals and n-best parses at (beam, word beam, shift) =
100/10/5 (its README's), 20/5/1 and 5/5/0, equal those its own code computed
(tests/fixtures/cag/reference.pt).

The fixture: the released ``FixedStackCompositionAttentionGrammar`` with word_dim = hidden_dim
= 8, 2 layers, 2 heads, max_stack_size 100, dropout 0, built after ``torch.manual_seed(0)``,
cast to float64, every parameter redrawn from U(-0.5, 0.5) (``torch.Generator``, seed 1234,
in ``parameters()`` order), the ``<pad>`` word's embedding row 0 and the ``<pad>`` action and
word given a -1e30 logit bias (zero weights) so that its training softmaxes run over synlm's
entries; eval mode. Its sentences are the six of tests/fixtures/rnng/reference.pt (trees of
tests/fixtures/syntax/sample.mrg, 3 to 12 words, cleaned as synlm's PTB corpora, synlm's
top-down oracle). The released code ran with the ``transformers`` 4.11.3 it pins and its
GPT-2 patch applied, on PyTorch 2.x; patched only to run: ``transformers``' import-time
dependency version check and its ``huggingface_hub`` import skipped, and in ``models.py``
the casts to float32 of the shifted, nonterminal and composed items and of the beam
search's logits removed, and the beam's scores (``gen_ll``) made in the stack's dtype
(float64) - none of which changes a float32 result. Each sentence's beam search is its
search alone (its stack bound follows its own length); the released batch gave the same
numbers to 1e-15 except at 5/5/0, where the batch's stack size differs."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from conftest import local_gpt2, metrics_of_test, pair_report, run_cli
from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.loading import load_model
from synlm.syntax.actions import ActionVocab
from synlm.transition.beam import BeamSettings, search_batch
from synlm.transition.cag import CAG
from synlm.transition.lm import TransitionLM
from synlm.transition.types import RENORMALISED
from synlm.tse.scoring import ModelScorer
from tests.test_rnng_reference import (
    assert_searches_equal,
    assert_teacher_forcing_equal,
    batch,
    padded,
)

FIXTURE = Path(__file__).parent / "fixtures" / "cag" / "reference.pt"


@pytest.fixture(scope="module")
def reference() -> dict:
    return torch.load(FIXTURE, weights_only=True)


def reference_weights(reference: dict) -> dict[str, torch.Tensor]:
    """The released model's weights under synlm's ``CAG`` names: its ``<pad>`` word and
    action (id 0) dropped, GPT-2's ``Conv1D`` weights (in, out) transposed to ``Linear``'s."""
    ref, config = reference["state_dict"], reference["config"]
    cell, gpt = "transformer.", "transformer.stack_transformer."
    ours = {
        "embedding.weight": ref["emb.0.weight"][1:],
        "nt_embedding.weight": ref[cell + "nonterminal_emb.0.weight"],
        "initial_item": ref[cell + "initial_emb.0.weight"][0],
        "output.weight": ref[cell + "output.1.weight"],
        "output.bias": ref[cell + "output.1.bias"],
        "composition.output.weight": ref[cell + "composition.output.1.weight"],
        "composition.output.bias": ref[cell + "composition.output.1.bias"],
        "action_decoder.weight": ref["action_mlp.weight"][1:],
        "action_decoder.bias": ref["action_mlp.bias"][1:],
        "word_decoder.bias": ref["vocab_mlp.bias"][1:],
        "stack_transformer.position_embedding.weight": ref[gpt + "wpe.weight"],
        "stack_transformer.ln_f.weight": ref[gpt + "ln_f.weight"],
        "stack_transformer.ln_f.bias": ref[gpt + "ln_f.bias"],
    }
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        ours[f"composition.forward_lstm.{name}_l0"] = ref[f"{cell}composition.rnn.{name}_l0"]
        ours[f"composition.backward_lstm.{name}_l0"] = \
            ref[f"{cell}composition.rnn.{name}_l0_reverse"]
    renamed = {"ln_1": "ln_1", "attn.c_attn": "qkv", "attn.c_proj": "attn_out", "ln_2": "ln_2",
               "mlp.c_fc": "fc", "mlp.c_proj": "fc_out"}
    for layer in range(config["num_layers"]):
        for theirs, mine in renamed.items():
            weight = ref[f"{gpt}h.{layer}.{theirs}.weight"]
            ours[f"stack_transformer.blocks.{layer}.{mine}.weight"] = \
                weight if mine.startswith("ln") else weight.T
            ours[f"stack_transformer.blocks.{layer}.{mine}.bias"] = \
                ref[f"{gpt}h.{layer}.{theirs}.bias"]
    ours["word_decoder.weight"] = ours["embedding.weight"]
    return ours


def transplanted(reference: dict) -> tuple[CAG, ActionVocab]:
    """synlm's CAG holding the released model's weights, in float64, eval mode."""
    config = reference["config"]
    vocab = ActionVocab(reference["nonterminals"])
    assert ["<pad>", *vocab.itos] == reference["actions_itos"]
    model = CAG(len(reference["words"]) - 1, len(vocab), config["word_dim"],
                config["num_layers"], config["num_heads"], config["max_stack_size"],
                dropout=0.0, embedding_dropout=0.0, max_open=config["max_open_nonterminals"],
                max_consecutive=config["max_cons_nonterminals"]).double().eval()
    model.load_state_dict(reference_weights(reference), strict=True)
    return model, vocab


def test_teacher_forced_log_probs_equal_the_reference(reference):
    model, vocab = transplanted(reference)
    words, actions, lengths = batch(reference, vocab)
    with torch.no_grad():
        assert_teacher_forcing_equal(model(words, actions, lengths), reference)


def test_gradients_reach_every_parameter(reference):
    """Teacher forcing with gradients (the traced stack) gives the same joint and a gradient
    to every parameter."""
    model, vocab = transplanted(reference)
    words, actions, lengths = batch(reference, vocab)
    out = model(words, actions, lengths)
    torch.testing.assert_close(out.joint, torch.tensor([s["joint"] for s in
                                                        reference["sentences"]],
                                                       dtype=torch.float64), rtol=0, atol=1e-10)
    out.joint.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("setting", ["100,10,5", "20,5,1", "5,5,0"])
def test_beam_search_equals_the_reference(reference, setting):
    model, vocab = transplanted(reference)
    words, _, lengths = batch(reference, vocab)
    results = search_batch(model, words, lengths, BeamSettings(*map(int, setting.split(","))))
    assert_searches_equal(results, reference["beams"][setting]["alone"], vocab.itos)


#: configs/cag.yaml cut down: a 16-wide, 2-layer, 2-head CAG, a small beam, short epochs.
SMALL = ["--model.init_args.model.init_args.input_size=16",
         "--model.init_args.model.init_args.num_layers=2",
         "--model.init_args.model.init_args.num_heads=2",
         "--model.init_args.beam_size=6", "--model.init_args.word_beam_size=3",
         "--model.init_args.shift_size=1", "--data.batch_size=16", "--data.eval_batch_size=16",
         "--data.test_batch_size=8", "--trainer.max_epochs=3",
         "--trainer.limit_train_batches=12", "--trainer.limit_val_batches=3",
         "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
         "--trainer.enable_model_summary=false", "--trainer.log_every_n_steps=4"]


def epochs(run: Path, key: str) -> list[float]:
    """The values of ``key`` logged at each validation of ``run``."""
    rows = list(csv.DictReader((run / "version_0" / "metrics.csv").open()))
    return [float(r[key]) for r in rows if r.get(key)]


def fit_lowers_the_loss(run: Path, *data: str) -> None:
    """``synlm fit`` of configs/cag.yaml, cut down, on ``data``: its validation joint
    perplexity falls over three epochs, and ``synlm test`` scores its beam's trees."""
    torch.set_num_threads(1)
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "cag.yaml"), *data, *SMALL,
                    f"--trainer.default_root_dir={run}"]) == 0
    model = load_model(str(run))
    assert isinstance(model, TransitionLM) and isinstance(model.model, CAG)
    perplexities = epochs(run, "val/joint_ppl")
    assert len(perplexities) == 3 and perplexities[-1] < perplexities[0], perplexities
    logged = metrics_of_test(run, run / "test")
    for name in ("test/joint_ppl", "test/beam_ppl"):
        assert 1.0 < float(logged[name]) < math.inf, name
    assert 0.0 <= float(logged["test/uf1"]) <= 1.0


def test_the_config_fits_the_synthetic_treebank_in_gpt2_pieces(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The config's own data path (a GPT-2 byte-level BPE, here a local one trained on the
    synthetic treebank) over the synthetic treebank; evaluate-syntax scores a pair by the
    beam's word log-probabilities (each the sum over its pieces) under the RNNG's released
    convention, renormalised given the length: the end of the sentence costs nothing; parse
    prints the beam's best tree."""
    run = tmp_path / "run"
    fit_lowers_the_loss(run, "--data.corpus=SyntheticTreebank",
                        "--data.corpus.init_args.n_train=200",
                        "--data.corpus.init_args.n_valid=24",
                        "--data.corpus.init_args.n_test=8",
                        f"--data.subwords.init_args.name_or_path={local_gpt2()}")
    model = load_model(str(run))
    assert model.model.search_convention == RENORMALISED
    model.beam = BeamSettings(6, 3, 1)
    good, bad = ModelScorer(model).score([["the", "dog", "sleeps"], ["dog", "the", "sleeps"]])
    assert len(good.word_log_probs) == 3 and good.eos_log_prob == pytest.approx(0, abs=1e-5)
    report = pair_report(run, tmp_path, capsys, "the dog sleeps", "dog the sleeps",
                         "--beam-size", "6", "--word-beam-size", "3")
    assert report["headline"]["pairs/accuracy"] == \
        float(sum(good.word_log_probs) > sum(bad.word_log_probs))
    (tmp_path / "in.txt").write_text("the dog saw a cat .\n")
    assert run_cli(["parse", "--ckpt_path", str(run), "--input", str(tmp_path / "in.txt")]) == 0
    (tree,) = capsys.readouterr().out.splitlines()
    assert tree.startswith("(") and tree.split()[-1].rstrip(")") == "."


def test_the_config_fits_the_nltk_sample(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged NLTK WSJ sample (real trees) in place of BLLIP's three files, over words
    (rare ones as classes)."""
    staged("nltk_treebank", "treebank.zip")
    monkeypatch.chdir(tmp_path)
    fit_lowers_the_loss(tmp_path / "run", "--config", "data/nltk_sample_trees.yaml",
                        *(f"--data.corpus.init_args.{split}=null"
                          for split in ("train", "valid", "test")),
                        "--data.subwords=null", "--data.unknown_words=classes",
                        "--optimizer.init_args.lr=0.003")


def test_a_width_not_divisible_by_the_heads_is_refused() -> None:
    with pytest.raises(ValueError, match="input_size") as refused:
        CAG(10, 5, input_size=10, num_heads=4)
    assert "\n" not in str(refused.value) and "num_heads (4)" in str(refused.value)


def test_a_stack_deeper_than_the_embedded_positions_reuses_the_last() -> None:
    """Stack positions past ``max_stack_size`` take the last position embedding: a model of
    2 positions beyond the initial item scores a 4-deep stack as one whose embedding rows
    from 2 on all equal row 2."""
    torch.manual_seed(0)
    short = CAG(6, 4, input_size=8, num_layers=1, num_heads=2, max_stack_size=2,
                dropout=0.0, embedding_dropout=0.0).double().eval()
    long = CAG(6, 4, input_size=8, num_layers=1, num_heads=2, max_stack_size=6,
               dropout=0.0, embedding_dropout=0.0).double().eval()
    state = short.state_dict()
    positions = state["stack_transformer.position_embedding.weight"]  # (3, 8)
    state["stack_transformer.position_embedding.weight"] = torch.cat(
        [positions, positions[-1:].expand(4, -1)])
    long.load_state_dict(state)
    # (X (X (Y w0 w1) w2)): four items deep at w1
    words, actions, lengths = padded([[0, 1, 2]], [[2, 2, 3, 0, 0, 1, 0, 1]])
    with torch.no_grad():
        torch.testing.assert_close(short(words, actions, lengths).joint,
                                   long(words, actions, lengths).joint, rtol=0, atol=1e-12)
