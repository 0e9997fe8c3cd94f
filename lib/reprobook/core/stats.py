"""Small statistics shared by the chapters: the Student-t interval of a mean."""

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


def t_interval(values, level: float = 0.95) -> TInterval:
    """mean +- t_{(1+level)/2, n-1} s / sqrt(n): the two-sided Student-t interval of the mean of
    n >= 2 finite values (seeds, sequences, ...), at confidence ``level`` in (0, 1)."""
    v = np.asarray(values, dtype=float).reshape(-1)
    if v.size < 2:
        raise ValueError(f"need at least 2 values, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"all values must be finite; {int(np.sum(~np.isfinite(v)))} of {v.size} are not")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    m = float(v.mean())
    se = float(v.std(ddof=1) / math.sqrt(v.size))
    half = float(stats.t.ppf((1 + level) / 2, v.size - 1)) * se
    return TInterval(m, m - half, m + half, se, int(v.size))
