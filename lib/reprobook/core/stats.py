"""The intervals that decide statistical claims, one type for all of them (:class:`Interval`):

- over seeds or replicates: :func:`t_interval` (Student-t), :func:`replicate_interval` (the same,
  with failed replicates left out and an undecided interval when fewer than two remain);
- two samples: :func:`paired_interval` (Student-t of the differences), :func:`welch_interval`;
- bootstrap: :func:`bootstrap_interval` (SciPy's BCa over values), :func:`bca_from_replicates`
  (BCa from replicates and jackknife values a chapter resampled itself);
- proportions: :func:`proportion_interval` (Clopper-Pearson), :func:`smallest_proportion_interval`;
- several groups at once: :func:`bonferroni_level`, :func:`worst_group_interval`.

A chapter keeps only the intervals that are its paper's own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import checks
from .numerics import tie_groups


class Interval(NamedTuple):
    """An estimate with a two-sided confidence interval, as a statistical claim is recorded:
    ``run.record("C2", core.proportion_interval(7, 10))``. ``method`` says how the interval was
    made (it is shown beside the value); ``n`` is the number of independent units behind it.
    A Student-t interval also carries its standard error ``se`` and its ``level``."""

    estimate: float
    low: float
    high: float
    method: str
    n: int
    se: float = math.nan  # the standard error s / sqrt(n) of a Student-t interval
    level: float = 0.95  # the confidence level

    @property
    def mean(self) -> float:
        """The estimate (the mean, for a Student-t interval)."""
        return self.estimate


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


def t_interval(values, level: float = 0.95) -> Interval:
    """mean +- t_{(1+level)/2, n-1} s / sqrt(n): the two-sided Student-t interval of the mean of
    n >= 2 finite values (seeds, sequences, ...), at confidence ``level`` in (0, 1)."""
    from scipy import stats  # imported on use: about 1 s, which `import core` need not pay

    v = _checked(values, level)
    m = float(v.mean())
    se = float(v.std(ddof=1) / math.sqrt(v.size))
    half = float(stats.t.ppf((1 + level) / 2, v.size - 1)) * se
    method = f"Student-t {level:.0%} over {v.size}"
    return Interval(m, m - half, m + half, method, int(v.size), se, float(level))


def proportion_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """The Clopper-Pearson (exact binomial) interval of a proportion ``successes / n``."""
    from scipy import stats  # imported on use: about 1 s, which `import core` need not pay

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
    from scipy import stats  # imported on use: about 1 s, which `import core` need not pay

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
    """``value`` when it is an :class:`Interval`, else None (how a record tells an interval from
    a plain number)."""
    return value if isinstance(value, Interval) else None


@dataclass(frozen=True)
class WorstGroup:
    """The worst of several group means: ``interval`` (estimate, low, high) of that worst mean,
    the ``group`` it came from, and each group's interval (at the Bonferroni level)."""

    interval: Interval
    group: str
    by_group: dict[str, Interval]


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


def bonferroni_level(level: float, k: int) -> float:
    """1 - (1 - level) / k: the level at which each of ``k`` intervals is made so that all ``k``
    cover their true values together with probability at least ``level`` (Bonferroni)."""
    k = checks.integer(k, "k (the number of intervals)", minimum=1)
    level = checks.real(level, "level", above=0, below=1)
    return 1.0 - (1.0 - level) / k


def paired_interval(a, b, level: float = 0.95) -> Interval:
    """mean(a - b) with the Student-t interval of the differences a_i - b_i (n - 1 degrees of
    freedom): two measurements of the same units (one puzzle solved by two methods)."""
    x, y = _checked(a, level), _checked(b, level)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {x.size} and {y.size}")
    iv = t_interval(x - y, level)
    return iv._replace(method=f"paired Student-t {level:.1%} over {x.size}")


def welch_interval(a, b, level: float = 0.95) -> Interval:
    """mean(a) - mean(b) of two independent samples with Welch's interval: a Student-t interval
    with the Welch-Satterthwaite degrees of freedom,

        se = sqrt(s_a^2 / n_a + s_b^2 / n_b),
        df = se^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1)),

    s^2 the sample variances (ddof = 1). When both samples are constant it is the point
    mean(a) - mean(b)."""
    from scipy import stats  # imported on use: about 1 s, which `import core` need not pay

    x, y = _checked(a, level), _checked(b, level)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    est = float(x.mean() - y.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        half = 0.0
    else:
        df = se**4 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
        half = float(stats.t.ppf((1 + level) / 2, df)) * se
    method = f"Welch (Student-t, Welch's df) {level:.1%} over {x.size} + {y.size}"
    return Interval(est, est - half, est + half, method, int(x.size + y.size), se, float(level))


def replicate_interval(values, bars=(), level: float = 0.95) -> Interval:
    """The Student-t interval (:func:`t_interval`) of the finite per-replicate ``values``; NaN
    marks a failed replicate and is left out. With fewer than two finite values a Student-t
    interval is unbounded: it is recorded as an interval that reaches 1 past the value (0 when
    there is none) and past every one of ``bars`` (the claim's check bars and no-effect value),
    so that it straddles each of them and decides nothing."""
    v = np.asarray(values, dtype=float).reshape(-1)
    v = v[np.isfinite(v)]
    if v.size >= 2:
        return t_interval(v, level)
    est = float(v[0]) if v.size else 0.0
    edges = [est, *(float(b) for b in bars)]
    method = (
        f"Student-t {level:.0%} over {v.size}: unbounded with fewer than 2 usable replicates, "
        "shown as reaching 1 past every bar"
    )
    return Interval(est, min(edges) - 1.0, max(edges) + 1.0, method, int(v.size))


BCA_RTOL = 1e-9  # bootstrap values closer than this, relative to their size, are equal


def bca_from_replicates(estimate: float, boot, jack, level: float = 0.95) -> tuple[float, float]:
    """The BCa interval (low, high) from bootstrap replicates ``boot`` and jackknife values
    ``jack`` that a chapter computed itself (several statistics on shared resamples).

    Bias correction z0 = Phi^-1(share of replicates below the estimate), acceleration
    a = sum d^3 / (6 (sum d^2)^(3/2)) with d the jackknife values' deviations from their mean,
    and the percentile interval at the adjusted levels Phi(z0 + (z0 + z) / (1 - a (z0 + z))).
    With z0 = 0 and a = 0 it is the percentile interval.

    Values within ``BCA_RTOL`` of the largest |value| count as equal: a replicate that equals
    the estimate up to rounding is not below it (statistics on a lattice can equal the estimate
    in hundreds of replicates, each summed in its own order), and a jackknife whose values
    differ only by rounding has no acceleration."""
    from scipy import special  # imported on use, as scipy.stats above

    boot = checks.array(boot, "boot", ndim=1)
    jack = checks.array(jack, "jack", ndim=1)
    estimate = checks.real(estimate, "estimate")
    checks.real(level, "level", above=0, below=1)
    if boot.size < 2 or jack.size < 2:
        raise checks.InputError("boot and jack must hold at least 2 values each")
    scale = max(abs(estimate), float(np.max(np.abs(boot))), float(np.max(np.abs(jack))))
    tol = BCA_RTOL * scale  # differences below this are rounding, not order
    share = np.mean(boot < estimate - tol)  # replicates clearly below the estimate
    share = np.clip(share, 0.5 / boot.size, 1 - 0.5 / boot.size)  # keeps z0 finite
    z0 = special.ndtri(share)  # bias correction
    d = jack.mean() - jack
    den = 6.0 * np.sum(d**2) ** 1.5
    spread = float(np.max(np.abs(d)))  # 0 up to rounding: no skewness to correct
    a = np.sum(d**3) / den if spread > tol else 0.0  # acceleration
    z = special.ndtri(np.array([(1 - level) / 2, (1 + level) / 2]))
    adj = special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))  # adjusted levels
    low, high = np.quantile(boot, adj)
    return float(low), float(high)


def smallest_proportion_interval(counts, level: float = 0.95) -> Interval:
    """The smallest of m rates k_i / n_i with a simultaneous interval.

    ``counts`` maps a name to (k_i, n_i). Each rate gets its Clopper-Pearson interval at level
    1 - (1 - level) / m (Bonferroni), so all m intervals hold together with probability at least
    ``level``; on that event min_i p_i lies in [min_i low_i, min_i high_i], which is returned
    with the smallest observed rate as the estimate and the smallest n_i as ``n``."""
    items = dict(counts)
    if not items:
        raise ValueError("counts is empty: give {name: (successes, n)} for at least one rate")
    level = checks.real(level, "level", above=0, below=1)
    each = 1 - (1 - level) / len(items)
    intervals = {}
    for name, pair in items.items():
        try:
            k, n = pair
        except (TypeError, ValueError):
            raise ValueError(
                f"counts[{name!r}] must be a pair (successes, n), got {pair!r}"
            ) from None
        intervals[name] = proportion_interval(k, n, level=each)
    estimate = min(iv.estimate for iv in intervals.values())
    low = min(iv.low for iv in intervals.values())
    high = min(iv.high for iv in intervals.values())
    n_min = min(iv.n for iv in intervals.values())
    return Interval(
        estimate,
        low,
        high,
        f"smallest of {len(items)} rates, Clopper-Pearson {each:.2%} each ({level:.0%} together)",
        n_min,
    )
