"""The example method of chapter 11 (replace with the paper's): the sample mean."""

from __future__ import annotations

import numpy as np

from reprobook.core import checks


def estimate(x) -> float:
    """The sample mean of the draws ``x`` (1-D, finite, at least one).

    Implements eq. `test-time-baking-estimator` of notebooks/11_test_time_baking/index.md.
    """
    x = checks.array(x, "x", ndim=1)
    if x.size == 0:
        raise checks.InputError("x must hold at least one draw, got an empty array")
    return float(np.sum(x) / x.size)  # eq. test-time-baking-estimator: (1 / n) sum_i x_i
