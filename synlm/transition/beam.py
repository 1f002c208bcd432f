"""Word-synchronous beam search (Stern et al. 2017, with the fast track of Noji & Oseki's
released ``word_sync_beam_search``): the prefix probabilities of a transition LM, hence each
word's surprisal, and its best trees.

Between two words, the beam (``beam_size`` items) is expanded action by action. Each step
takes the ``beam_size`` best successors of all items (every legal action of every item,
scored by the joint log-probability of its whole action sequence and words); a successor
that generates the next word (or, after the last word, closes the root) is set aside in the
word's beam, the others form the next beam. The fast track also sets aside the
``shift_size`` best word-generating successors outside the best ``beam_size`` when fewer
than that were among them. The expansion of a word ends when the word's beam holds
``beam_size`` items not taken by the fast track (or is full), or nothing is left to expand;
its ``word_beam_size`` best items then generate the word and become the next beam.

The prefix probability after word i is approximated by the sum over that beam::

    log p(x_1..x_i) ≈ logsumexp_{items y} log p(x_1..x_i, y)
    surprisal(x_i) = -(log p(x_1..x_i) - log p(x_1..x_{i-1}))

and after the last word the items that close the root (or take the model's
``finish_action``, where it has one: the in-order RNNG's ``FINISH``) give log p(x) (the end of
the sentence). The search is generic over a transition LM (``TransitionModel``): it asks
only what that contract names.

Which quantity the surprisals are depends on how each action's probability is normalised
(``CONVENTIONS``): over the actions legal at that point (``renormalised_given_length``, as
rnng-pytorch's beam search), which depend on the sentence's length (no ``NT`` after the last
word, no ``REDUCE`` of the root before it), so that a word's log-probability is
log p(x_i | x_<i, n) and, for a top-down model, the end of the sentence is certain (its term
0; the in-order RNNG can still open and close constituents after the last word, and the
beam keeps only some of the ways to ``FINISH``: ``SearchSettings.end_is_certain``); or
over every action as in training (``all_actions``, as the released PLM's search), the mass
of the illegal actions lost, so that it is log p(x_i | x_<i) and the end term is a real
log p(end | x). Each model declares its released convention (``search_convention``);
``BeamSettings.convention`` selects the other.

Over subwords (``word_ends``, rnng-pytorch's ``subword_end_mask``) a word of k pieces is k
``SHIFT`` in a row and the search runs piece by piece, as the released one does: after a
piece that does not end its word only ``SHIFT`` is legal (``inside_word``), so inside a word
the beam's items each shift the next piece and nothing is pruned; a word's log-probability is
the sum over its pieces (their changes of the beam's log-sum telescope).

A beam can empty: every item of a long sentence may fill its stack (``max_stack``) with the
root still open and words left, where no action is legal. (The action budget cannot empty
it: an ``NT`` is legal only with room left to finish the sentence.) Such a sentence is
searched again, alone, with no stack bound; if that empties too, its result says so
(``SearchResult.parsed`` False: no log-probabilities, no parse), never NaN.

Sentences of one batch that begin alike share their search: two sentences of the same
length (and, over pieces, the same word ends) have the same search up to their first
different word, since the search reads the words in order and the length from the start
(the stack bound, the action budget, the legal actions). Only the first of them in the batch
searches that prefix (``prefix_leaders``); the others' beams stay empty until the word where
they part, when each takes its leader's items (before they generate the word they share),
and their log-sums and parses are their leaders' while they follow. A BLiMP pair, which
differs in a word or two, pays for its common prefix once.

A step scores a word only where its successor may be kept, for a model that splits a step
in two (``TransitionModel.split_log_probs``: the RNNG family, whose words have a softmax of
their own): a ``SHIFT`` successor whose upper bound (``SplitStep.word_bounds``) falls below
what the step keeps is never kept, so its word softmax is not computed (``step_log_probs``);
the search keeps what it keeps with every word scored.

One module because the word-synchronous search, its batching of sentences and the
memory it is held to are one algorithm over any transition model.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor

from synlm import errors
from synlm.syntax.actions import word_actions
from synlm.transition.model import TransitionModel
from synlm.transition.parser_state import NO_ACTION, REDUCE, SHIFT
from synlm.transition.stack_pool import PooledState, compact
from synlm.transition.types import CONVENTIONS, RENORMALISED, GrowingState, SearchResult


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """What every search of a transition LM takes (beam search's ``BeamSettings``, particle
    filtering's ``synlm.transition.particles.ParticleSettings``), by name.

    Attributes:
        max_stack: the bound on the stack of a sentence (the reference's
            ``stack_size_bound``): its stack has ``ceil(min(n + 20, max_stack) / 8) * 8``
            slots for n words; None: no bound (``stack_slots``), how a sentence whose search
            found no tree is searched again.
        max_memory_mb: sentences are searched in batches that fit in this much memory
            besides the model (``sentence_bytes``); a sentence that does not fit alone is
            refused before any search starts (``check_fits``), naming the largest ``size``
            that fits.
        batch_size: most sentences searched at once.
        convention: ``renormalised_given_length`` or ``all_actions`` (``CONVENTIONS``);
            None: the model's released one (``TransitionModel.search_convention``).
    """

    #: The setting the search's memory grows with, which a refusal says the largest of.
    size: ClassVar[str]

    max_stack: int | None = 100
    max_memory_mb: float = 2048.0
    batch_size: int = 32
    convention: str | None = None

    def __post_init__(self) -> None:
        if self.max_stack is not None:
            errors.at_least("max_stack", self.max_stack, 8)
        errors.at_least("batch_size", self.batch_size)
        if self.max_memory_mb <= 0:
            raise errors.SettingError("max_memory_mb", self.max_memory_mb, "a size > 0")
        if self.convention is not None and self.convention not in CONVENTIONS:
            raise errors.SettingError("convention", self.convention, " | ".join(CONVENTIONS))

    def convention_of(self, model: Any) -> str:
        """The convention a search of ``model`` computes: this one's, else the model's."""
        return self.convention or model.search_convention

    def end_is_certain(self, model: TransitionModel) -> bool:
        """Whether this search gives ``model``'s end of the sentence log-probability 0 for
        every sentence (to rounding): it renormalises over the legal actions and, after the
        last word, ``model`` has one legal action a step
        (``TransitionModel.closes_without_choice``: top-down, not in-order), and the search
        keeps every item through them (a beam's items after the last word fit it: at most
        ``word_beam_size`` of them, each with one successor)."""
        return self.convention_of(model) == RENORMALISED and model.closes_without_choice

    @property
    def rows_per_sentence(self) -> int:
        """The most stacks a sentence holds at once in this search."""
        raise NotImplementedError

    def describe(self) -> str:
        """The search and its sizes, in words (what a scorer's results record)."""
        raise NotImplementedError

    def search_batch(self, model: TransitionModel, words: Tensor, lengths: Tensor,
                     word_ends: Tensor | None = None) -> list[SearchResult]:
        """This search over ``words`` (B, N), padded past ``lengths`` (B,), all at once;
        ``word_ends`` (B, N): ``words`` are pieces, and whether each ends its word."""
        raise NotImplementedError


@dataclass(frozen=True)
class BeamSettings(SearchSettings):
    """The beam's sizes (the reference's defaults: 100, 10, 1), and ``SearchSettings``'s
    by name.

    Attributes:
        beam_size: items expanded between two words.
        word_beam_size: items kept at each word.
        shift_size: the fast track: word-generating successors taken from outside the beam.
    """

    size: ClassVar[str] = "beam_size"

    beam_size: int = 100
    word_beam_size: int = 10
    shift_size: int = 1

    def __post_init__(self) -> None:
        errors.at_least("beam_size", self.beam_size)
        errors.at_least("word_beam_size", self.word_beam_size)
        errors.at_least("shift_size", self.shift_size, 0)
        super().__post_init__()

    @property
    def done_size(self) -> int:
        """The capacity of a word's beam (the reference's ``min(2b, b + 5s)``)."""
        return min(2 * self.beam_size, self.beam_size + 5 * self.shift_size)

    @property
    def rows_per_sentence(self) -> int:
        return self.beam_size + self.done_size

    def describe(self) -> str:
        return f"word-synchronous beam search, beam {self.beam_size}, word beam " \
               f"{self.word_beam_size}, shift {self.shift_size}"

    def search_batch(self, model: TransitionModel, words: Tensor, lengths: Tensor,
                     word_ends: Tensor | None = None) -> list[SearchResult]:
        return search_batch(model, words, lengths, self, word_ends)


def stack_slots(n_words: int, max_stack: int | None, max_open: int = 100) -> int:
    """A sentence's stack slots (``BeamSettings.max_stack``); with no bound, room for every
    tree of n words with at most ``max_open`` constituents open (each item on the stack is
    an open ``NT`` or covers a word; an ``NT`` asks for two free slots)."""
    if max_stack is None:
        return math.ceil((n_words + max_open + 3) / 8) * 8
    return math.ceil(min(n_words + 20, max_stack) / 8) * 8


def action_budget(n_words: Tensor) -> Tensor:
    """The most actions a sentence of n words may take in search (the reference's action
    storage, ``max(100, 5 n)``)."""
    return (5 * n_words).clamp(min=100)


@dataclass
class _Beam:
    """B sentences × K items: stacks (B·K rows), scores (B, K) (-inf: an empty slot; the
    filled slots come first) and action paths (B·K, P)."""

    state: Any
    scores: Tensor
    paths: Tensor

    def rows(self, b: Tensor, slot: Tensor) -> Tensor:
        return b * self.scores.size(1) + slot

    def take(self, index: Tensor, scores: Tensor, into: Any = None) -> _Beam:
        """A beam of the rows ``index`` (B·K',) of this one with new ``scores`` (B, K'),
        written into the stacks ``into`` (a state of B·K' rows no longer needed: the search
        reuses two sets of stacks, as fresh ones of this size cost more to allocate than
        to fill) or into new tensors. This beam's stacks are read no more, and of the new
        one only the items with a score: a state with a ``move``
        (``ActionTransformerState.move``) is told so, and may hand its memory to ``into``
        reordered in place, copying only what an item keeps from another's row."""
        move = getattr(self.state, "move", None)
        state = self.state.select(index, out=into) if into is None or move is None \
            else move(index, into, (scores > float("-inf")).view(-1))
        return _Beam(state, scores, self.paths[index])

    def put(self, rows: Tensor, source: _Beam, source_rows: Tensor, scores: Tensor) -> None:
        self.state.assign(rows, source.state, source_rows)
        self.paths[rows] = source.paths[source_rows]
        self.scores.view(-1)[rows] = scores


def inside_word(pointer: Tensor, word_ends: Tensor) -> Tensor:
    """(R,) bool: whether each row's last ``SHIFT`` generated a piece that does not end its
    word (then only ``SHIFT`` is legal); ``pointer`` (R,) pieces generated, ``word_ends``
    (R, N) whether piece i ends its word."""
    last = (pointer - 1).clamp(min=0, max=word_ends.size(1) - 1)
    return (pointer > 0) & ~word_ends.gather(1, last[:, None])[:, 0]


def only_shift_inside_words(legal: Tensor, pointer: Tensor, word_ends: Tensor | None) -> Tensor:
    """``legal`` (R, A) with every action but ``SHIFT`` ruled out inside a word (rnng-pytorch's
    ``invalid_action_mask``); unchanged without ``word_ends``."""
    if word_ends is None:
        return legal
    legal = legal.clone()
    legal[inside_word(pointer, word_ends), SHIFT + 1:] = False
    return legal


def _record(beam: _Beam, actions: Tensor) -> None:
    """Append each row's action (-1: none) to its path, before the state counts it."""
    acted = (actions != NO_ACTION).nonzero()[:, 0]
    beam.paths[acted, beam.state.parser.n_actions[acted]] = actions[acted]


def advance(model: TransitionModel, beam: Any, actions: Tensor, words: Tensor,
            piece_ends: Tensor | None = None) -> None:
    """Each row of ``beam`` (its ``state`` and action ``paths``) takes its action (-1:
    none), its ``SHIFT`` generating ``words`` (R,); over pieces, ``piece_ends`` (R,) says
    whether each ends its word (passed to the model only then)."""
    _record(beam, actions)
    ends = {} if piece_ends is None else {"piece_ends": piece_ends}
    beam.state = model.advance(beam.state, actions, words, **ends)


def prefix_leaders(words: Tensor, lengths: Tensor, word_ends: Tensor | None = None) -> Tensor:
    """(N + 1, B) long: at each pointer p of a search over ``words`` (B, N) (padded past
    ``lengths`` (B,); ``word_ends`` (B, N) over pieces), the sentence whose search sentence
    b's is: the first in the batch of b's length with b's words (and piece ends) up to word
    p (all of them at p >= n), b itself where none before it is."""
    N = words.size(1)
    same = words[:, None, :] == words[None, :, :]  # (B, B, N)
    if word_ends is not None:
        same &= word_ends[:, None, :] == word_ends[None, :, :]
    same |= torch.arange(N, device=words.device) >= lengths[None, :, None]  # padding alike
    same &= (lengths[:, None] == lengths[None, :])[..., None]
    alike = same.to(torch.uint8).cummin(2).values  # (B, B, N) alike up to word i
    first = alike.argmax(0)  # (B, N): the first index of the largest, the first alike
    at = torch.arange(N + 1, device=words.device).clamp(max=N - 1)  # pointer p reads word p
    return first[:, at].T


@torch.no_grad()
def search_batch(model: TransitionModel, words: Tensor, lengths: Tensor,
                 settings: BeamSettings, word_ends: Tensor | None = None) -> list[SearchResult]:
    """Word-synchronous beam search (module docstring) over ``words`` (B, N), padded past
    ``lengths`` (B,), all at once; the model in eval mode. ``word_ends`` (B, N): ``words``
    are pieces, and whether each ends its word (the log-probabilities are then per piece)."""
    B, N = words.shape
    K, Kd, nA = settings.beam_size, settings.done_size, model.n_actions
    # the model's own convention by its default, another one asked for by name
    convention = {} if settings.convention is None else {
        "renormalise": settings.convention == RENORMALISED}
    device = words.device
    slots = torch.tensor([stack_slots(int(n), settings.max_stack, model.limits.max_open)
                          for n in lengths], device=device)
    budget = action_budget(lengths)
    limits = replace(model.limits, stack_size=slots.repeat_interleave(K),
                     max_actions=budget.repeat_interleave(K))
    P = int(budget.max()) + 1
    b_rows = torch.arange(B, device=device)
    row_lengths = lengths.repeat_interleave(K)
    finish = model.finish_action  # what ends a parse, if not the root's REDUCE
    row_ends = None if word_ends is None else word_ends.repeat_interleave(K, 0)  # (B·K, N)

    # a model outside ``TransitionModel`` may have no layout of its own for search
    start = getattr(model, "search_state", model.initial_state)(B * K, int(slots.max()),
                                                                max_actions=P)

    def stacks(k: int) -> Any:
        """k empty stacks a sentence; pooled ones on ``start``'s nodes."""
        if isinstance(start, PooledState):
            return start.select(torch.zeros(B * k, dtype=torch.long, device=device))
        return model.initial_state(B * k, int(slots.max()), max_actions=P)

    def empty(state: Any, k: int) -> _Beam:
        return _Beam(state, torch.full((B, k), float("-inf"), dtype=torch.float64,
                                       device=device),
                     torch.full((B * k, P), NO_ACTION, dtype=torch.long, device=device))

    beam, done = empty(start, K), empty(stacks(Kd), Kd)
    spare, done_spare = stacks(K), stacks(Kd)  # what ``take`` writes into
    nodes = _Nodes(beam.state, B * K)
    leaders = prefix_leaders(words, lengths, word_ends)  # (N + 1, B)
    beam.scores[:, 0] = torch.where(leaders[0] == b_rows, 0.0, float("-inf"))
    prefix: list[Tensor] = []  # log-sum of the beam after each word, (B,)
    parses: list[tuple[tuple[tuple[int, ...], float], ...]] = [()] * B
    for pointer in range(N + 1):
        word = words[:, min(pointer, N - 1)]  # (B,) the word each sentence generates next
        next_word = word.repeat_interleave(K)  # (B·K,)
        ends = None if word_ends is None else word_ends[:, min(pointer, N - 1)]  # (B,)
        at_end = (lengths == pointer)[:, None]  # (B, 1): the root closes now
        forced = torch.zeros(B, dtype=torch.long, device=device)
        done_width = torch.zeros(B, dtype=torch.long, device=device)
        while True:
            finished = (beam.scores[:, 0] == float("-inf")) | (done_width >= Kd) | \
                (done_width - forced >= K)
            beam.scores[finished] = float("-inf")
            if bool(finished.all()):
                break
            nodes.bound(beam, done)
            active = (beam.scores > float("-inf")).view(-1)
            legal = beam.state.parser.legal_actions(row_lengths, nA, limits) & active[:, None]
            legal = only_shift_inside_words(legal, beam.state.parser.pointer, row_ends)
            log_probs = step_log_probs(model, beam.state, next_word, legal, beam.scores,
                                       settings.shift_size, convention)
            total = (log_probs.view(B, K, nA) + beam.scores[..., None]).view(B, K * nA)
            scores, order = total.sort(1, descending=True)
            item, action = order // nA, order % nA
            valid = scores > float("-inf")
            opened = beam.state.parser.n_open.view(B, K).gather(1, item)
            closes = (action == REDUCE) & (opened == 1) if finish is None else action == finish
            is_end = valid & torch.where(at_end, closes, action == SHIFT)
            within = torch.arange(K * nA, device=device) < K
            end_in, other_in = is_end & within, valid & ~is_end & within
            fast = is_end & ~within
            fast &= fast.long().cumsum(1) <= (settings.shift_size - end_in.sum(1,
                                                                             keepdim=True))
            forced += fast.sum(1)
            # set aside the word-generating successors, first come first kept
            to_done = end_in | fast
            slot = done_width[:, None] + to_done.long().cumsum(1) - 1
            keep = to_done & (slot < Kd)
            b, col = keep.nonzero(as_tuple=True)
            done.put(done.rows(b, slot[b, col]), beam, beam.rows(b, item[b, col]),
                     scores[b, col])
            done_width += keep.sum(1)
            # the next beam: the other successors, best first
            new_slot = other_in.long().cumsum(1) - 1
            b, col = other_in.nonzero(as_tuple=True)
            index = beam.rows(b_rows, torch.zeros_like(b_rows))[:, None].expand(B, K).clone()
            index[b, new_slot[b, col]] = beam.rows(b, item[b, col])
            new_scores = torch.full_like(beam.scores, float("-inf"))
            new_scores[b, new_slot[b, col]] = scores[b, col]
            actions = torch.full((B, K), NO_ACTION, dtype=torch.long, device=device)
            actions[b, new_slot[b, col]] = action[b, col]
            beam, spare = beam.take(index.view(-1), new_scores, into=spare), beam.state
            advance(model, beam, actions.view(-1), next_word,
                    None if ends is None else ends.repeat_interleave(K))
        # the sentences that part from their leaders at the next word take their items
        parting = ((leaders[min(pointer + 1, N)] == b_rows) &
                   (leaders[pointer] != b_rows)).nonzero()[:, 0]
        if parting.numel():
            leader, items = leaders[pointer, parting], torch.arange(Kd, device=device)
            done.put(done.rows(parting[:, None], items).view(-1), done,
                     done.rows(leader[:, None], items).view(-1), done.scores[leader].view(-1))
            done_width[parting] = done_width[leader]
        # the word's best items generate it (or close the root) and become the beam
        done_scores, order = done.scores.sort(1, descending=True)
        kept = torch.arange(Kd, device=device) < done_width.clamp(
            max=settings.word_beam_size)[:, None]
        done, done_spare = done.take((order + (b_rows * Kd)[:, None]).view(-1),
                                     done_scores.masked_fill(~kept, float("-inf")),
                                     into=done_spare), done.state
        end_action = torch.where(at_end, REDUCE if finish is None else finish,
                                 SHIFT).expand(B, Kd)
        advance(model, done, torch.where(kept, end_action, NO_ACTION).view(-1),
                word.repeat_interleave(Kd), None if ends is None else ends.repeat_interleave(Kd))
        beam = done.take((b_rows[:, None] * Kd + torch.arange(K, device=device)).view(-1),
                         done.scores[:, :K].clone(), into=beam.state)
        prefix.append(torch.logsumexp(beam.scores, 1))
        for b in (lengths == pointer).nonzero()[:, 0].tolist():
            parses[b] = _parses(beam, b)
            beam.scores[b] = float("-inf")  # its search is over
        done.scores.fill_(float("-inf"))
        nodes.compact(beam, done)
    prefix = [sums[leaders[p]] for p, sums in enumerate(prefix)]  # a follower's, its leader's
    return [search_result(prefix, b, n, parses[int(leaders[n, b])])
            for b, n in enumerate(lengths.tolist())]


def step_log_probs(model: TransitionModel, state: Any, words: Tensor, legal: Tensor,
                   scores: Tensor, shift_size: int, convention: dict[str, bool]) -> Tensor:
    """(B·K, A) float64: ``model.next_log_probs`` of a step of the beams whose items score
    ``scores`` (B, K), but for a model that splits them (``split_log_probs``) a ``SHIFT``
    successor's word is scored only where that successor may be kept, and is -inf where its
    bound proves it cannot be. A successor is kept (``search_batch``) if it is among its
    sentence's K best or, generating the word, among the ``shift_size`` best of those
    outside them. With τ the K-th best successor that generates no word, a ``SHIFT``
    successor whose bound (score + log p(SHIFT) + ``word_bounds``) is below τ is outside
    the K best, so the words are scored in three rounds: every bound of at least τ; then,
    for a sentence with fewer than ``shift_size`` word-generating successors above the K-th
    best, its best bounds still unscored; then every bound of at least the ``shift_size``-th
    best scored outside the K best. What the search keeps, and every number it gives, is
    that of the words all scored."""
    # a model outside ``TransitionModel`` may not split them
    split_log_probs = getattr(model, "split_log_probs", None)
    split = None if split_log_probs is None else split_log_probs(state, words, legal,
                                                                 **convention)
    if split is None:
        return model.next_log_probs(state, words, legal, **convention).double()
    B, K = scores.shape
    actions = split.actions  # (B·K, A), the SHIFT column without the word
    total = actions.double().view(B, K, -1) + scores[..., None]  # (B, K, A)
    shift = total[..., SHIFT]  # (B, K): score + log p(SHIFT), -inf where not legal
    others = total.clone()
    others[..., SHIFT] = float("-inf")
    tau = others.view(B, -1).topk(K, 1).values[:, -1:]  # (B, 1)
    can = shift > float("-inf")  # (B, K)
    bound = torch.full_like(shift, float("-inf")).view(-1)
    shifting = can.view(-1).nonzero()[:, 0]
    bound[shifting] = shift.view(-1)[shifting] + split.word_bounds(shifting)
    bound = bound.view(B, K)
    word = actions.new_full((B * K,), float("-inf"))  # log p(word), where scored
    scored = torch.zeros_like(can)

    def score(chosen: Tensor) -> Tensor:
        """Score the words of the ``chosen`` (B, K) successors not yet scored; each
        word-generating successor's total, -inf where unscored."""
        rows = (chosen & ~scored).view(-1).nonzero()[:, 0]
        if rows.numel():
            word[rows] = split.word_log_probs(rows)
            scored.view(-1)[rows] = True
        return (actions[:, SHIFT] + word).double().view(B, K) + scores

    exact = score(can & (bound >= tau))
    kth = torch.cat([others.view(B, -1), exact], 1).topk(K, 1).values[:, -1:]  # (B, 1)
    need = (shift_size - (exact > kth).sum(1, keepdim=True)).clamp(min=0) * \
        can.any(1, keepdim=True)  # (B, 1): none where no item may generate the word
    if bool((need > 0).any()):
        width = min(shift_size, K)
        best = bound.masked_fill(scored | ~can, float("-inf")).topk(width, 1)
        first = (torch.arange(width, device=need.device) < need) & (best.values > float("-inf"))
        exact = score(torch.zeros_like(can).scatter(1, best.indices, first))
        outside = exact.masked_fill(exact > kth, float("-inf")).topk(width, 1).values
        floor = outside.gather(1, (need - 1).clamp(min=0, max=width - 1))  # (B, 1)
        score(can & (bound >= torch.where(need > 0, floor, float("inf"))))
    actions[:, SHIFT] += word
    return actions.double()


class _Nodes:
    """The search's shared stack nodes, where its state has them (``PooledState``): after
    each word, and within a word whenever the pool has grown by ``GROWTH`` pushes a row
    since, only the nodes of live items are kept (``stack_pool.compact``), so that memory
    follows the live stacks; nothing for another state."""

    #: Pushes a row (steps of the whole beam) between two compactions within a word.
    GROWTH = 16

    def __init__(self, state: Any, rows: int) -> None:
        self.pooled = isinstance(state, PooledState)
        self.step = self.GROWTH * rows
        self.limit = state.pool.size + self.step if self.pooled else 0

    def compact(self, *beams: _Beam) -> None:
        if self.pooled:
            compact([(b.state, b.scores.view(-1) > float("-inf")) for b in beams], self.step)
            self.limit = beams[0].state.pool.size + self.step

    def bound(self, *beams: _Beam) -> None:
        if self.pooled and beams[0].state.pool.size > self.limit:
            self.compact(*beams)


def _parses(beam: _Beam, b: int) -> tuple[tuple[tuple[int, ...], float], ...]:
    """Sentence b's items, best first: their actions and log p(x, y)."""
    K = beam.scores.size(1)
    found = []
    for slot, score in enumerate(beam.scores[b].tolist()):
        if score > float("-inf"):
            row = b * K + slot
            n = int(beam.state.parser.n_actions[row])
            found.append((tuple(beam.paths[row, :n].tolist()), score))
    return tuple(found)


def search_result(prefix: list[Tensor], b: int, n: int,
            parses: tuple[tuple[tuple[int, ...], float], ...]) -> SearchResult:
    """Sentence b's result from the beam's log-sums after each word (``prefix``); a beam
    that emptied (no parse) has none."""
    if not parses:
        return SearchResult(None, None, ())
    sums = [0.0] + [float(prefix[i][b]) for i in range(n + 1)]
    return SearchResult(word_log_probs=tuple(sums[i + 1] - sums[i] for i in range(n)),
                        end_log_prob=sums[n + 1] - sums[n], parses=parses)


def word_level(result: SearchResult, word_ends: Sequence[bool]) -> SearchResult:
    """A search over pieces with its parses as actions over words: a piece's ``SHIFT`` kept
    where the piece ends its word (``synlm.syntax.actions.word_actions``); the
    log-probabilities stay per piece."""
    return replace(result, parses=tuple((tuple(word_actions(path, word_ends, SHIFT)), score)
                                        for path, score in result.parses))


def state_nbytes(value: Any) -> int:
    """The bytes of the tensors in ``value`` (a state: dataclasses of tensors)."""
    if isinstance(value, Tensor):
        return value.numel() * value.element_size()
    return sum(state_nbytes(v) for v in getattr(value, "__dict__", {}).values())


def sentence_bytes(model: TransitionModel, n_words: int, settings: SearchSettings) -> int:
    """The memory one sentence of ``n_words`` takes in a search, a bound: for each of its
    ``settings.rows_per_sentence`` items, three live copies of its state while a step
    selects and advances (the state as ``initial_state`` makes it and, where it grows,
    ``GrowingState``, at its largest), two of its action path, and what a step computes for
    it: four copies of its logits over as many values as the model's largest matrix has
    rows (its word vocabulary, or more) and sixteen 8-byte values per action (the sort of
    its successors). The random number generators are left as they were (a training
    model's ``initial_state`` may draw dropout masks)."""
    slots = stack_slots(n_words, settings.max_stack, model.limits.max_open)
    budget = int(action_budget(torch.tensor(n_words))) + 1
    gpus = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    with torch.no_grad(), torch.random.fork_rng(devices=gpus):
        state = model.initial_state(1, slots, budget)
    if isinstance(state, GrowingState):
        state.reserve(state.capacity)
    weights = [p for p in model.parameters() if p.dim() == 2]
    widest = max((p.size(0) for p in weights), default=0)
    precision = max([4, *(p.element_size() for p in weights)])
    item = 3 * state_nbytes(state) + 2 * 8 * budget + 4 * precision * widest + \
        16 * 8 * model.n_actions
    return settings.rows_per_sentence * item


def search_bytes(model: TransitionModel, n_words: int, settings: SearchSettings) -> int:
    """The memory a search of a sentence of ``n_words`` holds with ``settings``, and again
    without a stack bound (as a sentence whose search found no tree is searched)."""
    return max(sentence_bytes(model, n_words, settings),
               sentence_bytes(model, n_words, replace(settings, max_stack=None)))


def check_fits(model: TransitionModel, n_words: int, settings: SearchSettings) -> None:
    """A sentence of ``n_words`` searched with ``settings`` (and again without a stack
    bound, as a sentence whose search found no tree is) fits ``settings.max_memory_mb``
    (``sentence_bytes``); otherwise a one-line ``InputError`` naming the search, the memory
    it needs, the setting and the largest ``settings.size`` that fits."""
    budget = settings.max_memory_mb * 2**20
    needed = search_bytes(model, n_words, settings)
    if needed <= budget:
        return
    low, high = 0, int(getattr(settings, settings.size))  # the largest that fits, by halves
    while low < high:
        middle = (low + high + 1) // 2
        if search_bytes(model, n_words, replace(settings, **{settings.size: middle})) <= budget:
            low = middle
        else:
            high = middle - 1
    fits = f"at most {settings.size}={low:,} fits" if low else \
        f"not even {settings.size}=1 fits; raise max_memory_mb"
    raise errors.InputError(f"{settings.describe()} needs about {needed / 2**20:,.0f} MB for "
                            f"a sentence of {n_words} words, over max_memory_mb="
                            f"{settings.max_memory_mb:g}; {fits}")


#: The share of ``max_memory_mb`` a batch of sentences is sized to fill: the rest is the
#: allocator's, which keeps blocks that earlier batches freed (``release_freed_memory``).
BATCH_SHARE = 0.75


#: The searches whose batches ``max_memory_mb`` held below ``batch_size``, said once each.
_HELD: set[SearchSettings] = set()


def say_batches_held(settings: SearchSettings, fit: int, asked: int, n_words: int,
                     each: int) -> None:
    """A warning, once a process for each ``settings``, that ``max_memory_mb`` holds a
    batch of ``asked`` sentences of ``n_words`` to ``fit`` of them, each bounded at
    ``each`` bytes (``sentence_bytes``): an action Transformer's bound holds every item's
    cache at its capacity, so the default budget searches a few sentences at a time."""
    if settings in _HELD:
        return
    _HELD.add(settings)
    warnings.warn(f"{settings.describe()}: max_memory_mb={settings.max_memory_mb:g} searches "
                  f"{fit} sentences of {n_words} words at a time where {asked} were asked "
                  f"for (at most {each / 2**20:,.0f} MB each); a larger max_memory_mb "
                  "searches more at once, to the same results up to float rounding",
                  errors.SynLMWarning, stacklevel=3)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> None:
    """Give the memory a finished batch freed back to the system (glibc's ``malloc_trim``;
    elsewhere nothing), so that the next batch's peak is its own: the allocator otherwise
    keeps the freed blocks, and over many batches of differently sized tensors the
    process's resident memory grows past the budget. Measured on 134 sentences of 4-19 words
    with a 64-wide RNNG, beam 524 within 512 MB: 652 MB above the start with neither this
    nor ``BATCH_SHARE``, 548 MB with this alone, 475 MB with both."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def search_sentences(model: TransitionModel, words: Tensor, lengths: Tensor,
                     settings: SearchSettings, word_ends: Tensor | None = None
                     ) -> list[SearchResult]:
    """The search ``settings`` name (``BeamSettings``: this module's; ``ParticleSettings``:
    particle filtering) over the rows of ``words`` (B, N) (padded past ``lengths`` (B,);
    pieces with ``word_ends`` (B, N), their log-probabilities per piece),
    in batches of similar length that fit ``settings.max_memory_mb`` (``sentence_bytes``: a
    stack is measured on the model, ``initial_state``, and a sentence holds
    ``settings.rows_per_sentence`` of them), each of at most ``settings.batch_size``
    sentences; the results in the given order. Before any search, the longest sentence is
    checked to fit alone (``check_fits``: a one-line ``InputError`` otherwise). A sentence whose
    search found no tree is searched again alone with no stack bound (module docstring). A
    sentence of no words is an ``InputError`` naming it (a tree generates a word before its
    root closes)."""
    empty = [i for i, n in enumerate(lengths.tolist()) if n < 1]
    if empty:
        raise errors.InputError(f"sentence {empty[0] + 1}: no words; a transition LM "
                                "generates at least one word under its root")
    order = sorted(range(len(lengths)), key=lambda i: -int(lengths[i]))
    check_fits(model, int(lengths[order[0]]), settings)
    results: list[SearchResult | None] = [None] * len(order)
    start = 0
    while start < len(order):
        longest = int(lengths[order[start]])
        # a batch fills BATCH_SHARE of the budget; a sentence alone, the whole (check_fits)
        each = sentence_bytes(model, longest, settings)
        fit = max(1, int(BATCH_SHARE * settings.max_memory_mb * 2**20 // each))
        asked = min(settings.batch_size, len(order) - start)
        if fit < asked:
            say_batches_held(settings, fit, asked, longest, each)
        chunk = order[start:start + min(fit, asked)]
        index = torch.tensor(chunk, device=words.device)
        n = lengths[index]
        width = max(1, int(n.max()))
        found = settings.search_batch(model, words[index, :width], n,
                                      None if word_ends is None else word_ends[index, :width])
        for i, result in zip(chunk, found, strict=True):
            results[i] = result
        start += len(chunk)
        release_freed_memory()
    if settings.max_stack is not None:
        unbounded = replace(settings, max_stack=None)
        for i, result in enumerate(results):
            if result is not None and not result.parsed:
                n = lengths[i:i + 1]
                ends = None if word_ends is None else word_ends[i:i + 1, :int(n)]
                (again,) = unbounded.search_batch(model, words[i:i + 1, :int(n)], n, ends)
                results[i] = replace(again, unbounded_stack=True)
    return results  # type: ignore[return-value]
