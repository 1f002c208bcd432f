"""The in-order RNNG (synlm.transition.in_order_rnng) and its recipe: every sample tree's
in-order actions legal step by step and closed by FINISH, the stack's transitions by hand on
a three-word tree, the legal actions, batched equal to one sentence at a time, beam search
equal to the exact marginal on a grammar small enough to enumerate, a tiny model that learns
ten trees, the released code's numbers with its weights transplanted
(tests/fixtures/rnng/reference_in_order.pt, made by benchmarks/rnng_reference.py
--strategy in_order), and a fit of configs/rnng_in_order.yaml through the command line."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from nltk import Tree
from test_actions import cleaned
from test_rnng import TREES, assert_beam_is_exact, assert_learns_ten_trees, encoded, random_rnng
from test_rnng_cli import TINY_RNNG
from test_rnng_reference import (
    assert_searches_equal,
    assert_teacher_forcing_equal,
    batch,
    reference_weights,
)

from conftest import metrics_of_test, run_cli
from staged import staged
from synlm.catalog import REPO_CONFIGS
from synlm.lm_eval_model import SynlmLM
from synlm.loading import load_model
from synlm.syntax.actions import ActionError, ActionVocab, oracle, tree_of, without_preterminals
from synlm.syntax.trees import to_bracket
from synlm.transition.beam import BeamSettings, action_budget, search_batch, stack_slots
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.in_order_state import InOrderParserState, in_order_stack_depth
from synlm.transition.lm import TransitionLM
from synlm.transition.parser_state import FIRST_NT, NO_ACTION, REDUCE, Limits
from synlm.transition.rnng import RNNG
from synlm.tse.scoring import ModelScorer

FIXTURE = Path(__file__).parent / "fixtures" / "rnng" / "reference_in_order.pt"
SAMPLE = Path(__file__).parent / "fixtures" / "syntax" / "sample.mrg"


def random_model(vocab_size: int, n_actions: int, seed: int = 0, **kwargs) -> InOrderRNNG:
    """A float64 in-order RNNG in eval mode whose weights are far from uniform."""
    return random_rnng(vocab_size, n_actions, seed, InOrderRNNG, **kwargs)


@pytest.fixture
def grammar() -> tuple[list[Tree], ActionVocab, dict[str, int]]:
    trees = [Tree.fromstring(t) for t in TREES]
    words = sorted({w for t in trees for w in t.leaves()})
    return trees, ActionVocab.from_trees(trees), {w: i for i, w in enumerate(words)}


# ---------------------------------------------------------------------- oracle round trips
def illegal_gold(trees: list[Tree], max_consecutive: int) -> list[int]:
    """The trees whose in-order actions, run on the model's stack all at once, take an
    illegal action somewhere. Every tree's actions end with one item left and every word
    generated, where FINISH is legal and SHIFT and REDUCE are not, and build the tree back."""
    vocab = ActionVocab.from_trees(trees)
    words = {w: i for i, w in enumerate(sorted({w for t in trees for w in t.leaves()}))}
    w, a, n = encoded(trees, vocab, words, "in_order")
    model = InOrderRNNG(len(words), len(vocab), input_size=2, hidden_size=2, num_layers=1,
                        dropout=0.0, max_consecutive=max_consecutive)
    illegal = torch.zeros(len(trees), dtype=torch.bool)
    with torch.no_grad():
        state = model.initial_state(len(trees), model.stack_depth(a))
        for t in range(a.size(1)):
            legal = state.parser.legal_actions(n, model.n_actions, model.limits)
            took = legal.gather(1, a[:, t:t + 1].clamp(min=0))[:, 0]
            illegal |= ~took & (a[:, t] != NO_ACTION)
            state = model.advance(state, a[:, t], w.gather(
                1, state.parser.pointer.clamp(max=w.size(1) - 1)[:, None])[:, 0])
    legal = state.parser.legal_actions(n, model.n_actions, model.limits)
    assert legal[:, -1].all() and not legal[:, :FIRST_NT].any()
    assert (state.parser.top == 1).all() and (state.parser.pointer == n).all()
    for tree in trees:
        assert tree_of(oracle(tree, "in_order"), tree.leaves(), "in_order") == \
            without_preterminals(tree)
    return illegal.nonzero()[:, 0].tolist()


def test_every_bundled_sample_tree_is_legal_and_round_trips() -> None:
    assert illegal_gold(cleaned(SAMPLE), max_consecutive=3) == []


def test_every_nltk_sample_tree_is_legal_and_round_trips() -> None:
    """All but one: tree 2997 closes a unary chain of three NT (S, SBAR, NP) by a fourth
    REDUCE while words remain, which the released bound of 3 forbids; a bound of 4 admits
    it."""
    trees = cleaned(staged("nltk_treebank", "treebank.zip"))
    assert len(trees) == 3914
    assert illegal_gold(trees, max_consecutive=3) == [2997]
    assert illegal_gold(trees, max_consecutive=4) == []


# ---------------------------------------------------------------------- the stack by hand
def test_transitions_by_hand(grammar):
    """(S (NP the dog) (VP barks)) in order: SHIFT NT(NP) SHIFT REDUCE NT(S) SHIFT NT(VP)
    REDUCE REDUCE FINISH. NT(X) puts X's embedding under the item it takes as first child and
    the stack LSTM reads X on the state that has read that child; REDUCE composes
    ReLU(W [fwd(X, c_1..c_m); bwd(X, c_m..c_1)] + b) at X's position."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab))
    w, a, _n = encoded(trees[:1], vocab, words, "in_order")
    state = model.initial_state(1, stack_size=8)
    nt = {label: model.nt_embedding.weight[vocab.stoi[f"NT({label})"] - FIRST_NT]
          for label in ("S", "NP", "VP")}
    word = {x: model.embedding.weight[words[x]] for x in ("the", "dog", "barks")}
    expected = [  # after each action: top, pointer, open, open positions, consecutive NT
        ("SHIFT", 1, 1, 0, [], 0), ("NT(NP)", 2, 1, 1, [1], 1), ("SHIFT", 3, 2, 1, [1], 0),
        ("REDUCE", 1, 2, 0, [], 0), ("NT(S)", 2, 2, 1, [1], 1), ("SHIFT", 3, 3, 1, [1], 0),
        ("NT(VP)", 4, 3, 2, [1, 3], 1), ("REDUCE", 3, 3, 1, [1], 1),
        ("REDUCE", 1, 3, 0, [], 0), ("FINISH", 1, 3, 0, [], 0)]
    actions = [*a[0].tolist(), model.finish_action]

    def composed(label: torch.Tensor, children: list[torch.Tensor]) -> torch.Tensor:
        f = model.composition.forward_lstm(torch.stack([label, *children])[None])[0][0, -1]
        b = model.composition.backward_lstm(torch.stack([label, *children[::-1]])[None])[0][0, -1]
        return torch.relu(model.composition.output(torch.cat([f, b])))

    np_item = composed(nt["NP"], [word["the"], word["dog"]])
    vp_item = composed(nt["VP"], [word["barks"]])
    stacks = [[word["the"]], [nt["NP"], word["the"]], [nt["NP"], word["the"], word["dog"]],
              [np_item], [nt["S"], np_item], [nt["S"], np_item, word["barks"]],
              [nt["S"], np_item, nt["VP"], word["barks"]], [nt["S"], np_item, vp_item],
              [composed(nt["S"], [np_item, vp_item])]]
    stacks.append(stacks[-1])
    for t, (action, top, pointer, n_open, opened, cons) in enumerate(expected):
        assert [*vocab.itos, "FINISH"][actions[t]] == action
        hidden, cell = state.hidden.clone(), state.cell.clone()
        before = int(state.parser.top)
        step = torch.tensor([actions[t]])
        state = model.advance(state, step, w[0, state.parser.pointer.clamp(max=2)])
        p = state.parser
        assert (int(p.top), int(p.pointer), int(p.n_open), int(p.consecutive_nts)) == \
            (top, pointer, n_open, cons)
        assert state.open_at[0, :n_open].tolist() == opened
        torch.testing.assert_close(state.items[0, :top], torch.stack(stacks[t]), rtol=0,
                                   atol=1e-12)
        if action == "FINISH":
            continue
        # the stack LSTM read the new item (X for NT) on the state below the new top
        read = nt[action[3:-1]] if action.startswith("NT(") else stacks[t][top - 1]
        h, _c = model.stack_lstm(read[None], hidden[0, top - 1][None], cell[0, top - 1][None])
        torch.testing.assert_close(state.hidden[0, top], h[0], rtol=0, atol=1e-12)
        if action.startswith("NT("):  # the state it reads on has read the first child
            assert top - 1 == before
    assert bool(state.parser.finished(torch.tensor([3]))[0])


def legal_of(history: list[int], n_words: int, limits: Limits | None = None) -> list[bool]:
    """The legal actions (SHIFT, REDUCE, one NT, FINISH) after ``history`` (in order)."""
    finish = 3
    state = InOrderParserState.initial(1, finish=finish)
    opened: list[int] = []
    for action in history:
        top = int(state.top)
        if action == REDUCE:
            top = opened.pop()
        elif action == finish:
            pass
        else:
            if action >= FIRST_NT:
                opened.append(top)
            top += 1
        state = state.after(torch.tensor([action]), torch.tensor([top]))
    return state.legal_actions(torch.tensor([n_words]), 4, limits or Limits(max_consecutive=3)
                               )[0].tolist()


@pytest.mark.parametrize(("history", "n_words", "legal"), [
    ([], 2, [True, False, False, False]),  # only SHIFT opens a sentence
    ([0], 2, [False, False, True, False]),  # a first word: only NT projects it
    ([0, 2, 1], 2, [False, False, True, False]),  # nothing open, words left: NT only
    ([0, 2], 2, [True, True, False, False]),  # no NT right after NT; a unary REDUCE is legal
    ([0, 2, 0], 2, [False, True, True, False]),  # after the last word, no SHIFT
    ([0, 2, 0, 1], 2, [False, False, True, True]),  # one item left: FINISH, or project it
    ([0, 2, 1, 2, 1], 1, [False, False, True, True]),  # ... and SHIFT only starts a sentence
    ([0, 2, 0, 1, 3], 2, [False, False, False, False]),  # finished
])
def test_legal_actions(history, n_words, legal):
    assert legal_of(history, n_words) == legal


def test_legal_action_bounds():
    chain = [0, 2, 1, 2, 1, 2]  # a unary chain of three NT over the first word
    assert legal_of(chain, 2) == [True, False, False, False]  # 3 in a chain: no REDUCE
    assert legal_of(chain[:-1], 2) == [False, False, True, False]  # NT still legal
    assert legal_of(chain, 1) == [False, True, False, False]  # after the last word it closes
    assert legal_of([*chain[:-1], 2, 1], 1) == [False, False, False, True]  # ... no NT more
    assert legal_of([0, 2], 2, Limits(max_open=1)) == [True, False, False, False]
    # 3 items, one open: SHIFT and NT need a free slot above the top
    assert legal_of([0, 2, 0], 3, Limits(stack_size=5)) == [True, True, True, False]
    assert legal_of([0, 2, 0], 3, Limits(stack_size=4)) == [False, True, False, False]
    budget = torch.tensor([8])  # 3 taken: NT needs words left + 1 open + 4 <= 8 - 3
    assert legal_of([0, 2, 0], 2, Limits(max_actions=budget))[2]
    assert not legal_of([0, 2, 0], 3, Limits(max_actions=budget))[2]


def test_actions_that_project_nothing_are_a_one_line_error():
    with pytest.raises(ActionError, match="no completed item"):
        in_order_stack_depth(torch.tensor([[2, 0, 1]]), finish=3)
    with pytest.raises(ActionError, match="no open constituent"):
        in_order_stack_depth(torch.tensor([[0, 1]]), finish=3)


# ---------------------------------------------------------------------- batched, search
def test_batched_equals_one_sentence_at_a_time(grammar):
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab))
    w, a, n = encoded(trees, vocab, words, "in_order")
    batched = model(w, a, n)
    lengths = (a != NO_ACTION).sum(1)
    assert batched.action_log_probs.shape == (len(trees), a.size(1) + 1)
    for i, tree in enumerate(trees):
        wi, ai, ni = encoded([tree], vocab, words, "in_order")
        alone = model(wi, ai, ni)
        A, N = ai.size(1) + 1, wi.size(1)  # its actions and FINISH
        torch.testing.assert_close(batched.action_log_probs[i, :A], alone.action_log_probs[0],
                                   rtol=0, atol=1e-12)
        torch.testing.assert_close(batched.word_log_probs[i, :N], alone.word_log_probs[0],
                                   rtol=0, atol=1e-12)
        assert (batched.action_log_probs[i, A:] == 0).all()
    # the joint is log p(x, y) of the stack fed one action at a time, FINISH included
    closed = torch.cat([a, torch.full((len(trees), 1), NO_ACTION)], 1)
    closed[torch.arange(len(trees)), lengths] = model.finish_action
    state = model.initial_state(len(trees), stack_size=16)
    stepped = torch.zeros_like(batched.joint)
    for t in range(closed.size(1)):
        word = w.gather(1, state.parser.pointer.clamp(max=w.size(1) - 1)[:, None])[:, 0]
        log_probs = model.next_log_probs(state, word, torch.ones(len(trees), model.n_actions,
                                                                 dtype=torch.bool))
        step = closed[:, t]
        stepped += log_probs.gather(1, step[:, None].clamp(min=0))[:, 0].where(step >= 0, 0.0)
        state = model.advance(state, step, word)
    torch.testing.assert_close(batched.joint, stepped, rtol=0, atol=1e-12)


def test_traced_stack_backward_equals_autograds_own_indexing(grammar, monkeypatch):
    """The gradients of teacher forcing through a ``Trace`` (an NT's move of its first child
    included) equal those of autograd's own indexing of the same in-place stack."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab))
    w, a, n = encoded(trees, vocab, words, "in_order")
    params = [p for p in model.parameters() if p.requires_grad]
    traced = torch.autograd.grad(model(w, a, n).joint.sum(), params)
    plain = RNNG.initial_state
    monkeypatch.setattr(RNNG, "initial_state",
                        lambda self, rows, size, traced=False: plain(self, rows, size, False))
    indexed = torch.autograd.grad(model(w, a, n).joint.sum(), params)
    for ours, theirs in zip(traced, indexed, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    assert all(g.abs().sum() > 0 for g in traced)


def all_parses(model: InOrderRNNG, n_words: int) -> list[list[int]]:
    """Every legal in-order action sequence over ``n_words`` words, FINISH last."""
    found = []
    n = model.n_actions

    def extend(history: list[int]) -> None:
        legal = legal_of(history, n_words, model.limits)
        if not any(legal):
            found.append(history)
        for action in range(n):
            if legal[action]:
                extend([*history, action])

    extend([])
    return found


def test_beam_equals_the_exact_marginal_and_smaller_beams_bound_it():
    """One nonterminal, three words, unary chains of at most two NT: every tree enumerated.
    The beam large enough to hold them all gives log p(x) = logsumexp over the trees, its
    word log-probs sum to it, its best parse is the best tree; smaller beams give less."""
    model = random_model(5, 3, max_consecutive=2, legal_softmax=True)
    words, n = torch.tensor([[1, 3, 2]]), 3
    parses = all_parses(model, n)
    assert all(p[-1] == model.finish_action for p in parses)
    A = max(map(len, parses)) - 1
    actions = torch.tensor([p[:-1] + [-1] * (A - len(p) + 1) for p in parses])
    joint = model(words.expand(len(parses), -1), actions, torch.full((len(parses),), n)).joint
    assert_beam_is_exact(model, words, parses, joint, 400)


def test_a_tiny_in_order_rnng_learns_ten_trees():
    assert_learns_ten_trees(lambda v, a: InOrderRNNG(v, a, input_size=24, hidden_size=24,
                                                      num_layers=1, dropout=0.0),
                            lr=0.01, order="in_order")


# ---------------------------------------------------------------------- the released code
@pytest.fixture(scope="module")
def reference() -> dict:
    return torch.load(FIXTURE, weights_only=True)


def transplanted(reference: dict) -> tuple[InOrderRNNG, ActionVocab]:
    """synlm's in-order RNNG holding the reference's weights: its actions are ``<pad>``,
    SHIFT, REDUCE, FINISH, NT(X)...; synlm's SHIFT, REDUCE, NT(X)..., FINISH."""
    config = reference["config"]
    vocab = ActionVocab(reference["nonterminals"])
    itos = reference["actions_itos"]
    assert itos[:4] == ["<pad>", "SHIFT", "REDUCE", "FINISH"] and itos[4:] == vocab.itos[2:]
    model = InOrderRNNG(len(reference["words"]) - 1, len(vocab), config["w_dim"],
                        config["h_dim"], config["num_layers"], dropout=0.0,
                        max_open=config["max_open_nts"],
                        max_consecutive=config["max_cons_nts"]).double().eval()
    ours = reference_weights(reference)
    # its NT table has a row per action less three (<pad>, SHIFT, REDUCE): one row more than
    # the labels, which no action reads
    ours["nt_embedding.weight"] = ours["nt_embedding.weight"][:len(vocab) - FIRST_NT]
    rows = [itos.index(a) for a in [*vocab.itos, "FINISH"]]
    ours["action_decoder.weight"] = reference["state_dict"]["action_mlp.weight"][rows]
    ours["action_decoder.bias"] = reference["state_dict"]["action_mlp.bias"][rows]
    model.load_state_dict(ours, strict=True)
    return model, vocab


def without_finish(reference: dict) -> dict:
    """The fixture's sentences with their gold actions less the closing FINISH."""
    sentences = reference["sentences"]
    assert all(s["actions"][-1] == "FINISH" for s in sentences)
    return {**reference, "sentences": [{**s, "actions": s["actions"][:-1]} for s in sentences]}


def test_teacher_forced_log_probs_equal_the_reference(reference):
    model, vocab = transplanted(reference)
    words, actions, lengths = batch(without_finish(reference), vocab)
    assert reference["config"]["max_cons_nts"] == 3
    with torch.no_grad():  # the fixture's actions end with FINISH, the model's output too
        assert_teacher_forcing_equal(model(words, actions, lengths), reference)


def test_the_gold_parse_scores_as_the_reference_searches_it(reference):
    """The gold parse's score with each action's softmax renormalised over the legal actions
    under the search's stack and action budget (the reference's ``gold_beam_score``)."""
    model, vocab = transplanted(reference)
    words, actions, lengths = batch(without_finish(reference), vocab)
    B = words.size(0)
    closed = torch.cat([actions, torch.full((B, 1), NO_ACTION)], 1)
    closed[torch.arange(B), (actions != NO_ACTION).sum(1)] = model.finish_action
    limits = replace(model.limits, stack_size=torch.tensor([stack_slots(int(n), 100)
                                                            for n in lengths]),
                     max_actions=action_budget(lengths))
    state = model.initial_state(B, stack_slots(int(lengths.max()), 100))
    score = torch.zeros(B, dtype=torch.float64)
    with torch.no_grad():
        for t in range(closed.size(1)):
            word = words.gather(1, state.parser.pointer.clamp(max=words.size(1) - 1)[:, None])
            legal = state.parser.legal_actions(lengths, model.n_actions, limits)
            log_probs = model.next_log_probs(state, word[:, 0], legal)
            step = closed[:, t]
            score += log_probs.gather(1, step[:, None].clamp(min=0))[:, 0].where(step >= 0, 0.0)
            state = model.advance(state, step, word[:, 0])
    expected = [s["gold_beam_score"] for s in reference["sentences"]]
    assert score.tolist() == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("setting", ["100,10,1", "20,5,1", "5,5,0"])
def test_beam_search_equals_the_reference(reference, setting):
    """Each sentence alone, as the top-down fixture compares (tests/test_rnng_reference.py)."""
    model, vocab = transplanted(reference)
    words, _, lengths = batch(without_finish(reference), vocab)
    results = search_batch(model, words, lengths, BeamSettings(*map(int, setting.split(","))))
    assert_searches_equal(results, reference["beams"][setting]["alone"],
                          [*vocab.itos, "FINISH"])


# ---------------------------------------------------------------------- the recipe
def fit(root: Path, max_steps: int, *extra: str) -> int:
    return run_cli(["fit", "--config", str(REPO_CONFIGS / "rnng_in_order.yaml"), *TINY_RNNG,
                    f"--trainer.max_steps={max_steps}", f"--trainer.default_root_dir={root}",
                    *extra])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny in-order RNNG run of configs/rnng_in_order.yaml, 4 steps."""
    root = tmp_path_factory.mktemp("in_order")
    torch.set_num_threads(1)
    assert fit(root, 4) == 0
    return root


def test_the_config_fits_and_tests(trained: Path, tmp_path: Path) -> None:
    model = load_model(str(trained))
    assert isinstance(model, TransitionLM) and isinstance(model.model, InOrderRNNG)
    assert model.model.n_actions == len(model.action_vocab) + 1
    assert model.model.limits.max_consecutive == 3
    logged = metrics_of_test(trained, tmp_path / "test")
    for name in ("test/joint_ppl", "test/action_ppl", "test/word_ppl", "test/beam_ppl"):
        assert 1.0 < float(logged[name]) < math.inf, name
    assert 0.0 <= float(logged["test/uf1"]) <= 1.0


def test_parse_and_the_scorers_read_its_beam(trained: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    """``synlm parse`` gives the best in-order tree over the words; ModelScorer (hence
    evaluate-syntax) and the lm-eval model score by the beam's word log-probabilities."""
    model = load_model(str(trained))
    assert model.beam == BeamSettings(6, 3, 1)  # the config's, as TINY_RNNG sets it
    text = tmp_path / "in.txt"
    text.write_text("the cat sleeps\n")
    assert run_cli(["parse", "--ckpt_path", str(trained), "--input", str(text),
                    "--format", "json"]) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    (expected,) = model.parse([["the", "cat", "sleeps"]])
    assert expected.leaves() == ["the", "cat", "sleeps"]
    assert line["tree"] == to_bracket(expected)
    words = ["the", "dog", "sleeps"]
    scored = ModelScorer(model).score([words])[0]
    (result,) = model.search(torch.tensor([model.vocab.encode(words)]), torch.tensor([3]))
    assert result.parses[0][0][-1] == model.model.finish_action
    assert scored.word_log_probs == pytest.approx(result.word_log_probs, abs=1e-6)
    assert scored.eos_log_prob == pytest.approx(result.end_log_prob, abs=1e-6)
    assert SynlmLM(model=model, beam_size=6, word_beam_size=3, shift_size=1).greedy is False


def test_top_down_actions_are_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert fit(tmp_path, 1, "--data.action_order=top_down") != 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "action_order" in x]
    assert line.endswith("data.action_order=top_down: expected in_order: the InOrderRNNG "
                         "decodes only those")
