"""``evaluate-syntax --journal``: a run stopped part way goes on where it stopped, with the
numbers of a run never stopped, and its time summed over every process and stop
(``synlm.tse.journal``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_evaluate_syntax import unigram_model
from test_export_hf import save_checkpoint

from conftest import run_cli
from synlm.errors import InputError
from synlm.tse import journal, progress
from synlm.tse.journal import JournaledScorer, TimeSpent, file_name
from synlm.tse.scores import ScoredSentence

FINGERPRINT = {"files": [{"sha256": "ab"}], "search": {"beam_size": 100}}


class BatchSensitive:
    """A scorer whose numbers depend on the batch a sentence is scored in (as a float32
    model's do, by a rounding): each word's log-probability is minus its length minus a
    thousandth of the batch's size; stops (``Stopped``) once it has scored ``stop_after``
    batches."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.batches: list[int] = []
        self.stop_after = stop_after
        self.vocab_size = 7
        self.progress = None

    def score(self, sentences: list[tuple[str, ...]]) -> list[ScoredSentence]:
        if self.stop_after is not None and len(self.batches) == self.stop_after:
            raise Stopped
        self.batches.append(len(sentences))
        if self.progress is not None:
            self.progress(len(sentences))
        return [ScoredSentence(tuple(s), tuple(-len(w) - len(sentences) / 1000 for w in s),
                               (False,) * len(s), -1.0, tuple(s), None) for s in sentences]


class Stopped(Exception):
    """The machine taken back."""


def sentences(n: int) -> list[list[str]]:
    """``n`` sentences, every fifth a repeat of the one before (a benchmark repeats some)."""
    made = [["w" * (i % 7 + 1), str(i)] for i in range(n)]
    return [made[i - 1] if i % 5 == 4 else s for i, s in enumerate(made)]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch) -> None:
    monkeypatch.setattr(journal, "CHUNK", 10)


def test_a_resumed_run_equals_a_run_never_stopped(tmp_path: Path) -> None:
    """Stopped after 3 chunks, run again: the 3 chunks are read, the rest scored in the same
    chunks as a run never stopped (batch-dependent numbers equal to the last digit)."""
    given = sentences(73)  # 59 distinct: chunks of 10, 10, 10, 10, 10, 9
    whole = JournaledScorer(BatchSensitive(), tmp_path / "whole", "m", FINGERPRINT)
    expected = whole.score(given)
    assert whole.scorer.batches == [10, 10, 10, 10, 10, 9]
    stopped = JournaledScorer(BatchSensitive(stop_after=3), tmp_path / "j", "m", FINGERPRINT)
    with pytest.raises(Stopped):
        stopped.score(given)
    resumed = JournaledScorer(BatchSensitive(), tmp_path / "j", "m", FINGERPRINT)
    assert len(resumed.done) == 30
    assert resumed.score(given) == expected
    assert resumed.scorer.batches == [10, 10, 9]
    again = JournaledScorer(BatchSensitive(), tmp_path / "j", "m", FINGERPRINT)
    assert again.score(given) == expected and again.scorer.batches == []


def test_a_line_cut_short_is_scored_again_whole(tmp_path: Path) -> None:
    """The last line cut by a stop mid-write: its chunk is scored again, all of it, and
    the lines written after it are read back."""
    given = sentences(40)  # 32 distinct: chunks of 10, 10, 10, 2
    expected = JournaledScorer(BatchSensitive(), tmp_path / "whole", "m",
                               FINGERPRINT).score(given)
    with pytest.raises(Stopped):
        JournaledScorer(BatchSensitive(stop_after=2), tmp_path / "j", "m",
                        FINGERPRINT).score(given)
    path = tmp_path / "j" / file_name("m", 0)
    path.write_bytes(path.read_bytes()[:-25])  # the second chunk's line cut short
    resumed = JournaledScorer(BatchSensitive(), tmp_path / "j", "m", FINGERPRINT)
    assert len(resumed.done) == 10
    assert resumed.score(given) == expected
    assert resumed.scorer.batches == [10, 10, 2]
    assert len(JournaledScorer(BatchSensitive(), tmp_path / "j", "m", FINGERPRINT).done) == 32


def test_another_models_journal_is_refused_naming_the_file_and_what_differs(
        tmp_path: Path) -> None:
    JournaledScorer(BatchSensitive(), tmp_path, "rnng", FINGERPRINT).score(sentences(3))
    other = {**FINGERPRINT, "search": {"beam_size": 10}}
    with pytest.raises(InputError, match=r"rnng\.rank0\.jsonl was written for another model "
                       r"or search \(differs in: search\)"):
        JournaledScorer(BatchSensitive(), tmp_path, "rnng", other)
    assert JournaledScorer(BatchSensitive(), tmp_path, "tg", other).done == {}


def test_progress_counts_every_sentence_once_journaled_or_scored(tmp_path: Path) -> None:
    given = sentences(33)
    stopped = JournaledScorer(BatchSensitive(stop_after=1), tmp_path, "m", FINGERPRINT)
    with pytest.raises(Stopped):
        stopped.score(given)
    told: list[tuple[int, bool]] = []
    resumed = JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT)
    resumed.progress = lambda n, read=False: told.append((n, read))
    resumed.score(given)
    # the first chunk's 10, 2 of them twice, read; then a chunk's batch, then its repeats
    assert told == [(12, True), (10, False), (3, False), (7, False), (1, False)]
    assert sum(n for n, _ in told) == 33


def test_the_time_left_after_a_resume_is_at_the_rate_of_this_run(tmp_path: Path, capsys,
                                                                 monkeypatch) -> None:
    """20 of 40 sentences read from the journal, then a batch of 10 scored in 5 s: 10 are
    left at 2 a second, 5 s (counting the journal's as scored in the 10 s since the start
    would say 3 s); no estimate before a sentence is scored in this run."""
    given = [["w", str(i)] for i in range(40)]
    with pytest.raises(Stopped):
        JournaledScorer(BatchSensitive(stop_after=2), tmp_path, "m", FINGERPRINT).score(given)
    clock = iter(range(0, 10**6, 5))
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    show = progress.model_shown("TG", [], "synlm evaluate-syntax")
    show(JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT), "syntaxgym").score(given)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["synlm evaluate-syntax: TG: syntaxgym: 20/40 sentences, 5 s",
                     "synlm evaluate-syntax: TG: syntaxgym: 30/40 sentences, 10 s, "
                     "about 5 s left",
                     "synlm evaluate-syntax: TG: syntaxgym: 40/40 sentences, 15 s"]


def test_each_process_writes_its_own_file_and_reads_them_all(tmp_path: Path) -> None:
    given = sentences(20)
    JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT, rank=0).score(given[0::2])
    JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT, rank=1).score(given[1::2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.rank0.jsonl", "m.rank1.jsonl"]
    one = JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT)
    one.score(given)
    assert one.scorer.batches == []


def test_each_chunk_carries_its_time_summed_over_processes_and_stops(
        tmp_path: Path, monkeypatch) -> None:
    """Chunks of 10, 10 and 5 sentences scored in 2, 1.5 and 0.25 CPU seconds (3, 2 and 0.5
    wall seconds), the last after a stop in another process: each line carries its own
    seconds, and the folder's sum is the run's, whichever process reads it."""
    cpu = iter([0.0, 2.0, 5.0, 6.5, 7.0, 100.0, 100.25])  # 7.0: the stopped chunk's start
    wall = iter([0.0, 3.0, 10.0, 12.0, 20.0, 50.0, 50.5])
    monkeypatch.setattr(journal, "process_time", lambda: next(cpu))
    monkeypatch.setattr(journal, "perf_counter", lambda: next(wall))
    given = [["w", str(i)] for i in range(25)]
    with pytest.raises(Stopped):
        JournaledScorer(BatchSensitive(stop_after=2), tmp_path, "m", FINGERPRINT).score(given)
    resumed = JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT, rank=1)
    resumed.score(given)
    lines = [json.loads(line) for name in ("m.rank0.jsonl", "m.rank1.jsonl")
             for line in (tmp_path / name).read_text().splitlines()[1:]]
    assert [(line["cpu_seconds"], line["wall_seconds"], len(line["scores"]))
            for line in lines] == [(2.0, 3.0, 10), (1.5, 2.0, 10), (0.25, 0.5, 5)]
    spent = TimeSpent(chunks=3, sentences=25, timed_chunks=3, timed_sentences=25,
                      cpu_seconds=3.75, wall_seconds=5.5)
    assert resumed.time_spent() == spent
    assert JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT).time_spent() == spent


def test_a_chunk_written_as_a_bare_list_is_read_and_counted_untimed(tmp_path: Path) -> None:
    """A chunk line that is only its list of scores: its sentences are read (not scored
    again) and counted, outside the timed ones."""
    given = sentences(12)  # 10 distinct: one chunk
    JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT).score(given)
    path = tmp_path / file_name("m", 0)
    header, line = path.read_text().splitlines()
    path.write_text(f"{header}\n{json.dumps(json.loads(line)['scores'])}\n")
    again = JournaledScorer(BatchSensitive(), tmp_path, "m", FINGERPRINT)
    assert len(again.done) == 10
    more = [["v", str(i)] for i in range(4)]
    again.score(given + more)
    assert again.scorer.batches == [4]
    spent = again.time_spent()
    assert (spent.chunks, spent.sentences, spent.timed_chunks, spent.timed_sentences) == \
        (2, 14, 1, 4)


def test_evaluate_syntax_journal_resumes_with_the_same_json(tmp_path: Path, capsys) -> None:
    """The command twice with one ``--journal``: the same JSON, the second reading every
    score from the journal; a journal of another checkpoint refused in one line."""
    ckpt = save_checkpoint(unigram_model(), tmp_path / "unigram.ckpt")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence_good": good, "sentence_bad": bad}) + "\n"
                             for good, bad in [("The cats sleep.", "The cats sleeps."),
                                               ("A dog barks.", "A dog bark.")]))
    outs, spent = [], []
    for _ in range(2):
        out = tmp_path / f"out{len(outs)}.json"
        capsys.readouterr()
        assert run_cli(["evaluate-syntax", "--ckpt_path", str(ckpt), "--pairs", str(pairs),
                        "--journal", str(tmp_path / "journal"), "--output", str(out),
                        "--no-progress"]) == 0
        outs.append([json.loads(line) for line in out.read_text().splitlines()])
        summary = json.loads(capsys.readouterr().out)
        assert summary["provenance"]["journal"]["folder"] == str(tmp_path / "journal")
        [(label, time_spent)] = summary["provenance"]["journal"]["models"].items()
        spent.append(time_spent)
    assert outs[0] == outs[1] and len(outs[0]) == 2
    [written] = (tmp_path / "journal").iterdir()
    lines = written.read_text().splitlines()
    assert len(lines) == 2 and len(json.loads(lines[1])["scores"]) == 4  # a header, a chunk
    assert written.name == file_name(label, 0)
    # the second run read every score: the run's time is still the first run's chunk's
    assert spent[0] == spent[1] and spent[0]["cpu_seconds"] == json.loads(lines[1])[
        "cpu_seconds"]
    assert (spent[0]["sentences"], spent[0]["timed_sentences"]) == (4, 4)
    changed = unigram_model()
    with torch.no_grad():
        changed.decoder.bias.add_(0.5)
    other = save_checkpoint(changed, tmp_path / "other.ckpt")
    capsys.readouterr()
    assert run_cli(["evaluate-syntax", "--ckpt_path", str(other), "--pairs", str(pairs),
                    "--label", written.name.split(".rank")[0], "--journal",
                    str(tmp_path / "journal"), "--no-progress"]) != 0
    assert "was written for another model or search (differs in: files)" in \
        capsys.readouterr().err


def test_journal_is_refused_where_nothing_is_scored_by_benchmark(tmp_path: Path, capsys) -> None:
    """``--results`` scores nothing and ``--sentences`` writes its table in one pass: each
    refuses ``--journal`` in one line."""
    results = tmp_path / "r.jsonl"
    results.write_text("")
    sentences = tmp_path / "s.txt"
    sentences.write_text("the cats sleep\n")
    ckpt = save_checkpoint(unigram_model(), tmp_path / "unigram.ckpt")
    for flags, said in (
            (["--results", str(results)], "--journal: how models are scored"),
            (["--ckpt_path", str(ckpt), "--sentences", str(sentences),
              "--surprisals", str(tmp_path / "s.tsv")], "--journal keeps the benchmarks'")):
        capsys.readouterr()
        assert run_cli(["evaluate-syntax", *flags, "--journal", str(tmp_path / "j")]) != 0
        assert said in capsys.readouterr().err
