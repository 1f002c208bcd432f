"""The action Transformer (synlm.transition.action_transformer) under its three attention
policies: the output equation on hand-set weights, teacher forcing equal to feeding one
action at a time through the key/value cache, causality, row independence, the exact
marginal by beam search, a tiny model that learns ten trees, golden values, one-line errors,
and the layers and vocabulary run on the real tokens and rows alone."""

from __future__ import annotations

import pytest
import torch
from nltk import Tree
from test_rnng import TREES, all_parses, assert_learns_ten_trees, encoded

from synlm.errors import InputError, SettingError
from synlm.syntax.actions import ActionError, ActionVocab
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention import named_policies
from synlm.transition.beam import BeamSettings, search_batch, search_sentences
from synlm.transition.parser_state import NO_ACTION

POLICIES = sorted(named_policies())  # causal, plm_mask, tg


def random_model(vocab_size: int, n_actions: int, attention: object, seed: int = 0,
                 **kwargs) -> ActionTransformer:
    """A float64 action Transformer in eval mode whose weights are far from uniform."""
    torch.manual_seed(seed)
    model = ActionTransformer(vocab_size, n_actions, attention, size=8, num_layers=2,
                              num_heads=4, dropout=0.0, **kwargs).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.7, 0.7)
    return model


@pytest.fixture
def grammar() -> tuple[list[Tree], ActionVocab, dict[str, int]]:
    trees = [Tree.fromstring(t) for t in TREES]
    words = sorted({w for t in trees for w in t.leaves()})
    return trees, ActionVocab.from_trees(trees), {w: i for i, w in enumerate(words)}


def one_at_a_time(model: ActionTransformer, words: torch.Tensor, actions: torch.Tensor
                  ) -> torch.Tensor:
    """(B, A) log p(a_t, word | a_<t) from ``next_log_probs`` after feeding a_<t through
    ``advance`` (the cache), every action legal."""
    B, A = actions.shape
    state = model.initial_state(B, 32, max_actions=A)
    pointer = torch.zeros(B, dtype=torch.long)
    out = []
    for t in range(A):
        action = actions[:, t]
        word = words.gather(1, pointer.clamp(max=words.size(1) - 1)[:, None])[:, 0]
        log_probs = model.next_log_probs(state, word,
                                         torch.ones(B, model.n_actions, dtype=torch.bool))
        out.append(torch.where(action != NO_ACTION,
                               log_probs.gather(1, action.clamp(min=0)[:, None])[:, 0], 0.0))
        state = model.advance(state, action, word)
        pointer += (action == 0).long()
    return torch.stack(out, 1)


def test_output_is_one_softmax_over_words_and_actions_on_hand_set_weights():
    """With every layer's output projections zero, h_t = LN(x_t) and
    log p(a_t) = z[a_t] − logsumexp(z), z = [E_words h; E_actions[1:] h] (module docstring):
    the first action is predicted from the start token alone."""
    model = random_model(5, 4, "causal")
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.proj.weight.zero_()
            layer.attn.proj.bias.zero_()
            layer.ffn[2].weight.zero_()
            layer.ffn[2].bias.zero_()
    words, actions = torch.tensor([[3]]), torch.tensor([[2, 0, 1]])  # (X w3)
    out = model(words, actions, torch.tensor([1]))
    x = torch.stack([model.start + model.position_embedding.weight[0],
                     model.action_embedding.weight[2] + model.position_embedding.weight[1],
                     model.embedding.weight[3] + model.position_embedding.weight[2]])
    h = model.final_norm(x)  # (3, C): the inputs normed
    z = torch.cat([h @ model.embedding.weight.T, h @ model.action_embedding.weight[1:].T], 1)
    log_p = z.log_softmax(1)  # columns: words 0..4, REDUCE, NT 2, NT 3
    expected_nt, expected_shift_w3, expected_reduce = log_p[0, 5 + 1], log_p[1, 3], log_p[2, 5]
    torch.testing.assert_close(out.joint[0], expected_nt + expected_shift_w3 + expected_reduce)
    # the SHIFT splits into p(SHIFT) and p(word | SHIFT)
    torch.testing.assert_close(out.action_log_probs[0, 1], log_p[1, :5].logsumexp(0))
    torch.testing.assert_close(out.word_log_probs[0, 0],
                               log_p[1, 3] - log_p[1, :5].logsumexp(0))


@pytest.mark.parametrize("attention", POLICIES)
def test_teacher_forcing_equals_one_action_at_a_time(grammar, attention):
    """The whole-sequence masks and the cache's incremental masks give the same model."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    w, a, n = encoded(trees, vocab, words)
    forced = model(w, a, n)
    stepped = one_at_a_time(model, w, a)
    torch.testing.assert_close(stepped.sum(1), forced.joint, rtol=0, atol=1e-10)
    # action by action: a SHIFT's p(SHIFT) times p(word | SHIFT), its word's entry, is the
    # cache's joint SHIFT column
    shifts = a == 0
    word_of_shift = forced.word_log_probs.gather(1, (shifts.cumsum(1) - 1).clamp(min=0))
    torch.testing.assert_close(forced.action_log_probs + torch.where(shifts, word_of_shift, 0.0),
                               stepped, rtol=0, atol=1e-10)


@pytest.mark.parametrize("attention", POLICIES)
def test_no_action_sees_a_later_one(grammar, attention):
    """Changing the actions after t (a different subtree after the first word) leaves the
    log-probabilities up to t unchanged."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    w, a, n = encoded(trees[:1], vocab, words)  # (S (NP the dog) (VP barks))
    other = Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VBZ barks) (NP (DT the))))")
    w2, a2, n2 = encoded([other], vocab, words)
    first, second = model(w, a, n), model(w2, a2, n2)
    same = int((a[0] != a2[0, :a.size(1)]).nonzero()[0])  # the first action that differs
    assert same > 4
    torch.testing.assert_close(first.action_log_probs[0, :same],
                               second.action_log_probs[0, :same], rtol=0, atol=1e-12)


@pytest.mark.parametrize("attention", POLICIES)
def test_batched_equals_one_sentence_at_a_time(grammar, attention):
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    w, a, n = encoded(trees, vocab, words)
    batched = model(w, a, n)
    for i, tree in enumerate(trees):
        alone = model(*encoded([tree], vocab, words))
        A = alone.action_log_probs.size(1)
        torch.testing.assert_close(batched.action_log_probs[i, :A], alone.action_log_probs[0],
                                   rtol=0, atol=1e-12)
        assert (batched.action_log_probs[i, A:] == 0).all()
        torch.testing.assert_close(batched.joint[i], alone.joint[0], rtol=0, atol=1e-12)


def assert_beam_equals_the_exact_marginal(attention: object) -> None:
    """One nonterminal, three words, at most two NT in a row: 63 trees. The beam that holds
    them all sums their joint probabilities; its best parse is the best tree; a smaller
    beam gives less."""
    model = random_model(5, 3, attention, max_consecutive=2)
    words, n = torch.tensor([[1, 3, 2]]), 3
    parses = all_parses(model, n)
    assert len(parses) == 63
    A = max(map(len, parses))
    actions = torch.tensor([p + [-1] * (A - len(p)) for p in parses])
    joint = model(words.expand(len(parses), -1), actions, torch.full((len(parses),), n)).joint
    full = search_batch(model, words, torch.tensor([n]), BeamSettings(200, 200, 1))[0]
    exact = torch.logsumexp(joint, 0).item()
    assert sum(full.word_log_probs) + full.end_log_prob == pytest.approx(exact, abs=1e-9)
    assert list(full.parses[0][0]) == parses[int(joint.argmax())]
    small = search_batch(model, words, torch.tensor([n]), BeamSettings(5, 5, 1))[0]
    assert sum(small.word_log_probs) + small.end_log_prob < exact - 0.01


@pytest.mark.parametrize("attention", POLICIES)
def test_beam_equals_the_exact_marginal(attention):
    assert_beam_equals_the_exact_marginal(attention)


@pytest.mark.parametrize("attention", POLICIES)
def test_search_in_memory_bounded_batches_equals_one_batch(grammar, attention):
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    w, _, n = encoded(trees, vocab, words)
    together = search_batch(model, w, n, BeamSettings(10, 5, 1))
    alone = search_sentences(model, w, n, BeamSettings(10, 5, 1, batch_size=1))
    for one, other in zip(alone, together, strict=True):
        assert one.parses[0][0] == other.parses[0][0]
        assert one.word_log_probs == pytest.approx(other.word_log_probs, abs=1e-10)


@pytest.mark.parametrize("attention", POLICIES)
def test_a_tiny_model_learns_ten_trees(attention):
    """As the RNNG: the joint log-likelihood falls far and beam search then finds the gold
    tree of each sentence."""
    assert_learns_ten_trees(lambda v, a: ActionTransformer(v, a, attention, size=32,
                                                           num_layers=2, num_heads=4,
                                                           dropout=0.0), lr=0.003)


#: log p(x, y) of the three trees under ``random_model(…, seed=0)``, recorded once.
GOLDEN = {
    "causal": [-26.172339595, -35.643837475, -42.2933478798],
    "plm_mask": [-26.1849344891, -35.7093590157, -41.970091089],
    "tg": [-29.9090113188, -38.4784984482, -47.3060569467],
}


@pytest.mark.parametrize("attention", POLICIES)
def test_golden_values(grammar, attention):
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    joint = model(*encoded(trees, vocab, words)).joint
    assert joint.tolist() == pytest.approx(GOLDEN[attention], abs=1e-9)


@pytest.mark.parametrize("attention", ["plm_mask", "tg"])
def test_actions_that_close_nothing_are_a_one_line_error(attention):
    model = random_model(5, 3, attention)
    with pytest.raises(ActionError, match=r"row 0, action 3"):
        model(torch.tensor([[1]]), torch.tensor([[2, 0, 1, 1]]), torch.tensor([1]))


def test_bad_settings_are_one_line_errors():
    with pytest.raises(SettingError, match="attention=stack: expected causal | plm_mask | tg"):
        ActionTransformer(5, 3, "stack")
    with pytest.raises(SettingError, match="size=10: expected a multiple of num_heads=4"):
        ActionTransformer(5, 3, size=10, num_heads=4)
    model = ActionTransformer(5, 3, size=8, num_heads=2, num_layers=1, max_positions=4)
    with pytest.raises(InputError, match="longer than max_positions=4 allows; raise "
                                         "max_positions"):
        model(torch.tensor([[1, 2]]), torch.tensor([[2, 0, 0, 1]]), torch.tensor([2]))


@pytest.mark.parametrize("attention", POLICIES)
def test_layers_run_on_the_real_tokens_alone(grammar, attention):
    """Teacher forcing feeds the layers the real tokens packed, N = the start tokens plus
    one per action (TG: one more per REDUCE), no padding; a search step the present tokens
    alone (a row without an action, TG's COMPOSE slot of a non-REDUCE, none), and the
    vocabulary runs only at rows with a legal action, the others -inf, the rest equal."""
    trees, vocab, words = grammar
    model = random_model(len(words), len(vocab), attention)
    w, a, n = encoded(trees, vocab, words)
    rows: list[int] = []
    model.layers[0].register_forward_hook(lambda module, args, out: rows.append(out.size(0)))
    model(w, a, n)
    real = a != NO_ACTION
    extra = int((a == 1).sum()) if attention == "tg" else 0  # REDUCE: 1
    assert rows == [a.size(0) + int(real.sum()) + extra]
    state = model.initial_state(a.size(0), 32, max_actions=a.size(1))
    rows.clear()
    first = a[:, 0].clone()
    first[1:] = NO_ACTION  # one row acts: one token, an NT (no COMPOSE copy)
    model.advance(state, first, torch.zeros_like(first))
    assert rows == [1]
    legal = torch.ones(a.size(0), model.n_actions, dtype=torch.bool)
    everything = model.next_log_probs(state, torch.zeros_like(first), legal)
    legal[1:] = False
    found = model.next_log_probs(state, torch.zeros_like(first), legal)
    # to float rounding: the vocabulary's matrix product of one row, not of all
    torch.testing.assert_close(found[0], everything[0], rtol=0, atol=1e-12)
    assert bool((found[1:] == float("-inf")).all())
