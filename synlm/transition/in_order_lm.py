"""The training recipe of the in-order RNNG (``synlm.transition.in_order_rnng``): ``RNNGLM``'s
(``synlm.transition.lm``) on in-order action batches (``data.action_order: in_order``).

What differs from the top-down recipe: the model scores one action more per sentence, the
closing ``FINISH``, which the perplexities count among the actions (as the released
``train.py`` counts it), and beam search's parses end with ``FINISH``, which ``best_tree``
drops before building the tree in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from torch import Tensor

from synlm.errors import InputError
from synlm.lm import attached_trainer
from synlm.outputs import ActionBatch
from synlm.syntax.actions import tree_of
from synlm.transition.beam import BeamSettings, SearchResult
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.lm import TransitionRecipe


class InOrderRNNGLM(TransitionRecipe):
    """Trains and evaluates an ``InOrderRNNG`` (``self.model``).

    Args:
        vocab_size: V (linked from the DataModule).
        n_actions: the action vocabulary's size (linked from the DataModule; the model adds
            ``FINISH``).
        input_size: the ``InOrderRNNG``'s.
        hidden_size: the ``InOrderRNNG``'s.
        num_layers: the ``InOrderRNNG``'s.
        dropout: the ``InOrderRNNG``'s.
        legal_softmax: the ``InOrderRNNG``'s.
        max_open: the ``InOrderRNNG``'s.
        max_consecutive: the ``InOrderRNNG``'s (3, the released search's for in-order).
        loss_normalize: as ``RNNGLM``'s.
        beam_size: test's beam search (``BeamSettings``; the reference's 100).
        word_beam_size: likewise (10).
        shift_size: likewise (1).
        optimizer: as ``RNNGLM``'s.
        lr_scheduler: as ``RNNGLM``'s.
    """

    #: The released recipe's (its README: Adam, lr 0.001).
    default_optimizer = {"class_path": "torch.optim.Adam", "init_args": {"lr": 1e-3}}

    def __init__(self, vocab_size: int = 10000, n_actions: int = 3, input_size: int = 256,
                 hidden_size: int = 256, num_layers: int = 2, dropout: float = 0.3,
                 legal_softmax: bool = False, max_open: int = 100, max_consecutive: int = 3,
                 loss_normalize: Literal["sentences", "tokens", "sum"] = "sentences",
                 beam_size: int = 100, word_beam_size: int = 10, shift_size: int = 1,
                 optimizer: dict | None = None, lr_scheduler: dict | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = InOrderRNNG(vocab_size, n_actions, input_size, hidden_size, num_layers,
                                 dropout, legal_softmax, max_open, max_consecutive)
        self.beam = BeamSettings(beam_size, word_beam_size, shift_size)

    def setup(self, stage: str) -> None:
        """The DataModule's vocabularies; its actions must be in an order the model reads."""
        trainer = attached_trainer(self)
        order = getattr(trainer.datamodule, "action_order", None) if trainer else None
        if order is not None and order not in self.model.action_orders:
            raise InputError(f"data.action_order is {order}, but {type(self.model).__name__} "
                             f"reads {' or '.join(self.model.action_orders)} actions; set "
                             f"data.action_order: {self.model.action_orders[0]}")
        super().setup(stage)

    def _joint(self, batch: ActionBatch, stage: str) -> Tensor:
        """The top-down recipe's, each sentence's ``FINISH`` counted among its actions."""
        return super()._joint(replace(batch, n_actions=batch.n_actions + batch.words.size(0)),
                              stage)

    def best_tree(self, result: SearchResult, words: Sequence[str]) -> Any:
        """The best tree of a search over ``words`` (an ``nltk.Tree``, words as leaves)."""
        ids = [a for a in result.parses[0][0] if a != self.model.finish_action]
        return tree_of(self.action_vocab.decode(ids), list(words), "in_order")
