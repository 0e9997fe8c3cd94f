"""Tests of reprobook.papers.angular_mean: the angular mean and IP checks (arXiv 2605.12717).

The definitions under test are reconstructed from the paper's abstract (pairwise agreement,
long-run IP as E[A_i] >= alpha_i, the angular mean as the weighted Karcher mean on the sphere).
Exact properties only: closed forms (two voters, the random-hyperplane identity), brute force
(grids, double loops), invariances, finite differences, and clear errors on bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import special_ortho_group

import reprobook.papers.angular_mean as am
from reprobook import core
from reprobook.core.profiles import ProfileError
from reprobook.papers.angular_mean import config
from reprobook.papers.angular_mean import generators as gen

HYP = settings(max_examples=25, deadline=None, derandomize=True)
SEEDS = st.integers(0, 2**31 - 1)


def hemisphere_profile(seed: int, n: int, d: int, radius: float = 1.2):
    """A profile whose directions lie within `radius` (< pi/2) of a random pole: the Karcher mean is
    unique there and the objective is smooth at it."""
    rng = np.random.default_rng(seed)
    pole = am.geometry.unit(rng.standard_normal(d))
    rows = []
    while len(rows) < n:
        u = am.geometry.unit(rng.standard_normal(d))
        if am.angle(u, pole) < radius:
            rows.append(u * rng.uniform(0.2, 5.0))  # arbitrary positive lengths
    alphas = rng.dirichlet(np.ones(n))
    return np.array(rows), alphas


def circle_grid_min(thetas, alphas, n_grid: int = 200_001):
    """Brute force on the circle, written independently of the library: min over n_grid angles."""
    t = np.linspace(0, 2 * np.pi, n_grid, endpoint=False)
    p = np.arctan2(thetas[:, 1], thetas[:, 0])
    dist = np.abs((t[:, None] - p[None, :] + np.pi) % (2 * np.pi) - np.pi)
    f = dist**2 @ alphas
    k = int(np.argmin(f))
    return t[k], float(f[k])


# --- geometry: Log, Exp, gradient and Hessian ----------------------------------------------------


@HYP
@given(seed=SEEDS, d=st.sampled_from([2, 3, 5, 9]))
def test_log_exp_inverse_and_lengths(seed, d):
    rng = np.random.default_rng(seed)
    v, u = am.geometry.unit(rng.standard_normal((2, d)))
    L = am.log_map(v, u)
    assert abs(L @ v) < 1e-12  # tangent
    assert np.linalg.norm(L) == pytest.approx(am.angle(v, u), abs=1e-12)
    np.testing.assert_allclose(am.exp_map(v, L), u, atol=1e-12)
    np.testing.assert_allclose(am.log_map(v, v), 0.0, atol=1e-15)
    # antipode: length pi, tangent, and Exp along it lands on -v
    La = am.log_map(v, -v)
    assert np.linalg.norm(La) == pytest.approx(np.pi, abs=1e-12) and abs(La @ v) < 1e-12
    np.testing.assert_allclose(am.exp_map(v, La), -v, atol=1e-12)
    # the vectorised field is the weighted sum of these logarithms, antipode included
    G = am.karcher_field(v, np.stack([u, -v, v]), [0.5, 0.3, 0.2])
    np.testing.assert_allclose(G, 0.5 * L + 0.3 * La, atol=1e-12)


def test_angle_is_accurate_near_zero_and_pi():
    e = 1e-9
    a = np.array([1.0, 0.0, 0.0])
    b = np.array([math.cos(e), math.sin(e), 0.0])
    assert am.angle(a, b) == pytest.approx(e, rel=1e-9)  # arccos(<a,b>) would return 0 or 1.5e-8
    assert am.angle(a, -b) == pytest.approx(np.pi - e, rel=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_gradient_and_hessian_match_finite_differences(seed):
    thetas, alphas = hemisphere_profile(seed, 4, 4, radius=1.5)
    rng = np.random.default_rng(seed + 100)
    v = am.geometry.unit(rng.standard_normal(4))
    g = am.riemannian_gradient(v, thetas, alphas)
    H = am.riemannian_hessian(v, thetas, alphas)
    np.testing.assert_allclose(g, -2 * am.karcher_field(v, thetas, alphas), rtol=0, atol=1e-15)
    for _ in range(3):
        w = rng.standard_normal(4)
        w -= (w @ v) * v
        w /= np.linalg.norm(w)
        h = 1e-5
        fp = am.karcher_objective(am.exp_map(v, h * w), thetas, alphas)
        fm = am.karcher_objective(am.exp_map(v, -h * w), thetas, alphas)
        f0 = am.karcher_objective(v, thetas, alphas)
        assert (fp - fm) / (2 * h) == pytest.approx(g @ w, abs=1e-7)
        # second derivative along the geodesic = w^T Hess w
        assert (fp - 2 * f0 + fm) / h**2 == pytest.approx(w @ H @ w, abs=1e-4)


# --- the random-hyperplane identity ---------------------------------------------------------------


@pytest.mark.parametrize("frac", [0.05, 0.3, 0.5, 0.8, 0.97])
@pytest.mark.parametrize("d", [2, 3, 7])
def test_random_hyperplane_identity(frac, d):
    thetas, _ = gen.type_profile(d, frac * np.pi, (0.5, 0.5), rng=d)
    p, se = am.hyperplane_mc(thetas[0], thetas[1], 200_000, rng=int(frac * 1000) + d)
    assert se > 0
    assert abs(p - frac) <= 3 * se, (p, frac, se)


def test_hyperplane_mc_reproducible():
    a, b = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 1.0])
    assert am.hyperplane_mc(a, b, 10_000, rng=5) == am.hyperplane_mc(a, b, 10_000, rng=5)
    assert am.hyperplane_mc(a, a, 1000, rng=1) == (0.0, 0.0)
    assert am.hyperplane_mc(a, -a, 1000, rng=1) == (1.0, 0.0)


# --- the angular mean: closed forms ---------------------------------------------------------------


@HYP
@given(
    d=st.sampled_from([2, 3, 5]), frac=st.floats(0.02, 0.97), a1=st.floats(0.03, 0.97), seed=SEEDS
)
def test_two_voter_angular_mean_splits_the_geodesic(d, frac, a1, seed):
    omega = frac * np.pi
    thetas, alphas = gen.type_profile(d, omega, (a1, 1 - a1), rng=seed)
    info = am.angular_mean_info(thetas, alphas)
    v = info.direction
    u1, u2 = thetas
    assert am.angle(v, u1) == pytest.approx(alphas[1] * omega, abs=1e-9)
    assert am.angle(v, u2) == pytest.approx(alphas[0] * omega, abs=1e-9)
    # on the geodesic between u1 and u2 (not the antipodal arc): in their span, inside the short arc
    Q, _ = np.linalg.qr(np.stack([u1, u2], axis=1))
    assert np.linalg.norm(v - Q @ (Q.T @ v)) < 1e-9
    assert am.angle(v, u1) + am.angle(v, u2) == pytest.approx(omega, abs=1e-9)
    assert info.objective == pytest.approx(a1 * (1 - a1) * omega**2, abs=1e-12)
    assert info.residual < 1e-10


@pytest.mark.parametrize("d", [2, 3, 6])
def test_voter_with_share_one_gets_its_direction(d):
    thetas, _ = gen.random_profile(5, d, 1.0, rng=d)
    thetas = thetas * np.arange(1, 6)[:, None]
    for j in range(5):
        alphas = np.zeros(5)
        alphas[j] = 1.0
        for method in ("auto", "descent"):
            v = am.angular_mean(thetas, alphas, method=method)
            assert am.angle(v, thetas[j]) < 1e-9, (j, method)
        assert am.long_run_ratio(v, thetas, alphas)[j] == 0.0


def test_opposite_voters():
    for d in (2, 3, 6):
        thetas, alphas = gen.two_voter_opposite(d, 0.7)
        v = am.angular_mean(thetas, alphas)
        assert am.angle(v, thetas[0]) == pytest.approx(0.3 * np.pi, abs=1e-9)  # alpha_2 * pi
        thetas, alphas = gen.two_voter_opposite(d, 0.5)
        v = am.angular_mean(thetas, alphas)  # not unique: any point of the equator
        np.testing.assert_allclose(am.long_run_ratio(v, thetas, alphas), [1.0, 1.0], atol=1e-9)
        with pytest.raises(ValueError, match="zero vector"):
            am.arithmetic_mean(thetas, alphas)


# --- the angular mean: global minimum ------------------------------------------------------------


@HYP
@given(seed=SEEDS, n=st.integers(1, 7), conc=st.sampled_from([0.3, 1.0, 3.0]))
def test_circle_exact_and_descent_match_brute_force(seed, n, conc):
    thetas, alphas = gen.random_profile(n, 2, conc, rng=seed)
    exact = am.angular_mean_info(thetas, alphas)  # d = 2: exact arcs
    descent = am.angular_mean_info(thetas, alphas, method="descent")
    t, fgrid = circle_grid_min(thetas, alphas)
    h = 2 * np.pi / 200_001
    assert exact.method == "circle" and descent.method == "descent"
    assert exact.objective <= fgrid + 1e-12  # never worse than any grid point
    assert fgrid <= exact.objective + h**2 / 4 + 1e-12  # f'' <= 2 on each arc
    assert descent.objective == pytest.approx(exact.objective, abs=1e-10)
    assert exact.objective == pytest.approx(
        am.karcher_objective(exact.direction, thetas, alphas), abs=1e-12
    )
    assert exact.residual < 1e-9
    # the library's own grid agrees too
    _, f2 = am.grid_angular_mean(thetas, alphas, 20_001)
    assert exact.objective <= f2 + 1e-12


@pytest.mark.parametrize("seed", range(8))
def test_sphere_descent_matches_fibonacci_grid(seed):
    thetas, alphas = gen.random_profile(2 + seed % 5, 3, 0.5, rng=seed)
    info = am.angular_mean_info(thetas, alphas)
    _, fgrid = am.grid_angular_mean(thetas, alphas, 40_000)
    assert info.objective <= fgrid + 1e-12
    assert fgrid - info.objective < 5e-3  # grid spacing about 0.018 rad


@pytest.mark.parametrize("seed", [0, 11, 15])
def test_local_minima_in_d2_are_found_by_both_methods(seed):
    # random three-voter circle profiles with two or three local minima (seeds checked)
    thetas, alphas = gen.random_profile(3, 2, 1.0, rng=seed)
    exact = am.angular_mean_info(thetas, alphas)
    descent = am.angular_mean_info(thetas, alphas, method="descent", n_random_starts=40)
    assert len(exact.local_minima) >= 2
    assert exact.local_minima[0] == pytest.approx(exact.objective, abs=1e-12)
    assert list(exact.local_minima) == sorted(exact.local_minima)
    np.testing.assert_allclose(sorted(descent.local_minima), exact.local_minima, atol=1e-9)
    for P in exact.minimisers:
        assert np.linalg.norm(am.karcher_field(P, thetas, alphas)) < 1e-9


def test_a_local_minimum_can_violate_long_run_ip():
    # why the global minimiser matters: seed 0 has a local minimum outside a voter's cap
    thetas, alphas = gen.random_profile(3, 2, 1.0, rng=0)
    info = am.angular_mean_info(thetas, alphas)
    ratios = [am.long_run_ratio(P, thetas, alphas).max() for P in info.minimisers]
    assert ratios[0] <= 1.0
    assert max(ratios[1:]) > 1.05


@HYP
@given(seed=SEEDS, n=st.integers(2, 6), d=st.sampled_from([3, 5, 10]))
def test_stationarity_residual_on_hemisphere_profiles(seed, n, d):
    thetas, alphas = hemisphere_profile(seed, n, d)
    info = am.angular_mean_info(thetas, alphas)
    assert info.converged and info.residual < 1e-8
    assert np.linalg.norm(am.karcher_field(info.direction, thetas, alphas)) < 1e-8
    assert len(info.local_minima) == 1  # unique inside a ball of radius < pi/2
    assert info.n_starts == 1 + n + 8


# --- invariances --------------------------------------------------------------------------------


@HYP
@given(seed=SEEDS, n=st.integers(2, 6), d=st.sampled_from([2, 3, 4, 6]))
def test_rotation_equivariance(seed, n, d):
    thetas, alphas = hemisphere_profile(seed, n, d, radius=1.5)
    R = special_ortho_group.rvs(d, random_state=seed)
    v = am.angular_mean(thetas, alphas)
    vr = am.angular_mean(thetas @ R.T, alphas)
    np.testing.assert_allclose(vr, R @ v, atol=1e-9)
    w = am.arithmetic_mean(thetas, alphas)
    np.testing.assert_allclose(am.arithmetic_mean(thetas @ R.T, alphas), R @ w, atol=1e-12)


@HYP
@given(seed=SEEDS, n=st.integers(2, 6), d=st.sampled_from([2, 3, 5]))
def test_objective_rotation_invariant_on_any_profile(seed, n, d):
    thetas, alphas = gen.random_profile(n, d, 0.5, rng=seed)
    R = special_ortho_group.rvs(d, random_state=seed)
    f = am.angular_mean_info(thetas, alphas).objective
    fr = am.angular_mean_info(thetas @ R.T, alphas).objective
    assert fr == pytest.approx(f, abs=1e-10)


@HYP
@given(seed=SEEDS, n=st.integers(2, 7), d=st.sampled_from([2, 3, 5]))
def test_rescaling_and_permutation_invariance(seed, n, d):
    thetas, alphas = hemisphere_profile(seed, n, d, radius=1.5)
    rng = np.random.default_rng(seed + 1)
    v = am.angular_mean(thetas, alphas)
    scaled = thetas * rng.uniform(0.01, 100.0, size=(n, 1))
    np.testing.assert_allclose(am.angular_mean(scaled, alphas), v, atol=1e-10)
    perm = rng.permutation(n)
    np.testing.assert_allclose(am.angular_mean(thetas[perm], alphas[perm]), v, atol=1e-9)
    # the normalised arithmetic mean is rescaling invariant; the raw one is not in general
    w = am.arithmetic_mean(thetas, alphas, normalise=True)
    np.testing.assert_allclose(am.arithmetic_mean(scaled, alphas, normalise=True), w, atol=1e-12)


def test_raw_arithmetic_mean_depends_on_lengths():
    thetas = np.array([[1.0, 0.0], [0.0, 1.0]])
    alphas = np.array([0.5, 0.5])
    np.testing.assert_allclose(
        am.arithmetic_mean(thetas * [[3.0], [1.0]], alphas), am.geometry.unit([3.0, 1.0])
    )
    normalised = am.arithmetic_mean(thetas * [[3.0], [1.0]], alphas, normalise=True)
    np.testing.assert_allclose(normalised, am.geometry.unit([1.0, 1.0]))


# --- long-run IP ----------------------------------------------------------------------------------


@HYP
@given(
    seed=SEEDS,
    n=st.integers(2, 7),
    d=st.sampled_from([2, 3, 4, 6]),
    conc=st.sampled_from([0.3, 1.0]),
)
def test_angular_mean_satisfies_long_run_ip(seed, n, d, conc):
    # the main theorem, under the reconstructed definitions
    thetas, alphas = gen.random_profile(n, d, conc, rng=seed)
    v = am.angular_mean(thetas, alphas)
    assert am.satisfies_long_run_ip(v, thetas, alphas, tol=1e-9)
    assert np.all(am.long_run_ratio(v, thetas, alphas) <= 1 + 1e-9)
    assert np.all(am.long_run_agreement(v, thetas) >= alphas - 1e-9)


def test_arithmetic_mean_is_majoritarian_on_the_two_group_example():
    thetas, alphas = gen.type_profile(5, 0.9 * np.pi, (0.6, 0.4), rng=3)
    for normalise in (False, True):
        w = am.arithmetic_mean(thetas, alphas, normalise=normalise)
        A = am.long_run_agreement(w, thetas)
        assert A[1] < 0.3 and A[1] == pytest.approx(0.2632, abs=1e-3)  # far below its share 0.4
        assert not am.satisfies_long_run_ip(w, thetas, alphas)
        assert am.long_run_ratio(w, thetas, alphas)[1] > 1.2
    v = am.angular_mean(thetas, alphas)
    np.testing.assert_allclose(am.long_run_agreement(v, thetas), [0.64, 0.46], atol=1e-9)
    assert am.satisfies_long_run_ip(v, thetas, alphas)


def test_long_run_ratio_and_share_one():
    thetas = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    alphas = np.array([0.5, 0.25, 0.25])
    v = np.array([1.0, 0.0])
    np.testing.assert_allclose(
        am.long_run_ratio(v, thetas, alphas), [0.0, (np.pi / 2) / (0.75 * np.pi), 1 / 0.75]
    )
    np.testing.assert_allclose(am.long_run_agreement(v, thetas), [1.0, 0.5, 0.0])
    assert not am.satisfies_long_run_ip(v, thetas, alphas)
    one = np.array([0.0, 1.0, 0.0])
    assert am.long_run_ratio(v, thetas, one)[1] == np.inf
    assert am.long_run_ratio(np.array([0.0, 2.0]), thetas, one)[1] == 0.0
    assert am.satisfies_long_run_ip(np.array([0.0, 2.0]), thetas, one)


# --- per-batch agreement and IP -------------------------------------------------------------------


def loop_agreement(theta, thetas, X):
    m = X.shape[0]
    out = []
    for th in thetas:
        agree = 0
        for j in range(m):
            for k in range(j + 1, m):
                dx = X[j] - X[k]
                agree += np.sign(theta @ dx) == np.sign(th @ dx)
        out.append(agree / (m * (m - 1) / 2))
    return np.array(out)


@HYP
@given(seed=SEEDS, n=st.integers(1, 4), m=st.integers(2, 9), d=st.sampled_from([2, 3, 5]))
def test_per_batch_agreement_equals_double_loop(seed, n, m, d):
    rng = np.random.default_rng(seed)
    thetas = rng.standard_normal((n, d))
    theta = rng.standard_normal(d)
    X = rng.standard_normal((3, m, d))
    if m >= 3:  # integer items and a duplicated item: exact ties, as in the literal sign rule
        X = np.round(X * 2)
        X[:, 1] = X[:, 0]
    got = am.per_batch_agreement(theta, thetas, X, chunk_elements=7)  # tiny chunks: one batch each
    want = np.array([loop_agreement(theta, thetas, Xb) for Xb in X])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(am.per_batch_agreement(theta, thetas, X[0]), want[0])


def test_tie_convention():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])  # one pair, difference (-1, 0)
    thetas = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    # theta ties the pair: agrees only with the voter that ties it too
    np.testing.assert_array_equal(
        am.per_batch_agreement(np.array([0.0, 3.0]), thetas, X), [1.0, 0.0, 0.0]
    )
    np.testing.assert_array_equal(
        am.per_batch_agreement(np.array([1.0, 0.0]), thetas, X), [0.0, 1.0, 1.0]
    )


def test_per_batch_agreement_mean_approaches_long_run():
    thetas, alphas = gen.random_profile(4, 4, 1.0, rng=2)
    v = am.angular_mean(thetas, alphas)
    X = gen.gaussian_batches(4000, 12, 4, rng=3)
    A = am.per_batch_agreement(v, thetas, X)  # (4000, 4)
    se = A.std(axis=0, ddof=1) / np.sqrt(A.shape[0])
    target = am.long_run_agreement(v, thetas)
    assert np.all(np.abs(A.mean(axis=0) - target) <= 4 * se + 1e-12), (A.mean(axis=0), target, se)
    assert np.all(se < 0.005)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_m2_counterexample_per_batch_ip_is_impossible(d):
    thetas, alphas = gen.two_voter_opposite(d, 0.5)
    rng = np.random.default_rng(d)
    X = gen.gaussian_batches(200, 2, d, rng=rng)
    for theta in rng.standard_normal((300, d)):
        A = am.per_batch_agreement(theta, thetas, X)  # (200, 2)
        assert np.all(A.min(axis=1) == 0.0)
        assert np.all(A.sum(axis=1) == 1.0)
        res = am.per_batch_shortfall(theta, thetas, alphas, X)
        assert np.all(res.violated) and np.all(res.shortfall == 0.5)
    # and the angular mean itself, in particular
    v = am.angular_mean(thetas, alphas)
    assert np.all(am.per_batch_shortfall(v, thetas, alphas, X).violated)


def test_per_batch_shortfall_shapes_and_values():
    thetas, alphas = gen.type_profile(5, 0.9 * np.pi, (0.6, 0.4), rng=0)
    v = am.angular_mean(thetas, alphas)
    X = gen.gaussian_batches(50, 20, 5, rng=1)
    res = am.per_batch_shortfall(v, thetas, alphas, X)
    assert res.shortfall.shape == res.violated.shape == (50,) and res.agreement.shape == (50, 2)
    np.testing.assert_allclose(res.shortfall, np.max(np.maximum(alphas - res.agreement, 0), axis=1))
    np.testing.assert_array_equal(res.violated, res.shortfall > 1e-12)
    one = am.per_batch_shortfall(v, thetas, alphas, X[7])
    assert one.shortfall.shape == () and float(one.shortfall) == res.shortfall[7]
    # a voter's own vector on its own batch: full agreement, no shortfall for it
    np.testing.assert_array_equal(am.per_batch_agreement(thetas[0], thetas, X)[:, 0], 1.0)


def test_per_batch_shortfall_shrinks_with_batch_size():
    thetas, alphas = gen.type_profile(5, 0.9 * np.pi, (0.6, 0.4), rng=0)
    v = am.angular_mean(thetas, alphas)
    means = [
        am.per_batch_shortfall(
            v, thetas, alphas, gen.gaussian_batches(400, m, 5, rng=m)
        ).shortfall.mean()
        for m in (2, 10, 50)
    ]
    assert means[0] > 0.3 and means[0] > means[1] > means[2] and means[2] < 0.02


def test_whitening_maps_correlated_items_to_isotropic_ones():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((4, 4))
    cov = M @ M.T + 0.5 * np.eye(4)
    thetas, _ = gen.random_profile(3, 4, 1.0, rng=1)
    theta = rng.standard_normal(4)
    X = gen.gaussian_batches(30, 6, 4, rng=2, cov=cov)
    Z = gen.gaussian_batches(30, 6, 4, rng=2)
    raw = am.per_batch_agreement(theta, thetas, X)
    np.testing.assert_array_equal(
        raw, am.per_batch_agreement(am.whiten(theta, cov), am.whiten(thetas, cov), Z)
    )
    np.testing.assert_allclose(am.unwhiten(am.whiten(thetas, cov), cov), thetas, atol=1e-12)


# --- generators -----------------------------------------------------------------------------------


def test_generators_reproducible_and_shaped():
    a = gen.random_profile(5, 4, 0.3, rng=7)
    b = gen.random_profile(5, 4, 0.3, rng=7)
    c = gen.random_profile(5, 4, 0.3, rng=8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert a[0].shape == (5, 4) and a[1].shape == (5,) and a[1].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(np.linalg.norm(a[0], axis=1), 1.0)
    np.testing.assert_array_equal(
        gen.gaussian_batches(3, 4, 2, rng=1), gen.gaussian_batches(3, 4, 2, rng=1)
    )
    assert gen.gaussian_batches(3, 4, 2, rng=1).shape == (3, 4, 2)
    np.testing.assert_array_equal(
        gen.table_batches("wine", 5, 7, rng=2), gen.table_batches("wine", 5, 7, rng=2)
    )
    t1 = gen.type_profile(6, 1.0, (0.5, 0.3, 0.2), rng=4)
    np.testing.assert_array_equal(t1[0], gen.type_profile(6, 1.0, (0.5, 0.3, 0.2), rng=4)[0])
    v1 = gen.vmf_voters(t1[0], 30.0, 4, rng=9)
    v2 = gen.vmf_voters(t1[0], 30.0, 4, rng=9)
    for x, y in zip(v1, v2):
        np.testing.assert_array_equal(x, y)


def test_type_profile_geometry():
    thetas, alphas = gen.type_profile(7, 0.8 * np.pi, (0.6, 0.4), rng=0)
    assert am.angle(thetas[0], thetas[1]) == pytest.approx(0.8 * np.pi, abs=1e-12)
    thetas, alphas = gen.type_profile(7, 0.9 * np.pi, (0.5, 0.3, 0.2), rng=0)
    np.testing.assert_allclose(
        [
            am.angle(thetas[0], thetas[1]),
            am.angle(thetas[1], thetas[2]),
            am.angle(thetas[0], thetas[2]),
        ],
        [0.45 * np.pi, 0.45 * np.pi, 0.9 * np.pi],
        atol=1e-12,
    )
    assert np.linalg.matrix_rank(thetas, tol=1e-9) == 2  # one plane
    np.testing.assert_array_equal(alphas, [0.5, 0.3, 0.2])


def test_vmf_voters_shares_and_concentration():
    centres, _ = gen.type_profile(5, 0.9 * np.pi, (0.7, 0.3), rng=1)
    thetas, alphas, labels = gen.vmf_voters(centres, 200.0, (30, 10), rng=2, type_alphas=(0.7, 0.3))
    assert thetas.shape == (40, 5) and labels.tolist() == [0] * 30 + [1] * 10
    np.testing.assert_allclose(np.bincount(labels, weights=alphas), [0.7, 0.3])
    ang = am.angle(thetas, centres[labels])
    assert ang.max() < 0.5 and ang.mean() < 0.25  # E angle ~ sqrt((d-1)/kappa) = 0.14
    _, eq, _ = gen.vmf_voters(centres, 5.0, 3, rng=2)
    np.testing.assert_allclose(eq, 1 / 6)


def test_table_items_standardised():
    for name, shape in (("wine", (178, 13)), ("diabetes", (442, 10)), ("breast_cancer", (569, 30))):
        X = gen.table_items(name)
        assert X.shape == shape
        np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(X.std(axis=0), 1.0, atol=1e-12)
    B = gen.table_batches("diabetes", 20, 30, rng=0)
    assert B.shape == (20, 30, 10)
    for batch in B:  # distinct rows within a batch
        assert np.unique(batch, axis=0).shape[0] == 30


# --- bad inputs -----------------------------------------------------------------------------------


GOOD_T = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
GOOD_A = np.array([0.5, 0.5])
GOOD_X = np.zeros((4, 6, 3))

BAD_INPUTS = [
    ("thetas 1-D", lambda: am.angular_mean(np.ones(3), [1.0]), r"2-D array of shape \(n, d\)"),
    (
        "thetas 3-D",
        lambda: am.karcher_objective(np.ones(3), np.ones((2, 2, 3)), GOOD_A),
        r"2-D array",
    ),
    ("d = 1", lambda: am.angular_mean(np.ones((2, 1)), GOOD_A), r"d must be >= 2"),
    (
        "zero row",
        lambda: am.angular_mean(np.array([[1.0, 0.0], [0.0, 0.0]]), GOOD_A),
        r"thetas\[1\] is the zero",
    ),
    (
        "nan row",
        lambda: am.angular_mean(np.array([[1.0, np.nan], [0.0, 1.0]]), GOOD_A),
        r"thetas\[0\] contains NaN",
    ),
    ("no rows", lambda: am.angular_mean(np.ones((0, 3)), []), r"no rows"),
    (
        "alphas length",
        lambda: am.angular_mean(GOOD_T, [0.2, 0.3, 0.5]),
        r"one share per voter \(length n = 2\)",
    ),
    ("alphas negative", lambda: am.angular_mean(GOOD_T, [1.5, -0.5]), r"alphas\[1\] = -0.5"),
    ("alphas sum", lambda: am.angular_mean(GOOD_T, [0.5, 0.4]), r"sum to 1 \(tolerance 1e-09\)"),
    (
        "alphas sum ratio",
        lambda: am.long_run_ratio(GOOD_T[0], GOOD_T, [0.5, 0.5 + 1e-8]),
        r"sum to 1",
    ),
    (
        "method",
        lambda: am.angular_mean(GOOD_T, GOOD_A, method="newton"),
        r"method must be one of 'auto', 'circle', 'descent', got 'newton'",
    ),
    (
        "circle in d=3",
        lambda: am.angular_mean(GOOD_T, GOOD_A, method="circle"),
        r"only in dimension d = 2",
    ),
    (
        "max_iter",
        lambda: am.angular_mean(GOOD_T, GOOD_A, max_iter=0),
        r"max_iter must be an integer >= 1, got 0",
    ),
    (
        "max_iter bool",
        lambda: am.angular_mean(GOOD_T, GOOD_A, max_iter=True),
        r"max_iter must be an integer >= 1, got True",
    ),
    (
        "random starts",
        lambda: am.angular_mean(GOOD_T, GOOD_A, n_random_starts=-1),
        r"n_random_starts must be an integer >= 0",
    ),
    (
        "tol",
        lambda: am.angular_mean(GOOD_T, GOOD_A, tol=0.0),
        r"tol must be a finite real number > 0",
    ),
    ("theta zero", lambda: am.long_run_agreement(np.zeros(3), GOOD_T), r"theta is the zero vector"),
    (
        "theta dim",
        lambda: am.long_run_agreement(np.ones(2), GOOD_T),
        r"theta has dimension 2 .* d = 3",
    ),
    (
        "theta 2-D",
        lambda: am.satisfies_long_run_ip(GOOD_T, GOOD_T, GOOD_A),
        r"theta must be a 1-D vector",
    ),
    (
        "X 1-D",
        lambda: am.per_batch_agreement(GOOD_T[0], GOOD_T, np.ones(3)),
        r"\(m, d\) or a stack .* \(B, m, d\)",
    ),
    (
        "X 4-D",
        lambda: am.per_batch_agreement(GOOD_T[0], GOOD_T, np.ones((2, 2, 2, 3))),
        r"\(B, m, d\)",
    ),
    (
        "X dim",
        lambda: am.per_batch_agreement(GOOD_T[0], GOOD_T, np.ones((4, 6, 2))),
        r"dimension 2 but .* d = 3",
    ),
    (
        "X one item",
        lambda: am.per_batch_shortfall(GOOD_T[0], GOOD_T, GOOD_A, np.ones((4, 1, 3))),
        r"at least m = 2",
    ),
    (
        "X nan",
        lambda: am.per_batch_agreement(GOOD_T[0], GOOD_T, np.full((4, 6, 3), np.nan)),
        r"X contains NaN",
    ),
    (
        "am zero",
        lambda: am.arithmetic_mean(np.array([[1.0, 2.0], [-1.0, -2.0]]), GOOD_A),
        r"zero vector",
    ),
    (
        "mc pairs",
        lambda: am.hyperplane_mc(GOOD_T[0], GOOD_T[1], 0),
        r"n_pairs must be an integer >= 1, got 0",
    ),
    ("mc dims", lambda: am.hyperplane_mc(GOOD_T[0], np.ones(2), 10), r"theta_b has dimension 2"),
    ("grid d", lambda: am.grid_angular_mean(np.eye(4), np.full(4, 0.25)), r"d = 2 and d = 3 only"),
    ("v dim", lambda: am.karcher_objective(np.ones(2), GOOD_T, GOOD_A), r"v has dimension 2"),
    ("profile d", lambda: gen.random_profile(3, 1, 1.0), r"d must be an integer >= 2"),
    ("profile n", lambda: gen.random_profile(2.0, 3, 1.0), r"n must be an integer >= 1, got 2\.0"),
    (
        "profile conc",
        lambda: gen.random_profile(3, 2, 0.0),
        r"concentration must be a finite real number > 0",
    ),
    (
        "type separation",
        lambda: gen.type_profile(3, 4.0, (0.5, 0.5)),
        r"separation must be an angle in \[0, pi\]",
    ),
    ("type alphas", lambda: gen.type_profile(3, 1.0, (0.5, 0.6)), r"sum to 1"),
    (
        "vmf kappa",
        lambda: gen.vmf_voters(GOOD_T, 0.0, 3),
        r"kappa must be a finite real number > 0",
    ),
    ("vmf counts", lambda: gen.vmf_voters(GOOD_T, 1.0, (3, 4, 5)), r"n_per_type must be"),
    (
        "vmf zero centre",
        lambda: gen.vmf_voters(np.zeros((1, 3)), 1.0, 3),
        r"thetas\[0\] is the zero vector",
    ),
    (
        "opposite alpha",
        lambda: gen.two_voter_opposite(3, 1.0),
        r"alpha must be a finite real number > 0 and < 1",
    ),
    ("batches m", lambda: gen.gaussian_batches(3, 1, 2), r"m must be an integer >= 2"),
    (
        "batches cov",
        lambda: gen.gaussian_batches(3, 2, 2, cov=np.eye(3)),
        r"cov is 3 x 3 but d = 2",
    ),
    (
        "cov not PD",
        lambda: gen.gaussian_batches(3, 2, 2, cov=np.diag([1.0, -1.0])),
        r"positive definite",
    ),
    (
        "table name",
        lambda: gen.table_items("iris"),
        r"name must be one of 'wine', 'diabetes', 'breast_cancer', got 'iris'",
    ),
    ("table m", lambda: gen.table_batches("wine", 3, 200), r"m = 200 exceeds the 178 rows"),
]


@pytest.mark.parametrize("call,match", [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- configuration --------------------------------------------------------------------------------


def resolve(notebook: str, profile: str = "reduced", **overrides):
    """A notebook's configuration, as the notebooks resolve it."""
    return core.resolve_notebook(config.PROFILES, notebook, profile, **overrides)


@pytest.mark.parametrize("notebook", sorted(config.PROFILES))
def test_config_profiles_resolve(notebook):
    reduced = resolve(notebook, "reduced")
    full = resolve(notebook, "full")
    assert type(reduced) is type(full)
    assert resolve(notebook, "reduced", max_iter=None) == reduced  # None keeps the profile
    assert resolve(notebook, "reduced", max_iter=17).max_iter == 17
    assert not hasattr(reduced, "seed")
    with pytest.raises(ProfileError, match="unknown override key.*valid keys"):
        resolve(notebook, "reduced", no_such_knob=1)
    with pytest.raises(ProfileError, match="unknown profile 'huge'; valid profiles: full, reduced"):
        resolve(notebook, "huge")


def test_config_values():
    lr = resolve("01_long_run_ip", n_profiles=10)
    assert lr.n_profiles == 10 and lr.dims == (2, 3, 5, 10) and lr.concentrations == (0.3, 1.0)
    pb = resolve("02_per_batch_ip")
    assert (
        pb.batch_sizes == (2, 5, 10, 20, 50, 100, 200)
        and pb.alphas == (0.6, 0.4)
        and pb.n_batches == 2000
    )
    sw = resolve("03_disagreement_sweep", separations=[0.2, 0.4])
    assert sw.separations == (0.2, 0.4) and set(sw.tables) <= set(gen.TABLES)
    assert pb.n_bootstrap >= 1000 and sw.cloud_reps >= 2  # intervals need resamples and repetitions
    for profile in ("reduced", "full", "smoke"):  # C5 and C6 are scored at 0.9 pi and 0.1 pi
        c = resolve("03_disagreement_sweep", profile).cloud_separations
        assert (min(c), max(c)) == (0.1, 0.9)
    for shares in sw.share_vectors:
        assert sum(shares) == pytest.approx(1.0)
    with pytest.raises(ProfileError, match="does not fit"):
        resolve("02_per_batch_ip", n_batches="many")
    with pytest.raises(ValueError, match="unknown notebook 'nope'; valid notebooks: 01_long"):
        resolve("nope")
    with pytest.raises(ValueError, match="has no notebook 'nope'; its notebooks: 01_long_run_ip"):
        core.start(am, "nope")


def test_profiles_are_keyed_by_notebook_and_every_module_is_reachable_from_the_package():
    folder = core.book_root() / "notebooks" / "02_angular_mean"
    assert set(config.PROFILES) == {p.stem for p in folder.glob("*.ipynb")}
    assert am.intervals.__name__ == "reprobook.papers.angular_mean.intervals"
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        _ = am.no_such_module


def test_descent_finds_the_global_minimum_where_local_minima_exist():
    """A d = 2 profile with several local minima: multi-start descent (forced, not the exact circle
    search) must reach the exact global value, and its result must satisfy long-run IP."""
    from reprobook.papers import angular_mean as am

    found = 0
    for seed in range(40):
        thetas, alphas = am.random_profile(3, 2, 1.0, rng=seed)
        exact = am.angular_mean_info(thetas, alphas, method="circle")
        if len(exact.local_minima) < 2:
            continue
        found += 1
        descent = am.angular_mean_info(thetas, alphas, method="descent", rng=seed)
        assert descent.objective <= exact.objective + 1e-9
        assert am.satisfies_long_run_ip(descent.direction, thetas, alphas, tol=1e-6)
    assert found >= 3  # the check above ran on profiles that do have local minima


# --- intervals of the statistical claims (C4, C5, C6) ---------------------------------------------


def test_shortfall_slope_recovers_a_power_law_and_skips_zero_sizes():
    m = np.array([2, 5, 10, 20, 50])
    s = 3.0 * m**-1.5
    b, c, used = am.shortfall_slope(m, s)
    assert b == pytest.approx(-1.5, abs=1e-12) and c == pytest.approx(math.log(3.0), abs=1e-12)
    assert used.all()
    s0 = s.copy()
    s0[-1] = 0.0  # no shortfall in any batch: no logarithm, left out
    b0, _, used0 = am.shortfall_slope(m, s0)
    assert b0 == pytest.approx(-1.5, abs=1e-12) and used0.tolist() == [
        True,
        True,
        True,
        True,
        False,
    ]
    with pytest.raises(ValueError, match="only 1 batch size"):
        am.shortfall_slope(m, [1.0, 0, 0, 0, 0])


def test_bootstrap_of_the_slope_is_exact_when_every_batch_agrees():
    """Every batch of a size has the same shortfall c m^-b: every resample gives the same means,
    so the interval collapses onto the exact slope."""
    m = [2, 5, 10, 20]
    vals = [np.full(50, 0.7 * k**-0.8) for k in m]
    iv = am.bootstrap_shortfall_slope(m, vals, n_resamples=200, rng=0)
    assert iv.estimate == pytest.approx(-0.8, abs=1e-12)
    assert iv.low == pytest.approx(-0.8, abs=1e-12) and iv.high == pytest.approx(-0.8, abs=1e-12)
    assert iv.n == 200


def test_bootstrap_of_the_slope_brackets_the_estimate_and_is_seeded():
    rng = np.random.default_rng(3)
    m = [2, 5, 10, 20, 50]
    vals = [rng.exponential(0.5 * k**-1.0, 400) for k in m]
    a = am.bootstrap_shortfall_slope(m, vals, n_resamples=500, rng=7)
    b = am.bootstrap_shortfall_slope(m, vals, n_resamples=500, rng=7)
    assert a == b
    assert a.low < a.estimate < a.high
    assert a.low < -1.0 < a.high  # the true slope of the means, at these sample sizes
    assert a.high - a.low < 0.3
    # more resampled noise (fewer batches) widens the interval
    c = am.bootstrap_shortfall_slope(m, [v[:40] for v in vals], n_resamples=500, rng=7)
    assert c.high - c.low > a.high - a.low


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: am.bootstrap_shortfall_slope([2, 5], [np.ones(5)]),
            r"one array per batch size \(2\)",
        ),
        (
            lambda: am.bootstrap_shortfall_slope([2, 5], [np.ones(5)] * 2, n_resamples=10),
            r"n_resamples must be an integer >= 100, got 10",
        ),
        (
            lambda: am.bootstrap_shortfall_slope([2, 5], [np.ones(5), -np.ones(5)]),
            r"shortfalls\[1\] must hold",
        ),
        (
            lambda: am.bootstrap_shortfall_slope([2, 2], [np.ones(5)] * 2),
            r"two distinct batch sizes",
        ),
        (
            lambda: am.bootstrap_shortfall_slope([2, 5], [np.ones(5)] * 2, level=1.0),
            r"level must be a finite real number > 0 and < 1",
        ),
        (
            lambda: am.bootstrap_shortfall_slope(
                [2, 5], [np.r_[1.0, np.zeros(99)]] * 2, n_resamples=200, rng=0
            ),
            r"resamples had fewer than two sizes",
        ),
    ],
)
def test_bootstrap_of_the_slope_rejects_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_worst_ratio_gap_by_hand():
    """Voters e1 (type 0) and e2 (type 1), shares 1/2. Rule e1: agreements 1 and 1/2, ratios
    2 and 1, worst 1. Rule (e1 + e2)/sqrt 2: agreements 3/4 each, ratios 3/2. Gap -1/2."""
    U = np.eye(2)
    a, b = np.array([1.0, 0.0]), np.array([1.0, 1.0]) / math.sqrt(2)
    g = am.worst_ratio_gap(U, [0.5, 0.5], [0, 1], a, b)
    assert g == pytest.approx(-0.5, abs=1e-12)
    assert am.worst_ratio_gap(U, [0.5, 0.5], [0, 1], b, a) == pytest.approx(0.5, abs=1e-12)
    assert am.worst_ratio_gap(U, [0.5, 0.5], [0, 1], a, a) == 0.0
    with pytest.raises(ValueError, match="every type 0..1"):
        am.worst_ratio_gap(U, [0.5, 0.5], [0, 0], a, b)


def test_c5_is_decided_by_the_share_vector_with_the_smallest_mean_gap():
    """C5's value: per share vector, the worst-ratio gaps of independent voter clouds; the
    smallest mean gap decides, with an interval that holds for every share vector at once, so a
    share vector where the angular mean loses is never averaged away by one where it wins."""
    rows, gaps = am.experiments.cloud_sweep(
        [(0.7, 0.3), (0.5, 0.3, 0.2)], [0.9], reps=4, d=4, kappa=50.0, voters_per_type=5, rng=3
    )
    by_shares = {}
    for g in gaps:
        by_shares.setdefault(g["shares"], []).append(g["gap"])
    c5 = core.worst_group_interval(by_shares, worst="min")
    means = {k: float(np.mean(v)) for k, v in by_shares.items()}
    assert c5.group == min(means, key=means.get)
    assert c5.interval.estimate == pytest.approx(means[c5.group])
    assert c5.interval.low == min(t.low for t in c5.by_group.values())
    assert c5.interval.high == min(t.high for t in c5.by_group.values())
    assert c5.interval.n == 8
    # C6: the largest mean absolute gap, with the same simultaneous interval
    c6 = core.worst_group_interval({k: np.abs(v) for k, v in by_shares.items()}, worst="max")
    assert c6.interval.estimate == max(float(np.mean(np.abs(v))) for v in by_shares.values())


# --- the notebooks' studies -----------------------------------------------------------------------


def test_hyperplane_identity_rows_match_the_angle():
    rows = am.experiments.hyperplane_identity([0.1, 0.5, 0.9], 4, 20_000, rng=1)
    assert [r["angle_over_pi"] for r in rows] == [0.1, 0.5, 0.9]
    assert max(abs(r["z"]) for r in rows) < 5
    again = am.experiments.hyperplane_identity([0.1, 0.5, 0.9], 4, 20_000, rng=1)
    assert rows == again


def test_two_type_example_the_angular_mean_keeps_the_minority_at_its_share():
    rows = am.experiments.two_type_example([0.5, 0.9, 0.99], [0.6, 0.4])
    ang = [r["minority"] for r in rows if r["rule"] == "angular mean"]
    ari = {r["separation"]: r["minority"] for r in rows if r["rule"] == "arithmetic mean"}
    assert len(rows) == 6 and min(ang) >= 0.4 - 1e-9  # long-run IP for the minority
    assert ari[0.9] < 0.4  # the arithmetic mean leaves it below its share


def test_random_profiles_draw_in_the_notebooks_order():
    rows = am.experiments.random_profiles(6, (2, 3), (2, 4), (0.3, 1.0), 4, 200, rng=9)
    gen_ = np.random.default_rng(9)
    for j in range(6):
        thetas, alphas = am.random_profile(
            (2, 3)[j % 2], (2, 4)[(j // 2) % 2], (0.3, 1.0)[j % 2], gen_
        )
        info = am.angular_mean_info(thetas, alphas, n_random_starts=4, max_iter=200, rng=gen_)
        row = next(r for r in rows if r["profile"] == j and r["rule"] == "angular mean")
        assert row["residual"] == info.residual and row["worst_excess"] <= 1e-9
    assert {r["rule"] for r in rows} == {"angular mean", "arithmetic mean"}
    assert all(np.isnan(r["residual"]) for r in rows if r["rule"] == "arithmetic mean")


def test_grid_and_batch_cross_checks():
    grid = am.experiments.grid_cross_check(4, 4001, 4000, 4, 200, rng=2)
    assert [r["d"] for r in grid] == [2, 3, 2, 3]
    assert max(r["descent_minus_grid"] for r in grid) < 1e-6  # the descent is never worse
    z = am.experiments.batch_identity_check(3, 4, 200, 10, rng=2)
    assert len(z) == 3 and all(0 <= v < 6 for v in z)


def test_shortfall_by_batch_size_shares_the_batches_between_rules():
    thetas, alphas = am.type_profile(4, 0.9 * np.pi, [0.6, 0.4], rng=0)
    rules = {"angular mean": am.angular_mean(thetas, alphas), "arithmetic mean": thetas[0]}
    rows, per = am.experiments.shortfall_by_batch_size(rules, thetas, alphas, [2, 10], 50, rng=4)
    assert [(r["m"], r["rule"]) for r in rows] == [
        (2, "angular mean"),
        (2, "arithmetic mean"),
        (10, "angular mean"),
        (10, "arithmetic mean"),
    ]
    assert [v.shape for v in per["angular mean"]] == [(50,), (50,)]
    X = am.gaussian_batches(50, 2, 4, np.random.default_rng(4))  # the first size's batches
    by_hand = am.per_batch_shortfall(rules["angular mean"], thetas, alphas, X).shortfall
    np.testing.assert_array_equal(per["angular mean"][0], by_hand)
    # the rule at the majority's direction misses long-run IP: its shortfall stays larger
    assert rows[3]["shortfall"] > rows[2]["shortfall"]


def test_type_and_cloud_sweeps():
    rows = am.experiments.type_sweep([(0.7, 0.3), (0.5, 0.3, 0.2)], [0.2, 0.8], 2, 4, rng=5)
    assert len(rows) == 2 * 2 * 2 * (2 + 3)  # separations, reps, rules, types
    assert min(r["ratio"] for r in rows if r["rule"] == "angular mean") >= 1 - 1e-9
    cloud, gaps = am.experiments.cloud_sweep([(0.7, 0.3)], [0.3, 0.9], 3, 4, 50.0, 6, rng=6)
    assert len(gaps) == 2 * 3 and len(cloud) == 2 * 3 * 2 * 2
    assert {g["separation"] for g in gaps} == {0.3, 0.9}


def test_table_sweep_measures_agreement_on_table_rows():
    rows = am.experiments.table_sweep(["wine"], (0.7, 0.3), [0.5], 2, 10, 6, True, rng=7)
    assert {r["rule"] for r in rows} == {
        "angular mean",
        "arithmetic mean",
        "angular mean, whitened",
    }
    assert len(rows) == 2 * 3 * 2 and all(np.isfinite(r["ratio"]) for r in rows)
    assert rows[0]["table"] == "wine (d=13)"
    plain = am.experiments.table_sweep(["wine"], (0.7, 0.3), [0.5], 2, 10, 6, False, rng=7)
    assert len(plain) == 2 * 2 * 2
