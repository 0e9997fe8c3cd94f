"""Small statistics shared by the chapters: the intervals that decide statistical claims (the
Student-t interval of a mean, the Clopper-Pearson interval of a proportion, a bootstrap, and a
simultaneous interval of the worst of several group means)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import stats

from . import checks
from .numerics import tie_groups


class TInterval(NamedTuple):
    mean: float
    low: float
    high: float
    se: float  # the standard error s / sqrt(n), s with ddof = 1
    n: int
    level: float = 0.95  # the confidence level


def _checked(values, level) -> np.ndarray:
    """``values`` as a flat float array of at least 2 finite values, with ``level`` in (0, 1)."""
    v = np.asarray(values, dtype=float).reshape(-1)
    if v.size < 2:
        raise ValueError(f"need at least 2 values, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError(
            f"all values must be finite; {int(np.sum(~np.isfinite(v)))} of {v.size} are not"
        )
    checks.real(level, "level", above=0, below=1)
    return v


def t_interval(values, level: float = 0.95) -> TInterval:
    """mean +- t_{(1+level)/2, n-1} s / sqrt(n): the two-sided Student-t interval of the mean of
    n >= 2 finite values (seeds, sequences, ...), at confidence ``level`` in (0, 1)."""
    v = _checked(values, level)
    m = float(v.mean())
    se = float(v.std(ddof=1) / math.sqrt(v.size))
    half = float(stats.t.ppf((1 + level) / 2, v.size - 1)) * se
    return TInterval(m, m - half, m + half, se, int(v.size), float(level))


class Interval(NamedTuple):
    """An estimate with a two-sided confidence interval, as a statistical claim is recorded:
    ``run.record("C2", core.proportion_interval(7, 10))``. ``method`` says how the interval was
    made (it is shown beside the value); ``n`` is the number of independent units behind it."""

    estimate: float
    low: float
    high: float
    method: str
    n: int


def proportion_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """The Clopper-Pearson (exact binomial) interval of a proportion ``successes / n``."""
    n = checks.integer(n, "n", minimum=1)
    successes = checks.integer(successes, "successes", minimum=0, maximum=n)
    checks.real(level, "level", above=0, below=1)
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(
        confidence_level=level, method="exact"
    )
    return Interval(
        successes / n,
        float(ci.low),
        float(ci.high),
        f"Clopper-Pearson {level:.0%} over {n}",
        int(n),
    )


TIE_RTOL = 1e-9  # values closer than this, relative to the largest |value|, are one value


def snap_near_ties(values, rtol: float = TIE_RTOL) -> np.ndarray:
    """``values`` (1-D) with every run of sorted values that lie within ``rtol * max|v|`` of the
    run's smallest value set equal to that smallest value; values further apart are untouched.

    Two values that differ only by rounding (a sum taken in another order, another machine's
    BLAS) are then exactly equal, so a statistic that compares them (the bootstrap's
    bias correction counts the replicates below the estimate; a median picks one of them) does
    not decide on the last bits. Each value moves by at most ``rtol * max|v|``."""
    v = np.array(values, dtype=float).reshape(-1)
    rtol = checks.real(rtol, "rtol", minimum=0, maximum=1e-3)
    if v.size < 2:
        return v
    tol = rtol * float(np.max(np.abs(v)))
    order = np.argsort(v, kind="stable")
    s = v[order]  # ascending; -s is descending, so each run is anchored at its smallest value
    group = tie_groups(-s, tol)
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])  # where each run starts
    v[order] = s[first][group]  # every value of a run set to the run's smallest
    return v


def bootstrap_interval(
    values, statistic=np.mean, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Interval:
    """The BCa bootstrap interval of ``statistic`` over independent ``values`` (SciPy's
    ``stats.bootstrap``, seeded, so the same values give the same interval).

    Values within ``TIE_RTOL`` (relative to the largest |value|) of each other are first made
    equal (:func:`snap_near_ties`): BCa's bias correction counts the resampled statistics that
    fall below the estimate, so values equal up to rounding would otherwise let the last bits
    move a bound (a median over values with ties: [1, 5] or [1, 2] depending on them). The
    estimate is the statistic of those values. Where all values are equal within that
    tolerance the interval is that value."""
    v = snap_near_ties(_checked(values, level))
    est = float(statistic(v))
    if np.all(v == v[0]):  # exact after the snap: every value within the tolerance of the first
        return Interval(
            est, est, est, f"bootstrap {level:.0%} over {v.size} (all equal)", int(v.size)
        )
    res = stats.bootstrap(
        (v,),
        statistic,
        confidence_level=level,
        n_resamples=n_resamples,
        method="BCa",
        random_state=np.random.default_rng(seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # BCa degenerates on tiny samples: fall back
        res = stats.bootstrap(
            (v,),
            statistic,
            confidence_level=level,
            n_resamples=n_resamples,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Interval(est, low, high, f"bootstrap {level:.0%} over {v.size}", int(v.size))


def as_interval(value) -> Interval | None:
    """An :class:`Interval` from a :class:`TInterval` or an :class:`Interval` (None otherwise)."""
    if isinstance(value, Interval):
        return value
    if isinstance(value, TInterval):
        return Interval(
            value.mean,
            value.low,
            value.high,
            f"Student-t {value.level:.0%} over {value.n}",
            value.n,
        )
    return None


@dataclass(frozen=True)
class WorstGroup:
    """The worst of several group means: ``interval`` (estimate, low, high) of that worst mean,
    the ``group`` it came from, and each group's interval (at the Bonferroni level)."""

    interval: Interval
    group: str
    by_group: dict[str, TInterval]


def worst_group_interval(
    values_by_group: Mapping[str, object],
    worst: str = "min",
    level: float = 0.95,
    n: int | None = None,
) -> WorstGroup:
    """The smallest (``worst="min"``) or largest (``"max"``) of the group means mu_g, with a
    simultaneous interval: the way to decide "every group reaches the bar" on noisy groups.

    Each group gets its Student-t interval [l_g, h_g] at level 1 - (1 - level) / G (Bonferroni
    over the G groups), so all G hold together with probability at least ``level``; then
    min_g mu_g lies in [min_g l_g, min_g h_g] (max: [max_g l_g, max_g h_g]). A group whose
    interval contradicts a claim is never averaged away by the others.

    ``n``, the independent units behind the interval, defaults to the groups' sizes added up;
    give it when the groups share their units (differences of several policies over the same
    seeds: ``n`` is the number of seeds).
    """
    checks.choice(worst, "worst", ("min", "max"))
    if not values_by_group:
        raise checks.InputError("values_by_group must hold at least one group, got none")
    checks.real(level, "level", above=0, below=1)
    each = 1 - (1 - level) / len(values_by_group)
    by = {str(g): t_interval(v, level=each) for g, v in values_by_group.items()}
    pick = min if worst == "min" else max
    group = pick(by, key=lambda g: by[g].mean)
    n = sum(t.n for t in by.values()) if n is None else checks.integer(n, "n", minimum=2)
    method = (
        f"{'smallest' if worst == 'min' else 'largest'} of {len(by)} group means, Student-t "
        f"{each:.1%} each (Bonferroni, {level:.0%} together), {n} units"
    )
    low, high = pick(t.low for t in by.values()), pick(t.high for t in by.values())
    return WorstGroup(Interval(by[group].mean, low, high, method, n), group, by)
