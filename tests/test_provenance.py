"""The provenance of ``synlm evaluate-syntax``'s results (``synlm.tse.provenance``): on a run
folder holding a small RNNG checkpoint, scored by beam search, and on small local Hugging Face
models (a causal GPT-2 and a masked BERT), the record names the file the folder resolved to
and each benchmark file with hashlib's sha256 of it, the model's class and parameter count,
the scoring conventions and beam sizes, the versions, command, threads and device; it is in
the printed JSON, beside ``--output`` and ``--regions`` and in the ``--report`` folder."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import pytest
import torch
from test_beam_failures import tiny_rnng
from test_evaluate_syntax import evaluate, toy_data
from test_export_hf import save_checkpoint
from test_hf_scoring import _corpus, _gpt2
from test_masked_scoring import folder  # noqa: F401  (the BERT folder fixture)
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

import synlm
from synlm.loading import load_model
from synlm.tse import provenance

#: The keys of a record and of each model's.
KEYS = {"command", "cwd", "created", "synlm", "synlm_source", "torch", "transformers",
        "python", "platform", "threads", "threads_why", "device", "models", "benchmark_files",
        "sentences"}
MODEL_KEYS = {"name", "model_class", "parameters", "dtype", "files", "architecture",
              "vocabulary", "config", "revision", "surprisal", "pll", "search", "eos",
              "untrained"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pairs_file(tmp_path: Path) -> Path:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "the dog sleeps",
                                 "sentence_bad": "the dog sleep"}) + "\n")
    return pairs


def common(record: dict, args: list[str]) -> None:
    """What every record holds whatever the model."""
    assert set(record) == KEYS
    assert record["command"] == "synlm evaluate-syntax " + shlex.join(args)
    assert record["synlm"] == synlm.__version__ and record["torch"] == torch.__version__
    assert record["threads"] == torch.get_num_threads() == 1  # SYNLM_THREADS=1 in the suite
    assert record["threads_why"] == "SYNLM_THREADS=1"
    assert record["device"] == "cpu"
    assert all(set(model) == MODEL_KEYS for model in record["models"])


def test_a_run_folder_of_a_structure_model(capsys, monkeypatch, tmp_path):
    """A run folder stands for its checkpoint: the record names that file and its sha256,
    the RNNG's class and size, its surprisal convention and the beam sizes of the flags,
    and each benchmark file read (a suite file, a pairs file), in every file written."""
    monkeypatch.setenv("SYNLM_THREADS", "1")
    run = tmp_path / "runs" / "rnng" / "version_0" / "checkpoints"
    run.mkdir(parents=True)
    save_checkpoint(tiny_rnng(), run / "last.ckpt")
    suite = toy_data(tmp_path / "data") / "syntaxgym" / "test_suites" / "number_src.json"
    pairs = pairs_file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    args = ["--ckpt_path", str(tmp_path / "runs" / "rnng"), "--benchmark", "syntaxgym",
            "--suites", str(suite), "--pairs", str(pairs), "--beam-size", "7",
            "--word-beam-size", "3", "--shift-size", "1", "--output", str(out / "r.jsonl"),
            "--regions", str(out / "regions.csv"), "--report", str(out / "report")]
    summary, _ = evaluate(capsys, *args)
    record = summary["provenance"]
    common(record, args)
    [model] = record["models"]
    file = run / "last.ckpt"
    assert model["files"] == [{"path": str(file.resolve()), "sha256": sha256(file),
                               "bytes": file.stat().st_size}]
    loaded = load_model(str(file))
    assert model["model_class"] == f"{type(loaded).__module__}.{type(loaded).__name__}"
    assert model["architecture"] == "synlm.transition.rnng.RNNG"
    saved = json.dumps(loaded.vocab.to_saved(), sort_keys=True, ensure_ascii=False)
    assert model["vocabulary"] == {"size": len(loaded.vocab),
                                   "sha256": hashlib.sha256(saved.encode()).hexdigest()}
    assert model["parameters"] == sum(p.numel() for p in loaded.parameters())
    assert model["dtype"] == "float32" and model["untrained"] == 0
    assert model["surprisal"] == "renormalised_given_length" and model["pll"] is None
    assert model["search"]["kind"] == "BeamSettings"
    assert model["search"]["convention"] == "renormalised_given_length"  # the RNNG's own
    assert (model["search"]["beam_size"], model["search"]["word_beam_size"],
            model["search"]["shift_size"]) == (7, 3, 1)
    assert model["search"]["text"] == "word-synchronous beam search, beam 7, word beam 3, shift 1"
    assert model["eos"] == {key: value["eos"] for key, value in summary["conventions"].items()}
    assert set(model["eos"]) == {"syntaxgym", "pairs"}
    assert record["benchmark_files"] == {
        name: [{"path": str(path.resolve()), "sha256": sha256(path),
                "bytes": path.stat().st_size}]
        for name, path in (("syntaxgym", suite), ("pairs", pairs))}
    for written in (out / "r.jsonl.provenance.json", out / "regions.csv.provenance.json",
                    out / "report" / "provenance.json"):
        assert json.loads(written.read_text()) == record
    assert str(out / "report" / "provenance.json") in summary["report"]["files"]


def test_the_staged_benchmark_files_and_the_untrained_models_of_a_config(capsys, monkeypatch,
                                                                         tmp_path):
    """``--config``: the config file and its seeds; BLiMP's archive and Marvin & Linzen's
    file under the data folder, each with its sha256; a file is hashed once."""
    monkeypatch.setenv("SYNLM_THREADS", "1")
    data = toy_data(tmp_path / "data")
    config = Path(synlm.__file__).parent / "configs" / "quickstart.yaml"
    if not config.is_file():
        pytest.skip("no shipped quickstart config")
    provenance._sha256.cache_clear()
    args = ["--config", str(config), "--seeds", "2", "--data-dir", str(data),
            "--benchmark", "blimp", "marvin_linzen", "syntaxgym", "--suites", "number_src"]
    summary, _ = evaluate(capsys, *args)
    record = summary["provenance"]
    common(record, args)
    [model] = record["models"]
    assert model["untrained"] == 2 and model["files"] == []
    assert model["config"]["sha256"] == sha256(config)
    expected = {"blimp": data / "blimp" / "BLiMP.zip",
                "marvin_linzen": data / "marvin_linzen" / "marvin_linzen.jsonl.gz",
                "syntaxgym": data / "syntaxgym" / "test_suites" / "number_src.json"}
    assert {name: [f["sha256"] for f in files]
            for name, files in record["benchmark_files"].items()} == {
        name: [sha256(path)] for name, path in expected.items()}
    hashed = provenance._sha256.cache_info()
    again = provenance.file_digest(expected["blimp"])
    assert again.sha256 == sha256(expected["blimp"])
    assert provenance._sha256.cache_info().hits == hashed.hits + 1  # not read again


def digest(path: Path) -> dict:
    return {"path": str(path.resolve()), "sha256": sha256(path), "bytes": path.stat().st_size}


def test_a_local_causal_hf_model(capsys, monkeypatch, tmp_path):
    """A causal LM's folder: the sha256 of every file that changes a score (its config and
    generation config, its tokenizer's files, its weights), its class, architecture and
    size, the exact surprisal and no search; ``--sentences``: the record beside the
    surprisal table."""
    monkeypatch.setenv("SYNLM_THREADS", "1")
    torch.manual_seed(0)
    _gpt2(tmp_path / "gpt2", _corpus())
    (tmp_path / "s.txt").write_text("the dog sleeps .\n")
    args = ["--hf", str(tmp_path / "gpt2"), "--sentences", str(tmp_path / "s.txt"),
            "--surprisals", str(tmp_path / "s.tsv")]
    summary, _ = evaluate(capsys, *args)
    record = summary["provenance"]
    common(record, args)
    [model] = record["models"]
    gpt2 = tmp_path / "gpt2"
    assert model["files"] == [digest(gpt2 / name) for name in (
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "model.safetensors")]
    assert {path.name for path in gpt2.iterdir()} == {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "model.safetensors"}  # every file of the folder
    built = AutoModelForCausalLM.from_pretrained(tmp_path / "gpt2")
    assert model["model_class"] == "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel"
    assert model["architecture"] == "GPT2LMHeadModel (gpt2)"
    assert model["vocabulary"] is None  # its tokenizer's files are hashed instead
    assert model["parameters"] == sum(p.numel() for p in built.parameters())
    assert (model["surprisal"], model["pll"], model["search"]) == ("exact", None, None)
    assert model["eos"] == {}  # no benchmark: the table's own end rows
    assert json.loads((tmp_path / "s.tsv.provenance.json").read_text()) == record


def test_a_changed_tokenizer_changes_the_record(tmp_path):
    """Two gpt2s of the same weights, one with a tokenizer that lowercases: the records
    tell them apart by tokenizer.json's sha256 alone."""
    from synlm.tse.hf_scoring import HFScorer

    torch.manual_seed(0)
    gpt2 = tmp_path / "gpt2"
    _gpt2(gpt2, _corpus())
    before = provenance.model_provenance("gpt2", HFScorer(str(gpt2)))
    tokenizer = json.loads((gpt2 / "tokenizer.json").read_text())
    assert tokenizer["normalizer"] is None
    tokenizer["normalizer"] = {"type": "Lowercase"}
    (gpt2 / "tokenizer.json").write_text(json.dumps(tokenizer))
    after = provenance.model_provenance("gpt2", HFScorer(str(gpt2)))
    changed = {b.path for b, a in zip(before.files, after.files, strict=True) if b != a}
    assert changed == {str((gpt2 / "tokenizer.json").resolve())}
    assert [f.sha256 for f in after.files if f.path in changed] == \
        [sha256(gpt2 / "tokenizer.json")]
    assert before.architecture == after.architecture == "GPT2LMHeadModel (gpt2)"


def test_the_files_of_a_folder_that_change_a_score(tmp_path):
    """Only the files that change a score, in a fixed order: config, tokenizer files, the
    model's own code, then the weights (a sharded model's shards from its index)."""
    for name in ("README.md", "training_args.bin", "merges.txt", "vocab.json", "config.json",
                 "modeling_synlm.py", "model-00002-of-00002.safetensors",
                 "model-00001-of-00002.safetensors"):
        (tmp_path / name).write_text(name)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors"}}))
    assert [p.name for p in provenance.model_files(tmp_path)] == [
        "config.json", "vocab.json", "merges.txt", "modeling_synlm.py",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def test_a_local_masked_hf_model(capsys, monkeypatch, tmp_path, folder):  # noqa: F811
    """A masked LM: pseudo-log-likelihood, its variant, no end-of-sentence term."""
    monkeypatch.setenv("SYNLM_THREADS", "1")
    args = ["--hf", str(folder), "--pairs", str(pairs_file(tmp_path)), "--pll", "original"]
    summary, _ = evaluate(capsys, *args)
    record = summary["provenance"]
    common(record, args)
    [model] = record["models"]
    assert model["files"][-1]["sha256"] == sha256(folder / "model.safetensors")
    assert [Path(f["path"]).name for f in model["files"]] == [
        "config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
    built = AutoModelForMaskedLM.from_pretrained(folder)
    assert model["model_class"].endswith(".BertForMaskedLM")
    assert model["architecture"] == "BertForMaskedLM (bert)"
    assert model["parameters"] == sum(p.numel() for p in built.parameters())
    assert (model["surprisal"], model["pll"]) == ("pseudo_log_likelihood", "original")
    assert model["eos"] == {"pairs": False}
