"""Chapter 02's rules do not depend on rounding: the angular mean found by Riemannian descent
(and exactly on the circle) moves with its inputs only at rounding level, and a share that is
reached exactly is never reported as short by a rounding error."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers import angular_mean as am
from reprobook.papers.angular_mean import generators as gen
from reprobook.papers.angular_mean.geometry import angle


@pytest.mark.parametrize("n, d, seed", [(12, 2, 0), (12, 3, 1), (25, 5, 2), (40, 3, 3)])
def test_angular_mean_is_stable_under_jitter(n, d, seed):
    # The descent stops at a stationarity residual of 1e-12, so voters moved by 1e-12 relative
    # move the minimiser by about as much. A start chosen by the last bits of the objective
    # between two different local minima, or a descent stopped early for some seeds, would
    # move it by far more than 1e-8 rad.
    thetas, alphas = gen.random_profile(n, d, 0.5, rng=seed)
    ref = am.angular_mean_info(thetas, alphas)
    for s in range(5):
        moved_alphas = core.jitter(alphas, s + 20)
        info = am.angular_mean_info(core.jitter(thetas, s), moved_alphas / moved_alphas.sum())
        assert float(angle(info.direction, ref.direction)) < 1e-8
        assert info.objective == pytest.approx(ref.objective, rel=1e-9)
        assert len(info.local_minima) == len(ref.local_minima)


def test_a_share_reached_exactly_is_not_short_by_rounding():
    # 0.1 * 3 is 0.30000000000000004, so a voter whose agreement is exactly 3 of 10 pairs falls
    # short of that share by 5.6e-17: a positive shortfall that the log-log fit of the slope
    # would have taken as a real one (log 5.6e-17 = -37.4).
    thetas, alphas = gen.type_profile(3, 0.6 * np.pi, (0.1 * 3, 0.7), rng=0)
    rule = am.arithmetic_mean(thetas, alphas)
    rng = np.random.default_rng(0)
    for _ in range(2000):  # a batch of 5 items (10 pairs) on which voter 0 agrees on 3
        X = gen.gaussian_batches(1, 5, 3, rng)[0]
        A = am.per_batch_agreement(rule, thetas, X)
        if A[0] == 0.3 and A[1] >= 0.7:
            break
    else:
        pytest.fail("no batch with an agreement of exactly 3 of 10 pairs")
    assert alphas[0] - A[0] == pytest.approx(5.55e-17, rel=0.01)
    res = am.per_batch_shortfall(rule, thetas, alphas, X)
    assert float(res.shortfall) == 0.0 and not res.violated
