"""Pushdown Layers against the released code, in float64.

``fixtures/pushdown/`` was made by running the released code (MurtyShikhar/Pushdown-Layers at
6a4c543d105ab6f5df77f9e86bfd5650d1ed3f30) outside this repository, on torch 2.13 with
``torch.set_default_dtype(torch.float64)``: ``create_lm`` of ``transformer_helpers.py`` with
vec_dim 16, n_heads 2, 2 layers, ``use_stack_tape``, ``rec_layers`` [0, 1],
``stack_pred_layer`` 2, ``compose_keys_and_stack_info``, ``stack_type_vocab`` 50 (the
depth tape, the BLLIP-LG setting), seed 0, every parameter plus 0.3·N(0, 1) and the
attachment head's then times 0.3; evaluation mode. A vocabulary ``WordVocabulary`` of three
binary trees' sentences with ``<eos>`` (split on spaces). Per sentence:
``pushdown_util.make_preds_with_given_trees``' pieces (``tokenizer_helper`` with
``stack_type_info="depth"``, the model teacher-forced on the gold tape,
``compute_per_token_logprob``, ``compute_stack_logprobs``, the attachment log-softmax of
each row over columns 0..t + 1), ``beam_search_util.BeamSearchDepthBased`` at beam 300 (the
released ``eval_pushdown_model`` setting) and 2 with ``get_surprisal=True``, and
``attachment_decisions_to_tree`` of the best; on the three as one batch,
``TransformerLMInterface``'s two losses. Patched for the run: ``datasets`` and ``sequence``
stubbed (``text_helpers`` imports them, the functions used need neither), ``cuda`` devices
as ``cpu``, and the two ``.float()`` casts of the depth scores in
``multi_head_relative_pos_attention.py`` removed so that everything runs in float64.
``model_parameters.pt`` is the saved ``model.pt`` without its position tables and index
buffers (deterministic, 1.6 MB); ``vocab.pkl`` is the pickled vocabulary.
"""

from __future__ import annotations

import csv
import json
import math
import pickle
import re
from pathlib import Path

import pytest
import torch
from nltk import Tree

from conftest import metrics_of_test, run_cli, searches_and_parses
from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.errors import InputError, SettingError
from synlm.loading import load_model
from synlm.transition.particles import use_particles
from synlm.transition.pushdown import PushdownTransformer
from synlm.transition.pushdown_beam import beam_search, beam_searches, search_within
from synlm.transition.pushdown_checkpoint import read_model, read_vocabulary
from synlm.transition.pushdown_lm import PushdownLM
from synlm.transition.pushdown_tree import attachments_to_tree, depth_tape, gold_attachments
from synlm.transition.types import PUSHDOWN_RANKED

FIXTURE = Path(__file__).parent / "fixtures" / "pushdown"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())


def released_checkpoint(folder: Path) -> Path:
    """model.pt as the released code saves it: the fixture's parameters with the buffers."""
    state = torch.load(FIXTURE / "model_parameters.pt", weights_only=True)
    state["int_seq"] = torch.arange(5000)
    for name in [n for n in state if n.endswith("self_attn.data_to_q.weight")]:
        state[name.replace("data_to_q.weight", "pos_encoding")] = torch.zeros(4095, 16)
    path = folder / "model.pt"
    torch.save(state, path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> PushdownTransformer:
    lm, _ = read_model(str(released_checkpoint(tmp_path_factory.mktemp("pushdown"))))
    assert lm.embedding.weight.dtype == torch.float64
    return lm


def f64(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    sentences = REFERENCE["sentences"]
    T = max(len(s["ids"]) for s in sentences)
    tokens = torch.zeros(len(sentences), T, dtype=torch.long)
    tape = torch.zeros(len(sentences), T, T, dtype=torch.long)
    attachments = torch.zeros(len(sentences), T, dtype=torch.long)
    for b, (s, tree) in enumerate(zip(sentences, REFERENCE["trees"])):
        n = len(s["ids"])
        gold = gold_attachments(Tree.fromstring(tree))
        tokens[b, :n] = torch.tensor(s["ids"])
        attachments[b, :n] = torch.tensor(gold)
        tape[b, :n, :n] = depth_tape(gold)
    lengths = torch.tensor([len(s["ids"]) for s in sentences])
    return tokens, lengths, tape, attachments


def test_gold_attachments_and_tapes_are_the_released():
    for s, tree in zip(REFERENCE["sentences"], REFERENCE["trees"]):
        gold = gold_attachments(Tree.fromstring(tree))
        assert gold[1:] == s["attachment_labels"]
        assert depth_tape(gold).tolist() == [[int(v) for v in row] for row in s["stack_tape"]]


def test_n_ary_trees_are_right_factored():
    assert gold_attachments(Tree.fromstring("(S (NP (D a) (N b) (N c)) (V d))")) == \
        gold_attachments(Tree.fromstring("(X (X a (X b c)) d)"))


def test_teacher_forced_scores_equal_the_released(model: PushdownTransformer):
    tokens, lengths, tape, attachments = batch()
    with torch.no_grad():
        out = model(tokens, lengths, tape, attachments)
    for b, s in enumerate(REFERENCE["sentences"]):
        n = len(s["ids"])
        torch.testing.assert_close(out.word_log_probs[b, :n], f64(s["word_log_probs"]),
                                   rtol=0, atol=1e-9)
        torch.testing.assert_close(out.gold_attachment_log_probs[b, : n - 1],
                                   f64(s["attachment_log_probs"]), rtol=0, atol=1e-9)
        for t, row in enumerate(s["attachment_distributions"]):
            torch.testing.assert_close(out.attachment_log_probs[b, t, : t + 2], f64(row),
                                       rtol=0, atol=1e-9)
            assert torch.isinf(out.attachment_log_probs[b, t, t + 2:]).all()
    loss = REFERENCE["loss"]
    assert out.loss.item() == pytest.approx(loss["lm"] + loss["attachment"], abs=1e-9)


@pytest.mark.parametrize("beam", ["300", "2"])
def test_beam_search_equals_the_released(model: PushdownTransformer, beam: str):
    for s in REFERENCE["sentences"]:
        ref = s["beams"][beam]
        out = beam_search(model, s["ids"], int(beam))
        torch.testing.assert_close(out.word_log_probs, f64(ref["word_log_probs"]),
                                   rtol=0, atol=1e-9)
        assert [h for _, h in out.beam] == [h for _, h in ref["final"]]
        assert [sc for sc, _ in out.beam] == pytest.approx([sc for sc, _ in ref["final"]],
                                                           abs=1e-9)
        tree = attachments_to_tree(out.beam[0][1], s["sentence"].split()[:-1])
        assert as_tuple(tree) == ref["best_tree"]


@pytest.mark.parametrize("beam", [300, 2])
def test_a_batch_of_mixed_lengths_equals_each_sentence_alone(model: PushdownTransformer,
                                                             beam: int):
    """The fixture's sentences (10, 5 and 10 tokens), shortened copies (2 to 9 tokens) and a
    repeat, searched as one batch: each sentence's surprisals, final beam (attachments and
    scores) and best tree are those of its search alone, and the fixture's released ones."""
    full = [s["ids"] for s in REFERENCE["sentences"]]
    sentences = [*full, *([*ids[:n - 1], ids[-1]] for ids in full for n in (2, 4, 9)
                          if n < len(ids)), full[1]]
    batched = beam_searches(model, sentences, beam)
    assert len(batched) == len(sentences)
    for ids, out in zip(sentences, batched, strict=True):
        alone = beam_search(model, ids, beam)
        assert len(out.word_log_probs) == len(ids)
        torch.testing.assert_close(out.word_log_probs, alone.word_log_probs, rtol=0,
                                   atol=1e-12)
        assert [h for _, h in out.beam] == [h for _, h in alone.beam]
        assert [sc for sc, _ in out.beam] == pytest.approx([sc for sc, _ in alone.beam],
                                                           abs=1e-12)
    for s, out in zip(REFERENCE["sentences"], batched[:len(full)], strict=True):
        ref = s["beams"][str(beam)]
        torch.testing.assert_close(out.word_log_probs, f64(ref["word_log_probs"]),
                                   rtol=0, atol=1e-9)
        assert [h for _, h in out.beam] == [h for _, h in ref["final"]]
        tree = attachments_to_tree(out.beam[0][1], s["sentence"].split()[:-1])
        assert as_tuple(tree) == ref["best_tree"]
    # batches bounded by memory: a bound below one sentence's cache searches each alone
    grouped = search_within(model, sentences, beam, max_memory_mb=1e-6)
    for out, together in zip(grouped, batched, strict=True):
        torch.testing.assert_close(out.word_log_probs, together.word_log_probs, rtol=0,
                                   atol=1e-12)
        assert out.beam == [(pytest.approx(sc, abs=1e-12), h) for sc, h in together.beam]


def as_tuple(tree: Tree | str) -> str:
    """A tree written as the released code prints its nested tuples."""
    def nest(node: Tree | str) -> object:
        return node if isinstance(node, str) else tuple(nest(c) for c in node)
    return str(nest(tree))


def test_incremental_steps_equal_teacher_forcing(model: PushdownTransformer):
    tokens, lengths, tape, attachments = batch()
    with torch.no_grad():
        out = model(tokens, lengths, tape, attachments)
        n = int(lengths[0])
        cache = model.start(1)
        nexts = model.next_tokens(tokens, lengths)[0]
        for t in range(n):
            word, attach, cache = model.step(cache, tokens[0, t:t + 1], nexts[t:t + 1],
                                             tape[0, t:t + 1, : t + 1])
            assert word.item() == pytest.approx(out.word_log_probs[0, t].item(), abs=1e-12)
            if t < n - 1:
                torch.testing.assert_close(attach[0], out.attachment_log_probs[0, t, : t + 2])


def test_the_converter_reads_the_released_vocabulary(tmp_path: Path):
    words = read_vocabulary(str(FIXTURE / "vocab.pkl"))
    assert words == REFERENCE["vocab"]
    evil = tmp_path / "vocab.pkl"
    evil.write_bytes(pickle.dumps(Path("x")))
    with pytest.raises(InputError, match="not part of a vocabulary"):
        read_vocabulary(str(evil))


def test_the_converter_refuses_other_models(tmp_path: Path):
    path = tmp_path / "model.pt"
    torch.save({"input_embedding.weight": torch.zeros(3, 4), "decoder.weight": torch.zeros(1)},
               path)
    with pytest.raises(InputError, match=re.escape("decoder.weight")):
        read_model(str(path))


def test_bad_sizes_are_one_line():
    with pytest.raises(SettingError, match="attention_heads=3"):
        PushdownTransformer(10, size=16, attention_heads=3)


#: configs/pushdown.yaml cut down: a 16-wide, 2-layer model, a small beam, short epochs.
SMALL = ["--model.init_args.size=16", "--model.init_args.num_layers=2",
         "--model.init_args.attention_heads=2", "--model.init_args.ff_multiplier=2",
         "--model.init_args.head_depth_divisor=2", "--model.init_args.beam_size=4",
         "--model.init_args.dropout=0.0", "--model.init_args.embedding_dropout=0.0",
         "--data.batch_size=16", "--trainer.max_epochs=3", "--trainer.limit_train_batches=12",
         "--trainer.limit_val_batches=3", "--trainer.accelerator=cpu",
         "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
         "--trainer.log_every_n_steps=4", "--optimizer.init_args.lr=0.003"]


def fit_lowers_the_perplexity(run: Path, *data: str) -> PushdownLM:
    """``synlm fit`` of configs/pushdown.yaml, cut down, on ``data``: its validation
    perplexity given the gold trees falls over three epochs, and ``synlm test`` logs it."""
    torch.set_num_threads(1)
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "pushdown.yaml"), *data, *SMALL,
                    f"--trainer.default_root_dir={run}"]) == 0
    rows = list(csv.DictReader((run / "version_0" / "metrics.csv").open()))
    perplexities = [float(r["val/ppl"]) for r in rows if r.get("val/ppl")]
    assert len(perplexities) == 3 and perplexities[-1] < perplexities[0], perplexities
    logged = metrics_of_test(run, run / "test")
    assert 1.0 < float(logged["test/ppl"]) < math.inf
    model = load_model(str(run))
    assert isinstance(model, PushdownLM)
    return model


def test_the_config_fits_the_synthetic_treebank(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]):
    """Fitted, it parses (``synlm parse``) and scores pairs (``synlm evaluate-syntax``)
    with its beam search."""
    model = fit_lowers_the_perplexity(tmp_path / "run", "--config",
                                      "data/synthetic_sentence.yaml",
                                      "--data.corpus.init_args.n_train=200",
                                      "--data.corpus.init_args.n_valid=24",
                                      "--data.corpus.init_args.n_test=8")
    report = searches_and_parses(model, tmp_path / "run", tmp_path, capsys)
    convention = report["conventions"]["pairs"]
    assert convention["search_convention"] == PUSHDOWN_RANKED
    assert convention["search"] == "beam 3 over attachments"


def test_the_config_fits_the_nltk_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    staged("nltk_treebank", "treebank.zip")
    monkeypatch.chdir(tmp_path)
    fit_lowers_the_perplexity(tmp_path / "run", "--config", "data/nltk_sample_trees.yaml")


def test_synlm_convert_makes_a_run_that_scores_as_released(tmp_path: Path):
    """``synlm convert --from pushdown`` of the released model.pt and vocab.pkl: the run
    loads (float64 kept) and its search equals the released beam search at 300."""
    checkpoint = released_checkpoint(tmp_path)
    run = tmp_path / "run"
    assert run_cli(["convert", "--from", "pushdown", str(checkpoint),
                    str(FIXTURE / "vocab.pkl"), "--out", str(run)]) == 0
    model = load_model(str(run))
    assert isinstance(model, PushdownLM) and model.beam.beam_size == 300
    assert model.model.embedding.weight.dtype == torch.float64
    words = [s["sentence"].split()[:-1] for s in REFERENCE["sentences"]]
    results = model.search_ids([model.vocab.encode(w) for w in words])
    for s, result in zip(REFERENCE["sentences"], results, strict=True):
        ref = s["beams"]["300"]["word_log_probs"]
        assert result.word_log_probs == pytest.approx(ref[:-2], abs=1e-9)
        assert result.end_log_prob == pytest.approx(ref[-2] + ref[-1], abs=1e-9)
        assert [list(a) for a, _ in result.parses] == [d for _, d in s["beams"]["300"]["final"]]
    trees = model.parse(words[:1])
    assert as_tuple(trees[0]) == REFERENCE["sentences"][0]["beams"]["300"]["best_tree"]
    with pytest.raises(InputError, match="word_beam_size: the Pushdown LM searches by beam"):
        model.use_beam(10, word_beam_size=5)
    use_particles(model, 10)
    with pytest.raises(InputError, match="searches by its beam over attachments, not by"):
        model.search_ids([model.vocab.encode(words[0])])


def test_synlm_convert_refuses_a_missing_vocabulary(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]):
    checkpoint = released_checkpoint(tmp_path)
    assert run_cli(["convert", "--from", "pushdown", str(checkpoint), "--out",
                    str(tmp_path / "run")]) == 2
    assert "VOCAB.pkl: --from pushdown takes the vocabulary" in capsys.readouterr().err
