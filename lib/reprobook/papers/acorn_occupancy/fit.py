"""MAP fit of the CSOM with a Laplace approximation (the inference of the reduced profile).

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only); model of Rhinehart
et al. (2022). Maximises log p(u | data) of :mod:`.likelihood` over the unconstrained vector u
with L-BFGS-B and the closed-form gradient (with a fallback chain: trust-region Newton, other
starts, and a Newton polish that decides whether a mode was reached), then approximates (eq.
`acorn-laplace` of notebooks/07_acorn_occupancy/index.md)

    p(u | data) ~= N(u_hat, H^{-1}),    H = -d^2 log p(u | data) / du du^T at u_hat,

with H from central finite differences of the analytic gradient (symmetrised). Derived
quantities get delta-method standard errors (eq. `acorn-psi-bar`):

    psi_bar = (1/N) sum_i expit(beta_0 + beta_1 x_i),
    d psi_bar / d beta = mean_i psi_i (1 - psi_i) (1, x_i).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.special import expit

from reprobook.core import checks

from .likelihood import (
    PARAM_NAMES,
    _check_data,
    _check_params,
    _data,
    _value_and_grad,
    grad_log_posterior,
)
from .simulate import Survey

__all__ = [
    "LaplaceFit",
    "Fit",
    "FitError",
    "fit_map",
    "default_init",
    "laplace_hessian",
    "numerical_hessian",
    "map_with_laplace",
    "Attempt",
    "XTOL",
    "psi_bar_with_se",
]


class FitError(RuntimeError):
    """No attempt of the fallback chain reached a mode (a point where the Newton step is below
    XTOL and the Hessian of -log p is positive definite)."""


@dataclass(frozen=True, eq=False)
class LaplaceFit:
    """A MAP estimate with its Laplace approximation and the ecological summaries (the fields
    shared by the CSOM fit and the thresholded baselines)."""

    params: np.ndarray  # u_hat, layout given by ``names``
    cov: np.ndarray  # Laplace covariance H^{-1}
    se: np.ndarray  # sqrt(diag cov)
    log_post: float  # log p(u_hat | data) (up to a constant)
    converged: bool  # a mode was reached (a fit that reaches none raises FitError instead)
    n_iter: int  # iterations of the optimiser that reached it, plus the Newton polish's steps
    message: str  # which attempt of the fallback chain reached it, and the optimiser's message
    psi_bar: float  # mean occupancy probability over the surveyed sites
    psi_bar_se: float  # its delta-method standard error
    beta1: float  # habitat effect on logit psi
    beta1_se: float  # its Laplace standard error
    seconds: float  # wall time of optimisation + Hessian

    @property
    def names(self) -> tuple[str, ...]:
        raise NotImplementedError

    def named(self) -> dict[str, tuple[float, float]]:
        """{name: (estimate, se)} for the entries of u."""
        return {n: (float(v), float(s)) for n, v, s in zip(self.names, self.params, self.se)}


@dataclass(frozen=True, eq=False)
class Fit(LaplaceFit):
    """The CSOM's MAP estimate: u_hat (8,) in the layout PARAM_NAMES."""

    @property
    def names(self) -> tuple[str, ...]:
        return PARAM_NAMES


def default_init(survey: Survey) -> np.ndarray:
    """A data-driven start: mu_0, mu_1 at the 30% and 95% score quantiles, sigmas from the
    lower half's spread, coefficients at zero."""
    s = survey.s.ravel()
    lo, hi = np.quantile(s, [0.3, 0.95])
    if not hi > lo:
        hi = lo + 1.0
    sd = max(float(np.std(s[s <= np.median(s)])), 0.1)
    return np.array([0.0, 0.0, 0.0, 0.0, lo, np.log(sd), np.log(hi - lo), np.log(sd)])


def psi_bar_with_se(beta, cov_beta, x) -> tuple[float, float]:
    """The mean occupancy psi_bar and its delta-method standard error.

    Implements eq. `acorn-psi-bar` of notebooks/07_acorn_occupancy/index.md, from
    beta = (beta_0, beta_1), their (2, 2) covariance C and the site covariate x (N,):

        psi_bar = (1/N) sum_i psi_i,  psi_i = expit(beta_0 + beta_1 x_i),
        se = sqrt(g^T C g),           g = d psi_bar / d beta = mean_i psi_i (1 - psi_i) (1, x_i).

    Shared by the CSOM fit and the thresholded baselines (:mod:`.baselines`).
    """
    b = checks.array(beta, "beta", shape=(2,))  # (beta_0, beta_1)
    C = checks.array(cov_beta, "cov_beta", shape=(2, 2))  # C_beta, their Laplace covariance
    x = checks.array(x, "x", ndim=1, what="(site covariate)")  # x_1..x_N
    psi = expit(b[0] + b[1] * x)  # psi_i = expit(beta_0 + beta_1 x_i)
    g = np.array([np.mean(psi * (1 - psi)), np.mean(psi * (1 - psi) * x)])  # d psi_bar / d beta
    return float(psi.mean()), float(np.sqrt(g @ C @ g))  # psi_bar and sqrt(g^T C_beta g)


def numerical_hessian(grad, u, *, step: float = 1e-5) -> np.ndarray:
    """H = -d^2 log p / du du^T by central differences of the analytic gradient ``grad(u)``:
    H_j = -(g(u + h e_j) - g(u - h e_j)) / (2 h), h = step max(1, |u_j|), then (H + H^T) / 2."""
    u = np.asarray(u, dtype=float)
    m = u.shape[0]
    H = np.empty((m, m))
    for j in range(m):
        h = step * max(1.0, abs(u[j]))
        up, dn = u.copy(), u.copy()
        up[j] += h
        dn[j] -= h
        H[j] = -(grad(up) - grad(dn)) / (2 * h)
    return 0.5 * (H + H.T)


def laplace_hessian(params, survey: Survey, reviewed, labels, *, step: float = 1e-5) -> np.ndarray:
    """H = -Hessian of log p(u | data) of the CSOM (:func:`numerical_hessian`)."""
    u = _check_params(params)
    return numerical_hessian(
        lambda v: grad_log_posterior(v, survey, reviewed, labels)[1], u, step=step
    )


XTOL = 1e-7  # a point is the mode when its Newton step is at most this long (max over entries of u)
_ASCENT_SLACK = 1e-9  # a Newton step may lose this much log posterior (relative) to rounding
_KEEP_H = 1e-4  # after a Newton step shorter than this the Hessian is reused (it moves ~1e-4)
_SAME_BASIN = 1e-4  # an optimiser's end this close (max over u) to a mode found is that mode
_SAME_POINT = 1e-6  # two polished modes this close are one
_TIED_LP = 1e-9  # modes whose log p differ by less (relative) are tied


@dataclass(frozen=True)
class Attempt:
    """How the mode was reached: ``success`` (always True on return), ``nit`` (iterations of the
    optimiser that ended there, plus the Newton steps of the polish), ``message`` (which attempt
    of the chain succeeded, or every attempt's reason when none did)."""

    success: bool
    nit: int
    message: str


def _as_starts(starts) -> list[tuple[str, np.ndarray]]:
    """``starts`` as [(label, u0), ...]: a NumPy array is the single start "the given start";
    anything else must be a non-empty sequence of (label, u0) pairs."""
    if isinstance(starts, np.ndarray):
        return [("the given start", np.asarray(starts, dtype=float))]
    pairs = list(starts)
    if not pairs or not all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs
    ):
        raise checks.InputError(
            "starts must be one array of parameters or a non-empty list of (label, array) "
            f"pairs, got {type(starts).__name__} {starts!r:.80}"
        )
    return [(label, np.asarray(u0, dtype=float)) for label, u0 in pairs]


def _newton_polish(value_and_grad, u, *, xtol: float, max_steps: int = 20):
    """Newton's method on the log posterior from ``u``, the last link of every attempt.
    Implements eq. `acorn-newton-check` of notebooks/07_acorn_occupancy/index.md.

    Each step solves H d = g with H = -Hessian (:func:`numerical_hessian` of the exact
    gradient) by Cholesky and moves to u + d; the point is the mode when |d|_inf <= ``xtol``
    with H positive definite. After a step shorter than 1e-4 the same H is used again (it
    changes by about that much, and the steps still shrink fast); the Laplace covariance is
    the inverse of the last H computed, within 1e-4 of the mode. Near the mode Newton's
    method converges quadratically, so wherever an optimiser stopped within its tolerance of
    the mode the polish ends at the same point to rounding, whatever the optimiser's own flag
    said. Returns (u, H, log p(u), steps) or (None, reason) when H is not positive definite,
    a step does not ascend (beyond
    rounding) or the steps do not settle.
    """
    lp, g = value_and_grad(u)
    H = factor = None
    for steps in range(max_steps + 1):
        if not (np.isfinite(lp) and np.all(np.isfinite(g))):
            return None, "the log posterior or its gradient is not finite there"
        if factor is None:  # a new Hessian; kept after a step shorter than _KEEP_H
            H = numerical_hessian(lambda v: value_and_grad(v)[1], u)
            if not np.all(np.isfinite(H)):
                return None, "the Hessian there is not finite"
            try:
                factor = cho_factor(H, lower=True)
            except np.linalg.LinAlgError:
                ev = np.linalg.eigvalsh(H)
                return None, (
                    f"the Hessian there is not positive definite (smallest eigenvalue {ev[0]:.3g})"
                )
        d = cho_solve(factor, g)  # the Newton step H^{-1} g towards the mode
        if np.max(np.abs(d)) <= xtol:
            return u, H, float(lp), steps
        if steps == max_steps:
            break
        lp_new, g_new = value_and_grad(u + d)
        if not lp_new >= lp - _ASCENT_SLACK * max(1.0, abs(lp)):
            return None, f"a Newton step of length {np.max(np.abs(d)):.3g} did not ascend"
        if np.max(np.abs(d)) > _KEEP_H:
            factor = None  # far enough that the Hessian is computed again
        u, lp, g = u + d, lp_new, g_new
    return None, f"the Newton steps did not settle within {max_steps} steps"


def _optimise(value_and_grad, u0, method: str, gtol: float, ftol: float, maxiter: int):
    """One optimiser run minimising -log p from ``u0``: (end point, log p there, SciPy's
    result), or a reason (str) when the optimiser raised, ran out of iterations or ended where
    the log posterior is not finite. Its success flag is not trusted: the polish decides."""

    def fun(u):
        lp, g = value_and_grad(u)
        return -lp, -g

    def hess(u):  # the Hessian of -log p, from the exact gradient
        return numerical_hessian(lambda v: value_and_grad(v)[1], u)

    if method == "L-BFGS-B":
        extra, options = {}, {"gtol": gtol, "ftol": ftol, "maxiter": maxiter, "maxcor": 20}
    else:  # trust-exact: Newton steps in a trust region, a ridge where H is indefinite
        extra, options = {"hess": hess}, {"gtol": min(gtol, 1e-8), "maxiter": maxiter}
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failed run is judged by the polish
            res = minimize(fun, u0, jac=True, method=method, options=options, **extra)
    except (ValueError, np.linalg.LinAlgError) as err:
        return f"{type(err).__name__}: {err}"
    if not res.success and res.nit >= maxiter:
        return f"did not converge after {res.nit} iterations: {res.message}"
    end = np.asarray(res.x, dtype=float)
    if not (np.all(np.isfinite(end)) and np.isfinite(res.fun)):
        return f"ended where the log posterior is not finite ({res.message})"
    return end, float(-res.fun), res


def map_with_laplace(value_and_grad, starts, *, gtol: float, ftol: float, maxiter: int):
    """Maximise a log posterior given ``value_and_grad(u) -> (log p, gradient)``, then the
    Laplace covariance H^{-1} at the mode (eq. `acorn-laplace` of
    notebooks/07_acorn_occupancy/index.md). Returns (u_hat, cov, log p(u_hat), Attempt).

    Whether L-BFGS-B reports success near a flat optimum depends on the last bits of its line
    search, and so on the BLAS and SIMD kernels of the machine: the same survey converged on one
    CPU and ended in "ABNORMAL" on another. So no optimiser's own flag decides. The chain:

    1. from every start in ``starts`` (an array, or [(label, u0), ...]: the warm start and the
       default one), L-BFGS-B with the exact gradient (``gtol``, ``ftol``, ``maxiter``);
    2. the Newton polish of :func:`_newton_polish` from where it stopped: a mode when the
       Newton step is at most XTOL with H positive definite (an end within 1e-4 of a mode
       already found is that mode, and is not polished again);
    3. where L-BFGS-B itself fails (an iteration limit, an error) or the polish fails,
       trust-region Newton (SciPy's "trust-exact", which adds a ridge to a Hessian that is
       not positive definite) from that point, then the polish again.

    Of the modes reached, the one with the highest log posterior is returned; modes whose log
    posteriors differ by less than 1e-9 (relative) are tied, and the earliest start's wins,
    so that no machine's rounding chooses between them.

    The posterior can have several modes (with no reviews on bioacoustic surveys, one with no
    occupied site, and one that reads the score mixture the other way round), so every start
    runs: a warm start kept alone would follow a local mode from round to round. Raises
    FitError naming every attempt's reason when no attempt reaches a mode.
    """

    reasons: list[str] = []
    modes: list[tuple] = []  # (log p, u, H, message, iterations), in the order of the starts
    for label, u0 in _as_starts(starts):
        _reach_mode(value_and_grad, label, u0, (gtol, ftol, maxiter), modes, reasons)
    if not modes:
        raise FitError("the MAP fit did not converge: " + "; ".join(reasons))
    top = max(m[0] for m in modes)
    # modes whose log p is within rounding of the top count as tied: the earliest start's wins,
    # so that the choice between them does not depend on the machine
    tied = [m for m in modes if m[0] >= top - _TIED_LP * max(1.0, abs(top))]
    lp, u, H, message, nit = tied[0]
    others = [m for m in tied[1:] if np.max(np.abs(m[1] - u)) > _SAME_POINT]
    if others:
        message += f" (tied to rounding with {len(others)} other mode(s); the first start's kept)"
    Linv = np.linalg.inv(np.linalg.cholesky(H))
    return u, Linv.T @ Linv, lp, Attempt(True, nit, message)


def _reach_mode(value_and_grad, label, u0, tolerances, modes: list, reasons: list) -> None:
    """One start's chain (L-BFGS-B, the polish, trust-region Newton, the polish), appending
    the mode it reaches to ``modes`` (unless it is one already there) or its reasons to
    ``reasons``."""
    gtol, ftol, maxiter = tolerances
    point, where = u0, label
    for method, name in (("L-BFGS-B", "L-BFGS-B"), ("trust-exact", "trust-region Newton")):
        out = _optimise(value_and_grad, point, method, gtol, ftol, maxiter)
        if isinstance(out, str):  # the run itself failed: the next method starts where it did
            reasons.append(f"{name} from {where}: {out}")
            continue
        end, _, res = out
        if any(np.max(np.abs(end - m[1])) <= _SAME_BASIN for m in modes):
            return  # the end of a run that reached a known mode: that mode, polished already
        with np.errstate(all="ignore"):
            got = _newton_polish(value_and_grad, end, xtol=XTOL)
        if got[0] is not None:
            u, H, lp, steps = got
            if not any(np.max(np.abs(u - m[1])) <= _SAME_POINT for m in modes):
                polish = f", then {steps} Newton step{'s' * (steps != 1)}" if steps else ""
                message = f"{name} from {where} ({res.message}){polish}"
                modes.append((lp, u, H, message, int(res.nit) + steps))
            return
        reasons.append(f"{name} from {where} ({res.message}): {got[1]}")
        point, where = end, f"where L-BFGS-B from {label} stopped"


def fit_map(
    survey: Survey,
    reviewed,
    labels,
    *,
    init=None,
    gtol: float = 1e-6,
    ftol: float = 1e-13,
    maxiter: int = 1000,
) -> Fit:
    """Maximise log p(u | data) (L-BFGS-B, analytic gradient) and add the Laplace approximation.

    Implements eq. `acorn-laplace` of notebooks/07_acorn_occupancy/index.md for the likelihood
    of eq. `acorn-site-likelihood`.

    The starts are ``init`` (a warm start, the previous round's mode in the review loop) when
    given, and the data-driven :func:`default_init`; both go through the fallback chain of
    :func:`map_with_laplace` (L-BFGS-B from each, a Newton polish that decides, trust-region
    Newton where it fails), which returns the highest mode reached. So whether a fit succeeds
    does not hang on the rounding of one optimiser's line search, and a warm start cannot hold
    the loop on a lower mode.
    ``ftol`` is tight (the default 2e-9 stops early enough to move beta1 by ~1e-3 between warm
    and cold starts); the polish then brings every start to the same mode to about XTOL.
    Raises FitError, naming every attempt's reason, when no attempt reaches a mode.
    """
    reviewed, labels_c = _check_data(survey, reviewed, labels)
    starts = [("the default start", default_init(survey))]
    if init is not None:
        starts.insert(0, ("the warm start", _check_params(init)))
    data = _data(survey, reviewed, labels_c)  # checked above; its masks made once per fit
    t0 = time.perf_counter()
    u, cov, log_post, res = map_with_laplace(
        lambda v: _value_and_grad(v, data),
        starts,
        gtol=gtol,
        ftol=ftol,
        maxiter=maxiter,
    )
    seconds = time.perf_counter() - t0
    se = np.sqrt(np.diag(cov))
    psi_bar, psi_bar_se = psi_bar_with_se(u[:2], cov[:2, :2], survey.x)
    return Fit(
        params=u,
        cov=cov,
        se=se,
        log_post=log_post,
        converged=bool(res.success),
        n_iter=int(res.nit),
        message=str(res.message),
        psi_bar=psi_bar,
        psi_bar_se=psi_bar_se,
        beta1=float(u[1]),
        beta1_se=float(se[1]),
        seconds=seconds,
    )
