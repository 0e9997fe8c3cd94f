"""Intervals behind the chapter's statistical claims (C4, C5, C6) on the angular mean (arXiv 2605.12717).

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717.

* :func:`shortfall_slope` - the log-log slope of the expected worst per-batch shortfall
  s(m) = E[max_i (alpha_i - A_i)_+] against the batch size m (notebook 2, claim C4);
* :func:`bootstrap_shortfall_slope` - its percentile bootstrap interval, resampling the batches
  of each size (the sizes are independent Monte Carlo samples);
* :func:`worst_ratio_gap` - per profile, the angular minus the arithmetic mean's worst-off
  type ratio min_t E[A_t] / alpha_t (notebook 3, claims C5 and C6);
* :func:`worst_group_interval` - the smallest (or largest) of several group means, with a
  simultaneous interval: each group's Student-t interval at the Bonferroni level, combined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from reprobook.core.stats import Interval, TInterval, t_interval

from .agreement import long_run_agreement
from .geometry import as_generator

__all__ = [
    "shortfall_slope",
    "bootstrap_shortfall_slope",
    "worst_ratio_gap",
    "WorstGroup",
    "worst_group_interval",
]


def _check_sizes(batch_sizes) -> np.ndarray:
    m = np.asarray(batch_sizes, dtype=float).reshape(-1)
    if m.size < 2 or not np.all(np.isfinite(m)) or np.any(m < 2) or np.unique(m).size != m.size:
        raise ValueError(
            f"batch_sizes must be at least two distinct batch sizes m >= 2; got {list(batch_sizes)!r}"
        )
    return m


def shortfall_slope(batch_sizes, mean_shortfall) -> tuple[float, float, np.ndarray]:
    """Least-squares fit of log s(m) = b log m + c over the sizes with s(m) > 0.

    A size with no shortfall in any batch has no logarithm and is left out. Returns
    (b, c, used) with ``used`` the boolean mask (K,) of the sizes in the fit. Raises ValueError
    when fewer than two sizes have a positive shortfall (no slope can be fitted).
    """
    m = _check_sizes(batch_sizes)
    s = np.asarray(mean_shortfall, dtype=float).reshape(-1)
    if s.shape != m.shape or np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError(
            f"mean_shortfall must hold one finite value >= 0 per batch size ({m.size}); got {s.tolist()}"
        )
    used = s > 0
    if used.sum() < 2:
        raise ValueError(
            f"only {int(used.sum())} batch size(s) have a positive shortfall: a slope needs two"
        )
    b, c = np.polyfit(np.log(m[used]), np.log(s[used]), 1)
    return float(b), float(c), used


def bootstrap_shortfall_slope(
    batch_sizes,
    shortfalls: Sequence,
    n_resamples: int = 2000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = None,
) -> Interval:
    """The slope of :func:`shortfall_slope` with a stratified percentile bootstrap interval.

    ``shortfalls[k]`` holds the per-batch shortfalls (B_k,) at ``batch_sizes[k]``. Each resample
    draws B_k batches with replacement at every size, recomputes the K means and refits the
    slope (sizes whose resampled mean is 0 are left out, as in the point estimate). The interval
    is the (1 - level)/2 and (1 + level)/2 quantiles of the resampled slopes; resamples with
    fewer than two positive sizes give no slope and are dropped (their count must stay below
    (1 - level)/2 of the resamples, else ValueError). The estimate is the slope of the data.
    """
    m = _check_sizes(batch_sizes)
    if len(shortfalls) != m.size:
        raise ValueError(
            f"shortfalls must hold one array per batch size ({m.size}); got {len(shortfalls)}"
        )
    if (
        isinstance(n_resamples, bool)
        or not isinstance(n_resamples, (int, np.integer))
        or n_resamples < 100
    ):
        raise ValueError(f"n_resamples must be an integer >= 100; got {n_resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level!r}")
    values = [np.asarray(v, dtype=float).reshape(-1) for v in shortfalls]
    for k, v in enumerate(values):
        if v.size < 2 or np.any(v < 0) or not np.all(np.isfinite(v)):
            raise ValueError(
                f"shortfalls[{k}] must hold at least two finite values >= 0; got {v.size} values"
            )
    slope, _, _ = shortfall_slope(m, [v.mean() for v in values])
    gen = as_generator(rng)
    means = np.empty((n_resamples, m.size))  # (R, K) resampled mean shortfall per size
    for k, v in enumerate(values):
        idx = gen.integers(0, v.size, size=(n_resamples, v.size))
        means[:, k] = v[idx].mean(axis=1)
    x = np.log(m)[None, :]
    w = (means > 0).astype(float)  # the sizes each resample can fit
    y = np.log(np.where(means > 0, means, 1.0))
    nw = w.sum(axis=1)
    ok = nw >= 2
    xm = (w * x).sum(axis=1) / np.where(ok, nw, 1.0)
    ym = (w * y).sum(axis=1) / np.where(ok, nw, 1.0)
    sxx = (w * (x - xm[:, None]) ** 2).sum(axis=1)
    sxy = (w * (x - xm[:, None]) * (y - ym[:, None])).sum(axis=1)
    slopes = (sxy / np.where(sxx > 0, sxx, 1.0))[ok & (sxx > 0)]
    dropped = n_resamples - slopes.size
    if dropped >= (1 - level) / 2 * n_resamples:
        raise ValueError(
            f"{dropped} of {n_resamples} resamples had fewer than two sizes with a positive shortfall: "
            "too few batches for a bootstrap of the slope"
        )
    low, high = np.quantile(slopes, [(1 - level) / 2, (1 + level) / 2])
    n = int(sum(v.size for v in values))
    return Interval(
        slope,
        float(low),
        float(high),
        f"percentile bootstrap {level:.0%}, {n_resamples} resamples of {n} batches",
        n,
    )


def worst_ratio_gap(thetas, alphas, labels, rule_a, rule_b) -> float:
    """min_t E[A_t](a) / alpha_t - min_t E[A_t](b): the gap between two rules' worst-off types.

    ``thetas`` (N, d) are individual voters, ``labels`` (N,) their types t = 0..T-1 and
    ``alphas`` (T,) the types' shares. E[A_t](v) is the mean over type t's voters of the
    long-run agreement 1 - angle(v, theta)/pi (the chapter's equation for E[A]); ``rule_a`` and
    ``rule_b`` are unit directions (d,). Positive: rule a leaves its worst-off type better off.
    """
    U = np.asarray(thetas, dtype=float)
    lab = np.asarray(labels).reshape(-1)
    a = np.asarray(alphas, dtype=float).reshape(-1)
    if U.ndim != 2 or lab.size != U.shape[0]:
        raise ValueError(
            f"labels must give one type per voter ({U.shape[0]} voters); got {lab.size}"
        )
    types = np.arange(a.size)
    if not np.array_equal(np.unique(lab), types) or np.any(a <= 0):
        raise ValueError(
            f"labels must use every type 0..{a.size - 1} and every share must be > 0; "
            f"got labels {np.unique(lab).tolist()}, shares {a.tolist()}"
        )

    def worst(v) -> float:
        agree = long_run_agreement(v, U)
        return float(min(agree[lab == t].mean() / a[t] for t in types))

    return worst(rule_a) - worst(rule_b)


@dataclass(frozen=True)
class WorstGroup:
    """The worst of several group means: ``interval`` (estimate, low, high) of that worst mean,
    the group it came from, and each group's interval (at the Bonferroni level)."""

    interval: Interval
    group: str
    by_group: dict[str, TInterval]


def worst_group_interval(
    values_by_group: Mapping[str, Sequence[float]], worst: str = "min", level: float = 0.95
) -> WorstGroup:
    """The smallest (``worst="min"``) or largest (``"max"``) of the group means mu_g, with a
    simultaneous interval.

    Each group gets its Student-t interval [l_g, h_g] at level 1 - (1 - level) / G (Bonferroni
    over the G groups), so all G hold together with probability at least ``level``, and then
    min_g mu_g lies in [min_g l_g, min_g h_g] (max: [max_g l_g, max_g h_g]). A group whose
    interval contradicts the claim is therefore never averaged away by another group.
    """
    if worst not in ("min", "max"):
        raise ValueError(f"worst must be 'min' or 'max'; got {worst!r}")
    if not values_by_group:
        raise ValueError("values_by_group holds no groups")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level!r}")
    each = 1 - (1 - level) / len(values_by_group)
    by = {str(g): t_interval(v, level=each) for g, v in values_by_group.items()}
    pick = min if worst == "min" else max
    group = pick(by, key=lambda g: by[g].mean)
    n = sum(t.n for t in by.values())
    method = (
        f"{'smallest' if worst == 'min' else 'largest'} of {len(by)} group means, Student-t {each:.1%} "
        f"each (Bonferroni, {level:.0%} together), {n} units"
    )
    return WorstGroup(
        Interval(
            by[group].mean,
            pick(t.low for t in by.values()),
            pick(t.high for t in by.values()),
            method,
            n,
        ),
        group,
        by,
    )
