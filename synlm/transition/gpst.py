"""GPST's generative model (Hu et al. 2024, "Generative Pretrained Structured Transformers:
Unsupervised Syntactic Language Models at Scale", ACL; released as StructuredLM_RTDT's
``FastGenerativeR2D2`` with its beam searcher): a sentence x and an unlabelled binary tree y
generated left to right by SHIFT (generate the next word and push it) and REDUCE (pop two,
push their composition), §3.2::

    log p(x, y) = Σ_t log p(a_t | a_<t) + Σ_i log p(x_i | a_<t(i))

The input at step t is the result of the action before it: ⟨bos⟩ at step 0, the word's
embedding E x after a SHIFT, ``up(c)`` after a REDUCE, with c = Compose(l, r) over the
children's representations (a word's ``down(E x)``, a constituent's c;
``synlm.transition.gpst_compose``). Two GPT-2 stacks read the steps (Fig. 2):

- the action layers (no final norm; learned positions: the number of words shifted before
  the step), causal over every step: p(a_t) = softmax(MLP(h_t)) over {SHIFT, REDUCE};
- the generation layers (final norm, no positions) over the action layers' outputs, where
  step t attends to itself and to the earlier steps whose action was a SHIFT (the released
  training gathers those steps; its search caches only them):
  p(x_i | ...) = softmax(E · FFN(g_t)), the output matrix tied to the embedding.

Action probabilities are normalised over both actions, illegal ones included (a REDUCE with
one stack element, a SHIFT after the last word), as the released search scores them
(``synlm.transition.types.ALL_ACTIONS``). The released training obtains y from its pruned
inside-outside pass (R2D2) and feeds the stacks that pass's span representations (a weighted
sum over each span's splits) where a REDUCE's input is (``hidden``'s ``inputs``;
``synlm.transition.gpst_structured``); without them this module scores a given tree and
searches, with hard compositions, as the released ``R2D2GenFastBeamSearcher`` with target
ids does (``synlm.transition.gpst_search``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.transition.action_layers import ActionLayer
from synlm.transition.gpst_compose import Composition
from synlm.transition.types import RNNGOutput

SHIFT, REDUCE = 0, 1


@dataclass
class Steps:
    """The bookkeeping of R action sequences (integers only, built on the CPU).

    Attributes:
        kinds: (R, T) what each step's input is: 0 ⟨bos⟩ (and padding), 1 a word, 2 a
            constituent; T = longest sequence + 1.
        index: (R, T) the word (flat ``r * N + i``) or constituent (into ``children``) each
            input is.
        positions: (R, T) words shifted before the step.
        shifted: (R, T) True where the step's action is a SHIFT.
        children: (C, 2) each constituent's children as node ids (words ``r * N + i``,
            constituents ``R * N + c``), constituents in order of creation.
        heights: (C,) each constituent's height (a word's is 0).
    """

    kinds: Tensor
    index: Tensor
    positions: Tensor
    shifted: Tensor
    children: Tensor
    heights: Tensor


def plan_steps(actions: list[list[int]], lengths: list[int], n_words: int) -> Steps:
    """``Steps`` of R action sequences over sentences of ``lengths`` (padded to
    ``n_words``); a sequence that REDUCEs fewer than two elements or SHIFTs past its words is
    a ``ValueError``."""
    rows, longest = len(actions), max(map(len, actions)) + 1
    kinds = torch.zeros(rows, longest, dtype=torch.long)
    index = torch.zeros(rows, longest, dtype=torch.long)
    positions = torch.zeros(rows, longest, dtype=torch.long)
    shifted = torch.zeros(rows, longest, dtype=torch.bool)
    children: list[tuple[int, int]] = []
    heights: list[int] = []
    node_height: dict[int, int] = {}
    for r, sequence in enumerate(actions):
        stack: list[int] = []
        words = 0
        for t, action in enumerate(sequence):
            if action == SHIFT:
                if words >= lengths[r]:
                    raise ValueError(f"actions of row {r}: SHIFT at step {t} after the "
                                     f"last of its {lengths[r]} words")
                node = r * n_words + words
                node_height[node] = 0
                kinds[r, t + 1], index[r, t + 1] = 1, node
                words += 1
            elif action == REDUCE:
                if len(stack) < 2:
                    raise ValueError(f"actions of row {r}: REDUCE at step {t} with "
                                     f"{len(stack)} element(s) on the stack")
                right, left = stack.pop(), stack.pop()
                node = rows * n_words + len(children)
                children.append((left, right))
                node_height[node] = 1 + max(node_height[left], node_height[right])
                heights.append(node_height[node])
                kinds[r, t + 1], index[r, t + 1] = 2, len(children) - 1
            else:
                raise ValueError(f"actions of row {r}: {action} at step {t}; expected "
                                 f"{SHIFT} (SHIFT) or {REDUCE} (REDUCE)")
            shifted[r, t] = action == SHIFT
            positions[r, t + 1] = words
            stack.append(node)
    return Steps(kinds, index, positions, shifted,
                 torch.tensor(children, dtype=torch.long).view(-1, 2),
                 torch.tensor(heights, dtype=torch.long))


def causal_shift_mask(shifted: Tensor) -> Tensor:
    """(R, 1, T, T) what the generation layers attend to: step t reads itself and the
    earlier steps whose action was a SHIFT (``shifted`` (R, T))."""
    T = shifted.size(1)
    earlier = torch.ones(T, T, dtype=torch.bool, device=shifted.device).tril(-1)
    allowed = earlier[None] & shifted[:, None, :]  # (R, T, T)
    return (allowed | torch.eye(T, dtype=torch.bool, device=shifted.device))[:, None]


class GPST(nn.Module):
    """GPST's generative part (module docstring). Defaults: GPST-small (GPT-2 small, 768
    wide, 12 heads, 3 action + 9 generation layers; a 256-wide, 4-layer composition).

    Args:
        vocab_size: V.
        size: the GPT-2 stacks' width (``n_embd``).
        n_heads: their heads.
        action_layers, generation_layers: their depths (``action_layer_num``, ``n_layer``
            minus it).
        compose_size, compose_heads, compose_ffn, compose_layers: the composition's width,
            heads, feed-forward width and depth (the R2D2 config's ``hidden_size``,
            ``num_attention_heads``, ``intermediate_size``, ``encoder_num_hidden_layers``).
        max_positions: the action layers' learned positions.
        dropout: every dropout (GPT-2's embedding, attention and residual; the heads'; the
            composition's).
    """

    def __init__(self, vocab_size: int, size: int = 768, n_heads: int = 12,
                 action_layers: int = 3, generation_layers: int = 9, compose_size: int = 256,
                 compose_heads: int = 8, compose_ffn: int = 1024, compose_layers: int = 4,
                 max_positions: int = 2048, dropout: float = 0.1) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, size)
        self.bos = nn.Parameter(torch.zeros(size))
        self.up = nn.Linear(compose_size, size)
        self.down = nn.Linear(size, compose_size)
        self.compose = Composition(compose_size, compose_heads, compose_ffn, compose_layers,
                                   dropout)
        self.positions = nn.Embedding(max_positions, size)
        self.action_layers = nn.ModuleList(
            self._gpt2_layer(size, n_heads, dropout) for _ in range(action_layers))
        self.generation_layers = nn.ModuleList(
            self._gpt2_layer(size, n_heads, dropout) for _ in range(generation_layers))
        self.final_norm = nn.LayerNorm(size)
        self.action_head = nn.Sequential(nn.LayerNorm(size), nn.Linear(size, size), nn.GELU(),
                                         nn.Dropout(dropout), nn.Linear(size, 2))
        self.word_head = nn.Sequential(nn.Linear(size, 4 * size), nn.GELU(),
                                       nn.Dropout(dropout), nn.Linear(4 * size, size))
        self.drop = nn.Dropout(dropout)
        nn.init.normal_(self.embedding.weight, std=0.02)
        nn.init.normal_(self.bos, std=0.02)

    @staticmethod
    def _gpt2_layer(size: int, n_heads: int, dropout: float) -> ActionLayer:
        """A pre-norm GPT-2 block (its ``gelu_new``: the tanh GELU)."""
        layer = ActionLayer(size, n_heads, 4 * size, dropout, relative=False, pre_norm=True)
        layer.ffn[1] = nn.GELU(approximate="tanh")
        return layer

    def _inputs(self, words: Tensor, steps: Steps) -> Tensor:
        """(R, T, D) each step's input: ⟨bos⟩, a word's embedding or a constituent's
        ``up(c)``, its constituents composed a height at a time."""
        R, N = words.shape
        embedded = self.embedding(words)  # (R, N, D)
        nodes = self.down(embedded).flatten(0, 1)  # (R N, Dc)
        children, heights = steps.children.to(words.device), steps.heights.to(words.device)
        constituents = nodes.new_zeros(children.size(0), nodes.size(1))  # (C, Dc)
        for height in range(1, int(heights.max()) + 1 if heights.numel() else 1):
            at = (heights == height).nonzero(as_tuple=True)[0]
            table = torch.cat([nodes, constituents])
            built = self.compose(table[children[at, 0]], table[children[at, 1]])
            constituents = constituents.index_put((at,), built)
        kinds, index = steps.kinds.to(words.device), steps.index.to(words.device)
        flat_words = embedded.flatten(0, 1)
        inputs = self.bos.expand(*kinds.shape, -1)  # (R, T, D)
        inputs = torch.where((kinds == 1)[..., None], flat_words[index.clamp(max=R * N - 1)],
                             inputs)
        if constituents.size(0):
            lifted = self.up(constituents)[index.clamp(max=constituents.size(0) - 1)]
            inputs = torch.where((kinds == 2)[..., None], lifted, inputs)
        return inputs

    def hidden(self, words: Tensor, steps: Steps, inputs: Tensor | None = None
               ) -> tuple[Tensor, Tensor]:
        """The two stacks' outputs at every step: action layers (R, T, D), generation
        layers (R, T, D) (module docstring); ``inputs`` (R, T, D) the steps' inputs in place
        of ``_inputs``'s (the released training's inside representations)."""
        positions = steps.positions.to(words.device)
        inputs = self._inputs(words, steps) if inputs is None else inputs
        h = self.drop(inputs + self.positions(positions))
        for layer in self.action_layers:
            h = layer(h, None, None, None)
        allowed = causal_shift_mask(steps.shifted.to(words.device))
        g = self.drop(h)
        for layer in self.generation_layers:
            g = layer(g, allowed, None, None)
        return h, self.final_norm(g)

    def step_log_probs(self, words: Tensor, steps: Steps, at: Tensor | None = None,
                       inputs: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """log p(action) (R, T, 2) and log p(word) (R, T, V) at every step; with ``at`` (R,),
        at each row's step ``at`` only: (R, 2) and (R, V); ``inputs`` as ``hidden``'s."""
        h, g = self.hidden(words, steps, inputs)
        if at is not None:
            rows = torch.arange(h.size(0), device=h.device)
            h, g = h[rows, at], g[rows, at]
        word_logits = self.word_head(g) @ self.embedding.weight.T  # (R, T, V)
        return (F.log_softmax(self.action_head(h), -1), F.log_softmax(word_logits, -1))

    def forward(self, words: Tensor, actions: Tensor, word_lengths: Tensor) -> RNNGOutput:
        """Teacher forcing: words (B, N), actions (B, A) of ``SHIFT`` / ``REDUCE`` padded with
        -1, word_lengths (B,) -> log p(a_t) (B, A), log p(x_i | ...) (B, N) and log p(x, y)
        (B,)."""
        sequences = [[a for a in row if a >= 0] for row in actions.tolist()]
        steps = plan_steps(sequences, word_lengths.tolist(), words.size(1))
        action_lp, word_lp = self.step_log_probs(words, steps)
        A = actions.size(1)
        valid = actions >= 0  # (B, A)
        taken = action_lp[:, :A].gather(-1, actions.clamp(min=0)[..., None])[..., 0]
        action_log_probs = taken.masked_fill(~valid, 0.0)
        # the step of each word's SHIFT: the k-th True of ``shifted``
        shifted = steps.shifted[:, :A].to(words.device)
        order = torch.where(shifted, torch.arange(A, device=words.device), A)
        shift_steps = order.sort(-1).values[:, :words.size(1)]  # (B, N)
        present = torch.arange(words.size(1), device=words.device) < word_lengths[:, None]
        at = shift_steps.clamp(max=A - 1)
        word_log_probs = word_lp.gather(1, at[..., None].expand(-1, -1, word_lp.size(-1)))
        word_log_probs = word_log_probs.gather(-1, words[..., None])[..., 0]
        word_log_probs = word_log_probs.masked_fill(~present, 0.0)
        return RNNGOutput(action_log_probs, word_log_probs,
                          action_log_probs.sum(1) + word_log_probs.sum(1))
