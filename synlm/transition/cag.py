"""Composition Attention Grammar (Yoshida & Oseki 2022, "Composition, Attention, or Both?"),
generative and batched as its released code (osekilab/CAG, ``models.py``,
``FixedStackCompositionAttentionGrammar``).

A CAG is the top-down RNNG (``synlm.transition.rnng``) with the stack LSTM replaced by a
Transformer over the stack: the same actions, the same composition of a closed constituent
(the bidirectional LSTM of Dyer et al. 2016 §4.1, the released ``LSTMComposition``), the same
action and word softmaxes::

    log p(x, y) = Σ_t log p(a_t | a_<t) + Σ_{t: a_t = SHIFT} log p(x_{ptr(t)} | a_<t)

    s_0..s_k      the stack's items, bottom (an initial item) to top (paper §3, eq. 1-2)
    h_t = GPT2(s_0 + P_0, ..., s_k + P_k)[k]          causal self-attention over the stack
    u_t = ReLU(W_u · drop(h_t) + b_u)
    p(a_t | a_<t) = softmax(A u_t + b_A)   p(x | a_<t) = softmax(E u_t + b_E)  (E tied)

P_i is a learned embedding of stack position i. Each layer is a GPT-2 block (pre-layer-norm
self-attention and a 4·W GELU feed-forward, a final layer norm), as the released code runs
``transformers.GPT2Model`` on the stack. An item's keys and values depend only on the items
below it, so they are computed once, when the item is pushed, and kept in ``RNNGState.lstm``
(here ``[:, k, 0]`` the keys and ``[:, k, 1]`` the values of every layer at stack position
k): a ``REDUCE`` writes the composed constituent at its ``NT``'s position and attends to the
kept keys and values below it, as the released code's cache does. In search they sit in the
stack's shared nodes (``synlm.transition.stack_pool``), gathered down the stack at each step.

The released code feeds the stack items to the Transformer directly, so the item width is
the Transformer's (its ``--w_dim`` = ``--h_dim``, 256): here one ``input_size``. Its
``attention_composition`` flag changes nothing in the released model (the composition is
always the LSTM one). Dropout as released: ``embedding_dropout`` on the word, nonterminal
and initial items; ``dropout`` in the Transformer (after the position embedding, on the
attention weights, after each residual branch), in the composition and before the output
layer. Its action softmax in training runs over every action, in beam search over the legal
ones, as the RNNG's (``search_convention`` ``renormalised_given_length``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm import errors
from synlm.transition.rnng import RNNG, RNNGState
from synlm.transition.stack_pool import NodePool, stack_nodes


class StackBlock(nn.Module):
    """One GPT-2 block read one position at a time: pre-layer-norm attention over the kept
    keys and values of the positions below and the new position itself, then the
    feed-forward (``gelu_new``, the tanh GELU)."""

    def __init__(self, width: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.qkv = nn.Linear(width, 3 * width)
        self.attn_out = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_out = nn.Linear(4 * width, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, below: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        """x (R, W) the new position's input; keys, values (R, S, W) kept per position;
        below (R, S) the positions it attends to besides itself -> the output (R, W) and
        the new position's key and value (R, W) each."""
        R, W = x.shape
        nh = self.num_heads
        q, k, v = self.qkv(self.ln_1(x)).split(W, -1)  # (R, W) each
        q, k_, v_ = q.view(R, nh, -1), k.view(R, nh, -1), v.view(R, nh, -1)
        scale = 1.0 / math.sqrt(q.size(-1))
        K, V = keys.view(R, keys.size(1), nh, -1), values.view(R, keys.size(1), nh, -1)
        scores = torch.einsum("rhd,rshd->rhs", q, K) * scale  # (R, nh, S)
        scores = scores.masked_fill(~below[:, None], float("-inf"))
        own = (q * k_).sum(-1, keepdim=True) * scale  # (R, nh, 1)
        weights = self.dropout(torch.cat([scores, own], -1).softmax(-1))  # (R, nh, S + 1)
        context = torch.einsum("rhs,rshd->rhd", weights[..., :-1], V) + weights[..., -1:] * v_
        x = x + self.dropout(self.attn_out(context.reshape(R, W)))
        h = F.gelu(self.fc(self.ln_2(x)), approximate="tanh")
        return x + self.dropout(self.fc_out(h)), k, v


class StackTransformer(nn.Module):
    """The causal Transformer over the stack (module docstring): learned position embeddings
    for ``positions`` stack positions, ``num_layers`` ``StackBlock``s, a final layer norm."""

    def __init__(self, width: int, num_layers: int, num_heads: int, positions: int,
                 dropout: float) -> None:
        super().__init__()
        self.position_embedding = nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(StackBlock(width, num_heads, dropout)
                                    for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.dropout = nn.Dropout(dropout)

    def forward(self, item: Tensor, position: Tensor, kept: Tensor) -> tuple[Tensor, Tensor]:
        """item (R, W) at stack ``position`` (R,); kept (R, S, 2, L, W) the keys and values
        of positions 0..S-1 (those at ``position`` and above are not read) -> the output at
        ``position`` (R, W) and its keys and values (R, 2, L, W). A position past the
        embedding's last (beyond the released model's stack) takes the last one."""
        last = self.position_embedding.num_embeddings - 1
        x = self.dropout(item + self.position_embedding(position.clamp(max=last)))
        below = torch.arange(kept.size(1), device=item.device) < position[:, None]  # (R, S)
        keys, values = [], []
        for layer, block in enumerate(self.blocks):
            x, k, v = block(x, kept[:, :, 0, layer], kept[:, :, 1, layer], below)
            keys.append(k)
            values.append(v)
        return self.ln_f(x), torch.stack([torch.stack(keys, 1), torch.stack(values, 1)], 1)


class CAG(RNNG):
    """A batched generative Composition Attention Grammar (module docstring).

    Args:
        vocab_size: V, the word vocabulary (the DataModule's).
        n_actions: the action vocabulary (``ActionVocab``: SHIFT, REDUCE, NT(X)...).
        input_size: W, the width of the items and of the stack Transformer (released: 256).
        num_layers: the stack Transformer's layers (3).
        num_heads: its attention heads (4); W must be a multiple.
        max_stack_size: the stack positions it embeds, besides the initial item's (100).
        dropout: in the Transformer, the composition and before the output layer (0.1).
        embedding_dropout: on the word, nonterminal and initial items (0.1).
        legal_softmax: as ``RNNG``'s (the released code trains over every action).
        max_open: most constituents open at once in search.
        max_consecutive: most ``NT`` in a row in search.
    """

    def __init__(self, vocab_size: int, n_actions: int, input_size: int = 256,
                 num_layers: int = 3, num_heads: int = 4, max_stack_size: int = 100,
                 dropout: float = 0.1, embedding_dropout: float = 0.1,
                 legal_softmax: bool = False, max_open: int = 100,
                 max_consecutive: int = 8) -> None:
        super().__init__(vocab_size, n_actions, input_size, input_size, num_layers, dropout,
                         legal_softmax, max_open, max_consecutive)
        errors.at_least("num_heads", num_heads)
        errors.at_least("max_stack_size", max_stack_size)
        errors.probability("embedding_dropout", embedding_dropout)
        if input_size % num_heads:
            raise errors.SettingError("input_size", input_size,
                                      f"a multiple of num_heads ({num_heads})")
        del self.stack_lstm  # the stack Transformer reads the stack instead
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.stack_transformer = StackTransformer(input_size, num_layers, num_heads,
                                                  max_stack_size + 1, dropout)

    def read_item(self, state: RNNGState, rows: Tensor, position: Tensor, item: Tensor) -> Tensor:
        """The stack Transformer reads ``item`` (R, W) at stack ``position`` (R,) over the
        keys and values kept below it: that position's keys and values written into
        ``state.lstm``, its output (R, W) returned."""
        span = int(position.clamp(max=state.lstm.size(1) - 2).max()) + 1  # positions read
        slots = torch.arange(span, device=rows.device)
        kept = state.read(state.lstm, (rows[:, None], slots))  # (R, span, 2, L, W)
        out, kv = self.stack_transformer(item, position, kept)
        state.write(state.lstm, (rows, position), kv)
        return out

    def read_node(self, pool: NodePool, below: Tensor, position: Tensor, item: Tensor
                  ) -> tuple[Tensor, Tensor]:
        """``read_item`` on pooled stacks (``synlm.transition.stack_pool``): the keys and
        values of the nodes under ``below`` (R,) (positions 0 up to ``position`` (R,),
        the new item's), gathered by following the stack down, then the new position's
        output (R, W) and its keys and values (R, 2, L, W)."""
        span = int(position.max()) + 1  # positions read
        kept = pool.values[stack_nodes(pool, below, torch.zeros_like(position), span)]
        return self.stack_transformer(item, position, kept)
