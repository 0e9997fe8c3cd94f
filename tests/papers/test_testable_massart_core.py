"""Tests of the core of reprobook.papers.testable_massart (arXiv 2602.22300): the Hermite basis,
the sandwich LP and the moment tester.

Exact properties where they exist (Gauss-Hermite quadrature is exact for the polynomials
involved, closed forms, brute force, LP invariances); seeded Monte Carlo with stated tolerances
for the calibrated tester; clear errors on bad input.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from numpy.polynomial import hermite_e
from scipy import integrate
from scipy.stats import chi2, norm

from reprobook import core
from reprobook.papers.testable_massart import hermite, sandwich, tester
from reprobook.papers.testable_massart.hermite import (
    feature_means,
    features,
    gauss_hermite_product,
    hermite_1d,
    multi_indices,
    n_features,
)
from reprobook.papers.testable_massart.sandwich import (
    bias,
    christoffel_gap,
    degree_needed,
    degree_needed_closed_form,
    lp_grid,
    sign_mean,
)
from reprobook.papers.testable_massart.tester import (
    MomentTester,
    calibrate,
    chi2_calibration,
    moment_statistic,
    population_statistic,
    time_statistic,
)

# --- hermite ---------------------------------------------------------------------------------


def test_features_are_orthonormal_under_the_gaussian_exactly():
    # 5 nodes per coordinate integrate degree <= 9 per coordinate: products H_a H_b with
    # |a|, |b| <= 4 are exact
    atoms, w = gauss_hermite_product(3, 5)
    F = features(atoms, 4)  # (125, 35)
    gram = F.T @ (w[:, None] * F)
    assert F.shape == (125, n_features(3, 4)) == (125, 35)
    np.testing.assert_allclose(gram, np.eye(35), atol=1e-10, rtol=0)


@pytest.mark.parametrize("d,degree", [(1, 0), (1, 7), (2, 3), (3, 4), (5, 4), (20, 3)])
def test_multi_indices_count_and_order(d, degree):
    A = multi_indices(d, degree)
    assert A.shape == (math.comb(d + degree, degree), d) == (n_features(d, degree), d)
    assert n_features(d, degree, include_constant=False) == math.comb(d + degree, degree) - 1
    assert len({tuple(a) for a in A}) == A.shape[0]  # all distinct
    total = A.sum(axis=1)
    assert A.min() >= 0 and total.max(initial=0) <= degree
    assert np.all(np.diff(total) >= 0)  # graded by total degree
    for k in range(degree + 1):  # within a degree: decreasing lexicographic order
        block = [tuple(a) for a in A[total == k]]
        assert block == sorted(block, reverse=True)
    B = multi_indices(d, degree, include_constant=False)
    np.testing.assert_array_equal(B, A[1:])


def test_multi_indices_small_case_by_hand():
    np.testing.assert_array_equal(
        multi_indices(2, 2), [[0, 0], [1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
    )


def test_hermite_1d_matches_numpy_hermite_e():
    x = np.linspace(-6, 6, 41)
    V = hermite_1d(x, 12)
    for j in range(13):
        He_j = hermite_e.hermeval(x, np.eye(13)[j])
        np.testing.assert_allclose(
            V[:, j], He_j / math.sqrt(math.factorial(j)), rtol=1e-11, atol=1e-11
        )
    assert hermite_1d(np.zeros((2, 3)), 4).shape == (2, 3, 5)


def test_features_brute_force_and_explicit_indices():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3))
    A = multi_indices(3, 3)
    F = features(X, 3)
    h = hermite_1d(X, 3)  # (7, 3, 4)
    brute = np.stack([np.prod([h[:, j, a[j]] for j in range(3)], axis=0) for a in A], axis=1)
    np.testing.assert_allclose(F, brute, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(
        features(X, 99, indices=A[::-1]), brute[:, ::-1], rtol=1e-13, atol=1e-13
    )
    np.testing.assert_allclose(
        features(X, 3, include_constant=False), brute[:, 1:], rtol=1e-13, atol=1e-13
    )


def test_features_blocks_agree_with_one_block(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 4))
    full = features(X, 4)
    means = feature_means(X, 4)
    w = rng.uniform(size=500)
    wmeans = feature_means(X, 4, weights=w)
    monkeypatch.setattr(hermite, "_BLOCK_ENTRIES", 70)  # forces blocks of _MIN_ROWS rows
    np.testing.assert_allclose(features(X, 4), full, rtol=0, atol=0)
    np.testing.assert_allclose(feature_means(X, 4), full.mean(axis=0), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(means, full.mean(axis=0), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(wmeans, (w / w.sum()) @ full, rtol=1e-12, atol=1e-13)


def test_features_are_the_column_gathered_products_bit_for_bit():
    # the product of each feature's factors, gathered column by column from hermite_1d's table and
    # multiplied in the order of _sparse_form (padding factors are h_0 = 1): the blocks gather
    # rows of a transposed table instead, which must not move a single bit
    rng = np.random.default_rng(4)
    for n, d, k, constant in [(700, 5, 4, False), (300, 3, 3, True), (50, 1, 6, True)]:
        X = rng.standard_normal((n, d)) * 2.0
        A, cols = hermite._cached_plan(d, k, constant)
        table = hermite_1d(X, k).reshape(n, d * (k + 1))
        want = np.take(table, cols[0], axis=1)
        for c in cols[1:]:
            want *= np.take(table, c, axis=1)
        got = features(X, k, include_constant=constant)
        assert got.flags.c_contiguous and got.tobytes() == want.tobytes()
        rows = hermite._hermite_rows(np.ascontiguousarray(X.T), k)
        assert rows.transpose(1, 2, 0).tobytes() == hermite_1d(X, k).transpose(2, 0, 1).tobytes()


def test_gauss_hermite_product_matches_gaussian_moments():
    atoms, w = gauss_hermite_product(3, 3)
    assert atoms.shape == (27, 3) and w.shape == (27,)
    assert abs(w.sum() - 1.0) < 1e-15 and np.all(w > 0)
    # every feature with all a_j <= 5 has mean [a = 0]
    A = np.array([a for a in np.ndindex(6, 6, 6)])
    m = feature_means(atoms, 0, indices=A, weights=w)
    np.testing.assert_allclose(m, (A.sum(axis=1) == 0).astype(float), atol=1e-13)
    # and the rule is NOT exact one degree higher: E[h_6] = -6 / sqrt(720) on 3 nodes
    m6 = feature_means(atoms, 0, indices=np.array([[6, 0, 0]]), weights=w)
    assert abs(m6[0] + 6 / math.sqrt(720)) < 1e-13


def test_hermite_errors():
    with pytest.raises(ValueError, match="shape"):
        features(np.zeros(5), 2)
    with pytest.raises(ValueError, match="finite"):
        features(np.array([[0.0, np.nan]]), 2)
    with pytest.raises(ValueError, match="degree"):
        features(np.zeros((3, 2)), -1)
    with pytest.raises(TypeError, match="degree"):
        multi_indices(2, 2.5)
    with pytest.raises(ValueError, match="d must"):
        n_features(0, 2)
    with pytest.raises(ValueError, match="indices"):
        features(np.zeros((3, 2)), 2, indices=np.zeros((4, 3), dtype=int))
    with pytest.raises(ValueError, match="non-negative"):
        features(np.zeros((3, 2)), 2, indices=np.array([[1, -1]]))
    with pytest.raises(ValueError, match="weights"):
        feature_means(np.zeros((3, 2)), 2, weights=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="atoms"):
        gauss_hermite_product(20, 3)
    with pytest.raises(ValueError, match="n_nodes"):
        gauss_hermite_product(2, 0)


# --- sandwich --------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [-2.5, -0.7, 0.0, 0.3, 1.0, 3.0, 6.0])
def test_bias_and_sign_mean_by_integration(t):
    right, _ = integrate.quad(norm.pdf, t, np.inf)
    left, _ = integrate.quad(norm.pdf, -np.inf, t)
    assert abs(sign_mean(t) - (right - left)) < 1e-10
    assert abs(sign_mean(t) - (1 - 2 * norm.cdf(t))) < 1e-15
    assert abs(bias(t) - min(left, right)) < 1e-10


def test_sign_mean_against_monte_carlo():
    z = np.random.default_rng(2).standard_normal(200_000)
    for t in (0.0, 1.0, -1.5):
        mc = np.where(z >= t, 1.0, -1.0).mean()
        assert abs(mc - sign_mean(t)) < 5 * 2 / math.sqrt(z.size)


def _check_sandwich(r, tol):
    z, _ = lp_grid(r.t)
    f = np.where(z >= r.t, 1.0, -1.0)
    assert np.all(r.p_lo(z) <= f + tol) and np.all(f <= r.p_up(z) + tol)
    assert r.grid_violation <= tol


@pytest.mark.parametrize("t", [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
def test_sandwich_holds_on_and_off_the_grid_up_to_degree_8(t):
    for k in (2, 4, 6, 8):
        r = sandwich.sandwich(t, k)
        _check_sandwich(r, 1e-7)
        assert r.off_grid_violation <= 1e-3, (t, k, r.off_grid_violation, r.off_grid_where)
        # independent check off the grid: a fine grid over [-2R, 2R] shifted from the LP's points
        zz = np.linspace(-2 * r.radius, 2 * r.radius, 48_017)
        ff = np.where(zz >= t, 1.0, -1.0)
        assert np.max(r.p_lo(zz) - ff) <= 1e-3 and np.max(ff - r.p_up(zz)) <= 1e-3


@pytest.mark.parametrize("t,k", [(0.0, 4), (1.0, 6), (3.0, 8), (2.0, 12)])
def test_gap_is_the_gaussian_mean_of_p_up_minus_p_lo(t, k):
    r = sandwich.sandwich(t, k)
    nodes, w = hermite_e.hermegauss(20)  # exact for degree <= 39
    w = w / w.sum()
    assert abs(w @ (r.p_up(nodes) - r.p_lo(nodes)) - r.gap) < 1e-10
    assert abs(r.gap / r.gamma - r.ratio) < 1e-12 * r.ratio
    assert r.gamma == bias(t)


def test_degree_zero_and_one_are_the_constants():
    for t in (0.0, 1.7, -3.0):
        for k in (0, 1):
            r = sandwich.sandwich(t, k)
            assert abs(r.gap - 2.0) < 1e-9
            np.testing.assert_allclose(r.p_up(np.array([-50.0, t, 50.0])), 1.0, atol=1e-9)
            np.testing.assert_allclose(r.p_lo(np.array([-50.0, t, 50.0])), -1.0, atol=1e-9)


@pytest.mark.parametrize("t", [0.0, 1.0, 2.5])
def test_gap_non_increasing_in_even_degree(t):
    gaps = [sandwich.sandwich(t, k).gap for k in range(0, 14, 2)]
    assert np.all(np.diff(gaps) <= 1e-7), gaps
    assert gaps[-1] < gaps[0] - 0.1  # and it does decrease


@pytest.mark.parametrize("t", [0.5, 1.5, 3.0])
def test_gap_symmetric_in_t(t):
    for k in (4, 8):
        assert abs(sandwich.sandwich(t, k).gap - sandwich.sandwich(-t, k).gap) < 1e-7


def test_odd_degree_gains_nothing_with_tail_constraints():
    # a true sandwich of odd degree has a zero leading coefficient, so G(t, 2m + 1) = G(t, 2m)
    # (up to ~5e-7: the LP's constraint at z = +-infinity holds c_k = 0 only to HiGHS's tolerance)
    for t in (0.0, 1.0, 3.0):
        for k in (3, 5):
            assert abs(sandwich.sandwich(t, k).gap - sandwich.sandwich(t, k - 1).gap) < 1e-6
    # the plain grid LP (no tail constraints) is fooled in the tails: it is below the true value
    plain = sandwich.sandwich(3.0, 3, tail_points=0)
    assert plain.gap < sandwich.sandwich(3.0, 2).gap - 0.01
    assert plain.off_grid_violation > 1.0


def test_leading_coefficients_have_the_right_sign():
    for t in (0.0, 2.0):
        for k in (4, 8, 12):
            r = sandwich.sandwich(t, k)
            assert r.coef_up[-1] >= -1e-9 and r.coef_lo[-1] <= 1e-9


def test_refinement_does_not_worsen_the_sandwich():
    r0 = sandwich.sandwich(0.0, 8)
    r2 = sandwich.sandwich(0.0, 8, refine=2)
    assert r2.off_grid_violation <= r0.off_grid_violation
    assert r2.gap >= r0.gap - 1e-9  # more constraints: never a smaller optimum
    assert r2.refine_rounds >= 1


def test_a_kept_sandwich_is_the_one_a_fresh_solve_gives():
    kw = dict(grid_points=301, refine=3)
    first = sandwich.sandwich(0.5, 6, **kw)
    assert sandwich.sandwich(0.5, 6, **kw) is first  # kept, not solved again
    assert sandwich.sandwich(np.float64(0.5), np.int64(6), **kw) is first
    assert sandwich.sandwich(0.5, 6, grid_points=301, refine=2) is not first  # other arguments
    sandwich._sandwich.cache_clear()
    fresh = sandwich.sandwich(0.5, 6, **kw)
    assert fresh is not first
    # the LPs are deterministic: the kept result is bit for bit the fresh one
    for name in ("gap", "grid_violation", "off_grid_violation", "inner_violation", "n_constraints"):
        assert getattr(fresh, name) == getattr(first, name)
    assert fresh.refine_rounds == first.refine_rounds
    np.testing.assert_array_equal(fresh.coef_up, first.coef_up)
    np.testing.assert_array_equal(fresh.coef_lo, first.coef_lo)
    assert not first.coef_up.flags.writeable  # what is kept cannot be changed by a caller
    assert math.copysign(1.0, sandwich.sandwich(-0.0, 2).t) == -1.0  # -0.0 is not 0.0's


def test_known_values_at_t_0():
    # the closed form at t = 0 (eq. massart-christoffel; the odd h_j(0) vanish, h_2(0)^2 = 1/2,
    # h_4(0)^2 = 3/8): G(0, 4) = 2 / (1 + 1/2) = 4/3 and G(0, 8) = 2 / (1 + 1/2 + 3/8) = 16/15.
    # These degrees do not cheat in the tails, so the plain LP reaches them.
    assert abs(sandwich.sandwich(0.0, 4).gap - 4 / 3) < 1e-4
    assert abs(sandwich.sandwich(0.0, 8).gap - 16 / 15) < 1e-3


@functools.cache
def refined(t: float, k: int):
    """The LP sandwich with exchange rounds on a 1001-point grid (cached within a worker)."""
    return sandwich.sandwich(t, k, grid_points=1001, refine=8)


@pytest.mark.parametrize("t", [0.0, 1.0, 2.0, 3.0])
def test_christoffel_gap_equals_the_lp_gap(t):
    # the closed form 2 lambda_{k/2}(t) against the LP optimum (t = 0.5, 1.5 at degrees 12, 16:
    # below)
    for k in (2, 6, 12, 16):
        r = refined(t, k)
        g = christoffel_gap(t, k)
        assert np.shape(g) == () and g > 0
        assert abs(r.gap - float(g)) <= 1e-5 * float(g), (t, k, r.gap, float(g))


def test_christoffel_gap_by_hand():
    # orthonormal Hermite: h_0 = 1, h_1 = z, h_2 = (z^2 - 1) / sqrt 2, h_3 = (z^3 - 3 z) / sqrt 6
    assert christoffel_gap(0.0, 2) == 2.0  # h_1(0) = 0
    assert abs(christoffel_gap(0.0, 4) - 4 / 3) < 1e-15  # 2 / (1 + 1/2)
    # h_odd(0) = 0 exactly (the recurrence multiplies by z = 0), so G(0, 4m) = G(0, 4m + 2) exactly
    assert christoffel_gap(0.0, 4) == christoffel_gap(0.0, 6)
    assert christoffel_gap(0.0, 8) == christoffel_gap(0.0, 10)
    assert christoffel_gap(0.0, 6) > christoffel_gap(0.0, 8)  # h_4(0) = 3 / sqrt 24 != 0
    ts = np.array([-2.5, -1.0, 0.3, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(christoffel_gap(ts, 2), 2 / (1 + ts**2), rtol=1e-14)
    np.testing.assert_allclose(
        christoffel_gap(ts, 4), 2 / (1 + ts**2 + (ts**2 - 1) ** 2 / 2), rtol=1e-14
    )
    np.testing.assert_allclose(
        christoffel_gap(ts, 7),
        2 / (1 + ts**2 + (ts**2 - 1) ** 2 / 2 + (ts**3 - 3 * ts) ** 2 / 6),
        rtol=1e-14,
    )
    # degrees 0 and 1 are the constants +-1; odd degrees add nothing; arrays keep their shape
    assert christoffel_gap(1.7, 0) == christoffel_gap(1.7, 1) == 2.0
    assert christoffel_gap(1.3, 9) == christoffel_gap(1.3, 8)
    grid = np.array([[0.0, 1.0], [2.0, 3.0]])
    out = christoffel_gap(grid, 12)
    assert out.shape == (2, 2)
    np.testing.assert_array_equal(out.ravel(), [christoffel_gap(t, 12) for t in grid.ravel()])


@pytest.mark.parametrize("target", [1.5, 3.0, 10.0, 40.0])
def test_degree_needed_closed_form_against_brute_force(target):
    ts = [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, -2.5]
    max_degree = 61  # odd: the largest degree searched is 60
    got = degree_needed_closed_form(ts, target, max_degree)
    assert list(got) == ts
    for t in ts:
        ratios = {k: float(christoffel_gap(t, k)) / bias(t) for k in range(0, max_degree + 1, 2)}
        assert min(abs(r - target) for r in ratios.values()) > 1e-9 * target  # no tie to break
        expected = next((k for k, r in ratios.items() if r <= target), None)
        assert got[t] == expected, (t, target, got[t], expected)
    # the answers cover hits at degree 0, hits higher up and misses (None) across the targets
    assert degree_needed_closed_form([0.0], 10.0, 0) == {0.0: 0}
    assert degree_needed_closed_form([3.0], 3.0, 61) == {3.0: None}


@pytest.mark.parametrize("t,k", [(0.5, 12), (1.5, 16)])
def test_exchange_rounds_make_high_degree_sandwiches_valid_on_the_range(t, k):
    # without refinement the degree-k optimum dives through f between the LP's points (here in the
    # tail R < |z| < R + 2, by 27 and 650): this is why the exchange rounds exist
    plain = sandwich.sandwich(t, k, grid_points=1001, refine=0)
    assert plain.off_grid_violation > 1e-3, plain.off_grid_violation
    assert plain.radius < abs(plain.off_grid_where) < plain.radius + 2
    r = refined(t, k)
    assert r.refine_rounds >= 1
    assert r.inner_violation <= 1e-5, r.inner_violation
    assert (
        r.off_grid_violation < 0.01 * plain.off_grid_violation
    )  # the tail miss shrinks by orders of magnitude
    # the refined LP keeps the optimal gap (the closed form; the dips cost nothing in
    # E[p_up - p_lo])
    assert abs(r.gap - float(christoffel_gap(t, k))) <= 1e-5 * float(christoffel_gap(t, k))
    # our own check on [-R, R], on a grid not aligned with the library's
    zz = np.linspace(-r.radius, r.radius, 100_003)
    ff = np.where(zz >= t, 1.0, -1.0)
    assert max(np.max(r.p_lo(zz) - ff), np.max(ff - r.p_up(zz))) <= 1e-5


@pytest.mark.parametrize("t,k", [(0.5, 12), (1.5, 16), (3.0, 16)])
def test_reported_violation_is_not_measured_at_constraints(t, k):
    """The exchange rounds add check-grid points as constraints; the reported violation comes from
    points no round can add, so an independent, finer grid finds no much larger miss."""
    r = refined(t, k)
    zz = np.linspace(
        -2 * r.radius, 2 * r.radius, 400_001
    )  # 5 times finer than the library's check grid
    ff = np.where(zz >= t, 1.0, -1.0)
    violation = max(0.0, np.max(r.p_lo(zz) - ff), np.max(ff - r.p_up(zz)))
    assert violation <= 2 * r.off_grid_violation + 1e-6, (violation, r.off_grid_violation)
    inner = np.abs(zz) <= r.radius
    inner_violation = max(0.0, np.max((r.p_lo(zz) - ff)[inner]), np.max((ff - r.p_up(zz))[inner]))
    assert inner_violation <= 2 * r.inner_violation + 1e-6, (inner_violation, r.inner_violation)


def test_table_and_degree_needed():
    res = sandwich.sandwich_table([0.0, 3.0], [2, 4, 6])
    assert [(r.t, r.degree) for r in res] == [
        (0.0, 2),
        (0.0, 4),
        (0.0, 6),
        (3.0, 2),
        (3.0, 4),
        (3.0, 6),
    ]
    need = degree_needed(res, 20.0)
    assert need == {0.0: 2, 3.0: 6}
    assert degree_needed(res, 1.0) == {0.0: None, 3.0: None}
    with pytest.raises(ValueError, match="ratio_target"):
        degree_needed(res, -1.0)


def test_sandwich_errors():
    with pytest.raises(ValueError, match="degree"):
        sandwich.sandwich(0.0, -1)
    with pytest.raises(ValueError, match="degree"):
        sandwich.sandwich(0.0, 41)
    with pytest.raises(TypeError, match="degree"):
        sandwich.sandwich(0.0, 2.0)
    with pytest.raises(ValueError, match="finite"):
        sandwich.sandwich(np.nan, 2)
    with pytest.raises(ValueError, match="radius"):
        sandwich.sandwich(3.0, 2, radius=2.0)
    with pytest.raises(ValueError, match="grid_points"):
        sandwich.sandwich(0.0, 2, grid_points=2)
    with pytest.raises(ValueError, match="tail_points"):
        sandwich.sandwich(0.0, 2, tail_points=-1)
    with pytest.raises(TypeError, match="t must"):
        bias("a")


# --- tester ----------------------------------------------------------------------------------


def test_moment_statistic_brute_force():
    X = np.random.default_rng(3).standard_normal((300, 3))
    F = features(X, 3, include_constant=False)
    assert abs(moment_statistic(X, 3) - 300 * np.sum(F.mean(axis=0) ** 2)) < 1e-9


def test_gauss_hermite_product_has_exact_gaussian_moments():
    atoms, w = gauss_hermite_product(5, 3)  # 243 atoms, exact up to degree 5 per coordinate
    assert population_statistic(atoms, w, 4) < 1e-12
    assert population_statistic(atoms, w, 5) < 1e-12
    # degree 6: only the pure h_6 terms miss, each by -6 / sqrt(720): 5 * 36 / 720 = 0.25
    assert abs(population_statistic(atoms, w, 6) - 0.25) < 1e-12


def test_uniform_grid_is_clearly_non_gaussian():
    # midpoint grid of the uniform law on [-sqrt 3, sqrt 3]^2 (mean 0, variance ~1)
    g = (np.arange(400) + 0.5) / 400 * 2 * math.sqrt(3) - math.sqrt(3)
    atoms = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1).reshape(-1, 2)
    w = np.ones(len(atoms))
    # E_U[h_4] = (9/5 - 6 + 3) / sqrt(24) per coordinate; everything else of degree <= 4 is ~0
    expected = 2 * (1.2**2) / 24
    assert abs(population_statistic(atoms, w, 4) - expected) < 1e-4
    # but up to degree 3 the uniform law's moments are the Gaussian's: a degree-3 test cannot see it
    assert population_statistic(atoms, w, 3) < 1e-9


@pytest.fixture(scope="module")
def small_calibration():
    return calibrate(3, 3, 2000, reps=400, quantile=0.9, rng=np.random.default_rng(10))


def test_null_calibration_and_false_rejection_rate(small_calibration):
    cal = small_calibration
    assert cal.df == 19 and cal.null_statistics.shape == (400,)
    # null mean ~ chi^2 mean (df), within 4 Monte Carlo standard errors
    assert abs(cal.null_statistics.mean() - cal.df) < 4 * math.sqrt(2 * cal.df / 400)
    assert abs(cal.threshold - cal.chi2_threshold) < 0.15 * cal.chi2_threshold
    test = MomentTester(cal)
    rng = np.random.default_rng(11)
    rejected = np.mean([not test.accepts(rng.standard_normal((2000, 3))) for _ in range(400)])
    assert abs(rejected - 0.1) < 0.06, rejected  # ~1 - quantile (sd ~0.021 from both Monte Carlos)


def test_moment_tester_on_samples_with_exact_gaussian_moments(small_calibration):
    test = MomentTester(small_calibration)  # d = 3, degree 3, n = 2000
    # the 2-node rule has nodes +-1 with weight 1/2: its 8 product atoms, 250 times each, match
    # every N(0, I_3) moment of degree <= 3 in each coordinate, so every feature mean is 0 and S = 0
    atoms, w = gauss_hermite_product(3, 2)
    np.testing.assert_array_equal(np.abs(atoms), 1.0)
    np.testing.assert_allclose(w, 1 / 8, rtol=1e-15)
    X = np.repeat(atoms, 250, axis=0)
    assert X.shape == (2000, 3)
    assert 0 <= test.statistic(X) < 1e-9
    assert test.accepts(X)
    assert test.p_value(X) == 1.0  # every null statistic is above 0
    assert test.statistic(X[::-1]) < 1e-9  # the order of the rows does not matter
    # the 3-node rule in d = 2 has weights (1, 4, 16) / 36: n = 1080 gives whole counts
    # (30, 120, 480).
    # It is exact up to degree 5, and misses E[h_6] = 0 by -6 / sqrt(720) in each coordinate, so
    # S = n (2 * 36 / 720) = 108 at degree 6: the tester accepts at degree 5 and rejects at 6
    atoms3, w3 = gauss_hermite_product(2, 3)
    counts = w3 * 1080
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    X3 = np.repeat(atoms3, np.round(counts).astype(int), axis=0)
    assert X3.shape == (1080, 2)
    t5 = MomentTester(calibrate(2, 5, 1080, reps=20, quantile=0.95, rng=np.random.default_rng(20)))
    t6 = MomentTester(calibrate(2, 6, 1080, reps=20, quantile=0.95, rng=np.random.default_rng(21)))
    assert 0 <= t5.statistic(X3) < 1e-9 and t5.accepts(X3)
    assert abs(t6.statistic(X3) - 108.0) < 1e-9
    assert t6.threshold < 108.0 and not t6.accepts(X3)


def test_tester_rejects_uniform_and_accepts_the_gauss_hermite_grid(small_calibration):
    test = MomentTester(small_calibration)
    rng = np.random.default_rng(12)
    U = rng.uniform(-math.sqrt(3), math.sqrt(3), size=(2000, 3))
    # degree 4 sees the uniform law (n * population statistic = 2000 * 0.18 = 360 >> threshold)
    test4 = MomentTester(
        calibrate(3, 4, 2000, reps=100, quantile=0.99, rng=np.random.default_rng(13))
    )
    assert not test4.accepts(U)
    assert test4.p_value(U) == 1 / 101
    atoms, w = gauss_hermite_product(3, 3)  # exact moments up to degree 5 > 3
    samples = [atoms[rng.choice(len(w), size=2000, p=w)] for _ in range(1000)]
    stats = np.array([test.statistic(G) for G in samples])
    assert stats[0] == moment_statistic(samples[0], 3)
    # the 3 nodes are the roots of He_3, so the 3 features h_3(x_j) vanish: S ~ chi^2 with 19 - 3
    # degrees of freedom
    assert abs(stats.mean() - 16) < 4 * math.sqrt(2 * 16 / 1000)
    # fewer degrees of freedom than the null's 19, so accepted more often than a Gaussian sample
    # (90%): at P[chi^2_16 <= threshold] = 0.955 (0.953 measured on 20000 samples), within 4
    # standard errors
    rate = np.mean(stats <= test.threshold)
    predicted = chi2.cdf(test.threshold, 16)
    assert abs(rate - predicted) < 4 * math.sqrt(predicted * (1 - predicted) / 1000), (
        rate,
        predicted,
    )
    assert rate >= 0.93
    # at the 0.99 level the degree-4 tester that rejects the cube accepts >= 95% of the grid's
    # samples
    # (the 9 features with some a_j = 3 vanish: S ~ chi^2_25 against the null's chi^2_34)
    accepted4 = np.mean([test4.accepts(G) for G in samples[:200]])
    assert accepted4 >= 0.95, accepted4


def test_calibration_is_reproducible():
    a = calibrate(2, 2, 100, reps=20, rng=np.random.default_rng(5))
    b = calibrate(2, 2, 100, reps=20, rng=np.random.default_rng(5))
    assert a.threshold == b.threshold and np.array_equal(a.null_statistics, b.null_statistics)
    assert a.threshold == float(np.quantile(a.null_statistics, 0.99))


def test_tester_errors(small_calibration):
    test = MomentTester(small_calibration)
    with pytest.raises(
        ValueError, match=r"X \(n, d\) of the calibration must have shape \(2000, 3\)"
    ):
        test.accepts(np.zeros((2000, 4)))
    with pytest.raises(ValueError, match=r"must have shape \(2000, 3\), got shape \(1999, 3\)"):
        test.accepts(np.zeros((1999, 3)))
    with pytest.raises(TypeError, match="Calibration"):
        MomentTester(object())
    with pytest.raises(ValueError, match="quantile"):
        calibrate(2, 2, 10, reps=5, quantile=1.0, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        calibrate(2, 2, 10, reps=5, rng=0)
    with pytest.raises(ValueError, match="reps"):
        calibrate(2, 2, 10, reps=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="degree"):
        moment_statistic(np.zeros((3, 2)), 0)


def test_time_statistic_is_a_positive_duration():
    s = time_statistic(3, 2, 500, np.random.default_rng(0), repeats=2)
    assert isinstance(s, float) and 0 < s < 5


# --- the analytic threshold and the interval of the smallest rate (C2, C3) --------------------


def test_chi2_calibration_is_the_chi2_quantile_and_draws_nothing():
    cal = chi2_calibration(5, 4, 20_000, quantile=0.99)
    assert cal.method == "chi2" and cal.df == 125 and cal.null_statistics.size == 0
    assert cal.threshold == float(chi2.ppf(0.99, 125)) == cal.chi2_threshold
    assert (
        164.6 < cal.threshold < 164.8
    )  # the 99% quantile of chi^2 with 125 degrees of freedom, 164.69
    test = MomentTester(cal)
    assert "chi2" in repr(test)
    # p-value from the chi-squared law: a sample with exact moments has S = 0 and p-value 1
    atoms, _ = gauss_hermite_product(3, 2)
    exact = MomentTester(chi2_calibration(3, 3, 2000))
    X = np.repeat(atoms, 250, axis=0)
    assert exact.p_value(X) == 1.0 and exact.accepts(X)
    rng = np.random.default_rng(3)
    G = rng.standard_normal((2000, 3))
    assert exact.p_value(G) == pytest.approx(chi2.sf(moment_statistic(G, 3), 19), rel=1e-12)
    # the sample size is still enforced
    with pytest.raises(ValueError, match=r"must have shape \(2000, 3\)"):
        exact.accepts(G[:1999])
    with pytest.raises(ValueError, match="quantile"):
        chi2_calibration(3, 3, 2000, quantile=0.0)
    with pytest.raises(ValueError, match="degree"):
        chi2_calibration(3, 0, 2000)


def test_chi2_threshold_holds_its_level_at_large_n():
    # d = 2, degree 3 (9 features) at n = 5000: the statistic is close to chi^2_9, so the analytic
    # 90% threshold accepts about 90% of fresh Gaussian samples (400 samples: sd 0.015)
    test = MomentTester(chi2_calibration(2, 3, 5000, quantile=0.9))
    rng = np.random.default_rng(31)
    rate = np.mean([test.accepts(rng.standard_normal((5000, 2))) for _ in range(400)])
    assert abs(rate - 0.9) < 4 * math.sqrt(0.9 * 0.1 / 400), rate


def test_the_c3_interval_is_bonferroni_clopper_pearson():
    """C3 is decided on core.smallest_proportion_interval (once this chapter's own)."""
    from scipy.stats import binomtest

    counts = {"a": (80, 80), "b": (75, 80), "c": (60, 60)}
    iv = core.smallest_proportion_interval(counts, level=0.95)
    each = 1 - 0.05 / 3
    cps = {
        k: binomtest(s, n).proportion_ci(confidence_level=each, method="exact")
        for k, (s, n) in counts.items()
    }
    assert iv.estimate == 75 / 80
    assert iv.low == pytest.approx(min(c.low for c in cps.values()), rel=1e-12)
    assert iv.high == pytest.approx(min(c.high for c in cps.values()), rel=1e-12)
    assert iv.low < iv.estimate <= iv.high and iv.n == 60
    # all 80 of 80 at level 1 - 0.05/6: the lower end is (0.05/12)^(1/80)
    six = core.smallest_proportion_interval({str(i): (80, 80) for i in range(6)})
    assert six.estimate == 1.0 and six.high == 1.0
    assert six.low == pytest.approx((0.05 / 12) ** (1 / 80), rel=1e-9)
    # one rate alone is the plain Clopper-Pearson interval
    one = core.smallest_proportion_interval({"x": (7, 10)})
    ci = binomtest(7, 10).proportion_ci(confidence_level=0.95, method="exact")
    assert (one.low, one.high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    with pytest.raises(ValueError, match="empty"):
        core.smallest_proportion_interval({})
    with pytest.raises(ValueError, match="pair"):
        core.smallest_proportion_interval({"x": 3})
    with pytest.raises(ValueError, match="level"):
        core.smallest_proportion_interval({"x": (1, 2)}, level=1.0)


# --- the LP never exceeds the optimum it relaxes ------------------------------------------------


@pytest.mark.parametrize("refine", [3, 8])
def test_lp_gap_never_exceeds_the_closed_form_on_the_default_grid(refine):
    """The LP imposes the sandwich on finitely many points, a relaxation of the real problem, so its
    gap can be at most the optimum, 2 lambda_{k/2}(t). Unscaled, rows of far points (entries up to
    1e9 at degree 14) made HiGHS stop at a non-optimal vertex: t = -2.271, degree 14 on the default
    3001-point grid gave a gap 1.1% above the optimum after 3 (and 8) exchange rounds."""
    for t in (-2.271, 2.271):
        r = sandwich.sandwich(t, 14, refine=refine)
        g = float(christoffel_gap(t, 14))
        assert r.gap <= g * (1 + 1e-6), (t, refine, r.gap / g - 1)
        assert r.gap >= g * (1 - 1e-4), (t, refine, r.gap / g - 1)


def test_far_rows_are_scaled_to_order_one():
    from reprobook.papers.testable_massart.sandwich import _far_scale

    R, k = 8.271, 14
    z = np.array([-16.5, -12.271, -8.3, -8.271, -3.0, 0.0, 2.271, 8.271, 10.271, 16.5])
    s = _far_scale(z, R, k)
    inside = np.abs(z) <= R
    np.testing.assert_array_equal(s[inside], 1.0)  # rows on [-R, R] keep their units
    np.testing.assert_allclose(
        s[~inside], np.abs(z[~inside]) ** k / math.sqrt(math.factorial(k)), rtol=1e-12
    )
    V = hermite_1d(z, k)
    assert np.abs(V[~inside]).max() > 1e6  # unscaled, the far rows are huge
    scaled = V[~inside] / s[~inside, None]
    assert np.abs(scaled).max() < 2.0  # h_k(z) sqrt(k!) / |z|^k -> 1 and the lower h_j are smaller


# --- the notebooks' tables --------------------------------------------------------------------


def test_results_frame_holds_each_sandwich_and_its_closed_form():
    results = sandwich.sandwich_table([0.0, 1.0], [2, 4], grid_points=201)
    table = sandwich.results_frame(results, valid_tol=1e-5)
    assert list(table[["t", "degree"]].itertuples(index=False, name=None)) == [
        (0.0, 2),
        (0.0, 4),
        (1.0, 2),
        (1.0, 4),
    ]
    for row, r in zip(table.itertuples(), results):
        assert row.gap == r.gap and row.ratio == r.ratio and row.rounds == r.refine_rounds
        assert row.valid == (r.inner_violation <= 1e-5)
        closed = float(christoffel_gap(r.t, r.degree))
        assert row.closed_form == pytest.approx(closed, rel=1e-15)
        assert row.rel_diff == pytest.approx(abs(r.gap - closed) / closed, rel=1e-12)
    assert table.rel_diff.max() < 1e-2  # near the closed form even on this coarse grid
    assert sandwich.ratios_at_degree(table, 4) == {
        "0": results[1].ratio,
        "1": results[3].ratio,
    }
    with pytest.raises(ValueError, match="valid_tol"):
        sandwich.results_frame(results, valid_tol=-1.0)


def test_degree_needed_frame_and_its_growth_slope():
    ts = [0.0, 2.0, 3.0, 4.0]
    needed = sandwich.degree_needed_frame(ts, [10.0, 2.0], 400)
    assert list(needed.columns) == ["target", "t", "log_inv_gamma", "degree"]
    assert needed.target.tolist() == [10.0] * 4 + [2.0] * 4  # targets in the given order
    for target in (10.0, 2.0):
        want = degree_needed_closed_form(ts, target, 400)
        got = needed[needed.target == target].set_index("t")["degree"].to_dict()
        assert got == want
    assert needed.log_inv_gamma.tolist() == pytest.approx([np.log(1 / bias(t)) for t in ts] * 2)
    assert sandwich.degrees_at(needed, 0.0) == {"10": want_at(0.0, 10.0), "2": want_at(0.0, 2.0)}
    slope, rows = sandwich.degree_growth(needed, 2.0, 2.0)
    assert rows.t.tolist() == [2.0, 3.0, 4.0]
    x, y = np.log(rows.log_inv_gamma), np.log(rows.degree.astype(float))
    assert slope == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-12)
    assert 0 < slope < 3  # a low-order polylog over this range
    # degree 0 is left out (log 0), and fewer than two points give NaN
    nan, few = sandwich.degree_growth(needed, 10.0, 4.0)
    assert math.isnan(nan) and len(few) == 1


def want_at(t: float, target: float) -> int | None:
    return degree_needed_closed_form([t], target, 400)[t]


def test_degrees_at_reports_none_beyond_the_sweep():
    needed = sandwich.degree_needed_frame([0.0], [0.25], 10)
    assert sandwich.degrees_at(needed, 0.0) == {"0.25": None}


def test_power_table_draws_in_order_and_counts_rejections():
    cal = chi2_calibration(2, 2, 300, quantile=0.9)
    small = calibrate(2, 2, 100, reps=20, rng=np.random.default_rng(1))
    testers = {100: MomentTester(small), 300: MomentTester(cal)}
    table = tester.power_table(
        testers, ["uniform", "laplace"], {100: 3, 300: 2}, np.random.default_rng(7)
    )
    assert table[["n", "marginal", "reps"]].values.tolist() == [
        [100, "uniform", 3],
        [100, "laplace", 3],
        [300, "uniform", 2],
        [300, "laplace", 2],
    ]
    # the same draws, one after another from one generator
    rng = np.random.default_rng(7)
    for row in table.itertuples():
        stats = tester.statistics_on(testers[row.n], row.marginal, row.reps, rng)
        assert row.rejected == int(np.sum(stats > testers[row.n].threshold))
        assert row.rejection == row.rejected / row.reps
        assert row.median_statistic == float(np.median(stats))
        assert row.threshold == testers[row.n].threshold


def test_statistics_on_uses_the_calibrated_shape():
    test = MomentTester(chi2_calibration(3, 2, 50))
    stats = tester.statistics_on(test, "gaussian", 4, np.random.default_rng(2))
    rng = np.random.default_rng(2)
    want = [moment_statistic(rng.standard_normal((50, 3)), 2) for _ in range(4)]
    assert stats.tolist() == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="reps"):
        tester.statistics_on(test, "gaussian", 0, rng)


def test_cost_table_skips_large_grids():
    table = tester.cost_table([2, 3], [2, 3], 200, 12, np.random.default_rng(0), repeats=1)
    # C(d + k, k) - 1 moments: (2, 2) 5, (2, 3) 9, (3, 2) 9, (3, 3) 19 > 12
    assert table[["d", "degree", "features"]].values.tolist() == [[2, 2, 5], [2, 3, 9], [3, 2, 9]]
    assert (table.seconds > 0).all()
