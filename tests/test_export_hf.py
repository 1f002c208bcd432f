"""``synlm export-hf`` (synlm.hf_export): every family's export, loaded by ``transformers``'
Auto classes, gives ``SyntaxLM.target_log_probs`` on right- and left-padded batches; its
tokenizer reads text as ``ModelScorer`` does (word and subword vocabularies); minicons scores
sentences as synlm does; the command writes, refuses and overwrites folders as it says."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import transformers.dynamic_module_utils
from transformers import AutoModelForCausalLM, AutoTokenizer

from backbone_cases import CASES
from conftest import local_gpt2, run_cli
from synlm.backbones import AWDLSTM, GPT2
from synlm.data.files import DATA_ENV
from synlm.data.normalization import text_normalizer
from synlm.data.subwords import PretrainedTokenizer, TrainedBPE
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import Vocab
from synlm.heads import DependencyMixtureHead
from synlm.hf_export import export_hf
from synlm.hf_export.tokenizer import PAD, text_pipeline
from synlm.lm import SyntaxLM
from synlm.tse.blimp import read_blimp
from synlm.tse.scoring import ModelScorer

WORDS = ["<eos>", "<unk>", "the", "cat", "sat", "is", "n't", "here", "N", "dogs", "bark", "'s"]
#: Running text with what Mikolov's PTB rewrites: capitals, clitics, numbers, punctuation,
#: an unknown word (``zebras``) and an empty text.
TEXTS = ["The cat isn't here.", "Dogs bark, 45% of the dogs' cat's zebras!", "cat", "",
         "the cat sat here the dogs bark is n't N"]
#: Treebank corner cases: quotes, final and inner periods, clitics, contractions, numbers.
TREEBANK_TEXTS = [
    "The cat isn't here, 45% \"said\" Mr. Smith's dogs.", "They'll save and invest more.",
    "hi, my name can't hello,", "Good muffins cost $3.88\nin New York.  Please buy me\ntwo.",
    "I cannot go; she's gonna win (maybe) -- who knows?", "\"Quoted,\" he said.",
    "In 1990, 3,000 people met at 10:30 a.m.", "abc123 and 123abc, 1\\/2 of 5.5%!",
    "'Tis the season... d'ye wanna?", "We gotta go, lemme see; gimme that.", "She said: \"no.\"",
    "U.S. officials said so.", "#1 @home & away", "A (b) [c] {d} <e> f.", "x--y well-known",
]


def dm_model() -> tuple[AWDLSTM, list[DependencyMixtureHead]]:
    return (AWDLSTM(16, 24, 2, dropout_input=0.0, dropout_hidden=0.0, dropout_output=0.0,
                    weight_drop=0.0), [DependencyMixtureHead("mixture", context=4)])


#: Every causal backbone of ``CASES`` and DM's mixture, which replaces the distribution (a
#: bidirectional one is exported as a masked LM: tests/test_masked_objective.py).
FAMILIES = {**{name: lambda make=make: (make(), []) for name, make in CASES.items()
               if not make().spec.bidirectional},
            "DM-LSTM": dm_model}


def word_model(family: str = "AWDLSTM", words: list[str] = WORDS,
               normalization: str = "ptb") -> SyntaxLM:
    torch.manual_seed(0)
    backbone, heads = FAMILIES[family]()
    model = SyntaxLM(backbone, heads=heads, vocab_size=len(words)).eval()
    model.vocab, model.normalization = Vocab(words), normalization
    return model


def save_checkpoint(model: SyntaxLM, path: Path) -> Path:
    """``model`` as a checkpoint, as ``synlm fit`` writes one (vocabulary included)."""
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu")
    trainer.strategy.connect(model)
    trainer.save_checkpoint(path)
    return path


def load(folder: Path) -> tuple[torch.nn.Module, object]:
    return (AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True),
            AutoTokenizer.from_pretrained(folder, trust_remote_code=True))


def padded_log_probs(model: SyntaxLM, hf_model: torch.nn.Module, tokenizer: object,
                     texts: list[str], side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The export's log-softmax at each kept target of a ``side``-padded batch, and
    ``target_log_probs`` of each row on its own (unpadded), flattened alike."""
    tokenizer.padding_side = side
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = hf_model(**batch).logits
    got, expected = [], []
    for row, ids, kept in zip(logits, batch.input_ids, batch.attention_mask.bool()):
        ids, row = ids[kept], row[kept]
        if len(ids) < 2:  # an empty text: <eos> alone, nothing to predict
            continue
        got.append(row[:-1].log_softmax(-1).gather(1, ids[1:, None])[:, 0])
        expected.append(model.target_log_probs(ids[None, :-1], ids[None, 1:])[0])
    return torch.cat(got), torch.cat(expected)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_exports_its_own_log_probs(family: str, tmp_path: Path) -> None:
    model = word_model(family)
    hf_model, tokenizer = load(export_hf(model, tmp_path / "export"))
    assert type(hf_model).__name__ == "SynlmForCausalLM"
    for side in ("right", "left"):
        got, expected = padded_log_probs(model, hf_model, tokenizer, TEXTS, side)
        assert got.numel() == 26  # every word of TEXTS
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_the_folder_its_config_and_an_untied_decoder(tmp_path: Path) -> None:
    folder = export_hf(word_model(), tmp_path / "export")
    assert {"config.json", "model.safetensors", "configuration_synlm.py", "modeling_synlm.py",
            "tokenizer.json", "tokenizer_config.json"} <= {p.name for p in folder.iterdir()}
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "synlm" and config["normalization"] == "ptb"
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_synlm.SynlmForCausalLM"
    assert config["backbone"]["class_path"] == "synlm.backbones.awd_lstm.AWDLSTM"
    assert config["vocab_size"] == len(WORDS) and config["eos_token_id"] == 0
    assert config["tie_word_embeddings"] is True
    hf_model, _ = load(folder)
    assert hf_model.model.decoder.weight is hf_model.model.embedding.weight  # stored once
    torch.manual_seed(0)
    untied = SyntaxLM(CASES["Transformer"](), vocab_size=len(WORDS), tie_weights=False,
                      decoder_bias=False).eval()
    untied.vocab, untied.normalization = Vocab(WORDS), "none"
    hf_model, tokenizer = load(export_hf(untied, tmp_path / "untied"))
    assert hf_model.model.decoder.weight is not hf_model.model.embedding.weight
    got, expected = padded_log_probs(untied, hf_model, tokenizer, TEXTS, "right")
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_the_tokenizer_reads_text_as_synlm_does(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """AutoTokenizer without trust_remote_code (no prompt: transformers' own timeout 0):
    every vocabulary entry round-trips, <eos> starts the text, unknown words are <unk>,
    <pad> follows the vocabulary, and text is split and normalised as ModelScorer does."""
    model = word_model()
    folder = export_hf(model, tmp_path / "export")
    monkeypatch.setattr(transformers.dynamic_module_utils, "TIME_OUT_REMOTE_CODE", 0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    V = len(WORDS)
    assert tokenizer.convert_tokens_to_ids(WORDS) == list(range(V))
    assert tokenizer.convert_ids_to_tokens(list(range(V))) == WORDS
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token) == \
        ("<eos>", "<eos>", "<unk>")
    assert tokenizer.pad_token == PAD and tokenizer.pad_token_id == V
    assert tokenizer("the zebra sat").input_ids == [0, 2, 1, 4]
    assert tokenizer.decode(tokenizer("The cat isn't here.").input_ids) == \
        "<eos> the cat is n't here"
    scorer = ModelScorer(model)
    for text in TEXTS:
        assert tokenizer(text).input_ids == [0, *scorer.encode(scorer.words(text))[0]], text


def test_unknown_word_classes_are_read_as_unk(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``tokenizers`` cannot compute an unknown-word class: the export says so and reads
    an unknown word as <unk>, where synlm reads it as its class."""
    words = [*WORDS, "UNK-LC-s"]
    model = word_model(words=words)
    model.vocab = Vocab(words, unknown_words="classes")
    _, tokenizer = load(export_hf(model, tmp_path / "export"))
    assert "reads an unknown word as <unk>, not as its unknown-word class" in \
        capsys.readouterr().err
    assert model.vocab.encode(["the", "zebras"]) == [2, len(WORDS)]
    assert tokenizer("the zebras").input_ids == [0, 2, 1]


@pytest.mark.parametrize("normalization", ["none", "ptb"])
def test_the_pipeline_splits_treebank_text_as_nltk(normalization: str) -> None:
    normalizer, pre_tokenizer = text_pipeline(normalization)
    words = text_normalizer(normalization)
    for text in TREEBANK_TEXTS:
        split = pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
        assert [piece for piece, _ in split] == words(text), text


def test_the_pipeline_splits_blimp_as_nltk() -> None:
    """The staged BLiMP (20 pairs of each of the 67 paradigms) splits alike."""
    if not os.environ.get(DATA_ENV):
        pytest.skip(f"{DATA_ENV} is not set: no staged BLiMP")
    texts = [t for pair in read_blimp(subset=20) for t in (pair.good, *pair.bad)]
    for normalization in ("none", "ptb"):
        normalizer, pre_tokenizer = text_pipeline(normalization)
        words = text_normalizer(normalization)
        differ = [t for t in texts if [p for p, _ in pre_tokenizer.pre_tokenize_str(
            normalizer.normalize_str(t))] != words(t)]
        assert not differ, differ[:3]


@pytest.mark.parametrize("kind", ["trained-bpe", "pretrained-gpt2"])
def test_subword_checkpoints_export_their_byte_level_bpe(kind: str, tmp_path: Path) -> None:
    """A GPT-2 on a BPE trained by synlm, and one loaded from a pretrained folder (rebuilt
    from its sizes: the export reads no hub): the tokenizer gives ModelScorer's subwords,
    the model synlm's sentence scores."""
    train = [s.words for s in SyntheticTreebank(n_train=200).sentences("train")]
    if kind == "trained-bpe":
        vocab, backbone = TrainedBPE(vocab_size=300).vocab(train, tmp_path), CASES["GPT2"]()
    else:
        vocab = PretrainedTokenizer(str(local_gpt2())).vocab(train, tmp_path)
        backbone = GPT2(pretrained=str(local_gpt2()))
    torch.manual_seed(0)
    model = SyntaxLM(backbone, vocab_size=len(vocab), decoder_bias=False).eval()
    model.vocab, model.normalization = vocab, "none"
    folder = export_hf(model, tmp_path / "export")
    config = json.loads((folder / "config.json").read_text())
    assert config["backbone"]["init_args"]["pretrained"] is None
    assert config["max_position_embeddings"] == backbone.model.config.n_positions
    hf_model, tokenizer = load(folder)
    scorer = ModelScorer(model)
    texts = [" ".join(train[0]), "The unseenword isn't xyzzy, \"quoted\" 3.5 dogs.", "she"]
    for text in texts:
        assert tokenizer(text).input_ids == [vocab.eos_id, *scorer.encode(scorer.words(text))[0]]
    got, expected = padded_log_probs(model, hf_model, tokenizer, texts, "right")
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    totals = [s.total(eos=False) for s in scorer.score([scorer.words(t) for t in texts])]
    assert tokenizer.model_max_length == backbone.model.config.n_positions
    assert float(got[:len(got)].sum()) == pytest.approx(sum(totals), abs=1e-3)


def test_minicons_scores_sentences_as_synlm(tmp_path: Path) -> None:
    """minicons' IncrementalLMScorer on the folder (trust_remote_code passed through its
    keyword arguments, the tokenizer named so that it gets it too): each sentence's summed
    token log-probabilities equal ScoredSentence.total(eos=False)."""
    from minicons.scorer import IncrementalLMScorer

    model = word_model()
    folder = str(export_hf(model, tmp_path / "export"))
    texts = [t for t in TEXTS if t]
    scorer = ModelScorer(model)
    expected = [s.total(eos=False) for s in scorer.score([scorer.words(t) for t in texts])]
    lm = IncrementalLMScorer(folder, device="cpu", tokenizer=folder, trust_remote_code=True)
    got = lm.sequence_score(texts, reduction=lambda x: x.sum(0).item())
    assert got == pytest.approx(expected, abs=1e-4)


def test_evaluate_syntax_hf_on_an_export_gives_synlm_s_numbers(tmp_path: Path) -> None:
    """The round trip: ``HFScorer`` (``evaluate-syntax --hf DIR --trust-remote-code``) on a
    synlm export scores each sentence as ``ModelScorer`` does the checkpoint, the end of the
    sentence included."""
    from synlm.tse.hf_scoring import HFScorer

    model = word_model()
    folder = export_hf(model, tmp_path / "export")
    texts = [t for t in TEXTS if t]
    ours = ModelScorer(model)
    theirs = HFScorer(folder, trust_remote_code=True)
    expected = ours.score([ours.words(t) for t in texts])
    got = theirs.score([theirs.words(t) for t in texts])
    assert [s.total() for s in got] == pytest.approx([s.total() for s in expected], abs=1e-4)
    assert [s.eos_log_prob for s in got] == pytest.approx(
        [s.eos_log_prob for s in expected], abs=1e-4)


def test_generate_reads_the_whole_sequence(tmp_path: Path) -> None:
    """Greedy ``generate`` on a left-padded batch: each row's argmax continuation, up to its
    ``<eos>``, then padding."""
    model = word_model()
    hf_model, tokenizer = load(export_hf(model, tmp_path / "export"))
    tokenizer.padding_side = "left"
    batch = tokenizer(["the cat", "dogs bark here the"], padding=True, return_tensors="pt")
    out = hf_model.generate(**batch, max_new_tokens=4, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id)
    width = batch.input_ids.size(1)
    assert out.size(1) > width
    for row, ids, kept in zip(out, batch.input_ids, batch.attention_mask.bool()):
        tokens, ended = ids[kept][None], False
        for token in row[width:].tolist():
            best = tokenizer.pad_token_id if ended else int(model.log_probs(tokens)[0, -1].argmax())
            assert token == best
            tokens, ended = torch.cat([tokens, torch.tensor([[token]])], 1), ended or best == 0


def test_the_remote_code_names_its_missing_package(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = export_hf(word_model(), tmp_path / "export")
    monkeypatch.setitem(sys.modules, "synlm.model", None)  # as without synlm installed
    spec = importlib.util.spec_from_file_location("export.modeling_synlm",
                                                  folder / "modeling_synlm.py")
    with pytest.raises(ImportError, match=r"^this model was exported by synlm .*: "
                                          r"pip install synlm$"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_the_command_writes_refuses_and_replaces(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = word_model("DM-LSTM")
    ckpt = save_checkpoint(model, tmp_path / "model.ckpt")
    out = tmp_path / "export"
    assert run_cli(["export-hf", "--ckpt_path", str(ckpt), "--out", str(out)]) == 0
    hf_model, tokenizer = load(out)
    got, expected = padded_log_probs(model, hf_model, tokenizer, TEXTS, "right")
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    assert capsys.readouterr().out.startswith(f"synlm export-hf: wrote {out}; load it with")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    for args, said in [
        (["--ckpt_path", str(ckpt), "--out", str(out)], "is not empty; name a new folder"),
        (["--out", str(tmp_path / "new")], "the following arguments are required: --ckpt_path"),
        (["--ckpt_path", str(tmp_path / "missing.ckpt"), "--out", str(tmp_path / "new")],
         "--ckpt_path: no checkpoint at"),
        (["--ckpt_path", str(ckpt), "--out", str(tmp_path / "notes"), "--force"],
         "holds files synlm did not write (a.txt); remove them or choose another --out"),
        (["--ckpt_path", str(ckpt), "--out", str(ckpt)], "is a file"),
    ]:
        assert run_cli(["export-hf", *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
    assert (tmp_path / "notes" / "a.txt").read_text() == "mine"
    (out / "config.json").write_text("{}")  # a file synlm wrote, changed: replaced
    assert run_cli(["export-hf", "--ckpt_path", str(ckpt), "--out", str(out), "--force"]) == 0
    assert (out / "config.json").read_text() != "{}" and (out / "model.safetensors").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".export")]
