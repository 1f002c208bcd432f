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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from synlm.transition.pushdown import PushdownTransformer
from synlm.transition.pushdown_tree import Stack


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


@torch.no_grad()
def beam_search(model: PushdownTransformer, ids: list[int], beam_size: int = 300) -> PushdownSearch:
    """Searches one sentence ``ids`` (``<s> w_1 ... w_N <eos>`` as model ids)."""
    T = len(ids)
    device = model.embedding.weight.device
    tokens = torch.tensor([*ids, model.end_id], device=device)
    scores = torch.zeros(1, dtype=torch.float64, device=device)
    history: list[list[int]] = [[]]
    stacks = [Stack(T)]
    cache = model.start(1)
    word_log_probs = []
    previous = 0.0
    for t in range(T):
        R = len(stacks)
        depths = torch.tensor([s.depth[: t + 1] for s in stacks], device=device)
        word, attach, cache = model.step(cache, tokens[t].expand(R), tokens[t + 1].expand(R),
                                         depths)
        word, attach = word.double(), attach.double()
        if t < T - 2:
            open_ = torch.ones_like(attach, dtype=torch.bool)
            open_[:, 0] = False
            for row, stack in enumerate(stacks):
                open_[row, list(stack.reduced)] = False
            rows, columns = open_.nonzero(as_tuple=True)  # row-major, as released
            candidate = scores[rows] + word[rows] + attach[rows, columns]
        else:
            rows = torch.arange(R, device=device)
            columns = torch.zeros(R, dtype=torch.long, device=device)
            candidate = scores + word + (attach[:, 0] if t == T - 2 else 0.0)
        order = torch.argsort(-candidate, stable=True)
        prefix = (scores + word)[rows[order[:R]]]
        total = torch.logsumexp(prefix, 0).item()
        word_log_probs.append(total - previous)
        previous = total
        kept = order[:beam_size]
        rows, columns, scores = rows[kept], columns[kept], candidate[kept]
        stacks = [stacks[r].copy() for r in rows.tolist()]
        history = [history[r] + ([c] if t < T - 1 else [])
                   for r, c in zip(rows.tolist(), columns.tolist())]
        if t < T - 1:
            for stack, c in zip(stacks, columns.tolist()):
                stack.attach(t + 1, c)
        cache = cache.select(rows)
    beam = [(s, h) for s, h in zip(scores.tolist(), history)]
    return PushdownSearch(torch.tensor(word_log_probs, dtype=torch.float64), beam)
