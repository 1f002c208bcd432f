"""Pushdown Layers (Murty, Sharma, Andreas & Manning 2023): a Transformer LM whose
self-attention reads a stack tape, and an attachment head that builds the tree as it reads.

A sentence is ``<s> w_1 ... w_N <eos>`` (T = N + 2 tokens); query t predicts token t + 1
(after ``<eos>``, the end symbol ``</s>``) and, jointly, token t + 1's attachment
(``synlm.transition.pushdown_tree``). Word ids: the V words of the vocabulary (``<eos>``
among them), then ``</s>`` = V and ``<s>`` = V + 1, as released.

**Pushdown attention** (the paper's Figure 1b: depth embeddings added to the keys, here
q · (k + d) written out): each layer's head h scores key j at query i as

    s_h(i, j) = (q_i · k_j + q_i · P_h(j - i) + q_i · d(tape[i, j])) / sqrt(D / heads)

P a projection of the sinusoid of the relative position (key minus query; no absolute
positions), d an embedding of token j's depth in the tree built over tokens 0..i (the
stack tape), the same for every head, causal. Post-norm residual blocks
(``x = LN(x + attn)``, ``x = LN(x + FF(x))``), input ``sqrt(D) · E[w]``, an output tied to E
with its own bias.

**Attachment head** (Figure 1c, released ``StackPredictor``): from the top layer's h_i and the
embedding e of the next token (unscaled), q = MLP_q([W_q h_i; e]); key j ≤ i is
MLP_c([W_k h_j; c(tape[i, j])]) (``compose_keys_and_stack_info``), the next token's own
slot (j = i + 1: no reduce) MLP_k([q; e]); the logit adds q · P'(j - i - 1). The
distribution is a softmax over j = 0..i + 1.

**Loss** (released ``TransformerLMInterface``): the mean token cross-entropy of the LM
(every target up to ``</s>``) plus the mean cross-entropy of the gold attachments of
tokens 1..T - 1 (``<eos>``'s included, the one after it not).

The released code's sizes: its ``n_heads`` reaches the layers as the feed-forward
multiplier (feed-forward width ``n_heads · D``) and as the attachment head's depth width
``D / n_heads``, while every layer keeps the ``Transformer`` default of 8 attention heads;
``attention_heads`` and ``ff_multiplier`` here name the two apart (defaults as released).
The output dropout of the released model acts on nothing (its logits are taken before it)
and is left out. Only the depth tape (``with_depth_info``, the BLLIP setting) is ported, with
keys and depths composed by an MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.errors import SettingError, at_least, probability
from synlm.modules.recorded import RecordsInit


def sinusoid(offsets: Tensor, size: int, dtype: torch.dtype) -> Tensor:
    """(R, size) sinusoids of integer ``offsets`` (R,), computed in float32 as released
    (``sinusoidal_pos_embedding``), then cast."""
    position = offsets.to(torch.float32)[:, None]
    div = torch.exp(torch.arange(0, size, 2, dtype=torch.float32, device=offsets.device)
                    * (-math.log(10000.0) / size))
    table = torch.zeros(len(offsets), size, dtype=dtype, device=offsets.device)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div)
    return table


def relative(table: Tensor, queries: Tensor, keys: int, shift: int = 0) -> Tensor:
    """Scores of each query with its relative-position row: table (B, ..., Tq, 2S - 1) over
    offsets -(S - 1)..S - 1 -> (B, ..., Tq, keys) at offset key - query - shift."""
    offset = torch.arange(keys, device=table.device)[None, :] - queries[:, None] - shift
    size = (table.size(-1) + 1) // 2
    index = (offset + size - 1).expand(*table.shape[:-1], keys)
    return table.gather(-1, index)


class PushdownLayer(nn.Module):
    """One post-norm Transformer block with Pushdown attention (module docstring)."""

    def __init__(self, size: int, heads: int, ff_size: int, depths: int, dropout: float):
        super().__init__()
        self.heads, self.head_size = heads, size // heads
        self.query = nn.Linear(size, size, bias=False)
        self.key_value = nn.Linear(size, 2 * size, bias=False)  # per head: key, value
        self.position = nn.Linear(size, size, bias=False)
        self.depth = nn.Embedding(depths, self.head_size)
        self.merge = nn.Linear(size, size, bias=False)
        self.ff_in = nn.Linear(size, ff_size)
        self.ff_out = nn.Linear(ff_size, size)
        self.norm_attention = nn.LayerNorm(size)
        self.norm_ff = nn.LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, queries: Tensor, tape: Tensor,
                key_mask: Tensor) -> Tensor:
        """x (B, Tq, D) at absolute positions ``queries`` (Tq,) over ``memory`` (B, S, D)
        (this layer's inputs so far, x among them); tape (B, Tq, S) depths; key_mask
        (B, Tq, S) True where a query may attend."""
        B, Tq, D = x.shape
        S = memory.size(1)
        h, d = self.heads, self.head_size
        q = self.query(x).view(B, Tq, h, d).transpose(1, 2)  # (B, h, Tq, d)
        kv = self.key_value(memory).view(B, S, h, 2, d)
        k, v = kv[..., 0, :].transpose(1, 2), kv[..., 1, :].transpose(1, 2)  # (B, h, S, d)
        offsets = torch.arange(-(S - 1), S, device=x.device)
        pos = self.position(sinusoid(offsets, D, x.dtype)).view(-1, h, d)  # (2S-1, h, d)
        pos_scores = relative(torch.einsum("bhid,rhd->bhir", q, pos), queries, S)
        depth = self.depth(tape)  # (B, Tq, S, d)
        depth_scores = torch.einsum("bhid,bijd->bhij", q, depth)
        scores = (q @ k.transpose(-1, -2) + pos_scores + depth_scores) / math.sqrt(d)
        scores = scores.masked_fill(~key_mask[:, None], float("-inf"))
        attention = self.dropout(scores.softmax(-1))  # (B, h, Tq, S)
        read = (attention @ v).transpose(1, 2).reshape(B, Tq, D)
        x = self.norm_attention(x + self.dropout(self.merge(read)))
        ff = self.ff_out(self.dropout(F.relu(self.ff_in(x))))
        return self.norm_ff(x + self.dropout(ff))


class AttachmentHead(nn.Module):
    """Scores each token's attachment to the stack items before it (module docstring)."""

    def __init__(self, size: int, depth_size: int, depths: int, dropout: float):
        super().__init__()
        wide = 2 * size
        self.query = nn.Linear(size, wide, bias=False)
        self.key = nn.Linear(size, wide, bias=False)
        self.position = nn.Linear(size, wide, bias=False)
        self.query_mlp = nn.Sequential(nn.Linear(3 * size, wide), nn.ReLU(), nn.Dropout(dropout),
                                       nn.Linear(wide, wide))
        self.self_mlp = nn.Sequential(nn.Linear(3 * size, wide), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(wide, wide))
        self.depth = nn.Embedding(depths, depth_size)
        composed = wide + depth_size
        self.compose = nn.Sequential(nn.Linear(composed, composed), nn.ReLU(),
                                     nn.Dropout(dropout), nn.Linear(composed, wide))

    def forward(self, top: Tensor, memory: Tensor, queries: Tensor, next_embedding: Tensor,
                tape: Tensor) -> Tensor:
        """Logits (B, Tq, S + 1) of attaching the next token to tokens 0..S - 1 or itself
        (column ``queries[i] + 1``; columns past it are not masked here).

        top (B, Tq, D): the top layer at the queries; memory (B, S, D): the top layer at
        every token so far; next_embedding (B, Tq, D); tape (B, Tq, S)."""
        S = memory.size(1)
        q = self.query_mlp(torch.cat([self.query(top), next_embedding], -1))  # (B, Tq, 2D)
        own = self.self_mlp(torch.cat([q, next_embedding], -1))  # (B, Tq, 2D)
        key = self.key(memory)[:, None].expand(-1, q.size(1), -1, -1)  # (B, Tq, S, 2D)
        keys = self.compose(torch.cat([key, self.depth(tape)], -1))  # (B, Tq, S, 2D)
        content = torch.einsum("bie,bije->bij", q, keys)
        content = F.pad(content, (0, 1))  # (B, Tq, S + 1)
        column = torch.arange(S + 1, device=q.device)
        own_column = column[None, :] == (queries[:, None] + 1)  # (Tq, S + 1)
        content = torch.where(own_column, (q * own).sum(-1, keepdim=True), content)
        offsets = torch.arange(-S, S + 1, device=q.device)
        pos = self.position(sinusoid(offsets, top.size(-1), q.dtype))  # (2S + 1, 2D)
        return content + relative(q @ pos.T, queries, S + 1, shift=1)


@dataclass
class PushdownOutput:
    """Teacher-forced scores of a batch (natural log).

    Attributes:
        word_log_probs: (B, T) log p(token t + 1 | tokens ≤ t, tree), 0 at padding.
        attachment_log_probs: (B, T, T + 1) log p(a_{t+1} = j | ...), -inf at j > t + 1
            and on padding rows.
        gold_attachment_log_probs: (B, T) the gold attachment's, 0 where none is scored.
        loss: the released loss (LM mean plus attachment mean).
    """

    word_log_probs: Tensor
    attachment_log_probs: Tensor
    gold_attachment_log_probs: Tensor
    loss: Tensor


@dataclass
class StepCache:
    """Search state of R rows after S tokens: each layer's inputs and the top layer's
    outputs, (R, S, D) each."""

    inputs: list[Tensor]
    top: Tensor

    def select(self, rows: Tensor) -> StepCache:
        return StepCache([x[rows] for x in self.inputs], self.top[rows])


class PushdownTransformer(RecordsInit, nn.Module):
    """A Pushdown-Layers Transformer LM with its attachment head (module docstring).

    Args:
        vocab_size: V words (the end symbol and start token are V and V + 1).
        size: D, the model width (released ``vec_dim``; its BLLIP model 1024).
        num_layers: Pushdown layers (16 on BLLIP-LG).
        attention_heads: each layer's heads (8: the released layers' default).
        ff_multiplier: feed-forward width over D (released ``n_heads``: 8 on BLLIP-LG).
        head_depth_divisor: the attachment head's depth embedding is D / this wide
            (released ``n_heads``).
        max_depth: depths the tapes may hold (released ``max_depth``, 50).
        dropout: attention, residual, feed-forward and head-MLP dropout (0.1).
        embedding_dropout: on the scaled input embeddings (0.1 on BLLIP-LG; 0: none).
    """

    def __init__(self, vocab_size: int, size: int = 1024, num_layers: int = 16,
                 attention_heads: int = 8, ff_multiplier: int = 8, head_depth_divisor: int = 8,
                 max_depth: int = 50, dropout: float = 0.1,
                 embedding_dropout: float = 0.1) -> None:
        super().__init__()
        at_least("size", size, 1)
        at_least("num_layers", num_layers, 1)
        for name, divisor in (("attention_heads", attention_heads),
                              ("head_depth_divisor", head_depth_divisor)):
            at_least(name, divisor, 1)
            if size % divisor:
                raise SettingError(name, divisor, f"a divisor of size ({size})")
        probability("dropout", dropout)
        probability("embedding_dropout", embedding_dropout)
        self.vocab_size, self.size, self.max_depth = vocab_size, size, max_depth
        self.end_id, self.start_id = vocab_size, vocab_size + 1
        self.embedding = nn.Embedding(vocab_size + 2, size)
        self.output_bias = nn.Parameter(torch.zeros(vocab_size + 2))
        self.layers = nn.ModuleList(
            PushdownLayer(size, attention_heads, ff_multiplier * size, max_depth, dropout)
            for _ in range(num_layers))
        self.head = AttachmentHead(size, size // head_depth_divisor, max_depth, dropout)
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        nn.init.xavier_uniform_(self.embedding.weight)  # released embedding_init="xavier"
        for layer in self.layers:
            nn.init.xavier_uniform_(layer.ff_in.weight, gain=nn.init.calculate_gain("relu"))
            nn.init.xavier_uniform_(layer.ff_out.weight)

    def _embed(self, tokens: Tensor) -> Tensor:
        return self.embedding_dropout(self.embedding(tokens) * math.sqrt(self.size))

    def _logits(self, hidden: Tensor) -> Tensor:
        return F.linear(hidden, self.embedding.weight, self.output_bias)

    def next_tokens(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """(B, T): each query's target, tokens shifted left and ``</s>`` after the last."""
        shifted = F.pad(tokens[:, 1:], (0, 1))
        ends = torch.arange(tokens.size(1), device=tokens.device)[None] == lengths[:, None] - 1
        return shifted.masked_fill(ends, self.end_id)

    def forward(self, tokens: Tensor, lengths: Tensor, tape: Tensor,
                attachments: Tensor | None = None) -> PushdownOutput:
        """Teacher forcing: tokens (B, T) ``<s> ... <eos>`` padded, lengths (B,), tape
        (B, T, T) gold depths, attachments (B, T) gold attachments of tokens 0..T - 1
        (``gold_attachments``; None: no attachment loss)."""
        T = tokens.size(1)
        positions = torch.arange(T, device=tokens.device)
        valid = positions[None] < lengths[:, None]  # (B, T)
        causal = positions[None, :] <= positions[:, None]  # (T, T)
        key_mask = causal[None] & valid[:, None, :]
        x = self._embed(tokens)
        for layer in self.layers:
            x = layer(x, x, positions, tape, key_mask)
        targets = self.next_tokens(tokens, lengths)
        log_probs = self._logits(x).log_softmax(-1)
        word = log_probs.gather(-1, targets[..., None])[..., 0].masked_fill(~valid, 0.0)
        logits = self.head(x, x, positions, self.embedding(targets), tape)  # (B, T, T + 1)
        allowed = torch.arange(T + 1, device=tokens.device)[None, :] <= positions[:, None] + 1
        scored = positions[None] < lengths[:, None] - 1  # (B, T): tokens 1..T-1 attach
        allowed = allowed[None] & scored[..., None]
        # a finite floor, so that a row without attachment (padding) has no NaN gradient
        attach = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min).log_softmax(-1)
        attach = attach.masked_fill(~allowed, float("-inf"))
        loss = -word.sum() / valid.sum()
        gold = torch.zeros_like(word)
        if attachments is not None:
            labels = F.pad(attachments[:, 1:], (0, 1)).clamp(min=0)
            gold = attach.gather(-1, labels[..., None])[..., 0].masked_fill(~scored, 0.0)
            loss = loss - gold.sum() / scored.sum()
        return PushdownOutput(word, attach, gold, loss)

    def start(self, rows: int) -> StepCache:
        """An empty cache of ``rows`` rows."""
        weight = self.embedding.weight
        empty = weight.new_zeros(rows, 0, self.size)
        return StepCache([empty] * len(self.layers), empty)

    def step(self, cache: StepCache, token: Tensor, next_token: Tensor,
             depths: Tensor) -> tuple[Tensor, Tensor, StepCache]:
        """Reads one more token per row: token (R,), next_token (R,) the token whose
        probability and attachment are scored, depths (R, S + 1) each token's depth now.
        -> word log-probabilities (R,), attachment log-probabilities (R, S + 2) over
        tokens 0..S + 1 (every column, renormalised over none), the cache after."""
        S = cache.top.size(1)
        query = torch.tensor([S], device=token.device)
        x = self._embed(token[:, None])  # (R, 1, D)
        tape = depths[:, None]  # (R, 1, S + 1)
        mask = torch.ones_like(tape, dtype=torch.bool)
        inputs = []
        for layer, before in zip(self.layers, cache.inputs):
            memory = torch.cat([before, x], 1)
            inputs.append(memory)
            x = layer(x, memory, query, tape, mask)
        top = torch.cat([cache.top, x], 1)
        word = self._logits(x[:, 0]).log_softmax(-1).gather(-1, next_token[:, None])[:, 0]
        logits = self.head(x, top, query, self.embedding(next_token)[:, None], tape)
        return word, logits[:, 0].log_softmax(-1), StepCache(inputs, top)
