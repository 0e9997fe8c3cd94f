"""Model baselines that threshold the classifier scores: standard and Royle–Link occupancy.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only). The model baselines
of our reconstruction turn the logit scores s_ik into binary
detections at a probability threshold t,

    d_ik = 1[s_ik > logit t],                                                        (T)

and fit a binary-detection occupancy model. The false-positive model is that of Royle & Link
(2006), "Generalized site occupancy models allowing for false positive and false negative
errors", Ecology 87:835–841, used here as a baseline; the standard single-season model is its
special case p10 = 0 (eq. `acorn-royle-link` of notebooks/07_acorn_occupancy/index.md). With
logit psi_i = beta_0 + beta_1 x_i and logit p11_ik = alpha_0 + alpha_1 w_ik,

    L_i = psi_i       prod_k p11_ik^{d_ik} (1 - p11_ik)^{1 - d_ik}
        + (1 - psi_i) prod_k p10^{d_ik}    (1 - p10)^{1 - d_ik},                     (RL)

with one constant false-positive probability p10 (Royle–Link), or p10 = 0 (standard), where the
second term becomes (1 - psi_i) 1[d_ik = 0 for every k].                             (STD)

Everything is computed in log space, log L_i = logaddexp(A_i, B_i), vectorised over sites.

Parameter vectors (unconstrained): standard u = (beta_0, beta_1, alpha_0, alpha_1)
(``BINARY_PARAM_NAMES``); Royle–Link adds logit p10 as a fifth entry (``RL_PARAM_NAMES``).
Priors: beta_j, alpha_j ~ N(0, 2^2) as in the CSOM (:data:`.likelihood.PRIOR_SD_COEF`), and
logit p10 ~ N(-3, 2^2) (ASSUMED: centred on p10 ~ 0.05, weakly informative).

Under (RL) the labels z and (p11, p10) can swap; the fit starts at p10 = 0.02 (lower if the
data-driven start of p11 is lower) so that it finds the solution with p11 > p10, and flags
``label_switched`` when the mode has mean p11 <= p10.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import expit, log_expit, logit

from reprobook.core import checks

from .fit import LaplaceFit, map_with_laplace, numerical_hessian, psi_bar_with_se
from .likelihood import PRIOR_SD_COEF, _log_normal_sum
from .simulate import Survey

__all__ = [
    "BINARY_PARAM_NAMES",
    "RL_PARAM_NAMES",
    "PRIOR_MEAN_LOGIT_P10",
    "PRIOR_SD_LOGIT_P10",
    "BinaryFit",
    "threshold_detections",
    "binary_site_loglik",
    "binary_loglik",
    "binary_log_prior",
    "binary_log_posterior",
    "grad_binary_log_posterior",
    "binary_laplace_hessian",
    "binary_default_init",
    "fit_binary_occupancy",
]

BINARY_PARAM_NAMES: tuple[str, ...] = ("beta0", "beta1", "alpha0", "alpha1")
RL_PARAM_NAMES: tuple[str, ...] = BINARY_PARAM_NAMES + ("logit_p10",)
PRIOR_MEAN_LOGIT_P10 = -3.0  # logit p10 ~ N(-3, 2^2), ASSUMED
PRIOR_SD_LOGIT_P10 = 2.0
INIT_P10 = 0.02  # start of p10 in the Royle–Link fit (picks the p11 > p10 mode)


@dataclass(frozen=True, eq=False)
class BinaryFit(LaplaceFit):
    """A MAP estimate of the standard or Royle–Link occupancy model with its Laplace approximation
    (u_hat (4,) or (5,), layout BINARY_PARAM_NAMES or RL_PARAM_NAMES)."""

    false_positive: bool  # True: Royle–Link (RL); False: standard (STD)
    p10: float | None  # false-positive probability expit(u_4); None for the standard model
    label_switched: (
        bool  # Royle–Link mode with mean p11 <= p10 (always False for the standard model)
    )

    @property
    def names(self) -> tuple[str, ...]:
        return RL_PARAM_NAMES if self.false_positive else BINARY_PARAM_NAMES


# --- thresholding ------------------------------------------------------------------------------


def threshold_detections(survey: Survey, threshold: float) -> np.ndarray:
    """Binary detections of equation (T), d_ik = 1[s_ik > logit(threshold)], int64 (N, K): the
    detections of eq. `acorn-royle-link` of notebooks/07_acorn_occupancy/index.md.

    ``threshold`` is a probability in (0, 1) (the chapter uses 0.5, 0.8 and 0.95); the scores
    ``survey.s`` are on the logit scale.
    """
    if not isinstance(survey, Survey):
        raise TypeError(f"survey must be a Survey, got {type(survey).__name__}")
    # a probability, compared with the scores on the logit scale
    t = checks.probability(threshold, "threshold", open_low=True, open_high=True)
    s = checks.array(survey.s, "survey.s", ndim=2, what="(scores)")
    return (s > logit(t)).astype(np.int64)


# --- input checks ------------------------------------------------------------------------------


def _names(false_positive: bool) -> tuple[str, ...]:
    return RL_PARAM_NAMES if false_positive else BINARY_PARAM_NAMES


def _check_params(params, false_positive: bool) -> np.ndarray:
    """u (4,) for the standard model or (5,) for Royle–Link, finite (a non-finite entry is
    named)."""
    names = _names(false_positive)
    model = "Royle–Link" if false_positive else "standard"
    what = f"(u of the {model} model, in the order {names})"
    u = checks.array(params, "params", shape=(len(names),), finite=False, what=what)
    if not np.all(np.isfinite(u)):
        bad = [names[j] for j in np.flatnonzero(~np.isfinite(u))]
        raise checks.InputError(f"params must be finite; non-finite: {bad}")
    return u


def _check_binary(d, x, w) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """d (N, K) int/bool with values 0/1, x (N,) finite, w (N, K) finite."""
    x = checks.array(x, "x", ndim=1, what="(site covariate)")
    n = x.shape[0]
    if n < 1:
        raise checks.InputError("x (site covariate) must have at least one site")
    w = checks.array(w, "w", shape=(n, None), what="(unit covariate)")
    d = checks.array(d, "d", shape=w.shape, dtype=None, what="(detections)")
    if not (np.issubdtype(d.dtype, np.integer) or d.dtype == bool):
        raise checks.InputError(
            f"d (detections) must be integers 0/1 (or bool), got dtype {d.dtype}; "
            "threshold_detections() makes them from scores"
        )
    d = d.astype(np.int64)
    bad = (d != 0) & (d != 1)
    if bad.any():
        i, k = np.argwhere(bad)[0]
        raise checks.InputError(f"d (detections) must be 0 or 1; unit ({i}, {k}) has {d[i, k]}")
    return d, x, w


# --- the likelihood ----------------------------------------------------------------------------


class _BinaryData(NamedTuple):
    """Detections and covariates as :func:`_parts` reads them, with what depends on the data
    only, made once per fit by :func:`_binary_data` rather than once per evaluation."""

    d: np.ndarray  # (N, K) int64 detections d_ik
    x: np.ndarray  # (N,) site covariate
    w: np.ndarray  # (N, K) unit covariate
    sign: np.ndarray  # (N, K) float: +1 where d_ik = 1, -1 where d_ik = 0
    n_det: np.ndarray  # (N,) detections per site, n_i = sum_k d_ik


def _binary_data(d: np.ndarray, x: np.ndarray, w: np.ndarray) -> _BinaryData:
    """:class:`_BinaryData` from arrays checked by :func:`_check_binary`."""
    return _BinaryData(d, x, w, np.where(d == 1, 1.0, -1.0), d.sum(axis=1))


def _parts(u: np.ndarray, data: _BinaryData, false_positive: bool):
    """A_i = log of the z = 1 term of (RL)/(STD), B_i = log of the z = 0 term, and helpers.

    The unit terms log p11^{d} (1 - p11)^{1 - d} are log_expit(+-logit p11), one log_expit of
    sign_ik logit p11_ik (the sign flip is exact), so each unit's logarithm is taken once."""
    eta_psi = u[0] + u[1] * data.x  # (N,)
    eta_p = u[2] + u[3] * data.w  # (N, K)
    n_det = data.n_det  # (N,)
    k = data.d.shape[1]
    A = log_expit(eta_psi) + log_expit(data.sign * eta_p).sum(axis=1)
    if false_positive:
        B = log_expit(-eta_psi) + n_det * log_expit(u[4]) + (k - n_det) * log_expit(-u[4])
    else:
        B = np.where(n_det == 0, log_expit(-eta_psi), -np.inf)
    return dict(eta_psi=eta_psi, eta_p=eta_p, n_det=n_det, A=A, B=B)


def binary_site_loglik(params, d, x, w, *, false_positive: bool = False) -> np.ndarray:
    """log L_i for every site, shape (N,): equation (RL) of Royle & Link (2006), eq.
    `acorn-royle-link` of notebooks/07_acorn_occupancy/index.md, when
    ``false_positive`` (params (5,), last entry logit p10), else its p10 = 0 case (STD)
    (params (4,)). ``d`` (N, K) binary detections, ``x`` (N,) and ``w`` (N, K) covariates."""
    u = _check_params(params, false_positive)
    p = _parts(u, _binary_data(*_check_binary(d, x, w)), false_positive)
    return np.logaddexp(p["A"], p["B"])


def binary_loglik(params, d, x, w, *, false_positive: bool = False) -> float:
    """sum_i log L_i of (RL) / (STD)."""
    return float(binary_site_loglik(params, d, x, w, false_positive=false_positive).sum())


def binary_log_prior(params, *, false_positive: bool = False) -> float:
    """log p(u): beta_j, alpha_j ~ N(0, 2^2); with ``false_positive`` also logit p10 ~ N(-3, 2^2)
    (ASSUMED). All on the unconstrained scale, so there is no Jacobian."""
    return _binary_log_prior(_check_params(params, false_positive), false_positive)


def _binary_log_prior(u: np.ndarray, false_positive: bool) -> float:
    """:func:`binary_log_prior` of a checked u."""
    lp = float(_log_normal_sum(np, u[0:4], 0.0, PRIOR_SD_COEF))
    if false_positive:
        lp += float(_log_normal_sum(np, u[4:5], PRIOR_MEAN_LOGIT_P10, PRIOR_SD_LOGIT_P10))
    return lp


def binary_log_posterior(params, d, x, w, *, false_positive: bool = False) -> float:
    """log p(u | d) up to a constant: binary_loglik + binary_log_prior."""
    return binary_loglik(params, d, x, w, false_positive=false_positive) + binary_log_prior(
        params, false_positive=false_positive
    )


def grad_binary_log_posterior(
    params, d, x, w, *, false_positive: bool = False
) -> tuple[float, np.ndarray]:
    """(binary_log_posterior, its gradient (4,) or (5,)) in closed form.

    With r_i = P(z_i = 1 | d_i) = exp(A_i - log L_i), the site score of (RL) / (STD) is

        d log L_i / d logit psi_i    = r_i - psi_i,
        d log L_i / d logit p11_ik   = r_i (d_ik - p11_ik),
        d log L_i / d logit p10      = (1 - r_i) (n_i - K p10),     n_i = sum_k d_ik (RL only),

    plus the prior terms -u_j / 2^2 and -(logit p10 + 3) / 2^2.
    """
    u = _check_params(params, false_positive)
    return _binary_value_and_grad(u, _binary_data(*_check_binary(d, x, w)), false_positive)


def _binary_value_and_grad(u: np.ndarray, data: _BinaryData, false_positive: bool):
    """:func:`grad_binary_log_posterior` of a checked u on data prepared once by
    :func:`_binary_data` (an optimiser calls it many times per fit): the closed-form gradient
    of eq. `acorn-royle-link` plus the prior's."""
    d, x, w = data.d, data.x, data.w
    p = _parts(u, data, false_positive)
    lse = np.logaddexp(p["A"], p["B"])
    rz = np.exp(p["A"] - lse)  # (N,)
    g = np.empty(u.shape[0])
    d_psi = rz - expit(p["eta_psi"])
    g[0], g[1] = d_psi.sum(), (d_psi * x).sum()
    d_p = rz[:, None] * (d - expit(p["eta_p"]))
    g[2], g[3] = d_p.sum(), (d_p * w).sum()
    g[0:4] -= u[0:4] / PRIOR_SD_COEF**2
    if false_positive:
        g[4] = ((1.0 - rz) * (p["n_det"] - d.shape[1] * expit(u[4]))).sum()
        g[4] -= (u[4] - PRIOR_MEAN_LOGIT_P10) / PRIOR_SD_LOGIT_P10**2
    lp = float(lse.sum()) + _binary_log_prior(u, false_positive)
    return lp, g


def binary_laplace_hessian(
    params, d, x, w, *, false_positive: bool = False, step: float = 1e-5
) -> np.ndarray:
    """H = -Hessian of log p(u | d) by central differences of the analytic gradient
    (:func:`.fit.numerical_hessian`)."""
    u = _check_params(params, false_positive)
    data = _binary_data(*_check_binary(d, x, w))
    return numerical_hessian(
        lambda v: _binary_value_and_grad(_check_params(v, false_positive), data, false_positive)[1],
        u,
        step=step,
    )


# --- the fit -----------------------------------------------------------------------------------


def binary_default_init(d, *, false_positive: bool = False) -> np.ndarray:
    """A data-driven start: logit psi at the fraction of sites with a detection (clipped to
    [0.05, 0.95]), logit p11 at the detection rate of those sites (clipped to [0.001, 0.9]),
    slopes zero and, for Royle–Link, p10 = min(0.02, p11_0 / 4) so the start has p11 > p10.

    A start at p11 = 0.5 instead sends the Royle–Link fit of sparse detections (the
    bioacoustic preset) to the degenerate mode psi -> 0 with every detection a false positive.
    """
    d = checks.array(d, "d", ndim=2, dtype=None, what="(detections)")
    site = d.any(axis=1)
    p11 = float(np.clip(d[site].mean(), 1e-3, 0.9)) if site.any() else 1e-3
    psi = float(np.clip(site.mean(), 0.05, 0.95))
    u0 = [logit(psi), 0.0, logit(p11), 0.0]
    if false_positive:
        u0.append(logit(min(INIT_P10, p11 / 4)))
    return np.array(u0, dtype=float)


def fit_binary_occupancy(
    d,
    x,
    w,
    *,
    false_positive: bool = False,
    init=None,
    gtol: float = 1e-6,
    ftol: float = 1e-13,
    maxiter: int = 1000,
) -> BinaryFit:
    """MAP of the standard (STD) or Royle–Link (RL) occupancy model (Royle & Link 2006, Ecology
    87:835–841; a baseline here) on binary detections ``d``, by L-BFGS-B with the analytic
    gradient, plus the Laplace approximation N(u_hat, H^{-1}) and the delta-method se of psi_bar.

    The default start (:func:`binary_default_init`) puts p11 at the detection rate of sites
    with a detection and, for Royle–Link, p10 at 0.02 or below, so that the mode with
    p11 > p10 is found; a mode with mean_ik p11_ik <= p10 sets ``label_switched``. The
    Royle–Link posterior can be multimodal when detections are rare or p11 and p10 are close
    (a label-switched mode, and a degenerate one with psi -> 0 and every detection false);
    the fit returns the mode it reaches from the start.
    A survey with no detections at all leaves alpha (and p10) identified by the prior only;
    the posterior stays proper. The optimisation goes through the fallback chain of
    :func:`.fit.map_with_laplace` from this one start; raises FitError, naming every attempt's
    reason, when no attempt reaches a mode.
    """
    false_positive = checks.boolean(false_positive, "false_positive")  # True: Royle–Link
    d, x, w = _check_binary(d, x, w)
    if init is None:
        start = ("the default start", binary_default_init(d, false_positive=false_positive))
    else:
        start = ("the given start", _check_params(init, false_positive))
    data = _binary_data(d, x, w)  # checked above; made once per fit
    t0 = time.perf_counter()
    u, cov, log_post, res = map_with_laplace(
        lambda v: _binary_value_and_grad(_check_params(v, false_positive), data, false_positive),
        [start],
        gtol=gtol,
        ftol=ftol,
        maxiter=maxiter,
    )
    seconds = time.perf_counter() - t0
    se = np.sqrt(np.diag(cov))
    psi_bar, psi_bar_se = psi_bar_with_se(u[:2], cov[:2, :2], x)
    p10 = float(expit(u[4])) if false_positive else None
    label_switched = bool(false_positive and float(np.mean(expit(u[2] + u[3] * w))) <= p10)
    return BinaryFit(
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
        false_positive=false_positive,
        p10=p10,
        label_switched=label_switched,
        seconds=seconds,
    )
