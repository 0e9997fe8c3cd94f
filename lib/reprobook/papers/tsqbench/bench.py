"""TSQBench-lite: our generator of labelled time-series quality pairs.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629). The paper's benchmark pairs two copies of one base series and injects
quality defects into one side along seven dimensions. This module is our re-implementation of
that design (eq. `tsqbench-pair` of notebooks/12_tsqbench/index.md): base series, 22 injectors
(3-4 per dimension), light and heavy severities, the labels ``target_dimensions`` and
``tool_required``, and the no-tool view an LLM judge would see (a preview and 9 statistics,
eq. `tsqbench-view`).

Each injector takes a strength ``s`` in [0, 1]; a severity is a range of strengths split at a
boundary ``b`` (light: ``[0.1, b)``, heavy: ``[b, 1]``). The boundaries are recalibrated against
the no-tool judge in the first notebook (the 85% rule, eq. `tsqbench-calibration`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.signal import lfilter

from reprobook.core import checks

__all__ = [
    "DIMENSIONS",
    "INJECTORS",
    "Pair",
    "base_series",
    "inject",
    "make_pair",
    "make_pairs",
    "no_tool_view",
    "preview",
    "view_statistics",
    "STAT_NAMES",
    "default_boundaries",
]

DIMENSIONS = (
    "missing_value",
    "noise_level",
    "rare_pattern",
    "trend",
    "frequency",
    "amplitude",
    "pattern_consistency",
)
STAT_NAMES = ("length", "missing", "mean", "std", "min", "max", "p25", "p75", "slope")
LIGHT_LOW = 0.1  # the weakest strength ever injected


# --------------------------------------------------------------------------- base series
def signal_lfilter(e: np.ndarray, phi: float = 0.5) -> np.ndarray:
    """AR(1) noise e_t + phi e_{t-1} + phi^2 e_{t-2} + ... (scipy.signal.lfilter)."""
    return lfilter([1.0], [1.0, -phi], e)


def _season(kind: str, t: np.ndarray, period: float) -> np.ndarray:
    ph = (t / period) % 1.0
    if kind == "sine":
        return np.sin(2 * np.pi * ph)
    if kind == "square":
        return np.where(ph < 0.5, 1.0, -1.0)
    if kind == "triangle":
        return 4 * np.abs(ph - 0.5) - 1
    if kind == "sawtooth":
        return 2 * ph - 1
    return np.sin(2 * np.pi * ph) + 0.5 * np.sin(4 * np.pi * ph + 1.0)  # mixed


def _trend(kind: str, n: int) -> np.ndarray:
    u = np.linspace(0, 1, n)
    return {
        "linear_up": 2 * u,
        "linear_down": -2 * u,
        "piecewise": np.where(u < 0.5, 3 * u, 1.5 - 0.5 * (u - 0.5)),
        "exponential": np.expm1(2 * u) / np.expm1(2) * 2,
        "log": np.log1p(9 * u) / np.log(10) * 2,
    }[kind]


def base_series(rng, n: int, *, trend: bool | None = None, seasonal: bool | None = None) -> dict:
    """One clean base series of length ``n`` (additive 55%, multiplicative 30%, sequential
    15%), with its components. ``trend``/``seasonal`` force a non-flat trend or a season
    (needed when that dimension will be corrupted); None draws them (flat 1/6, none 15%)."""
    rng = checks.generator(rng)
    n = checks.integer(n, "n", minimum=32)
    t = np.arange(n, dtype=float)
    kinds = ("linear_up", "linear_down", "piecewise", "exponential", "log")
    has_trend = (rng.random() > 1 / 6) if trend is None else bool(trend)
    tr = _trend(kinds[rng.integers(len(kinds))], n) if has_trend else np.zeros(n)
    has_season = (rng.random() > 0.15) if seasonal is None else bool(seasonal)
    period = float(rng.uniform(8, 24))
    shapes = ("sine", "square", "triangle", "sawtooth", "mixed")
    se = _season(shapes[rng.integers(len(shapes))], t, period) if has_season else np.zeros(n)
    form = rng.choice(["additive", "multiplicative", "sequential"], p=[0.55, 0.3, 0.15])
    if form == "multiplicative":
        signal = (1.5 + tr) * (1 + 0.5 * se)
    else:
        signal = tr + se
    if form == "sequential":  # a second segment with another amplitude, level-aligned
        cut = int(rng.integers(n // 3, 2 * n // 3))
        signal[cut:] = signal[cut] + 0.7 * (signal[cut:] - signal[cut])
    sd = float(np.std(signal)) or 1.0
    noise_kind = rng.choice(["white", "ar1", "hetero", "walk"], p=[0.45, 0.3, 0.15, 0.1])
    e = rng.standard_normal(n)
    if noise_kind == "ar1":
        e = signal_lfilter(e)
    elif noise_kind == "hetero":
        e = e * np.linspace(0.5, 1.5, n)
    elif noise_kind == "walk":
        e = np.cumsum(e) / np.sqrt(n) * 2
    e = e / (np.std(e) or 1.0) * rng.uniform(0.03, 0.08) * sd
    scale = float(np.exp(rng.uniform(np.log(0.1), np.log(100))))
    offset = float(rng.uniform(-1, 1)) * scale
    return {
        "x": (signal + e) * scale + offset,
        "signal": signal * scale + offset,
        "noise_sd": float(np.std(e)) * scale,
        "period": period if has_season else None,
        "scale": scale * sd,
        "form": str(form),
    }


# --------------------------------------------------------------------------- injectors
# Each injector maps (x, rng, s, ctx) to a corrupted copy; s in [0, 1] is the strength and ctx
# holds the base's scale (std of the clean signal) and period. All of them raise their own
# dimension's tool statistic (tests/papers/test_tsqbench.py checks it, monotone in s).
def _segment(rng, n: int, frac: float) -> slice:
    length = max(4, int(frac * n))
    start = int(rng.integers(0, max(1, n - length)))
    return slice(start, start + length)


def _missing_scatter(x, rng, s, ctx):
    y = x.copy()
    y[rng.random(len(x)) < 0.3 * s] = np.nan
    return y


def _missing_burst(x, rng, s, ctx):
    y = x.copy()
    y[_segment(rng, len(x), 0.3 * s)] = np.nan
    return y


def _missing_periodic(x, rng, s, ctx):
    y = x.copy()
    step = max(2, int(round(1 / max(0.3 * s, 1e-3))))
    y[int(rng.integers(step)) :: step] = np.nan
    return y


def _noise_gaussian(x, rng, s, ctx):
    return x + rng.standard_normal(len(x)) * 0.5 * s * ctx["scale"]


def _noise_hetero(x, rng, s, ctx):
    env = np.linspace(0, 2, len(x)) if rng.random() < 0.5 else np.linspace(2, 0, len(x))
    return x + rng.standard_normal(len(x)) * 0.5 * s * ctx["scale"] * env


def _noise_impulsive(x, rng, s, ctx):
    """Bursts of extra noise on a subset of the points, as the released injector
    (training/synthesis/defect_injector.py, ``_inject_noise_impulsive``) does: a burst ratio
    r = 0.05 + 0.35 s (the released light and heavy ranges, 0.05-0.40, end to end) gives
    max(1, int(n r / 5)) bursts of 3 to 7 points at random starts; only the points they cover
    get Gaussian noise. Its size is in our units (1.0 s times the signal's spread), as for
    every injector here."""
    n = len(x)
    ratio = 0.05 + 0.35 * s
    mask = np.zeros(n, dtype=bool)
    for _ in range(max(1, int(n * ratio / 5))):
        length = int(rng.integers(3, 8))
        start = int(rng.integers(0, max(1, n - length)))
        mask[start : start + length] = True
    noise = rng.standard_normal(n) * 1.0 * s * ctx["scale"]
    return np.where(mask, x + noise, x)


def _rare_point(x, rng, s, ctx):
    y = x.copy()
    k = 1 + int(3 * s)
    idx = rng.choice(len(x), size=k, replace=False)
    y[idx] += rng.choice([-1, 1], size=k) * (1 + 5 * s) * ctx["scale"]
    return y


def _rare_contextual(x, rng, s, ctx):
    y = x.copy()
    seg = _segment(rng, len(x), 0.06)
    y[seg] = y[seg] + (0.5 + 3 * s) * ctx["scale"] * np.hanning(seg.stop - seg.start)
    return y


def _rare_level_shift(x, rng, s, ctx):
    y = x.copy()
    seg = _segment(rng, len(x), 0.2)
    y[seg] += rng.choice([-1, 1]) * (0.5 + 3 * s) * ctx["scale"]
    return y


def _trend_flatten(x, rng, s, ctx):
    tr = np.linspace(x[0], x[-1], len(x))
    return (
        x - s * (ctx["trend"] - ctx["trend"].mean()) if "trend" in ctx else x - s * (tr - tr.mean())
    )


def _filled(x) -> np.ndarray:
    """x with NaNs linearly interpolated (ends held); only to read levels off it."""
    x = np.asarray(x, float)
    ok = np.isfinite(x)
    if ok.all() or not ok.any():
        return x
    idx = np.arange(x.size)
    return np.interp(idx, idx[ok], x[ok])


def _trend_reversal(x, rng, s, ctx):
    """A middle segment played backwards, as the released injector
    (training/synthesis/defect_injector.py, ``_degrade_trend_reversal``) does: length
    max(10, int(n r)) with r = 0.15 + 0.25 s (the released range, 0.15-0.40), start drawn in
    [0.1 n, 0.9 n - length), the reversed segment shifted so that it starts at the segment's
    first value. The shift is read off the series with gaps interpolated, so that a missing
    end point does not blank the segment (the released code would turn it all NaN)."""
    n = len(x)
    length = max(10, int(n * (0.15 + 0.25 * s)))
    lo = int(n * 0.1)
    start = int(rng.integers(lo, max(lo + 1, int(n * 0.9) - length)))
    seg = slice(start, start + length)
    level = _filled(x)[seg]
    y = x.copy()
    y[seg] = x[seg][::-1] + (level[0] - level[-1])  # reversed, level-aligned at the start
    return y


def _trend_drift(x, rng, s, ctx):
    walk = np.cumsum(rng.standard_normal(len(x)))
    walk = walk - np.linspace(walk[0], walk[-1], len(x))  # a wandering, not a slope
    return x + walk / (np.std(walk) or 1.0) * 0.8 * s * ctx["trend_sd"]


def _freq_competing(x, rng, s, ctx):
    t = np.arange(len(x))
    per = ctx["period"] * rng.uniform(0.3, 0.45)
    return x + 0.6 * s * ctx["season_sd"] * np.sqrt(2) * np.sin(2 * np.pi * t / per)


def _freq_jitter(x, rng, s, ctx):
    t = np.arange(len(x), dtype=float)
    warp = t + np.cumsum(rng.standard_normal(len(x))) * 1.2 * s
    season = ctx["season"]
    return x - season + np.interp(warp, t, season, period=None)


def _freq_period_shift(x, rng, s, ctx):
    t = np.arange(len(x), dtype=float)
    cut = len(x) // 2
    season = ctx["season"]
    new = np.interp(t[cut] + (t[cut:] - t[cut]) * (1 + 0.8 * s), t, season)
    y = x.copy()
    y[cut:] = y[cut:] - season[cut:] + new
    return y


def _amp_random_scale(x, rng, s, ctx):
    per = max(2, int(round(ctx["period"])))
    k = np.repeat(1 + s * rng.uniform(-0.9, 0.9, len(x) // per + 1), per)[: len(x)]
    return x + (k - 1) * ctx["season"]


def _amp_decay(x, rng, s, ctx):
    """The seasonal swing fades or grows linearly over the series, as the released injector
    (training/synthesis/defect_injector.py, ``_degrade_amp_decay``) does: a fair coin picks
    decay (envelope from 1 down to f) or growth (from f up to 1), f = 1 - 0.8 s (the released
    range of f, 0.2-0.7, is reached from s = 0.375). The envelope multiplies our seasonal
    component (the released code's: the series minus a moving average)."""
    f = 1 - 0.8 * s
    decay = bool(rng.integers(2))
    env = np.linspace(1.0, f, len(x)) if decay else np.linspace(f, 1.0, len(x))
    return x + (env - 1) * ctx["season"]


def _amp_modulation(x, rng, s, ctx):
    env = 1 + 0.9 * s * np.sin(2 * np.pi * np.arange(len(x)) / (len(x) / 1.5) + rng.uniform(0, 6))
    return x + (env - 1) * ctx["season"]


def _cons_variance_switch(x, rng, s, ctx):
    seg = _segment(rng, len(x), 0.3)
    y = x.copy()
    y[seg] += rng.standard_normal(seg.stop - seg.start) * 0.8 * s * ctx["scale"]
    return y


def _cons_structural_break(x, rng, s, ctx):
    seg = _segment(rng, len(x), 0.3)
    y = x.copy()
    w = np.cumsum(rng.standard_normal(seg.stop - seg.start))
    y[seg] = (1 - s) * y[seg] + s * (y[seg].mean() + w / (np.std(w) or 1) * ctx["scale"])
    return y


def _cons_flat_spots(x, rng, s, ctx):
    y = x.copy()
    for _ in range(1 + int(2 * s)):
        seg = _segment(rng, len(x), 0.04 + 0.08 * s)
        y[seg] = y[seg.start]
    return y


def _cons_mean_drift(x, rng, s, ctx):
    seg = _segment(rng, len(x), 0.4)
    y = x.copy()
    y[seg] += np.linspace(0, 1, seg.stop - seg.start) ** 2 * 2.5 * s * ctx["scale"]
    y[seg.stop :] += 2.5 * s * ctx["scale"] if seg.stop < len(x) else 0.0
    return y


INJECTORS: dict[str, dict] = {
    "missing_value": {
        "scatter": _missing_scatter,
        "burst": _missing_burst,
        "periodic": _missing_periodic,
    },
    "noise_level": {
        "gaussian": _noise_gaussian,
        "heteroscedastic": _noise_hetero,
        "impulsive": _noise_impulsive,
    },
    "rare_pattern": {
        "point_outlier": _rare_point,
        "contextual": _rare_contextual,
        "level_shift": _rare_level_shift,
    },
    "trend": {"flatten": _trend_flatten, "reversal": _trend_reversal, "drift": _trend_drift},
    "frequency": {
        "competing": _freq_competing,
        "phase_jitter": _freq_jitter,
        "period_shift": _freq_period_shift,
    },
    "amplitude": {
        "random_scale": _amp_random_scale,
        "decay": _amp_decay,
        "modulation": _amp_modulation,
    },
    "pattern_consistency": {
        "variance_switch": _cons_variance_switch,
        "structural_break": _cons_structural_break,
        "flat_spots": _cons_flat_spots,
    },
}


def default_boundaries(value: float = 0.4) -> dict[tuple[str, str], float]:
    """The light/heavy boundary of every (dimension, method), before calibration."""
    return {(d, m): float(value) for d, ms in INJECTORS.items() for m in ms}


def _context(base: dict, n: int) -> dict:
    if "_ctx" in base and len(base["_ctx"]["trend"]) == n:
        return base["_ctx"]
    sig = base["signal"]
    u = np.arange(n)
    coef = np.polyfit(u, sig, 3)
    trend = np.polyval(coef, u)
    season = sig - trend
    base["_ctx"] = {
        "scale": base["scale"],
        "period": base["period"] or 12.0,
        "trend": trend,
        "trend_sd": float(np.std(trend)) or base["scale"],
        "season": season,
        "season_sd": float(np.std(season)) or base["scale"],
    }
    return base["_ctx"]


def inject(x, base: dict, dimension: str, method: str, strength: float, rng) -> np.ndarray:
    """x with one defect of ``dimension`` by ``method`` at ``strength`` (eq. `tsqbench-pair`)."""
    checks.choice(dimension, "dimension", DIMENSIONS)
    checks.choice(method, "method", tuple(INJECTORS[dimension]))
    s = checks.real(strength, "strength", minimum=0.0, maximum=1.0)
    x = checks.array(x, "x", ndim=1, finite=False)
    return INJECTORS[dimension][method](
        np.asarray(x, float), checks.generator(rng), s, _context(base, len(x))
    )


# --------------------------------------------------------------------------- pairs
@dataclass
class Pair:
    """Two series of one base; defects on either side. ``target_dimensions`` lists the injected
    dimensions; ``worse[d]`` is the side ("A" or "B") that received dimension d."""

    a: np.ndarray
    b: np.ndarray
    target_dimensions: tuple[str, ...]
    worse: dict[str, str]
    severity: dict[str, str]
    method: dict[str, str]
    strength: dict[str, float]
    tool_required: dict[str, bool]
    load: dict[str, float] = field(default_factory=dict)  # weighted defect load per side

    @property
    def winner(self) -> str:
        """The better side: lower defect load (heavy 2, light 1); "tie" when equal."""
        la, lb = self.load["A"], self.load["B"]
        return "tie" if la == lb else ("A" if la < lb else "B")


N_DIMS_PROBS = {  # how many dimensions a pair receives (the released code: 1-5, never 0)
    "code": (0.0, 0.35, 0.35, 0.2, 0.08, 0.02),
    "design": (0.05, 0.35, 0.3, 0.18, 0.08, 0.04),
}


def make_pair(
    rng,
    *,
    n_range: tuple[int, int] = (100, 150),
    boundaries: dict | None = None,
    p_heavy: float = 0.5,
    n_dims: str = "code",
    dimensions: tuple[str, ...] | None = None,
    severity: str | None = None,
    method: str | None = None,
    strength: float | None = None,
) -> Pair:
    """One labelled pair (eq. `tsqbench-pair`). ``dimensions`` (with optional ``severity``,
    ``method`` and ``strength``) fixes what is injected; otherwise the number of dimensions
    follows ``N_DIMS_PROBS[n_dims]`` and the severity is heavy with probability ``p_heavy``.
    ``tool_required`` is True for light defects, except missing values (never)."""
    rng = checks.generator(rng)
    checks.choice(n_dims, "n_dims", tuple(N_DIMS_PROBS))
    p_heavy = checks.probability(p_heavy, "p_heavy")
    bounds = boundaries or default_boundaries()
    if dimensions is None:
        probs = np.array(N_DIMS_PROBS[n_dims])
        k = int(rng.choice(len(probs), p=probs / probs.sum()))
        dims = tuple(sorted(rng.choice(len(DIMENSIONS), size=k, replace=False)))
        dimensions = tuple(DIMENSIONS[i] for i in dims)
    for d in dimensions:
        checks.choice(d, "dimension", DIMENSIONS)
    n = int(rng.integers(n_range[0], n_range[1] + 1))
    need_trend = "trend" in dimensions or None
    need_season = bool({"frequency", "amplitude"} & set(dimensions)) or None
    base = base_series(rng, n, trend=need_trend, seasonal=need_season)
    sides = {}
    for side in "AB":  # each side its own faint noise, 40-60% of the base noise
        sides[side] = base["x"] + rng.standard_normal(n) * rng.uniform(0.4, 0.6) * base["noise_sd"]
    out = {k: {} for k in ("worse", "severity", "method", "strength", "tool")}
    load = {"A": 0.0, "B": 0.0}
    for d in dimensions:
        side = "AB"[int(rng.integers(2))]
        m = method or list(INJECTORS[d])[int(rng.integers(len(INJECTORS[d])))]
        sev = severity or ("heavy" if rng.random() < p_heavy else "light")
        b = bounds[(d, m)]
        s = (
            strength
            if strength is not None
            else (rng.uniform(b, 1.0) if sev == "heavy" else rng.uniform(LIGHT_LOW, b))
        )
        sides[side] = inject(sides[side], base, d, m, s, rng)
        out["worse"][d], out["severity"][d], out["method"][d] = side, sev, m
        out["strength"][d] = float(s)
        out["tool"][d] = sev == "light" and d != "missing_value"
        load[side] += 2.0 if sev == "heavy" else 1.0
    return Pair(
        sides["A"],
        sides["B"],
        tuple(dimensions),
        out["worse"],
        out["severity"],
        out["method"],
        out["strength"],
        out["tool"],
        load,
    )


def make_pairs(n_pairs: int, seed: int, **kwargs) -> list[Pair]:
    """``n_pairs`` pairs from one seed (a split of TSQBench-lite)."""
    n_pairs = checks.integer(n_pairs, "n_pairs", minimum=1)
    rng = np.random.default_rng(checks.integer(seed, "seed", minimum=0))
    return [make_pair(rng, **kwargs) for _ in range(n_pairs)]


# --------------------------------------------------------------------------- the no-tool view
def view_statistics(x) -> np.ndarray:
    """The 9 statistics of the no-tool view (eq. `tsqbench-view`): length, missing ratio, mean,
    std, min, max, p25, p75 and the least-squares slope per step, over the k non-missing
    values, as the released ``_basic_stats`` (agents/perceiver.py) computes them.

    The missing ratio is 1 - k / n for every k, so one valid value of two is a missing share of
    1/2 with that value's mean, min, max and quartiles (std 0). Where the released function
    gives None (no valid value: every statistic but the length and the missing ratio; fewer
    than two: the slope), this gives 0. An empty series raises an error."""
    x = np.asarray(x, float)
    if x.ndim != 1 or x.size == 0:
        raise checks.InputError(
            f"x must be a non-empty 1-D series; got shape {x.shape} (allowed: n >= 1 values)"
        )
    ok = np.isfinite(x)
    v = x[ok]
    miss = 1 - v.size / x.size
    if v.size == 0:
        return np.array([x.size, 1.0] + [0.0] * 7)
    slope = 0.0
    if v.size >= 2:
        t = np.arange(x.size)[ok].astype(float)
        tc = t - t.mean()
        slope = float(tc @ (v - v.mean()) / (tc @ tc))  # least-squares slope, closed form
    p25, p75 = np.percentile(v, [25, 75])
    return np.array([x.size, miss, v.mean(), v.std(), v.min(), v.max(), p25, p75, slope])


def preview(x, max_points: int = 200, sample_size: int = 60) -> np.ndarray:
    """The no-tool preview, as the released ``_series_preview`` (agents/perceiver.py) takes
    it: the whole series when it has at most ``max_points`` points; otherwise the first 20,
    then every ``step``-th point of x[20:-20], step = max(1, (n - 40) // (sample_size - 40)),
    cut to sample_size - 40 points, then the last 20."""
    x = np.asarray(x, float)
    max_points = checks.integer(max_points, "max_points", minimum=40)
    sample_size = checks.integer(sample_size, "sample_size", minimum=41)
    if x.size <= max_points:
        return x.copy()
    k = sample_size - 40  # middle points
    step = max(1, (x.size - 40) // k)
    return np.concatenate([x[:20], x[20:-20:step][:k], x[-20:]])


def no_tool_view(x, max_points: int = 200) -> dict:
    """What a judge without tools sees of one series: :func:`preview` and the 9 statistics of
    :func:`view_statistics`."""
    x = np.asarray(x, float)
    return {
        "preview": preview(x, max_points),
        "stats": dict(zip(STAT_NAMES, view_statistics(x), strict=True)),
    }
