"""Tests of reprobook.papers.testable_massart's data generators and learners (arXiv 2602.22300).

Closed forms against Monte Carlo and quadrature, brute force against the vectorised threshold
search, the two L1 solvers against each other, seeded learning checks, and clear errors on bad
input. Monte Carlo tolerances are 5 standard errors, computed from the sample itself.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from reprobook.papers.testable_massart import config as C
from reprobook.papers.testable_massart import data as D
from reprobook.papers.testable_massart import hermite
from reprobook.papers.testable_massart import learners as L
from reprobook.papers.testable_massart import tester as T

NOISES = {
    "boundary_band": D.boundary_band(0.4, 0.5, 0.05),
    "minority_side": D.minority_side(0.4),
    "random_flips": D.random_flips(0.3),
}


def within(estimate: float, truth: float, sd: float, k: float = 5.0) -> bool:
    return abs(estimate - truth) <= k * sd + 1e-12


def reference_eta(noise_name: str, z: np.ndarray, t: float) -> np.ndarray:
    """The flip probabilities of NOISES written out from the models' definitions (z = w . x - t)."""
    if noise_name == "boundary_band":  # 0.4 within 0.5 of the boundary, 0.05 elsewhere
        return np.where(np.abs(z) < 0.5, 0.4, 0.05)
    if noise_name == "minority_side":  # 0.4 on the smaller side ({z >= 0} when t >= 0), 0 elsewhere
        return np.where((z >= 0) if t >= 0 else (z < 0), 0.4, 0.0)
    assert noise_name == "random_flips"
    return np.full(z.shape, 0.3)


def as_plain_function(noise):
    """The same eta as a bare function of (z, t): forces the quadrature code path."""
    return lambda z, t: noise.eta(np.asarray(z, dtype=float), t)


# --- marginals --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", D.MARGINALS)
def test_marginal_is_standardised(name):
    n, d = 60_000, 3
    X = D.sample_marginal(name, n, d, np.random.default_rng(1))
    assert X.shape == (n, d) and np.all(np.isfinite(X))
    mean = X.mean(axis=0)
    var = X.var(axis=0)
    m4 = ((X - mean) ** 4).mean(axis=0)
    for j in range(d):
        assert within(mean[j], 0.0, math.sqrt(var[j] / n)), (name, j, mean[j])
        assert within(var[j], 1.0, math.sqrt((m4[j] - var[j] ** 2) / n)), (name, j, var[j])


def test_marginals_have_their_shapes():
    rng = np.random.default_rng(2)
    n = 40_000
    U = D.sample_marginal("uniform", n, 2, rng)
    assert np.abs(U).max() <= math.sqrt(3.0)
    # the mixture is bimodal: less mass near 0 than near its modes +-mu / sqrt(mu^2 + s^2)
    M = D.sample_marginal("mixture", n, 1, rng)[:, 0]
    mode = 1.0 / math.sqrt(1.0 + 0.36)
    assert np.mean(np.abs(M) < 0.15) < 0.6 * np.mean(np.abs(M - mode) < 0.15)
    # the slab |x_1| < a (before rescaling) is empty, the other coordinates are untouched
    a = 0.3
    S = D.sample_marginal("slab_removed", n, 3, rng, a=a)
    scale = math.sqrt(1.0 + a * stats.norm.pdf(a) / stats.norm.sf(a))
    assert np.abs(S[:, 0]).min() >= a / scale - 1e-12
    assert stats.kstest(S[:, 1], "norm").pvalue > 1e-4
    # Student t is heavier-tailed than the Gaussian (excess kurtosis 6 / (df - 4) = 1.5 at df = 8)
    T = D.sample_marginal("student_t", n, 1, rng)[:, 0]
    assert stats.kurtosis(T) > 0.8


def test_slab_removed_variance_formula_by_quadrature():
    for a in (0.1, 0.3, 1.0):
        num = 2 * stats.norm.expect(lambda x: x * x, lb=a)
        mass = 2 * stats.norm.sf(a)
        assert num / mass == pytest.approx(1.0 + a * stats.norm.pdf(a) / stats.norm.sf(a), rel=1e-9)


def test_gauss_hermite_marginal_is_the_product_rule():
    rng = np.random.default_rng(3)
    n, d = 90_000, 2
    X = D.sample_marginal("gauss_hermite", n, d, rng)
    atoms, weights = hermite.gauss_hermite_product(d, 3)
    # every draw is an atom, and each atom appears with its product weight
    match = np.all(np.isclose(X[:, None, :], atoms[None, :, :], atol=1e-12), axis=2)  # (n, 9)
    assert np.all(match.sum(axis=1) == 1)
    freq = match.mean(axis=0)
    for f, w in zip(freq, weights):
        assert within(f, w, math.sqrt(w * (1 - w) / n))
    # the atoms' own moments are Gaussian up to degree 5: E x^2 = 1, E x^4 = 3 per coordinate
    assert weights @ atoms[:, 0] ** 2 == pytest.approx(1.0, abs=1e-12)
    assert weights @ atoms[:, 0] ** 4 == pytest.approx(3.0, abs=1e-12)
    # and the sample's moments follow them
    x = X[:, 0]
    assert within(np.mean(x**4), 3.0, np.std(x**4) / math.sqrt(n))
    assert within(np.mean(x**3), 0.0, np.std(x**3) / math.sqrt(n))
    # other node counts pass through
    X5 = D.sample_marginal("gauss_hermite", 1000, 2, rng, n_nodes=5)
    assert np.unique(X5).size == 5


# --- halfspaces and Massart noise -------------------------------------------------------------


def test_halfspace_and_direction():
    rng = np.random.default_rng(4)
    w = D.random_direction(6, rng)
    assert np.linalg.norm(w) == pytest.approx(1.0)
    h = D.halfspace([3.0, 4.0], 1.0)
    assert np.allclose(h.w, [0.6, 0.8])
    # sign(0) = +1: a point exactly on the boundary is labelled +1
    X = np.array([[1.0 / 0.6, 0.0], [0.0, 0.0], [5.0, 5.0]])
    assert h.predict(X).tolist() == [1, -1, 1]
    assert h.gamma == pytest.approx(stats.norm.sf(1.0))
    assert D.bias(-2.0) == D.bias(2.0) == pytest.approx(stats.norm.cdf(-2.0))


@pytest.mark.parametrize("noise_name", list(NOISES))
@pytest.mark.parametrize("t", [0.0, 1.0, -1.5])
def test_massart_flip_rate_and_bound(noise_name, t):
    noise = NOISES[noise_name]
    rng = np.random.default_rng(5)
    p = D.massart_problem(60_000, 4, t, noise, rng)
    # the clean labels and flip probabilities, recomputed here from X, w and the models' definitions
    z = p.X @ p.w - t
    f = np.where(z >= 0, 1, -1)
    eta = reference_eta(noise_name, z, t)
    np.testing.assert_array_equal(p.f, f)
    np.testing.assert_array_equal(p.eta, eta)
    assert eta.max() <= noise.eta_max and eta.min() >= 0
    assert p.opt == pytest.approx(eta.mean(), rel=1e-12)
    assert set(np.unique(p.y)) <= {-1, 1}
    # the labels are flipped with probability eta(x): overall, and within each noise level
    # (exactly never where eta = 0)
    flipped = p.y != f
    sd = math.sqrt(np.sum(eta * (1 - eta))) / p.n
    assert within(flipped.mean(), eta.mean(), sd)
    for level in np.unique(eta):
        sel = eta == level
        assert within(flipped[sel].mean(), level, math.sqrt(level * (1 - level) / sel.sum())), (
            level,
            sel.sum(),
        )
    # the population opt = E[eta] against the Monte Carlo mean of eta
    assert within(eta.mean(), D.population_opt(t, noise), np.std(eta) / math.sqrt(p.n))


def test_noise_models_eta():
    z = np.array([-1.0, -0.49, 0.0, 0.49, 0.5, 2.0])
    assert D.boundary_band(0.4, 0.5, 0.05)(z, 1.0).tolist() == [0.05, 0.4, 0.4, 0.4, 0.05, 0.05]
    assert D.random_flips(0.2)(z, 3.0).tolist() == [0.2] * 6
    ms = D.minority_side(0.3)
    assert ms(z, 1.0).tolist() == [0, 0, 0.3, 0.3, 0.3, 0.3]  # t > 0: the +1 side is smaller
    assert ms(z, -1.0).tolist() == [0.3, 0.3, 0, 0, 0, 0]  # t < 0: the -1 side is smaller


@pytest.mark.parametrize("t", [0.0, 0.7, 2.0, -1.2])
def test_population_opt_closed_forms_and_quadrature(t):
    gamma = stats.norm.sf(abs(t))
    ms = D.minority_side(0.4)
    assert D.population_opt(t, ms) == pytest.approx(gamma * 0.4, rel=1e-12)
    assert D.population_opt(t, as_plain_function(ms)) == pytest.approx(
        gamma * 0.4, rel=1e-8, abs=1e-12
    )
    rf = D.random_flips(0.25)
    assert D.population_opt(t, rf) == 0.25
    assert D.population_opt(t, as_plain_function(rf)) == pytest.approx(0.25, rel=1e-9)
    # boundary band in closed form: eta_low + (eta_max - eta_low) P[|z - t| < width]
    bb = D.boundary_band(0.4, 0.5, 0.05)
    band = stats.norm.cdf(t + 0.5) - stats.norm.cdf(t - 0.5)
    assert D.population_opt(t, bb) == pytest.approx(0.05 + 0.35 * band, rel=1e-9)


BANDS = {
    "default": D.boundary_band(0.4, 0.5, 0.05),
    "wide": D.boundary_band(0.3, 1.2, 0.1),
    "empty": D.boundary_band(0.45, 0.0, 0.2),  # |z| < 0 never holds: eta = eta_low everywhere
}


def band_closed_forms(band, t):
    """With g = w . x ~ N(0, 1) and eta = eta_max on |g - t| < width (eta_low elsewhere):
    opt = E[eta] = eta_low + (eta_max - eta_low) (Phi(t + width) - Phi(t - width)), and
    P[y = +1] = sum over the four pieces {g < t - width, t - width <= g < t, t <= g < t + width,
    g >= t + width} of P[piece] x (eta on the -1 side, 1 - eta on the +1 side)."""
    Phi = stats.norm.cdf
    e_hi, e_lo, wd = band.eta_max, band.eta_low, band.width
    opt = e_lo + (e_hi - e_lo) * (Phi(t + wd) - Phi(t - wd))
    p_plus = (
        Phi(t - wd) * e_lo
        + (Phi(t) - Phi(t - wd)) * e_hi
        + (Phi(t + wd) - Phi(t)) * (1 - e_hi)
        + stats.norm.sf(t + wd) * (1 - e_lo)
    )
    return opt, p_plus


@pytest.mark.parametrize("band_name", list(BANDS))
@pytest.mark.parametrize("t", [0.0, 0.7, 1.5, -1.0, 3.0])
def test_boundary_band_opt_and_constant_error_closed_forms(band_name, t):
    band = BANDS[band_name]
    opt, p_plus = band_closed_forms(band, t)
    assert D.population_opt(t, band) == pytest.approx(opt, rel=1e-9)
    assert D.positive_rate(t, band) == pytest.approx(p_plus, rel=1e-9)
    assert L.constant_error(t, band) == pytest.approx(min(p_plus, 1 - p_plus), rel=1e-9)
    if band_name == "empty":
        assert opt == band.eta_low


@pytest.mark.parametrize("t", [0.0, 0.7, -1.5])
def test_boundary_band_closed_forms_against_the_definition(t):
    # the closed forms follow the library's definition |w . x - t| < width: Monte Carlo over
    # g ~ N(0, 1)
    g = np.random.default_rng(16).standard_normal(400_000)
    for band in BANDS.values():
        eta = np.where(np.abs(g - t) < band.width, band.eta_max, band.eta_low)
        np.testing.assert_array_equal(band(g - t, t), eta)
        positive = np.where(g >= t, 1 - eta, eta)  # P[y = +1 | g]
        opt, p_plus = band_closed_forms(band, t)
        assert within(eta.mean(), opt, np.std(eta) / math.sqrt(g.size))
        assert within(positive.mean(), p_plus, np.std(positive) / math.sqrt(g.size))


def test_minority_side_opt_monte_carlo():
    # opt = gamma eta_max, checked on a large Gaussian sample with the generator's own eta
    rng = np.random.default_rng(6)
    for t in (0.5, 1.5):
        p = D.massart_problem(200_000, 3, t, D.minority_side(0.4), rng)
        sd = np.std(p.eta) / math.sqrt(p.n)
        assert within(p.opt, stats.norm.sf(t) * 0.4, sd)


@pytest.mark.parametrize("noise_name", list(NOISES))
@pytest.mark.parametrize("t", [0.5, 1.5, -1.0])
def test_constant_error_closed_form_and_monte_carlo(noise_name, t):
    noise = NOISES[noise_name]
    closed = L.constant_error(t, noise)
    # the quadrature path gives the same number
    assert closed == pytest.approx(
        L.constant_error(t, as_plain_function(noise)), rel=1e-8, abs=1e-12
    )
    gamma = stats.norm.sf(abs(t))
    if noise_name == "minority_side":
        assert closed == pytest.approx(gamma * (1 - 0.4), rel=1e-12)
    if noise_name == "random_flips":
        assert closed == pytest.approx(gamma * 0.7 + (1 - gamma) * 0.3, rel=1e-12)
    # Monte Carlo: the majority constant fitted on a large sample, scored on a fresh one
    rng = np.random.default_rng(7)
    train = D.massart_problem(50_000, 3, t, noise, rng)
    test = D.massart_problem(200_000, 3, t, noise, rng, w=train.w)
    h = L.ConstantHypothesis().fit(train.X, train.y)
    assert h.label_ == (1 if t < 0 else -1)
    err = L.error(h, test.X, test.y)
    assert within(err, closed, math.sqrt(closed * (1 - closed) / test.n))


# --- thresholds and L1 regression -------------------------------------------------------------


def brute_threshold_error(s, y):
    cands = np.concatenate([[-np.inf], np.unique(s), [np.inf]])
    return min(np.mean(np.where(s >= c, 1, -1) != y) for c in cands)


@pytest.mark.parametrize("seed", range(20))
def test_best_threshold_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    s = rng.integers(-4, 5, size=n).astype(float)  # many ties
    y = rng.choice([-1, 1], size=n)
    theta, err = L.best_threshold(s, y)
    assert err == pytest.approx(brute_threshold_error(s, y))
    assert np.mean(np.where(s >= theta, 1, -1) != y) == pytest.approx(err)


def test_l1_regression_is_a_median():
    rng = np.random.default_rng(8)
    y = rng.standard_normal(51)
    F = np.ones((51, 1))
    for solver in L.L1_SOLVERS:
        assert L.l1_regression(F, y, solver)[0] == pytest.approx(np.median(y), abs=1e-9)
    # weighted: a weight above half the total on one point makes it the weighted median
    w = np.ones(51)
    w[7] = 100.0
    for solver in L.L1_SOLVERS:
        assert L.l1_regression(F, y, solver, w)[0] == pytest.approx(y[7], abs=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
def test_l1_solvers_reach_the_same_optimum(weighted):
    rng = np.random.default_rng(9)
    p = D.massart_problem(400, 3, 0.5, NOISES["boundary_band"], rng)
    F = hermite.features(p.X, 2)
    w = rng.uniform(0.5, 2.0, size=p.n) if weighted else np.ones(p.n)
    objs = [
        np.sum(w * np.abs(p.y - F @ L.l1_regression(F, p.y, s, w if weighted else None)))
        for s in L.L1_SOLVERS
    ]
    assert objs[0] == pytest.approx(objs[1], rel=1e-7)
    # and no small perturbation of the optimum does better
    c = L.l1_regression(F, p.y, "dual", w if weighted else None)
    for _ in range(20):
        c2 = c + 1e-3 * rng.standard_normal(c.size)
        assert np.sum(w * np.abs(p.y - F @ c2)) >= objs[1] - 1e-9


def test_chow_recovers_the_direction():
    rng = np.random.default_rng(10)
    for t in (0.0, 1.0):
        p = D.massart_problem(5000, 5, t, D.random_flips(0.0), rng)
        h = L.ChowHalfspace().fit(p.X, p.y)
        assert float(h.w_ @ p.w) > 0.95
        assert abs(h.theta_ - t) < 0.2
        assert L.error(h, p.X, p.y) == pytest.approx(h.train_error_)


@pytest.fixture(scope="module")
def band_t0():
    rng = np.random.default_rng(11)
    train = D.massart_problem(2000, 5, 0.0, NOISES["boundary_band"], rng)
    test = D.massart_problem(50_000, 5, 0.0, NOISES["boundary_band"], rng, w=train.w)
    return train, test


@pytest.mark.parametrize("degree", [1, 3])
def test_l1_learner_is_near_opt_on_boundary_band(band_t0, degree):
    train, test = band_t0
    h = L.L1PolynomialRegression(degree).fit(train.X, train.y)  # sklearn's QuantileRegressor
    assert h.coef_.size == hermite.n_features(5, degree)
    assert L.error(h, test.X, test.y) <= test.opt + 0.03
    assert L.conditional_excess_error(h, test) <= 0.03


def test_bayes_classifier_has_excess_error_zero_up_to_label_noise(band_t0):
    _, test = band_t0
    assert abs(L.excess_error(test.target, test)) < 5 * math.sqrt(0.25 / test.n)


@pytest.mark.parametrize("shift", [0.3, 1.0, -0.8, "negated"])
def test_conditional_excess_error_where_h_and_f_differ(band_t0, shift):
    _, test = (
        band_t0  # t = 0, boundary_band(0.4, 0.5, 0.05): 1 - 2 eta = 0.2 in the band, 0.9 outside
    )
    g = test.X @ test.w  # w . x ~ N(0, 1); f(x) = sign(g)
    eta = np.where(np.abs(g) < 0.5, 0.4, 0.05)
    Phi = stats.norm.cdf
    if shift == "negated":
        # h = sign(-w . x) = -f (off the boundary): h and f differ everywhere
        h = D.halfspace(-test.w, 0.0)
        region = np.ones(test.n, dtype=bool)
        population = 1 - 2 * (0.05 + 0.35 * (Phi(0.5) - Phi(-0.5)))
    else:
        # h = sign(w . x - shift) differs from f exactly where w . x lies in [min(0, s), max(0, s))
        h = D.halfspace(test.w, shift)
        lo, hi = sorted((0.0, shift))
        region = (g >= lo) & (g < hi)
        in_band = max(0.0, Phi(min(hi, 0.5)) - Phi(max(lo, -0.5)))
        population = 0.2 * in_band + 0.9 * (Phi(hi) - Phi(lo) - in_band)
    np.testing.assert_array_equal(h.predict(test.X) != test.f, region)
    value = L.conditional_excess_error(h, test)
    # on the sample: exactly mean_i 1{x_i in region} (1 - 2 eta_i)
    terms = region * (1 - 2 * eta)
    assert value == pytest.approx(terms.mean(), rel=1e-12, abs=1e-15)
    # and in the population: the closed form, within Monte Carlo error
    assert within(value, population, np.std(terms) / math.sqrt(test.n)), (value, population)


def test_l1_collapses_to_the_constant_and_balancing_helps():
    # minority_side at t = 0: 30% of the labels are +1; the degree-1 median fit is exactly -1
    rng = np.random.default_rng(12)
    noise = D.minority_side(0.4)
    train = D.massart_problem(2000, 5, 0.0, noise, rng)
    test = D.massart_problem(20_000, 5, 0.0, noise, rng, w=train.w)
    plain = L.L1PolynomialRegression(1, solver="dual").fit(train.X, train.y)
    assert np.allclose(plain.coef_, [-1, 0, 0, 0, 0, 0], atol=1e-9)
    assert np.all(plain.predict(test.X) == -1)
    balanced = L.L1PolynomialRegression(1, solver="dual", class_weight="balanced").fit(
        train.X, train.y
    )
    assert (
        L.conditional_excess_error(balanced, test) < 0.03 < L.conditional_excess_error(plain, test)
    )


# --- the tester-learner -----------------------------------------------------------------------


class FakeTester:
    def __init__(self, accept: bool):
        self.accept = accept
        self.calls = 0

    def statistic(self, X):
        self.calls += 1
        return float(np.sum(np.mean(X, axis=0) ** 2))

    def accepts(self, X):
        return self.accept


def test_tester_learner_branches():
    rng = np.random.default_rng(13)
    rare = D.massart_problem(1000, 3, 2.5, D.minority_side(0.2), rng)  # about 0.5% minority
    common = D.massart_problem(1000, 3, 0.0, NOISES["boundary_band"], rng)

    out = L.TesterLearner(FakeTester(True), degree=2, eps=0.03).run(rare.X, rare.y)
    assert out.accepted and out.which == "constant"
    assert isinstance(out.hypothesis, L.ConstantHypothesis) and out.hypothesis.label_ == -1
    assert out.minority == pytest.approx(np.mean(rare.y == 1)) and out.minority <= 0.03

    out = L.TesterLearner(FakeTester(True), degree=2, eps=0.03, solver="dual").run(
        common.X, common.y
    )
    assert out.accepted and out.which == "polynomial"
    assert isinstance(out.hypothesis, L.L1PolynomialRegression) and out.hypothesis.degree == 2

    for p in (rare, common):
        out = L.TesterLearner(FakeTester(False), degree=2, eps=0.03).run(p.X, p.y)
        assert not out.accepted and out.hypothesis is None and out.which is None
        assert out.statistic == pytest.approx(float(np.sum(p.X.mean(axis=0) ** 2)))


def test_tester_learner_reuses_a_polynomial_fitted_on_the_sample():
    rng = np.random.default_rng(15)
    p = D.massart_problem(600, 3, 0.0, NOISES["boundary_band"], rng)
    tl = L.TesterLearner(FakeTester(True), degree=2, eps=0.03, solver="dual")
    fresh = tl.run(p.X, p.y).hypothesis
    given = L.L1PolynomialRegression(2, solver="dual").fit(p.X, p.y)
    out = tl.run(p.X, p.y, polynomial=given)
    assert out.which == "polynomial" and out.hypothesis is given
    # the fit is deterministic: the reused learner is the one run would have fitted
    np.testing.assert_array_equal(given.coef_, fresh.coef_)
    assert given.theta_ == fresh.theta_
    np.testing.assert_array_equal(given.predict(p.X), fresh.predict(p.X))
    for other in (
        L.L1PolynomialRegression(1, solver="dual").fit(p.X, p.y),
        L.L1PolynomialRegression(2, solver="sklearn").fit(p.X, p.y),
        L.L1PolynomialRegression(2, solver="dual"),  # not fitted
        L.ChowHalfspace().fit(p.X, p.y),
    ):
        with pytest.raises(ValueError, match="polynomial"):
            tl.run(p.X, p.y, polynomial=other)


def test_tester_learner_with_the_moment_tester():
    rng = np.random.default_rng(14)
    n, d = 1000, 3
    cal = T.calibrate(d, 2, n, reps=50, quantile=0.99, rng=rng)
    moment_tester = T.MomentTester(cal)
    tl = L.TesterLearner(moment_tester, degree=1, eps=0.03, solver="dual")
    w = D.random_direction(d, rng)

    # accepted for sure: the 8 atoms of the 2-node Gauss-Hermite rule (+-1, weight 1/8 each), 125
    # times each, have the Gaussian moments up to degree 3, so the statistic is 0 < threshold
    atoms, _ = hermite.gauss_hermite_product(d, 2)
    exact = np.repeat(atoms, n // 8, axis=0)
    y, _ = D.massart_labels(exact, w, 0.0, NOISES["boundary_band"], rng)
    out = tl.run(exact, y)
    assert out.statistic == pytest.approx(0.0, abs=1e-9) and cal.threshold > 1.0
    assert (
        out.accepted is True and out.which == "polynomial"
    )  # both labels common (x and -x are both atoms)
    assert (
        out.minority == pytest.approx(min(np.mean(y == 1), np.mean(y == -1)))
        and out.minority > 0.03
    )
    assert isinstance(out.hypothesis, L.L1PolynomialRegression) and out.hypothesis.degree == 1

    # a seeded Gaussian sample: below the threshold, accepted, learned well
    gauss = D.massart_problem(n, d, 0.0, NOISES["boundary_band"], rng, w=w)
    out = tl.run(gauss.X, gauss.y)
    assert out.statistic == moment_tester.statistic(gauss.X) <= cal.threshold
    assert out.accepted is True and out.which == "polynomial"
    assert L.conditional_excess_error(out.hypothesis, gauss) <= 0.05

    # rejected: a mean shift of 0.5 per coordinate puts about n * 3 * 0.25 = 750 in the statistic
    skewed = D.massart_problem(n, d, 0.0, NOISES["boundary_band"], rng, marginal="uniform")
    shifted = skewed.X + 0.5
    out = tl.run(shifted, skewed.y)
    assert out.statistic == moment_tester.statistic(shifted) > 10 * cal.threshold
    assert out.accepted is False and out.hypothesis is None and out.which is None


# --- bad inputs -------------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(15)
    with pytest.raises(ValueError, match="unknown marginal"):
        D.sample_marginal("cauchy", 10, 2, rng)
    with pytest.raises(ValueError, match="allowed: df"):
        D.sample_marginal("student_t", 10, 2, rng, nu=3)
    with pytest.raises(ValueError, match="df must be a finite real number > 2"):
        D.sample_marginal("student_t", 10, 2, rng, df=2)
    with pytest.raises(ValueError, match="n must be an integer"):
        D.sample_marginal("gaussian", 0, 2, rng)
    with pytest.raises(ValueError, match="eta_max must be .* < 0.5"):
        D.boundary_band(0.5, 0.5, 0.05)
    with pytest.raises(ValueError, match="eta_max must be .* < 0.5"):
        D.minority_side(0.7)
    with pytest.raises(ValueError, match="eta must be .*>= 0"):
        D.random_flips(-0.1)
    with pytest.raises(ValueError, match="non-zero"):
        D.halfspace([0.0, 0.0], 0.0)
    X = rng.standard_normal((5, 2))
    with pytest.raises(ValueError, match="Massart noise needs"):
        D.massart_labels(X, [1.0, 0.0], 0.0, lambda z, t: np.full(z.shape, 0.6), rng)
    with pytest.raises(ValueError, match=r"X \(n, d\) must have shape \(any, 3\)"):
        D.massart_labels(X, [1.0, 0.0, 0.0], 0.0, D.random_flips(0.1), rng)
    with pytest.raises(ValueError, match=r"w \(d,\) must have shape \(3,\)"):
        D.massart_problem(10, 3, 0.0, D.random_flips(0.1), rng, w=[1.0, 0.0])
    y = np.array([1, -1, 1, 1, 0])
    with pytest.raises(ValueError, match="-1 or \\+1"):
        L.ChowHalfspace().fit(X, y)
    with pytest.raises(ValueError, match="shape"):
        L.ConstantHypothesis().fit(X, np.ones(4))
    with pytest.raises(ValueError, match="degree must be"):
        L.L1PolynomialRegression(-1)
    with pytest.raises(ValueError, match="solver must be one of 'sklearn', 'dual'"):
        L.L1PolynomialRegression(2, solver="cvx")
    with pytest.raises(ValueError, match="class_weight"):
        L.L1PolynomialRegression(2, class_weight="auto")
    h = L.ChowHalfspace().fit(X, np.array([1, -1, 1, 1, -1]))
    with pytest.raises(ValueError, match=r"must have shape \(any, 2\), got shape \(3, 5\)"):
        h.predict(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="statistic\\(X\\) and accepts\\(X\\)"):
        L.TesterLearner(object(), degree=2, eps=0.1)
    with pytest.raises(ValueError, match="eps must be"):
        L.TesterLearner(FakeTester(True), degree=2, eps=0.9)


def test_worst_per_seed_by_brute_force():
    from reprobook.papers.testable_massart.learners import worst_per_seed

    rng = np.random.default_rng(4)
    seeds = rng.integers(0, 5, size=60)
    values = rng.normal(size=60)
    got = worst_per_seed(seeds, values)
    assert list(got) == sorted(set(seeds.tolist()))
    for s, v in got.items():
        assert v == max(x for t, x in zip(seeds, values) if t == s)
    assert worst_per_seed([3, 1, 3], [0.01, 0.02, 0.05]) == {1: 0.02, 3: 0.05}
    with pytest.raises(ValueError, match="seeds and values must have the same shape"):
        worst_per_seed([0, 1], [0.1])
    with pytest.raises(ValueError, match="finite"):
        worst_per_seed([0, 1], [0.1, np.nan])


# --- the notebooks' studies -------------------------------------------------------------------


def test_learner_study_rows_follow_the_seeded_problems():
    noises = {"random_flips": D.random_flips(0.1)}
    sizes = dict(n=200, n_test=500, d=2, thresholds=(0.0, 1.0), degrees=(1,), eps=0.03)
    cfg = C.TesterLearnerConfig(**sizes, solver="dual", seeds=2)
    results, outcomes = L.learner_study(cfg, 5, FakeTester(True), noises)
    assert len(outcomes) == 2 * 2 and outcomes.accepted.all()
    names = ["L1 degree 1", "Chow halfspace", "constant", "tester-learner"]
    assert results.learner.tolist() == names * 4
    # seed 1, t = 1 by hand: the same problems from default_rng(5 + 1)
    rng = np.random.default_rng(6)
    first = D.massart_problem(200, 2, 0.0, noises["random_flips"], rng)  # t = 0 is drawn first
    D.massart_problem(500, 2, 0.0, noises["random_flips"], rng, w=first.w)
    train = D.massart_problem(200, 2, 1.0, noises["random_flips"], rng)
    test = D.massart_problem(500, 2, 1.0, noises["random_flips"], rng, w=train.w)
    chow = L.ChowHalfspace().fit(train.X, train.y)
    row = results[(results.seed == 1) & (results.t == 1.0) & (results.learner == "Chow halfspace")]
    assert row.excess.item() == L.excess_error(chow, test) and row.opt.item() == test.opt
    # the tester-learner's row is what running it afresh on that sample scores
    out = L.TesterLearner(FakeTester(True), degree=1, eps=0.03, solver="dual").run(train.X, train.y)
    assert out.which == "polynomial"
    row = results[(results.seed == 1) & (results.t == 1.0) & (results.learner == "tester-learner")]
    assert row.excess.item() == L.excess_error(out.hypothesis, test)
    # a rejecting tester leaves the tester-learner out
    results, outcomes = L.learner_study(replace(cfg, seeds=1), 5, FakeTester(False), noises)
    assert not outcomes.accepted.any() and "tester-learner" not in set(results.learner)
    with pytest.raises(ValueError, match="seeds"):
        L.learner_study(replace(cfg, seeds=0), 5, FakeTester(True), noises)


def test_soundness_study_runs_every_marginal():
    cfg = C.TesterLearnerConfig(n=200, n_test=400, d=2, eps=0.03, solver="dual", soundness_reps=2)
    table = L.soundness_study(
        cfg,
        np.random.default_rng(3),
        FakeTester(True),
        D.boundary_band(),
        t=1.0,
        degree=1,
        marginals=("gaussian", "uniform"),
    )
    assert table.marginal.tolist() == ["gaussian"] * 2 + ["uniform"] * 2
    assert table.accepted.all() and np.isfinite(table.excess_if_trusted).all()


def test_noise_models_are_the_ones_the_profile_names_in_a_fixed_order():
    noises = ("random_flips", "boundary_band")
    cfg = C.TesterLearnerConfig(noises=noises, eta_max=0.3, eta_low=0.02, band=0.25, flip_eta=0.1)
    models = D.noise_models(cfg)
    assert list(models) == ["boundary_band", "random_flips"]
    assert models["boundary_band"] == D.boundary_band(0.3, 0.25, 0.02)
    assert models["random_flips"] == D.random_flips(0.1)
    assert list(D.noise_models(C.TesterLearnerConfig())) == list(C.TesterLearnerConfig().noises)


def test_the_package_reaches_every_module_by_name():
    from reprobook.papers import testable_massart as massart

    assert massart.learners.learner_study is L.learner_study
    assert not hasattr(massart, "nothing_here")


def test_strictly_best_and_same_as():
    import pandas as pd

    index = pd.MultiIndex.from_tuples([("a", 0.0), ("a", 1.0), ("b", 0.0)], names=["noise", "t"])
    cells = pd.DataFrame(
        {"L1": [0.1, 0.2, 0.05], "chow": [0.05, 0.3, 0.05], "constant": [0.2, 0.2, 0.3]},
        index=index,
    )
    assert L.strictly_best(cells) == {"L1": 0, "chow": 1, "constant": 0}
    assert L.same_as(cells, "L1", "constant") == ["a, t = 1"]
    with pytest.raises(ValueError, match="tol"):
        L.same_as(cells, "L1", "constant", tol=-1)


def test_the_smoke_profile_cuts_the_full_sizes_to_what_the_notebooks_need():
    """Smoke runs the full profile's code: the moment tester's largest sample size is its n,
    C4's interval needs two seeds, and the learners keep the full profile's degrees."""
    from reprobook.papers.testable_massart import config

    mt = config.PROFILES["02_moment_tester"]["smoke"]
    assert (
        max(mt.sample_sizes) == mt.n
        and mt.degree == config.PROFILES["02_moment_tester"]["full"].degree
    )
    tl = config.PROFILES["03_tester_learner"]["smoke"]
    assert tl.seeds >= 2 and tl.degrees == config.PROFILES["03_tester_learner"]["full"].degrees
    sw = config.PROFILES["01_sandwiching"]["smoke"]
    assert set(sw.example_degrees) <= set(config.PROFILES["01_sandwiching"]["full"].degrees)
