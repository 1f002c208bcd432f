"""The statistics of a comparison, on per-item outcomes (``True``: the item is correct)
grouped in units (a BLiMP paradigm, a SyntaxGym suite, a Marvin & Linzen Table 1 row):

- ``bootstrap_interval``: the item bootstrap (Efron & Tibshirani 1993, *An Introduction to
  the Bootstrap*, ch. 6 and 13): the items of each unit are resampled with replacement within
  the unit, the aggregate of the unit accuracies (``mean_of_units``, the headline of BLiMP
  and SyntaxGym; ``pooled``) is recomputed on every resample, and the interval is the
  percentile interval of those. Only the items vary: the units are fixed by the benchmark.
- ``paired_test``: two models on the same items. The difference of their aggregates, a
  paired bootstrap interval of it (the same resampled items for both models) and a
  two-sided p-value from a paired approximate randomisation test (Noreen 1989; Riezler &
  Maxwell 2005, "On Some Pitfalls in Automatic Evaluation and Significance Testing for MT";
  Dror et al. 2018, "The Hitchhiker's Guide to Testing Statistical Significance in NLP"):
  under the null hypothesis the two models are exchangeable on each item, so each item's two
  outcomes are swapped with probability 1/2, and p = (1 + #{|d*| >= |d|}) / (1 + R) over R
  shuffles (the +1 counts the observed assignment: p is never 0, at least 1 / (1 + R)).

Every resampling draws from ``numpy.random.default_rng(seed)``, unit by unit in the units'
order, one ``integers`` draw of shape (resamples, items) per unit, so a result is the same on
every run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from synlm.errors import InputError

#: An aggregate of unit accuracies: ``(accuracy (..., U), items (U,)) -> (...)``, the
#: units' accuracies (under each resample: leading axes) and their numbers of items.
Aggregate = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Outcomes by unit (``synlm.tse.measures.item_outcomes``), or one unit's as a plain sequence.
Outcomes = Mapping[str, Sequence[bool]] | Sequence[bool]
#: Differences of aggregates closer than this count as equal in the randomisation test
#: (a shuffle that reproduces the observed difference up to rounding is as extreme).
_TIE = 1e-12


def mean_of_units(accuracy: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The unweighted mean of the unit accuracies: BLiMP's accuracy (over paradigms), the
    SG score (over suites), a Marvin & Linzen section (over rows). (..., U) -> (...)."""
    return accuracy.mean(axis=-1)


def pooled(accuracy: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The accuracy over all the units' items together: correct items over items.
    (..., U), (U,) -> (...)."""
    return accuracy @ items / items.sum()


def outcome_arrays(outcomes: Outcomes) -> dict[str, np.ndarray]:
    """Outcomes as boolean arrays by unit; a plain sequence is one unit."""
    by_unit = outcomes if isinstance(outcomes, Mapping) else {"": outcomes}
    arrays = {unit: np.asarray(values, dtype=bool) for unit, values in by_unit.items()}
    if not arrays:
        raise InputError("no unit to aggregate")
    empty = [unit for unit, values in arrays.items() if values.size == 0]
    if empty:
        raise InputError(f"unit {empty[0]!r} has no items")
    return arrays


def unit_accuracies(sets: Sequence[Mapping[str, np.ndarray]], resamples: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The accuracy of each unit of each outcome set (models, or seeds), as observed and
    under ``resamples`` item resamples, the same resampled items for every set: point
    (S, U), resampled (S, R, U), and the units' numbers of items (U,)."""
    units = list(sets[0])
    for other in sets[1:]:
        if list(other) != units:
            raise InputError(f"outcomes on different units cannot be resampled together: "
                             f"{units} and {list(other)}")
        for unit in units:
            if other[unit].size != sets[0][unit].size:
                raise InputError(f"outcomes on different items cannot be resampled together: "
                                 f"unit {unit!r} has {sets[0][unit].size} items in one and "
                                 f"{other[unit].size} in another")
    items = np.array([sets[0][unit].size for unit in units], dtype=np.int64)  # (U,)
    point = np.empty((len(sets), len(units)))  # (S, U)
    resampled = np.empty((len(sets), resamples, len(units)))  # (S, R, U)
    for k, unit in enumerate(units):
        stacked = np.stack([outcomes[unit] for outcomes in sets])  # (S, n)
        point[:, k] = stacked.mean(axis=1)
        drawn = rng.integers(0, items[k], size=(resamples, items[k]))  # (R, n) item indices
        resampled[:, :, k] = stacked[:, drawn].mean(axis=2)  # (S, R, n) -> (S, R)
    return point, resampled, items


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values`` (R,)."""
    if not 0 < level < 1:
        raise InputError(f"the interval's level must be in (0, 1), got {level}")
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def check_resamples(resamples: int) -> None:
    """A one-line error unless ``resamples`` is at least 1."""
    if resamples < 1:
        raise InputError(f"resamples must be at least 1, got {resamples}")


def bootstrap_interval(outcomes_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                       resamples: int = 1000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile interval of ``aggregate`` under the item bootstrap: each unit's items
    resampled with replacement within the unit, ``resamples`` times (one unit: its outcomes
    as a plain sequence, or a mapping of one)."""
    check_resamples(resamples)
    _, resampled, items = unit_accuracies([outcome_arrays(outcomes_by_unit)], resamples,
                                          np.random.default_rng(seed))
    return percentile_interval(aggregate(resampled[0], items), level)


def paired_test(a_by_unit: Outcomes, b_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                resamples: int = 1000, level: float = 0.95, seed: int = 0
                ) -> dict[str, float | int]:
    """Model A against model B on the same items (the same units, item i of a unit the same
    item for both): ``a``, ``b``, their ``difference`` (a - b), its paired bootstrap interval
    (``low``, ``high``: both models' outcomes resampled on the same items), the two-sided
    ``p_value`` of the paired approximate randomisation test (each item's outcomes swapped
    between the models with probability 1/2, ``resamples`` times), and the ``units``,
    ``items`` and ``resamples`` behind them. The bootstrap draws come first, then the swaps,
    from one ``default_rng(seed)``."""
    check_resamples(resamples)
    a, b = outcome_arrays(a_by_unit), outcome_arrays(b_by_unit)
    rng = np.random.default_rng(seed)
    point, resampled, items = unit_accuracies([a, b], resamples, rng)
    value_a, value_b = (float(aggregate(point[s], items)) for s in (0, 1))
    difference = value_a - value_b
    low, high = percentile_interval(
        aggregate(resampled[0], items) - aggregate(resampled[1], items), level)
    shuffled = np.empty((2, resamples, len(items)))  # (2, R, U): both models' accuracies
    for k, unit in enumerate(a):
        swap = rng.integers(0, 2, size=(resamples, items[k]), dtype=bool)  # (R, n)
        shuffled[0, :, k] = np.where(swap, b[unit], a[unit]).mean(axis=1)
        shuffled[1, :, k] = np.where(swap, a[unit], b[unit]).mean(axis=1)
    null = aggregate(shuffled[0], items) - aggregate(shuffled[1], items)  # (R,)
    extreme = int(np.count_nonzero(np.abs(null) >= abs(difference) - _TIE))
    return {"a": value_a, "b": value_b, "difference": difference, "low": low, "high": high,
            "p_value": (1 + extreme) / (1 + resamples), "units": len(items),
            "items": int(items.sum()), "resamples": resamples}
