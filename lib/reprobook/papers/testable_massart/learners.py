"""Learners for the chapter on testable learning of halfspaces under Massart noise.

Paper: "Testable Learning of General Halfspaces under Massart Noise", Diakonikolas, Iakovidis,
Kane and Liu, arXiv 2602.22300. Only the abstract was read, so the learner here is our
reconstruction of the standard testable-learning template (Gollakota, Klivans and Kothari; the
L1 polynomial regression of Kalai, Klivans, Mansour and Servedio), not the paper's algorithm:

* :class:`L1PolynomialRegression`: minimise sum_i |y_i - p(x_i)| over polynomials p of degree <= k
  written in the orthonormal Hermite basis, then output sign(p(x) - theta) with the threshold
  theta that minimises the training error (an improper, polynomial-threshold hypothesis).
* :class:`ChowHalfspace`: the direction of the Chow vector E[y x] (the degree-1 Hermite
  coefficients of the labels) with the best training threshold: a proper baseline.
* :class:`ConstantHypothesis`: the majority label, which the reconstruction outputs when the
  minority is rarer than epsilon (its excess error is then at most about epsilon).
* :class:`TesterLearner`: run a tester (any object with ``statistic(X)`` and ``accepts(X)``,
  e.g. ``tester.MomentTester``); on rejection output nothing, otherwise the constant when the
  observed minority frequency is <= eps, else the L1 learner. The paper's tester also has a
  "non-negativity test", which is not reconstructed.

Errors are measured against noisy labels: err(h) = P[h(x) != y]; under Massart noise the target
is Bayes optimal, so err(h) - opt >= 0 in expectation, opt = E[eta(x)].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import optimize

from reprobook.core import Failures, checks, tie_groups

from .config import TesterLearnerConfig
from .data import MARGINALS, Problem, massart_problem, positive_rate

__all__ = [
    "best_threshold",
    "ConstantHypothesis",
    "ChowHalfspace",
    "L1PolynomialRegression",
    "l1_regression",
    "error",
    "excess_error",
    "conditional_excess_error",
    "constant_error",
    "Outcome",
    "TesterLearner",
    "worst_per_seed",
    "learner_study",
    "soundness_study",
    "strictly_best",
    "same_as",
]

L1_SOLVERS = ("sklearn", "dual")


# --- checks -----------------------------------------------------------------------------------


def _check_Xy(X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """A non-empty finite sample X (n, d) and its labels y (n,) in {-1, +1}."""
    X = checks.array(X, "X", ndim=2, what="(n, d)")
    if X.shape[0] == 0:
        raise checks.InputError("X (n, d) must have at least one row, got shape (0, ...)")
    y = checks.array(y, "y", shape=(X.shape[0],), what="(n,)")
    if not np.all((y == 1) | (y == -1)):
        raise checks.InputError(
            f"y (labels) must be -1 or +1, got the values {np.unique(y)[:5].tolist()}"
        )
    return X, y.astype(np.int64)


def _check_X(X: ArrayLike, d: int) -> np.ndarray:
    """X with the d columns the hypothesis was fitted on."""
    return checks.array(X, "X", shape=(None, d), what="(n, d) as in fit")


def _sign(s: np.ndarray) -> np.ndarray:
    """sign with sign(0) := +1, as int in {-1, +1}."""
    return np.where(s >= 0, 1, -1)


SCORE_TIE_RTOL = 1e-9  # sorted scores closer than this (times max(1, max |s|)) are tied


def best_threshold(
    scores: ArrayLike, y: ArrayLike, rtol: float = SCORE_TIE_RTOL
) -> tuple[float, float]:
    """theta minimising the training error of sign(s - theta): (theta, error).

    The threshold theta-hat of eq. `massart-l1` of notebooks/05_testable_massart/index.md.

    Sort the scores; cutting before position k predicts -1 for the k smallest and +1 for the rest,
    with err(k) = (#{y = +1 among the k smallest} + #{y = -1 among the others}) / n, computed for
    every k at once by cumulative sums. Scores within ``rtol * max(1, max |s|)`` of the smallest
    score of their run are one run (:func:`reprobook.core.tie_groups`, so a dense run of
    near-equal scores does not chain into one), and only cuts between runs (and k = 0, n) are
    allowed, so tied scores get one label,
    and so do scores equal up to the LP solver's rounding: an L1 fit that is the constant in
    exact arithmetic comes back from HiGHS with coefficients of order 1e-11, and its scores
    would otherwise be cut by their rounding noise (a hypothesis that changes with the last
    bits of the data). theta is the midpoint of the cut's neighbours (-inf for k = 0, +inf for
    k = n); the smallest error wins, the first such cut on ties.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(y)
    rtol = checks.real(rtol, "rtol", minimum=0)
    n = s.size
    order = np.argsort(s, kind="stable")
    s_sorted = s[order]
    pos = (y[order] == 1).astype(np.int64)
    pos_below = np.concatenate([[0], np.cumsum(pos)])  # (n + 1,): +1 labels among the k smallest
    neg_above = (n - np.arange(n + 1)) - (pos_below[-1] - pos_below)  # -1 labels among the rest
    errs = pos_below + neg_above
    valid = np.ones(n + 1, dtype=bool)
    tol = rtol * max(1.0, float(np.max(np.abs(s)))) if n else 0.0
    groups = tie_groups(-s_sorted, tol)  # runs within tol of their smallest score
    valid[1:n] = groups[1:] != groups[:-1]  # cuts only between runs
    errs = np.where(valid, errs, n + 1)
    k = int(np.argmin(errs))
    if k == 0:
        theta = -math.inf
    elif k == n:
        theta = math.inf
    else:
        theta = 0.5 * (s_sorted[k - 1] + s_sorted[k])
    return float(theta), float(errs[k] / n)


# --- hypotheses -------------------------------------------------------------------------------


class ConstantHypothesis:
    """h(x) = the majority label of the training sample (+1 on a tie)."""

    def fit(self, X: ArrayLike, y: ArrayLike) -> ConstantHypothesis:
        X, y = _check_Xy(X, y)
        self.d_ = X.shape[1]
        self.label_ = 1 if np.sum(y) >= 0 else -1
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        X = _check_X(X, self.d_)
        return np.full(X.shape[0], self.label_, dtype=np.int64)


class ChowHalfspace:
    """h(x) = sign(w . x - theta), w = chi / ||chi||, chi = mean_i y_i x_i (the Chow vector).

    For x ~ N(0, I_d) and labels that depend on x only through w* . x, E[y x] is parallel to w*
    (rotation invariance), so w estimates the target's direction; theta is chosen by
    :func:`best_threshold` on the projections w . x_i. (If chi = 0 the projections are all 0 and
    the hypothesis is constant.)
    """

    def fit(self, X: ArrayLike, y: ArrayLike) -> ChowHalfspace:
        X, y = _check_Xy(X, y)
        chi = (y @ X) / X.shape[0]  # (d,)
        norm = float(np.linalg.norm(chi))
        self.chow_ = chi
        self.w_ = chi / norm if norm > 0 else chi
        self.theta_, self.train_error_ = best_threshold(X @ self.w_, y)
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        return _check_X(X, self.w_.size) @ self.w_

    def predict(self, X: ArrayLike) -> np.ndarray:
        return _sign(self.decision_function(X) - self.theta_)


# the LPs l1_regression tries for each solver, in order, until one reports an optimum: the
# chosen formulation first, then the other formulation, then the dual by the interior-point
# method. All minimise the same weighted L1 loss.
L1_FALLBACKS: dict[str, tuple[tuple[str, str], ...]] = {
    "sklearn": (("sklearn", "highs"), ("dual", "highs"), ("dual", "highs-ipm")),
    "dual": (("dual", "highs"), ("sklearn", "highs"), ("dual", "highs-ipm")),
}


def _l1_fit(form: str, method: str, F: np.ndarray, y: np.ndarray, w) -> np.ndarray:
    """One attempt at the LP of :func:`l1_regression`; RuntimeError when HiGHS reports no
    optimum (scikit-learn only warns then, and returns whatever HiGHS left)."""
    if form == "sklearn":
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import QuantileRegressor

        model = QuantileRegressor(quantile=0.5, alpha=0.0, solver=method, fit_intercept=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)  # no optimum: an error here
            try:
                coef = model.fit(F, y, sample_weight=w).coef_
            except (ConvergenceWarning, TypeError) as err:  # TypeError: HiGHS left no x
                raise RuntimeError(
                    f"the L1 regression LP (primal, {method}) failed: {err}"
                ) from err
        return np.asarray(coef, dtype=float)
    m = F.shape[1]
    bounds: Any = (-1.0, 1.0) if w is None else np.column_stack([-w, w])
    res = optimize.linprog(-y, A_eq=F.T, b_eq=np.zeros(m), bounds=bounds, method=method)
    if res.status != 0 or res.eqlin is None:
        raise RuntimeError(f"the L1 regression LP (dual, {method}) failed: {res.message}")
    return -np.asarray(res.eqlin.marginals, dtype=float)


def l1_regression(
    F: ArrayLike, y: ArrayLike, solver: str = "sklearn", sample_weight: ArrayLike | None = None
) -> np.ndarray:
    """argmin_c sum_i s_i |y_i - F_i . c| (weighted least absolute deviations), c of shape (m,).

    Implements the fit of eq. `massart-l1` of notebooks/05_testable_massart/index.md (with the
    Hermite features in F); s_i = ``sample_weight`` (default 1).

    * "sklearn": ``QuantileRegressor(quantile=0.5, alpha=0, solver="highs", fit_intercept=False)``,
      i.e. HiGHS on the primal LP min s.(u + v) s.t. F c + u - v = y, u, v >= 0 (2n + m variables).
    * "dual": HiGHS (``scipy.optimize.linprog``) on the LP dual max_b y . b s.t. F^T b = 0,
      -s_i <= b_i <= s_i (n variables, m equations); c is read off the equality constraints'
      multipliers (c = -marginals in SciPy's sign convention). Same optimum, several times faster.
    The minimiser need not be unique; the two solvers may return different optimal vertices.
    When HiGHS reports no optimum, the same loss is minimised by the next entry of
    ``L1_FALLBACKS[solver]`` (the other formulation, then the dual by the interior-point
    method); RuntimeError, with every attempt's reason, when none reports one.
    """
    solver = checks.choice(solver, "solver", L1_SOLVERS)
    F = checks.array(F, "F", ndim=2, what="(n, m)")
    y = checks.array(y, "y", shape=(F.shape[0],), what="(n,)")
    if sample_weight is not None:
        sample_weight = checks.array(sample_weight, "sample_weight", shape=y.shape)
        if np.any(sample_weight < 0):
            raise checks.InputError("sample_weight must be non-negative")
    reasons = []
    for form, method in L1_FALLBACKS[solver]:
        try:
            return _l1_fit(form, method, F, y, sample_weight)
        except RuntimeError as err:
            reasons.append(str(err))
    raise RuntimeError("every L1 regression LP failed: " + "; ".join(reasons))


class L1PolynomialRegression:
    """Degree-k L1 polynomial regression, thresholded (reconstructed learner; KKMS / GKK).

    Implements eq. `massart-l1` of notebooks/05_testable_massart/index.md:
    p(x) = sum_{|a| <= k} c_a H_a(x) with the orthonormal Hermite features of
    ``hermite.features`` (constant included, no separate intercept),
    c = argmin sum_i |y_i - p(x_i)| (:func:`l1_regression`), and h(x) = sign(p(x) - theta) with
    theta from :func:`best_threshold` (theta = 0 if ``tune_threshold`` is False). Degree 1 is a
    halfspace; degree k >= 2 an improper polynomial threshold function.

    L1 regression fits a conditional median, so when one label is clearly the minority (in our
    runs from about 30% of the labels down) the best low-degree p is often exactly the majority
    constant, and no threshold can undo that.
    ``class_weight="balanced"`` (our extension, not part of the reconstruction) weighs each
    example by n / (2 n_{y_i}), so both labels carry half the loss; with one label only, the
    weights stay 1.
    """

    def __init__(
        self,
        degree: int,
        *,
        solver: str = "sklearn",
        tune_threshold: bool = True,
        class_weight: str | None = None,
    ):
        self.degree = checks.integer(degree, "degree", minimum=0)
        checks.choice(solver, "solver", L1_SOLVERS)
        checks.choice(class_weight, "class_weight", (None, "balanced"))
        self.solver = solver
        self.tune_threshold = bool(tune_threshold)
        self.class_weight = class_weight

    def _features(self, X: np.ndarray) -> np.ndarray:
        from . import hermite

        return hermite.features(X, self.degree, include_constant=True)

    def fit(self, X: ArrayLike, y: ArrayLike) -> L1PolynomialRegression:
        X, y = _check_Xy(X, y)
        self.d_ = X.shape[1]
        F = self._features(X)  # (n, C(d + k, k))
        weights = None
        n_pos = int(np.sum(y == 1))
        if self.class_weight == "balanced" and 0 < n_pos < y.size:
            weights = np.where(y == 1, y.size / (2.0 * n_pos), y.size / (2.0 * (y.size - n_pos)))
        self.coef_ = l1_regression(F, y, self.solver, weights)
        scores = F @ self.coef_
        if self.tune_threshold:
            self.theta_, self.train_error_ = best_threshold(scores, y)
        else:
            self.theta_ = 0.0
            self.train_error_ = float(np.mean(_sign(scores) != y))
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """p(x) (n,)."""
        return self._features(_check_X(X, self.d_)) @ self.coef_

    def predict(self, X: ArrayLike) -> np.ndarray:
        return _sign(self.decision_function(X) - self.theta_)


# --- errors -----------------------------------------------------------------------------------


def error(h: Any, X: ArrayLike, y: ArrayLike) -> float:
    """err(h) = mean_i 1{h(x_i) != y_i}: disagreement with the (noisy) labels."""
    X, y = _check_Xy(X, y)
    return float(np.mean(np.asarray(h.predict(X)) != y))


def excess_error(h: Any, problem: Problem) -> float:
    """err(h) - opt on a (test) problem, opt = mean(eta) (an unbiased estimate of err(h) - err(f)):
    the excess error of eq. `massart-noise` of notebooks/05_testable_massart/index.md."""
    return error(h, problem.X, problem.y) - problem.opt


def conditional_excess_error(h: Any, problem: Problem) -> float:
    """E[err(h) - err(f) | x_1..x_n] = mean_i 1{h(x_i) != f(x_i)} (1 - 2 eta_i).

    The same target as :func:`excess_error` without the label noise's variance (for a point where
    h and f disagree, h is wrong with probability 1 - eta and f with probability eta).
    """
    disagree = np.asarray(h.predict(problem.X)) != problem.f
    return float(np.mean(disagree * (1.0 - 2.0 * problem.eta)))


def constant_error(t: float, noise: Any) -> float:
    """Population error of the best constant under x ~ N(0, I_d) and Massart labels of
    sign(w . x - t).

    err = min(P[y = +1], P[y = -1]) with P[y = +1] from ``data.positive_rate`` (independent of d
    and w). Closed forms with gamma = Phi(-|t|): minority_side(eta_max): gamma (1 - eta_max) (the
    minority's labels are flipped towards the majority with probability eta_max, the majority's
    never); random_flips(eta): gamma (1 - eta) + (1 - gamma) eta. boundary_band and any other noise
    function: by quadrature over z = w . x ~ N(0, 1). The excess is this minus
    ``data.population_opt``.
    """
    p = positive_rate(t, noise)
    return float(min(p, 1.0 - p))


# --- the tester-learner -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What :meth:`TesterLearner.run` returns.

    accepted: the tester's verdict; statistic: its statistic on X; minority: the observed minority
    frequency min(mean(y = +1), mean(y = -1)); hypothesis: a fitted hypothesis, or None when the
    tester rejected; which: "constant", "polynomial", or None when rejected.
    """

    accepted: bool
    statistic: float
    minority: float
    hypothesis: Any
    which: str | None


class TesterLearner:
    """Test, then learn (reconstructed; the paper's non-negativity test is not implemented).

    Implements eq. `massart-tester-learner` of notebooks/05_testable_massart/index.md:

    1. s = tester.statistic(X); if not tester.accepts(X): reject (no hypothesis).
    2. If the observed minority frequency min_b mean(y = b) <= eps, output the majority constant:
       its error is the minority frequency, so its excess error is at most about eps.
    3. Otherwise output degree-k L1 polynomial regression, thresholded.

    ``tester`` is any object with ``statistic(X) -> float`` and ``accepts(X) -> bool``, e.g.
    ``tester.MomentTester(tester.calibrate(...))``; nothing from ``tester`` is imported here.
    """

    def __init__(
        self,
        tester: Any,
        degree: int,
        eps: float,
        *,
        solver: str = "sklearn",
        class_weight: str | None = None,
    ):
        for method in ("accepts", "statistic"):
            if not callable(getattr(tester, method, None)):
                raise ValueError(
                    "tester must have methods statistic(X) and accepts(X); "
                    f"{tester!r} lacks {method}"
                )
        eps = checks.real(eps, "eps", minimum=0, maximum=0.5)
        self.tester = tester
        # validates degree, solver and class_weight; each run fits a fresh copy
        self.learner = L1PolynomialRegression(degree, solver=solver, class_weight=class_weight)
        self.degree = self.learner.degree
        self.eps = float(eps)

    def _check_polynomial(self, polynomial: Any, X: ArrayLike) -> None:
        """ValueError unless ``polynomial`` is None or an :class:`L1PolynomialRegression` with
        this learner's degree, solver and class weight, fitted on data of X's dimension."""
        if polynomial is None:
            return
        mine = (self.degree, self.learner.solver, self.learner.class_weight)
        names = ("degree", "solver", "class_weight")
        theirs = tuple(getattr(polynomial, a, None) for a in names)
        if not isinstance(polynomial, L1PolynomialRegression) or theirs != mine:
            raise ValueError(
                f"polynomial must be an L1PolynomialRegression with (degree, solver, "
                f"class_weight) = {mine}, got {polynomial!r}"
            )
        if getattr(polynomial, "d_", None) != np.shape(X)[1]:
            raise ValueError("polynomial must be fitted on X (it is unfitted or of another d)")

    def run(
        self, X: ArrayLike, y: ArrayLike, *, polynomial: L1PolynomialRegression | None = None
    ) -> Outcome:
        """Test the sample, then learn from it.

        Implements eq. `massart-tester-learner` of notebooks/05_testable_massart/index.md.
        ``polynomial``: an :class:`L1PolynomialRegression` already fitted on exactly this (X, y),
        with this learner's degree, solver and class weight; the third case then returns it
        instead of fitting the same LP again (the fit is deterministic, so the hypothesis is the
        same). ValueError when its settings or its data's dimension differ."""
        self._check_polynomial(polynomial, X)
        # the labelled sample: X (n, d) finite, y (n,) in {-1, +1}
        X, y = _check_Xy(X, y)
        # eq. massart-moment-stat: the tester looks at the unlabelled points only
        statistic = float(self.tester.statistic(X))
        # eq. massart-accept: T_n <= tau
        accepted = bool(self.tester.accepts(X))
        # the observed minority frequency min_b (1/n) #{i : y_i = b}
        minority = float(min(np.mean(y == 1), np.mean(y == -1)))
        # eq. massart-tester-learner, first case: rejected, no hypothesis
        if not accepted:
            return Outcome(False, statistic, minority, None, None)
        # second case: the minority is rarer than eps, so the majority label is within eps of opt
        if minority <= self.eps:
            return Outcome(True, statistic, minority, ConstantHypothesis().fit(X, y), "constant")
        # third case: the degree-k L1 learner of eq. massart-l1, already fitted on (X, y)
        if polynomial is not None:
            return Outcome(True, statistic, minority, polynomial, "polynomial")
        # or a fresh one
        learner = L1PolynomialRegression(
            self.degree, solver=self.learner.solver, class_weight=self.learner.class_weight
        )
        # fit it (L1 regression, then the best threshold) and hand it back
        return Outcome(True, statistic, minority, learner.fit(X, y), "polynomial")


def worst_per_seed(seeds: ArrayLike, values: ArrayLike) -> dict[int, float]:
    """Each seed's largest value: {s: max{values[i] : seeds[i] = s}}, in increasing seed order.

    Claim C4 scores a run (one data seed) by the largest excess error of the tester-learner over
    the thresholds and noise models of that run, because the guarantee err <= opt + eps is made
    for every run; the claim is then decided on the Student-t interval of these per-seed values."""
    seeds = checks.array(seeds, "seeds", ndim=1, dtype=None)
    values = checks.array(values, "values", ndim=1)
    checks.same_shape("seeds", seeds, "values", values)
    if seeds.size == 0:
        raise checks.InputError("seeds and values must be non-empty")
    return {int(s): float(values[seeds == s].max()) for s in np.unique(seeds)}


# --- the studies of the notebooks --------------------------------------------------------------


def learner_study(
    cfg: TesterLearnerConfig,
    seed: int,
    tester: Any,
    noises: dict[str, Any],
    *,
    failures: Failures | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tester-learner (eq. `massart-tester-learner` of notebooks/05_testable_massart/index.md)
    beside L1 regression of each degree, the Chow halfspace and the constant, on Gaussian Massart
    problems, at the sizes of ``cfg`` (a :class:`~.config.TesterLearnerConfig`: ``n``,
    ``n_test``, ``d``, ``thresholds``, ``degrees``, ``eps``, ``solver``, ``seeds``).

    Repetition r of ``cfg.seeds`` draws from ``default_rng(seed + r)``; within it, for each noise
    model (in the dict's order) and threshold t, a training problem of n points and a test
    problem of ``n_test`` points for the same target. The tester-learner runs at the largest of
    ``degrees``. Returns ``(results, outcomes)``: results has one row per (seed, noise, t,
    learner) with gamma, the excess error on the test problem and opt (the tester-learner only
    where the tester accepted); outcomes one row per problem with the tester's verdict, the
    hypothesis kind (``which``) and the statistic. A problem on which an L1 fit fails with every
    LP of :func:`l1_regression` is left out of results, its outcome's ``which`` is "failed", and
    it is added to ``failures`` (a :class:`reprobook.core.Failures`) when one is given: one
    problem never stops the study.
    """
    n, n_test, d, eps, solver = cfg.n, cfg.n_test, cfg.d, cfg.eps, cfg.solver
    thresholds, degrees = cfg.thresholds, cfg.degrees
    seeds = checks.integer(cfg.seeds, "seeds", minimum=1)
    rows, outcomes = [], []
    for r in range(seeds):
        rng = np.random.default_rng(seed + r)
        for noise_name, noise in noises.items():
            for t in thresholds:
                train = massart_problem(n, d, t, noise, rng)
                test = massart_problem(n_test, d, t, noise, rng, w=train.w)
                learners: dict[str, Any] = {
                    f"L1 degree {k}": L1PolynomialRegression(k, solver=solver) for k in degrees
                }
                learners["Chow halfspace"] = ChowHalfspace()
                learners["constant"] = ConstantHypothesis()
                tl = TesterLearner(tester, degree=max(degrees), eps=eps, solver=solver)
                try:
                    fitted = [(name, h.fit(train.X, train.y)) for name, h in learners.items()]
                    # the tester-learner's polynomial is the L1 learner of its degree fitted on
                    # the same sample: reused, not fitted a second time
                    out = tl.run(train.X, train.y, polynomial=learners[f"L1 degree {max(degrees)}"])
                except RuntimeError as err:  # every L1 LP failed: counted, not scored
                    if failures is not None:
                        failures.add(f"seed {r}, {noise_name}, t = {t:g}", err)
                    statistic = float(tester.statistic(train.X))
                    accepted = bool(tester.accepts(train.X))
                    out = Outcome(accepted, statistic, math.nan, None, "failed")
                    fitted = []
                outcomes.append(
                    dict(
                        seed=r,
                        noise=noise_name,
                        t=t,
                        accepted=out.accepted,
                        which=out.which,
                        statistic=out.statistic,
                    )
                )
                if out.accepted and fitted:
                    fitted.append(("tester-learner", out.hypothesis))
                scored: dict[int, float] = {}  # a hypothesis listed twice is scored once
                for name, h in fitted:
                    if id(h) not in scored:
                        scored[id(h)] = excess_error(h, test)
                    rows.append(
                        dict(
                            seed=r,
                            noise=noise_name,
                            t=t,
                            gamma=train.gamma,
                            learner=name,
                            excess=scored[id(h)],
                            opt=test.opt,
                        )
                    )
    return pd.DataFrame(rows), pd.DataFrame(outcomes)


def soundness_study(
    cfg: TesterLearnerConfig,
    rng: np.random.Generator,
    tester: Any,
    noise: Any,
    *,
    t: float,
    degree: int,
    marginals=MARGINALS,
    failures: Failures | None = None,
) -> pd.DataFrame:
    """The tester-learner on Massart data whose marginal need not be Gaussian, at the sizes of
    ``cfg`` (a :class:`~.config.TesterLearnerConfig`: ``n``, ``n_test``, ``d``, ``eps``,
    ``solver``, ``soundness_reps``): for each marginal and repetition (drawn from ``rng`` in
    that order), a training and a test problem for threshold ``t``, the tester's verdict and
    statistic, and the excess error the degree-``degree`` L1 learner would have had had its
    output been trusted anyway. One row per run: marginal, accepted, statistic,
    excess_if_trusted (NaN where every LP of :func:`l1_regression` failed on the run; the run
    is then added to ``failures`` when one is given)."""
    n, n_test, d, eps, solver = cfg.n, cfg.n_test, cfg.d, cfg.eps, cfg.solver
    reps = checks.integer(cfg.soundness_reps, "soundness_reps", minimum=1)
    rows = []
    for name in marginals:
        for i in range(reps):
            train = massart_problem(n, d, t, noise, rng, marginal=name)
            test = massart_problem(n_test, d, t, noise, rng, marginal=name, w=train.w)
            try:
                # the learner whose output is scored "if trusted"; the tester-learner reuses it
                h = L1PolynomialRegression(degree, solver=solver).fit(train.X, train.y)
                out = TesterLearner(tester, degree=degree, eps=eps, solver=solver).run(
                    train.X, train.y, polynomial=h
                )
                accepted, statistic = out.accepted, out.statistic
                excess = excess_error(h, test)
            except RuntimeError as err:  # every L1 LP failed: the run's excess is unknown
                if failures is not None:
                    failures.add(f"soundness run {i} on {name}", err)
                accepted = bool(tester.accepts(train.X))
                statistic = float(tester.statistic(train.X))
                excess = math.nan
            rows.append(
                dict(
                    marginal=name,
                    accepted=accepted,
                    statistic=statistic,
                    excess_if_trusted=excess,
                )
            )
    return pd.DataFrame(rows)


def strictly_best(cells: pd.DataFrame, margin: float = 1e-4) -> dict[str, int]:
    """For each column (learner) of ``cells``: in how many rows it is below every other column
    by more than ``margin``."""
    margin = checks.real(margin, "margin", minimum=0)
    return {
        name: int((cells[name] < cells.drop(columns=name).min(axis=1) - margin).sum())
        for name in cells.columns
    }


def same_as(cells: pd.DataFrame, column: str, reference: str, tol: float = 1e-4) -> list[str]:
    """The rows (noise, t) where ``column`` is within ``tol`` of ``reference``, as
    "noise, t = ..." labels: where an L1 learner has collapsed to the constant."""
    tol = checks.real(tol, "tol", minimum=0)
    return [
        f"{noise}, t = {t:g}"
        for (noise, t), v in cells[column].items()
        if abs(v - cells.loc[(noise, t), reference]) < tol
    ]
