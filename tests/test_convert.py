"""``synlm convert --from rnng-pytorch``: a checkpoint in the released ``train.py``'s format
(written here from the reference fixtures' weights, tests/fixtures/rnng/, with the released
classes' pickles, or by the released train.py itself, over words or SentencePiece pieces)
becomes a run folder whose model computes the released code's numbers; a vocabulary with
the released Berkeley unknown-word rules encodes words as the released one; a checkpoint of
another shape, or one that pickles anything else, is a one-line error."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from nltk import Tree
from test_rnng_reference import assert_searches_equal, assert_teacher_forcing_equal, padded
from torch.nn.utils.rnn import pad_sequence

from conftest import first_logged, pair_report, run_cli
from synlm.commands.convert import write_run
from synlm.data.subwords import SentencePieceVocab
from synlm.data.unknown_words import BERKELEY_RULE, BERKELEY_RULE2, berkeley_rule, berkeley_rule2
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.loading import load_model
from synlm.runtime.run_folders import CHECKPOINTS, LAST
from synlm.syntax.actions import oracle, piece_actions
from synlm.transition.beam import BeamSettings, search_batch
from synlm.transition.rnng_pytorch import PAD_LOGIT, ConversionError, convert
from synlm.tse.scoring import ModelScorer

FIXTURES = Path(__file__).parent / "fixtures" / "rnng"
STRATEGIES = {"top_down": "reference.pt", "in_order": "reference_in_order.pt"}
RELEASED_CLASSES = ("data.Vocabulary", "data.SentencePieceVocabulary",
                    "action_dict.TopDownActionDict", "action_dict.InOrderActionDict",
                    "sentencepiece.SentencePieceProcessor")


@contextmanager
def released_modules() -> Iterator[dict[str, type]]:
    """Classes named as the released code's (``data.Vocabulary``, ...), importable while
    a checkpoint is pickled: plain classes that only carry attributes (``sentencepiece``'s
    processor too, in place of the library's)."""
    classes, modules = {}, {}
    for full in RELEASED_CLASSES:
        module, name = full.split(".")
        modules.setdefault(module, types.ModuleType(module))
        classes[full] = type(name, (), {"__module__": module})
        setattr(modules[module], name, classes[full])
    before = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield classes
    finally:
        for name, module in before.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module


def instance(cls: type, **attributes: object) -> object:
    obj = cls()
    obj.__dict__.update(attributes)
    return obj


def released_checkpoint(reference: dict, path: Path, strategy: str,
                        edit: object = None) -> Path:
    """What the released ``train.py`` saves for the fixture's model: its weights, with a
    ``<unk>`` word (id 1, bias -1e30: the fixture's word softmax unchanged) and the
    nonterminals in reverse order (action and NT rows permuted to match), the pickled
    vocabulary and action dictionary, ``args``, and optimiser and scheduler states.
    ``edit(checkpoint)`` changes it before it is saved."""
    state = dict(reference["state_dict"])
    emb = state["emb.0.weight"]
    state["emb.0.weight"] = torch.cat([emb[:1], torch.zeros_like(emb[:1]), emb[1:]])
    state["vocab_mlp.weight"] = state["emb.0.weight"]
    bias = state["vocab_mlp.bias"]
    state["vocab_mlp.bias"] = torch.cat([bias[:1], torch.tensor([PAD_LOGIT], dtype=bias.dtype),
                                         bias[1:]])
    first = 4 if strategy == "in_order" else 3
    labels = reference["nonterminals"]
    order = list(reversed(range(len(labels))))
    rows = list(range(first)) + [first + k for k in order]
    for name in ("action_mlp.weight", "action_mlp.bias"):
        state[name] = state[name][rows]
    nt = state["rnng.nt_emb.0.weight"]
    state["rnng.nt_emb.0.weight"] = torch.cat([nt[order], nt[len(labels):]])
    words = ["<pad>", "<unk>", *reference["words"][1:]]
    released_labels = [labels[k] for k in order]
    config = reference["config"]
    with released_modules() as classes:
        kind = "InOrderActionDict" if strategy == "in_order" else "TopDownActionDict"
        i2a = ["<pad>", "SHIFT", "REDUCE", *(["FINISH"] if strategy == "in_order" else []),
               *(f"NT({x})" for x in released_labels)]
        checkpoint = {
            "args": {"strategy": strategy, "fixed_stack": True, "w_dim": config["w_dim"],
                     "h_dim": config["h_dim"], "num_layers": config["num_layers"],
                     "dropout": 0.1, "composition": "lstm", "sp_model": "", "seed": 3435},
            "model_state_dict": state,
            "optimizer_state_dict": {"state": {0: {"step": torch.tensor(3.0)}},
                                     "param_groups": [{"lr": 0.001, "params": [0]}]},
            "scheduler_state_dict": {"step_size": 1000000000, "gamma": 1.0, "last_epoch": 2},
            "vocab": instance(classes["data.Vocabulary"], pad="<pad>", padding_idx=0,
                              specials=["<unk>"], unkmethod="unk", unktoken="<unk>", i2w=words,
                              w2i={w: i for i, w in enumerate(words)}, unk_id=1),
            "prepro_args": {},
            "action_dict": instance(classes[f"action_dict.{kind}"], padding_idx=0,
                                    nonterminals=released_labels, i2a=i2a,
                                    a2i={a: i for i, a in enumerate(i2a)}),
            "epoch": 3, "val_losses": [5.0, 4.0],
        }
        if edit is not None:
            edit(checkpoint)
        torch.save(checkpoint, path)
    return path


@pytest.fixture(scope="module", params=list(STRATEGIES))
def converted(request, tmp_path_factory) -> tuple[str, dict, Path]:
    """(strategy, the reference fixture, the converted run folder)."""
    strategy = request.param
    reference = torch.load(FIXTURES / STRATEGIES[strategy], weights_only=True)
    tmp = tmp_path_factory.mktemp(strategy)
    released = released_checkpoint(reference, tmp / "model.pt", strategy)
    assert run_cli(["convert", "--from", "rnng-pytorch", str(released),
                    "--out", str(tmp / "run")]) == 0
    return strategy, reference, tmp / "run"


def loaded(run: Path):
    """The run folder's model as ``load_model`` gives it, in the checkpoint's float64."""
    lm = load_model(str(run)).double()
    saved = torch.load(run / CHECKPOINTS / LAST, weights_only=False)
    lm.load_state_dict(saved["state_dict"])
    return lm


def batch(lm, reference: dict) -> tuple[torch.Tensor, ...]:
    """The fixture's sentences through the converted vocabularies (the closing ``FINISH``
    left out: the in-order model adds it)."""
    sentences = reference["sentences"]
    return padded([lm.vocab.encode(s["words"]) for s in sentences],
                  [lm.action_vocab.encode([a for a in s["actions"] if a != "FINISH"])
                   for s in sentences])


def test_the_run_folder_holds_synlms_parts(converted):
    strategy, reference, run = converted
    assert sorted(p.name for p in run.iterdir()) == [".synlm-output", "actions.json",
                                                     "checkpoints", "config.yaml", "vocab.json"]
    assert json.loads((run / "vocab.json").read_text())[:2] == ["<eos>", "<unk>"]
    assert json.loads((run / "actions.json").read_text()) == \
        ["SHIFT", "REDUCE", *(f"NT({x})" for x in reference["nonterminals"])]
    lm = load_model(str(run))
    assert type(lm.model).__name__ == {"top_down": "RNNG", "in_order": "InOrderRNNG"}[strategy]
    assert lm.model.limits.max_consecutive == reference["config"]["max_cons_nts"]
    assert not list(run.parent.glob(".run.*"))


def test_teacher_forced_log_probs_equal_the_released_code(converted):
    _, reference, run = converted
    lm = loaded(run)
    with torch.no_grad():
        assert_teacher_forcing_equal(lm.model(*batch(lm, reference)), reference)


def test_beam_search_equals_the_released_code(converted):
    strategy, reference, run = converted
    lm = loaded(run)
    words, _, lengths = batch(lm, reference)
    results = search_batch(lm.model, words, lengths, BeamSettings(100, 10, 1))
    itos = [*lm.action_vocab.itos, *(["FINISH"] if strategy == "in_order" else [])]
    assert_searches_equal(results, reference["beams"]["100,10,1"]["alone"], itos)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_a_checkpoint_the_released_train_py_wrote_computes_its_numbers(strategy, tmp_path):
    """released_*.pt: written by the released train.py itself (2 epochs on the sample
    trees), its outputs by the released code in float64 (benchmarks/rnng_pytorch_checkpoints.py)."""
    expected = torch.load(FIXTURES / "released_outputs.pt", weights_only=True)[strategy]
    run = write_run(FIXTURES / f"released_{strategy}.pt", tmp_path / "run")
    lm = loaded(run)
    words, actions, lengths = batch(lm, expected)
    assert words.tolist() == [s["word_ids"] + [0] * (words.size(1) - len(s["word_ids"]))
                              for s in expected["sentences"]]
    with torch.no_grad():
        assert_teacher_forcing_equal(lm.model(words, actions, lengths), expected)
    results = search_batch(lm.model, words, lengths, BeamSettings(10, 5, 1))
    itos = [*lm.action_vocab.itos, *(["FINISH"] if strategy == "in_order" else [])]
    assert_searches_equal(results, expected["beams"]["10,5,1"]["alone"], itos)


def test_the_run_folder_parses_and_scores(converted, tmp_path, capsys):
    _, reference, run = converted
    text = tmp_path / "in.txt"
    text.write_text(" ".join(reference["sentences"][4]["words"]) + "\nan unseen word\n")
    assert run_cli(["parse", "--ckpt_path", str(run), "--input", str(text),
                    "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["words"] for r in lines] == [reference["sentences"][4]["words"],
                                           ["an", "unseen", "word"]]
    assert all(r["tree"].startswith("(") for r in lines)
    report = pair_report(run, tmp_path, capsys, "Big changes .", "changes Big .",
                         "--beam-size", "10", "--word-beam-size", "5", "--shift-size", "1")
    assert report["headline"]["pairs/accuracy"] in (0.0, 1.0)


def _drop(key: str):
    return lambda checkpoint: checkpoint["model_state_dict"].pop(key)


def _reshape(checkpoint: dict) -> None:
    state = checkpoint["model_state_dict"]
    state["rnng.output.1.weight"] = state["rnng.output.1.weight"][:, :5]


def _pickle_os_system(checkpoint: dict) -> None:
    import os

    checkpoint["prepro_args"] = {"hook": os.system}


def _subword(checkpoint: dict) -> None:
    checkpoint["args"]["sp_model"] = "spm.model"


def _subword_vocab(checkpoint: dict) -> None:
    """A pickled ``data.SentencePieceVocabulary`` (while ``released_modules`` has it)."""
    checkpoint["vocab"] = instance(sys.modules["data"].SentencePieceVocabulary, padding_idx=0)


def _no_model_in_sp(checkpoint: dict) -> None:
    """A subword checkpoint whose pickled processor holds no serialised model."""
    sp = sys.modules["sentencepiece"].SentencePieceProcessor()
    checkpoint["args"]["sp_model"] = "spm.model"
    checkpoint["vocab"] = instance(sys.modules["data"].SentencePieceVocabulary, sp=sp,
                                   padding_idx=0)


@pytest.mark.parametrize(("edit", "message"), [
    (_drop("rnng.composition.output.1.bias"),
     "missing parameter rnng.composition.output.1.bias"),
    (lambda c: c["model_state_dict"].update(extra=torch.zeros(2)), "unexpected parameter extra"),
    (_reshape, "rnng.output.1.weight has shape (8, 5)"),
    (_pickle_os_system, "pickles posix.system"),
    (_subword, "args.sp_model is set but vocab is a Vocabulary"),
    (_subword_vocab, "vocab.sp is a NoneType without a serialised model"),
    (_no_model_in_sp, "vocab.sp is a SentencePieceProcessor without a serialised model"),
    (lambda c: c.pop("action_dict"), "no key 'action_dict'"),
    (lambda c: setattr(c["vocab"], "unkmethod", "berkeleyrule3"),
     "vocab.unkmethod is 'berkeleyrule3'; expected 'unk', 'berkeleyrule' or 'berkeleyrule2'"),
])
def test_a_checkpoint_of_another_shape_is_one_line_naming_the_key(edit, message, tmp_path,
                                                                  capsys):
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)
    released = released_checkpoint(reference, tmp_path / "model.pt", "top_down", edit)
    out = tmp_path / "run"
    assert run_cli(["convert", "--from", "rnng-pytorch", str(released), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists() and not list(tmp_path.glob(".run.*"))


def test_a_pickled_function_is_never_called(tmp_path):
    """The restricted unpickler refuses the global before anything runs."""
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            import os

            return (os.makedirs, (str(marker),))

    released = released_checkpoint(reference, tmp_path / "model.pt", "top_down",
                                   lambda c: c.update(payload=Payload()))
    with pytest.raises(ConversionError, match="pickles os.makedirs"):
        convert(released)
    assert not marker.exists()


def test_an_existing_folder_is_kept_unless_forced(tmp_path, capsys):
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)
    released = released_checkpoint(reference, tmp_path / "model.pt", "top_down")
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert run_cli(["convert", "--from", "rnng-pytorch", str(released), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err and (out / "keep.txt").exists()
    with pytest.raises(InputError, match=r"holds files synlm did not write \(keep.txt\)"):
        write_run(released, out)
    (out / "keep.txt").unlink()
    assert write_run(released, out) == out.absolute() and (out / "config.yaml").is_file()


def test_lm_eval_scores_the_run_folder_by_its_beam(converted):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from synlm.lm_eval_model import SynlmLM

    _, _, run = converted
    lm = SynlmLM(ckpt_path=str(run), beam_size=10, word_beam_size=5, device="cpu")
    (rolling,) = lm.loglikelihood_rolling([Instance(request_type="loglikelihood_rolling",
                                                    doc={}, arguments=("Big changes .",), idx=0)])
    model = load_model(str(run))
    model.use_beam(10, 5, 1)
    scored = ModelScorer(model).score([["Big", "changes", "."]])[0]
    assert rolling == pytest.approx(sum(scored.word_log_probs), abs=1e-9) and rolling < 0


def sample_beam_ppl(run: Path, root: Path) -> float:
    """``synlm test`` of the run folder's config.yaml with the sample trees (those the
    released train.py was trained on: the checkpoint's nonterminals) as its corpus, logged
    under ``root``: its ``test/beam_ppl``."""
    sample = str(Path(__file__).parent / "fixtures" / "syntax" / "sample.mrg")
    assert run_cli(["test", "--config", str(run / "config.yaml"), "--ckpt_path", str(run),
                    "--data.corpus", "Treebank", "--data.corpus.train", sample,
                    "--data.corpus.valid", sample, "--data.corpus.test", sample,
                    "--model.init_args.beam_size", "10", "--model.init_args.word_beam_size",
                    "5", "--trainer.default_root_dir", str(root)]) == 0
    return float(first_logged(root)["test/beam_ppl"])


def test_synlm_test_takes_the_run_folder_with_a_treebank(tmp_path):
    """The folder's config.yaml with a corpus whose training trees have the checkpoint's
    nonterminals (the sample trees the released train.py was trained on)."""
    run = write_run(FIXTURES / "released_top_down.pt", tmp_path / "run")
    assert 1.0 < sample_beam_ppl(run, tmp_path / "runs") < float("inf")


def test_a_file_that_is_no_checkpoint_is_one_line(tmp_path, capsys):
    cut = tmp_path / "cut.pt"
    cut.write_bytes((FIXTURES / "released_top_down.pt").read_bytes()[:30000])
    assert run_cli(["convert", "--from", "rnng-pytorch", str(cut), "--out",
                    str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a torch.save archive" in err


# ------------------------------------------------------------------ subword checkpoints
def pieces_batch(lm, expected: dict, strategy: str) -> tuple[torch.Tensor, ...]:
    """The fixture's sentences as the converted vocabulary splits them (pieces, their word
    ends, synlm's oracle over pieces without ``FINISH``, lengths), each checked against the
    released pieces, ids, word ends and actions."""
    rows = []
    for s in expected["sentences"]:
        ((pieces, _),) = lm.vocab.split([s["words"]])
        ids = lm.vocab.encode(pieces)
        ends = lm.vocab.word_ends(ids)
        actions = piece_actions(oracle(Tree.fromstring(s["tree"]), strategy), ends)
        assert (pieces, ids, ends) == (s["pieces"], s["piece_ids"], s["word_ends"])
        assert actions == [a for a in s["actions"] if a != "FINISH"]
        rows.append((ids, ends, lm.action_vocab.encode(actions)))
    words, actions, lengths = padded([r[0] for r in rows], [r[2] for r in rows])
    ends = pad_sequence([torch.tensor(r[1], dtype=torch.bool) for r in rows], batch_first=True)
    return words, ends, actions, lengths


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_a_subword_checkpoint_the_released_train_py_wrote_computes_its_numbers(strategy,
                                                                              tmp_path):
    """released_subword_*.pt: written by the released train.py over the pieces of a
    SentencePiece model its preprocess.py trained on the NLTK sample's words; its pieces,
    actions and outputs by the released code (benchmarks/rnng_pytorch_checkpoints.py)."""
    expected = torch.load(FIXTURES / "released_subword_outputs.pt", weights_only=True)[strategy]
    run = write_run(FIXTURES / f"released_subword_{strategy}.pt", tmp_path / "run")
    assert sorted(p.name for p in run.iterdir()) == [".synlm-output", "actions.json",
                                                     "checkpoints", "config.yaml", "spm.model"]
    lm = loaded(run)
    assert isinstance(lm.vocab, SentencePieceVocab) and lm.vocab.suffix
    words, ends, actions, lengths = pieces_batch(lm, expected, strategy)
    over_pieces = {"sentences": [{**s, "words": s["pieces"]} for s in expected["sentences"]]}
    with torch.no_grad():
        assert_teacher_forcing_equal(lm.model(words, actions, lengths, ends), over_pieces)
    results = search_batch(lm.model, words, lengths, BeamSettings(10, 5, 1), ends)
    itos = [*lm.action_vocab.itos, *(["FINISH"] if strategy == "in_order" else [])]
    assert_searches_equal(results, expected["beams"]["10,5,1"]["alone"], itos)


def test_the_released_tokenisation_of_a_word_with_and_without_a_leading_space():
    """The released preprocess.py splits a sentence with ``sp.encode(" ".join(words))``; synlm
    encodes each word on its own, which gives the same pieces (SentencePiece segments the
    text between spaces), with or without a leading space: ``▁`` after a word's last piece
    (``treat_whitespace_as_suffix``), never before its first."""
    vocab = convert(FIXTURES / "released_subword_top_down.pt").vocab
    expected = torch.load(FIXTURES / "released_subword_outputs.pt", weights_only=True)
    for s in expected["top_down"]["sentences"]:
        released = vocab.processor.encode(" ".join(s["words"]), out_type=str)
        assert vocab.split([s["words"]])[0][0] == released == s["pieces"]
    for word in ("sold", "bicycle", "1,200", "The"):
        bare, spaced = (vocab.processor.encode(w, out_type=str) for w in (word, " " + word))
        assert bare == spaced == vocab.split([[word]])[0][0]
        assert bare[-1].endswith("\u2581") and not bare[0].startswith("\u2581")
    assert vocab.split([["sold"]])[0][0] == ["s", "old", "\u2581"]


@pytest.fixture(scope="module")
def subword_run(tmp_path_factory) -> Path:
    return write_run(FIXTURES / "released_subword_top_down.pt",
                     tmp_path_factory.mktemp("subword") / "run")


def test_a_subword_run_folder_parses_scores_and_tests(subword_run, tmp_path, capsys):
    """``parse`` gives trees over the words; ``evaluate-syntax`` reads no word as unknown;
    ``synlm test`` reads a treebank through the folder's SentencePiece model."""
    text = tmp_path / "in.txt"
    text.write_text("The zebras sold quickly .\n")
    assert run_cli(["parse", "--ckpt_path", str(subword_run), "--input", str(text),
                    "--format", "json"]) == 0
    (parsed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert Tree.fromstring(parsed["tree"]).leaves() == ["The", "zebras", "sold", "quickly", "."]
    report = pair_report(subword_run, tmp_path, capsys, "Quixotic zebras sold .",
                         "zebras Quixotic sold .", "--beam-size", "10", "--word-beam-size", "5",
                         "--shift-size", "1")
    assert report["headline"]["pairs/accuracy"] in (0.0, 1.0)
    model = load_model(str(subword_run))
    assert not any(scored_unseen(model).unknown)
    # a character the SentencePiece model lacks (no byte fallback) is its <unk> piece
    assert ModelScorer(model).score([["Quixotic", "."]])[0].unknown == (True, False)
    assert 1.0 < sample_beam_ppl(subword_run, tmp_path / "runs") < float("inf")


def scored_unseen(model):
    """``ModelScorer``'s score of a sentence of words no training sentence has."""
    model.use_beam(10, 5, 1)
    return ModelScorer(model).score([["quixotic", "zebras", "xylophoned", "."]])[0]


def test_lm_eval_scores_a_subword_run_folder_by_its_beam(subword_run):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from synlm.lm_eval_model import SynlmLM

    lm = SynlmLM(ckpt_path=str(subword_run), beam_size=10, word_beam_size=5, device="cpu")
    (rolling,) = lm.loglikelihood_rolling([Instance(
        request_type="loglikelihood_rolling", doc={},
        arguments=("quixotic zebras xylophoned .",), idx=0)])
    assert rolling == pytest.approx(sum(scored_unseen(load_model(str(subword_run)))
                                        .word_log_probs), abs=1e-9) and rolling < 0


# ------------------------------------------------------------------ Berkeley unknown words
def test_the_berkeley_rule_equals_the_released_function():
    """``berkeley_rule`` on words through each branch, against what the released
    ``utils.berkeley_unk_conv`` returned (benchmarks/rnng_pytorch_checkpoints.py)."""
    released = torch.load(FIXTURES / "berkeley_rule.pt", weights_only=True)
    assert {w: berkeley_rule(w) for w in released["classes"]} == released["classes"]
    assert all(BERKELEY_RULE.fullmatch(c) for c in released["classes"].values())
    assert len(set(released["classes"].values())) >= 15


def test_a_berkeleyrule_checkpoint_encodes_unknown_words_as_the_released_vocabulary(tmp_path):
    """A ``--unkmethod berkeleyrule`` vocabulary (``<pad>``, the classes, the words): each
    word gets the id the released ``Vocabulary.get_id`` gives it (its class where the
    vocabulary has it, else ``<unk>``), and the classes count as unknown."""
    released = torch.load(FIXTURES / "berkeley_rule.pt", weights_only=True)
    i2w = released["i2w"]
    classes = [w for w in i2w[1:] if BERKELEY_RULE.fullmatch(w)]
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)

    def berkeley(checkpoint: dict) -> None:
        state = checkpoint["model_state_dict"]
        width = state["emb.0.weight"].size(1)
        state["emb.0.weight"] = state["vocab_mlp.weight"] = torch.zeros(len(i2w), width,
                                                                         dtype=torch.float64)
        state["vocab_mlp.bias"] = torch.zeros(len(i2w), dtype=torch.float64)
        vocab = checkpoint["vocab"]
        vocab.__dict__.update(unkmethod="berkeleyrule", i2w=i2w, specials=classes,
                              w2i={w: i for i, w in enumerate(i2w)})
        del vocab.unk_id

    converted_vocab = convert(released_checkpoint(reference, tmp_path / "model.pt", "top_down",
                                                  berkeley)).vocab
    assert converted_vocab.unknown_words == "berkeleyrule"
    words = list(released["ids"])
    assert converted_vocab.encode(words) == [released["ids"][w] for w in words]
    assert {converted_vocab.itos[i] for i in converted_vocab.unknown_ids} == set(classes)
    assert len(classes) == 7 and "<unk>" in classes
    saved = Vocab.from_saved(json.loads(json.dumps(converted_vocab.to_saved())))
    assert saved.encode(words) == converted_vocab.encode(words)


def test_the_berkeley_rule2_equals_the_released_function():
    """``berkeley_rule2`` on words through each branch of the released
    ``utils.berkeley_unk_conv2`` (capitals and lower case among letters only: ``Ⅻ`` is
    ``UNK-CAPS``, ``ⅻ`` is ``UNK``), against what it returned."""
    released = torch.load(FIXTURES / "berkeley_rule2.pt", weights_only=True)
    assert {w: berkeley_rule2(w) for w in released["classes"]} == released["classes"]
    assert all(BERKELEY_RULE2.fullmatch(c) for c in released["classes"].values())
    assert len(set(released["classes"].values())) == 27
    assert (released["classes"]["\u216b"], released["classes"]["\u217b"]) == ("UNK-CAPS", "UNK")


def test_a_berkeleyrule2_checkpoint_reads_unknown_words_as_the_released_vocabulary(tmp_path,
                                                                                  capsys):
    """released_berkeleyrule2.pt (the released train.py over a ``--unkmethod berkeleyrule2``
    vocabulary: ``<pad>``, the classes, the words seen twice): the run folder's vocabulary
    gives each word the id the released ``Vocabulary.get_id`` gives it (its class where the
    vocabulary has it); where the released one fails (a class it lacks, no ``<unk>``) it is
    a one-line error naming the class; ``parse`` and ``evaluate-syntax`` count the classes
    as unknown, ``lm-eval`` scores the words by their classes, and ``synlm test`` reads the
    training treebank."""
    released = torch.load(FIXTURES / "berkeley_rule2.pt", weights_only=True)
    run = write_run(FIXTURES / "released_berkeleyrule2.pt", tmp_path / "run")
    vocab = load_model(str(run)).vocab
    assert vocab.unknown_words == "berkeleyrule2" and vocab.unk_id is None
    classes = [w for w in vocab.itos if BERKELEY_RULE2.fullmatch(w)]
    assert {vocab.itos[i] for i in vocab.unknown_ids} == set(classes) and len(classes) == 11
    known = [w for w, i in released["ids"].items() if i is not None]
    assert vocab.encode(known) == [released["ids"][w] for w in known]
    assert Vocab.load(run / "vocab.json").encode(known) == vocab.encode(known)
    for word in (w for w, i in released["ids"].items() if i is None):
        with pytest.raises(InputError, match=f"its class {berkeley_rule2(word)} is not in") \
                as err:
            vocab.encode(["The", word])
        assert "\n" not in str(err.value)

    text = tmp_path / "in.txt"
    text.write_text("The nation .\n")  # nation: UNK-LC-ion
    assert run_cli(["parse", "--ckpt_path", str(run), "--input", str(text), "--output",
                    str(tmp_path / "trees.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["unknown_share"] == pytest.approx(1 / 3, abs=1e-4)
    report = pair_report(run, tmp_path, capsys, "The nation sold .", "nation The sold .",
                         "--beam-size", "10", "--word-beam-size", "5", "--shift-size", "1")
    assert report["headline"]["pairs/unknown_share"] == 1.0
    if importlib.util.find_spec("lm_eval") is not None:
        from lm_eval.api.instance import Instance

        from synlm.lm_eval_model import SynlmLM

        lm = SynlmLM(ckpt_path=str(run), beam_size=10, word_beam_size=5, device="cpu")
        (rolling,) = lm.loglikelihood_rolling([Instance(
            request_type="loglikelihood_rolling", doc={}, arguments=("The nation .",), idx=0)])
        model = load_model(str(run))
        model.use_beam(10, 5, 1)
        scored = ModelScorer(model).score([["The", "nation", "."]])[0]
        assert scored.unknown == (False, True, False)
        assert rolling == pytest.approx(sum(scored.word_log_probs), abs=1e-9) and rolling < 0
    assert 1.0 < sample_beam_ppl(run, tmp_path / "runs") < float("inf")


def test_a_processor_pickled_as_its_bare_model_converts(tmp_path):
    """sentencepiece before 0.2.1 pickled a processor as the serialised model alone (not a
    dict of attributes): the same vocabulary comes out."""
    proto = convert(FIXTURES / "released_subword_top_down.pt").vocab.model_proto
    reference = torch.load(FIXTURES / "reference.pt", weights_only=True)

    def bare(checkpoint: dict) -> None:
        processor = sys.modules["sentencepiece"].SentencePieceProcessor
        processor.__getstate__ = lambda self: proto
        _no_model_in_sp(checkpoint)
        state = checkpoint["model_state_dict"]
        state["emb.0.weight"] = state["vocab_mlp.weight"] = torch.zeros(400, 8,
                                                                         dtype=torch.float64)
        state["vocab_mlp.bias"] = torch.zeros(400, dtype=torch.float64)

    vocab = convert(released_checkpoint(reference, tmp_path / "m.pt", "top_down", bare)).vocab
    assert isinstance(vocab, SentencePieceVocab) and vocab.model_proto == proto
