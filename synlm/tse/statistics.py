"""The statistics of a comparison, on per-item outcomes (``True``: the item is correct)
grouped in units (a BLiMP paradigm, a SyntaxGym suite, a Marvin & Linzen Table 1 row):

- ``bootstrap_interval``: the item bootstrap (Efron & Tibshirani 1993, *An Introduction to
  the Bootstrap*, ch. 6 and 13): the items of each unit are resampled with replacement within
  the unit, the aggregate of the unit accuracies (``mean_of_units``, the headline of BLiMP
  and SyntaxGym; ``pooled``) is recomputed on every resample, and the interval is the
  percentile interval of those (``percentile_interval``). Only the items vary: the units are
  fixed by the benchmark.
- Several seeds of a model (``seed_draws``, ``two_level``): the two-level bootstrap. Each
  resample draws the seeds with replacement, then the items of each unit with replacement;
  the seeds were scored on the same items (a crossed design), so the drawn items are the same
  for every drawn seed, and an item's difficulty stays common to the seeds as it is in the
  data. The value is the mean over the drawn seeds of each seed's aggregate. One seed: the
  item bootstrap.
- ``paired_difference`` (``paired_test`` for one run a model): model A against model B on the
  same items. The difference of their aggregates, its paired bootstrap percentile interval
  (the same resampled items for both models; each model's seeds drawn on their own) and its
  two-sided p (``paired_p``). Where at least ``EXACT_BELOW`` items differ between the models
  (their paired difference, of seed means, is not 0), the p that inverts that interval
  (``inversion_p_value``): the least 1 - level at which the percentile interval excludes 0,
  so p < 1 - level exactly when the interval at that level excludes 0, at every level (Efron
  & Tibshirani 1993, ch. 15-16, on tests from confidence intervals); one of 0 (every
  resample on one side) says only p < 2 / R and is kept as that bound. Where fewer differ,
  the bootstrap's resamples fall on one side however weak the evidence (one item: p = 0), so
  p is the exact two-sided sign test over the items' paired differences (``sign_test``; ties
  dropped; one run a model: McNemar's exact test on the discordant items), and the interval
  and p are then two methods that may disagree.
- ``holm``: Holm's (1979) step-down adjustment of the p-values of the comparisons of one
  table, which holds the family-wise error rate. A p that is an upper bound (a bootstrap p of
  0, entered as 2 / R) makes the adjusted p it sets an upper bound too (``holm_bounds``); a
  NaN p (a comparison that could not be tested) is left out, as R's ``p.adjust`` leaves out
  ``NA``, and its adjusted p is NaN. With m comparisons Holm can reject at alpha only when
  2 m / R < alpha, hence ``RESAMPLES``.

Every resampling draws from ``numpy.random.default_rng(seed)`` (the items: unit by unit in
the units' order, one ``integers`` draw of shape (resamples, items) per unit) and
``default_rng((seed, 1))`` (the seeds, model by model), so a result is the same on every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from synlm.errors import InputError

#: An aggregate of unit accuracies: ``(accuracy (..., U), items (U,)) -> (...)``, the
#: units' accuracies (under each resample: leading axes) and their numbers of items.
Aggregate = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Outcomes by unit (``synlm.tse.measures.item_outcomes``), or one unit's as a plain sequence.
Outcomes = Mapping[str, Sequence[bool]] | Sequence[bool]
#: Differences closer to 0 than this count as 0 in the p-value (rounding of equal means).
_TIE = 1e-12
#: The default number of bootstrap resamples R: the least p it tells from 0 is 2 / R, so a
#: table's Holm adjustment over m comparisons can reach 0.05 for m up to 250.
RESAMPLES = 10_000
#: Fewer items than this on which the two models differ (a nonzero paired difference): the
#: paired test is the exact sign test (``sign_test``), not the bootstrap's.
EXACT_BELOW = 20
#: Which test gave a comparison's p: the paired bootstrap's inversion, or the exact sign test.
TESTS = ("bootstrap", "sign")


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


def _tail(resamples: int, level: float) -> int:
    """How many resamples each end of a ``level`` percentile interval leaves out:
    ceil(R (1 - level) / 2) - 1."""
    if not 0 < level < 1:
        raise InputError(f"the interval's level must be in (0, 1), got {level}")
    return max(math.ceil(resamples * (1 - level) / 2 - 1e-9) - 1, 0)


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values`` (R,): its order statistics
    k + 1 and R - k, k = ceil(R (1 - level) / 2) - 1 left out at each end (R = 1000, 95%: the
    25th smallest and the 25th largest), the interval that ``inversion_p_value`` inverts."""
    k = _tail(values.size, level)
    ordered = np.sort(values)
    return float(ordered[k]), float(ordered[values.size - 1 - k])


def inversion_p_value(values: np.ndarray) -> float:
    """The two-sided p-value of "the difference is 0" from its bootstrap resamples ``values``
    (R,): min(1, 2 min(#{d <= 0}, #{d >= 0}) / R), the least 1 - level at which
    ``percentile_interval`` excludes 0. The interval at ``level`` leaves out k resamples at
    each end and excludes 0 exactly when min(#{d <= 0}, #{d >= 0}) <= k, i.e. < R (1 - level)
    / 2, i.e. p < 1 - level. 0 when every resample lies on one side: p < 2 / R."""
    below = int(np.count_nonzero(values <= _TIE))
    above = int(np.count_nonzero(values >= -_TIE))
    return min(1.0, 2 * min(below, above) / values.size)


def resolution(resamples: int) -> float:
    """The least p a bootstrap of ``resamples`` resamples tells from 0: 2 / R (an
    ``inversion_p_value`` of 0 means p < 2 / R)."""
    return 2 / resamples


def sign_test(differences: np.ndarray) -> float:
    """The exact two-sided sign test of "each item's paired difference is as likely above 0
    as below": the differences within ``_TIE`` of 0 dropped, k of the m left above 0,
    p = min(1, 2 P(X <= min(k, m - k))) for X ~ Binomial(m, 1/2); 1 when none is left. Three
    items, each right for one model and wrong for the other: 2 / 8 = 0.25."""
    values = np.asarray(differences, dtype=float)
    above = int(np.count_nonzero(values > _TIE))
    m = above + int(np.count_nonzero(values < -_TIE))
    tail = sum(math.comb(m, i) for i in range(min(above, m - above) + 1))
    return min(1.0, 2 * tail / 2 ** m)


def paired_p(differences: np.ndarray, resampled: np.ndarray) -> tuple[float, bool, str]:
    """The two-sided p of a paired comparison, whether it is only an upper bound, and the
    test that gave it (``TESTS``), from the items' paired differences (n,) and the bootstrap's
    resampled differences of the aggregate (R,): the sign test where fewer than
    ``EXACT_BELOW`` items differ, else the bootstrap's ``inversion_p_value``, a 0 of which is
    kept as the bound 2 / R."""
    if np.count_nonzero(np.abs(differences) > _TIE) < EXACT_BELOW:
        return sign_test(differences), False, "sign"
    p = inversion_p_value(resampled)
    bound = p == 0  # every resample on one side: p < 2 / R
    return (resolution(resampled.size) if bound else p), bound, "bootstrap"


def check_resamples(resamples: int) -> None:
    """A one-line error unless ``resamples`` is at least 1."""
    if resamples < 1:
        raise InputError(f"resamples must be at least 1, got {resamples}")


def seed_draws(seeds: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The seeds of each resample of the two-level bootstrap, drawn with replacement:
    (R, S) indices; one seed draws nothing from ``rng`` (the item bootstrap)."""
    if seeds == 1:
        return np.zeros((resamples, 1), dtype=np.int64)
    return rng.integers(0, seeds, size=(resamples, seeds))


def two_level(per_seed: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The two-level bootstrap's resamples of a seed mean: each seed's aggregate under each
    item resample (S, R) and the drawn seeds of each resample (R, S') -> the mean over the
    drawn seeds (R,)."""
    resample = np.arange(draws.shape[0])[:, None]  # (R, 1)
    return per_seed[draws, resample].mean(axis=1)  # (R, S') -> (R,)


def bootstrap_interval(outcomes_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                       resamples: int = RESAMPLES, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile interval of ``aggregate`` under the item bootstrap: each unit's items
    resampled with replacement within the unit, ``resamples`` times (one unit: its outcomes
    as a plain sequence, or a mapping of one)."""
    return seed_interval([outcomes_by_unit], aggregate, resamples, level, seed)


def seed_interval(seeds: Sequence[Outcomes], aggregate: Aggregate = mean_of_units,
                  resamples: int = RESAMPLES, level: float = 0.95,
                  seed: int = 0) -> tuple[float, float]:
    """The percentile interval of the mean over ``seeds`` (a model's outcomes under each
    seed, on the same items) of ``aggregate``, under the two-level bootstrap (seeds, then
    items; one seed: the item bootstrap)."""
    check_resamples(resamples)
    _, resampled, items = unit_accuracies([outcome_arrays(s) for s in seeds], resamples,
                                          np.random.default_rng(seed))
    draws = seed_draws(len(seeds), resamples, np.random.default_rng((seed, 1)))
    return percentile_interval(two_level(aggregate(resampled, items), draws), level)


def item_differences(a_sets: Sequence[Mapping[str, np.ndarray]],
                     b_sets: Sequence[Mapping[str, np.ndarray]], units: Sequence[str]
                     ) -> np.ndarray:
    """Each item's paired difference over ``units`` (in order, their items in order): A's
    mean outcome over its seeds less B's. (n,)."""
    return np.concatenate([
        np.mean([s[unit] for s in a_sets], axis=0) - np.mean([s[unit] for s in b_sets], axis=0)
        for unit in units])


def paired_difference(a_seeds: Sequence[Outcomes], b_seeds: Sequence[Outcomes],
                      aggregate: Aggregate = mean_of_units, resamples: int = RESAMPLES,
                      level: float = 0.95, seed: int = 0) -> dict[str, float | int | str]:
    """Model A against model B on the same items (the same units, item i of a unit the same
    item for every seed of both), each given as its outcomes under one seed or several:
    ``a``, ``b`` (the seed means), their ``difference`` (a - b), its paired bootstrap
    percentile interval (``low``, ``high``: the items drawn alike for both models, each
    model's seeds drawn on their own), the two-sided ``p_value`` (``paired_p``), ``p_bound``
    (whether it is only an upper bound) and ``test`` (``TESTS``: which test gave it), and the
    ``units``, ``items``, ``seeds_a``, ``seeds_b`` and ``resamples`` behind them."""
    check_resamples(resamples)
    sets = [outcome_arrays(s) for s in (*a_seeds, *b_seeds)]
    point, resampled, items = unit_accuracies(sets, resamples, np.random.default_rng(seed))
    values, per_seed = aggregate(point, items), aggregate(resampled, items)  # (S,), (S, R)
    split = len(a_seeds)
    seed_rng = np.random.default_rng((seed, 1))
    draws = [seed_draws(len(a_seeds), resamples, seed_rng),
             seed_draws(len(b_seeds), resamples, seed_rng)]
    value_a, value_b = float(values[:split].mean()), float(values[split:].mean())
    differences = two_level(per_seed[:split], draws[0]) - two_level(per_seed[split:], draws[1])
    low, high = percentile_interval(differences, level)
    p, bound, test = paired_p(item_differences(sets[:split], sets[split:], list(sets[0])),
                              differences)
    return {"a": value_a, "b": value_b, "difference": value_a - value_b, "low": low,
            "high": high, "p_value": p, "p_bound": bound, "test": test, "units": len(items),
            "items": int(items.sum()), "seeds_a": len(a_seeds), "seeds_b": len(b_seeds),
            "resamples": resamples}


def paired_test(a_by_unit: Outcomes, b_by_unit: Outcomes, aggregate: Aggregate = mean_of_units,
                resamples: int = RESAMPLES, level: float = 0.95, seed: int = 0
                ) -> dict[str, float | int | str]:
    """``paired_difference`` of one run of model A and one of model B: the paired item
    bootstrap of the difference, its percentile interval, and its p (``paired_p``)."""
    return paired_difference([a_by_unit], [b_by_unit], aggregate, resamples, level, seed)


def holm(p_values: Sequence[float], bounds: Sequence[bool] | None = None) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in the given order: the i-th smallest of
    the m p-values (NaN ones left out of m and of the order, and NaN adjusted) times
    m - i + 1, made non-decreasing in that order and capped at 1. A comparison whose adjusted
    p is below alpha is rejected with a family-wise error rate of at most alpha. ``bounds``:
    which p-values are only upper bounds (``holm_bounds``)."""
    return holm_bounds(p_values, bounds)[0]


def holm_bounds(p_values: Sequence[float], bounds: Sequence[bool] | None = None
                ) -> tuple[list[float], list[bool]]:
    """``holm``'s adjusted p-values, and whether each is an upper bound: one set by a p that
    is only an upper bound (``bounds``: a bootstrap p of 0 means only p < 2 / R, so 3
    comparisons' smallest, < 0.002 from 1,000 resamples, is adjusted to < 0.006, not 0). A NaN
    p (a comparison that could not be tested) is left out, as R's ``p.adjust`` leaves out
    ``NA``: the others are adjusted over m, the p-values that are numbers, and its own
    adjusted p is NaN, not a bound."""
    m = len(p_values)
    bounds = list(bounds) if bounds is not None else [False] * m
    if len(bounds) != m:
        raise InputError(f"{m} p-values but {len(bounds)} bound flags")
    tested = [i for i in range(m) if not math.isnan(p_values[i])]
    adjusted, bound = [math.nan] * m, [False] * m
    running, running_bound = 0.0, False
    for rank, index in enumerate(sorted(tested, key=lambda i: (p_values[i], not bounds[i]))):
        value = min(1.0, (len(tested) - rank) * p_values[index])
        if value > running or (value == running and not bounds[index]):
            running, running_bound = value, bounds[index] and value < 1.0
        adjusted[index], bound[index] = running, running_bound
    return adjusted, bound
