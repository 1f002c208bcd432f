"""Transformer-XL memory (Dai et al. 2019 §3.2; the released Transformer Grammars' ``Core``):
how teacher forcing reads the chunks of a policy that cuts a batch into chunks
(``ChunkedMasks``, Transformer Grammars' ``tg_chunks``).

Chunk k's tokens go through the layers one after another; layer i of chunk k reads, besides
the chunk's own tokens, its inputs at the tokens the memory holds (``MemoryChunk.memory``),
and gathers from them and from the chunk's own inputs what chunk k + 1's memory holds
(``MemoryChunk.update``), with no gradient through it (the released ``stop_gradient``). A
key in neither the chunk nor the memory is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from synlm.transition.attention.base import ChunkedMasks, MemoryChunk


def read_in_chunks(x: Tensor, masks: ChunkedMasks, layers: Sequence[Callable[..., Tensor]],
                   inputs: Callable[[MemoryChunk, Tensor], Mapping[str, Any]]) -> Tensor:
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
        given = inputs(chunk, h)
        source = chunk.update.clamp(min=0)[..., None].expand(B, -1, C)  # (B, M, C)
        for i, layer in enumerate(layers):
            keys = torch.cat([memory[i], h], 1)  # (B, M + l, C)
            memory[i] = torch.where(chunk.update[..., None] >= 0,
                                    keys.gather(1, source), 0).detach()  # (B, M, C)
            h = layer(h, memory=keys[:, :slots], **given)
        out.append(h)
    return torch.cat(out, 1)
