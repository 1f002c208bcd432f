"""Particle filtering (synlm.transition.particles): on a grammar small enough to enumerate,
its estimate of log p(x) never exceeds the exact marginal and reaches it as the particles
grow, for the RNNG, the in-order RNNG and an action Transformer; one particle is one
ancestral sample; seeded draws repeat; batched equals one sentence at a time; a sentence
whose particles all die is marked, never NaN; ``evaluate-syntax`` and ``parse`` take
``--search particles``."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from test_action_transformer import random_model as random_transformer
from test_in_order_rnng import all_parses as all_in_order_parses
from test_in_order_rnng import random_model as random_in_order
from test_rnng import all_parses, random_rnng
from test_rnng_cli import fit

from conftest import pair_report, run_cli
from synlm.errors import InputError, SettingError
from synlm.loading import load_model
from synlm.syntax.trees import to_bracket
from synlm.transition.beam import search_sentences
from synlm.transition.parser_state import NO_ACTION
from synlm.transition.particles import ParticleSettings, filter_batch, use_particles
from synlm.tse.scoring import ModelScorer

WORDS, N = torch.tensor([[1, 3, 2]]), torch.tensor([3])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RNNG run (``test_rnng_cli``'s), 6 steps."""
    root = tmp_path_factory.mktemp("rnng")
    fit(root, 6)
    return root


def enumerated(name: str) -> tuple[torch.nn.Module, list[list[int]], torch.Tensor]:
    """A random model ``name`` of one nonterminal whose search normalises as its
    teacher forcing does, every parse of ``WORDS`` (at most two NT in a row) and each
    parse's log p(x, y) (its end included)."""
    if name == "in_order":
        model = random_in_order(5, 3, max_consecutive=2, legal_softmax=True)
        parses = all_in_order_parses(model, 3)
        forced = [p[:-1] for p in parses]  # teacher forcing scores FINISH itself
    else:
        model = random_rnng(5, 3, max_consecutive=2, legal_softmax=True) if name == "rnng" \
            else random_transformer(5, 3, "tg", max_consecutive=2)
        parses = all_parses(model, 3)
        forced = parses
    A = max(map(len, forced))
    actions = torch.tensor([p + [NO_ACTION] * (A - len(p)) for p in forced])
    joint = model(WORDS.expand(len(parses), -1), actions, N.expand(len(parses))).joint
    return model, parses, joint


def estimate(model: torch.nn.Module, settings: ParticleSettings) -> float:
    (result,) = filter_batch(model, WORDS, N, settings)
    return sum(result.word_log_probs) + result.end_log_prob


@pytest.mark.parametrize("name, enough, within", [("rnng", 2000, 1e-9),
                                                  ("in_order", 30_000, 1e-9),
                                                  ("tg", 10_000, 1e-4)])
def test_the_estimate_reaches_the_exact_marginal_as_the_particles_grow(name, enough, within):
    """log p(x) = logsumexp over every tree (63 top-down, 216 in-order): ``enough`` rounded
    particles keep every tree of the RNNGs (the estimate exact, the parses all found) and
    all but those of the Transformer's below a share of 1e-5 (the least likely 6e-11), the
    best first; 10 keep fewer (less); 2,000 multinomial ones, over five seeds, fall short by
    less than 0.05 on average; no estimate exceeds the exact value."""
    model, parses, joint = enumerated(name)
    exact = torch.logsumexp(joint, 0).item()
    (full,) = filter_batch(model, WORDS, N, ParticleSettings(enough))
    total = sum(full.word_log_probs) + full.end_log_prob
    assert exact - within < total <= exact + 1e-9
    assert len(full.parses) == len(parses) or name == "tg"
    assert list(full.parses[0][0]) == parses[int(joint.argmax())]
    assert full.parses[0][1] == pytest.approx(joint.max().item(), abs=1e-9)
    assert estimate(model, ParticleSettings(10)) < exact - 0.05
    sampled = [estimate(model, ParticleSettings(2000, sampling="multinomial", seed=seed))
               for seed in range(5)]
    assert all(s <= exact + 1e-9 for s in sampled)
    assert sum(sampled) / len(sampled) == pytest.approx(exact, abs=0.05)
    important = estimate(model, ParticleSettings(2000, reweight="importance"))
    assert exact - 0.05 < important <= exact + 1e-9


def test_one_particle_is_one_ancestral_sample():
    """With one multinomial particle, each of 3,000 copies of a sentence keeps one tree,
    of score its teacher-forced log p(x, y) and the estimate's log p(x); the trees come as
    often as ancestral sampling of the actions draws them: q(y), the product of each
    action's probability renormalised over the legal actions (``legal_softmax``'s
    teacher forcing), within five standard errors for each tree."""
    model, parses, joint = enumerated("rnng")
    A = max(map(len, parses))
    actions = torch.tensor([p + [NO_ACTION] * (A - len(p)) for p in parses])
    q = model(WORDS.expand(len(parses), -1), actions, N.expand(len(parses))) \
        .action_log_probs.sum(1).exp()
    S = 3000
    results = filter_batch(model, WORDS.expand(S, -1), N.expand(S),
                           ParticleSettings(1, sampling="multinomial", seed=7))
    drawn = Counter()
    for result in results:
        ((tree, score),) = result.parses
        i = parses.index(list(tree))
        assert score == pytest.approx(joint[i].item(), abs=1e-9)
        assert sum(result.word_log_probs) + result.end_log_prob == pytest.approx(score)
        drawn[i] += 1
    assert len(drawn) > 20
    for i, p in enumerate(q.tolist()):
        assert abs(drawn[i] / S - p) < 5 * math.sqrt(p * (1 - p) / S) + 1e-9


def test_seeded_draws_repeat_and_rounding_needs_no_seed():
    model, _, _ = enumerated("rnng")

    def search(**kwargs: object) -> object:
        return filter_batch(model, WORDS, N, ParticleSettings(20, **kwargs))[0]

    assert search(sampling="multinomial", seed=3) == search(sampling="multinomial", seed=3)
    assert {search(sampling="multinomial", seed=s).parses for s in range(5)}.__len__() > 1
    assert search(seed=1) == search(seed=2)


def test_batched_equals_one_sentence_at_a_time():
    """Three sentences of different lengths searched together or alone: the same
    surprisals and parses; ``search_sentences`` takes the settings."""
    model = random_rnng(6, 4, max_consecutive=3)
    words = torch.tensor([[1, 3, 2, 5], [4, 1, 0, 0], [2, 0, 0, 0]])
    lengths = torch.tensor([4, 2, 1])
    settings = ParticleSettings(300)
    together = filter_batch(model, words, lengths, settings)
    for b in range(3):
        (alone,) = filter_batch(model, words[b:b + 1, :int(lengths[b])], lengths[b:b + 1],
                                settings)
        assert [p for p, _ in alone.parses] == [p for p, _ in together[b].parses]
        assert [s for _, s in alone.parses] == \
            pytest.approx([s for _, s in together[b].parses], abs=1e-12)
        assert alone.word_log_probs == pytest.approx(together[b].word_log_probs, abs=1e-12)
    assert search_sentences(model, words, lengths, settings) == together


def test_a_sentence_whose_particles_all_die_is_marked():
    """Uniform action probabilities and one rounded particle: after the root's NT, SHIFT
    and NT each get round(½) = 0 particles: no tree, searched again with no stack bound,
    marked (no log-probabilities), never NaN; other sentences keep theirs."""
    model = random_rnng(5, 3)
    with torch.no_grad():
        for p in model.action_decoder.parameters():
            p.zero_()
    (dead,) = search_sentences(model, WORDS, N, ParticleSettings(1))
    assert not dead.parsed and dead.word_log_probs is None and dead.end_log_prob is None
    assert dead.parses == () and dead.unbounded_stack
    (alive,) = search_sentences(model, WORDS, N, ParticleSettings(1000))
    assert alive.parsed and all(math.isfinite(lp) for lp in alive.word_log_probs)


@pytest.mark.parametrize("field, value", [("particles", 0), ("reweight", "joint_prob"),
                                          ("sampling", "systematic"), ("max_items", 0),
                                          ("max_stack", 4)])
def test_bad_settings_are_one_line_errors(field, value):
    with pytest.raises(SettingError, match=field):
        ParticleSettings(**{field: value})


def test_the_commands_search_by_particles(trained, tmp_path, capsys):
    """``evaluate-syntax`` and ``parse`` with ``--search particles --particles 50`` score and
    parse as the model searching by particle filtering does, and record the search."""
    model = load_model(str(trained))
    use_particles(model, 50)
    assert model.beam == ParticleSettings(50)
    report = pair_report(trained, tmp_path, capsys, "the dog sleeps", "dog the sleeps",
                         "--search", "particles", "--particles", "50")
    assert report["conventions"]["pairs"]["search"] == \
        "particle filtering, 50 particles, rounded, joint reweighting"
    good, bad = (sum(s.word_log_probs) for s in ModelScorer(model).score(
        [["the", "dog", "sleeps"], ["dog", "the", "sleeps"]]))
    assert report["headline"]["pairs/accuracy"] == float(good > bad)
    text = tmp_path / "in.txt"
    text.write_text("the cat sleeps\n")
    assert run_cli(["parse", "--ckpt_path", str(trained), "--input", str(text), "--format",
                    "json", "--search", "particles", "--particles", "50"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    expected = model.parse([["the", "cat", "sleeps"]])[0]
    assert json.loads(line)["tree"] == (None if expected is None else to_bracket(expected))


@pytest.mark.parametrize("command, flags, message", [
    ("evaluate-syntax", ["--particles", "5"], "add --search particles"),
    ("evaluate-syntax", ["--search", "particles", "--beam-size", "5"], "--beam-size"),
    ("parse", ["--particles", "5"], "add --search particles"),
])
def test_particle_flags_out_of_place_are_one_line_errors(trained, tmp_path, capsys, command,
                                                         flags, message):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "a b", "sentence_bad": "b a"}) + "\n")
    source = ["--pairs", str(pairs)] if command == "evaluate-syntax" else \
        ["--input", str(pairs)]
    assert run_cli([command, "--ckpt_path", str(trained), *source, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_lm_evals_model_searches_by_particles(trained):
    """``lm-eval --model synlm --model_args ckpt_path=RUN,search=particles,particles=50``
    scores a text by the particle filter's word probabilities; the flags out of place and a
    beam size for a model searching by particles are one-line errors."""
    from lm_eval.api.instance import Instance

    from synlm.lm_eval_model import SynlmLM

    lm = SynlmLM(ckpt_path=str(trained), search="particles", particles=50, greedy=False)
    assert lm.scorer.model.beam == ParticleSettings(50)
    model = load_model(str(trained))
    use_particles(model, 50)
    (expected,) = ModelScorer(model).score([["the", "dog", "sleeps"]])
    assert lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, ("the dog sleeps",),
                                              0)]) == [pytest.approx(expected.total(eos=False))]
    for kwargs, message in (({"particles": 5}, "add search=particles"),
                            ({"search": "particles", "beam_size": 5}, "beam_size: a beam size"),
                            ({"search": "particle"}, "expected beam or particles")):
        with pytest.raises(InputError, match=message):
            SynlmLM(ckpt_path=str(trained), **kwargs)
    with pytest.raises(InputError, match="word_beam_size: a beam size, but the model searches "
                                         "by particle filtering, 50 particles"):
        model.use_beam(word_beam_size=3)
