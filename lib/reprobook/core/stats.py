"""Small statistics shared by the chapters: the intervals that decide statistical claims (the
Student-t interval of a mean, the Clopper-Pearson interval of a proportion, a bootstrap)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats


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
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
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
    for name, v in (("successes", successes), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {v!r}")
    if not 0 <= successes <= n or n < 1:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
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


def bootstrap_interval(
    values, statistic=np.mean, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Interval:
    """The BCa bootstrap interval of ``statistic`` over independent ``values`` (SciPy's
    ``stats.bootstrap``, seeded, so the same values give the same interval). Where all values
    are equal the interval is that value."""
    v = _checked(values, level)
    est = float(statistic(v))
    if np.all(v == v[0]):
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
