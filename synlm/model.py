"""``SyntaxModel``: token embedding + backbone + syntax heads + tied decoder, a plain
``nn.Module``. What it computes (next-token distributions, induced structures) needs no
Lightning; ``synlm.lm.SyntaxLM`` trains it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import skip_init

from synlm.backbones.base import STRUCTURE_FIELDS, Backbone
from synlm.data.vocab import Vocab
from synlm.errors import InputError
from synlm.heads.base import HeadContext, SyntaxHead
from synlm.modules import embedding_dropout
from synlm.modules.recorded import build
from synlm.outputs import BackboneOutput, Batch, HeadOutput, LMOutput, StepState, Structure

#: Where a checkpoint written before the model was split from its training recipe kept these
#: modules (at the top of the LightningModule); ``SyntaxLM`` now holds them under ``model.``.
PARTS = ("backbone.", "heads.", "embedding.", "decoder.")


class SyntaxModel(nn.Module):
    """A language model made of a ``backbone`` and any number of syntax ``heads``::

        e_t = E[w_t]                        (B, T, E)   with word-type dropout (AWD ``dropoute``)
        out = backbone(e, state)            hidden (B, T, H) and what the backbone provides
        p(w_{t+1} | w_≤t) = softmax(W out.hidden_t + b)   W = E when tied (Press & Wolf 2017)

    unless a head replaces that distribution (DM's mixture); every head reads ``out`` and
    the logits and may add a loss term or induce a structure (``synlm.heads.base``).

    Args:
        backbone: a ``Backbone`` (or its ``{"class_path", "init_args"}`` config);
            ``spec.output_size`` must equal ``spec.input_size`` when tied.
        heads: syntax heads (or their configs); each head's ``requires`` must be provided by
            the backbone.
        vocab_size: V.
        embedding_dropout: word-type dropout on the embedding matrix (AWD ``dropoute``).
        tie_weights: the decoder's weight is the embedding matrix.
        decoder_bias: the decoder has a bias (AWD-LSTM); fairseq's Transformer LM and GPT-2
            have none.
        init_range: embedding (and untied decoder) init U(−r, r); decoder bias 0.
        init_std: if set, the embedding is drawn from N(0, init_std²) instead (fairseq's
            Transformer LM: E^-0.5). A backbone with a ``pretrained_embedding`` (GPT-2) sets
            it from that in either case.
    """

    def __init__(self, backbone: Backbone | Mapping[str, Any],
                 heads: Sequence[SyntaxHead | Mapping[str, Any]] = (), vocab_size: int = 10000,
                 embedding_dropout: float = 0.0, tie_weights: bool = True,
                 decoder_bias: bool = True, init_range: float = 0.1,
                 init_std: float | None = None) -> None:
        super().__init__()
        self.backbone: Backbone = build(backbone)
        self.heads = nn.ModuleList(build(list(heads)))
        self.embedding_dropout = embedding_dropout
        spec = self.backbone.spec
        self._check_heads()
        if tie_weights and spec.output_size != spec.input_size:
            raise InputError(
                f"tied weights need {type(self.backbone).__name__}.spec.output_size "
                f"({spec.output_size}) == input_size ({spec.input_size})")
        # Created uninitialised so that heads bind to the assembled model; initialised after
        # binding in the order the modules' constructors would have drawn, so the random
        # stream (and every earlier run's numbers) stays as it was.
        self.embedding = skip_init(nn.Embedding, vocab_size, spec.input_size)
        self.decoder = skip_init(nn.Linear, spec.output_size, vocab_size, bias=decoder_bias)
        if tie_weights:
            self.decoder.weight = self.embedding.weight
        context = HeadContext(vocab_size, self.embedding, self.decoder, spec)
        for head in self.heads:
            head.bind(context)
        self._init_weights(tie_weights, decoder_bias, init_range, init_std)
        self.vocab: Vocab | None = None  # the training corpus's, set by SyntaxLM at setup
        self.normalization = "none"  # the corpus's word normalisation, likewise

    def _init_weights(self, tie_weights: bool, decoder_bias: bool, init_range: float,
                      init_std: float | None) -> None:
        self.embedding.reset_parameters()
        self.decoder.reset_parameters()
        if init_std is None:
            nn.init.uniform_(self.embedding.weight, -init_range, init_range)
        else:
            nn.init.normal_(self.embedding.weight, 0.0, init_std)
        pretrained = self.backbone.pretrained_embedding()
        if pretrained is not None:
            if pretrained.shape != self.embedding.weight.shape:
                raise InputError(
                    f"{type(self.backbone).__name__} comes with a {tuple(pretrained.shape)} "
                    f"token embedding but the model's is {tuple(self.embedding.weight.shape)}; "
                    "use the tokenizer it was trained with (data.subwords: PretrainedTokenizer)")
            with torch.no_grad():
                self.embedding.weight.copy_(pretrained)
        if not tie_weights:
            nn.init.uniform_(self.decoder.weight, -init_range, init_range)
        if decoder_bias:
            nn.init.zeros_(self.decoder.bias)

    def _check_heads(self) -> None:
        spec = self.backbone.spec
        backbone = type(self.backbone).__name__
        for head in self.heads:
            missing = head.requires - spec.provides
            if missing:
                raise InputError(
                    f"{type(head).__name__} requires {sorted(missing)} which {backbone} does "
                    f"not provide (it provides {sorted(spec.provides) or 'only hidden states'})")
        names = [s.name for s in spec.structures] + [h.name for h in self.heads]
        if len(set(names)) != len(names):
            raise InputError(f"heads need distinct names, different from the backbone's "
                             f"structures (they key the outputs and metrics): {names}")
        replacing = [type(h).__name__ for h in self.heads if h.replaces_distribution]
        if len(replacing) > 1:
            raise InputError(f"at most one head may replace the next-token distribution: "
                             f"{replacing}")

    @property
    def structures(self) -> dict[str, Structure]:
        """What this model induces, by name, in headline order: the heads' structures, then
        the backbone's (``val/uf1``, ``val/uas`` and ``synlm parse`` take the first)."""
        found = {h.name: Structure(h.name, h.structure_kind) for h in self.heads
                 if h.structure_kind is not None}
        return found | {s.name: s for s in self.backbone.spec.structures}

    # ------------------------------------------------------------------ forward
    def forward(self, batch: Batch, state: Any = None, log_probs_needed: bool = False,
                head_states: Mapping[str, Any] | None = None) -> LMOutput:
        """One window. Every head runs (without gold it returns no loss); a head that
        replaces the distribution gives ``target_log_probs`` (and ``log_probs`` when
        ``log_probs_needed``). ``head_states``: the incremental heads' states, by name, from
        the previous window of the same sequences (generation; ``step``)."""
        emb = embedding_dropout(self.embedding.weight, batch.tokens, self.embedding_dropout,
                                self.training)  # (B, T, E)
        out = self._run_backbone(emb, state, batch.lengths)
        logits = self.decoder(out.hidden)  # (B, T, V)
        target_log_probs = -F.cross_entropy(
            logits.flatten(0, 1).float(), batch.targets.flatten(), reduction="none"
        ).view_as(batch.targets)  # (B, T)
        heads: dict[str, HeadOutput] = {}
        for head in self.heads:
            if head.replaces_distribution:
                own = ({"state": (head_states or {}).get(head.name)} if head.incremental
                       else {})
                head_out = head(out, batch, logits, log_probs_needed=log_probs_needed, **own)
                missing = "target_log_probs" if head_out.target_log_probs is None else \
                    "log_probs" if log_probs_needed and head_out.log_probs is None else None
                if missing:
                    raise RuntimeError(f"{type(head).__name__} replaces the next-token "
                                       f"distribution but returned no {missing}")
                target_log_probs = head_out.target_log_probs
            else:
                head_out = head(out, batch, logits)
            heads[head.name] = head_out
        return LMOutput(logits=logits, target_log_probs=target_log_probs, backbone=out,
                        heads=heads, state=out.state)

    def _run_backbone(self, emb: Tensor, state: Any, lengths: Tensor | None) -> BackboneOutput:
        """The backbone over ``emb`` (B, T, E); a bidirectional one (``spec.bidirectional``)
        also reads each row's length (B,), without which it would attend to padding."""
        if not self.backbone.spec.bidirectional:
            return self.backbone(emb, state)
        if lengths is None:
            raise InputError(
                f"{type(self.backbone).__name__} attends both ways within a sentence and needs "
                "each row's length (Batch.lengths): give it sentence rows (data.mode: sentence, "
                "data.objective: masked), not stream windows")
        return self.backbone(emb, state, lengths=lengths)

    def structure_values(self, result: LMOutput) -> dict[str, tuple[str, Tensor]]:
        """Every declared structure in a forward's output: name -> (kind, values)."""
        values = {}
        for name, structure in self.structures.items():
            if name in result.heads:
                value = result.heads[name].structure
            else:
                value = getattr(result.backbone, STRUCTURE_FIELDS[structure.kind])
                if value is not None and structure.layers is not None:
                    value = value[list(structure.layers)]  # (L_sel, B, T)
            if value is not None:
                values[name] = (structure.kind, value)
        return values

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def log_probs(self, tokens: Tensor, state: Any = None) -> Tensor:
        """Next-token log-probabilities (B, T, V) for ``tokens`` (B, T), in eval mode."""
        return self.step(tokens, state)[0]

    @torch.no_grad()
    def step(self, tokens: Tensor, state: StepState | Any = None) -> tuple[Tensor, StepState]:
        """Next-token log-probabilities (B, T, V) of the distribution the model uses (a
        replacing head's, else the decoder's) for ``tokens`` (B, T) continuing ``state``,
        and the state after them (the backbone's and the incremental heads'; a bare backbone
        state is accepted); eval mode. Generation calls it token by token."""
        if not isinstance(state, StepState):
            state = StepState(state, {})
        result = self.evaluate(tokens, state.backbone, log_probs_needed=True,
                               head_states=state.heads)
        replaced = [h.log_probs for h in result.heads.values() if h.log_probs is not None]
        log_probs = replaced[0] if replaced else result.logits.float().log_softmax(-1)
        heads = {name: h.state for name, h in result.heads.items() if h.state is not None}
        return log_probs, StepState(result.state, heads)

    @torch.no_grad()
    def target_log_probs(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """log p(``targets[b, t]`` | ``tokens[b, :t + 1]``), (B, T), under the distribution
        the model uses (a replacing head's, else the decoder's), from a fresh state, in eval
        mode: the same numbers as ``log_probs(tokens)`` gathered at ``targets``, without the
        (B, T, V) tensor a head may skip. Rows may be right-padded: every backbone is
        causal, so padding changes no earlier position (the scoring of
        ``synlm.tse.scoring``)."""
        return self.evaluate(tokens, targets=targets).target_log_probs

    @torch.no_grad()
    def masked_log_probs(self, tokens: Tensor, kept: Tensor | None = None) -> Tensor:
        """A masked LM's log-probabilities (B, T, V) of the token at each position of rows
        ``tokens`` (B, T) holding ``<mask>`` where a word is to be predicted, each row read
        as a whole by the bidirectional backbone (``spec.bidirectional``), in eval mode.
        ``kept`` (B, T) bool: the positions of the rows (default all); padding may stand on
        either side of them (the kept tokens are read in order, the padding after them), and
        the values at padded positions mean nothing."""
        if not self.backbone.spec.bidirectional:
            raise InputError(f"{type(self.backbone).__name__} is causal: it gives next-token "
                             "probabilities (log_probs), not a masked LM's")
        if kept is None:
            kept = torch.ones_like(tokens, dtype=torch.bool)
        order = torch.argsort((~kept).to(torch.int8), dim=1, stable=True)  # kept first
        result = self.evaluate(tokens.gather(1, order), lengths=kept.sum(1))
        logits = result.logits  # (B, T, V), in float32 at least
        log_probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(-1)
        back = order.argsort(dim=1)[..., None].expand_as(log_probs)
        return log_probs.gather(1, back)

    @torch.no_grad()
    def induce(self, tokens: Tensor, lengths: Tensor | None = None) -> dict[str, Tensor]:
        """Every structure the model induces (``structures``) for rows ``[<eos>, w1..wn]``
        in eval mode, by name, in its kind's layout (``synlm.outputs.STRUCTURE_KINDS``).
        ``lengths`` (B,): the tokens of each row, which a bidirectional backbone needs (it
        would attend to the padding past them)."""
        return {name: value for name, (_, value)
                in self.structure_values(self.evaluate(tokens, lengths=lengths)).items()}

    def evaluate(self, tokens: Tensor, state: Any = None, log_probs_needed: bool = False,
                 head_states: Mapping[str, Any] | None = None,
                 targets: Tensor | None = None, lengths: Tensor | None = None) -> LMOutput:
        """A forward pass in eval mode on raw tokens (no gold; ``targets`` only for
        ``target_log_probs``; ``lengths`` (B,) the tokens of each row, for a bidirectional
        backbone), then the previous mode again."""
        was_training = self.training
        self.eval()
        try:
            return self(Batch(tokens=tokens, targets=tokens if targets is None else targets,
                              mask=torch.ones_like(tokens, dtype=torch.bool), lengths=lengths),
                        state, log_probs_needed=log_probs_needed, head_states=head_states)
        finally:
            self.train(was_training)


def upgrade_state_dict(state_dict: dict[str, Any]) -> dict[str, Any]:
    """A ``SyntaxLM`` state dict written before the split (``backbone.*``, ``decoder.*``, ...)
    in today's layout (``model.backbone.*``); a current one unchanged."""
    return {f"model.{k}" if k.startswith(PARTS) else k: v for k, v in state_dict.items()}
