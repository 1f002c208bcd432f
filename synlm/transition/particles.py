"""Particle filtering (Crabbé et al. 2019, as rnng-pytorch's ``--particle_filter`` computes
it): a search of a transition LM whose beam varies in size, for each word's surprisal and
the sentence's trees, the same inputs and ``SearchResult`` as beam search
(``synlm.transition.beam``), and its settings (``ParticleSettings``) taken where beam
search's are (``beam.search_sentences``).

A sentence starts with one item (the empty stack) holding K particles. Between two words,
every item is expanded by every legal action a, and its K_i particles are shared among its
successors by the proposal q(a), the model's action distribution renormalised over the legal
actions, ``SHIFT`` without its word::

    K_ia = round(K_i · q(a))          (``sampling="rounded"``, the released code's)
    (K_ia)_a ~ Multinomial(K_i, q)    (``sampling="multinomial"``, seeded)

A successor is kept only with K_ia ≥ 1: one that generates the next word (or,
after the last word, closes the root or takes the model's ``finish_action``) waits for the
word, the others are expanded again, until none is left. The waiting items are then
reweighted and resampled: with w_i = p(x_≤i, y_i), the joint log-probability of the item's
actions and words (``reweight="joint"``, the released default), or
w_i = K_i · p(x_≤i, y_i) / q(y_i) (``reweight="importance"``: the paper's Eq. 4, the released
``--original_reweight``; q(y_i) the product of the proposal over all of the item's actions),
each item gets ``round(K · w_i / Σ_j w_j)`` particles (or a multinomial draw of K), those
with none are dropped, and the rest generate the word (or close the root). As the released
code, the prefix probability after word i is the sum over the items left::

    log p(x_1..x_i) ≈ logsumexp_{items y} log p(x_1..x_i, y)
    surprisal(x_i) = -(log p(x_1..x_i) - log p(x_1..x_{i-1}))

a sum over distinct partial trees (not a particle average), so it never exceeds the exact
prefix probability and reaches it once K is large enough that every tree keeps a particle.
Each action's probability in p(x, y) is normalised as beam search's convention says
(``CONVENTIONS``); the proposal q is renormalised over the legal actions either way (under
``all_actions`` the step is normalised twice, once for each).

Where the released code differs from the paper, its default is followed: it reweights by
p(x, y) alone, the paper's Eq. 4 by K_i · p(x, y) / q(y) (``reweight="importance"``). Where
this differs from the released code: the multinomial sampling is an option of this module
only (the released code rounds); a sentence's expansion of a word runs until no item is left
(the released one also stops, for every sentence of the batch at once, when a word's items
number exactly one less than their storage's size); the weights are normalised in float64
(the released code casts them to float32, which can move a rounding by one particle); and a
sentence whose particles all die is marked (the released search reports surprisals of 0 and
parses of score -inf). As the released storage, a sentence keeps at most ``max_items`` items
expanding and at most as many waiting for the word, the first ones in the order of the
items (each word's survivors best first) and their actions. The stack bound, the action budget
and the re-search of a sentence with no tree left (``SearchResult.parsed`` False: every
particle died, even with no stack bound; never NaN) are beam search's, as in the released
code.

Cost: a step expands every item of every sentence, and the items number up to
``min(max_items, 2 K)`` a sentence (K_ia ≥ 1 needs K_i · q(a) ≥ ½), where beam search
expands ``beam_size``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor

from synlm import errors
from synlm.transition.beam import (
    SearchSettings,
    action_budget,
    advance,
    search_result,
    stack_slots,
)
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import NO_ACTION, REDUCE, SHIFT
from synlm.transition.types import RENORMALISED, SearchResult

ROUNDED, MULTINOMIAL = "rounded", "multinomial"
JOINT, IMPORTANCE = "joint", "importance"


@dataclass(frozen=True)
class ParticleSettings(SearchSettings):
    """Particle filtering's settings (module docstring; the released defaults), and
    ``SearchSettings``'s by name.

    Attributes:
        particles: K, the particles of a sentence (the released ``--particle_size``).
        reweight: ``joint`` (the released default) or ``importance`` (the paper's Eq. 4).
        sampling: ``rounded`` (the released code's: deterministic) or ``multinomial``
            (seeded by ``seed``).
        seed: the multinomial draws' seed (a search with the same seed draws the same).
        max_items: most items a sentence keeps expanding, and waiting for a word (the
            released storage's 3,000), the first ones kept.
    """

    size: ClassVar[str] = "particles"

    particles: int = 10000
    reweight: str = JOINT
    sampling: str = ROUNDED
    seed: int = 0
    max_items: int = 3000

    def __post_init__(self) -> None:
        errors.at_least("particles", self.particles)
        errors.at_least("max_items", self.max_items)
        if self.reweight not in (JOINT, IMPORTANCE):
            raise errors.SettingError("reweight", self.reweight, f"{JOINT} | {IMPORTANCE}")
        if self.sampling not in (ROUNDED, MULTINOMIAL):
            raise errors.SettingError("sampling", self.sampling, f"{ROUNDED} | {MULTINOMIAL}")
        super().__post_init__()

    @property
    def rows_per_sentence(self) -> int:
        return 2 * min(self.max_items, 2 * self.particles)

    def end_is_certain(self, model: TransitionModel) -> bool:
        """``SearchSettings.end_is_certain``, and the resampling after the closing actions
        keeps every item: rounded, by the joint probability (each item's weight is as it
        was at the last word, among no more items, so its share only grows); a multinomial
        draw or importance weights (which count the particles the last resampling gave)
        can drop an item, and the end term with it."""
        return super().end_is_certain(model) and self.sampling == ROUNDED and \
            self.reweight == JOINT

    def describe(self) -> str:
        seed = f" (seed {self.seed})" if self.sampling == MULTINOMIAL else ""
        return f"particle filtering, {self.particles} particles, {self.sampling}{seed}, " \
               f"{self.reweight} reweighting"

    def search_batch(self, model: TransitionModel, words: Tensor, lengths: Tensor,
                     word_ends: Tensor | None = None) -> list[SearchResult]:
        if word_ends is not None:
            raise errors.SettingError("search", "particles", "beam: particle filtering "
                                      "reads whole words, and this model reads subword pieces")
        return filter_batch(model, words, lengths, self)


def use_particles(model: Any, particles: int | None = None, convention: str | None = None,
                  max_memory_mb: float | None = None) -> None:
    """A transition LM's recipe (``synlm.transition.lm``, its search settings ``beam``)
    searching by particle filtering from now on: ``particles`` (None: the released 10,000),
    ``convention`` and ``max_memory_mb`` (None: the ones it searched with)."""
    model.beam = ParticleSettings(particles=particles or ParticleSettings.particles,
                                  convention=convention or model.beam.convention,
                                  max_memory_mb=max_memory_mb or model.beam.max_memory_mb)


@dataclass
class _Items:
    """R items of B sentences, one a row: stacks (``state``), joint log-probabilities
    (``scores`` (R,)), action ``paths`` (R, P), ``sentence`` (R,), particles ``count``
    (R,) and log q of their actions (``proposal`` (R,))."""

    state: Any
    scores: Tensor
    paths: Tensor
    sentence: Tensor
    count: Tensor
    proposal: Tensor

    def __len__(self) -> int:
        return self.scores.size(0)

    def take(self, index: Tensor) -> _Items:
        return self.successors(index, self.scores[index], self.count[index],
                               self.proposal[index])

    def successors(self, rows: Tensor, scores: Tensor, count: Tensor,
                   proposal: Tensor) -> _Items:
        """Items whose stacks and paths are the ``rows`` (R',) of these (before their next
        action), with these ``scores``, ``count`` and ``proposal`` (R',)."""
        return _Items(self.state.select(rows), scores, self.paths[rows], self.sentence[rows],
                      count, proposal)


def _concat(model: TransitionModel, parts: list[_Items], slots: int, P: int) -> _Items:
    """The items of ``parts`` in one set, in order (stacks of ``slots``, paths of P)."""
    if len(parts) == 1:
        return parts[0]
    state = model.initial_state(sum(map(len, parts)), slots, max_actions=P)
    start = 0
    for part in parts:
        rows = torch.arange(len(part), device=part.scores.device)
        state.assign(rows + start, part.state, rows)
        start += len(part)
    return _Items(state, *(torch.cat([getattr(p, name) for p in parts]) for name in
                           ("scores", "paths", "sentence", "count", "proposal")))


def _group_logsumexp(values: Tensor, groups: Tensor, n_groups: int) -> Tensor:
    """(n_groups,): logsumexp of ``values`` (R,) within each group (-inf: none)."""
    top = torch.full((n_groups,), float("-inf"), dtype=values.dtype, device=values.device)
    top = top.scatter_reduce(0, groups, values, "amax")
    shift = torch.where(top.isfinite(), top, 0.0)
    total = torch.zeros_like(top).index_add_(0, groups, (values - shift[groups]).exp())
    return total.log() + shift


def _first(groups: Tensor, room: Tensor) -> Tensor:
    """(R,) bool: the first ``room[g]`` items of each group g (``groups`` (R,)), in their
    order."""
    order = groups.sort(stable=True).indices
    position = torch.arange(len(groups), device=groups.device)
    first = torch.full_like(room, len(groups)).scatter_reduce(0, groups[order], position,
                                                              "amin")
    rank = torch.empty_like(groups)
    rank[order] = position - first[groups[order]]
    return rank < room[groups]


def _proposal(log_probs: Tensor) -> Tensor:
    """(R, A): q(a), the action distribution without the word, from ``log_probs`` (R, A)
    renormalised over the legal actions (``SHIFT``'s column joint with its word): ``SHIFT``
    takes what the other legal actions leave."""
    q = log_probs.exp()
    others = torch.cat([q[:, :SHIFT], q[:, SHIFT + 1:]], 1).sum(1)
    q[:, SHIFT] = torch.where(log_probs[:, SHIFT] > float("-inf"), (1 - others).clamp(min=0),
                              0.0)
    return q / q.sum(1, keepdim=True).clamp(min=torch.finfo(q.dtype).tiny)


def _share(count: Tensor, q: Tensor, settings: ParticleSettings,
           generator: torch.Generator | None) -> Tensor:
    """(R, A): each row's ``count`` (R,) particles shared among its actions by ``q``
    (R, A): rounded, or one multinomial draw a row (binomials, action by action)."""
    if settings.sampling == ROUNDED:
        return (count[:, None] * q).round()
    left = q.flip(1).cumsum(1).flip(1)  # the mass of this action and those after it
    share = (q / left).nan_to_num(0.0).clamp(0.0, 1.0)
    counts, remaining = torch.zeros_like(q), count.clone()
    for a in range(q.size(1)):
        counts[:, a] = torch.binomial(remaining, share[:, a], generator=generator)
        remaining -= counts[:, a]
    return counts


def _resampled(items: _Items, K: int, n_sentences: int, settings: ParticleSettings,
               generator: torch.Generator | None) -> Tensor:
    """(R,): each waiting item's particles after reweighting (module docstring)."""
    log_w = items.scores if settings.reweight == JOINT else \
        items.count.log() + items.scores - items.proposal
    log_w = log_w - _group_logsumexp(log_w, items.sentence, n_sentences)[items.sentence]
    if settings.sampling == ROUNDED:
        return (log_w.exp() * K).round()
    count = torch.zeros_like(log_w)
    for b in items.sentence.unique().tolist():
        rows = (items.sentence == b).nonzero()[:, 0]
        drawn = torch.multinomial(log_w[rows].exp(), K, replacement=True, generator=generator)
        count[rows] = torch.bincount(drawn, minlength=len(rows)).to(count.dtype)
    return count


@torch.no_grad()
def filter_batch(model: TransitionModel, words: Tensor, lengths: Tensor,
                 settings: ParticleSettings) -> list[SearchResult]:
    """Particle filtering (module docstring) over ``words`` (B, N), padded past ``lengths``
    (B,), all at once; the model in eval mode."""
    B, N = words.shape
    nA, device, K = model.n_actions, words.device, settings.particles
    renormalised = settings.convention_of(model) == RENORMALISED
    slots = torch.tensor([stack_slots(int(n), settings.max_stack, model.limits.max_open)
                          for n in lengths], device=device)
    budget = action_budget(lengths)
    P = int(budget.max()) + 1
    finish = model.finish_action  # what ends a parse, if not the root's REDUCE
    generator = None
    if settings.sampling == MULTINOMIAL:
        generator = torch.Generator(device=device).manual_seed(settings.seed)
    sentences = torch.arange(B, device=device)
    live = _Items(model.initial_state(B, int(slots.max()), max_actions=P),
                  torch.zeros(B, dtype=torch.float64, device=device),
                  torch.full((B, P), NO_ACTION, dtype=torch.long, device=device), sentences,
                  torch.full((B,), float(K), dtype=torch.float64, device=device),
                  torch.zeros(B, dtype=torch.float64, device=device))
    prefix: list[Tensor] = []  # log-sum of the items after each word, (B,)
    parses: list[tuple[tuple[tuple[int, ...], float], ...]] = [()] * B
    for pointer in range(N + 1):
        waiting: list[_Items] = []
        held = torch.zeros(B, dtype=torch.long, device=device)  # waiting items a sentence
        while len(live) > 0:
            n = lengths[live.sentence]
            word = words[live.sentence, min(pointer, N - 1)]
            limits = replace(model.limits, stack_size=slots[live.sentence],
                             max_actions=budget[live.sentence])
            legal = live.state.parser.legal_actions(n, nA, limits)
            log_probs = model.next_log_probs(live.state, word, legal, renormalise=True).double()
            q = _proposal(log_probs)
            if not renormalised:
                log_probs = model.next_log_probs(live.state, word, legal,
                                                 renormalise=False).double()
            counts = _share(live.count, q, settings, generator)
            row, action = (counts * (log_probs > float("-inf"))).nonzero(as_tuple=True)
            opened = live.state.parser.n_open[row]
            closes = (action == REDUCE) & (opened == 1) if finish is None else action == finish
            is_end = torch.where(n[row] == pointer, closes, action == SHIFT)
            scores = live.scores[row] + log_probs[row, action]
            count = counts[row, action]
            proposal = live.proposal[row] + q[row, action].log()
            # at most max_items a sentence expanding and waiting, the first ones kept
            room = torch.cat([torch.full_like(held, settings.max_items),
                              settings.max_items - held])
            kept = _first(live.sentence[row] + B * is_end.long(), room)
            ends, others = (kept & is_end).nonzero()[:, 0], (kept & ~is_end).nonzero()[:, 0]
            if len(ends) > 0:
                waiting.append(live.successors(row[ends], scores[ends], count[ends],
                                               proposal[ends]))
                held += torch.bincount(waiting[-1].sentence, minlength=B)
            live = live.successors(row[others], scores[others], count[others],
                                   proposal[others])
            if len(live) > 0:
                advance(model, live, action[others], word[row[others]])
        prefix.append(torch.full((B,), float("-inf"), dtype=torch.float64, device=device))
        if waiting:
            items = _concat(model, waiting, int(slots.max()), P)
            items.count = _resampled(items, K, B, settings, generator)
            # the survivors, each sentence's best first (the order the next word expands)
            alive = (items.count > 0).nonzero()[:, 0]
            alive = alive[items.scores[alive].sort(descending=True, stable=True).indices]
            live = items.take(alive[items.sentence[alive].sort(stable=True).indices])
            if len(live) == 0:
                continue
            at_end = lengths[live.sentence] == pointer
            end = REDUCE if finish is None else finish
            advance(model, live, torch.where(at_end, end, SHIFT),
                    words[live.sentence, min(pointer, N - 1)])
            prefix[-1] = _group_logsumexp(live.scores, live.sentence, B)
            for b in live.sentence[at_end].unique().tolist():
                parses[b] = _parses(live, b)
            live = live.take((~at_end).nonzero()[:, 0])
    return [search_result(prefix, b, n, parses[b]) for b, n in enumerate(lengths.tolist())]


def _parses(items: _Items, b: int) -> tuple[tuple[tuple[int, ...], float], ...]:
    """Sentence b's items, best first: their actions and log p(x, y)."""
    rows = (items.sentence == b).nonzero()[:, 0]
    rows = rows[items.scores[rows].sort(descending=True, stable=True).indices]
    return tuple((tuple(items.paths[r, :int(items.state.parser.n_actions[r])].tolist()),
                  float(items.scores[r])) for r in rows.tolist())
