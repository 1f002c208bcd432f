"""GPST's word-synchronous beam search and its surprisals (the released
``R2D2GenFastBeamSearcher.beam_search`` given target ids; Hu et al. 2024 §4.4).

One beam of K hypotheses per sentence. At word i, each hypothesis that has shifted i words
and is not finished extends by SHIFT of x_i (log p(SHIFT) + log p(x_i | ...)) or REDUCE
(legal with two or more stack elements), its score the sum of its steps; those that
already shifted x_i (or finished) wait. The extensions and the waiting hypotheses compete
for the K places (ties keep the extensions first, in beam order, SHIFT before REDUCE); once
all K have shifted x_i the beam's log-sum is the prefix log-probability::

    log p̂(x_≤i) = logsumexp_{y ∈ beam after x_i} score(y),
    log p(x_i | x_<i) ≈ log p̂(x_≤i) − log p̂(x_<i)    (surprisal: its negation)

After the last word the hypotheses REDUCE until one constituent spans the sentence.
Actions are normalised over both, illegal ones included
(``synlm.transition.types.ALL_ACTIONS``); the first word's term is log p̂(x_1). The released
syntactic-generalisation evaluator sums the surprisals of words 2..n (``tag[:, 1:]``), the
first word's left out. Each step runs the model over every active hypothesis's whole
action prefix (``GPST.step_log_probs``; the released searcher carries key/value caches
instead: the same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from synlm.transition.gpst import GPST, REDUCE, SHIFT, plan_steps
from synlm.transition.types import SearchResult


@dataclass(frozen=True)
class Hypothesis:
    """A partial parse: its actions, their summed log-probability, words shifted, stack
    depth."""

    actions: tuple[int, ...]
    score: float
    shifted: int
    depth: int

    def finished(self, length: int) -> bool:
        return self.shifted == length and self.depth == 1

    def act(self, action: int, log_prob: float) -> Hypothesis:
        shift = action == SHIFT
        return Hypothesis((*self.actions, action), self.score + log_prob,
                          self.shifted + shift, self.depth + (1 if shift else -1))


def _next_log_probs(model: GPST, words: Tensor, active: list[Hypothesis],
                    cap_reduce_positions: bool = False) -> tuple[list[list[float]], list[float]]:
    """Each active hypothesis's log p(SHIFT), log p(REDUCE) and log p(its next word)
    (a word past the sentence's end: the last, unused). ``cap_reduce_positions``: a
    constituent's input takes position min(words shifted, n − 1) (the perplexity
    evaluator's)."""
    n = words.numel()
    steps = plan_steps([list(h.actions) for h in active], [n] * len(active), n)
    if cap_reduce_positions:
        steps.positions = torch.where(steps.kinds == 2, steps.positions.clamp(max=n - 1),
                                      steps.positions)
    at = torch.tensor([len(h.actions) for h in active], device=words.device)
    action_lp, word_lp = model.step_log_probs(words.expand(len(active), n), steps, at)
    next_words = words[torch.tensor([min(h.shifted, n - 1) for h in active])]
    return action_lp.tolist(), word_lp.gather(1, next_words[:, None])[:, 0].tolist()


@torch.no_grad()
def beam_search(model: GPST, words: Tensor, beam_size: int) -> SearchResult:
    """The released search over one sentence ``words`` (n,) (module docstring): the
    per-word log-probabilities, the end term log p̂(x, finished) − log p̂(x) and the final
    beam, best first."""
    n = words.numel()
    if n == 0 or beam_size < 1:
        raise ValueError(f"beam_search: expected a non-empty sentence and beam_size >= 1, "
                         f"got {n} words and beam_size {beam_size}")
    beam = [Hypothesis((), 0.0, 0, 0)]
    prefix: list[float] = []
    word = 0
    while True:
        active = [h for h in beam if h.shifted == word and not h.finished(n)]
        if not active:
            break
        action_lp, word_lp = _next_log_probs(model, words, active)
        extended = []
        for h, (shift_lp, reduce_lp), next_lp in zip(active, action_lp, word_lp):
            if h.shifted < n:
                extended.append(h.act(SHIFT, shift_lp + next_lp))
            if h.depth >= 2:
                extended.append(h.act(REDUCE, reduce_lp))
        waiting = [h for h in beam if h.shifted != word or h.finished(n)]
        beam = sorted(extended, key=lambda h: -h.score) + waiting
        beam = sorted(beam, key=lambda h: -h.score)[:beam_size]
        if word < n and all(h.shifted != word for h in beam):
            prefix.append(torch.tensor([h.score for h in beam], dtype=torch.float64)
                          .logsumexp(0).item())
            word += 1
    prefix_t = torch.tensor(prefix, dtype=torch.float64)
    word_log_probs = torch.cat([prefix_t[:1], prefix_t.diff()])
    final = torch.tensor([h.score for h in beam], dtype=torch.float64).logsumexp(0).item()
    return SearchResult(tuple(word_log_probs.tolist()), final - prefix[-1],
                        tuple((h.actions, h.score) for h in beam))


@dataclass(frozen=True)
class SentenceScore:
    """The perplexity evaluator's result for one sentence (natural logs).

    Attributes:
        log_prob: log p̂(x), the final beam's log-sum.
        parses: the final beam, best first: (actions, log p(x, y)).
    """

    log_prob: float
    parses: tuple[tuple[tuple[int, ...], float], ...]

    @property
    def nll_per_word(self) -> float:
        """−log p̂(x) / n, what the released evaluator returns (its perplexity's exponent)."""
        return -self.log_prob / sum(a == SHIFT for a in self.parses[0][0])


@torch.no_grad()
def action_synchronous_search(model: GPST, words: Tensor, beam_size: int) -> SentenceScore:
    """The released perplexity evaluator's search (``R2D2GenFastEvaluator.beam_search`` of
    ``eval/evaluate_lm.py``) over one sentence of n ≥ 2 words: every hypothesis takes one
    action per step, 2n − 1 steps, the K best legal extensions kept at each. It normalises
    otherwise than ``beam_search``: where REDUCE is illegal (fewer than two stack elements)
    its logit is masked before the softmax, so SHIFT has probability 1 and only the word is
    scored; an illegal SHIFT (after the last word) is dropped after it, REDUCE's probability
    not renormalised. A constituent built after the last word takes position n − 1 in the
    action layers, not n."""
    n = words.numel()
    if n < 2 or beam_size < 1:
        raise ValueError(f"action_synchronous_search: expected a sentence of 2 or more words "
                         f"and beam_size >= 1, got {n} words and beam_size {beam_size}")
    beam = [Hypothesis((), 0.0, 0, 0)]
    for _ in range(2 * n - 1):
        action_lp, word_lp = _next_log_probs(model, words, beam, cap_reduce_positions=True)
        extended = []
        for h, (shift_lp, reduce_lp), next_lp in zip(beam, action_lp, word_lp):
            if h.shifted < n:
                extended.append(h.act(SHIFT, (shift_lp if h.depth >= 2 else 0.0) + next_lp))
            if h.depth >= 2:
                extended.append(h.act(REDUCE, reduce_lp))
        beam = sorted(extended, key=lambda h: -h.score)[:beam_size]
    scores = torch.tensor([h.score for h in beam], dtype=torch.float64)
    return SentenceScore(scores.logsumexp(0).item(), tuple((h.actions, h.score) for h in beam))
