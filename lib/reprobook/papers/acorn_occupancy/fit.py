"""MAP fit of the CSOM with a Laplace approximation (the inference of the reduced profile).

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only); model of Rhinehart
et al. (2022). Maximises log p(u | data) of :mod:`.likelihood` over the unconstrained vector u
with L-BFGS-B and the closed-form gradient, then approximates (eq. `acorn-laplace` of
notebooks/07_acorn_occupancy/index.md)

    p(u | data) ~= N(u_hat, H^{-1}),    H = -d^2 log p(u | data) / du du^T at u_hat,

with H from central finite differences of the analytic gradient (symmetrised). Derived
quantities get delta-method standard errors (eq. `acorn-psi-bar`):

    psi_bar = (1/N) sum_i expit(beta_0 + beta_1 x_i),
    d psi_bar / d beta = mean_i psi_i (1 - psi_i) (1, x_i).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from reprobook.core import checks

from .likelihood import PARAM_NAMES, _check_data, _check_params, grad_log_posterior
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
    "psi_bar_with_se",
]


class FitError(RuntimeError):
    """The optimiser did not converge, or the Hessian at the mode is not positive definite."""


@dataclass(frozen=True, eq=False)
class LaplaceFit:
    """A MAP estimate with its Laplace approximation and the ecological summaries (the fields
    shared by the CSOM fit and the thresholded baselines)."""

    params: np.ndarray  # u_hat, layout given by ``names``
    cov: np.ndarray  # Laplace covariance H^{-1}
    se: np.ndarray  # sqrt(diag cov)
    log_post: float  # log p(u_hat | data) (up to a constant)
    converged: bool  # L-BFGS-B success flag
    n_iter: int  # optimiser iterations
    message: str  # optimiser message
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


def map_with_laplace(value_and_grad, u0, *, gtol: float, ftol: float, maxiter: int):
    """Maximise a log posterior given ``value_and_grad(u) -> (log p, gradient)`` by L-BFGS-B,
    then the Laplace covariance H^{-1} at the mode (eq. `acorn-laplace` of
    notebooks/07_acorn_occupancy/index.md). Returns (u_hat, cov, log p(u_hat), the
    optimiser's result). Raises FitError when L-BFGS-B fails or H is not positive definite."""

    def fun(u):
        lp, g = value_and_grad(u)
        return -lp, -g

    res = minimize(
        fun,
        u0,
        jac=True,
        method="L-BFGS-B",
        options={"gtol": gtol, "ftol": ftol, "maxiter": maxiter, "maxcor": 20},
    )
    if not res.success:
        raise FitError(f"L-BFGS-B did not converge after {res.nit} iterations: {res.message}")
    u = np.asarray(res.x, dtype=float)
    H = numerical_hessian(lambda v: value_and_grad(v)[1], u)
    try:
        L = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        ev = np.linalg.eigvalsh(H)
        raise FitError(
            f"Hessian at the mode is not positive definite (smallest eigenvalue {ev[0]:.3g}); "
            "the mode may be a saddle or the model unidentified"
        ) from None
    Linv = np.linalg.inv(L)
    return u, Linv.T @ Linv, float(-res.fun), res


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

    ``ftol`` is tight (the default 2e-9 stops early enough to move beta1 by ~1e-3 between warm and
    cold starts). Raises FitError when L-BFGS-B reports failure or H is not positive definite.
    """
    reviewed, labels_c = _check_data(survey, reviewed, labels)
    u0 = default_init(survey) if init is None else _check_params(init)
    t0 = time.perf_counter()
    u, cov, log_post, res = map_with_laplace(
        lambda v: grad_log_posterior(v, survey, reviewed, labels_c),
        u0,
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
