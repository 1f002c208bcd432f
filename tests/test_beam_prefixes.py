"""Sentences of one batch that begin alike share their search (``prefix_leaders``): which
sentence leads each at each word, on hand-set words; a batch of sentences that share
prefixes (a pair parting at its fourth word, three parting at their second, a duplicate, one
of another length, pieces whose word ends differ) gives each sentence's search alone
(n-best lists identical, numbers to 1e-12 in float64) for every transition model's search
state; and the prefix a duplicate shares is computed once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_beam_action_cache import random_model as action_transformer
from test_beam_pool import assert_same_search
from test_beam_pool import random_model as rnng_family

from synlm.transition.beam import BeamSettings, prefix_leaders, search_sentences
from synlm.transition.cag import CAG
from synlm.transition.in_order_rnng import InOrderRNNG
from synlm.transition.model import TransitionModel
from synlm.transition.rnng import RNNG

PAD = 0


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    words = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return words, torch.tensor([len(r) for r in rows])


#: 1 parts from 0 at its fourth word; 2, 3 and 4 from 0 at their second (4 follows 3 until
#: its fifth); 5 is 0 again; 6 is 0 shorter by a word.
BATCH = [[3, 5, 7, 9, 11, 2], [3, 5, 7, 4, 11, 2], [3, 6, 8, 8, 1, 9], [3, 4, 8, 8, 1, 9],
         [3, 4, 8, 8, 2, 9], [3, 5, 7, 9, 11, 2], [3, 5, 7, 9, 11]]


def test_each_sentence_follows_the_first_that_begins_as_it_does() -> None:
    words, lengths = padded(BATCH)
    leaders = prefix_leaders(words, lengths)
    assert leaders.shape == (7, 7)  # pointers 0..6 (the last: the end), sentences
    assert leaders.tolist() == [
        # 0  1  2  3  4  5  6
        [0, 0, 0, 0, 0, 0, 6],  # word 1: the six of length 6 alike
        [0, 0, 2, 3, 3, 0, 6],
        [0, 0, 2, 3, 3, 0, 6],
        [0, 1, 2, 3, 3, 0, 6],
        [0, 1, 2, 3, 4, 0, 6],
        [0, 1, 2, 3, 4, 0, 6],
        [0, 1, 2, 3, 4, 0, 6],  # the end: 5 is 0's duplicate
    ]


def test_pieces_part_where_their_word_ends_do() -> None:
    words, lengths = padded([[3, 5, 7, 9], [3, 5, 7, 9]])
    ends = torch.tensor([[True, False, True, True], [True, True, True, True]])
    assert prefix_leaders(words, lengths, ends).T.tolist() == [[0] * 5, [0, 1, 1, 1, 1]]


MODELS: dict[str, Callable[[], TransitionModel]] = {
    "rnng": lambda: rnng_family(RNNG),
    "in_order_rnng": lambda: rnng_family(InOrderRNNG),
    "cag": lambda: rnng_family(CAG),
    "plm": lambda: action_transformer("causal"),
    "plm_mask": lambda: action_transformer("plm_mask"),
    "tg": lambda: action_transformer("tg"),
}


@pytest.mark.parametrize("name", MODELS)
def test_a_batch_that_shares_prefixes_searches_each_sentence_as_alone(name: str) -> None:
    """Also with a stack bound small enough that beams empty and are searched again."""
    model = MODELS[name]()
    words, lengths = padded(BATCH)
    for max_stack in (100, 8):
        settings = BeamSettings(12, 4, 1, max_stack=max_stack)
        together = search_sentences(model, words, lengths, settings)
        alone = search_sentences(model, words, lengths, BeamSettings(
            12, 4, 1, max_stack=max_stack, batch_size=1))
        assert_same_search(together, alone)
        assert together[5].parses == together[0].parses


def test_pieces_that_share_prefixes_search_as_alone() -> None:
    words, lengths = padded(BATCH[:5])
    ends = torch.ones_like(words, dtype=torch.bool)
    ends[1, 1] = ends[3, 2] = False  # 1 parts from 0 at its second piece, 4 from 3 at its third
    for kind in (RNNG, InOrderRNNG):
        model = rnng_family(kind, 3)
        together = search_sentences(model, words, lengths, BeamSettings(12, 4, 1), ends)
        alone = search_sentences(model, words, lengths, BeamSettings(12, 4, 1, batch_size=1),
                                 ends)
        assert_same_search(together, alone)


@pytest.mark.parametrize("name", ["rnng", "tg"])
def test_a_duplicate_sentence_costs_nothing(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows whose next actions a search computes: a sentence and its duplicate, as many
    as the sentence alone."""
    model = MODELS[name]()
    rows: list[int] = []
    # the RNNG's search asks for its steps in two parts, the TG's whole
    method = "split_log_probs" if name == "rnng" else "next_log_probs"
    log_probs = getattr(model, method)

    def counting(state, words, legal, **kwargs):  # type: ignore[no-untyped-def]
        rows.append(int(legal.any(1).sum()))
        return log_probs(state, words, legal, **kwargs)

    monkeypatch.setattr(model, method, counting)
    words, lengths = padded(BATCH[:1])
    search_sentences(model, words, lengths, BeamSettings(12, 4, 1))
    alone, rows[:] = list(rows), []
    words, lengths = padded([BATCH[0], BATCH[0]])
    search_sentences(model, words, lengths, BeamSettings(12, 4, 1))
    assert rows == alone and sum(alone) > 0
