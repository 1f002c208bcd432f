"""Dependency-based mixture language models (Yang & Wan 2022, DMLM §2; Appendix A).

Two phases, picked by ``phase``:

1. ``dependency`` (eq. 2): the decoder's distribution at input t, p_dep(· | x≤t), is trained
   towards the future dependents D_t of the word at t (``Batch.dep_targets``,
   ``synlm.syntax.targets``)::

       L_dep = −Σ_t Σ_{w ∈ D_t} log p_dep(w | x≤t) / N

   N counts every input of a sentence with heads, empty sets included: the reference sums
   over the targets and divides by the number of positions (T·B for the LSTM, fairseq's
   ``ntokens`` for the Transformer), with no division by |D_t|. The targets are gathered
   from the log-softmax, never a dense (T·B, V) indicator. Set ``model.lm_weight: 0`` to
   train on this loss alone, as the paper's first phase does.

2. ``mixture`` (eq. 3-4): the next token is a mixture of the dependency distributions of the
   inputs so far, weighted by a dependency attention a_{t,j}::

       p(x_{t+1} | x≤t) = Σ_{j≤t} a_{t,j} p_dep(x_{t+1} | x≤j)

   computed exactly in log space, log p = logsumexp_j(log a_{t,j} + log p_dep,j(x_{t+1})),
   from one (B, T, V) log-softmax and a (B, T, T) gather: O(B·T²) beyond the log-softmax,
   never O(T²·V) (the reference mixes in probability space with a (B, T, V) ``bmm`` and
   takes ``log`` of possibly zero values). The full (B, T, V) distribution is built only for
   sampling and evaluation (``log_probs_needed``), by that ``bmm``. In generation the head
   keeps the past positions' p_dep (and keys) as its own state (``MixtureState``), so each
   step runs on the new token only.

The attention (``attention``, one ``MixtureAttention`` per value, chosen in the constructor):

- ``query_key`` (recurrent backbones, eq. 3, ``QueryKeyAttention``): q_t = W_Q h_t,
  k_j = W_K h_j from the top layer before the output dropout (``layers[-1]``),
  a_{t,·} = softmax(q_t·k_j / √E) over j ∈ (t − ``context``, t], inside the current window
  (as the reference, whose attention never crosses a BPTT segment); W_Q, W_K ~ U(−0.1, 0.1),
  biases 0.
- ``backbone`` (Transformer, GPT-2, ``BackboneAttention``): the head-averaged attention the
  backbone provides (``attention``, its penultimate layer by default).
- ``auto`` (``AutoAttention``): ``backbone`` when the backbone provides ``attention``, else
  ``query_key``, decided when the head binds to it.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from synlm.backbones.base import BackboneSpec, causal_mask
from synlm.errors import InputError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.outputs import BackboneOutput, Batch, HeadOutput

Phase = Literal["dependency", "mixture"]
Sampling = Literal["mixture", "logits", "released"]
TargetSets = Literal["types", "arcs"]
AttentionSource = Literal["auto", "query_key", "backbone"]


class MixtureState(NamedTuple):
    """The mixture's own state in generation (``SyntaxHead.incremental``): the past
    positions it may still draw from, their dependency log-probabilities (B, S, V) and, for
    the query/key attention, their keys (B, S, E) (S ≤ context − 1; the backbone's attention:
    every past position); for ``sampling: released`` also their top-layer states (B, S, E),
    the released sampler's keys, and which of them a row may still draw from (B, S) (a row
    that ended a sentence starts a fresh history, ``reset_rows``)."""

    log_p: Tensor
    keys: Tensor | None
    hidden: Tensor | None = None
    valid: Tensor | None = None


def reset_rows(state: MixtureState, rows: Tensor) -> MixtureState:
    """``state`` with the history of the rows marked in ``rows`` (B,) emptied: they draw
    only from the positions that come after (the released unconditional sampler at
    ``<eos>``)."""
    valid = state.valid if state.valid is not None else torch.ones(
        state.log_p.shape[:2], dtype=torch.bool, device=state.log_p.device)
    return state._replace(valid=valid & ~rows[:, None])


class DependencyMixtureHead(SyntaxHead):
    """DMLM's dependency modelling (phase 1) and dependency mixture (phase 2).

    Args:
        phase: ``dependency`` (a loss term on ``dep_targets``) or ``mixture`` (replaces the
            next-token distribution).
        attention: ``auto``, ``query_key`` or ``backbone`` (module docstring).
        context: the query/key attention's window c (36, DMLM's LSTM default; the paper
            uses 56 on ROCStories and 16 on PTB).
        weight: the loss weight of phase 1.
        target_sets: what D_t holds in phase 1: ``types``, the word types linked to w_t, each
            once (the released code: a ``set`` per position, DPLM-LSTM/data.py:182-195, read
            as a 0/1 indicator, dependency_modeling_criterion.py:12-14; the Transformer's
            dataset dedups too), the default; or ``arcs``, one target per arc, so a type
            linked twice counts twice.
        sampling: the distribution ``log_probs`` gives for sampling: ``mixture`` (eq. 4, the
            paper's, and what the Transformer code samples); ``logits``, softmax(Σ_j a_{t,j}
            z_j) with z_j the decoder's logits at j (the released DM-LSTM sampler mixes the
            logits, not the distributions); or ``released``, the released DM-LSTM sampler
            whole (DPLM-LSTM/generate.py, the one behind Tables 2 and 4's DM-LSTM rows): the
            logit mixture, with the attention's keys the raw top-layer states h_j instead of
            the trained key projection W_K h_j (lines 142-143 and 218-219: a mismatch
            between its training and its generation, kept here because it made the
            numbers), and the histories of ``synlm.generation`` (a prompt's last position
            only, lines 214-216; unconditional sentences in one stream, the history emptied
            at each ``<eos>``, lines 129-175). Query/key attention only. Training and
            perplexity use the mixture with the trained keys in every case.
    """

    def __init__(self, phase: Phase = "dependency", attention: AttentionSource = "auto",
                 context: int = 36, weight: float = 1.0, sampling: Sampling = "mixture",
                 target_sets: TargetSets = "types") -> None:
        if attention not in ATTENTIONS:
            raise InputError(f"DependencyMixtureHead attention must be 'auto', 'query_key' or "
                             f"'backbone', not {attention!r}")
        mixture = phase == "mixture"
        weighing = ATTENTIONS[attention]()
        super().__init__("dm", weight, requires=weighing.reads if mixture else (),
                         needs_gold=() if mixture else {"dep_targets"},
                         replaces_distribution=mixture, incremental=True)
        if phase not in ("dependency", "mixture"):
            raise InputError(f"DependencyMixtureHead phase must be 'dependency' or 'mixture', "
                             f"not {phase!r}")
        if sampling not in ("mixture", "logits", "released"):
            raise InputError(f"DependencyMixtureHead sampling must be 'mixture', 'logits' or "
                             f"'released', not {sampling!r}")
        if target_sets not in ("types", "arcs"):
            raise InputError(f"DependencyMixtureHead target_sets must be 'types' or 'arcs', "
                             f"not {target_sets!r}")
        self.sampling = sampling
        self.target_sets = target_sets
        self.attention = weighing
        self.context = context

    def bind(self, context: HeadContext) -> None:
        if self.replaces_distribution:  # phase 2: the attention of this backbone, built
            self.attention = self.attention.over(context.backbone)
            self.attention.build(self, context.backbone)
        self.check_sampling()

    def forward(self, out: BackboneOutput, batch: Batch, logits: Tensor,
                log_probs_needed: bool = False, state: MixtureState | None = None
                ) -> HeadOutput:
        log_p = logits.log_softmax(-1, dtype=_at_least_float32(logits))  # (B, T, V)
        if not self.replaces_distribution:  # phase 1
            return HeadOutput(loss=self.dependency_loss(log_p, batch, self.target_sets))
        # the positions j the window's inputs may draw from: the past ones kept in ``state``
        # (generation), then the window's own; S past, T new
        past_log_p = state.log_p if state is not None else log_p[:, :0]
        all_log_p = torch.cat([past_log_p, log_p], dim=1)  # (B, S + T, V)
        log_a, keys = self.log_attention(out, state)  # (B, T, S + T)
        if log_a.size(2) != all_log_p.size(1):
            raise InputError("DependencyMixtureHead reads the attention of a window over a "
                             "cache but was not given its own state (the p_dep of the cached "
                             "positions); continue through SyntaxLM.step")
        n = all_log_p.size(1)
        # dep[b, t, j] = log p_dep(x_{t+1} | x≤j): the distribution at j read at t's target
        dep = all_log_p.gather(2, batch.targets[:, None, :].expand(-1, n, -1)).transpose(1, 2)
        target_log_probs = torch.logsumexp(log_a + dep, dim=-1)  # (B, T)
        if not log_probs_needed:
            return HeadOutput(target_log_probs=target_log_probs)
        hidden = valid = None
        if self.sampling == "released":  # the released sampler's attention: raw h_j as keys
            log_a, hidden, valid = self.released_attention(out, state)
        with torch.autocast(log_p.device.type, enabled=False):  # keep it in float32
            if self.sampling == "mixture":  # (B, T, V) = a @ p_dep
                full = torch.bmm(log_a.exp(), all_log_p.exp()).clamp_min(1e-30).log()
            else:  # softmax(a @ log p_dep) = softmax(a @ z): the logit mixture
                full = torch.bmm(log_a.exp(), all_log_p).log_softmax(-1)
        keep = self.attention.kept(self, all_log_p.size(1))
        kept = slice(all_log_p.size(1) - min(keep, all_log_p.size(1)), None)
        new_state = MixtureState(*(x if x is None else x[:, kept]
                                   for x in (all_log_p, keys, hidden, valid)))
        return HeadOutput(target_log_probs=target_log_probs, log_probs=full, state=new_state)

    def check_sampling(self) -> None:
        """``sampling: released`` needs the query/key attention (one-line error)."""
        if self.replaces_distribution and self.sampling == "released" \
                and not self.attention.raw_keys:
            raise InputError("DependencyMixtureHead sampling 'released' is the released "
                             "DM-LSTM sampler and needs the query/key attention of a "
                             "recurrent backbone; use 'mixture' or 'logits' here")

    @staticmethod
    def reset_rows(state: MixtureState, rows: Tensor) -> MixtureState:
        """``state`` with the history of ``rows`` (B,) emptied (``reset_rows``)."""
        return reset_rows(state, rows)

    def released_attention(self, out: BackboneOutput, state: MixtureState | None
                           ) -> tuple[Tensor, Tensor, Tensor]:
        """The released DM-LSTM sampler's log-attention (B, T, S + T): softmax over the
        last ``context`` positions of q_t·h_j / √E, q_t = W_Q h_t and the keys the raw
        top-layer states h_j (DPLM-LSTM/generate.py 142-147), over the positions the row may
        still draw from; with the states (B, S + T, E) and that mask (B, S + T)."""
        h = out.layers[-1]  # (B, T, E)
        B, T = h.shape[:2]
        new = torch.ones(B, T, dtype=torch.bool, device=h.device)
        hidden, valid = h, new
        if state is not None and state.hidden is not None:
            hidden = torch.cat([state.hidden, h], dim=1)
            valid = torch.cat([state.valid, new], dim=1)
        scores = self.query(h) @ hidden.transpose(1, 2) / math.sqrt(h.size(-1))
        allowed = self.window(T, hidden.size(1), h.device) & valid[:, None, :]
        scores = scores.to(_at_least_float32(scores)).masked_fill(~allowed, float("-inf"))
        return scores.log_softmax(-1), hidden, valid

    def window(self, T: int, n: int, device: torch.device) -> Tensor:
        """(T, n): query t (the last T of n positions) may read j ∈ (t − context, t]."""
        t = torch.arange(n - T, n, device=device)[:, None]
        j = torch.arange(n, device=device)[None, :]
        return (j <= t) & (j > t - self.context)

    @staticmethod
    def dependency_loss(log_p: Tensor, batch: Batch, target_sets: TargetSets = "types"
                        ) -> Tensor | None:
        """Eq. 2: −Σ over the future dependents of log p_dep, over the inputs of sentences
        with heads (None without them in this batch); ``target_sets`` as the class says."""
        if batch.dep_targets is None or batch.dep_rows is None or not batch.dep_rows.any():
            return None
        mask = batch.dep_mask
        if target_sets == "types":
            mask = first_occurrences(batch.dep_targets, mask)
        picked = log_p.gather(2, batch.dep_targets)  # (B, T, D)
        total = -(picked * mask).sum()
        return total / batch.dep_rows.sum()

    def log_attention(self, out: BackboneOutput, state: MixtureState | None = None
                      ) -> tuple[Tensor, Tensor | None]:
        """log a_{t,j} (B, T, S + T), −inf outside the allowed j, over the S past positions
        of ``state`` and the window's T; and, for the query/key attention, the keys of all
        S + T positions (B, S + T, E)."""
        return self.attention.log_attention(self, out, state)


class MixtureAttention:
    """How the mixture weighs the positions so far (``DependencyMixtureHead``'s
    ``attention``): the ``BackboneOutput`` fields it ``reads``, the layers it adds to the
    head, log a_{t,j}, and how many past positions the head keeps for it in generation."""

    reads: frozenset[str] = frozenset({"layers"})
    #: whether the released DM-LSTM sampler can run over it (``sampling: released`` takes the
    #: query projection and the raw top-layer states as keys)
    raw_keys: bool = False

    def over(self, backbone: BackboneSpec) -> MixtureAttention:
        """The attention the head uses over ``backbone``: this one."""
        return self

    def build(self, head: DependencyMixtureHead, backbone: BackboneSpec) -> None:
        """Add the layers it trains to ``head`` (none)."""

    def log_attention(self, head: DependencyMixtureHead, out: BackboneOutput,
                      state: MixtureState | None) -> tuple[Tensor, Tensor | None]:
        """``DependencyMixtureHead.log_attention``."""
        raise NotImplementedError

    def kept(self, head: DependencyMixtureHead, positions: int) -> int:
        """How many of the last ``positions`` a later window may still draw from."""
        raise NotImplementedError


class QueryKeyAttention(MixtureAttention):
    """Eq. 3: softmax(q_t·k_j / √E) over j ∈ (t − ``context``, t], q and k the head's
    projections (``query``, ``key``) of the top layer."""

    raw_keys = True

    def build(self, head: DependencyMixtureHead, backbone: BackboneSpec) -> None:
        size = backbone.layer_sizes[-1]
        head.query = nn.Linear(size, size)
        head.key = nn.Linear(size, size)
        for linear in (head.query, head.key):
            nn.init.uniform_(linear.weight, -0.1, 0.1)
            nn.init.zeros_(linear.bias)

    def log_attention(self, head: DependencyMixtureHead, out: BackboneOutput,
                      state: MixtureState | None) -> tuple[Tensor, Tensor | None]:
        h = out.layers[-1]  # (B, T, E) top layer before the output dropout
        q, k = head.query(h), head.key(h)  # (B, T, E)
        if state is not None:
            k = torch.cat([state.keys, k], dim=1)  # (B, S + T, E)
        scores = q @ k.transpose(1, 2) / math.sqrt(h.size(-1))  # (B, T, S + T)
        scores = scores.to(_at_least_float32(scores))
        allowed = head.window(q.size(1), k.size(1), h.device)
        return scores.masked_fill(~allowed, float("-inf")).log_softmax(-1), k

    def kept(self, head: DependencyMixtureHead, positions: int) -> int:
        return head.context - 1


class BackboneAttention(MixtureAttention):
    """The backbone's own head-averaged attention (``BackboneOutput.attention``), causal."""

    reads = frozenset({"attention"})

    def log_attention(self, head: DependencyMixtureHead, out: BackboneOutput,
                      state: MixtureState | None) -> tuple[Tensor, Tensor | None]:
        a = out.attention  # (B, T, S + T) probabilities
        causal = causal_mask(a.size(1), a.size(2), a.device)  # (T, S + T)
        # clamp: log 0 would give 0·∞ = NaN gradients; masked entries get −inf
        a = a.to(_at_least_float32(a))
        return a.clamp_min(1e-30).log().masked_fill(~causal, float("-inf")), None

    def kept(self, head: DependencyMixtureHead, positions: int) -> int:
        return positions


class AutoAttention(MixtureAttention):
    """The backbone's attention where it provides one, else the query/key attention."""

    def over(self, backbone: BackboneSpec) -> MixtureAttention:
        provided = "attention" in backbone.provides
        return BackboneAttention() if provided else QueryKeyAttention()


#: ``DependencyMixtureHead(attention=...)``'s values and the attention each names.
ATTENTIONS: dict[str, type[MixtureAttention]] = {
    "auto": AutoAttention, "query_key": QueryKeyAttention, "backbone": BackboneAttention}


def first_occurrences(ids: Tensor, mask: Tensor) -> Tensor:
    """``mask`` (B, T, D) keeping, among the entries it marks at each (b, t), only the first
    of each id in ``ids`` (B, T, D): a set of types from a list of arcs."""
    same = (ids.unsqueeze(-1) == ids.unsqueeze(-2)) & mask.unsqueeze(-2)  # (B, T, D, D)
    earlier = same.tril(-1).any(-1)  # an earlier marked entry has the same id
    return mask & ~earlier


def _at_least_float32(x: Tensor) -> torch.dtype:
    """float32 for 16-bit inputs (mixed precision), the input's own dtype above."""
    return torch.promote_types(x.dtype, torch.float32)
