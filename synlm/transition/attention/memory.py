"""Transformer-XL memory (Dai et al. 2019 §3.2; the released Transformer Grammars' ``Core``):
how teacher forcing reads the chunks of a policy that cuts a batch into chunks
(``ChunkedMasks``, Transformer Grammars' ``tg_chunks``).

Chunk k's tokens go through the layers one after another; layer i of chunk k reads, besides
the chunk's own tokens, its inputs at the tokens the memory holds (``MemoryChunk.memory``),
and gathers from them and from the chunk's own inputs what chunk k + 1's memory holds
(``MemoryChunk.update``), with no gradient through it (the released ``stop_gradient``). A
key in neither the chunk nor the memory is lost.

Documents streamed through a batch's rows (``data.document_order: streamed``; the released
trainer's) read one chunk a row and batch: inside ``streaming(stream)``, ``read_in_chunks``
reads only chunk ``stream.chunk[b]`` of row b's document, from the memory the row's previous
batch left (``stream.memory``; empty where the chunk is 0, a document's start: the released
``beginning_of_seq``), and leaves the memory after it for the row's next batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.transition.attention.base import ChunkedMasks, MemoryChunk

Inputs = Callable[[MemoryChunk, Tensor], Mapping[str, Any]]


@dataclass
class Stream:
    """The rows of streamed documents (module docstring) from one batch to the next.

    Attributes:
        chunk: (B,) long: the chunk of its document each row reads in this batch.
        memory: per layer (B, M, C): what the rows' memory slots hold after their previous
            batch (None: nothing yet).
        read: (B, T) bool, after a batch: the tokens of the rows' documents it read.
        masks: after a batch: the masks of its documents (whole), as the policy gave them.
    """

    chunk: Tensor | None = None
    memory: list[Tensor] | None = None
    read: Tensor | None = None
    masks: ChunkedMasks | None = None


_STREAM: ContextVar[Stream | None] = ContextVar("stream", default=None)


@contextmanager
def streaming(stream: Stream) -> Iterator[Stream]:
    """``read_in_chunks`` reads one chunk a row, with ``stream``'s memory, inside."""
    token = _STREAM.set(stream)
    try:
        yield stream
    finally:
        _STREAM.reset(token)


def _read_chunk(memory: list[Tensor], h: Tensor, chunk: MemoryChunk,
                layers: Sequence[Callable[..., Tensor]], given: Mapping[str, Any]) -> Tensor:
    """One chunk's l tokens ``h`` (B, l, C) through ``layers`` over ``memory`` (per layer
    (B, M, C), replaced in place by the next chunk's, detached): the top layer (B, l, C)."""
    B, slots, C = memory[0].shape
    source = chunk.update.clamp(min=0)[..., None].expand(B, -1, C)  # (B, M, C)
    for i, layer in enumerate(layers):
        keys = torch.cat([memory[i], h], 1)  # (B, M + l, C)
        memory[i] = torch.where(chunk.update[..., None] >= 0,
                                keys.gather(1, source), 0).detach()  # (B, M, C)
        h = layer(h, memory=keys[:, :slots], **given)
    return h


def read_in_chunks(x: Tensor, masks: ChunkedMasks, layers: Sequence[Callable[..., Tensor]],
                   inputs: Inputs) -> Tensor:
    """The top layer (B, T, C) of inputs ``x`` (B, T, C) read a chunk at a time (module
    docstring): each of ``layers`` is called as ``layer(h, memory=m, **inputs(chunk, h))``
    with the chunk's l tokens ``h`` (B, l, C) and its inputs at the M memory slots ``m``
    (B, M, C), keys and values over ``[m | h]``; ``inputs`` gives the rest of what the
    layers read of a chunk (its mask, relative positions), once a chunk. Inside
    ``streaming``: one chunk a row (``_read_streamed``)."""
    stream = _STREAM.get()
    if stream is not None:
        return _read_streamed(x, masks, layers, inputs, stream)
    B, _, C = x.shape
    slots = masks.chunks[0].memory.size(1)  # M (a row has at least its start token)
    memory = [x.new_zeros(B, slots, C) for _ in layers]
    out = []
    for chunk in masks.chunks:
        h = x[:, chunk.start:chunk.start + chunk.allowed.size(2)]  # (B, l, C)
        out.append(_read_chunk(memory, h, chunk, layers, inputs(chunk, h)))
    return torch.cat(out, 1)


def _padded(chunk: MemoryChunk, length: int) -> MemoryChunk:
    """``chunk``'s queries padded to ``length`` (L): an added query attends itself only."""
    l, slots = chunk.allowed.size(2), chunk.memory.size(1)
    extra = length - l
    allowed = F.pad(chunk.allowed, (0, extra, 0, extra))  # (B, G, L, M + L)
    own = torch.arange(l, length, device=allowed.device)
    allowed[:, :, own, slots + own] = True
    relative = None if chunk.relative is None else F.pad(chunk.relative, (0, extra, 0, extra))
    return replace(chunk, allowed=allowed, relative=relative)


def _read_streamed(x: Tensor, masks: ChunkedMasks, layers: Sequence[Callable[..., Tensor]],
                   inputs: Inputs, stream: Stream) -> Tensor:
    """``read_in_chunks`` of row b's chunk ``stream.chunk[b]`` alone, from and into
    ``stream.memory``: the top layer at those tokens, 0 elsewhere (B, T, C);
    ``stream.read`` marks the tokens read."""
    B, T, C = x.shape
    length = masks.chunks[0].allowed.size(2)  # L
    rows, chunk = torch.arange(B, device=x.device), stream.chunk.to(x.device)  # (B,) each
    padded = [_padded(c, length) for c in masks.chunks]
    picked = MemoryChunk(  # row b's fields of its chunk
        start=0, allowed=torch.stack([c.allowed for c in padded])[chunk, rows],
        relative=None if padded[0].relative is None else
        torch.stack([c.relative for c in padded])[chunk, rows],
        memory=torch.stack([c.memory for c in padded])[chunk, rows],
        update=torch.stack([c.update for c in padded])[chunk, rows])
    slots = picked.memory.size(1)
    start = torch.tensor([c.start for c in masks.chunks], device=x.device)[chunk]  # (B,)
    at = start[:, None] + torch.arange(length, device=x.device)  # (B, L) the tokens read
    h = x.gather(1, at.clamp(max=T - 1)[..., None].expand(B, length, C))  # (B, L, C)
    empty = chunk == 0  # a document's start: its memory empty
    carried = [m.to(x) for m in stream.memory or [x.new_zeros(B, slots, C) for _ in layers]]
    memory = [torch.where(empty[:, None, None], 0, m) for m in carried]
    h = _read_chunk(memory, h, picked, layers, inputs(picked, h))
    stream.memory, stream.masks = memory, masks
    out = x.new_zeros(B, T + length, C).scatter(1, at[..., None].expand(B, length, C), h)
    stream.read = torch.zeros(B, T + length, dtype=torch.bool, device=x.device).scatter(
        1, at, True)[:, :T]
    return out[:, :T]
