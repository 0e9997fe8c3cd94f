"""Chapter 05's linear programs give the same answer when their inputs move at rounding level,
and a failed solve falls back to another method on the same LP (or is counted) instead of
stopping a notebook."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import OptimizeResult

from reprobook import core
from reprobook.papers.testable_massart import config, data, hermite, sandwich
from reprobook.papers.testable_massart import learners as L


def _moved(t: float, seed: int) -> float:
    return float(core.jitter(np.array([t]), seed)[0])


# --- the sandwich LPs ---------------------------------------------------------------------------


@pytest.mark.parametrize("t, k", [(0.5, 8), (2.0, 6)])
def test_sandwich_gap_is_stable_under_jitter(t, k):
    # The plain grid LP: a threshold moved by 1e-12 relative moves the grid by as much; the
    # optimal gap moves by up to about 2e-10 relative (HiGHS's own accuracy at these
    # tolerances). An LP that stopped at a non-optimal vertex for some seeds (as the dual
    # simplex once did on these rows) would be off by 1e-3 or more.
    ref = sandwich.sandwich(t, k)
    for seed in range(6):
        moved = sandwich.sandwich(_moved(t, seed), k)
        assert moved.gap == pytest.approx(ref.gap, rel=1e-9)
        assert moved.grid_violation <= 1e-7


def test_refined_sandwich_gap_is_stable_under_jitter():
    # With exchange rounds the points added depend on which slack minima pass a 1e-9 test, so
    # the number of rounds may differ between seeds; the gap may move by 1e-9 relative then,
    # far less than its distance from the closed form (3e-7 here, a discretisation error).
    ref = sandwich.sandwich(1.0, 10, grid_points=1001, refine=4)
    closed = float(sandwich.christoffel_gap(1.0, 10))
    for seed in range(4):
        moved = sandwich.sandwich(_moved(1.0, seed), 10, grid_points=1001, refine=4)
        assert moved.gap == pytest.approx(ref.gap, rel=1e-8)
        assert moved.gap == pytest.approx(closed, rel=1e-6)


def _failing(methods_that_fail):
    real = sandwich.linprog

    def fake(*args, method, options=None, **kw):
        if (method, bool(options)) in methods_that_fail:
            return OptimizeResult(status=4, x=None, message="numerical difficulties")
        return real(*args, method=method, options=options, **kw)

    return fake


def _use_linprog(monkeypatch, solve):
    """Solve the sandwich LPs with ``solve`` from now on (results already kept are dropped)."""
    monkeypatch.setattr(sandwich, "linprog", solve)
    sandwich._sandwich.cache_clear()


def test_sandwich_falls_back_to_another_method_on_the_same_lp(monkeypatch):
    ref = sandwich.sandwich(0.5, 8)
    _use_linprog(monkeypatch, _failing({("highs-ipm", False)}))
    fallback = sandwich.sandwich(0.5, 8)  # the dual simplex solves it
    assert fallback is not ref
    assert fallback.gap == pytest.approx(ref.gap, rel=1e-9)
    _use_linprog(monkeypatch, _failing({("highs-ipm", False), ("highs-ds", False)}))
    assert sandwich.sandwich(0.5, 8).gap == pytest.approx(ref.gap, rel=1e-9)
    _use_linprog(
        monkeypatch, _failing({("highs-ipm", False), ("highs-ds", False), ("highs-ipm", True)})
    )
    with pytest.raises(RuntimeError, match=r"highs-ipm: status 4; highs-ds: status 4; highs-ipm"):
        sandwich.sandwich(0.5, 8)
    sandwich._sandwich.cache_clear()  # nothing solved by the failing stand-ins stays kept


# --- L1 regression and its threshold ------------------------------------------------------------


def _problem(t, seed=0):
    rng = np.random.default_rng(seed)
    noise = data.minority_side(0.3)
    train = data.massart_problem(2000, 5, t, noise, rng)
    test = data.massart_problem(5000, 5, t, noise, rng, w=train.w)
    return train, test


@pytest.mark.parametrize("t", [0.0, 2.0])
def test_l1_learner_is_the_same_hypothesis_on_jittered_data(t):
    # At t = 2 the degree-3 L1 fit is the constant -1 in exact arithmetic; HiGHS returns it
    # with 55 coefficients of order 1e-11, so the scores spread over about 7e-10. Cutting
    # between scores that differ only by that noise (what best_threshold did with exact
    # comparisons) gave a training error of 0.014 or 0.0135 or the constant's 0.0145 depending
    # on the jitter seed, and a different hypothesis each time; this test then fails.
    train, test = _problem(t)
    ref = L.L1PolynomialRegression(3, solver="dual").fit(train.X, train.y)
    F = hermite.features(train.X, 3, include_constant=True)
    loss = np.sum(np.abs(train.y - F @ ref.coef_))
    if t == 2.0:
        assert math.isinf(ref.theta_) and np.max(np.abs(ref.coef_[1:])) < 1e-9
    for seed in range(5):
        X = core.jitter(train.X, seed)
        h = L.L1PolynomialRegression(3, solver="dual").fit(X, train.y)
        F = hermite.features(X, 3, include_constant=True)
        assert np.sum(np.abs(train.y - F @ h.coef_)) == pytest.approx(loss, rel=1e-9)
        assert h.train_error_ == ref.train_error_
        assert np.array_equal(h.predict(test.X), ref.predict(test.X))


def test_best_threshold_treats_rounding_noise_as_a_tie():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(200) < 0.1, 1, -1)
    # noise of the solver's size that happens to sit a little higher on the positives
    noisy_constant = -1.0 + 1e-11 * (rng.random(200) + (y == 1))
    theta, err = L.best_threshold(noisy_constant, y)
    assert theta == math.inf and err == np.mean(y == 1)  # the majority constant, not a cut
    assert L.best_threshold(noisy_constant, y, rtol=0.0)[1] < err  # cut by the noise itself
    s = np.array([0.0, 1.0, 2.0, 3.0])
    assert L.best_threshold(s, np.array([-1, -1, 1, 1])) == (1.5, 0.0)


def test_l1_regression_falls_back_when_an_lp_fails(monkeypatch):
    train, _ = _problem(0.0)
    F = hermite.features(train.X, 2, include_constant=True)
    ref = L.l1_regression(F, train.y, "dual")
    loss = np.sum(np.abs(train.y - F @ ref))
    real = L._l1_fit
    calls = []

    def flaky(form, method, *args):
        calls.append((form, method))
        if (form, method) in {("dual", "highs"), ("sklearn", "highs")}:
            raise RuntimeError(f"the L1 regression LP ({form}, {method}) failed: test")
        return real(form, method, *args)

    monkeypatch.setattr(L, "_l1_fit", flaky)
    c = L.l1_regression(F, train.y, "dual")  # the dual by the interior-point method
    assert calls == list(L.L1_FALLBACKS["dual"])
    assert np.sum(np.abs(train.y - F @ c)) == pytest.approx(loss, rel=1e-9)
    monkeypatch.setattr(L, "L1_FALLBACKS", {"dual": (("dual", "highs"),)})
    with pytest.raises(RuntimeError, match="every L1 regression LP failed"):
        L.l1_regression(F, train.y, "dual")


def test_scikit_learn_failure_is_an_error_not_a_warning(monkeypatch):
    # QuantileRegressor only warns when HiGHS reports no optimum, and keeps what HiGHS left.
    import sklearn.linear_model._quantile as quantile

    F = np.ones((5, 1))
    y = np.arange(5.0)
    left = OptimizeResult(status=1, success=False, x=np.zeros(12), message="limit", nit=1)
    monkeypatch.setattr(quantile, "linprog", lambda *a, **k: left)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="primal, highs"):
            L._l1_fit("sklearn", "highs", F, y, None)
        nothing = OptimizeResult(status=4, success=False, x=None, message="numerical", nit=1)
        monkeypatch.setattr(quantile, "linprog", lambda *a, **k: nothing)
        with pytest.raises(RuntimeError, match="primal, highs"):
            L._l1_fit("sklearn", "highs", F, y, None)
        assert L.l1_regression(F, y, "sklearn")[0] == pytest.approx(2.0)  # the dual solves it


def test_a_failed_problem_is_counted_and_left_out(monkeypatch):
    cal = __import__(
        "reprobook.papers.testable_massart.tester", fromlist=["chi2_calibration"]
    ).chi2_calibration(3, 2, 300)
    tester = __import__(
        "reprobook.papers.testable_massart.tester", fromlist=["MomentTester"]
    ).MomentTester(cal)
    real = L.l1_regression
    count = {"n": 0}

    def fails_once(F, y, solver="sklearn", sample_weight=None):
        count["n"] += 1
        if count["n"] == 1:
            raise RuntimeError("every L1 regression LP failed: test")
        return real(F, y, solver, sample_weight)

    monkeypatch.setattr(L, "l1_regression", fails_once)
    failures = core.Failures("problems")
    sizes = dict(n=300, n_test=500, d=3, thresholds=(0.0, 0.5), degrees=(1,), eps=0.0)
    cfg = config.TesterLearnerConfig(**sizes, solver="dual", seeds=1, soundness_reps=2)
    flips = data.random_flips(0.1)
    results, outcomes = L.learner_study(cfg, 0, tester, {"flips": flips}, failures=failures)
    assert failures.count == 1 and failures.units == ["seed 0, flips, t = 0"]
    assert outcomes.which.tolist()[0] == "failed" and len(outcomes) == 2
    assert set(results.t) == {0.5}  # the failed problem is not scored
    assert "1 of 2 problems failed" in failures.note(len(outcomes))
    count["n"] = 0
    rng = np.random.default_rng(1)
    runs = L.soundness_study(
        cfg, rng, tester, flips, t=0.0, degree=1, marginals=("gaussian",), failures=failures
    )
    assert np.isnan(runs.excess_if_trusted.iloc[0]) and np.isfinite(runs.excess_if_trusted.iloc[1])
    assert failures.count == 2
