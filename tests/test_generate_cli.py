"""synlm generate and synlm evaluate-generation on a tiny model trained here on a few
ROCStories-format stories: JSONL records, seeded reproducibility, no leak of the ending into
the context, the metrics JSON (LM and reverse-LM scores included), one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import write_stories
from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.commands.generate import evaluate, read_records
from synlm.generation import Prompt, sample
from synlm.lightning_cli import build_run
from synlm.loading import load_model

TINY = ["--model.backbone=AWDLSTM", "--model.backbone.init_args.input_size=16",
        "--model.backbone.init_args.hidden_size=24", "--model.backbone.init_args.num_layers=2",
        "--model.heads=[]", "--data.batch_size=2", "--data.eval_batch_size=2", "--data.bptt=10",
        "--trainer.max_steps=6", "--trainer.accelerator=cpu", "--trainer.devices=1",
        "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A checkpoint trained for a few steps on staged ROCStories-format stories, and the
    data folder."""
    root = tmp_path_factory.mktemp("generate")
    write_stories(root / "data" / "rocstories" / "ROCStories_dev.csv", 12)
    write_stories(root / "data" / "rocstories" / "ROCStories_test.csv", 4, start=100)
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY,
            "--data.corpus=ROCStories", f"--data.corpus.init_args.data_dir={root / 'data'}",
            "--data.corpus.init_args.staged=true", "--data.corpus.init_args.held_out=2",
            "--data.eval_mode=stream", f"--data.cache_dir={root / 'cache'}",
            f"--trainer.default_root_dir={root / 'run'}"]
    assert main(args) == 0
    return root / "run" / "last", root / "data"  # the newest run's last.ckpt (no validation)


def generate(ckpt: Path, out: Path, *args: str) -> list[dict[str, str]]:
    assert main(["generate", "--ckpt_path", str(ckpt), "--output", str(out), *args]) == 0
    return read_records(out)


def test_story_endings_are_jsonl_seeded_and_never_see_the_ending(run: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    ckpt, data = run
    stories = data / "rocstories" / "ROCStories_test.csv"
    first = generate(ckpt, tmp_path / "a.jsonl", "--stories", str(stories), "--top-p", "0.9",
                     "--max-new-tokens", "8", "--seed", "3")
    assert len(first) == 4
    assert first[1]["context"] == "[MALE] woke up 101 . he ate . he ran . it rained ."
    assert first[1]["reference"] == "he slept 101 ."
    assert all(0 < len(r["sample"].split()) <= 8 or r["sample"] == "" for r in first)
    again = generate(ckpt, tmp_path / "b.jsonl", "--stories", str(stories), "--top-p", "0.9",
                     "--max-new-tokens", "8", "--seed", "3")
    assert again == first  # same seed, same samples
    other = generate(ckpt, tmp_path / "c.jsonl", "--stories", str(stories), "--top-p", "0.9",
                     "--max-new-tokens", "8", "--seed", "4")
    assert [r["sample"] for r in other] != [r["sample"] for r in first]
    # a different fifth sentence changes the references only: it never reaches the model
    changed = tmp_path / "changed.csv"
    changed.write_text(stories.read_text().replace("he slept", "she sang"))
    swapped = generate(ckpt, tmp_path / "d.jsonl", "--stories", str(changed), "--top-p", "0.9",
                       "--max-new-tokens", "8", "--seed", "3")
    assert [r["sample"] for r in swapped] == [r["sample"] for r in first]
    assert swapped[1]["reference"] == "she sang 101 ."


def test_samples_batched_by_length_equal_samples_one_by_one(run: tuple[Path, Path]) -> None:
    """Batching changes only which generator draws go where: with one prompt per batch and
    greedy-like filtering (top-k 1) every sample is the model's own continuation."""
    model = load_model(str(run[0]))
    prompts = [Prompt(text.split()) for text in
               ("[MALE] woke up 1 .", "he ate . he ran .", "[MALE] woke up 2 .")]
    together = sample(model, prompts, max_new_tokens=6, top_k=1, batch_size=8)
    alone = [sample(model, [p], max_new_tokens=6, top_k=1)[0] for p in prompts]
    assert together == alone


def test_unconditional_samples_and_their_metrics(run: tuple[Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = run[0]
    out = tmp_path / "u.jsonl"
    assert main(["generate", "--ckpt_path", str(ckpt), "--num-samples", "12",
                 "--max-new-tokens", "12", "--output", str(out), "--metrics",
                 "--oracle", str(ckpt)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    records = read_records(out)
    assert len(records) == 12 and all(set(r) == {"sample"} for r in records)
    samples = [r["sample"].split() for r in records]
    from synlm.metrics.generation import distinct, lm_score, self_bleu

    assert metrics["distinct_2"] == distinct(samples, 2)
    assert metrics["self_bleu_3"] == self_bleu(samples, 3)
    assert metrics["lm_score"] == pytest.approx(lm_score(load_model(str(ckpt)), samples))
    assert "bleu_1" not in metrics  # no references


def test_evaluate_generation_with_references_and_a_reverse_lm(
        run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt, data = run
    stories = data / "rocstories" / "ROCStories_test.csv"
    out = tmp_path / "e.jsonl"
    generate(ckpt, out, "--stories", str(stories), "--max-new-tokens", "8")
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("he slept 7 .\nhe ate .\n")
    rlm = ["--rlm-heldout", str(heldout), "--rlm-set", "trainer.max_epochs=2",
           "model.backbone.init_args.hidden_size=16", "data.batch_size=2"]
    assert main(["evaluate-generation", str(out), *rlm]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert {"bleu_1", "bleu_2", "corpus_bleu_1", "distinct_2", "self_bleu_2"} <= set(metrics)
    # the held-out text has 6 word types plus <eos> and <unk>: an untrained LM scores log 8
    assert 0 < metrics["rlm_score"] < 1.5 * math.log(8)
    again = evaluate(read_records(out), rlm_heldout=str(heldout), rlm_overrides=rlm[3:],
                     build_run=build_run)
    assert again["rlm_score"] == pytest.approx(metrics["rlm_score"])  # seeded


def test_errors_are_one_line(run: tuple[Path, Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--ckpt_path", str(tmp_path / "none.ckpt")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"synlm generate: --ckpt_path: no checkpoint at {tmp_path / 'none.ckpt'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sample": "a b"}\nnot json\n')
    assert main(["evaluate-generation", str(bad)]) == 2
    assert f"{bad}:2: not JSON" in capsys.readouterr().err
    assert main(["generate", "--ckpt_path", str(run[0]), "--metrics"]) == 2
    assert "give --output FILE" in capsys.readouterr().err
    assert main(["generate", "--ckpt_path", str(run[0]), "--dm-sampling", "logits"]) == 2
    assert "has no DependencyMixtureHead" in capsys.readouterr().err


def test_a_mixture_model_samples_through_the_cli(tmp_path: Path) -> None:
    """A DM-LSTM (phase 2) checkpoint samples from its mixture: the same tokens as re-running
    the whole sequence at every step, which is what generate does for it."""
    write_stories(tmp_path / "data" / "rocstories" / "ROCStories_dev.csv", 8)
    write_stories(tmp_path / "data" / "rocstories" / "ROCStories_test.csv", 2, start=50)
    args = ["fit", "--config", str(REPO_CONFIGS / "quickstart.yaml"), *TINY,
            "--model.heads=[{class_path: DependencyMixtureHead, init_args: {phase: mixture, "
            "context: 8}}]", "--data.corpus=ROCStories",
            f"--data.corpus.init_args.data_dir={tmp_path / 'data'}",
            "--data.corpus.init_args.staged=true", "--data.corpus.init_args.held_out=2",
            "--data.eval_mode=stream", f"--data.cache_dir={tmp_path / 'cache'}",
            "--trainer.max_steps=2", f"--trainer.default_root_dir={tmp_path / 'run'}"]
    assert main(args) == 0
    ckpt = tmp_path / "run" / "last"
    records = generate(ckpt, tmp_path / "m.jsonl", "--stories",
                       str(tmp_path / "data" / "rocstories" / "ROCStories_test.csv"),
                       "--max-new-tokens", "5")
    model = load_model(str(ckpt))
    assert model.heads[0].replaces_distribution and len(records) == 2
    logits = generate(ckpt, tmp_path / "l.jsonl", "--stories",
                      str(tmp_path / "data" / "rocstories" / "ROCStories_test.csv"),
                      "--max-new-tokens", "5", "--dm-sampling", "logits")
    assert len(logits) == 2  # the same checkpoint sampled through its logit mixture
    row = torch.tensor([[model.vocab.eos_id, *model.vocab.encode(["he", "ate", "."])]])
    log_probs, _ = model.step(row)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(1, 4), atol=1e-5)


def test_evaluate_generation_with_the_news_definitions(tmp_path: Path, capsys) -> None:
    """``--news``: the released news evaluation's metrics (synlm.metrics.generation
    .news_metrics) of the file's samples, BLEU-5 against ``--news-references``."""
    from synlm.metrics.generation import news_metrics

    lines = [f"the market rose {i} points on day {i % 7} of trading" for i in range(12)]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"sample": line}) + "\n" for line in lines))
    references = tmp_path / "test.txt"
    references.write_text("the market fell 3 points on monday\nshares rose on day 2\n")
    assert main(["evaluate-generation", str(samples), "--news", "--news-references",
                 str(references)]) == 0
    got = json.loads(capsys.readouterr().out)
    want = news_metrics([line.split() for line in lines],
                        [line.split() for line in references.read_text().splitlines()])
    assert got == {"n_samples": 12, "mean_length": 10.0, **want}
    assert {"bleu_5", "self_bleu_5", "distinct_5"} <= set(got)


def test_contexts_outside_the_vocabulary_are_warned(run: tuple[Path, Path], tmp_path: Path,
                                                     capsys) -> None:
    ckpt, _ = run
    contexts = tmp_path / "contexts.txt"
    contexts.write_text("zyxw qwvk\nhe ate .\n")
    generate(ckpt, tmp_path / "out.jsonl", "--contexts", str(contexts), "--max-new-tokens", "3")
    err = capsys.readouterr().err
    assert "synlm generate: warning: 40% of the contexts' words are outside the model's " \
           "vocabulary" in err


def test_empty_endings_are_warned_counted_and_written(run: tuple[Path, Path], tmp_path: Path,
                                                      capsys, monkeypatch) -> None:
    """A model that ends most samples at once (here: it samples ``<eos>`` first for all but
    the first story): one warning line, every record written, and metrics that count the
    empty endings and write null for Self-BLEU, which one sample cannot have, instead of
    dying on it."""
    def ends_at_once(model: torch.nn.Module, tokens: torch.Tensor, *args, **kwargs
                     ) -> torch.Tensor:
        new = torch.full((tokens.size(0), 4), model.vocab.eos_id)
        new[0, :3] = torch.tensor(model.vocab.encode(["he", "slept", "."]))
        return new

    monkeypatch.setattr("synlm.generation.generate", ends_at_once)
    ckpt, data = run
    out = tmp_path / "e.jsonl"
    assert main(["generate", "--ckpt_path", str(ckpt), "--stories",
                 str(data / "rocstories" / "ROCStories_test.csv"), "--output", str(out),
                 "--metrics"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == (
        "synlm generate: warning: 3 of 4 endings are empty: the model ends them at once (the "
        "metrics leave them out); was it trained on this kind of text? (unknown words in the "
        "contexts: 0%)")
    assert [r["sample"] for r in read_records(out)] == ["he slept .", "", "", ""]
    metrics = json.loads(captured.out)
    assert metrics["samples_scored"] == 1 and metrics["samples_empty"] == 3
    assert metrics["self_bleu_2"] is None and metrics["self_bleu_3"] is None
    assert metrics["bleu_1"] == pytest.approx(100 * math.exp(1 - 4 / 3))  # "he slept 100 ."
    assert main(["evaluate-generation", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == metrics


def test_metrics_of_empty_samples_are_null_not_an_error(tmp_path: Path, capsys) -> None:
    samples = tmp_path / "empty.jsonl"
    samples.write_text('{"sample": ""}\n{"sample": "a"}\n{"sample": ""}\n')
    assert main(["evaluate-generation", str(samples)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "n_samples": 3, "mean_length": 1 / 3, "distinct_2": 0.0, "distinct_3": 0.0,
        "self_bleu_2": None, "self_bleu_3": None, "samples_scored": 1, "samples_empty": 2}
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("he slept 7 .\n")
    result = evaluate(read_records(samples), rlm_heldout=str(heldout), build_run=build_run)
    assert math.isnan(result["rlm_score"])  # one non-empty sample: nothing to train on
