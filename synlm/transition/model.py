"""``TransitionModel``: what a model that generates trees provides, the contract the
recipe (``synlm.transition.lm.TransitionLM``) and the word-synchronous beam search
(``synlm.transition.beam``) rely on. A new family of transition LMs is one subclass of it
(one file) and a config that names it as the recipe's ``model.class_path``; the RNNG
(``synlm.transition.rnng``) and the action Transformers (``synlm.transition.action_transformer``)
are two.

A transition model scores a sentence x with a tree y as the product over the actions that
build y top-down (``NT(X)``, ``SHIFT`` generating the next word, ``REDUCE``)::

    log p(x, y) = Σ_t log p(a_t | a_<t) + Σ_i log p(x_i | a_<t(i))

Teacher forcing (``forward``) gives both sums for gold actions at once; search asks for
one step at a time of R rows: ``initial_state`` (R empty stacks), ``next_log_probs`` (the
next action's log-probabilities, the ``SHIFT`` column joint with the word it generates) and
``advance`` (apply one action per row), and what ends a parse (``finish_action``). The
searches (``synlm.transition.beam``, ``synlm.transition.particles``) take a
``TransitionModel``, the base the recipe, the registry and the command line recognise.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from torch import Tensor, nn

from synlm.transition.parser_state import Limits
from synlm.transition.types import SplitStep


class TransitionModel(nn.Module, metaclass=ABCMeta):
    """A generative transition LM over words and top-down actions (module docstring).

    The constructor's first two arguments are ``vocab_size`` (V, the DataModule's word
    vocabulary) and ``n_actions`` (its ``ActionVocab``: ``SHIFT``, ``REDUCE``, ``NT(X)``...),
    which the recipe passes in (the CLI links them from the data); the others are the
    family's own, and a config names them under ``model.init_args.model.init_args``.

    Attributes:
        n_actions: the action vocabulary's size.
        limits: the bounds on open constituents and consecutive ``NT``s that search keeps
            (``Limits``).
        action_orders: the ``data.action_order``s it decodes (the recipe refuses others).
        search_convention: its search's released surprisal convention
            (``synlm.transition.types.CONVENTIONS``).
        closing_actions: actions each sentence's sequence ends with besides those that
            build its tree (the in-order RNNG's ``FINISH``: 1), which the perplexities count.
        finish_action: the action that ends a parse after the last word (the in-order
            RNNG's ``FINISH``); None: the root's ``REDUCE`` ends it.
        closes_without_choice: after the last word only one action is legal at each step
            (top-down: the open constituents' ``REDUCE``), so that a search normalised
            over the legal actions gives the end of the sentence probability 1
            (``synlm.transition.beam.SearchSettings.end_is_certain``); False where the
            trees can still grow (the in-order RNNG's ``NT`` and ``REDUCE`` compete with
            ``FINISH``).
    """

    n_actions: int
    limits: Limits
    action_orders: ClassVar[tuple[str, ...]]
    search_convention: ClassVar[str]
    closing_actions: ClassVar[int] = 0
    finish_action: int | None = None
    closes_without_choice: ClassVar[bool] = False

    @abstractmethod
    def forward(self, words: Tensor, actions: Tensor, word_lengths: Tensor) -> Any:
        """Teacher forcing: words (B, N) long, actions (B, A) long (padded with -1),
        word_lengths (B,) -> an ``RNNGOutput`` (``action_log_probs`` (B, A),
        ``word_log_probs`` (B, N), ``joint`` (B,): log p(x, y))."""

    @abstractmethod
    def initial_state(self, rows: int, stack_size: int, max_actions: int) -> Any:
        """R = ``rows`` empty stacks of ``stack_size`` slots, for up to ``max_actions``
        actions each: a state with a ``parser`` (``ParserState``), ``select`` and
        ``assign`` (``synlm.transition.types.TransitionState``)."""

    def search_state(self, rows: int, stack_size: int, max_actions: int) -> Any:
        """The state a search starts from: ``initial_state``'s by default; a family may
        give search a layout of its own with the same values (the RNNG's stacks as shared
        nodes, ``synlm.transition.stack_pool``)."""
        return self.initial_state(rows, stack_size, max_actions)

    @abstractmethod
    def next_log_probs(self, state: Any, words: Tensor, legal: Tensor,
                       renormalise: bool) -> Tensor:
        """(R, n_actions) log-probabilities of each row's next action given its next word
        ``words`` (R,): the ``SHIFT`` column is log p(SHIFT) + log p(word); ``legal``
        (R, n_actions) bool marks the actions the parser state allows, over which they are
        renormalised or not (``renormalise``, whose default in a family is its
        ``search_convention``)."""

    def split_log_probs(self, state: Any, words: Tensor, legal: Tensor,
                        renormalise: bool = True) -> SplitStep | None:
        """``next_log_probs`` in two parts (``SplitStep``: the actions' log-probabilities, and
        the word's of the rows asked for, with a cheap upper bound of it), so that a beam
        search computes the word softmax only where the word's successor may be kept
        (``synlm.transition.beam.step_log_probs``); the ``SHIFT`` column of
        ``next_log_probs`` is ``actions[r, SHIFT] + word_log_probs(r)``, the same numbers.
        None (this default): the family's words and actions share one softmax (the action
        Transformer's), so the word enters every action's probability."""
        return None

    def tree_actions(self, actions: Sequence[int]) -> list[int]:
        """The ids of a parse's actions that build its tree, in ``action_orders[0]``
        (a family whose parses end with an action of its own drops it)."""
        return list(actions)

    @abstractmethod
    def advance(self, state: Any, actions: Tensor, words: Tensor) -> Any:
        """The state after each row takes ``actions`` (R,) (``SHIFT`` generating
        ``words`` (R,); ``NO_ACTION``: the row is left as it is)."""
