"""GPST as released trains it (Hu et al. 2024, §3; StructuredLM_RTDT's
``FastGenerativeR2D2.forward``): the parser's merge order prunes the chart
(``gpst_parser``, ``gpst_chart``), the inside pass composes its spans and induces a binary
tree, the outside pass predicts each word from outside it (``gpst_inside``), and the
generative model (``gpst.GPST``) reads the induced tree's SHIFT/REDUCE order
(``synlm.syntax.binary_actions``), a REDUCE's input being its span's inside representation
``up(e_ij)`` (a word's: its embedding). The released training minimises::

    L = L_inside_outside + L_height + ½ L_words + L_actions + L_parser     (§3.3)

The first two are the structural loss, the rest the generative one (the released
``struct_loss`` and ``non_struct_loss``). L_words: −log p(x_i | ...) averaged over words;
L_actions: −log p(a_t | a_<t) averaged over every action, each sentence's 2n − 1 tree
actions and a SHIFT after its root (the released target after the tree: the end of the
sentence). Gradients reach the composition through both the inside pass and the generative
inputs; the parser learns from L_parser alone (its scores are detached from the merge
order).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from synlm.syntax.binary_actions import SHIFT, Span, span_actions
from synlm.transition.gpst import GPST, plan_steps
from synlm.transition.gpst_chart import build_chart
from synlm.transition.gpst_inside import InsideOutside, height_loss, parser_loss
from synlm.transition.gpst_parser import SplitParser


@dataclass
class GPSTLosses:
    """The released losses of a batch (module docstring) and the trees it induced (each
    sentence's post-order spans and SHIFT 0 / REDUCE 1 actions)."""

    loss: Tensor
    structural: Tensor
    generative: Tensor
    words: Tensor
    actions: Tensor
    parser: Tensor
    inside_outside: Tensor
    height: Tensor
    trees: list[list[Span]]
    tree_actions: list[list[int]]


class StructuredGPST(nn.Module):
    """The generative model, parser and inside-outside pass together. Defaults:
    GPST-small (``GPST``'s; the parser's and ``InsideOutside``'s: composition 256 wide,
    scores 128, one outside layer, window 2, parser 128 wide, 4 layers, 8 heads).

    Args:
        vocab_size, size, n_heads, action_layers, generation_layers, compose_size,
            compose_heads, compose_ffn, compose_layers, max_positions, dropout: ``GPST``'s.
        score_size: the split scores' width (``const_size``).
        outside_layers: the outside Transformer's depth.
        window: the chart's window W (``window_size``).
        parser_size, parser_hidden, parser_layers, parser_heads, parser_positions: the
            parser's (``parser_input_dim``, ``parser_hidden_dim``, ``parser_num_layers``,
            ``parser_nhead``, ``parser_max_len``).
    """

    def __init__(self, vocab_size: int, size: int = 768, n_heads: int = 12,
                 action_layers: int = 3, generation_layers: int = 9, compose_size: int = 256,
                 compose_heads: int = 8, compose_ffn: int = 1024, compose_layers: int = 4,
                 max_positions: int = 2048, dropout: float = 0.1, score_size: int = 128,
                 outside_layers: int = 1, window: int = 2, parser_size: int = 128,
                 parser_hidden: int = 512, parser_layers: int = 4, parser_heads: int = 8,
                 parser_positions: int = 1024) -> None:
        super().__init__()
        self.window = window
        self.generative = GPST(vocab_size, size, n_heads, action_layers, generation_layers,
                               compose_size, compose_heads, compose_ffn, compose_layers,
                               max_positions, dropout)
        self.parser = SplitParser(vocab_size, parser_size, parser_hidden, parser_layers,
                                  parser_heads, parser_positions, dropout)
        self.inside_outside = InsideOutside(compose_size, score_size, compose_heads,
                                            compose_ffn, outside_layers, dropout)
        self.outside_head = nn.Sequential(
            nn.Linear(compose_size, 4 * compose_size), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(4 * compose_size, size))

    def forward(self, words: Tensor, lengths: Tensor, noise: float = 1.0,
                temperature: float = 1.0) -> GPSTLosses:
        """The released losses of words (B, N) of ``lengths`` (B,) (module docstring);
        ``noise`` is the parser's noise coefficient, ``temperature`` the inside softmax's."""
        gen = self.generative
        B, N = words.shape
        scores = self.parser.scores(words, lengths)  # (B, N − 1)
        chart = build_chart(lengths.tolist(), self.parser.merge_orders(scores, lengths, noise),
                            self.window)
        present = torch.arange(N, device=words.device) < lengths[:, None]  # (B, N)
        embedded = gen.embedding(words)  # (B, N, D)
        inside = self.inside_outside.inside(gen.compose, gen.down(embedded[present]), chart,
                                            temperature)
        trees = inside.trees(chart)
        actions = [span_actions(spans) for spans in trees]
        steps = plan_steps(actions, lengths.tolist(), N)
        T = steps.kinds.size(1)  # 2 max(n)
        nodes = torch.zeros(B, T, dtype=torch.long)
        targets = torch.full((B, T), -1, dtype=torch.long)  # each step's action
        word_steps = torch.zeros(B, N, dtype=torch.long)  # each word's SHIFT step
        for b, spans in enumerate(trees):
            nodes[b, 1:len(spans) + 1] = torch.tensor([chart.node(b, i, j) for i, j in spans])
            targets[b, :len(spans) + 1] = torch.tensor(actions[b] + [SHIFT])
            word_steps[b, :len(spans) // 2 + 1] = torch.tensor(
                [t for t, a in enumerate(actions[b]) if a == SHIFT])
        kinds = steps.kinds.to(words.device)[..., None]
        inputs = torch.where(kinds == 2, gen.up(inside.table[nodes.to(words.device)]),
                             gen.bos.expand(B, T, -1))  # (B, T, D)
        inputs = torch.where(kinds == 1, embedded.flatten(0, 1)[steps.index.to(words.device)],
                             inputs)
        action_lp, word_lp = gen.step_log_probs(words, steps, inputs=inputs)
        action_loss = F.nll_loss(action_lp.flatten(0, 1), targets.to(words.device).flatten(),
                                 ignore_index=-1)
        at = word_steps.to(words.device)[..., None].expand(-1, -1, word_lp.size(-1))
        word_log_probs = word_lp.gather(1, at).gather(-1, words[..., None])[..., 0]  # (B, N)
        word_loss = -word_log_probs[present].mean()
        outside = self.inside_outside.outside(inside, chart)[:int(present.sum())]
        logits = self.outside_head(outside) @ gen.embedding.weight.T  # (words, V)
        inside_outside = F.cross_entropy(logits, words[present])
        height = height_loss(inside, chart)
        parser = parser_loss(scores, trees)
        structural = inside_outside + height
        generative = 0.5 * word_loss + action_loss + parser
        return GPSTLosses(structural + generative, structural, generative, word_loss,
                          action_loss, parser, inside_outside, height, trees, actions)
