"""lm-evaluation-harness on synlm models (synlm.lm_eval_model): the ``synlm`` model's
log-likelihoods are ``ModelScorer``'s, its BLiMP ``acc`` is ``synlm.tse.blimp``'s paradigm by
paradigm, lm-eval's ``hf`` model on an export agrees, and ``synlm lm-eval`` is lm-eval's
command line. BLiMP is a tiny BLiMP-style folder built here (two paradigms of 20 pairs) and a
model whose vocabulary holds all its words, so that no pair ties (lm-eval counts a tie right,
synlm wrong)."""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

import lm_eval
import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.tasks import TaskManager
from test_export_hf import save_checkpoint, word_model

from conftest import run_cli
from synlm.data.files import DATA_ENV
from synlm.data.normalization import ptb_text_words
from synlm.hf_export import export_hf
from synlm.lm import SyntaxLM
from synlm.lm_eval_model import SynlmLM, write_blimp_tasks
from synlm.tse.blimp import read_blimp
from synlm.tse.minimal_pairs import evaluate_pairs, summarize_by
from synlm.tse.scoring import ModelScorer

NOUNS = ["cat", "dog", "bird", "teacher", "old cat"]
VERBS = [("runs", "run"), ("was here", "were here"), ("sings", "sing"), ("has left", "have left")]
#: Two paradigms of 20 pairs: subject-verb agreement in a sentence and in a clause.
PARADIGMS = {"agreement": "The {noun} {verb}.", "question": "Who thinks that the {noun} {verb}?"}


@pytest.fixture(scope="module")
def blimp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of ``<UID>.jsonl`` files in BLiMP's format."""
    folder = tmp_path_factory.mktemp("blimp")
    for uid, template in PARADIGMS.items():
        rows = [{"sentence_good": template.format(noun=noun, verb=good),
                 "sentence_bad": template.format(noun=noun, verb=bad), "UID": uid,
                 "linguistics_term": "agreement", "pairID": str(i)}
                for i, (noun, (good, bad)) in enumerate(
                    (n, v) for n in NOUNS for v in VERBS)]
        (folder / f"{uid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture(scope="module")
def model(blimp: Path) -> SyntaxLM:
    """An AWD-LSTM whose vocabulary is the words of the tiny BLiMP (nothing unknown)."""
    words = {w for pair in read_blimp(blimp) for text in (pair.good, *pair.bad)
             for w in ptb_text_words(text)}
    return word_model("AWDLSTM", ["<eos>", "<unk>", *sorted(words)])


@pytest.fixture(scope="module")
def tasks(blimp: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tasks")
    assert write_blimp_tasks(folder, path=blimp) == ["synlm_blimp_agreement",
                                                      "synlm_blimp_question"]
    return folder


def synlm_blimp(model: SyntaxLM, blimp: Path) -> tuple[dict[str, float], dict[str, float]]:
    """synlm's BLiMP accuracy of each paradigm, and each sentence's log-probability
    (``evaluate_pairs`` without the end of sentence); asserts that no pair ties."""
    records = evaluate_pairs(read_blimp(blimp), ModelScorer(model), eos=False)
    assert all(r["good_log_prob"] != r["bad_log_probs"][0] for r in records)
    accuracy = {uid: s["accuracy"] for uid, s in summarize_by(records, lambda r: r["UID"]).items()}
    log_probs = {r["good"]: r["good_log_prob"] for r in records} | \
        {r["bad"][0]: r["bad_log_probs"][0] for r in records}
    return accuracy, log_probs


def evaluate(model: object, tasks: Path, **kwargs: object) -> dict:
    return lm_eval.simple_evaluate(
        model=model, tasks=["synlm_blimp"], log_samples=True,
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False), **kwargs)


def check(results: dict, accuracy: dict[str, float], log_probs: dict[str, float],
          abs_tol: float) -> None:
    """Each paradigm's ``acc`` is synlm's, the group's their mean, and each choice's
    log-likelihood is the sentence's synlm log-probability."""
    for uid, value in accuracy.items():
        assert results["results"][f"synlm_blimp_{uid}"]["acc,none"] == pytest.approx(value)
        for sample in results["samples"][f"synlm_blimp_{uid}"]:
            doc = sample["doc"]
            got = [response[0][0] for response in sample["resps"]]
            assert got == pytest.approx([log_probs[doc["sentence_good"]],
                                         log_probs[doc["sentence_bad"]]], abs=abs_tol)
    mean = sum(accuracy.values()) / len(accuracy)
    assert results["results"]["synlm_blimp"]["acc,none"] == pytest.approx(mean)


def test_the_synlm_model_gives_synlms_blimp(model: SyntaxLM, blimp: Path, tasks: Path) -> None:
    accuracy, log_probs = synlm_blimp(model, blimp)
    assert min(accuracy.values()) > 0 and max(accuracy.values()) < 1  # a telling model
    check(evaluate(SynlmLM(model=model, batch_size=7, device="cpu"), tasks), accuracy,
          log_probs, abs_tol=1e-9)


def test_the_synlm_model_by_name_from_a_checkpoint(model: SyntaxLM, blimp: Path, tasks: Path,
                                                  tmp_path: Path) -> None:
    ckpt = save_checkpoint(model, tmp_path / "model.ckpt")
    accuracy, log_probs = synlm_blimp(model, blimp)
    check(evaluate("synlm", tasks, model_args=f"ckpt_path={ckpt},batch_size=16", device="cpu"),
          accuracy, log_probs, abs_tol=1e-6)


def test_lm_evals_hf_model_on_the_export_agrees(model: SyntaxLM, blimp: Path, tasks: Path,
                                                tmp_path: Path) -> None:
    folder = export_hf(model, tmp_path / "export")
    accuracy, log_probs = synlm_blimp(model, blimp)
    check(evaluate("hf", tasks, model_args=f"pretrained={folder},trust_remote_code=True",
                   device="cpu", batch_size=8), accuracy, log_probs, abs_tol=1e-4)


def request(kind: str, *args: str) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_loglikelihood_greedy_and_rolling(model: SyntaxLM) -> None:
    """A context and a continuation are one sentence from <eos>; the continuation's words
    are summed; greedy is each of its tokens being the argmax; rolling is the whole text."""
    lm = SynlmLM(model=model, device="cpu")
    scorer = lm.scorer
    words = scorer.words("The old cat runs.") + scorer.words(" Who said the bird sings?")
    assert words[3:5] == ["runs", "who"]  # each text split on its own: its final period
    sentence = scorer.score([words])[0]
    (got, greedy), = lm.loglikelihood([request("loglikelihood", "The old cat runs.",
                                               " Who said the bird sings?")])
    assert got == pytest.approx(sum(sentence.word_log_probs[4:]), abs=1e-9)
    ids = torch.tensor([[0, *scorer.encode(words)[0]]])
    best = model.log_probs(ids[:, :-1]).argmax(-1) == ids[:, 1:]
    assert greedy == bool(best[0, 4:].all())
    ids = torch.tensor([[0, *scorer.encode(["the", "old"])[0]]])
    best = int(model.log_probs(ids)[0, -1].argmax())
    assert best >= 2  # a word, not <eos> or <unk>: its request below is the greedy one
    (_, greedy), = lm.loglikelihood([request("loglikelihood", "the old",
                                             " " + scorer.vocab.itos[best])])
    assert greedy is True
    assert lm.loglikelihood([request("loglikelihood", "", "?")]) == [(0.0, True)]  # no words
    assert SynlmLM(model=model, greedy=False).loglikelihood(
        [request("loglikelihood", "", "the cat")]) == [(pytest.approx(
            scorer.score([["the", "cat"]])[0].total(eos=False)), False)]
    assert lm.loglikelihood_rolling([request("loglikelihood_rolling", "The bird sings.")]) == \
        [pytest.approx(scorer.score([["the", "bird", "sings"]])[0].total(eos=False))]
    with pytest.raises(NotImplementedError, match="synlm export-hf"):
        lm.generate_until([request("generate_until", "The", {})])


def test_bad_arguments_are_one_line(blimp: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs ckpt_path=RUN"):
        SynlmLM()
    with pytest.raises(ValueError, match="ckpt_path: no checkpoint at"):
        SynlmLM(ckpt_path=str(tmp_path / "missing.ckpt"))
    with pytest.raises(ValueError, match="batch_size=many: expected a whole number or auto"):
        SynlmLM(model=word_model(), batch_size="many")
    with pytest.raises(ValueError, match="BLiMP has no paradigm agreemnt; it has: agreement"):
        write_blimp_tasks(tmp_path, paradigms=["agreemnt"], path=blimp)


def test_the_command_is_lm_evals(model: SyntaxLM, blimp: Path, tasks: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``synlm lm-eval``: lm-eval's --help; a run of the synlm model writing lm-eval's
    results file; a missing checkpoint as one line and exit code 2."""
    assert run_cli(["lm-eval", "--help"]) == 0
    assert "Language Model Evaluation Harness" in capsys.readouterr().out
    ckpt = save_checkpoint(model, tmp_path / "model.ckpt")
    args = ["lm-eval", "--model", "synlm", "--tasks", "synlm_blimp_agreement",
            "--include_path", str(tasks), "--device", "cpu"]
    assert run_cli([*args, "--model_args", f"ckpt_path={ckpt},batch_size=16",
                    "--output_path", str(tmp_path / "results")]) == 0
    assert "synlm_blimp_agreement" in capsys.readouterr().out
    written = json.loads(next((tmp_path / "results").rglob("results_*.json")).read_text())
    accuracy, _ = synlm_blimp(model, blimp)
    assert written["results"]["synlm_blimp_agreement"]["acc,none"] == \
        pytest.approx(accuracy["agreement"])
    assert run_cli([*args, "--model_args", f"ckpt_path={tmp_path / 'missing.ckpt'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "synlm lm-eval: ckpt_path: no checkpoint at")


def test_without_the_extra_the_command_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delitem(sys.modules, "synlm.lm_eval_model")
    monkeypatch.setitem(sys.modules, "lm_eval.models", None)  # as without lm-eval
    assert run_cli(["lm-eval", "--help"]) == 2
    assert capsys.readouterr().err.strip() == (
        "synlm lm-eval: synlm.lm_eval_model needs lm-evaluation-harness: "
        "pip install 'synlm[lm-eval]'")


def test_the_staged_blimp_as_tasks(tmp_path: Path) -> None:
    """Every paradigm of the staged BLiMP.zip becomes a task and a JSON lines file."""
    if not os.environ.get(DATA_ENV):
        pytest.skip(f"{DATA_ENV} is not set: no staged BLiMP")
    names = write_blimp_tasks(tmp_path, subset=3)
    assert len(names) == 67 and names[0] == "synlm_blimp_adjunct_island"
    assert len((tmp_path / "adjunct_island.jsonl").read_text().splitlines()) == 3
    assert TaskManager(include_path=str(tmp_path), include_defaults=False).all_tasks


def test_the_checks_before_lm_eval_loads_know_the_models_arguments() -> None:
    """``synlm.runtime.inputs`` names ``SynlmLM``'s arguments without importing it."""
    from synlm.runtime.inputs import SYNLM_MODEL_ARGS

    names = inspect.signature(SynlmLM.__init__).parameters
    assert tuple(n for n in names if n not in ("self", "model")) == SYNLM_MODEL_ARGS
