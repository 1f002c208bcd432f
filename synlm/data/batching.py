"""Turning encoded corpora into batches: AWD-style streams, padded sentences and RNNG
action sequences.

Every sentence w1..wn is a *unit* of inputs ``[<eos>, w1, ..., wn]`` with targets
``[w1, ..., wn, <eos>]``. A stream is the concatenation of a split's units plus one
closing ``<eos>``; per-token gold arrays are aligned to the same positions. In action mode a
sentence is an ``ActionItem``: its word ids and the ids of the actions that build its tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from synlm.errors import InputError
from synlm.outputs import ActionBatch, Batch
from synlm.syntax import Sentence
from synlm.syntax.paths import PathKind, path_lengths

#: Arrays aligned token by token with a stream (first dim = position).
TokenArrays = dict[str, np.ndarray]

#: Per-row gold of sentence mode, built item by item from the sentence: field -> (the kind
#: of tree, the field of its (B,) row mask); a row's value is a (W, W) matrix over its words
#: with BOS and EOS (``synlm.syntax.paths``), padded with 0 to the batch's largest.
PATH_FIELDS: dict[str, tuple[PathKind, str]] = {
    "path_lengths": ("constituency", "path_mask"),
    "dep_path_lengths": ("dependency", "dep_path_mask"),
}


@dataclass
class Columns:
    """A stream cut into contiguous columns: every array is (C, positions)."""

    arrays: dict[str, torch.Tensor]

    @property
    def length(self) -> int:
        return self.arrays["tokens"].size(1)

    @classmethod
    def cut(cls, stream: TokenArrays, n_columns: int, rank: int = 0, world_size: int = 1
            ) -> Columns:
        """AWD ``batchify``: trim the stream to a multiple of ``n_columns * world_size``,
        cut it into that many contiguous columns and keep this rank's ``n_columns``."""
        total = n_columns * world_size
        per_column = len(stream["tokens"]) // total
        if per_column < 2:
            raise InputError(
                f"a stream of {len(stream['tokens'])} tokens is too short for {total} columns"
            )
        keep = slice(rank * n_columns, (rank + 1) * n_columns)
        arrays = {}
        for name, array in stream.items():
            cols = array[: per_column * total].reshape(total, per_column, *array.shape[1:])
            arrays[name] = torch.from_numpy(np.ascontiguousarray(cols[keep]))
        return cls(arrays)

    def window(self, start: int, length: int) -> Batch:
        """Inputs at positions [start, start+length), targets one position later."""
        a = self.arrays
        tokens = a["tokens"][:, start : start + length]
        targets = a["tokens"][:, start + 1 : start + 1 + length]
        fields: dict[str, Any] = {
            name: a[name][:, start : start + length]
            for name in a if name not in ("tokens", "dep_offsets")
        }
        if "dep_offsets" in a:
            fields["dep_targets"], inside = self._dependents(start, length)
            fields["dep_mask"] = fields["dep_mask"] & inside
        return Batch(tokens=tokens, targets=targets, mask=torch.ones_like(tokens, dtype=torch.bool),
                     n_targets=targets.numel(), **fields)

    def _dependents(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids (C, T, D) of each position's future dependents, from stored offsets,
        and where they lie inside the column (a dependent past its end is masked)."""
        offsets = self.arrays["dep_offsets"][:, start : start + length]  # (C, T, D)
        positions = torch.arange(start, start + length)[None, :, None] + offsets
        inside = positions < self.length
        positions = positions.clamp(max=self.length - 1)
        ids = self.arrays["tokens"].gather(1, positions.flatten(1)).view_as(offsets)
        return ids, inside


def awd_window_lengths(n_positions: int, bptt: int, rng: np.random.Generator) -> list[int]:
    """Merity et al. 2018 §4.1: bptt w.p. 0.95 else bptt/2, then N(that, 5), floor 5,
    cut to what is left (salesforce/awd-lstm-lm main.py:180-182)."""
    lengths, i = [], 0
    while i < n_positions - 1:
        base = bptt if rng.random() < 0.95 else bptt / 2
        length = max(5, int(rng.normal(base, 5)))
        length = min(length, n_positions - 1 - i)
        lengths.append(length)
        i += length
    return lengths


def fixed_window_lengths(n_positions: int, bptt: int) -> list[int]:
    return [min(bptt, n_positions - 1 - i) for i in range(0, n_positions - 1, bptt)]


class ResumableLoader:
    """Yields batch ``i`` of one pass for i = 0 .. len - 1 in order (subclasses say what batch
    ``i`` is). It has a length, so Lightning does not prefetch, and it is stateful: Lightning
    saves ``state_dict()`` in checkpoints and a resumed run continues at the next batch of
    the same epoch."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.consumed = 0
        self._resume_at = 0

    def __len__(self) -> int:  # pragma: no cover
        raise NotImplementedError

    def batch(self, i: int) -> Batch | ActionBatch:  # pragma: no cover
        raise NotImplementedError

    def __iter__(self) -> Iterator[Batch | ActionBatch]:
        self.consumed, self._resume_at = self._resume_at, 0
        while self.consumed < len(self):
            self.consumed += 1
            yield self.batch(self.consumed - 1)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("epoch") == self.epoch and state["consumed"] < len(self):
            self._resume_at = state["consumed"]


class StreamLoader(ResumableLoader):
    """Yields the windows of one pass over ``columns`` in order."""

    def __init__(self, columns: Columns, lengths: Sequence[int], epoch: int = 0) -> None:
        super().__init__(epoch)
        self.columns = columns
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int).tolist()
        self.lengths = list(lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, i: int) -> Batch:
        return self.columns.window(self.starts[i], self.lengths[i])


def token_budget_batches(lengths: np.ndarray, max_tokens: int, rng: np.random.Generator
                         ) -> list[np.ndarray]:
    """fairseq's ``--max-tokens`` batching: items by length (equal lengths in random order),
    cut greedily so that rows × longest row ≤ ``max_tokens``; the batches in random order.
    Returns arrays of item indices."""
    too_long = np.flatnonzero(lengths > max_tokens)
    if too_long.size:
        i = int(too_long[0])
        raise InputError(f"item {i} has {int(lengths[i])} tokens, more than data.max_tokens="
                         f"{max_tokens}; raise max_tokens or set data.max_length")
    order = _by_length(lengths, rng)
    batches, start, longest = [], 0, 0
    for end, item in enumerate(order):
        longest = max(longest, int(lengths[item]))
        if (end + 1 - start) * longest > max_tokens:
            batches.append(order[start:end])
            start, longest = end, int(lengths[item])
    batches.append(order[start:])
    return [batches[i] for i in rng.permutation(len(batches))]


def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator
                   ) -> list[np.ndarray]:
    """rnng-pytorch's batching: items by length (equal lengths in random order), cut into
    batches of ``batch_size`` (the last may be smaller); the batches in random order. Returns
    arrays of item indices."""
    order = _by_length(lengths, rng)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _by_length(lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Item indices sorted by length, equal lengths in an order drawn from ``rng``."""
    order = rng.permutation(len(lengths))
    return order[np.argsort(lengths[order], kind="stable")]


def _rank_share(batches: list[np.ndarray], rank: int, world_size: int) -> list[np.ndarray]:
    """Rank ``rank``'s batches: ``rank``, ``rank + world_size``, ... of ``batches``, the list
    first padded by repeating its first batches so every rank runs the same number of steps."""
    batches = batches + batches[: -len(batches) % world_size]
    return batches[rank::world_size]


class SentenceLoader(ResumableLoader):
    """Yields padded batches of ``dataset``'s items, each given by its item indices and
    padded by ``collate`` (units by default; ``collate_actions`` in action mode)."""

    def __init__(self, dataset: torch.utils.data.Dataset | Sequence[Any],
                 batches: list[np.ndarray], epoch: int = 0,
                 collate: Callable[[list[Any]], Batch | ActionBatch] | None = None) -> None:
        super().__init__(epoch)
        self.dataset = dataset
        self.batches = batches
        self.collate = collate or collate_units

    def __len__(self) -> int:
        return len(self.batches)

    def batch(self, i: int) -> Batch | ActionBatch:
        return self.collate([self.dataset[int(j)] for j in self.batches[i]])


class ShuffledLoader(SentenceLoader):
    """Batches of ``batch_size`` units in an order redrawn per epoch from ``(seed, epoch)``
    (the last batch may be smaller), so that a resumed run draws the same order. With
    ``world_size`` ranks the order is first padded by repeating its first units to a
    multiple of ``world_size``, and rank r takes units r, r + world_size, ... (as torch's
    ``DistributedSampler``). ``collate``: as ``SentenceLoader``'s."""

    def __init__(self, dataset: torch.utils.data.Dataset, batch_size: int, seed: int,
                 epoch: int = 0, rank: int = 0, world_size: int = 1,
                 collate: Callable[[list[Any]], Batch | ActionBatch] | None = None) -> None:
        order = np.random.default_rng([seed, epoch]).permutation(len(dataset))
        order = np.concatenate([order, order[: -len(order) % world_size]])[rank::world_size]
        super().__init__(dataset, [order[i : i + batch_size]
                                   for i in range(0, len(order), batch_size)], epoch, collate)


class TokenBudgetLoader(SentenceLoader):
    """Sentence batches of at most ``max_tokens`` padded tokens (``token_budget_batches``),
    redrawn per epoch from ``(seed, epoch)``. With ``world_size`` ranks, rank r takes batches
    r, r + world_size, ...; the list is first padded by repeating its first batches so every
    rank runs the same number of steps. ``collate``: as ``SentenceLoader``'s."""

    def __init__(self, dataset: torch.utils.data.Dataset, lengths: np.ndarray, max_tokens: int,
                 seed: int, epoch: int = 0, rank: int = 0, world_size: int = 1,
                 collate: Callable[[list[Any]], Batch | ActionBatch] | None = None) -> None:
        batches = token_budget_batches(lengths, max_tokens,
                                       np.random.default_rng([seed, epoch]))
        super().__init__(dataset, _rank_share(batches, rank, world_size), epoch, collate)


class BucketLoader(SentenceLoader):
    """Batches of items of similar length, as RNNGs are trained (rnng-pytorch): the items by
    ``lengths``, equal lengths in random order, cut into batches of ``batch_size`` items
    (``length_batches``) or, with ``max_tokens``, of at most that many padded positions
    (``token_budget_batches``); the batches in random order. Redrawn per epoch from
    ``(seed, epoch)``; with ``world_size`` ranks, rank r takes batches r, r + world_size, ...
    (as ``TokenBudgetLoader``)."""

    def __init__(self, dataset: Sequence[Any], lengths: np.ndarray, batch_size: int,
                 max_tokens: int | None, seed: int, epoch: int = 0, rank: int = 0,
                 world_size: int = 1,
                 collate: Callable[[list[Any]], Batch | ActionBatch] | None = None) -> None:
        rng = np.random.default_rng([seed, epoch])
        batches = (length_batches(lengths, batch_size, rng) if max_tokens is None
                   else token_budget_batches(lengths, max_tokens, rng))
        super().__init__(dataset, _rank_share(batches, rank, world_size), epoch, collate)


class UnitDataset(torch.utils.data.Dataset):
    """One unit (sentence) per item, sliced out of a stream's arrays, plus the per-row gold
    ``paths`` (``PATH_FIELDS``) built from its sentence."""

    def __init__(self, stream: TokenArrays, bounds: np.ndarray, sentences: list[Any],
                 paths: Sequence[str] = ()) -> None:
        self.stream = stream
        self.bounds = bounds  # (S + 1,) start of each unit in the stream
        self.sentences = sentences
        self.paths = tuple(paths)

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, i: int) -> tuple[dict[str, np.ndarray], Any]:
        lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
        # targets run one past the unit: the next unit's <eos>
        item = {name: array[lo:hi] for name, array in self.stream.items()}
        item["targets"] = self.stream["tokens"][lo + 1 : hi + 1]
        if "dep_offsets" in item:
            positions = np.arange(lo, hi)[:, None] + item.pop("dep_offsets")
            item["dep_targets"] = self.stream["tokens"][np.minimum(positions, hi)]
        for name in self.paths:
            kind, mask = PATH_FIELDS[name]
            found = path_lengths(self.sentences[i], kind)  # (n + 2, n + 2) or None
            item[name] = np.zeros((0, 0), np.int64) if found is None else found
            item[mask] = np.array(found is not None)
        return item, self.sentences[i]


def collate_units(items: list[tuple[dict[str, np.ndarray], Any]]) -> Batch:
    """Pad units to the longest (pad id 0, masked out) into a ``Batch``."""
    lengths = [len(item["tokens"]) for item, _ in items]
    width = max(lengths)
    fields: dict[str, Any] = {}
    per_row = {mask for _, mask in PATH_FIELDS.values()}
    for name in items[0][0]:
        if name in PATH_FIELDS:
            fields[name] = _padded_squares([item[name] for item, _ in items])
            continue
        if name in per_row:
            fields[name] = torch.from_numpy(np.array([item[name] for item, _ in items]))
            continue
        first = items[0][0][name]
        out = np.zeros((len(items), width, *first.shape[1:]), dtype=first.dtype)
        for row, (item, _) in enumerate(items):
            out[row, : lengths[row]] = item[name]
        fields[name] = torch.from_numpy(out)
    lengths_t = torch.tensor(lengths)
    mask = torch.arange(width)[None, :] < lengths_t[:, None]
    for name in ("distance_mask", "span_mask", "dep_mask", "dep_rows"):
        if name in fields:
            fields[name] &= mask if fields[name].dim() == 2 else mask[..., None]
    fields.pop("dep_offsets", None)
    return Batch(mask=mask, lengths=lengths_t, trees=[s for _, s in items],
                 n_targets=sum(lengths), **fields)


class ActionItem(NamedTuple):
    """One sentence in action mode: its word ids, the ids of the actions that build its tree
    and the ``Sentence`` itself; over subwords, its pieces' ids and which piece ends each
    word (``word_ends``)."""

    words: np.ndarray  # (n,) long
    actions: np.ndarray  # (a,) long
    sentence: Sentence
    word_ends: np.ndarray | None = None  # (n,) bool


def collate_actions(items: list[ActionItem]) -> ActionBatch:
    """Pad word ids with 0, action ids with -1 and word ends with False into an
    ``ActionBatch``."""
    word_lengths = [len(item.words) for item in items]
    action_lengths = [len(item.actions) for item in items]
    subwords = items[0].word_ends is not None
    ends = _padded([item.word_ends for item in items], 0).bool() if subwords else None
    return ActionBatch(words=_padded([item.words for item in items], 0),
                       actions=_padded([item.actions for item in items], -1),
                       word_lengths=torch.tensor(word_lengths),
                       action_lengths=torch.tensor(action_lengths),
                       sentences=[item.sentence for item in items],
                       n_words=int(ends.sum()) if subwords else sum(word_lengths),
                       n_actions=sum(action_lengths), word_ends=ends)


def _padded_squares(squares: list[np.ndarray]) -> torch.Tensor:
    """(len(squares), W, W), W the largest side: each (w, w) square top-left, 0 past it."""
    side = max(square.shape[0] for square in squares)
    out = np.zeros((len(squares), side, side), dtype=np.int64)
    for i, square in enumerate(squares):
        out[i, : square.shape[0], : square.shape[1]] = square
    return torch.from_numpy(out)


def _padded(rows: list[np.ndarray], value: int) -> torch.Tensor:
    """(len(rows), longest) long: each row left-aligned, ``value`` after it."""
    out = np.full((len(rows), max(len(row) for row in rows)), value, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)
