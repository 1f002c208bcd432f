"""Shared fixtures: hermetic caches, offline wandb, tiny models and corpora."""

from __future__ import annotations

import atexit
import contextlib
import csv
import functools
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "offline")
#: Where the kernel tests run the Triton kernels: compiled on a GPU, else in Triton's
#: interpreter on the CPU, which must be on before anything imports triton.
KERNEL_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if KERNEL_DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
# one thread per test process: the suite's tiny models gain nothing from more, and on a
# machine busy with other work more threads wait on each other (synlm.runtime.threads); synlm
# commands keep it (they would pick one per idle core, which varies with the load)
torch.set_num_threads(1)
os.environ.setdefault("SYNLM_THREADS", "1")

#: SIGTERMs this process sends itself to test preemption (``send_self_sigterm``), which
#: Lightning handles; any other ends the session (``_stop_at_sigterm``)
_self_sigterms = 0
_terminated: list[int] = []


def send_self_sigterm() -> None:
    """SIGTERM to this process as a test's own preemption: Lightning's handler sees it, and
    the session goes on."""
    global _self_sigterms
    _self_sigterms += 1
    os.kill(os.getpid(), signal.SIGTERM)


def _children() -> list[int]:
    """This process's child processes (Linux: /proc; elsewhere none are found)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid ...: comm may hold spaces and parentheses
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1:2] == [str(os.getpid())]:
            children.append(int(stat.parent.name))
    return children


def _stop_at_sigterm(signum: int, frame: FrameType | None) -> None:
    """The first SIGTERM from outside ends the test session at once, with pytest's summary
    and exit status 128 + 15, also inside a Lightning fit (which calls this after its own
    handler). The processes the tests started get it too (a ``synlm fit`` started with
    ``Popen`` would run on after the session)."""
    global _self_sigterms
    if _self_sigterms:
        _self_sigterms -= 1
        return
    _terminated.append(signum)
    for child in _children():
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGTERM)
    pytest.exit("SIGTERM: the test session stops", returncode=128 + signum)


def _install_sigterm_handler() -> None:
    if signal.getsignal(signal.SIGTERM) is not _stop_at_sigterm:
        signal.signal(signal.SIGTERM, _stop_at_sigterm)


def pytest_configure(config: pytest.Config) -> None:
    """Without this handler the first SIGTERM did not end the session when it came during
    a Lightning fit: Lightning swaps the default action for its own handler, which raises
    ``SIGTERMException`` (a ``SystemExit``) at the end of the step; pytest counts that as
    one failed test and runs the next (``synlm fit`` saves and exits 0 on it, on purpose:
    preemption)."""
    _install_sigterm_handler()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Put the handler back if something replaced it since the last test."""
    _install_sigterm_handler()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After the test's fixtures are torn down: put the handler back if the test or a
    library replaced it (Lightning restores the one it found when a fit ends), and a test
    that caught the session's end as an exception does not keep it going."""
    _install_sigterm_handler()
    if _terminated:
        item.session.shouldstop = "SIGTERM"


@pytest.fixture(autouse=True)
def _hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNLM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.getbasetemp()))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub: a missing model fails at once


#: CLI overrides that shrink any config to a model and corpus that run in seconds.
TINY_OVERRIDES = [
    "--data.corpus=SyntheticTreebank",
    "--data.corpus.init_args.n_train=300",
    "--data.corpus.init_args.n_valid=60",
    "--data.corpus.init_args.n_test=60",
    "--data.batch_size=4",
    "--data.eval_batch_size=4",
    "--data.test_batch_size=4",
    "--data.bptt=12",
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]


@functools.cache
def local_gpt2() -> Path:
    """A small random GPT-2 and a byte-level BPE trained on the synthetic treebank, saved
    together with ``save_pretrained`` as a hub checkpoint would be: what ``GPT2(pretrained=)``
    and ``PretrainedTokenizer(name_or_path=)`` load without a network. Built once per test
    process (read-only to the tests) and removed when it ends."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    from synlm.data.subwords import TrainedBPE
    from synlm.data.synthetic import SyntheticTreebank

    root = Path(tempfile.mkdtemp(prefix="synlm-test-gpt2-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    path = root / "gpt2-local"
    words = [s.words for s in SyntheticTreebank(n_train=300).sentences("train")]
    bpe = TrainedBPE(vocab_size=300).vocab(words, root)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe.tokenizer, eos_token="<eos>")
    tokenizer.save_pretrained(path)
    torch.manual_seed(0)
    eos = tokenizer.eos_token_id
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=2, n_head=2, n_embd=32,
                               n_positions=128, bos_token_id=eos, eos_token_id=eos)
                    ).save_pretrained(path)
    return path


def fit_batch(model: torch.nn.Module, batch: object, lr: float, steps: int) -> float:
    """Adam on one batch for ``steps`` steps; the last step's perplexity."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nll = -model(batch).target_log_probs[batch.mask].mean()
        nll.backward()
        optimizer.step()
    return nll.exp().item()


def tiny_palm_config(root: Path, heads: list[dict] | None = None, **data: object) -> Path:
    """A PaLM config small enough to train in seconds on the synthetic treebank (streamed
    training, sentence-mode validation), written under ``root``; ``heads`` and ``data``
    keys are added."""
    import yaml

    config = {
        "seed_everything": 141,
        "trainer": {"max_epochs": 2, "gradient_clip_val": 0.25, "accelerator": "cpu",
                    "devices": 1, "log_every_n_steps": 5, "enable_progress_bar": False,
                    "enable_model_summary": False, "default_root_dir": str(root)},
        "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": 3e-3}},
        "model": {
            "backbone": {"class_path": "AWDLSTM", "init_args": {
                "input_size": 32, "hidden_size": 64, "num_layers": 3, "dropout_input": 0.1,
                "dropout_hidden": 0.1, "dropout_output": 0.1, "weight_drop": 0.1,
                "inserts": [{"class_path": "SpanAttention", "init_args": {
                    "window": 8, "rrnn_size": 16, "parser_size": 16}}]}},
            "heads": heads or []},
        "data": {"corpus": {"class_path": "SyntheticTreebank"}, "mode": "stream",
                 "eval_mode": "sentence", "batch_size": 16, "eval_batch_size": 64,
                 "bptt": 35, **data},
    }
    path = root / "palm.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


STORY_HEADER = ["sentence1", "sentence2", "sentence3", "sentence4", "sentence5", "label"]


def write_stories(path: Path, n: int, start: int = 0) -> None:
    """``n`` ROCStories-format stories numbered from ``start`` (a CSV with the header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(STORY_HEADER)
        for i in range(start, start + n):
            writer.writerow([f"[MALE] woke up {i} .", "he ate .", "he ran .", "it rained .",
                             f"he slept {i} .", "1"])


def fake_models(monkeypatch: pytest.MonkeyPatch, load: Callable[[str], Any]) -> None:
    """``synlm evaluate-syntax --ckpt_path ANY`` reads ``load(ANY)``: its checkpoint check
    (made before torch loads) passes every path, and its loader
    (``synlm.loading.load_model``) is ``load``."""
    from synlm.commands import evaluate_syntax

    monkeypatch.setattr(evaluate_syntax, "check_checkpoint", lambda *args, **kwargs: None)
    monkeypatch.setattr("synlm.loading.load_model", load)


def run_cli(args: list[str]) -> int:
    """``synlm`` with ``args``: its exit code, also when it exits by ``SystemExit``
    (``--print_config``, ``--help``, argument errors)."""
    from synlm.cli import main

    try:
        return main(args)
    except SystemExit as exit_:
        return int(exit_.code or 0)


def fit_tiny_masked(root: Path, config: str, *sizes: str) -> Path:
    """``synlm fit --config CONFIG`` as a masked LM on a small synthetic treebank (64 / 16 / 8
    sentences, batches of 16, lr 0.01, 4 epochs) with the backbone cut down by ``sizes``, run
    in ``root``: its run folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert run_cli([
            "fit", "--config", config, "--config", "data/synthetic_sentence.yaml",
            "--data.objective=masked", "--data.max_tokens=null", "--data.batch_size=16",
            "--data.corpus.init_args.n_train=64", "--data.corpus.init_args.n_valid=16",
            "--data.corpus.init_args.n_test=8", *sizes, "--optimizer.init_args.lr=0.01",
            "--trainer.max_epochs=4", "--trainer.enable_progress_bar=false",
            "--trainer.accelerator=cpu", "--trainer.log_every_n_steps=4"]) == 0
    return root / "runs" / Path(config).stem


def at_each_validation(run: Path, key: str = "val/loss") -> list[float]:
    """``key`` (``val/loss``) at each validation of the run folder ``run`` (its
    ``version_0``)."""
    header, *rows = (run / "version_0" / "metrics.csv").read_text().splitlines()
    at = header.split(",").index(key) if key in header.split(",") else None
    return [] if at is None else [float(r.split(",")[at]) for r in rows if r.split(",")[at]]


def metrics_of_test(ckpt: str | Path, out: Path, *flags: str) -> dict[str, str]:
    """``synlm test --ckpt_path CKPT`` on one test batch (``flags`` added), its run under
    ``out``: the metrics it logged, by name (``test/beam_ppl``)."""
    assert run_cli(["test", "--ckpt_path", str(ckpt), "--trainer.limit_test_batches=1",
                    f"--trainer.default_root_dir={out}", *flags]) == 0
    return first_logged(out)


def first_logged(root: Path) -> dict[str, str]:
    """The first row of the ``metrics.csv`` of the one run under ``root``, by name."""
    (metrics,) = root.glob("version_*/metrics.csv")
    header, row = metrics.read_text().splitlines()[:2]
    return dict(zip(header.split(","), row.split(","), strict=True))


def pair_report(ckpt: str | Path, folder: Path, capsys: pytest.CaptureFixture[str], good: str,
                bad: str, *flags: str) -> dict:
    """``synlm evaluate-syntax --ckpt_path CKPT`` on the one pair ``good``/``bad`` (written
    under ``folder``; ``flags`` added): the JSON object it prints."""
    pairs = folder / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": good, "sentence_bad": bad}) + "\n")
    assert run_cli(["evaluate-syntax", "--ckpt_path", str(ckpt), "--pairs", str(pairs),
                    *flags]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def searches_and_parses(model: Any, run: Path, folder: Path,
                        capsys: pytest.CaptureFixture[str]) -> dict:
    """A fitted recipe with a search of its own (``model``, saved in ``run``): its best tree
    of one sentence has the sentence's words and is what ``synlm parse`` prints; its search's
    word log-probabilities telescope to the final beam's log-sum, above its best joint; and
    ``synlm evaluate-syntax`` at beam 3 scores one pair: the JSON object it prints."""
    from synlm.capabilities import Parses, Searches

    assert isinstance(model, Parses) and isinstance(model, Searches)
    words = ["the", "cat", "saw", "a", "dog"]
    (tree,) = model.parse([words])
    assert tree.leaves() == words
    (result,) = model.search_ids([model.vocab.encode(words)])
    assert len(result.word_log_probs) == len(words) and result.end_log_prob < 0
    assert result.parses[0][1] <= sum(result.word_log_probs) + result.end_log_prob + 1e-9
    text = folder / "sentences.txt"
    text.write_text(" ".join(words) + "\n")
    capsys.readouterr()
    assert run_cli(["parse", "--ckpt_path", str(run), "--input", str(text)]) == 0
    assert capsys.readouterr().out.split() == str(tree).split()
    report = pair_report(run, folder, capsys, "the cat saw a dog .", "the cat saw a dog dog .",
                         "--beam-size", "3")
    assert report["pairs"]["overall"]["pairs"] == 1
    return report
