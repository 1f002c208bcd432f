"""Transformer-XL memory (Dai et al. 2019 §3.2; the released Transformer Grammars' ``Core``):
how teacher forcing reads the chunks of a policy that cuts a batch into chunks
(``ChunkedMasks``, Transformer Grammars' ``tg_chunks``).

Chunk k's tokens go through the layers one after another; layer i of chunk k reads, besides
the chunk's own tokens, its inputs at the tokens the memory holds (``MemoryChunk.memory``),
and gathers from them and from the chunk's own inputs what chunk k + 1's memory holds
(``MemoryChunk.update``), with no gradient through it (the released ``stop_gradient``). A
key in neither the chunk nor the memory is lost.

Documents streamed through a batch's rows (``data.document_order: streamed``; the released
trainer's) read one chunk of a row's document a batch with these same steps
(``synlm.transition.stream``): ``read_chunk`` on that chunk alone, from the memory the row's
previous batch left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.transition.attention.base import ChunkedMasks, MemoryChunk

Inputs = Callable[[MemoryChunk, Tensor], Mapping[str, Any]]


def read_chunk(memory: list[Tensor], h: Tensor, chunk: MemoryChunk,
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
    layers read of a chunk (its mask, relative positions), once a chunk."""
    B, _, C = x.shape
    slots = masks.chunks[0].memory.size(1)  # M (a row has at least its start token)
    memory = [x.new_zeros(B, slots, C) for _ in layers]
    out = []
    for chunk in masks.chunks:
        h = x[:, chunk.start:chunk.start + chunk.allowed.size(2)]  # (B, l, C)
        out.append(read_chunk(memory, h, chunk, layers, inputs(chunk, h)))
    return torch.cat(out, 1)


def padded(chunk: MemoryChunk, length: int) -> MemoryChunk:
    """``chunk``'s queries padded to ``length`` (L): an added query attends itself only."""
    l, slots = chunk.allowed.size(2), chunk.memory.size(1)
    extra = length - l
    allowed = F.pad(chunk.allowed, (0, extra, 0, extra))  # (B, G, L, M + L)
    own = torch.arange(l, length, device=allowed.device)
    allowed[:, :, own, slots + own] = True
    relative = None if chunk.relative is None else F.pad(chunk.relative, (0, extra, 0, extra))
    return replace(chunk, allowed=allowed, relative=relative)
