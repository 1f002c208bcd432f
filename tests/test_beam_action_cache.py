"""The action Transformer's search cache (``ActionTransformerState``): a search's selection
(``move``: live items first in the cache, a kept item left in its cache row) gives the same
beam search as ``select`` (each item copied into its own row, in order) for PLM, PLM-mask
and TG, n-best lists identical and numbers to 1e-12 in float64; and ``move`` keeps each live
row's keys and values, in the first cache rows, copying only what a row keeps from another's
cache row; and the vocabulary's transposed word embeddings follow the embeddings."""

from __future__ import annotations

import pytest
import torch
from test_beam_pool import assert_same_search

from synlm.transition.action_cache import ActionTransformerState
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.beam import BeamSettings, search_sentences
from synlm.transition.types import RENORMALISED

V, LABELS = 20, 4  # words, nonterminals


def random_model(attention: str, seed: int = 0) -> ActionTransformer:
    """A tiny float64 model in eval mode, weights from U(-0.5, 0.5) (far from uniform
    distributions, so that the beams differ from step to step)."""
    torch.manual_seed(seed)
    model = ActionTransformer(V, 2 + LABELS, attention=attention, size=16, num_layers=2,
                              num_heads=4, ffn_size=32, dropout=0.0)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.5, 0.5)
    return model.double().eval()


@pytest.mark.parametrize("attention", ["causal", "plm_mask", "tg"])
@pytest.mark.parametrize("sizes", [(8, 4, 1), (24, 6, 2)])
def test_search_with_moved_caches_equals_selected_ones(
        attention: str, sizes: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Both conventions, and a stack bound small enough that beams empty and are searched
    again; the rows a selection copies gathered at most three at a time."""
    model = random_model(attention)
    probe = model.initial_state(1, 8, max_actions=10).cache
    monkeypatch.setattr(ActionTransformerState, "COPY_BYTES",
                        3 * probe[0].numel() * probe.element_size())
    generator = torch.Generator().manual_seed(0)
    words, lengths = torch.randint(1, V, (4, 9), generator=generator), torch.tensor([6, 2, 9, 4])
    for convention, max_stack in ((None, 100), (RENORMALISED, 8)):
        settings = BeamSettings(*sizes, max_stack=max_stack, convention=convention)
        moved = search_sentences(model, words, lengths, settings)
        with monkeypatch.context() as patch:
            patch.delattr(ActionTransformerState, "move")
            selected = search_sentences(model, words, lengths, settings)
        assert_same_search(moved, selected)
        assert all(len(r.parses) == sizes[1] for r in selected if r.parsed)


@torch.no_grad()
def filled_state(rows: int) -> ActionTransformerState:
    """``rows`` rows of a tiny PLM, each cache row filled with its row's number."""
    state = random_model("causal").initial_state(rows, 8, max_actions=10)
    state.cache = torch.arange(rows, dtype=state.cache.dtype)[:, None].expand(
        rows, state.cache[0].numel()).reshape(state.cache.shape).clone()
    return state


@torch.no_grad()
@pytest.mark.parametrize(("copy_bytes", "copied"), [
    (ActionTransformerState.COPY_BYTES, [2]),  # both rows gathered at once
    (1, [1, 1]),  # a row at a time: the same rows held
])
def test_move_puts_live_rows_first_and_copies_only_shared_ones(
        copy_bytes: int, copied: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ActionTransformerState, "COPY_BYTES", copy_bytes)
    R = 6
    index = torch.tensor([2, 5, 2, 0, 4, 1])
    live = torch.tensor([True, True, True, True, False, False])
    state, out = filled_state(R), filled_state(R)
    mine = state.cache
    copies = []
    original = torch.Tensor.index_copy_

    def counting(self: torch.Tensor, dim: int, at: torch.Tensor, source: torch.Tensor
                 ) -> torch.Tensor:
        copies.append(at.numel())
        return original(self, dim, at, source)

    torch.Tensor.index_copy_ = counting  # type: ignore[method-assign]
    try:
        moved = state.move(index, out, live)
    finally:
        torch.Tensor.index_copy_ = original  # type: ignore[method-assign]
    assert moved is out and out.cache is mine  # the cache moved, not copied
    assert sorted(out.slot.tolist()) == list(range(R))
    assert sorted(out.slot[live].tolist()) == [0, 1, 2, 3]  # the live rows first
    held = out.cache[out.slot, 0, 0, 0, 0, 0]
    assert held[live].tolist() == index[live].tolist()  # each live row's own keys and values
    # row 0 keeps cache row 2, row 3 cache row 0; rows 1 (cache row 5) and 2 (row 2 again)
    # are copied into cache rows 1 and 3
    assert out.slot[:4].tolist() == [2, 1, 3, 0] and copies == copied
    again = filled_state(4).move(torch.tensor([1, 3, 0]), filled_state(3),
                                 torch.tensor([False, True, True]))
    assert again.slot.tolist() == [2, 0, 1]  # into a cache of another size: copied first
    assert again.cache[:2, 0, 0, 0, 0, 0].tolist() == [3, 0]


def test_the_vocabulary_columns_follow_the_embeddings() -> None:
    """``_word_columns``: the word embeddings transposed, made again after an in-place
    change, a change of precision or a new tensor; never in the saved state."""
    model = random_model("causal")
    columns = model._word_columns()
    assert model._word_columns() is columns
    assert torch.equal(columns, model.embedding.weight.T) and columns.is_contiguous()
    with torch.no_grad():
        model.embedding.weight.mul_(2.0)
    assert torch.equal(model._word_columns(), model.embedding.weight.T)
    assert model.float()._word_columns().dtype == torch.float32
    model.embedding.weight = torch.nn.Parameter(torch.ones_like(model.embedding.weight))
    assert torch.equal(model._word_columns(), model.embedding.weight.T)
    assert not any("columns" in name for name in model.state_dict())
