"""Chapter 03's scaling-law fit gives the same parameters when the losses and sizes move at
rounding level, and cannot fail to converge."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.trimodal_mdm import reparam

SIZES = np.array([1300.0, 3300.0, 9500.0, 31000.0])  # about the reduced MLPs' parameter counts


@pytest.mark.parametrize(
    "losses",
    [np.array([2.1, 1.9, 1.82, 1.80]), np.array([2.05, 1.97, 1.99, 1.93])],
    ids=["falling", "noisy"],
)
def test_scaling_fit_is_stable_under_jitter(losses):
    # SciPy's curve_fit on (E, A, alpha), which the fit used before, stopped on its
    # tolerances at points that moved by up to 4e-5 relative (the noisy losses) when sizes and
    # losses moved by 1e-12: this test failed with it.
    ref = reparam.fit_scaling_law(SIZES, losses)
    for seed in range(6):
        fit = reparam.fit_scaling_law(core.jitter(SIZES, seed), core.jitter(losses, seed + 10))
        for name in ("E", "A", "alpha"):
            assert fit[name] == pytest.approx(ref[name], rel=1e-6)


def test_scaling_fit_is_the_least_squares_optimum():
    n = np.array([1e3, 3e3, 1e4, 3e4, 1e5])
    exact = reparam.fit_scaling_law(n, reparam.power_law(n, 1.2, 30.0, 0.5))
    assert [exact["E"], exact["A"], exact["alpha"]] == pytest.approx([1.2, 30.0, 0.5], rel=1e-6)
    losses = np.array([2.05, 1.97, 1.99, 1.93])
    fit = reparam.fit_scaling_law(SIZES, losses)
    best = np.sum((reparam.power_law(SIZES, fit["E"], fit["A"], fit["alpha"]) - losses) ** 2)
    rng = np.random.default_rng(0)  # no nearby admissible point fits better
    for _ in range(200):
        e, a, alpha = np.array([fit["E"], fit["A"], fit["alpha"]]) * (1 + 1e-3 * rng.normal(size=3))
        sse = np.sum((reparam.power_law(SIZES, e, a, min(alpha, 3.0)) - losses) ** 2)
        assert sse >= best * (1 - 1e-9)


def test_scaling_fit_of_losses_that_do_not_fall_is_a_constant():
    rising = np.array([1.8, 1.85, 1.9, 1.95])
    for seed in range(4):
        fit = reparam.fit_scaling_law(core.jitter(SIZES, seed), core.jitter(rising, seed))
        assert fit["A"] == 0.0 and fit["alpha"] == reparam.ALPHA_GRID[0]
        assert fit["E"] == pytest.approx(rising.mean(), rel=1e-9)
    flat = reparam.fit_scaling_law(SIZES, np.full(4, 1.9))
    assert flat["E"] + flat["A"] * SIZES[0] ** -flat["alpha"] == pytest.approx(1.9)
    with pytest.raises(ValueError, match="sizes must be positive"):
        reparam.fit_scaling_law([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
