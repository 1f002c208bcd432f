"""What the structure models compute and refuse: the two surprisal conventions of a
transition LM's search (renormalised over the legal actions given the length, whose end term
is 0 for a top-down model and real for the in-order RNNG; or over every action, whose end
term is real), each model's released one by default and named in ``evaluate-syntax``'s
output; ``--eos`` refused where the end term is 0 for every sentence and added where it is
not; beam flags refused for a model without a search; an action order a model does
not decode refused at ``fit``. The two other structure models, CAG (the RNNG's conventions)
and the Pushdown LM (``pushdown_ranked``, its end term real), are scored by
``evaluate-syntax`` and the lm-eval adapter under their declared convention, each number
its own search's, and ``export-hf`` refuses them in one line (no Hugging Face form)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_beam_failures import WORDS, ids, tiny_rnng
from test_evaluate_syntax import unigram_model

from conftest import TINY_OVERRIDES, fake_models, run_cli
from synlm.catalog import REPO_CONFIGS
from synlm.commands import evaluate_syntax
from synlm.commands import export_hf as export_hf_command
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.hf_export import export_hf
from synlm.syntax.actions import ActionVocab
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.beam import BeamSettings, SearchSettings, search_sentences
from synlm.transition.cag import CAG
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.lm import TransitionLM
from synlm.transition.parser_state import FIRST_NT, REDUCE, SHIFT
from synlm.transition.particles import ParticleSettings
from synlm.transition.pushdown_lm import PushdownLM
from synlm.transition.rnng import RNNG
from synlm.transition.types import PUSHDOWN_RANKED, RENORMALISED
from synlm.tse.evaluation import END_IS_CERTAIN
from synlm.tse.scoring import ModelScorer

V, N_ACTIONS = 7, 5


def models() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {"rnng": RNNG(V, N_ACTIONS, 8, 8, 1, 0.0).eval(),
            **{attention: ActionTransformer(V, N_ACTIONS, attention, size=8, num_layers=1,
                                            num_heads=2, dropout=0.0).eval()
               for attention in ("causal", "plm_mask", "tg")}}


@pytest.mark.parametrize("name", ["rnng", "causal", "plm_mask", "tg"])
def test_renormalised_sums_to_one_over_the_legal_actions_all_actions_does_not(name: str
                                                                              ) -> None:
    """After NT(S) (SHIFT and NT legal, REDUCE not): Σ_w p(SHIFT, w) + Σ p(NT) is 1 when
    renormalised, less than 1 over every action (REDUCE's mass lost); the two differ by one
    constant over the legal actions."""
    model = models()[name]
    state = model.initial_state(V, 16, 50)
    state = model.advance(state, torch.full((V,), FIRST_NT), torch.zeros(V, dtype=torch.long))
    words = torch.arange(V)  # row w asks for word w
    legal = state.parser.legal_actions(torch.full((V,), 3), N_ACTIONS, model.limits)
    assert legal[:, SHIFT].all() and not legal[:, REDUCE].any() and legal[:, FIRST_NT:].all()
    with torch.no_grad():
        renormalised = model.next_log_probs(state, words, legal, renormalise=True).double()
        every = model.next_log_probs(state, words, legal, renormalise=False).double()

    def total(log_probs: torch.Tensor) -> float:
        shift = torch.logsumexp(log_probs[:, SHIFT], 0)  # over the words
        return float(torch.logsumexp(torch.cat([shift[None], log_probs[0, FIRST_NT:]]), 0))

    assert total(renormalised) == pytest.approx(0.0, abs=1e-6)
    assert total(every) < -1e-4
    gap = (renormalised - every)[legal]
    assert torch.allclose(gap, gap[0].expand_as(gap), atol=1e-6)
    assert float(gap[0]) == pytest.approx(-total(every), abs=1e-6)
    assert (renormalised[~legal] == float("-inf")).all()
    assert (every[~legal] == float("-inf")).all()


def far_from_uniform(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every weight drawn from U(-1, 1), in float64: distributions peaked
    enough that a search prunes."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-1.0, 1.0)
    return model.double().eval()


SEARCHES = {"beam": BeamSettings(10, 3, 1),
            "particles": ParticleSettings(particles=100),
            "multinomial": ParticleSettings(particles=100, sampling="multinomial"),
            "importance": ParticleSettings(particles=100, reweight="importance")}


def searched_model(name: str) -> torch.nn.Module:
    """A random model of each family, far from uniform (``far_from_uniform``)."""
    return far_from_uniform(
        RNNG(V, N_ACTIONS, 6, 5, 2, 0.0) if name == "rnng" else
        InOrderRNNG(V, N_ACTIONS, 6, 5, 2, 0.0) if name == "in_order" else
        ActionTransformer(V, N_ACTIONS, name, size=8, num_layers=1, num_heads=2, dropout=0.0))


def end_terms(model: torch.nn.Module, settings: SearchSettings) -> list[float]:
    """The end terms of six random sentences (3 to 7 words) searched with ``settings``, of
    those with a parse."""
    torch.manual_seed(1)
    words, n = torch.randint(1, V, (6, 7)), torch.tensor([7, 6, 5, 4, 3, 7])
    return [r.end_log_prob for r in search_sentences(model, words, n, settings) if r.parsed]


@pytest.mark.parametrize("search", list(SEARCHES))
@pytest.mark.parametrize("name", ["rnng", "in_order", "causal", "plm_mask", "tg"])
def test_the_end_term_is_zero_where_the_search_says_it_is(name: str, search: str) -> None:
    """Each model, convention and search: the end terms are all 0 where ``end_is_certain``
    says so (a top-down model renormalised, by beam search or the released particle
    filtering); well below 0 for the in-order RNNG, which can still open constituents after
    the last word, and for every model over every action; never above 0."""
    model = searched_model(name)
    certain = {}
    for convention in ("renormalised_given_length", "all_actions"):
        settings = replace(SEARCHES[search], convention=convention)
        ends = end_terms(model, settings)
        certain[convention] = settings.end_is_certain(model)
        assert len(ends) >= 4 and max(ends) <= 1e-12
        if certain[convention]:
            assert ends == pytest.approx([0.0] * len(ends), abs=1e-12)
        if name == "in_order" or convention == "all_actions":
            assert min(ends) < -1e-2
    top_down = name != "in_order"
    assert certain == {"renormalised_given_length": top_down and search in ("beam",
                                                                            "particles"),
                       "all_actions": False}


@pytest.mark.parametrize(("name", "search"), [("rnng", "multinomial"), ("tg", "multinomial"),
                                              ("causal", "importance")])
def test_resampling_that_can_drop_an_item_at_the_end_is_not_certain(name: str,
                                                                     search: str) -> None:
    """Renormalised, a top-down model's closing steps keep every item, but a multinomial
    draw or importance weights at the end can leave one without particles: its mass, and
    the end term with it, is lost."""
    model = searched_model(name)
    settings = replace(SEARCHES[search], convention="renormalised_given_length")
    assert not settings.end_is_certain(model)
    assert min(end_terms(model, settings)) < -1e-2


def pairs_file(tmp_path: Path) -> Path:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "the dog sleeps",
                                 "sentence_bad": "the dog sees"}) + "\n")
    return pairs


def test_eos_is_refused_where_the_end_term_is_zero(capsys: pytest.CaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    fake_models(monkeypatch, lambda path: (
        unigram_model() if path == "lstm.ckpt" else tiny_rnng()))
    pairs = str(pairs_file(tmp_path))
    # the top-down RNNG's end term, computed: 0 for both sentences of the pair
    rnng = tiny_rnng()
    results = rnng.search_ids([ids(rnng, "the dog sleeps"), ids(rnng, "the dog sees")])
    assert [r.end_log_prob for r in results] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert run_cli(["evaluate-syntax", "--ckpt_path", "rnng.ckpt", "--pairs", pairs,
                    "--eos"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--eos" in err and "0 for every sentence" in err
    assert "RNNG can only close its constituents" in err
    # over every action the end term is real: --eos is taken, the convention named
    assert run_cli(["evaluate-syntax", "--ckpt_path", "rnng.ckpt", "--pairs", pairs, "--eos",
                    "--search-convention", "all_actions"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["conventions"]["pairs"]["search_convention"] == "all_actions"
    assert summary["conventions"]["pairs"]["eos"] is True
    assert "eos_term" not in summary["conventions"]["pairs"]
    # several models: the RNNG's conventions say so, the LSTM's name no search
    report = tmp_path / "report"
    assert run_cli(["evaluate-syntax", "--ckpt_path", "rnng.ckpt", "lstm.ckpt", "--pairs",
                    pairs, "--eos", "--report", str(report)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rnng, lstm = (summary["models"][name]["conventions"]["pairs"]
                  for name in ("rnng", "lstm"))  # labelled by the files' stems
    assert rnng["search_convention"] == "renormalised_given_length"
    assert rnng["eos_term"] == END_IS_CERTAIN
    assert "search_convention" not in lstm and "eos_term" not in lstm
    # the side-by-side table says in its header that it mixes conventions
    header = (report / "headline.md").read_text().splitlines()[0]
    assert "mixed surprisal conventions" in header
    assert "Mixed surprisal conventions: rnng score log p(x_i | x_<i, n)" in \
        (report / "headline.md").read_text()


def test_eos_adds_the_in_order_rnngs_end_term(capsys: pytest.CaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    """Renormalised too, the in-order RNNG's end term is real (its trees can still grow
    after the last word): ``--eos`` is taken for it alone, and each sentence's total gains
    exactly the end term its search computes."""
    fake_models(monkeypatch, lambda path: tiny_rnng(model_class=InOrderRNNG))
    model = tiny_rnng(model_class=InOrderRNNG)
    assert model.search_convention == "renormalised_given_length"
    assert not ModelScorer(model).end_is_certain
    good, bad = model.search_ids([ids(model, "the dog sleeps"), ids(model, "the dog sees")])
    assert good.end_log_prob < -1e-2 and bad.end_log_prob < -1e-2
    pairs = str(pairs_file(tmp_path))
    records = {}
    for eos in ([], ["--eos"]):
        output = tmp_path / f"records{len(eos)}.jsonl"
        assert run_cli(["evaluate-syntax", "--ckpt_path", "in_order.ckpt", "--pairs", pairs,
                        "--output", str(output), *eos]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        convention = summary["conventions"]["pairs"]
        assert convention["eos"] is bool(eos) and "eos_term" not in convention
        assert convention["search_convention"] == "renormalised_given_length"
        records[bool(eos)] = json.loads(output.read_text().splitlines()[0])
    without, with_end = records[False], records[True]
    assert without["good_log_prob"] == pytest.approx(sum(good.word_log_probs), abs=1e-9)
    assert with_end["good_log_prob"] - without["good_log_prob"] == \
        pytest.approx(good.end_log_prob, abs=1e-9)
    assert with_end["bad_log_probs"][0] - without["bad_log_probs"][0] == \
        pytest.approx(bad.end_log_prob, abs=1e-9)


@pytest.mark.parametrize("args", [["--ckpt_path", "lstm.ckpt", "--beam-size", "5"],
                                  ["--ckpt_path", "lstm.ckpt", "--search-convention",
                                   "all_actions"],
                                  ["--hf", "gpt2", "--beam-size", "5"]])
def test_a_beam_flag_for_a_model_without_a_search_is_one_line(
        args: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    fake_models(monkeypatch, lambda path: unigram_model())
    assert run_cli(["evaluate-syntax", *args, "--pairs", str(pairs_file(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and args[2] in err and "no beam search" in err


def test_unset_beam_flags_keep_the_checkpoints_sizes(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """A PLM's fast track is 5: evaluate-syntax without --shift-size keeps it."""
    model = tiny_rnng()
    model.beam = BeamSettings(6, 3, 5)
    args = evaluate_syntax.build_parser().parse_args(["--ckpt_path", "x", "--beam-size", "7"])
    evaluate_syntax.with_beam(model, args)
    assert (model.beam.beam_size, model.beam.word_beam_size, model.beam.shift_size) == (7, 3, 5)
    assert model.search_convention == "renormalised_given_length"


TINY_FIT = [*TINY_OVERRIDES, "--data.corpus.init_args.n_train=20",
            "--data.corpus.init_args.n_valid=4", "--data.corpus.init_args.n_test=4",
            "--trainer.max_steps=1"]
SIZES = {"rnng.yaml": ["--model.init_args.model.init_args.input_size=8",
                       "--model.init_args.model.init_args.hidden_size=8",
                       "--model.init_args.model.init_args.num_layers=1"],
         "cag.yaml": ["--model.init_args.model.init_args.input_size=8",
                      "--model.init_args.model.init_args.num_layers=1",
                      "--model.init_args.model.init_args.num_heads=2",
                      "--data.subwords=null", "--data.unknown_words=classes"]}
TRANSFORMER = [f"--model.init_args.model.init_args.{key}" for key in
               ("size=8", "num_layers=1", "num_heads=2", "ffn_size=16")]


@pytest.mark.parametrize(("config", "model"), [("rnng.yaml", "RNNG"),
                                                ("plm.yaml", "ActionTransformer"),
                                                ("plm_mask.yaml", "ActionTransformer"),
                                                ("tg.yaml", "ActionTransformer"),
                                                ("cag.yaml", "CAG")])
def test_an_action_order_the_model_does_not_decode_is_refused_at_fit(
        config: str, model: str, capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    root = tmp_path / "run"
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / config), *TINY_FIT,
                    *SIZES.get(config, TRANSFORMER), f"--trainer.default_root_dir={root}",
                    "--data.action_order=in_order"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"synlm: error: data.action_order=in_order: expected top_down: the "
                       f"{model} decodes only those")
    assert not list(root.glob("version_*/checkpoints/*.ckpt"))


def test_an_action_order_is_refused_for_the_pushdown_lm_at_fit(capsys: pytest.CaptureFixture,
                                                               tmp_path: Path) -> None:
    """The Pushdown LM builds its tree a word at a time, from sentences: an action order
    (which it would not read) is refused, not ignored."""
    root = tmp_path / "run"
    sizes = [f"--model.init_args.{key}" for key in
             ("size=8", "num_layers=1", "attention_heads=2", "ff_multiplier=2",
              "head_depth_divisor=2")]
    assert run_cli(["fit", "--config", str(REPO_CONFIGS / "pushdown.yaml"), *TINY_FIT,
                    *sizes, f"--trainer.default_root_dir={root}",
                    "--data.action_order=in_order"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("synlm: error: data.action_order=in_order: expected top_down (unset): "
                       "the PushdownLM reads no actions, it attaches each word to its tree")
    assert not list(root.glob("version_*/checkpoints/*.ckpt"))


def tiny_cag() -> TransitionLM:
    """A random CAG recipe over ``WORDS`` (one 8-wide layer of 2 heads), in eval mode."""
    torch.manual_seed(0)
    actions = ActionVocab(["S", "NP", "VP"])
    model = TransitionLM(CAG(len(WORDS), len(actions), input_size=8, num_layers=1,
                             num_heads=2, dropout=0.0, embedding_dropout=0.0),
                         beam_size=6, word_beam_size=3, shift_size=1)
    model.vocab, model.action_vocab = Vocab(WORDS), actions
    model.normalization = "ptb"
    return model.eval()


def tiny_pushdown() -> PushdownLM:
    """A random Pushdown LM over ``WORDS`` (one 8-wide layer), beam 4, in eval mode."""
    torch.manual_seed(0)
    model = PushdownLM(len(WORDS), size=8, num_layers=1, attention_heads=2, ff_multiplier=2,
                       head_depth_divisor=2, max_depth=20, dropout=0.0, embedding_dropout=0.0,
                       beam_size=4)
    model.vocab, model.normalization = Vocab(WORDS), "ptb"
    return model.eval()


STRUCTURE = {"cag": (tiny_cag, RENORMALISED, "beam 6, word beam 3, shift 1"),
             "pushdown": (tiny_pushdown, PUSHDOWN_RANKED, "beam 4 over attachments")}
GOOD, BAD = "the dog sleeps", "the dog sees"


@pytest.mark.parametrize("name", list(STRUCTURE))
def test_evaluate_syntax_scores_by_the_models_convention(name: str,
                                                         capsys: pytest.CaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """Each sentence's log-probability is the sum of its own search's word log-probabilities
    (the end term added with ``--eos`` where it is real: the Pushdown LM's ``<eos>`` and
    ``</s>``; refused for CAG, top-down and renormalised, whose end term is 0); the output
    names the convention and the search."""
    build, convention, search = STRUCTURE[name]
    fake_models(monkeypatch, lambda path: build())
    model = build()
    good, bad = model.search_ids([ids(model, GOOD), ids(model, BAD)])
    assert model.search_convention == convention
    pairs = str(pairs_file(tmp_path))
    for eos in ([], ["--eos"]):
        output = tmp_path / f"records{len(eos)}.jsonl"
        code = run_cli(["evaluate-syntax", "--ckpt_path", f"{name}.ckpt", "--pairs", pairs,
                        "--output", str(output), *eos])
        if eos and name == "cag":
            assert code == 2 and good.end_log_prob == 0.0
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "0 for every sentence" in err
            continue
        assert code == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        used = summary["conventions"]["pairs"]
        assert used["search_convention"] == convention and search in used["search"]
        record = json.loads(output.read_text().splitlines()[0])
        end = (good.end_log_prob, bad.end_log_prob) if eos else (0.0, 0.0)
        assert record["good_log_prob"] == pytest.approx(sum(good.word_log_probs) + end[0],
                                                        abs=1e-9)
        assert record["bad_log_probs"][0] == pytest.approx(sum(bad.word_log_probs) + end[1],
                                                           abs=1e-9)
    if name == "pushdown":
        assert good.end_log_prob < -1e-3 and bad.end_log_prob < -1e-3


@pytest.mark.parametrize(("flags", "refused"), [
    (["--word-beam-size", "3"], "word_beam_size: the Pushdown LM searches by beam 4 over "
                                "attachments alone"),
    (["--search-convention", "all_actions"], "convention: the Pushdown LM searches by beam 4"),
    (["--search", "particles"], "the Pushdown LM searches by its beam over attachments, not "
                                "by particle filtering")])
def test_a_search_the_pushdown_lm_does_not_do_is_one_line(
        flags: list[str], refused: str, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_models(monkeypatch, lambda path: tiny_pushdown())
    assert run_cli(["evaluate-syntax", "--ckpt_path", "pushdown.ckpt", "--pairs",
                    str(pairs_file(tmp_path)), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and refused in err


@pytest.mark.parametrize("name", list(STRUCTURE))
def test_the_lm_eval_adapter_scores_by_the_models_convention(name: str) -> None:
    """lm-eval's ``loglikelihood_rolling`` and ``loglikelihood`` are the model's own search's
    word log-probabilities (no end term), under the convention it declares (kept as
    ``convention``)."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from synlm.lm_eval_model import SynlmLM

    build, convention, _ = STRUCTURE[name]
    model = build()
    (found,) = model.search_ids([ids(model, GOOD)])
    adapter = SynlmLM(model=build(), device="cpu")
    assert adapter.convention == convention and not adapter.greedy
    rolling = Instance("loglikelihood_rolling", {}, (GOOD,), 0)
    (total,) = adapter.loglikelihood_rolling([rolling])
    assert total == pytest.approx(sum(found.word_log_probs), abs=1e-9)
    split = Instance("loglikelihood", {}, ("the dog", " sleeps"), 0)
    ((continuation, greedy),) = adapter.loglikelihood([split])
    assert continuation == pytest.approx(found.word_log_probs[-1], abs=1e-9) and not greedy


def test_the_lm_eval_adapter_refuses_a_search_the_pushdown_lm_does_not_do() -> None:
    pytest.importorskip("lm_eval")
    from synlm.lm_eval_model import SynlmLM

    with pytest.raises(InputError, match="^word_beam_size: the Pushdown LM searches by beam 4 "
                                         "over attachments alone$"):
        SynlmLM(model=tiny_pushdown(), word_beam_size=3)


@pytest.mark.parametrize(("name", "described"), [("cag", "TransitionLM (CAG)"),
                                                 ("pushdown", "PushdownLM (PushdownTransformer)")])
def test_export_hf_refuses_a_structure_model_in_one_line(
        name: str, described: str, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A structure model has no next-token distribution to export: refused, nothing
    written."""
    out = tmp_path / "export"
    with pytest.raises(InputError, match=f"a {re.escape(described)} checkpoint has no Hugging "
                                         "Face form"):
        export_hf(STRUCTURE[name][0](), out)
    monkeypatch.setattr(export_hf_command, "check_checkpoint", lambda *args, **kwargs: None)
    monkeypatch.setattr("synlm.loading.load_model", lambda path: STRUCTURE[name][0]())
    assert run_cli(["export-hf", "--ckpt_path", f"{name}.ckpt", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no Hugging Face form" in err
    assert "synlm evaluate-syntax or synlm lm-eval" in err and not out.exists()
