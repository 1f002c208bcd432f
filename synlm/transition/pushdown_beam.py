"""Word-synchronous beam search over Pushdown-LM attachments (released
``BeamSearchDepthBased`` with ``get_surprisal=True``, the search behind its parses,
perplexities and SyntaxGym surprisals; its beam: 300).

At step t (query t, tokens 0..T - 1 of ``<s> w_1 ... w_N <eos>``) every beam entry reads
token t and extends by each attachment c of token t + 1 still open (1 ≤ c ≤ t + 1, c not a
reduced token), scored log p(w_{t+1} | ...) + log p(a_{t+1} = c | ...), the attachment
normalised over every column (tokens 0..t + 1, the reduced ones and ``<s>`` included), not
renormalised over the open ones. ``<eos>`` attaches to ``<s>`` (its probability counted),
``</s>`` only adds its word probability. The candidates are sorted (stably, best first) and
the best ``beam_size`` kept.

**Surprisal convention (as released).** With R entries on the beam before step t, the
prefix probability after token t + 1 is the log-sum over the R best candidates of
(their origin's score + log p(w_{t+1} | origin)), the candidates' own attachment left out
(it belongs to the next word); log p(w_{t+1} | w_≤t) is its change from step t - 1. The
released code picks these R candidates by rank (``beam_next[origin]`` over the set of
origins 0..R - 1), so an origin with several extensions among the R best counts once per
extension and an origin with none is left out; kept here as released.

**Batched.** ``beam_searches`` searches several sentences at once: at step t the beams of
every sentence still reading (T > t) are the rows of one ``PushdownTransformer.step``,
each sentence's candidates are ranked on its own (one stable sort of a padded
(sentences, candidates) table, the released row-major order within a sentence) and the kept
ones are taken from the rows by a gather (cache, depths, reduced tokens, attachments); a
sentence leaves the batch after its ``</s>``. The stacks are tensors: token t + 1 attached
to the item ending at c ≠ t + 1 reduces tokens c..t and deepens by one every token of the
merged item, from the first token after the open token before c (0 for c = 0) to t + 1
(``synlm.transition.pushdown_tree.Stack.attach``). Each sentence's result is the one it has
searched alone, up to the rounding of batched products.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from synlm.transition.pushdown import PushdownTransformer


@dataclass
class PushdownSearch:
    """One sentence's search.

    Attributes:
        word_log_probs: (T,) log p(token t + 1 | tokens ≤ t) for t = 0..T - 1 (the last
            ``</s>``).
        beam: the final beam best first, (score, attachments of tokens 1..T - 1), score the
            joint log p(x, y) of words and attachments.
    """

    word_log_probs: Tensor
    beam: list[tuple[float, list[int]]]


def beam_search(model: PushdownTransformer, ids: list[int], beam_size: int = 300) -> PushdownSearch:
    """Searches one sentence ``ids`` (``<s> w_1 ... w_N <eos>`` as model ids)."""
    return beam_searches(model, [ids], beam_size)[0]


def _ranked(candidate: Tensor, valid: Tensor) -> Tensor:
    """(B, K) -> (B, K): each row's columns best first, the valid before the others, ties in
    column order (a stable sort by score, then a stable sort by validity)."""
    by_score = torch.argsort(-candidate, dim=1, stable=True)
    by_validity = torch.argsort((~valid.gather(1, by_score)).to(torch.int8), dim=1, stable=True)
    return by_score.gather(1, by_validity)


@torch.no_grad()
def beam_searches(model: PushdownTransformer, sentences: Sequence[Sequence[int]],
                  beam_size: int = 300) -> list[PushdownSearch]:
    """Searches the ``sentences`` (each ``<s> w_1 ... w_N <eos>`` as model ids) in one batch
    (module docstring)."""
    device = model.embedding.weight.device
    B = len(sentences)
    lengths = torch.tensor([len(ids) for ids in sentences], device=device)  # (B,) T each
    width = int(lengths.max())
    tokens = torch.full((B, width + 1), model.end_id, device=device)  # ids, then </s>
    for b, ids in enumerate(sentences):
        tokens[b, : len(ids)] = torch.tensor(list(ids), device=device)
    positions = torch.arange(width + 1, device=device)
    # the rows: every reading sentence's beam, grouped by sentence, each best first
    owner = torch.arange(B, device=device)  # (R,) the sentence of each row
    scores = torch.zeros(B, dtype=torch.float64, device=device)  # (R,)
    depth = torch.zeros(B, width, dtype=torch.long, device=device)  # (R, W)
    reduced = torch.zeros(B, width + 1, dtype=torch.bool, device=device)  # (R, W + 1)
    history = torch.zeros(B, width, dtype=torch.long, device=device)  # (R, W) attachments
    cache = model.start(B)
    word_log_probs = torch.zeros(B, width, dtype=torch.float64, device=device)
    previous = torch.zeros(B, dtype=torch.float64, device=device)
    results: dict[int, PushdownSearch] = {}
    for t in range(width):
        word, attach, cache = model.step(cache, tokens[owner, t], tokens[owner, t + 1],
                                         depth[:, : t + 1])
        word, attach = word.double(), attach.double()  # (R,), (R, t + 2)
        reading = (lengths > t).nonzero()[:, 0]  # (Bt,) the sentences whose rows these are
        counts = torch.bincount(owner, minlength=B)[reading]  # (Bt,) rows of each
        first = torch.cumsum(counts, 0) - counts
        R = int(counts.max())
        slot = torch.arange(R, device=device)
        filled = slot[None] < counts[:, None]  # (Bt, R)
        row = (first[:, None] + slot[None]).masked_fill(~filled, 0)  # (Bt, R) rows
        T = lengths[owner]  # (R,) each row's sentence length
        # candidate (row, column c): normal steps every open column of the row, the <eos>
        # step its attachment to <s> (column 0), the </s> step column 0 alone, unscored
        ends = (t >= T - 2)[:, None]  # (R, 1)
        columns = torch.arange(t + 2, device=device)
        open_ = ~reduced[:, : t + 2] & (columns > 0)
        valid = torch.where(ends, columns == 0, open_)  # (R, t + 2)
        extend = torch.where((t == T - 1)[:, None], 0.0, attach)  # </s>: no attachment
        candidate = (scores + word)[:, None] + extend  # (R, t + 2)
        C = t + 2
        table = candidate[row].masked_fill(~filled[..., None], float("-inf")).view(-1, R * C)
        ok = (valid[row] & filled[..., None]).view(-1, R * C)  # (Bt, R·C)
        order = _ranked(table, ok)
        origin = row.gather(1, order // C)  # (Bt, R·C) the row of each ranked candidate
        column = order % C
        # the prefix: the R_b best candidates' origins, each with its word (not attachment)
        rank = torch.arange(R * C, device=device)[None]  # (1, R·C)
        prefix = (scores + word)[origin].masked_fill(rank >= counts[:, None], float("-inf"))
        total = torch.logsumexp(prefix, 1)
        word_log_probs[reading, t] = total - previous[reading]
        previous[reading] = total
        kept = (rank < beam_size) & ok.gather(1, order)
        origin, column = origin[kept], column[kept]  # (R',) grouped by sentence, best first
        scores = table.gather(1, order)[kept]
        depth, reduced, history = depth[origin], reduced[origin], history[origin]
        cache, owner = cache.select(origin), owner[origin]
        history[:, t] = column  # token t + 1's attachment (read up to token T - 1)
        # the stacks after token t + 1 attaches to column c (the </s> step's rows leave)
        token, within = t + 1, positions[None, :width]
        merges = (column != token)[:, None]
        left = (within < column[:, None]) & ~reduced[:, :width]
        start = torch.where(left, within, -1).max(1).values + 1  # (R',)
        # the k-th merged item (c's first) deepens k times, token t + 1 once per merged item
        # (Stack.attach deepens what it has merged at each pop): the items' last tokens are
        # the open ones
        tops = (~reduced[:, :width] & (within >= start[:, None]) & (within < token)
                & merges).long()
        below = tops.cumsum(1) - tops  # (R', W) merged items ending before j
        deeper = torch.where(within == token, tops.sum(1, keepdim=True), below + 1)
        depth = depth + deeper.masked_fill((within < start[:, None]) | (within > token)
                                           | ~merges, 0)
        reduced = reduced | ((positions[None] >= column[:, None]) & (positions[None] < token)
                             & merges)
        done = lengths[owner] == t + 1
        for b in owner[done].unique().tolist():
            mine = owner == b
            n = int(lengths[b])
            results[b] = PushdownSearch(
                word_log_probs[b, :n].clone(),
                [(s, h) for s, h in zip(scores[mine].tolist(),
                                        history[mine, : n - 1].tolist())])
        if bool(done.any()):
            stay = ~done
            scores, depth, reduced, history = scores[stay], depth[stay], reduced[stay], \
                history[stay]
            cache, owner = cache.select(stay.nonzero()[:, 0]), owner[stay]
    return [results[b] for b in range(B)]


def search_within(model: PushdownTransformer, sentences: Sequence[Sequence[int]],
                  beam_size: int, max_memory_mb: float) -> list[PushdownSearch]:
    """``beam_searches`` over consecutive groups of ``sentences`` whose beams' caches
    (``beam_size`` rows of every token, (layers + 1) · D numbers each) fit in
    ``max_memory_mb`` together; a sentence whose cache alone is larger is searched alone."""
    weight = model.embedding.weight
    per_token = beam_size * (len(model.layers) + 1) * model.size * weight.element_size()
    budget = max_memory_mb * 2**20
    results: list[PushdownSearch] = []
    group: list[Sequence[int]] = []
    for ids in sentences:
        if group and (sum(map(len, group)) + len(ids)) * per_token > budget:
            results += beam_searches(model, group, beam_size)
            group = []
        group.append(ids)
    return results + (beam_searches(model, group, beam_size) if group else [])
