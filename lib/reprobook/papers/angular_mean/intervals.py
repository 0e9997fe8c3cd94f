"""Statistics behind the chapter's Monte Carlo claims (C4, C5, C6) on the angular mean.

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717.

* :func:`shortfall_slope` - the log-log slope of the expected worst per-batch shortfall
  s(m) = E[max_i (alpha_i - A_i)_+] against the batch size m (eq. `am-shortfall-slope` of
  notebooks/02_angular_mean/index.md; notebook 2, claim C4);
* :func:`bootstrap_shortfall_slope` - its percentile bootstrap interval, resampling the batches
  of each size (the sizes are independent Monte Carlo samples);
* :func:`worst_ratio_gap` - per profile, the angular minus the arithmetic mean's worst-off
  type ratio min_t E[A_t] / alpha_t (eq. `am-worst-ratio`; notebook 3, claims C5 and C6).

The notebook decides C5 and C6 on the smallest (largest) of these gaps' means over the share
vectors, with a simultaneous interval from :func:`reprobook.core.worst_group_interval`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reprobook.core import checks
from reprobook.core.stats import Interval

from .agreement import long_run_agreement
from .geometry import as_generator

__all__ = [
    "shortfall_slope",
    "bootstrap_shortfall_slope",
    "worst_ratio_gap",
]


def _check_sizes(batch_sizes) -> np.ndarray:
    m = np.asarray(batch_sizes, dtype=float).reshape(-1)
    if m.size < 2 or not np.all(np.isfinite(m)) or np.any(m < 2) or np.unique(m).size != m.size:
        raise ValueError(
            "batch_sizes must be at least two distinct batch sizes m >= 2; "
            f"got {list(batch_sizes)!r}"
        )
    return m


def shortfall_slope(batch_sizes, mean_shortfall) -> tuple[float, float, np.ndarray]:
    """Least-squares fit of log s(m) = b log m + c over the sizes with s(m) > 0.

    Implements eq. `am-shortfall-slope` of notebooks/02_angular_mean/index.md.

    A size with no shortfall in any batch has no logarithm and is left out. Returns
    (b, c, used) with ``used`` the boolean mask (K,) of the sizes in the fit. Raises ValueError
    when fewer than two sizes have a positive shortfall (no slope can be fitted).
    """
    m = _check_sizes(batch_sizes)
    s = np.asarray(mean_shortfall, dtype=float).reshape(-1)
    if s.shape != m.shape or np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError(
            f"mean_shortfall must hold one finite value >= 0 per batch size ({m.size}); "
            f"got {s.tolist()}"
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
    """The slope of :func:`shortfall_slope` (eq. `am-shortfall-slope`) with a stratified
    percentile bootstrap interval.

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
    n_resamples = checks.integer(n_resamples, "n_resamples", minimum=100)
    level = checks.real(level, "level", above=0, below=1)
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
            f"{dropped} of {n_resamples} resamples had fewer than two sizes with a positive "
            "shortfall: too few batches for a bootstrap of the slope"
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

    Implements eq. `am-worst-ratio` of notebooks/02_angular_mean/index.md. ``thetas`` (N, d)
    are individual voters, ``labels`` (N,) their types t = 0..T-1 and ``alphas`` (T,) the
    types' shares. E[A_t](v) is the mean over type t's voters of the long-run agreement
    1 - angle(v, theta)/pi (eq. `am-long-run`); ``rule_a`` and ``rule_b`` are unit directions
    (d,). Positive: rule a leaves its worst-off type better off.
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
