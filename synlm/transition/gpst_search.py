"""GPST's two released searches (Hu et al. 2024 §4.4), batched: several sentences' beams, each
of its own length, in one batch, each step running the model on the new step of each
hypothesis alone over key/value caches (as the released ``R2D2GenFastBeamSearcher`` does).

**Word-synchronous** (``beam_search``; the released ``R2D2GenFastBeamSearcher.beam_search``
given target ids). One beam of K hypotheses per sentence. At word i, each hypothesis that
has shifted i words and is not finished extends by SHIFT of x_i (log p(SHIFT) +
log p(x_i | ...)) or REDUCE (legal with two or more stack elements), its score the sum of its
steps; those that already shifted x_i (or finished) wait. The extensions and the waiting
hypotheses compete for the K places (ties keep the extensions first, in beam order, SHIFT
before REDUCE); once all K have shifted x_i the beam's log-sum is the prefix
log-probability::

    log p̂(x_≤i) = logsumexp_{y ∈ beam after x_i} score(y),
    log p(x_i | x_<i) ≈ log p̂(x_≤i) − log p̂(x_<i)    (surprisal: its negation)

After the last word the hypotheses REDUCE until one constituent spans the sentence; a
sentence leaves the batch once none of its hypotheses can act. Actions are normalised over
both, illegal ones included (``synlm.transition.types.ALL_ACTIONS``); the first word's term
is log p̂(x_1). The released syntactic-generalisation evaluator sums the surprisals of words
2..n (``tag[:, 1:]``), the first word's left out.

**Action-synchronous** (``action_synchronous_search``; the released perplexity evaluator's
``R2D2GenFastEvaluator.beam_search``): every hypothesis takes one action a step, 2n − 1
steps, the K best legal extensions kept at each (ties: beam order, SHIFT before REDUCE).

**The batch** (``Beams``): K slots per sentence, one row each, dead slots included. A row
holds its hypothesis's pending step (the input its last action produced and its position),
its stack of composition vectors and the two GPT-2 stacks' keys and values: the action
layers' at every earlier step (slot t = the step), the generation layers' at the earlier
steps whose action was a SHIFT (slot = words shifted before the step: a step writes its
keys there and attends to the slots up to it, so a REDUCE's entry is overwritten by the
hypothesis's next step; ``synlm.transition.gpst``'s mask). A step runs the stacks on the
pending steps of the rows that act, the heads on their outputs (the word's log-probability
at the row's next word alone), then one stable sort per sentence over its candidates picks
the K kept, and the new batch gathers the kept rows (the caches' written part alone) and
applies each one's action: a SHIFT pushes ``down(E x)`` and feeds ``E x``, a REDUCE composes
the two stack tops (``synlm.transition.gpst_compose``) and feeds ``up(c)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.transition.action_layers import ActionLayer
from synlm.transition.gpst import GPST, REDUCE, SHIFT
from synlm.transition.types import SearchResult

#: A candidate that keeps its hypothesis unchanged (the word-synchronous search's waiting).
WAIT = 2


@dataclass
class Beams:
    """K hypotheses for each of B sentences, row ``b * K + k`` (P = B K rows).

    Attributes:
        words: (B, N) the sentences' words, padded; lengths (B,); ids (B,) each sentence's
            index in the caller's list.
        live: (P,) whether the slot holds a hypothesis.
        score: (P,) float64: its log p(actions, words so far).
        shifted, depth, steps: (P,) words shifted, stack elements, actions taken.
        actions: (P, 2N) the actions taken.
        inputs, positions: (P, D), (P,) the pending step's input and position.
        stack: (P, N, Dc) the stack's composition vectors (bottom first).
        action_cache: (P, La, 2, nh, 2N, hd) the action layers' keys | values by step.
        word_cache: (P, Lg, 2, nh, N + 1, hd) the generation layers' keys | values by words
            shifted.
    """

    words: Tensor
    lengths: Tensor
    ids: Tensor
    live: Tensor
    score: Tensor
    shifted: Tensor
    depth: Tensor
    steps: Tensor
    actions: Tensor
    inputs: Tensor
    positions: Tensor
    stack: Tensor
    action_cache: Tensor
    word_cache: Tensor

    @property
    def beam_size(self) -> int:
        return self.live.size(0) // self.words.size(0)

    @property
    def sentence(self) -> Tensor:
        """(P,) each row's sentence."""
        return torch.arange(self.live.size(0), device=self.live.device) // self.beam_size

    def take(self, rows: Tensor, keep: Tensor) -> Beams:
        """The batch of the sentences ``keep`` (B',) whose slots hold the rows ``rows``
        (B' K,): the caches' written part gathered, their other slots zero (a step's
        attention reads other rows' slots masked, where uninitialised memory could be NaN)."""
        def part(cache: Tensor, width: int) -> Tensor:
            out = cache.new_zeros((rows.size(0), *cache.shape[1:]))
            out[..., :width, :] = cache[..., :width, :].index_select(0, rows)
            return out

        return Beams(self.words[keep], self.lengths[keep], self.ids[keep],
                     *(t[rows] for t in (self.live, self.score, self.shifted, self.depth,
                                         self.steps, self.actions, self.inputs,
                                         self.positions, self.stack)),
                     part(self.action_cache, int(self.steps.max()) + 1),
                     part(self.word_cache, int(self.shifted.max()) + 1))


def start(model: GPST, sentences: Sequence[Sequence[int]], beam_size: int,
          device: torch.device) -> Beams:
    """One hypothesis (⟨bos⟩ pending, nothing shifted) per sentence, K − 1 dead slots."""
    B, K, N = len(sentences), beam_size, max(map(len, sentences))
    P, D = B * K, model.bos.numel()
    first = layer_shape(model.action_layers[0])
    words = torch.zeros(B, N, dtype=torch.long, device=device)
    for b, sentence in enumerate(sentences):
        words[b, :len(sentence)] = torch.as_tensor(list(sentence), device=device)
    counts = torch.zeros(P, dtype=torch.long, device=device)
    dtype = model.bos.dtype
    return Beams(
        words, torch.tensor([len(s) for s in sentences], device=device),
        torch.arange(B, device=device), torch.arange(P, device=device).remainder(K) == 0,
        torch.zeros(P, dtype=torch.float64, device=device),
        *(counts.clone() for _ in range(3)),
        torch.zeros(P, 2 * N, dtype=torch.long, device=device),
        model.bos.expand(P, D).clone(), counts,
        torch.zeros(P, N, model.down.out_features, dtype=dtype, device=device),
        torch.zeros(P, len(model.action_layers), 2, *first[:1], 2 * N, first[1],
                    dtype=dtype, device=device),
        torch.zeros(P, len(model.generation_layers), 2, *first[:1], N + 1, first[1],
                    dtype=dtype, device=device))


def layer_shape(layer: ActionLayer) -> tuple[int, int]:
    """A GPT-2 layer's (heads, head size)."""
    return layer.attn.n_heads, layer.attn.head_size


def cached_layer(layer: ActionLayer, x: Tensor, cache: Tensor, rows: Tensor, slot: Tensor
                 ) -> Tensor:
    """A pre-norm GPT-2 layer at one new step of each row: ``x`` (R, D) the steps' inputs,
    ``cache`` (P, 2, nh, S, hd) the layer's keys | values, where the new ones are written at
    ``slot`` (R,) of ``rows`` (R,); each step attends to its row's slots up to its own."""
    q, k, v = layer.attn.heads(layer.attn.qkv(layer.attn_norm(x))[:, None])  # (R, nh, 1, hd)
    keys, values = cache[:, 0], cache[:, 1]  # (P, nh, S, hd)
    keys[rows, :, slot] = k[:, :, 0]
    values[rows, :, slot] = v[:, :, 0]
    width = int(slot.max()) + 1
    allowed = torch.arange(width, device=x.device) <= slot[:, None]  # (R, S')
    y = F.scaled_dot_product_attention(q, keys[rows, :, :width], values[rows, :, :width],
                                       allowed[:, None, None])  # (R, nh, 1, hd)
    x = x + layer.drop(layer.attn.proj(y.flatten(1)))
    return x + layer.ffn(layer.ffn_norm(x))


def evaluate(model: GPST, beams: Beams, rows: Tensor) -> tuple[Tensor, Tensor]:
    """The pending step of ``rows`` (R,): its keys and values written into the caches;
    log p(SHIFT), log p(REDUCE) (R, 2) and log p(the row's next word) (R,) (0 where all its
    words are shifted: the heads run on the rows that can shift alone)."""
    x = model.drop(beams.inputs[rows] + model.positions(beams.positions[rows]))  # (R, D)
    for depth, layer in enumerate(model.action_layers):
        x = cached_layer(layer, x, beams.action_cache[:, depth], rows, beams.steps[rows])
    g = model.drop(x)
    for depth, layer in enumerate(model.generation_layers):
        g = cached_layer(layer, g, beams.word_cache[:, depth], rows, beams.shifted[rows])
    sentence = beams.sentence[rows]
    can_shift = (beams.shifted[rows] < beams.lengths[sentence]).nonzero(as_tuple=True)[0]
    next_words = beams.words[sentence[can_shift], beams.shifted[rows[can_shift]]]
    word_logits = model.word_head(model.final_norm(g[can_shift])) @ model.embedding.weight.T
    word_lp = x.new_zeros(rows.size(0)).index_put(  # (R,)
        (can_shift,), F.log_softmax(word_logits, -1).gather(1, next_words[:, None])[:, 0])
    return F.log_softmax(model.action_head(x), -1), word_lp


def select(model: GPST, beams: Beams, scores: Tensor, valid: Tensor,
           cap_reduce_positions: bool) -> Beams:
    """The K best candidates of each sentence, by a stable sort over its
    candidates in the order (slot 0 SHIFT, slot 0 REDUCE, slot 1 SHIFT, ..., slot 0 WAIT,
    ...): ``scores``, ``valid`` (P, 3) each slot's SHIFT, REDUCE and WAIT (float64 scores).
    Returns the new batch, each kept row's action applied (module
    docstring); ``cap_reduce_positions``: a REDUCE's step takes position min(words
    shifted, n − 1) (the perplexity evaluator's)."""
    K = beams.beam_size
    def by_sentence(x: Tensor) -> Tensor:  # (P, 3) -> (B, 3K) in the candidates' order
        return torch.cat([x[:, :2].reshape(-1, 2 * K), x[:, 2].view(-1, K)], 1)

    ok = by_sentence(valid)
    key = by_sentence(scores).masked_fill(~ok, float("-inf"))
    chosen = key.sort(dim=1, descending=True, stable=True).indices[:, :K]  # (B, K)
    live = ok.gather(1, chosen).flatten()
    score = by_sentence(scores).gather(1, chosen).flatten()
    chosen = chosen.flatten()
    slot = torch.where(chosen < 2 * K, chosen // 2, chosen - 2 * K)
    action = torch.where(chosen < 2 * K, chosen % 2, WAIT)
    out = beams.take(beams.sentence * K + slot, torch.arange(beams.words.size(0),
                                                             device=slot.device))
    out.live, out.score = live, torch.where(live, score, 0.0)
    apply(model, out, torch.where(live, action, WAIT), cap_reduce_positions)
    return out


def apply(model: GPST, beams: Beams, action: Tensor, cap_reduce_positions: bool) -> None:
    """Each row's ``action`` (P,) (SHIFT, REDUCE or WAIT) applied to ``beams`` in place."""
    acts = (action != WAIT).nonzero(as_tuple=True)[0]
    beams.actions[acts, beams.steps[acts]] = action[acts]
    beams.steps[acts] += 1
    shifts = (action == SHIFT).nonzero(as_tuple=True)[0]
    if shifts.numel():
        word = beams.words[beams.sentence[shifts], beams.shifted[shifts]]
        embedded = model.embedding(word)  # (S, D)
        beams.stack[shifts, beams.depth[shifts]] = model.down(embedded)
        beams.inputs[shifts] = embedded
        beams.shifted[shifts] += 1
        beams.depth[shifts] += 1
        beams.positions[shifts] = beams.shifted[shifts]
    reduces = (action == REDUCE).nonzero(as_tuple=True)[0]
    if reduces.numel():
        top = beams.depth[reduces]
        built = model.compose(beams.stack[reduces, top - 2], beams.stack[reduces, top - 1])
        beams.stack[reduces, top - 2] = built
        beams.inputs[reduces] = model.up(built)
        beams.depth[reduces] -= 1
        position = beams.shifted[reduces]
        if cap_reduce_positions:
            position = torch.minimum(position, beams.lengths[beams.sentence[reduces]] - 1)
        beams.positions[reduces] = position


def parses(beams: Beams, b: int) -> tuple[tuple[tuple[int, ...], float], ...]:
    """Sentence ``b``'s beam, best first: (actions, score)."""
    K = beams.beam_size
    rows = (b * K + torch.arange(K, device=beams.live.device))[beams.live[b * K:(b + 1) * K]]
    return tuple((tuple(a[:s]), score) for a, s, score in zip(
        beams.actions[rows].tolist(), beams.steps[rows].tolist(), beams.score[rows].tolist()))


def sentence_log_sum(beams: Beams) -> Tensor:
    """(B,) float64: each sentence's beam's log-sum."""
    K = beams.beam_size
    return beams.score.masked_fill(~beams.live, float("-inf")).view(-1, K).logsumexp(1)


def checked(sentences: Sequence[Sequence[int]], beam_size: int, shortest: int, name: str
            ) -> None:
    """A one-line ``ValueError`` unless every sentence has ``shortest`` words or more and
    ``beam_size`` >= 1."""
    short = [i for i, s in enumerate(sentences) if len(s) < shortest]
    if not sentences or short or beam_size < 1:
        raise ValueError(f"{name}: expected sentences of {shortest} or more words and "
                         f"beam_size >= 1, got {len(sentences)} sentence(s) (shorter: "
                         f"{short}) and beam_size {beam_size}")


@torch.no_grad()
def beam_searches(model: GPST, sentences: Sequence[Sequence[int]], beam_size: int,
                  device: torch.device | str | None = None) -> list[SearchResult]:
    """The word-synchronous search (module docstring) of each sentence (word ids), batched:
    each one's per-word log-probabilities, its end term log p̂(x, finished) − log p̂(x) and
    its final beam, best first."""
    checked(sentences, beam_size, 1, "beam_search")
    device = torch.device(device) if device is not None else model.bos.device
    beams = start(model, sentences, beam_size, device)
    prefix = torch.zeros(len(sentences), beams.words.size(1), dtype=torch.float64,
                         device=device)  # (B, N) log p̂(x_≤i)
    word = torch.zeros(len(sentences), dtype=torch.long, device=device)
    results: list[SearchResult | None] = [None] * len(sentences)
    while beams.words.size(0):
        sentence, n = beams.sentence, beams.lengths[beams.sentence]
        finished = (beams.shifted == n) & (beams.depth == 1)
        active = beams.live & (beams.shifted == word[sentence]) & ~finished  # (P,)
        going = active.view(-1, beam_size).any(1)  # (B,)
        if not going.all():
            for b in (~going).nonzero(as_tuple=True)[0].tolist():
                length = int(beams.lengths[b])
                lps = torch.cat([prefix[b, :1], prefix[b, :length].diff()])
                results[int(beams.ids[b])] = SearchResult(
                    tuple(lps.tolist()), (sentence_log_sum(beams)[b] - prefix[b, length - 1])
                    .item(), parses(beams, b))
            keep = going.nonzero(as_tuple=True)[0]
            rows = (keep[:, None] * beam_size + torch.arange(beam_size, device=device))
            beams, prefix, word = beams.take(rows.flatten(), keep), prefix[keep], word[keep]
            continue
        rows = active.nonzero(as_tuple=True)[0]
        action_lp, word_lp = evaluate(model, beams, rows)
        scores = beams.score[:, None].repeat(1, 3)  # (P, 3) SHIFT, REDUCE, WAIT
        scores[rows, SHIFT] += (action_lp[:, SHIFT] + word_lp).double()
        scores[rows, REDUCE] += action_lp[:, REDUCE].double()
        valid = torch.stack([active & (beams.shifted < n), active & (beams.depth >= 2),
                             beams.live & ~active], 1)
        beams = select(model, beams, scores, valid, cap_reduce_positions=False)
        moved = beams.shifted.masked_fill(~beams.live, -1).view(-1, beam_size)
        done = (word < beams.lengths) & (moved != word[:, None]).all(1)  # (B,)
        at = word.clamp(max=prefix.size(1) - 1)
        prefix[done, at[done]] = sentence_log_sum(beams)[done]
        word = word + done.long()
    return results  # type: ignore[return-value]


def beam_search(model: GPST, words: Tensor, beam_size: int) -> SearchResult:
    """``beam_searches`` of one sentence ``words`` (n,)."""
    return beam_searches(model, [words.tolist()], beam_size, words.device)[0]


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
def action_synchronous_searches(model: GPST, sentences: Sequence[Sequence[int]],
                                beam_size: int, device: torch.device | str | None = None
                                ) -> list[SentenceScore]:
    """The released perplexity evaluator's search (``R2D2GenFastEvaluator.beam_search`` of
    ``eval/evaluate_lm.py``) of each sentence of n ≥ 2 words, batched: every hypothesis
    takes one action per step, 2n − 1 steps, the K best legal extensions kept at each. It
    normalises otherwise than ``beam_searches``: where REDUCE is illegal (fewer than two
    stack elements) its logit is masked before the softmax, so SHIFT has probability 1 and
    only the word is scored; an illegal SHIFT (after the last word) is dropped after it,
    REDUCE's probability not renormalised. A constituent built after the last word takes
    position n − 1 in the action layers, not n."""
    checked(sentences, beam_size, 2, "action_synchronous_search")
    device = torch.device(device) if device is not None else model.bos.device
    beams = start(model, sentences, beam_size, device)
    results: list[SentenceScore | None] = [None] * len(sentences)
    step = 0
    while beams.words.size(0):
        rows = beams.live.nonzero(as_tuple=True)[0]
        action_lp, word_lp = evaluate(model, beams, rows)
        n = beams.lengths[beams.sentence]
        shift_lp = torch.where(beams.depth[rows] >= 2, action_lp[:, SHIFT], 0.0)
        scores = beams.score[:, None].repeat(1, 3)  # (P, 3) SHIFT, REDUCE, (WAIT)
        scores[rows, SHIFT] += (shift_lp + word_lp).double()
        scores[rows, REDUCE] += action_lp[:, REDUCE].double()
        valid = torch.stack([beams.live & (beams.shifted < n), beams.live & (beams.depth >= 2),
                             torch.zeros_like(beams.live)], 1)
        beams = select(model, beams, scores, valid, cap_reduce_positions=True)
        step += 1
        ended = beams.lengths * 2 - 1 == step  # (B,)
        if ended.any():
            log_sum = sentence_log_sum(beams)
            for b in ended.nonzero(as_tuple=True)[0].tolist():
                results[int(beams.ids[b])] = SentenceScore(log_sum[b].item(), parses(beams, b))
            keep = (~ended).nonzero(as_tuple=True)[0]
            rows = (keep[:, None] * beam_size + torch.arange(beam_size, device=device))
            beams = beams.take(rows.flatten(), keep)
    return results  # type: ignore[return-value]


def action_synchronous_search(model: GPST, words: Tensor, beam_size: int) -> SentenceScore:
    """``action_synchronous_searches`` of one sentence ``words`` (n,)."""
    return action_synchronous_searches(model, [words.tolist()], beam_size, words.device)[0]
