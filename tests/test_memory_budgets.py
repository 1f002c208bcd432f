"""Every search and every chunker holds its memory bound: beam search and particle filtering
within ``max_memory_mb`` besides the model (measured: the peak resident memory of a search in
a fresh process, above what it held before the search), or refused in one line before they
start, naming the setting and the largest size that fits; a document longer than
``data.max_document_words`` is cut between its sentences."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from synlm.data.datamodule import SynLMDataModule
from synlm.data.layout_documents import cut
from synlm.data.synthetic import SyntheticTreebank
from synlm.errors import InputError, SettingError, SynLMWarning
from synlm.syntax import Sentence
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.particles import ParticleSettings
from synlm.transition.rnng import RNNG

BUDGET_MB = 48
#: A small RNNG and a sentence of 12 words; ``SETTINGS`` is filled in by each test.
SEARCH = r"""
import re, torch
from synlm.transition.rnng import RNNG
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.particles import ParticleSettings
torch.manual_seed(0)
torch.set_num_threads(1)
model = RNNG(100, 12, input_size=32, hidden_size=32, num_layers=2, dropout=0.0).eval()
words = torch.randint(0, 100, (COUNT, 12))
lengths = torch.randint(4, 13, (COUNT,))
lengths[0] = 12
search_sentences(model, words[:1], torch.tensor([12]), BeamSettings(2, 1, 1))
def status(field):
    return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1))
before = status("VmRSS")
results = search_sentences(model, words, lengths, SETTINGS)
assert all(result.parsed for result in results)
print(before, status("VmHWM"))
"""


def tiny_rnng() -> RNNG:
    """The model ``SEARCH`` searches with."""
    torch.manual_seed(0)
    return RNNG(100, 12, input_size=32, hidden_size=32, num_layers=2, dropout=0.0).eval()


def largest_that_fits(settings: BeamSettings | ParticleSettings) -> int:
    """The size the one-line refusal of ``settings`` (too large for its budget) names."""
    with pytest.raises(InputError) as refused:
        search_sentences(tiny_rnng(), torch.zeros(1, 12, dtype=torch.long),
                         torch.tensor([12]), settings)
    message = str(refused.value)
    assert "\n" not in message
    assert f"over max_memory_mb={settings.max_memory_mb:g};" in message
    found = re.search(rf"at most {settings.size}=([\d,]+) fits$", message)
    assert found, message
    return int(found.group(1).replace(",", ""))


def peak_above_start_mb(settings: str, sentences: int = 1) -> float:
    """The peak resident memory (MB) of ``SEARCH`` with ``settings`` (Python source) in a
    fresh process, above what the process held as it began (interpreter, model, and the
    parts of torch a search runs, read in by a search with a beam of 2 first): the process's
    own high-water mark (``VmHWM``; ``ru_maxrss`` keeps the forking parent's across exec)."""
    source = SEARCH.replace("SETTINGS", settings).replace("COUNT", str(sentences))
    done = subprocess.run([sys.executable, "-c", source],
                          capture_output=True, text=True, timeout=600, check=True)
    before, peak = map(int, done.stdout.split())
    return (peak - before) / 1024


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/statm (Linux)")
def test_a_beam_search_over_the_budget_is_refused_and_the_largest_that_fits_holds_it():
    """``--beam-size 100000 --word-beam-size 50000`` grew without bound before; now it is
    one line naming ``max_memory_mb`` and the beam that fits, and that beam's search stays
    within the budget."""
    huge = BeamSettings(100000, 50000, 1, max_memory_mb=BUDGET_MB)
    fits = largest_that_fits(huge)
    assert 100 < fits < 100000
    peak = peak_above_start_mb(f"BeamSettings({fits}, {fits // 2}, 1, "
                               f"max_memory_mb={BUDGET_MB})")
    assert 0 < peak <= BUDGET_MB


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/statm (Linux)")
def test_many_batches_of_sentences_hold_the_budget_together():
    """Sentences searched in many batches stay within the budget: the blocks the allocator
    keeps from one batch to the next (given back between batches, and a quarter of the
    budget left for them) do not add up across them."""
    budget = 128  # without either: 224 MB (100 sentences, the largest beam that fits)
    fits = largest_that_fits(BeamSettings(100000, 50000, 1, max_memory_mb=budget))
    peak = peak_above_start_mb(f"BeamSettings({fits}, {fits // 2}, 1, max_memory_mb={budget})",
                               sentences=100)
    assert 0 < peak <= budget


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/statm (Linux)")
def test_particle_filtering_over_the_budget_is_refused_and_what_fits_holds_it():
    """Particle filtering holds up to ``2 min(max_items, 2 K)`` items a sentence: the
    released 10,000 particles with 3,000 items are refused under a small budget, naming the
    particles that fit, whose search stays within it."""
    fits = largest_that_fits(ParticleSettings(particles=10000, max_memory_mb=BUDGET_MB))
    assert 1 <= fits < 1500  # fewer than max_items / 2: the items are what is cut
    peak = peak_above_start_mb(f"ParticleSettings(particles={fits}, max_memory_mb={BUDGET_MB})")
    assert 0 < peak <= BUDGET_MB


def test_a_search_that_fits_is_not_refused_and_none_fits_says_so():
    model = tiny_rnng()
    words = torch.zeros(2, 12, dtype=torch.long)
    lengths = torch.tensor([12, 5])
    assert all(r.parsed for r in search_sentences(model, words, lengths,
                                                  BeamSettings(10, 5, 1, max_memory_mb=16)))
    with pytest.raises(InputError, match=r"^word-synchronous beam search, beam 10, word beam "
                                         r"5, shift 1 needs about [\d,]+ MB for a sentence "
                                         r"of 12 words, over max_memory_mb=0\.001; not even "
                                         r"beam_size=1 fits; raise max_memory_mb$"):
        search_sentences(model, words, lengths, BeamSettings(10, 5, 1, max_memory_mb=1e-3))


def test_a_sentence_that_fits_only_the_whole_budget_is_searched_alone() -> None:
    """A batch is sized to ``BATCH_SHARE`` of the budget, but a sentence that fits only
    the whole of it (check_fits) is still searched, alone."""
    from synlm.transition.beam import BATCH_SHARE, search_bytes, sentence_bytes

    model = tiny_rnng()
    unbounded = BeamSettings(4, 2, 1, max_stack=None)
    need = search_bytes(model, 12, unbounded)
    budget = replace(unbounded, max_memory_mb=need * 1.01 / 2**20)
    assert sentence_bytes(model, 12, budget) > BATCH_SHARE * budget.max_memory_mb * 2**20
    results = search_sentences(model, torch.zeros(2, 12, dtype=torch.long),
                               torch.tensor([12, 12]), budget)
    assert all(result.parsed for result in results)


def test_a_budget_that_holds_batches_below_batch_size_says_so_once() -> None:
    """Where ``max_memory_mb`` splits the sentences given into smaller batches than
    ``batch_size``, one warning says so (once for the settings, however many batches),
    naming the batch it held to and the setting to raise; a budget that holds nothing
    back, or a batch that was smaller anyway, says nothing."""
    import warnings

    from synlm.transition.beam import BATCH_SHARE, sentence_bytes

    model = tiny_rnng()
    torch.manual_seed(1)
    words, lengths = torch.randint(0, 100, (6, 12)), torch.tensor([12] * 6)
    unit = BeamSettings(4, 2, 1, max_stack=None, batch_size=4)
    each = sentence_bytes(model, 12, unit)
    held = replace(unit, max_memory_mb=2.5 * each / BATCH_SHARE / 2**20)  # two a batch
    with pytest.warns(SynLMWarning) as said:
        results = search_sentences(model, words, lengths, held)
    assert len(said) == 1
    assert re.fullmatch(r"word-synchronous beam search, beam 4, word beam 2, shift 1: "
                        r"max_memory_mb=[\d.]+ searches 2 sentences of 12 words at a time "
                        r"where 4 were asked for \(at most [\d,]+ MB each\); a larger "
                        r"max_memory_mb searches more at once, to the same results up to "
                        r"float rounding",
                        str(said[0].message))
    whole = search_sentences(model, words, lengths, unit)
    for alone, together in zip(results, whole, strict=True):
        assert alone.surprisals == pytest.approx(together.surprisals, abs=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search_sentences(model, words, lengths, held)  # said once for these settings
        search_sentences(model, words, lengths, unit)  # the whole batch fits
        search_sentences(model, words[:2], lengths[:2], replace(held, batch_size=5))


def sentence(n_words: int) -> Sentence:
    return Sentence(["w"] * n_words, source=f"f.mrg:{n_words}")


def test_cut_keeps_the_order_and_fills_each_part():
    parts = cut([sentence(n) for n in (3, 4, 2, 9, 1, 1)], 7)
    assert [[len(s.words) for s in part] for part in parts] == [[3, 4], [2], [9], [1, 1]]
    assert cut([sentence(2)], 1) == [[sentence(2)]]  # a sentence of more words alone


def test_a_corpus_without_document_boundaries_is_cut_at_max_document_words():
    """``SyntheticTreebank`` names one file a split: one document of every sentence, unless
    cut; cut, every row holds at most ``max_document_words`` words, the words in order."""
    corpus = SyntheticTreebank(n_train=60, n_valid=40, n_test=40)
    whole = SynLMDataModule(corpus, mode="actions", action_unit="document")
    assert len(whole.action_items("valid")) == 1
    dm = SynLMDataModule(corpus, mode="actions", action_unit="document",
                         max_document_words=50)
    rows = dm.action_items("valid")
    assert len(rows) > 4 and all(len(item.words) <= 50 for item in rows)
    assert [w for item in rows for w in item.words] == \
        [w for item in whole.action_items("valid") for w in item.words]
    assert all(item.sentence.tree.label() == "DOC" for item in rows)
    with pytest.raises(SettingError, match=r"^max_document_words=0: expected a whole number"):
        SynLMDataModule(corpus, mode="actions", action_unit="document", max_document_words=0)


def test_the_recipe_keeps_its_budget_through_checkpoints_and_search_changes() -> None:
    """``TransitionLM(max_memory_mb=...)`` is a hyperparameter (a checkpoint searches
    within it), and switching the beam's sizes or to particle filtering keeps it."""
    from test_beam_failures import tiny_rnng as tiny_recipe

    from synlm.transition.lm import TransitionLM
    from synlm.transition.particles import use_particles

    model = TransitionLM(RNNG(10, 5, 8, 8, 1, 0.0), max_memory_mb=8192)
    assert model.hparams.max_memory_mb == 8192 and model.beam.max_memory_mb == 8192
    model.use_beam(beam_size=7)
    assert (model.beam.beam_size, model.beam.max_memory_mb) == (7, 8192)
    use_particles(model, 50)
    assert (model.beam.particles, model.beam.max_memory_mb) == (50, 8192)
    model.use_beam(max_memory_mb=1e-3)
    assert (model.beam.particles, model.beam.max_memory_mb) == (50, 1e-3)
    assert tiny_recipe().beam.max_memory_mb == 2048  # the default


@pytest.mark.parametrize("command", ["evaluate-syntax", "parse"])
def test_max_memory_mb_flag_reaches_the_search(command: str, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch,
                                               tmp_path) -> None:
    """``--max-memory-mb`` sets the budget a checkpoint's search holds: a budget no
    sentence fits is refused in one line naming it (and ``max_memory_mb`` in the message)."""
    from test_beam_failures import tiny_rnng as tiny_recipe

    from conftest import fake_models, run_cli

    fake_models(monkeypatch, lambda path: tiny_recipe())
    text = tmp_path / "in.txt"
    text.write_text("the dog sleeps\n")
    (tmp_path / "x.ckpt").write_bytes(b"")  # its loader is the fake
    args = {"evaluate-syntax": ["--sentences", str(text), "--surprisals",
                                str(tmp_path / "s.tsv")],
            "parse": ["--input", str(text)]}[command]
    code = run_cli([command, "--ckpt_path", str(tmp_path / "x.ckpt"), *args,
                    "--max-memory-mb", "0.001"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1, err
    assert "over max_memory_mb=0.001; not even beam_size=1 fits" in err


def test_max_memory_mb_flag_is_refused_where_nothing_searches(
        capsys: pytest.CaptureFixture, tmp_path) -> None:
    from conftest import run_cli

    (tmp_path / "x.txt").write_text("the dog sleeps\n")
    assert run_cli(["evaluate-syntax", "--hf", "gpt2", "--max-memory-mb", "100",
                    "--sentences", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--max-memory-mb" in err and "no beam search" in err
    assert run_cli(["parse", "--max-memory-mb", "0", "--input", str(tmp_path / "x.txt")]) == 2
    assert "must be more than 0 MB" in capsys.readouterr().err


def test_synlm_test_checks_the_longest_test_sentence_before_any_batch(
        tmp_path, capsys: pytest.CaptureFixture) -> None:
    """A test search whose longest sentence does not fit ``max_memory_mb`` is one line
    before any test batch, naming the sentence and the budget that holds it; that budget
    runs the test."""
    from pathlib import Path

    from conftest import run_cli

    checkpoint = Path(__file__).parent / "fixtures" / "checkpoints" / "tg_v1.ckpt"
    common = ["test", "--ckpt_path", str(checkpoint), "--model.beam_size=2",
              "--model.word_beam_size=1", f"--trainer.default_root_dir={tmp_path}"]
    assert run_cli([*common, "--model.max_memory_mb=0.01"]) != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    found = re.search(r"test: (.+): word-synchronous beam search, beam 2, word beam 1, "
                      r"shift \d+ needs about [\d,]+ MB for a sentence of (\d+) words, over "
                      r"max_memory_mb=0\.01; not even beam_size=1 fits; raise max_memory_mb; "
                      r"or set --model\.init_args\.max_memory_mb=(\d+)$", err)
    assert found, err
    assert not list(tmp_path.rglob("metrics.csv"))  # no test batch ran
    assert run_cli([*common, "--trainer.limit_test_batches=1",
                    f"--model.max_memory_mb={found.group(3)}"]) == 0


def test_fit_warns_before_training_when_the_test_search_will_not_fit(
        tmp_path, capsys: pytest.CaptureFixture) -> None:
    """The same check at ``fit``'s start is a warning naming the budget, before training:
    one line of the command's."""
    from test_conventions import SIZES, TINY_FIT

    from conftest import run_cli
    from synlm.catalog import REPO_CONFIGS

    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "rnng.yaml"), *TINY_FIT,
                    *SIZES["rnng.yaml"], f"--trainer.default_root_dir={tmp_path}",
                    "--model.max_memory_mb=0.01"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "before synlm test" in line]
    assert len(said) == 1
    assert re.fullmatch(r"synlm fit: warning: test: synthetic:test:\d+: .* over "
                        r"max_memory_mb=0\.01; .*; or set --model\.init_args\.max_memory_mb=\d+ "
                        r"\(before synlm test\)", said[0])


def test_measuring_a_search_leaves_the_random_generator_alone() -> None:
    """``fit`` measures the test search before training: a training model's dropout in
    ``initial_state`` must not move the RNG (a resumed run equals an uninterrupted one)."""
    from synlm.transition.beam import search_bytes

    model = RNNG(10, 5, 8, 8, 1, 0.5).train()
    state = torch.get_rng_state()
    assert search_bytes(model, 10, BeamSettings(10, 5, 1)) > 0
    assert torch.equal(state, torch.get_rng_state())
