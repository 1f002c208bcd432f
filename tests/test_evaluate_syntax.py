"""``synlm evaluate-syntax``: accuracies computed by hand for a unigram language model on toy
copies of the three benchmarks, the command on a trained checkpoint over slices of the staged
benchmarks, untrained seeds, and one-line errors. (Scoring itself, every backbone, subwords
and the DM mixture: test_tse_scoring.py.)"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import zipfile
from pathlib import Path

import pytest
import torch

from backbone_cases import CASES
from conftest import fake_models, run_cli, tiny_palm_config
from staged import staged
from synlm.commands import evaluate_syntax
from synlm.data.vocab import Vocab
from synlm.lm import SyntaxLM
from synlm.tse.benchmarks import CONVENTIONS
from synlm.tse.scores import ScoredSentence


def staged_data() -> Path:
    """The staged data folder with the three benchmarks (``$SYNLM_DATA_DIR``); skips when
    they are absent."""
    for benchmark in ("blimp", "syntaxgym", "marvin_linzen"):
        folder = staged(benchmark)
    return folder.parent

#: p(word) of the unigram model; it sums to 1.
UNIGRAM = {"<eos>": 0.1, "<unk>": 0.1, "the": 0.2, "cat": 0.1, "cats": 0.05, "sleeps": 0.1,
           "sleep": 0.15, "dog": 0.1, "barks": 0.05, "bark": 0.05}


def unigram_model(unigram: dict[str, float] = UNIGRAM, normalization: str = "ptb") -> SyntaxLM:
    """A real SyntaxLM whose every next-word distribution is ``unigram``: an untied decoder
    with zero weights and the log-probabilities as its bias; its corpus normalised as
    ``normalization`` says."""
    model = SyntaxLM(CASES["AWDLSTM"](), vocab_size=len(unigram), tie_weights=False).eval()
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(torch.tensor(list(unigram.values())).log())
    model.vocab, model.normalization = Vocab(list(unigram)), normalization
    return model


def log_p(*words: str) -> float:
    return sum(math.log(UNIGRAM[w]) for w in words)


def blimp_line(uid: str, term: str, pair_id: int, good: str, bad: str) -> str:
    return json.dumps({"sentence_good": good, "sentence_bad": bad, "UID": uid,
                       "linguistics_term": term, "pairID": str(pair_id)})


def toy_data(root: Path) -> Path:
    """A data folder with toy BLiMP (two paradigms), Marvin & Linzen and SyntaxGym files."""
    agreement = [("The cat sleeps.", "The cat sleep."),  # wrong: p(sleep) > p(sleeps)
                 ("The cats sleep.", "The cats sleeps."),  # right
                 ("The dog barks.", "The dog bark."),  # a tie: wrong
                 ("The cat naps.", "The cat nap.")]  # both <unk>: a tie, and unknown
    (root / "blimp").mkdir(parents=True)
    with zipfile.ZipFile(root / "blimp" / "BLiMP.zip", "w") as archive:
        archive.writestr("data/toy_agreement.jsonl", "\n".join(
            blimp_line("toy_agreement", "subject_verb_agreement", i, g, b)
            for i, (g, b) in enumerate(agreement)))
        archive.writestr("data/toy_length.jsonl", blimp_line(
            "toy_length", "s-selection", 0, "The cat sleep.", "The cat cat sleep."))
    (root / "marvin_linzen").mkdir()
    items = [{"template": "simple_agrmt", "case": "sing_MS_MV", "index": 0,
              "good": "the cat sleeps", "bad": "the cat sleep"},
             {"template": "simple_agrmt", "case": "plur_MS_MV", "index": 0,
              "good": "the cats sleep", "bad": "the cats sleeps"},
             {"template": "simple_npi_anim", "case": "past", "index": 0,
              "good": "the cat sleep", "bad": ["the cat cat sleep", "the cats sleep"]}]
    with gzip.open(root / "marvin_linzen" / "marvin_linzen.jsonl.gz", "wt") as out:
        out.writelines(json.dumps(item) + "\n" for item in items)
    suites = root / "syntaxgym" / "test_suites"
    suites.mkdir(parents=True)

    def condition(name: str, subject: str, verb: str) -> dict:
        return {"condition_name": name, "regions": [
            {"region_number": 1, "content": f"The {subject}"},
            {"region_number": 2, "content": verb}, {"region_number": 3, "content": "."}]}

    (suites / "number_src.json").write_text(json.dumps({
        "meta": {"name": "number_src", "metric": "sum"},
        "region_meta": {"1": "subject", "2": "verb", "3": "end"},
        "predictions": [{"type": "formula", "formula": "[(2;%match%) < (2;%mismatch%)]"}],
        "items": [{"item_number": 1, "conditions": [condition("match", "cat", "sleeps"),
                                                    condition("mismatch", "cat", "sleep")]},
                  {"item_number": 2, "conditions": [condition("match", "cats", "sleep"),
                                                    condition("mismatch", "cats", "sleeps")]}],
    }))
    return root


def evaluate(capsys: pytest.CaptureFixture, *args: str) -> tuple[dict, str]:
    """The command's JSON summary and what it wrote on stderr."""
    assert run_cli(["evaluate-syntax", *args]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_a_unigram_model_gets_the_accuracies_computed_by_hand(capsys, monkeypatch, tmp_path):
    """BLiMP: paradigm accuracies 1/4 and 1/1, the paper's overall mean 0.625, 2/3 in
    vocabulary (the <unk> pair out), sentence log-probabilities the unigram sums; Marvin &
    Linzen: Simple agreement 1/2, the NPI item right (it beats both); SyntaxGym: one item of
    two right, SG score 0.5."""
    fake_models(monkeypatch, lambda path: unigram_model())
    data = toy_data(tmp_path / "data")
    out, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--data-dir", str(data),
                      "--suites", "number_src", "--output", str(tmp_path / "records.jsonl"))
    blimp = out["blimp"]
    assert blimp["paradigms"]["toy_agreement"]["accuracy"] == 0.25
    assert blimp["paradigms"]["toy_length"]["accuracy"] == 1.0
    assert out["headline"]["blimp/accuracy"] == 0.625
    assert out["headline"]["blimp/in_vocabulary_accuracy"] == round((1 / 3 + 1) / 2, 4)
    assert out["headline"]["blimp/unknown_share"] == 0.125
    assert set(blimp["phenomena"]) == {"subject_verb_agreement", "argument_structure"}
    assert out["marvin_linzen"]["table1"]["Subject-verb agreement"]["Simple"]["accuracy"] == 0.5
    # the NPI item: grammatical beats intrusive (an extra "cat") and ungrammatical ("cats"),
    # and the intrusive one loses to the ungrammatical one
    assert out["headline"]["marvin_linzen/npi/grammatical_gt_intrusive"] == 1.0
    assert out["headline"]["marvin_linzen/npi/grammatical_gt_ungrammatical"] == 1.0
    assert out["headline"]["marvin_linzen/npi/intrusive_gt_ungrammatical"] == 0.0
    assert out["conventions"]["blimp"] == {"eos": False, "reference": True,
                                           "text": CONVENTIONS["blimp"]}
    assert out["conventions"]["syntaxgym"]["eos"] is True
    assert out["headline"]["marvin_linzen/reflexives/accuracy"] is None
    assert out["headline"]["syntaxgym/sg_score"] == 0.5
    assert out["syntaxgym"]["circuits"] == {"Agreement": 0.5}

    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert out["records"] == len(records) == 5 + 3 + 2
    first = records[0]
    assert (first["benchmark"], first["UID"], first["correct"]) == ("blimp", "toy_agreement",
                                                                    False)
    assert first["good_log_prob"] == pytest.approx(log_p("the", "cat", "sleeps"), abs=1e-5)
    assert first["bad_log_probs"] == pytest.approx([log_p("the", "cat", "sleep")], abs=1e-5)
    assert [r["unknown"] for r in records[:4]] == [False, False, False, True]
    gym = [r for r in records if r["benchmark"] == "syntaxgym"]
    assert gym[1]["surprisals"]["mismatch"]["2"] == pytest.approx(-math.log(0.1), abs=1e-5)
    # "." is dropped, as in PTB, and the end of the sentence lands in its region
    assert gym[1]["surprisals"]["match"]["3"] == pytest.approx(-math.log(0.1), abs=1e-5)
    assert gym[1]["empty_regions"] == {}
    with_eos, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--data-dir", str(data),
                           "--benchmark", "blimp", "--eos")
    assert with_eos["headline"]["blimp/accuracy"] == 0.625  # <eos> is common to a pair
    assert with_eos["conventions"]["blimp"]["reference"] is False


def test_paradigms_score_those_alone_as_the_whole_run_does(capsys, monkeypatch, tmp_path):
    """--paradigms: the named paradigm's pairs alone, each scored as in the run of all
    (toy_length's accuracy 1.0 both ways); a misspelt UID is one line naming the nearest."""
    fake_models(monkeypatch, lambda path: unigram_model())
    data = toy_data(tmp_path / "data")
    args = ["--ckpt_path", "x.ckpt", "--data-dir", str(data), "--benchmark", "blimp"]
    whole, _ = evaluate(capsys, *args, "--output", str(tmp_path / "whole.jsonl"))
    part, _ = evaluate(capsys, *args, "--paradigms", "toy_length",
                       "--output", str(tmp_path / "part.jsonl"))
    assert set(part["blimp"]["paradigms"]) == {"toy_length"}
    assert part["blimp"]["paradigms"]["toy_length"] == whole["blimp"]["paradigms"]["toy_length"]
    assert part["headline"]["blimp/accuracy"] == 1.0 != whole["headline"]["blimp/accuracy"]
    records = [json.loads(line) for line in (tmp_path / "whole.jsonl").read_text().splitlines()]
    assert (tmp_path / "part.jsonl").read_text().splitlines() == [
        json.dumps(r) for r in records if r["UID"] == "toy_length"]
    assert run_cli(["evaluate-syntax", *args, "--paradigms", "toy_lenght"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown BLiMP paradigm 'toy_lenght'; did you mean toy_length?" in err
    assert len(err.splitlines()) == 1


class EndsAfterAVerb:
    """A scorer whose words are equally likely (-1 each) and whose end of the sentence is
    likely after a verb (-0.1) and unlikely elsewhere (-5): the end-of-sentence term decides
    a pair that the words alone tie, and flips one they decide."""

    VERBS = frozenset({"sleeps", "sleep"})

    def __init__(self) -> None:
        self.vocab_size, self.progress = 9, None

    def words(self, text: str) -> list[str]:
        return text.lower().replace(".", "").split()

    def score(self, sentences):
        out = []
        for words in sentences:
            log_probs = tuple(-1.0 for _ in words)
            eos = -0.1 if words and words[-1] in self.VERBS else -5.0
            out.append(ScoredSentence(tuple(words), log_probs, tuple(False for _ in words), eos,
                                      tuple(words), log_probs))
        return out


def test_eos_flags_flip_a_pair(capsys, monkeypatch, tmp_path):
    """A good sentence one word longer than its bad twin and ending in a verb: by its words
    alone it loses (-6 < -5, the reference convention and ``--no-eos``), with the end of the
    sentence it wins (-6.1 > -10, ``--eos``); the output names the convention."""
    pairs = tmp_path / "mine.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "The cat sleeps now also sleeps",
                                 "sentence_bad": "The cat sleeps now also", "UID": "ends"})
                     + "\n")
    monkeypatch.setattr(evaluate_syntax, "_scorers",
                        lambda args, build: [("stub", "x.ckpt", EndsAfterAVerb(), [])])
    ckpt = tmp_path / "x.ckpt"
    ckpt.touch()  # the command checks that the checkpoint is there
    reference, _ = evaluate(capsys, "--ckpt_path", str(ckpt), "--pairs", str(pairs))
    assert reference["benchmarks"] == ["pairs"]
    assert reference["headline"]["pairs/accuracy"] == 0.0  # -6 < -5: the words alone
    assert reference["conventions"]["pairs"]["eos"] is False
    with_eos, _ = evaluate(capsys, "--ckpt_path", str(ckpt), "--pairs", str(pairs), "--eos")
    assert with_eos["headline"]["pairs/accuracy"] == 1.0  # -6.1 > -10
    assert with_eos["conventions"]["pairs"] == {
        "eos": True, "reference": False, "text": "synlm's: with the end-of-sentence term"}
    no_eos, _ = evaluate(capsys, "--ckpt_path", str(ckpt), "--pairs", str(pairs), "--no-eos")
    assert no_eos["headline"]["pairs/accuracy"] == 0.0


def test_a_suite_file_of_ones_own_and_the_region_table(capsys, monkeypatch, tmp_path):
    """``--suites PATH`` reads a suite from any path; ``--regions`` writes its region
    surprisals in bits; the end of the sentence lands in the ``"."`` region."""
    suite = toy_data(tmp_path / "data") / "syntaxgym" / "test_suites" / "number_src.json"
    mine = tmp_path / "my_suite.json"
    mine.write_text(suite.read_text().replace('"number_src"', '"my_suite"'))
    fake_models(monkeypatch, lambda path: unigram_model())
    out, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--benchmark", "syntaxgym",
                      "--suites", str(mine), "--regions", str(tmp_path / "regions.tsv"))
    assert set(out["syntaxgym"]["suites"]) == {"my_suite"}
    table = (tmp_path / "regions.tsv").read_text()
    assert "my_suite" in table and len(table.splitlines()) > 1


#: The checkpoint kinds of the shipped configs: a word vocabulary, subwords (a byte-level
#: BPE), a head that replaces the distribution (DM-LSTM's mixture).
KINDS = {
    "word": [],
    "subword": ['--data.subwords={"class_path": "TrainedBPE", "init_args": {"vocab_size": 300}}'],
    "dm_mixture": [],
}


def run_dir(root: Path, kind: str) -> Path:
    """A tiny PaLM run of two steps on the synthetic treebank: its folder."""
    heads = ([{"class_path": "DependencyMixtureHead", "init_args": {"phase": "mixture",
                                                                    "context": 4}}]
             if kind == "dm_mixture" else None)
    config = tiny_palm_config(root, heads=heads)
    assert run_cli(["fit", "--config", str(config), "--trainer.max_steps=2",
                    f"--trainer.default_root_dir={root / 'run'}", *KINDS[kind]]) == 0
    return root / "run"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_checkpoint_kind_over_slices_of_the_staged_benchmarks(capsys, monkeypatch,
                                                                    tmp_path, kind):
    """A trained checkpoint through the whole command: the headline is the summaries', one
    record per pair or item comes back; a synthetic word vocabulary reads most benchmark words
    as <unk> (and the command warns), subwords read none."""
    monkeypatch.setenv("SYNLM_DATA_DIR", str(staged_data()))
    run = run_dir(tmp_path, kind)
    out, err = evaluate(capsys, "--ckpt_path", str(run), "--subset", "1", "--batch-size", "7",
                        "--output", str(tmp_path / "r.jsonl"), "--benchmark", "all",
                        "--suites", "number_src", "npi_orc_any", "--untrained", "1")
    assert out["untrained"]["n_models"] == 1  # the checkpoint's own model, fresh weights
    assert set(out["untrained"]) >= set(out["headline"])
    assert out["benchmarks"] == ["blimp", "syntaxgym", "marvin_linzen"]
    assert out["blimp"]["overall"]["paradigms"] == out["blimp"]["overall"]["pairs"] == 67
    assert out["headline"]["blimp/accuracy"] == out["blimp"]["overall"]["accuracy"]
    assert set(out["syntaxgym"]["suites"]) == {"number_src", "npi_orc_any"}
    assert out["syntaxgym"]["items"] == 2
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert out["records"] == len(lines) > 67 + 2
    assert "blimp/accuracy" in err  # the table
    if kind == "subword":
        assert out["headline"]["blimp/unknown_share"] == 0.0
        assert "warning" not in err
    else:
        assert out["headline"]["blimp/unknown_share"] > 0.5
        assert "warning: blimp:" in err


def test_untrained_seeds_give_mean_and_std(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SYNLM_DATA_DIR", str(staged_data()))
    config = tiny_palm_config(tmp_path)
    out, _ = evaluate(capsys, "--config", str(config), "--seeds", "2", "--benchmark", "blimp",
                      "--subset", "2")
    assert out["headline"]["n_models"] == 2 and len(out["per_seed"]) == 2
    accuracies = [seed["blimp/accuracy"] for seed in out["per_seed"]]
    assert out["headline"]["blimp/accuracy"] == pytest.approx(sum(accuracies) / 2, abs=1e-4)
    assert "blimp" not in out  # per-seed headlines only


@pytest.mark.parametrize(("args", "message"), [
    (["--ckpt_path", "missing.ckpt"], "--ckpt_path"),
    (["--ckpt_path", "x.ckpt", "--data-dir", "nowhere", "--benchmark", "blimp"],
     "BLiMP: missing nowhere/blimp/BLiMP.zip; set SYNLM_DATA_DIR"),
    (["--ckpt_path", "x.ckpt", "--benchmark", "syntaxgym", "--suites", "number_sr"],
     "unknown SyntaxGym suite 'number_sr'"),
    (["--ckpt_path", "x.ckpt", "--benchmark", "blimp", "--suites", "number_src"],
     "add syntaxgym to --benchmark"),
    (["--ckpt_path", "x.ckpt", "--benchmark", "syntaxgym", "--paradigms", "adjunct_island"],
     "add blimp to --benchmark"),
    (["--ckpt_path", "x.ckpt", "--output", "no/such/folder/r.jsonl"], "--output: no folder"),
    (["--ckpt_path", "x.ckpt", "--benchmark", "blimpp"], "unknown benchmark 'blimpp'"),
])
def test_bad_input_is_one_line(capsys, monkeypatch, args, message):
    if args[1] == "x.ckpt":
        fake_models(monkeypatch, lambda path: unigram_model())
    assert run_cli(["evaluate-syntax", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_callback_logs_what_the_command_computes(monkeypatch, tmp_path):
    """SyntacticEvaluation in a fit: after the validation, val/blimp/accuracy (and its
    in-vocabulary twin) in metrics.csv, equal to scoring the same slice with the checkpoint
    saved at that step."""
    import csv

    from synlm.loading import load_model
    from synlm.tse import ModelScorer, evaluate_benchmarks

    monkeypatch.setenv("SYNLM_DATA_DIR", str(staged_data()))
    callback = json.dumps({"class_path": "SyntacticEvaluation",
                           "init_args": {"benchmarks": ["blimp"], "subset": 2}})
    assert run_cli(["fit", "--config", str(tiny_palm_config(tmp_path)),
                    "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
                    f"--trainer.callbacks+={callback}",
                    f"--trainer.default_root_dir={tmp_path / 'run'}"]) == 0
    version = tmp_path / "run" / "version_0"
    rows = [r for r in csv.DictReader((version / "metrics.csv").open())
            if r.get("val/blimp/accuracy")]
    assert len(rows) == 1 and rows[0]["step"] == "1"  # one validation, after step 2
    model = load_model(str(version / "checkpoints" / "last.ckpt"))
    blimp = evaluate_benchmarks(ModelScorer(model), ["blimp"], subset=2)["blimp"]
    assert float(rows[0]["val/blimp/accuracy"]) == pytest.approx(
        blimp.headline["blimp/accuracy"], abs=1e-4)
    assert "val/blimp/in_vocabulary_accuracy" in rows[0]


def test_several_models_side_by_side_with_their_untrained_rows(capsys, monkeypatch, tmp_path):
    """Two checkpoints in one command: a headline each, each with its untrained copies' row
    (two seeds), a side-by-side report (tables in three formats, plots) and a paired test;
    the same model twice differs by nothing."""
    fake_models(monkeypatch, lambda path: unigram_model())
    data = toy_data(tmp_path / "data")
    report = tmp_path / "report"
    out, err = evaluate(capsys, "--ckpt_path", "a.ckpt", "b.ckpt", "--untrained", "2",
                        "--data-dir", str(data), "--benchmark", "blimp", "syntaxgym",
                        "--suites", "number_src", "--report", str(report),
                        "--output", str(tmp_path / "r.jsonl"))
    assert list(out["models"]) == ["a", "b"]  # labelled by the files' stems
    assert out["models"]["a"]["model"] == "a.ckpt"
    for model in out["models"].values():
        assert model["headline"]["blimp/accuracy"] == 0.625
        assert model["untrained"]["n_models"] == 2
        assert 0 <= model["untrained"]["blimp/accuracy"] <= 1
    names = {Path(path).name for path in out["report"]["files"]}
    assert {"headline.md", "headline.csv", "headline.tex", "unit.md", "unit.csv",
            "unit.tex"} <= names
    assert any(name.endswith(".png") for name in names)
    paired = out["report"]["paired"]["b - a"]["blimp/accuracy"]
    assert paired["difference"] == 0.0 and paired["p_value"] == paired["holm"] == 1.0
    assert "| a untrained (2 seeds) |" in (report / "headline.md").read_text()
    records = (tmp_path / "r.jsonl").read_text().splitlines()
    assert {json.loads(line)["model"] for line in records} == {"a", "b"}
    assert "blimp/accuracy" in err and "(n=5)" in err  # one table, each value with its count


def test_token_surprisals_of_ones_own_sentences(capsys, monkeypatch, tmp_path):
    """``--sentences`` with ``--surprisals``: lm-zoo's table, in bits, with the end of the
    sentence as the last row of each sentence; ``--tokenise treebank`` reads raw text as
    the benchmarks' sentences are (Mikolov's PTB: lowercase, the period dropped)."""
    fake_models(monkeypatch, lambda path: unigram_model())
    (tmp_path / "s.txt").write_text("The cat sleeps.\n\nThe dogs bark\n")
    out, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--sentences", str(tmp_path / "s.txt"),
                      "--surprisals", str(tmp_path / "s.tsv"), "--tokenise", "treebank")
    assert out["sentences"] == 2
    assert out["provenance"]["sentences"]["tokenise"] == "treebank"
    lines = (tmp_path / "s.tsv").read_text().splitlines()
    assert lines[0] == "sentence_id\ttoken_id\ttoken\tsurprisal"
    assert lines[1].split("\t")[:3] == ["1", "1", "the"]
    assert float(lines[1].split("\t")[3]) == pytest.approx(-math.log2(UNIGRAM["the"]), abs=1e-5)
    assert lines[4].split("\t")[2] == "<eos>"
    assert lines[5].split("\t")[:3] == ["2", "1", "the"]
    assert lines[6].split("\t")[2] == "<unk>"  # "dogs" is not in the vocabulary


#: A pre-tokenised PTB line: quotes opening and closing, brackets as the treebank writes them
#: and as they are, a clitic split off; its tokens' p(token) under ``PTB_UNIGRAM``.
PTB_LINE = "`` He said , `` do n't '' -LRB- yes -RRB- ( really ) ` so ' ''"
PTB_UNIGRAM = {"<eos>": 0.05, "<unk>": 0.05, "``": 0.1, "''": 0.02, "He": 0.05, "said": 0.1,
               ",": 0.05, "do": 0.05, "n't": 0.05, "-LRB-": 0.04, "yes": 0.06, "-RRB-": 0.04,
               "(": 0.08, "really": 0.05, ")": 0.08, "`": 0.03, "so": 0.07, "'": 0.03}


def surprisal_rows(path: Path) -> list[tuple[str, float]]:
    """The (token, surprisal) rows of an lm-zoo table."""
    return [(row.split("\t")[2], float(row.split("\t")[3]))
            for row in path.read_text().splitlines()[1:]]


@pytest.mark.parametrize("flag", [[], ["--tokenise", "whitespace"]])
def test_pre_tokenised_sentences_keep_their_tokens(flag, capsys, monkeypatch, tmp_path):
    """By default a ``--sentences`` line is pre-tokenised text: its whitespace-separated
    tokens are the model's words exactly (a closing ``''`` stays closing, ``-LRB-`` and
    ``(`` stay as written), each with its own surprisal, and the provenance records the
    file and the choice."""
    fake_models(monkeypatch, lambda path: unigram_model(PTB_UNIGRAM, "none"))
    text = tmp_path / "s.txt"
    text.write_text(PTB_LINE + "\n")
    out, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--sentences", str(text),
                      "--surprisals", str(tmp_path / "s.tsv"), *flag)
    rows = surprisal_rows(tmp_path / "s.tsv")
    assert [token for token, _ in rows] == [*PTB_LINE.split(), "<eos>"]
    assert [bits for _, bits in rows] == pytest.approx(
        [-math.log2(PTB_UNIGRAM[t]) for t in [*PTB_LINE.split(), "<eos>"]], abs=1e-5)
    assert out["provenance"]["sentences"] == {
        "file": {"path": str(text.resolve()), "sha256": hashlib.sha256(text.read_bytes())
                 .hexdigest(), "bytes": text.stat().st_size}, "tokenise": "whitespace"}


def test_treebank_tokenises_raw_text(capsys, monkeypatch, tmp_path):
    """``--tokenise treebank`` reads a line as raw text through NLTK's Treebank tokenizer:
    a raw sentence's clitic and quotes are split off as the treebank writes them, and the
    pre-tokenised line's closing quotes after a space become opening ones."""
    fake_models(monkeypatch, lambda path: unigram_model(PTB_UNIGRAM, "none"))
    text = tmp_path / "s.txt"
    text.write_text(PTB_LINE + "\n" + 'He said, "don\'t (really)"\n')
    out, _ = evaluate(capsys, "--ckpt_path", "x.ckpt", "--sentences", str(text),
                      "--surprisals", str(tmp_path / "s.tsv"), "--tokenise", "treebank")
    rows = (tmp_path / "s.tsv").read_text().splitlines()[1:]
    tokens = [[row.split("\t")[2] for row in rows if row.startswith(f"{s}\t")]
              for s in (1, 2)]
    assert tokens[0] == ["``", "He", "said", ",", "``", "do", "n't", "``", "-LRB-", "yes",
                         "-RRB-", "(", "really", ")", "`", "so", "'", "``", "<eos>"]
    assert tokens[1] == ["He", "said", ",", "``", "do", "n't", "(", "really", ")", "''",
                         "<eos>"]
    assert out["provenance"]["sentences"]["tokenise"] == "treebank"


def test_tokenise_needs_sentences(capsys):
    assert run_cli(["evaluate-syntax", "--ckpt_path", "x.ckpt", "--tokenise", "treebank"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tokenise" in err and "--sentences" in err
    assert run_cli(["evaluate-syntax", "--results", "a.json", "--tokenise", "whitespace"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(
        "--tokenise: how models are scored; --results scores nothing (its files were scored "
        "with their own settings)")


def test_help_and_argument_errors_answer_before_torch_loads(tmp_path):
    import subprocess
    import sys

    probe = ("import sys\nfrom synlm.cli import main\n"
             "code = main(['evaluate-syntax', *sys.argv[1:]])\n"
             "print('torch' in sys.modules, code)\n")
    for args in (["--ckpt_path", "x", "--seeds", "2"], ["--ckpt_path", "x", "--bogus"]):
        done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                              text=True, cwd=tmp_path)
        assert "True" not in done.stdout
        assert len(done.stderr.strip().splitlines()) == 1
    done = subprocess.run([sys.executable, "-c", "import sys\nfrom synlm.cli import main\n"
                           "try:\n    main(['evaluate-syntax', '--help'])\nexcept SystemExit:\n"
                           "    print('torch' in sys.modules)\n"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.stdout.strip().endswith("False") and "--hf" in done.stdout


def test_a_truncated_download_is_one_line_naming_the_flag(capsys, monkeypatch, tmp_path):
    data = toy_data(tmp_path / "data")
    path = data / "marvin_linzen" / "marvin_linzen.jsonl.gz"
    path.write_bytes(path.read_bytes()[:40])
    fake_models(monkeypatch, lambda path: unigram_model())
    assert run_cli(["evaluate-syntax", "--ckpt_path", "x.ckpt", "--data-dir", str(data),
                    "--benchmark", "marvin-linzen"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(path) in err and "truncated" in err and "--download" in err
