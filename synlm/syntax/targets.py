"""Per-token gold syntax targets, aligned to model inputs, built in one numpy pass per corpus.

Token layout (agreed with ``synlm.data``): sentence ``w1..wn`` is a *unit* of ``n + 1`` inputs
``[<eos>, w1, .., wn]`` with targets ``[w1, .., wn, <eos>]``; row ``i`` of a unit is input ``i``.
Stream mode concatenates the units of a split, sentence mode pads one unit per row. All arrays
here are flat over the concatenated units; ``offsets[u]`` is the first row of unit ``u``.

- ``distances`` (SYD, docs/reference-implementations.md §2.4): row ``i >= 2`` holds
  ``d(w_{i-1}, w_i)`` from
  ``tree_to_distances``; rows 0 (gap ``w_n'``-``<eos>``, the root) and 1 (gap ``<eos>``-``w1``,
  the sentence boundary) both hold ``boundary``, a corpus-wide constant that defaults to the
  largest gap + 1 (SDLM's ``max + 1``). Pass the training split's value to the other splits.
- ``spans`` (PaLM-S, window ``M``, ``K = M - 1`` slots, docs/reference-implementations.md §4.5
  with the alignment
  fixed): row ``i`` slot ``v`` is the span of ``K - v`` words ending at the word before input
  ``i``; a gold span of the right-branching binarisation (single words and the whole sentence
  excluded) gets weight = its length, rows are normalised to sum 1. Spans ending at ``w_n``
  belong to the next unit's row 0 in stream mode and are dropped in sentence mode.
- ``dep_targets`` (DMLM, docs/reference-implementations.md §5.1): row 0 (``<eos>`` standing for
  ROOT) holds the
  root's dependents, row ``i`` every later word linked to ``w_i`` by an arc, and row ``n`` also
  the final ``<eos>``. Entries are positive offsets ``o``: input row ``i + o`` of the same
  unit; the final ``<eos>`` is offset ``n + 1 - i``, one past the unit (the next unit's row 0 in
  stream mode, the last target in sentence mode). Padded ``(N, D)`` with ``dep_mask``;
  ``dep_row_mask`` marks the rows of sentences that have heads (empty sets still count there).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from itertools import chain
from pathlib import Path

import numpy as np

from synlm.errors import InputError
from synlm.runtime.files import follow_umask
from synlm.syntax.distances import distances_and_spans
from synlm.syntax.heads import tree_to_heads
from synlm.syntax.sentence import Sentence


@dataclass
class SyntaxTargets:
    """Flat targets over ``N = sum(n_u + 1)`` rows, plus one with ``closing_eos`` (see the
    module docstring)."""

    offsets: np.ndarray  # (U + 1,) int64, unit u is rows offsets[u]:offsets[u + 1]
    distances: np.ndarray  # (N,) float32
    distance_mask: np.ndarray  # (N,) bool
    spans: np.ndarray  # (N, K) float32, rows sum to 1 where span_mask
    span_mask: np.ndarray  # (N,) bool
    dep_targets: np.ndarray  # (N, D) int64 positive offsets, 0 where padded
    dep_mask: np.ndarray  # (N, D) bool
    dep_row_mask: np.ndarray  # (N,) bool
    boundary: float = 0.0  # the root/boundary distance used

    def unit(self, u: int) -> dict[str, np.ndarray]:
        """The arrays of unit ``u`` (sentence mode)."""
        a, b = int(self.offsets[u]), int(self.offsets[u + 1])
        return {f.name: getattr(self, f.name)[a:b] for f in fields(self)
                if f.name not in ("offsets", "boundary")}


def _ragged_arange(lengths: np.ndarray) -> np.ndarray:
    """``concat([arange(l) for l in lengths])`` without a Python loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total, dtype=np.int64) - starts


def max_distance(sentences: Sequence[Sentence]) -> int:
    """Largest gap distance over the sentences with trees (0 if none)."""
    return max((max(distances_and_spans(s.tree, len(s.words))[0], default=0) for s in sentences
                if s.tree is not None), default=0)


def build_targets(sentences: Sequence[Sentence], mode: str = "stream", span_window: int = 10,
                  boundary: float | None = None, heads_from_trees: bool = True,
                  closing_eos: bool = False) -> SyntaxTargets:
    """Distance, span and dependency targets of ``sentences`` (module docstring for layout).

    ``mode`` is ``"stream"`` or ``"sentence"`` (only the row-0 span targets differ).
    ``heads_from_trees`` derives heads by Collins head rules for sentences with a tree and no
    ``heads``. ``closing_eos`` (stream mode) adds one last row for a closing ``<eos>`` input
    after the last unit: it gets the last sentence's final spans and the root distance.
    """
    if mode not in ("stream", "sentence"):
        raise InputError(f"mode must be 'stream' or 'sentence', not {mode!r}")
    if closing_eos and mode != "stream":
        raise InputError("closing_eos only applies to stream mode")
    K = span_window - 1
    if K < 1:
        raise InputError(f"span_window must be >= 2, got {span_window}")
    lengths = np.array([len(s.words) for s in sentences], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths + 1)]).astype(np.int64)
    N = int(offsets[-1]) + closing_eos

    # one walk per tree: gap distances and binarised spans
    tree_units, gap_lists, span_lists = [], [], []
    for u, s in enumerate(sentences):
        if s.tree is not None:
            gaps, found = distances_and_spans(s.tree, len(s.words))
            tree_units.append(u)
            gap_lists.append(gaps)
            span_lists.append(np.asarray(found, dtype=np.int64).reshape(-1, 2))
    tree_units = np.asarray(tree_units, dtype=np.int64)
    tree_n = lengths[tree_units]
    all_gaps = np.fromiter(chain.from_iterable(gap_lists), dtype=np.float32,
                           count=int(np.maximum(tree_n - 1, 0).sum()))
    if boundary is None:
        boundary = float(all_gaps.max() + 1) if len(all_gaps) else 2.0

    # distances: rows 0/1 of each unit with a tree hold the boundary, rows 2..n the gaps
    distances = np.zeros(N, dtype=np.float32)
    distance_mask = np.zeros(N, dtype=bool)
    starts = offsets[tree_units]
    distances[starts] = boundary
    distances[starts + 1] = boundary
    gap_rows = np.repeat(starts + 2, tree_n - 1) + _ragged_arange(tree_n - 1)
    distances[gap_rows] = all_gaps
    distance_mask[np.repeat(starts, tree_n + 1) + _ragged_arange(tree_n + 1)] = True
    if closing_eos and len(sentences) and sentences[-1].tree is not None:
        distances[-1], distance_mask[-1] = boundary, True

    # spans: gold (i, j) half-open -> row offsets[u] + j + 1, slot K - (j - i), weight j - i
    spans = np.zeros((N, K), dtype=np.float32)
    if span_lists:
        counts = np.array([len(x) for x in span_lists], dtype=np.int64)
        ij = np.concatenate(span_lists)
        unit_of = np.repeat(tree_units, counts)
        length = ij[:, 1] - ij[:, 0]
        rows = offsets[unit_of] + ij[:, 1] + 1
        keep = (length <= K) & (length < lengths[unit_of])  # in the window, not the root
        if mode == "sentence":
            keep &= ij[:, 1] < lengths[unit_of]
        keep &= rows < N
        spans[rows[keep], K - length[keep]] = length[keep]
    totals = spans.sum(1)
    span_mask = totals > 0
    spans[span_mask] /= totals[span_mask, None]

    dep_targets, dep_mask, dep_row_mask = _dependency_targets(
        sentences, lengths, offsets, N, heads_from_trees)
    return SyntaxTargets(offsets, distances, distance_mask, spans, span_mask,
                         dep_targets, dep_mask, dep_row_mask, float(boundary))


def _dependency_targets(sentences: Sequence[Sentence], lengths: np.ndarray,
                        offsets: np.ndarray, N: int, heads_from_trees: bool
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    units, head_lists = [], []
    for u, s in enumerate(sentences):
        heads = s.heads
        if heads is None and heads_from_trees and s.tree is not None:
            heads = tree_to_heads(s.tree, n=len(s.words))
        if heads is not None:
            units.append(u)
            head_lists.append(heads)
    units = np.asarray(units, dtype=np.int64)
    n = lengths[units]
    row_mask = np.zeros(N, dtype=bool)
    row_mask[np.repeat(offsets[units], n + 1) + _ragged_arange(n + 1)] = True
    if len(units) == 0:
        return np.zeros((N, 0), np.int64), np.zeros((N, 0), bool), row_mask
    h = np.fromiter(chain.from_iterable(head_lists), dtype=np.int64, count=int(n.sum()))
    d = _ragged_arange(n) + 1
    lo = np.where(h == 0, 0, np.minimum(d, h))  # the earlier end of each arc (0 = ROOT)
    hi = np.maximum(d, h)
    base = np.repeat(offsets[units], n)
    rows = np.concatenate([base + lo, offsets[units] + n])  # plus <eos> at the last word
    offs = np.concatenate([hi - lo, np.ones(len(units), np.int64)])
    order = np.lexsort((offs, rows))
    rows, offs = rows[order], offs[order]
    first = np.searchsorted(rows, rows, side="left")
    slot = np.arange(len(rows)) - first
    D = int(slot.max()) + 1
    targets = np.zeros((N, D), dtype=np.int64)
    mask = np.zeros((N, D), dtype=bool)
    targets[rows, slot] = offs
    mask[rows, slot] = True
    return targets, mask, row_mask


def file_digest(paths: Sequence[str | os.PathLike]) -> str:
    """sha256 over the contents of ``paths`` (in order), for cache keys."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def cached_targets(sentences: Sequence[Sentence], cache_dir: str | os.PathLike, key: str,
                   **options: object) -> SyntaxTargets:
    """``build_targets(sentences, **options)`` cached as ``.npz`` under ``cache_dir``.

    ``key`` must identify the sentences (e.g. ``Corpus.cache_key()`` + split, or
    ``file_digest`` of the input files); the options are hashed in too. The file is written
    to a temporary name and moved into place with ``os.replace``.
    """
    digest = hashlib.sha256(f"{key}|{sorted(options.items())}".encode()).hexdigest()[:20]
    path = Path(cache_dir) / f"targets-{digest}.npz"
    if path.exists():
        with np.load(path) as z:
            return SyntaxTargets(**{f.name: (z[f.name] if f.name != "boundary"
                                             else float(z[f.name]))
                                    for f in fields(SyntaxTargets)})
    targets = build_targets(sentences, **options)  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    follow_umask(fd)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **asdict(targets))
    os.replace(tmp, path)
    return targets
