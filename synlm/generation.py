"""Sampling text from a ``SyntaxLM``: temperature, top-k and nucleus (top-p) filtering
(Holtzman et al. 2020 §3.1), batched, seeded, with the backbone's incremental state.

A backbone whose ``spec.incremental`` is set (recurrent stacks, and Transformer and GPT-2
through their key/value cache) is fed only the new token at each step, a head that replaces
the distribution too when it is ``incremental`` (DM's mixture keeps its past positions);
otherwise the whole sequence is run again at every step. Both give the same tokens
(``tests/test_generation.py``).

A head that keeps histories with ``sampling == "released"`` (``KeepsHistories``: DM's
released DM-LSTM sampler) also gets that sampler's histories: a prompt enters the mixture's
history by its last position only, and ``generate_stream`` samples unconditional sentences
one after another in each row, the backbone's state carried across them and the mixture's
history emptied at each ``<eos>``.

``sample`` is what ``synlm generate`` runs: words in, words out, for a list of ``Prompt``
(story endings, contexts, or none), batched by context length.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from synlm.capabilities import KeepsHistories
from synlm.data.files import read_lines
from synlm.data.generation_corpora import Story
from synlm.data.normalization import normalizer
from synlm.data.subwords import SubwordVocab
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.lm import SyntaxLM
from synlm.outputs import StepState


def filter_log_probs(log_probs: Tensor, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> Tensor:
    """The next-token distribution to sample from, as log-probabilities (..., V): the input
    log-probabilities divided by ``temperature`` and renormalised, then restricted to the
    ``top_k`` most likely tokens and to the smallest set of most likely tokens whose mass
    reaches ``top_p`` (the nucleus), renormalised; removed tokens get −inf."""
    if temperature <= 0:
        raise InputError(f"temperature must be positive, got {temperature}")
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
    if released_sampler(model) and not incremental:
        raise InputError("the released DM-LSTM sampler keeps its own histories: sample with "
                         "the cache (use_cache=True)")
    log_probs, state = prompt_step(model, prompts)
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


def released_sampler(model: SyntaxLM) -> bool:
    """Whether the head that replaces the distribution samples as the released DM-LSTM
    (``DependencyMixtureHead(sampling="released")``)."""
    return any(isinstance(h, KeepsHistories) and h.sampling == "released"
               for h in model.heads if h.replaces_distribution)


def prompt_step(model: SyntaxLM, prompts: Tensor) -> tuple[Tensor, StepState]:
    """``model.step(prompts)``; for the released sampler the prompt reaches the mixture's
    history by its last position only (DPLM-LSTM/generate.py 214-216): the backbone reads
    the whole prompt, the head starts afresh at its last token."""
    if not released_sampler(model) or prompts.size(1) == 1:
        return model.step(prompts)
    _, state = model.step(prompts[:, :-1])
    return model.step(prompts[:, -1:], StepState(state.backbone, {}))


@torch.no_grad()
def generate_stream(model: SyntaxLM, count: int, max_new_tokens: int,
                    temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None, generator: torch.Generator | None = None,
                    rows: int = 64) -> list[list[int]]:
    """``count`` unconditional sentences (token ids, ``<eos>`` left out) as the released
    DM-LSTM sampler makes them (DPLM-LSTM/generate.py 128-175): each of ``rows`` streams
    starts from ``[<eos>]`` and a fresh state and samples on; at ``<eos>`` its sentence ends,
    the mixture's history is emptied (``KeepsHistories.reset_rows``) and the backbone's state
    goes on into the next sentence. A sentence that reaches ``max_new_tokens`` is cut there
    and ends as if ``<eos>`` had been sampled (the released loop has no cap). Sentences are
    returned in the order they end (row order within a step)."""
    eos = model.vocab.eos_id if model.vocab is not None else 0
    device = next(model.parameters()).device
    token = torch.full((min(rows, count), 1), eos, dtype=torch.long, device=device)
    log_probs, state = model.step(token)
    current: list[list[int]] = [[] for _ in range(token.size(0))]
    done: list[list[int]] = []
    while len(done) < count:
        probs = filter_log_probs(log_probs[:, -1], temperature, top_k, top_p).exp()
        token = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        ended = token[:, 0] == eos
        for b, t in enumerate(token[:, 0].tolist()):
            if t != eos:
                current[b].append(t)
            if t == eos or len(current[b]) >= max_new_tokens:
                ended[b] = True
                done.append(current[b])
                current[b] = []
        token = token.masked_fill(ended[:, None], eos)
        heads = {h.name: h.reset_rows(state.heads[h.name], ended) for h in model.heads
                 if h.name in state.heads and isinstance(h, KeepsHistories)}
        log_probs, state = model.step(token, StepState(state.backbone, {**state.heads, **heads}))
    return done[:count]


@dataclass(frozen=True)
class Prompt:
    """One generation request: the context words (None: unconditional) and the reference
    continuation to score against, if any."""

    context: list[str] | None = None
    reference: list[str] | None = None


def stories_prompts(path: Path) -> list[Prompt]:
    """ROCStories story-ending prompts: sentences 1-4 as context, sentence 5 as reference."""
    return [Prompt(story.context, story.ending) for story in Story.read(path)]


def lines_prompts(contexts: Path, references: Path | None) -> list[Prompt]:
    """One context per line, with the reference on the same line of ``references``."""
    lines = [line.split() for line in read_lines(contexts)]
    refs = [line.split() for line in read_lines(references)] if references else None
    if refs is not None and len(refs) != len(lines):
        raise InputError(f"{references}: {len(refs)} lines, {contexts} has {len(lines)}")
    return [Prompt(words, refs[i] if refs else None) for i, words in enumerate(lines)]


def encode(vocab: Vocab, words: list[str], normalization: str) -> list[int]:
    """``[<eos>]`` plus the ids of ``words`` (normalised as the training corpus was; split
    into subwords for a subword vocabulary)."""
    if isinstance(vocab, SubwordVocab):
        return [vocab.eos_id, *vocab.encode(vocab.split([words])[0][0])]
    norm = normalizer(normalization)
    return [vocab.eos_id, *vocab.encode([norm(w) for w in words])]


def decode(vocab: Vocab, ids: Sequence[int]) -> list[str]:
    """The words of a sample, up to its first ``<eos>``."""
    ids = list(ids)
    if vocab.eos_id in ids:
        ids = ids[:ids.index(vocab.eos_id)]
    if isinstance(vocab, SubwordVocab):
        return vocab.text(ids).split()
    return vocab.decode(ids)


def sample(model: SyntaxLM, prompts: Sequence[Prompt], max_new_tokens: int = 100,
           temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           seed: int = 0, batch_size: int = 64) -> list[list[str]]:
    """One sample (words) per prompt, batched by context length, seeded; unconditional
    prompts of a model with the released DM-LSTM sampler come from ``generate_stream``
    (sentences one after another in each of ``batch_size`` streams)."""
    if model.vocab is None:
        raise InputError("the checkpoint stores no vocabulary; train it with synlm fit")
    device = next(model.parameters()).device
    if released_sampler(model) and all(p.context is None for p in prompts):
        generator = torch.Generator(device=device).manual_seed(seed)
        sentences = generate_stream(model, len(prompts), max_new_tokens, temperature, top_k,
                                    top_p, generator, batch_size)
        return [decode(model.vocab, ids) for ids in sentences]
    rows = [encode(model.vocab, p.context or [], model.normalization) for p in prompts]
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_length[len(row)].append(i)
    generator = torch.Generator(device=device).manual_seed(seed)
    out: list[list[str]] = [[] for _ in rows]
    for length in sorted(by_length):
        members = by_length[length]
        for start in range(0, len(members), batch_size):
            chunk = members[start:start + batch_size]
            tokens = torch.tensor([rows[i] for i in chunk], device=device)  # (B, P)
            new = generate(model, tokens, max_new_tokens, temperature, top_k, top_p,
                           generator=generator)  # (B, N)
            for i, ids in zip(chunk, new.tolist()):
                out[i] = decode(model.vocab, ids)
    return out


def records(prompts: Sequence[Prompt], samples: Sequence[list[str]]) -> list[dict[str, str]]:
    """JSONL records: ``sample``, and ``context``/``reference`` where present."""
    out = []
    for prompt, words in zip(prompts, samples):
        record = {"sample": " ".join(words)}
        if prompt.context is not None:
            record["context"] = " ".join(prompt.context)
        if prompt.reference is not None:
            record["reference"] = " ".join(prompt.reference)
        out.append(record)
    return out
