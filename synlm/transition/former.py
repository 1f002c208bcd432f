"""The recipes' former names, ``RNNGLM`` and ``ActionTransformerLM``, which took their
model's arguments flat (``model: {class_path: RNNGLM, init_args: {hidden_size: 256, ...}}``):
configs, run folders and checkpoints written in that form load unchanged (the checkpoint's
``synlm.model_class`` names the class, ``synlm.loading`` finds it in ``synlm.registry``).
Each is ``TransitionLM`` over its model, built from the flat arguments here, the one place
that reads that form; what it saves is ``TransitionLM``'s form. They keep the defaults they
had (the loss's normalisation, the fast track, the optimiser)."""

from __future__ import annotations

from typing import Any, Literal

from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.lm import TransitionLM
from synlm.transition.rnng import RNNG


class RNNGLM(TransitionLM):
    """``TransitionLM`` over an ``RNNG`` whose arguments are given flat (the former form)."""

    def __init__(self, loss_normalize: Literal["sentences", "tokens", "sum"] = "sentences",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 1,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None,
                 **rnng: Any) -> None:
        vocab_size, n_actions = rnng.pop("vocab_size", 10000), rnng.pop("n_actions", 3)
        super().__init__(lambda v, a: RNNG(v, a, **rnng), vocab_size, n_actions,
                         loss_normalize, beam_size, word_beam_size, shift_size, optimizer,
                         lr_scheduler)


class ActionTransformerLM(TransitionLM):
    """``TransitionLM`` over an ``ActionTransformer`` whose arguments are given flat (the
    former form)."""

    #: The former default (the configs set the papers').
    default_optimizer = {"class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-4}}

    def __init__(self, loss_normalize: Literal["sentences", "tokens", "sum"] = "tokens",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 5,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None,
                 **transformer: Any) -> None:
        vocab_size = transformer.pop("vocab_size", 10000)
        n_actions = transformer.pop("n_actions", 3)
        super().__init__(lambda v, a: ActionTransformer(v, a, **transformer), vocab_size,
                         n_actions, loss_normalize, beam_size, word_beam_size, shift_size,
                         optimizer, lr_scheduler)
