"""Documents streamed through a batch's rows (``data.document_order: streamed``; the released
Transformer Grammars trainer, ``preprocessing.py`` ``get_chunks_from_dataset``): the
teacher-forced pass of an ``ActionTransformer`` whose policy reads in chunks with memory
(``ChunkedMasks``) over one chunk a row and batch, at the cost of one chunk.

Row b of a batch holds its document whole (``StreamedLoader``) and reads chunk k of it
(``ActionBatch.chunk``). What it computes is what ``ActionTransformer.forward`` computes of
the document read in chunks (``synlm.transition.attention.memory.read_in_chunks``), at the
actions chunk k predicts:

- the policy's layout of the document (``policy.masks``: its tokens, each chunk's mask and
  memory moves, the token that predicts each action) is built once, when the row starts the
  document, and kept in ``Stream.documents`` for the row's later batches; a row whose kept
  layout is not its document's (after a resume: the layout is not in a checkpoint) builds it
  again, the same;
- the embeddings and the layers run on chunk k's L tokens alone (``read_chunk``), from the
  memory the row's previous batch left (``Stream.memory``, in a checkpoint; empty at chunk 0,
  a document's start: the released ``beginning_of_seq``), and leave the memory after chunk
  k for the row's next batch;
- the vocabulary's softmax runs at the chunk's tokens that predict an action, for those
  actions alone: log p(a_t | a_<t) of each, log p(x_i | a_<t, SHIFT) of each ``SHIFT``'s
  word (Sartran et al. 2022 §2, as ``ActionTransformer.forward``), 0 elsewhere.

A batch's work is one chunk a row (L tokens against M + L keys), whatever k; a row's layout
is built once a document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.errors import InputError
from synlm.outputs import ActionBatch
from synlm.transition.action_transformer import ActionTransformer, predictors, token_fields
from synlm.transition.attention.base import ChunkedMasks, MemoryChunk
from synlm.transition.attention.memory import padded, read_chunk
from synlm.transition.parser_state import NO_ACTION, SHIFT
from synlm.transition.types import RNNGOutput


@dataclass(frozen=True)
class Layout:
    """One document as a policy that reads in chunks lays it out (module docstring).

    Attributes:
        actions: (A,) long: the document's actions; ``words``: (N,) long: its words.
        tokens: (3, T) long: each token's action (``NO_ACTION`` for the start token), word
            (that of a ``SHIFT``'s token, else 0) and the ``NT`` a ``REDUCE`` closes (0).
        chunks: the policy's chunks (``MemoryChunk``, one row each), in order.
        predictor: (A,) long: the token whose top layer predicts each action.
    """

    actions: Tensor
    words: Tensor
    tokens: Tensor
    chunks: tuple[MemoryChunk, ...]
    predictor: Tensor

    def holds(self, actions: Tensor, words: Tensor) -> bool:
        """Whether this is the layout of the document of ``actions`` and ``words``."""
        return torch.equal(self.actions, actions) and torch.equal(self.words, words)


@dataclass
class Stream:
    """The rows of streamed documents (module docstring) from one batch to the next.

    Attributes:
        memory: per layer (B, M, C): what the rows' memory slots hold after their previous
            batch (None: nothing yet); a checkpoint keeps it.
        documents: per row, the layout of the document it reads (``Layout``), built when it
            starts the document; not in a checkpoint (built again on resume).
    """

    memory: list[Tensor] | None = None
    documents: list[Layout | None] = field(default_factory=list)


def laid_out(model: ActionTransformer, actions: Tensor, words: Tensor) -> Layout:
    """The ``Layout`` of one document: ``actions`` (A,) unpadded, ``words`` (N,)."""
    masks = model.policy.masks(actions[None], model.num_heads)
    if not isinstance(masks, ChunkedMasks):
        raise InputError("data.document_order: streamed reads one chunk of a document a batch, "
                         f"but the {type(model.policy).__name__} reads documents whole; set its "
                         "sequence_length, or data.document_order: chunked")
    fields = token_fields(actions[None], words[None], masks.source)  # (1, T) each
    return Layout(actions, words, torch.cat(fields), masks.chunks,
                  predictors(masks, actions.size(0))[0])


def _row_documents(model: ActionTransformer, batch: ActionBatch, stream: Stream
                   ) -> list[Layout]:
    """Each row's ``Layout``, kept in ``stream``: built where a row starts its document or
    holds another's."""
    B = batch.actions.size(0)
    if len(stream.documents) != B:
        stream.documents = [None] * B
    for b in range(B):
        actions = batch.actions[b][batch.actions[b] != NO_ACTION]
        words = batch.words[b, :int(batch.word_lengths[b])]
        kept = stream.documents[b]
        if int(batch.chunk[b]) == 0 or kept is None or not kept.holds(actions, words):
            stream.documents[b] = laid_out(model, actions, words)
    return stream.documents


def _window(tokens: Tensor, start: int, length: int) -> Tensor:
    """``tokens`` (3, T) at positions ``start`` to ``start + length``, padding tokens past T."""
    window = tokens[:, start:start + length]
    return F.pad(window, (0, length - window.size(1)), value=NO_ACTION)


def read_streamed(model: ActionTransformer, batch: ActionBatch, stream: Stream
                  ) -> tuple[RNNGOutput, Tensor, Tensor]:
    """Row b's chunk ``batch.chunk[b]`` of its document (module docstring), from and into
    ``stream``: the log-probabilities of the actions (B, A) and words (B, N) it predicts (0
    elsewhere), and which those are, (B, A) and (B, N) bool."""
    actions, words = batch.actions, batch.words
    B, A = actions.shape
    device = actions.device
    documents = _row_documents(model, batch, stream)
    chunk = batch.chunk.tolist()
    picked = [d.chunks[k] for d, k in zip(documents, chunk, strict=True)]
    L = max(c.allowed.size(2) for c in picked)  # the chunk length (a short document's less)
    picked = [padded(c, L) for c in picked]
    start = torch.tensor([c.start for c in picked], device=device)  # (B,)
    positions = start[:, None] + torch.arange(L, device=device)  # (B, L)
    tokens = torch.stack([_window(d.tokens, c.start, L)
                          for d, c in zip(documents, picked, strict=True)])  # (B, 3, L)
    tokens[:, 1:].clamp_(min=0)  # a padding token's word and bracket: 0
    chunks = MemoryChunk(  # row b's fields of its chunk
        start=0, allowed=torch.cat([c.allowed for c in picked]),  # (B, G, L, M + L)
        relative=None if picked[0].relative is None else
        torch.cat([c.relative for c in picked]),  # (B, L, M + L)
        memory=torch.cat([c.memory for c in picked]), update=torch.cat([c.update for c in picked]))
    x = model.embed(tokens[:, 0], tokens[:, 1],
                    tokens[:, 2] if model.closing_embedding is not None else None,
                    positions)  # (B, L, C)
    starts = torch.tensor(chunk, device=device) == 0  # a document's start: its memory empty
    slots = chunks.memory.size(1)
    carried = stream.memory or [x.new_zeros(B, slots, x.size(2)) for _ in model.layers]
    memory = [torch.where(starts[:, None, None], 0, m.to(x)) for m in carried]
    h = read_chunk(memory, x, chunks, model.layers,
                   model.layer_inputs(chunks.allowed, chunks.relative, x))  # (B, L, C)
    stream.memory = memory
    # the actions the chunk's tokens predict, and the vocabulary at those tokens alone
    predictor = torch.stack([F.pad(d.predictor, (0, A - d.predictor.size(0)), value=-1)
                             for d in documents])  # (B, A)
    local = predictor - start[:, None]  # (B, A) its place in the chunk
    counted = (local >= 0) & (local < L)  # (B, A) (an action past a row: predictor -1)
    row, col = counted.nonzero(as_tuple=True)  # (P,) each
    action_lps, word_lps = model.scored(h[row, local[row, col]], words, actions, row, col)
    shifts = counted & (actions == SHIFT)  # (B, A) the SHIFTs counted
    word_index = (actions == SHIFT).long().cumsum(1) - 1  # (B, A) a SHIFT's word
    at_word = (shifts.nonzero(as_tuple=True)[0], word_index[shifts])  # (S,) each
    read_words = torch.zeros_like(words, dtype=torch.bool).index_put(
        at_word, torch.ones_like(at_word[0], dtype=torch.bool))
    return (RNNGOutput(action_lps, word_lps, action_lps.sum(1) + word_lps.sum(1)), counted,
            read_words)
