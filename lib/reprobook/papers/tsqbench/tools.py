"""The Inspector's analysis tools: deterministic measurements of one series, cached per series.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629). The agent's Inspector calls tools (missing ratio, noise profile, outlier
detectors, change points, stationarity tests, seasonality) instead of reading numbers off a
preview. These are the field's library calls (statsmodels' STL, ``adfuller``, ``kpss`` and
``acf``; ruptures; scipy.signal), each reduced to one number; :func:`defect_statistics` gives
the seven per-dimension statistics that the Inspector compares (eq. `tsqbench-margin`).

Options where the released code and its description differ (named defaults):
``changepoint="binseg"`` (ruptures' binary segmentation on the series scaled by the robust
noise level; ``"pelt"`` is the released choice, about eight times slower here) and
``detrend="centered"`` (the released tools use trailing moving averages over full windows:
``"trailing"``).
"""

from __future__ import annotations

import hashlib

import numpy as np
import ruptures as rpt
from scipy import signal
from statsmodels.tsa.seasonal import STL
from statsmodels.tsa.stattools import acf, adfuller, kpss

from reprobook.core import checks

from .bench import DIMENSIONS

__all__ = [
    "fill_missing",
    "missing_ratio",
    "rolling_mean",
    "noise_profile",
    "mad_outliers",
    "zscore_outliers",
    "change_points",
    "stationarity",
    "seasonality",
    "trend_sign",
    "defect_statistics",
    "ToolCache",
    "TOOL_STATS",
]

TOOL_STATS = DIMENSIONS  # one statistic per quality dimension of the benchmark


def missing_ratio(x) -> float:
    """Share of NaN entries."""
    x = checks.array(x, "x", ndim=1, finite=False)
    return float(np.mean(~np.isfinite(x))) if x.size else 0.0


def fill_missing(x) -> np.ndarray:
    """NaNs replaced by linear interpolation (ends held); all-NaN gives zeros."""
    x = np.asarray(x, float).copy()
    bad = ~np.isfinite(x)
    if bad.all():
        return np.zeros_like(x)
    if bad.any():
        idx = np.arange(x.size)
        x[bad] = np.interp(idx[bad], idx[~bad], x[~bad])
    return x


def rolling_mean(x, window: int, detrend: str = "centered") -> np.ndarray:
    """Moving average of ``window`` points, centred (edges shrink) or trailing."""
    checks.choice(detrend, "detrend", ("centered", "trailing"))
    x = np.asarray(x, float)
    w = checks.integer(window, "window", minimum=1)
    kernel = np.ones(w)
    num = np.convolve(x, kernel, mode="full")
    den = np.convolve(np.ones_like(x), kernel, mode="full")
    if detrend == "trailing":
        return num[: x.size] / den[: x.size]
    lo = (w - 1) // 2
    return num[lo : lo + x.size] / den[lo : lo + x.size]


def noise_profile(x, window: int | None = 5, detrend: str = "centered") -> float:
    """Noise-to-signal ratio: the std of x minus its moving average of ``window`` points, over
    the std of x.

    ``detrend="centered"`` (ours): NaNs interpolated, a centred average whose windows shrink at
    the edges, so every point has a residual. ``detrend="trailing"`` follows the released tool
    (tools/bad_quality.py, ``noise_profile``): NaNs are dropped, only full trailing windows
    are scored (the residual of point t >= w - 1 is x_t minus the mean of x_{t-w+1..t}), the
    spread is that of the valid values, and the answer is NaN when fewer than ``window``
    valid values remain (the series is too short) or the series is constant. ``window=None``
    is the released automatic window, max(5, min(k // 50, 50)) for k valid values."""
    checks.choice(detrend, "detrend", ("centered", "trailing"))
    x = checks.array(x, "x", ndim=1, finite=False)
    if detrend == "trailing":
        v = x[np.isfinite(x)]
        w = max(5, min(v.size // 50, 50)) if window is None else window
        w = checks.integer(w, "window", minimum=1)
        sd = float(np.std(v)) if v.size else 0.0
        if v.size < w or sd == 0:
            return float("nan")  # too short for one full window, or no spread to compare
        resid = v[w - 1 :] - np.convolve(v, np.ones(w) / w, mode="valid")  # full windows only
        return float(np.std(resid) / sd)
    xf = fill_missing(x)
    w = max(5, min(xf.size // 50, 50)) if window is None else window
    resid = xf - rolling_mean(xf, w, detrend)
    sd = float(np.std(xf))
    return float(np.std(resid) / sd) if sd > 0 else 0.0


def mad_outliers(x, threshold: float = 3.5, detrend: str = "centered") -> np.ndarray:
    """Indices whose robust z-score |r - median(r)| / sigma exceeds ``threshold``, r being x
    minus its moving median (window max(7, n // 30), odd; scipy.signal.medfilt) and sigma the
    noise level 1.4826 MAD(diff x) / sqrt(2). (The released tool subtracts a moving mean, which
    smears a spike into its neighbours, and scales by the MAD of r, which a moving median drives
    to zero on smooth stretches; ``detrend="trailing"`` keeps the trailing mean.)"""
    x = fill_missing(x)
    w = max(7, x.size // 30) | 1
    if detrend == "trailing":
        r = x - rolling_mean(x, w, detrend)
    else:
        r = x - signal.medfilt(np.pad(x, w // 2, mode="edge"), w)[w // 2 : w // 2 + x.size]
    med = np.median(r)
    d = np.diff(x)
    sigma = 1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2) if d.size else 0.0
    if sigma == 0:
        return np.flatnonzero(np.abs(r - med) > 0)
    return np.flatnonzero(np.abs(r - med) / sigma > threshold)


def zscore_outliers(x, threshold: float = 3.0) -> np.ndarray:
    """Indices of first differences more than ``threshold`` robust standard deviations out."""
    d = np.diff(fill_missing(x))
    if d.size == 0:
        return np.array([], dtype=int)
    mad = np.median(np.abs(d - np.median(d))) / 0.6745
    sd = mad if mad > 0 else (np.std(d) or 1.0)
    return np.flatnonzero(np.abs(d - np.median(d)) / sd > threshold)


def change_points(x, method: str = "binseg", penalty: float = 3.0) -> list[int]:
    """Breakpoints of the mean (ruptures, l2 cost, penalty ``penalty * ln n``) on the series
    standardised (unit std), so that the penalty does not depend on units (the released tool
    runs on the raw series, whose units then set the number of breaks)."""
    checks.choice(method, "method", ("binseg", "pelt"))
    x = fill_missing(x)
    sd = float(np.std(x))
    z = (x - x.mean()) / (sd if sd > 0 else 1.0)
    algo = (rpt.Binseg if method == "binseg" else rpt.Pelt)(model="l2", min_size=5, jump=5)
    return algo.fit(z).predict(pen=penalty * np.log(x.size))[:-1]


def stationarity(x) -> dict:
    """ADF (constant and trend, 4 lags) and KPSS (trend, 4 lags) p-values, statsmodels'
    result objects. KPSS p-values are clipped to its table, [0.01, 0.1]."""
    import warnings

    x = fill_missing(x)
    adf = adfuller(x, maxlag=4, autolag=None, regression="ct", result_object=True)
    with warnings.catch_warnings():  # "outside the p-value table" is expected and clipped
        warnings.simplefilter("ignore")
        kp = kpss(x, regression="ct", nlags=4, result_object=True)
    return {"adf_p": float(adf.pvalue), "kpss_p": float(kp.pvalue)}


def seasonality(x, max_period: int | None = None) -> dict:
    """The dominant period (highest autocorrelation peak over lags 2..n/3 of the linearly
    detrended series, via scipy.signal.find_peaks) and its autocorrelation; period 0 when no
    peak exists."""
    x = fill_missing(x)
    n = x.size
    u = np.arange(n)
    r = x - np.polyval(np.polyfit(u, x, 1), u)
    lags = max_period or n // 3
    rho = acf(r, nlags=lags, fft=True)
    peaks, _ = signal.find_peaks(rho[1:])
    peaks = peaks + 1
    peaks = peaks[peaks >= 2]
    if peaks.size == 0:
        return {"period": 0, "acf": 0.0}
    best = int(peaks[np.argmax(rho[peaks])])
    return {"period": best, "acf": float(rho[best])}


def trend_sign(x) -> int:
    """Sign of the least-squares slope (+1 rising, -1 falling, 0 flat). A slope whose change
    over the series is within rounding of the series' size (|slope| n <= 1e-9 max |x|) counts
    as flat: a constant or symmetric series has slope 0, which a least-squares solve returns
    as a few ulps of either sign."""
    x = fill_missing(x)
    slope = float(np.polyfit(np.arange(x.size), x, 1)[0])
    if abs(slope) * x.size <= 1e-9 * float(np.abs(x).max()):
        return 0
    return int(np.sign(slope))


def defect_statistics(x, *, changepoint: str = "binseg", detrend: str = "centered") -> dict:
    """The tools run once on one series: the seven defect statistics (higher is worse) that
    the Inspector compares, and the auxiliary measurements the Adjudicator's recheck uses.

    missing_value: missing ratio. noise_level: noise-to-signal ratio (window 5). rare_pattern:
    MAD outliers plus jump outliers of the differences, per 100 points. trend: 1 - R^2 of a line
    fitted to the STL trend. frequency: normalised spectral entropy of the STL-detrended series.
    amplitude: coefficient of variation of the per-cycle range of the detrended series.
    pattern_consistency: spread (std) of the log windowed std of the differences, plus the share
    of zero differences."""
    raw = checks.array(x, "x", ndim=1, finite=False)
    xf = fill_missing(raw)
    n = xf.size
    season = seasonality(xf)
    period = season["period"] if season["period"] >= 4 else 12
    fit = STL(xf, period=int(period) + (1 - int(period) % 2)).fit()
    trend = np.asarray(fit.trend)
    u = np.arange(n)
    line = np.polyval(np.polyfit(u, trend, 1), u)
    var_t = float(np.var(trend))
    r2 = 1 - float(np.var(trend - line)) / var_t if var_t > 0 else 0.0
    detr = xf - trend
    _, pxx = signal.periodogram(detr)
    p = pxx[1:] / pxx[1:].sum() if pxx[1:].sum() > 0 else np.full(pxx.size - 1, 1 / (pxx.size - 1))
    entropy = float(-(p * np.log(p + 1e-300)).sum() / np.log(p.size))
    k = max(1, n // int(period))
    ranges = np.array([np.ptp(c) for c in np.array_split(detr[: k * int(period)], k)])
    amp_cv = float(np.std(ranges) / np.mean(ranges)) if ranges.mean() > 0 else 0.0
    d = np.diff(xf)
    sds = np.array([np.std(c) for c in np.array_split(d, max(2, n // 16))])
    floor = 1e-3 * (np.std(d) or 1.0)
    spread = float(np.std(np.log(sds + floor))) + float(np.mean(d == 0))
    rare = (len(mad_outliers(xf, detrend=detrend)) + len(zscore_outliers(xf))) * 100 / n
    stat = stationarity(xf)
    return {
        "missing_value": missing_ratio(raw),
        "noise_level": noise_profile(xf, detrend=detrend),
        "rare_pattern": float(rare),
        "trend": float(1 - r2),
        "frequency": entropy,
        "amplitude": amp_cv,
        "pattern_consistency": spread,
        # auxiliary measurements (recheck)
        "n_changepoints": len(change_points(xf, changepoint)),
        "adf_p": stat["adf_p"],
        "kpss_p": stat["kpss_p"],
        "period": int(season["period"]),
        "acf_peak": season["acf"],
        "seasonal_strength": float(
            max(0.0, 1 - np.var(fit.resid) / (np.var(fit.resid + fit.seasonal) or 1.0))
        ),
    }


class ToolCache:
    """Tool outputs per series, computed once (a series appears in many pairs), keyed by a hash
    of its bytes. ``calls`` counts the series actually analysed."""

    def __init__(self, changepoint: str = "binseg", detrend: str = "centered"):
        self.changepoint = checks.choice(changepoint, "changepoint", ("binseg", "pelt"))
        self.detrend = checks.choice(detrend, "detrend", ("centered", "trailing"))
        self._store: dict[str, dict] = {}
        self.calls = 0

    def __call__(self, x) -> dict:
        arr = np.ascontiguousarray(np.asarray(x, float))
        key = hashlib.sha1(arr.tobytes()).hexdigest()
        if key not in self._store:
            self.calls += 1
            self._store[key] = defect_statistics(
                arr, changepoint=self.changepoint, detrend=self.detrend
            )
        return self._store[key]

    def __len__(self) -> int:
        return len(self._store)
