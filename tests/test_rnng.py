"""The batched RNNG (synlm.transition.rnng) and its word-synchronous beam search: the stack's
transitions by hand, batched equal to one sentence at a time, the legal actions, the exact
marginal on a grammar small enough to enumerate, and a tiny model that learns ten trees."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from nltk import Tree

from synlm.syntax.actions import ActionError, ActionVocab, oracle, tree_of, without_preterminals
from synlm.transition.beam import BeamSettings, search_batch, search_sentences
from synlm.transition.parser_state import FIRST_NT, REDUCE, Limits, ParserState
from synlm.transition.rnng import RNNG

TREES = ["(S (NP (DT the) (NN dog)) (VP (VBZ barks)))",
         "(S (NP (PRP it)) (VP (VBZ is) (ADJP (JJ red))) (. .))",
         "(S (NP (NNS dogs)) (VP (VBP bark) (PP (IN at) (NP (DT the) (NN cat)))))"]


def encoded(trees: list[Tree], vocab: ActionVocab, words: dict[str, int],
            order: str = "top_down") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(words (B, N), actions (B, A) -1 padded, lengths (B,)) of ``trees``, the actions in
    ``order``."""
    actions = [vocab.encode(oracle(t, order)) for t in trees]
    leaves = [[words[w] for w in t.leaves()] for t in trees]
    A, N = max(map(len, actions)), max(map(len, leaves))
    a = torch.full((len(trees), A), -1)
    w = torch.zeros(len(trees), N, dtype=torch.long)
    for i, (acts, ids) in enumerate(zip(actions, leaves, strict=True)):
        a[i, :len(acts)] = torch.tensor(acts)
        w[i, :len(ids)] = torch.tensor(ids)
    return w, a, torch.tensor([len(ids) for ids in leaves])


def random_rnng(vocab_size: int, n_actions: int, seed: int = 0, model_class: type = RNNG,
                **kwargs) -> RNNG:
    """A float64 RNNG (``model_class``: one of its subclasses) in eval mode whose weights
    are far from uniform."""
    torch.manual_seed(seed)
    model = model_class(vocab_size, n_actions, input_size=6, hidden_size=5, num_layers=2,
                        dropout=0.0, **kwargs).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-1.0, 1.0)
    return model


@pytest.fixture
def grammar() -> tuple[list[Tree], ActionVocab, dict[str, int]]:
    trees = [Tree.fromstring(t) for t in TREES]
    words = sorted({w for t in trees for w in t.leaves()})
    return trees, ActionVocab.from_trees(trees), {w: i for i, w in enumerate(words)}


def test_transitions_by_hand(grammar):
    """(S (NP the dog) (VP barks)): the stack after each action, and the composed NP is
    ReLU(W [fwd(NP, the, dog); bwd(NP, dog, the)] + b) pushed over the S position."""
    trees, vocab, words = grammar
    model = random_rnng(len(words), len(vocab))
    w, a, _n = encoded(trees[:1], vocab, words)
    state = model.initial_state(1, stack_size=8)
    expected = [  # after each action: top, pointer, open, open positions
        ("NT(S)", 1, 0, 1, [1]), ("NT(NP)", 2, 0, 2, [1, 2]), ("SHIFT", 3, 1, 2, [1, 2]),
        ("SHIFT", 4, 2, 2, [1, 2]), ("REDUCE", 2, 2, 1, [1]), ("NT(VP)", 3, 2, 2, [1, 3]),
        ("SHIFT", 4, 3, 2, [1, 3]), ("REDUCE", 3, 3, 1, [1])]
    items = []
    for t, (action, top, pointer, n_open, opened) in enumerate(expected):
        assert vocab.itos[int(a[0, t])] == action
        before = state.hidden.clone(), state.cell.clone(), state.items.clone()
        top_before = int(state.parser.top)
        word = w[0, state.parser.pointer.clamp(max=2)]
        state = model.advance(state, a[0, t:t + 1], word)
        p = state.parser
        assert (int(p.top), int(p.pointer), int(p.n_open)) == (top, pointer, n_open)
        assert state.open_at[0, :n_open].tolist() == opened
        if action == "REDUCE":
            nt_item = before[2][0, top - 1]  # the reduced NT's item, at position top
            children = before[2][0, top:top_before]
            f = model.composition.forward_lstm(torch.stack([nt_item, *children])[None])[0][0, -1]
            b = model.composition.backward_lstm(
                torch.stack([nt_item, *children.flip(0)])[None])[0][0, -1]
            composed = torch.relu(model.composition.output(torch.cat([f, b])))
            torch.testing.assert_close(state.items[0, top - 1], composed, rtol=0, atol=1e-12)
        h, _c = model.stack_lstm(state.items[0, top - 1][None], before[0][0, top - 1][None],
                                before[1][0, top - 1][None])
        torch.testing.assert_close(state.hidden[0, top], h[0], rtol=0, atol=1e-12)
        items.append(state.items[0, top - 1])
    # an item below the reduced constituent is untouched: S's item stays NT(S)'s embedding
    torch.testing.assert_close(state.items[0, 0], model.nt_embedding.weight[vocab.stoi["NT(S)"]
                                                                            - FIRST_NT])


def test_batched_equals_one_sentence_at_a_time(grammar):
    trees, vocab, words = grammar
    model = random_rnng(len(words), len(vocab))
    w, a, n = encoded(trees, vocab, words)
    batched = model(w, a, n)
    for i, tree in enumerate(trees):
        wi, ai, ni = encoded([tree], vocab, words)
        alone = model(wi, ai, ni)
        A, N = ai.size(1), wi.size(1)
        torch.testing.assert_close(batched.action_log_probs[i, :A], alone.action_log_probs[0],
                                   rtol=0, atol=1e-12)
        torch.testing.assert_close(batched.word_log_probs[i, :N], alone.word_log_probs[0],
                                   rtol=0, atol=1e-12)
        assert (batched.action_log_probs[i, A:] == 0).all()
    # the joint is log p(x, y) of the stack fed one action at a time, every action legal
    state, stepped = model.initial_state(len(trees), stack_size=16), torch.zeros_like(batched.joint)
    for t in range(a.size(1)):
        word = w.gather(1, state.parser.pointer.clamp(max=w.size(1) - 1)[:, None])[:, 0]
        log_probs = model.next_log_probs(state, word, torch.ones(len(trees), len(vocab),
                                                                 dtype=torch.bool))
        stepped += log_probs.gather(1, a[:, t:t + 1].clamp(min=0))[:, 0].where(a[:, t] >= 0, 0.0)
        state = model.advance(state, a[:, t], word)
    torch.testing.assert_close(batched.joint, stepped, rtol=0, atol=1e-12)


def legal_of(history: list[int], n_words: int, limits: Limits | None = None) -> list[bool]:
    """The legal actions (SHIFT, REDUCE, one NT) after ``history`` (top-down)."""
    state = ParserState.initial(1)
    for action in history:
        a = torch.tensor([action])
        top = state.top + 1 if action != REDUCE else state.top - 1  # one child closed
        state = state.after(a, top)
    return state.legal_actions(torch.tensor([n_words]), 3, limits or Limits())[0].tolist()


@pytest.mark.parametrize(("history", "n_words", "legal"), [
    ([], 2, [False, False, True]),  # only NT opens a sentence
    ([2], 2, [True, False, True]),  # no REDUCE right after NT
    ([2, 0], 2, [True, False, True]),  # the root stays open while words remain
    ([2, 2, 0], 2, [True, True, True]),
    ([2, 0, 0], 2, [False, True, False]),  # after the last word only REDUCE
    ([2, 0, 0, 1], 2, [False, False, False]),  # finished
])
def test_legal_actions(history, n_words, legal):
    assert legal_of(history, n_words) == legal


def test_legal_action_bounds():
    assert legal_of([2, 2], 3, Limits(max_open=2)) == [True, False, False]
    assert legal_of([2, 2], 3, Limits(max_consecutive=2)) == [True, False, False]
    assert legal_of([2, 2], 3, Limits(stack_size=4)) == [True, False, False]  # 2 items + 2
    assert legal_of([2, 2, 2], 3, Limits(stack_size=4)) == [False, False, False]
    budget = torch.tensor([8])  # 3 taken, 3 words + 3 open + 3 > 8 - 3
    assert legal_of([2, 2, 2], 3, Limits(max_actions=budget)) == [True, False, False]


def all_parses(model: RNNG, n_words: int) -> list[list[int]]:
    """Every legal top-down action sequence over ``n_words`` words."""
    found = []

    def extend(history: list[int]) -> None:
        legal = legal_of(history, n_words, model.limits)
        if not any(legal):
            found.append(history)
        for action in range(3):
            if legal[action]:
                extend([*history, action])

    extend([])
    return found


def test_beam_equals_the_exact_marginal_and_smaller_beams_bound_it():
    """One nonterminal, three words, at most two NT in a row: 63 trees. The beam large enough
    to hold them all gives log p(x) = logsumexp over the trees, its word log-probs sum to it,
    its best parse is the best tree; smaller beams give less."""
    model = random_rnng(5, 3, max_consecutive=2, legal_softmax=True)
    words, n = torch.tensor([[1, 3, 2]]), 3
    parses = all_parses(model, n)
    assert len(parses) == 63
    A = max(map(len, parses))
    actions = torch.tensor([p + [-1] * (A - len(p)) for p in parses])
    joint = model(words.expand(len(parses), -1), actions, torch.full((len(parses),), n)).joint
    assert_beam_is_exact(model, words, parses, joint, 200)


def assert_beam_is_exact(model: torch.nn.Module, words: torch.Tensor, parses: list[list[int]],
                         joint: torch.Tensor, size: int) -> None:
    """Beam search over ``words`` (1, n) with beams of ``size``, which hold all the
    ``parses`` (every legal action sequence, each of log p(x, y) ``joint``), gives log p(x)
    = their logsumexp, summed over its word log-probs and end, and finds them all, the best
    first; beams of 20, 5 and 1 give less and less, and find no better parse."""
    n = torch.tensor([words.size(1)])
    exact = torch.logsumexp(joint, 0).item()
    full = search_batch(model, words, n, BeamSettings(size, size, 1))[0]
    assert sum(full.word_log_probs) + full.end_log_prob == pytest.approx(exact, abs=1e-10)
    assert len(full.parses) == len(parses)
    assert full.parses[0][1] == pytest.approx(joint.max().item(), abs=1e-10)
    assert list(full.parses[0][0]) == parses[int(joint.argmax())]
    last = exact
    for small_size in (20, 5, 1):
        small = search_batch(model, words, n, BeamSettings(small_size, small_size, 1))[0]
        total = sum(small.word_log_probs) + small.end_log_prob
        assert total < last + 1e-12
        assert all(score <= full.parses[0][1] + 1e-12 for _, score in small.parses)
        last = total
    assert last < exact - 0.1


def test_search_in_memory_bounded_batches_equals_one_batch(grammar):
    trees, vocab, words = grammar
    model = random_rnng(len(words), len(vocab))
    w, _, n = encoded(trees, vocab, words)
    settings = BeamSettings(10, 5, 1)
    together = search_batch(model, w, n, settings)
    tiny = BeamSettings(10, 5, 1, batch_size=1)  # one sentence a batch
    for one, other in zip(search_sentences(model, w, n, tiny), together, strict=True):
        assert one.parses[0][0] == other.parses[0][0]
        assert one.word_log_probs == pytest.approx(other.word_log_probs, abs=1e-12)


def assert_learns_ten_trees(build: Callable[[int, int], torch.nn.Module], lr: float,
                            order: str = "top_down") -> None:
    """Ten trees: a model ``build(vocab_size, n_actions)`` makes (seeded) raises their joint
    log-likelihood far in 150 Adam steps of rate ``lr`` on their actions in ``order``, and
    beam search then finds the gold tree of each sentence (a model's ``finish_action``, which
    closes its parses, left out)."""
    base = [Tree.fromstring(t) for t in TREES]
    trees = base + [Tree("S", [Tree("NP", [Tree("DT", ["the"]), Tree("NN", [noun])]),
                               Tree("VP", [Tree("VBZ", [verb])])])
                    for noun, verb in [("cat", "sleeps"), ("dog", "sleeps"), ("cat", "barks"),
                                       ("bird", "sings"), ("bird", "barks"), ("dog", "sings"),
                                       ("cat", "sings")]]
    words = {w: i for i, w in enumerate(sorted({w for t in trees for w in t.leaves()}))}
    vocab = ActionVocab.from_trees(trees)
    w, a, n = encoded(trees, vocab, words, order)
    torch.manual_seed(0)
    model = build(len(words), len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    first = None
    for _ in range(150):
        loss = -model(w, a, n).joint.mean()
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.25 * first
    model.eval()
    for tree, result in zip(trees, search_batch(model, w, n, BeamSettings(20, 5, 1)),
                            strict=True):
        ids = [i for i in result.parses[0][0] if i != model.finish_action]
        best = tree_of(vocab.decode(ids), tree.leaves(), order)
        assert best == without_preterminals(tree)
        assert math.isfinite(sum(result.word_log_probs))


def test_a_tiny_rnng_learns_ten_trees():
    assert_learns_ten_trees(lambda v, a: RNNG(v, a, input_size=24, hidden_size=24,
                                               num_layers=1, dropout=0.0), lr=0.01)


def test_traced_stack_backward_equals_autograds_own_indexing(grammar, monkeypatch):
    """Teacher forcing reads and writes the stack through a ``Trace`` (a backward that touches
    only the rows read and written): the gradients equal those of autograd's own indexing
    of the same in-place stack, on a batch whose rows reduce at different steps."""
    trees, vocab, words = grammar
    model = random_rnng(len(words), len(vocab))
    w, a, n = encoded(trees, vocab, words)
    params = [p for p in model.parameters() if p.requires_grad]
    traced = torch.autograd.grad(model(w, a, n).joint.sum(), params)
    plain = RNNG.initial_state
    monkeypatch.setattr(RNNG, "initial_state",
                        lambda self, rows, size, traced=False: plain(self, rows, size, False))
    indexed = torch.autograd.grad(model(w, a, n).joint.sum(), params)
    for ours, theirs in zip(traced, indexed, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    assert any(g.abs().sum() > 0 for g in traced)


def test_actions_that_close_nothing_are_a_one_line_error():
    model = random_rnng(5, 3)
    with pytest.raises(ActionError, match=r"row 0, action 2 \(REDUCE\): no open constituent"):
        model(torch.tensor([[1]]), torch.tensor([[2, 1, 1]]), torch.tensor([1]))
