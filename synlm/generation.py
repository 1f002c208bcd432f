"""Sampling text from a ``SyntaxLM``: temperature, top-k and nucleus (top-p) filtering
(Holtzman et al. 2020 §3.1), batched, seeded, with the backbone's incremental state.

A backbone whose ``spec.incremental`` is set (recurrent stacks, and Transformer and GPT-2
through their key/value cache) is fed only the new token at each step, a head that replaces
the distribution too when it is ``incremental`` (DM's mixture keeps its past positions);
otherwise the whole sequence is run again at every step. Both give the same tokens
(``tests/test_generation.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from synlm.lm import SyntaxLM


def filter_log_probs(log_probs: Tensor, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> Tensor:
    """The next-token distribution to sample from, as log-probabilities (..., V): the input
    log-probabilities divided by ``temperature`` and renormalised, then restricted to the
    ``top_k`` most likely tokens and to the smallest set of most likely tokens whose mass
    reaches ``top_p`` (the nucleus), renormalised; removed tokens get −inf."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    lp = (log_probs / temperature).log_softmax(-1)
    if top_k is not None and top_k < lp.size(-1):
        kth = lp.topk(top_k, dim=-1).values[..., -1:]
        lp = lp.masked_fill(lp < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_lp, order = lp.sort(dim=-1, descending=True)
        mass_before = sorted_lp.exp().cumsum(-1) - sorted_lp.exp()  # mass of better tokens
        drop = torch.zeros_like(lp, dtype=torch.bool).scatter(-1, order, mass_before >= top_p)
        lp = lp.masked_fill(drop, float("-inf"))
    return lp.log_softmax(-1)


@torch.no_grad()
def generate(model: SyntaxLM, prompts: Tensor, max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, use_cache: bool = True,
             stop_at_eos: bool = True) -> Tensor:
    """Sample continuations (B, N) of ``prompts`` (B, P), rows of equal length
    (``[<eos>, w1 .. wk]`` for a context; ``[<eos>]`` for unconditional samples), N =
    ``max_new_tokens``. With ``stop_at_eos`` a row that has produced ``<eos>`` continues
    with ``<eos>`` only, and sampling stops early (N smaller) once every row has.
    ``generator`` seeds the sampling (same seed, same samples)."""
    eos = model.vocab.eos_id if model.vocab is not None else 0
    incremental = (use_cache and model.backbone.spec.incremental
                   and all(h.incremental for h in model.heads if h.replaces_distribution))
    log_probs, state = model.step(prompts)
    sequence, new = prompts, []
    done = torch.zeros(prompts.size(0), dtype=torch.bool, device=prompts.device)
    for _ in range(max_new_tokens):
        probs = filter_log_probs(log_probs[:, -1], temperature, top_k, top_p).exp()  # (B, V)
        token = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)
        if stop_at_eos:
            token = token.masked_fill(done, eos)
            done |= token == eos
        new.append(token)
        if stop_at_eos and bool(done.all()):
            break
        sequence = torch.cat([sequence, token[:, None]], dim=1)
        if incremental:
            log_probs, state = model.step(token[:, None], state)
        else:
            log_probs, _ = model.step(sequence)
    return torch.stack(new, dim=1)
