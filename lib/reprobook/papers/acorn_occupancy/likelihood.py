"""The CSOM site likelihood with reviewed and unreviewed units, its priors and its gradient.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only); model of Rhinehart
et al. (2022). Notation: f_y is the normal density N(mu_y, sigma_y^2), R_i the reviewed units of
site i (labels y_ik known), U_i the unreviewed ones. With logit psi_i = beta_0 + beta_1 x_i and
logit theta_ik = alpha_0 + alpha_1 w_ik (eq. `acorn-site-likelihood` of
notebooks/07_acorn_occupancy/index.md),

    L_i = psi_i     prod_{k in R_i} theta_ik^{y_ik} (1 - theta_ik)^{1 - y_ik} f_{y_ik}(s_ik)
                    prod_{k in U_i} [theta_ik f_1(s_ik) + (1 - theta_ik) f_0(s_ik)]
        + (1 - psi_i) 1[no k in R_i has y_ik = 1] prod_{all k} f_0(s_ik).          (L_i)

Everything is computed in log space: log L_i = logaddexp(A_i, B_i) with A_i the log of the first
term and B_i that of the second (B_i = -inf when a reviewed unit is positive).

Parameter vector (``PARAM_NAMES``, length 8), unconstrained:

    u = (beta_0, beta_1, alpha_0, alpha_1, mu_0, log sigma_0, log(mu_1 - mu_0), log sigma_1)

so sigma_0, sigma_1 > 0 and mu_1 = mu_0 + exp(u_6) > mu_0 (breaks label switching).

The core arithmetic (``_parts_xp`` for A_i and B_i, ``_log_prior_xp`` for the prior) is written
once over an array namespace ``xp``: the public functions here call it with NumPy, :mod:`.nuts`
with ``jax.numpy`` (jax is imported only there). Its log-sigmoids and logaddexp are written out
over ``xp`` too (``_log_sigmoids``, ``_logaddexp``), with one exponential and one logarithm per
value: SciPy's log_expit and NumPy's logaddexp call the C library value by value, and an
optimiser evaluates the likelihood thousands of times per fit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from reprobook.core import checks

from .simulate import Preset, Survey

__all__ = [
    "PARAM_NAMES",
    "N_PARAMS",
    "pack_params",
    "unpack_params",
    "true_params",
    "site_loglik",
    "loglik",
    "log_prior",
    "log_posterior",
    "grad_log_posterior",
    "site_occupancy_posterior",
    "unit_presence_probability",
    "mean_occupancy",
]

PARAM_NAMES: tuple[str, ...] = (
    "beta0",
    "beta1",
    "alpha0",
    "alpha1",
    "mu0",
    "log_sigma0",
    "log_dmu",
    "log_sigma1",
)
N_PARAMS = len(PARAM_NAMES)
PRIOR_SD_COEF = 2.0  # beta, alpha ~ N(0, 2^2)
PRIOR_SD_MU = 5.0  # mu_0, mu_1 ~ N(0, 5^2)
PRIOR_SD_SIGMA = 5.0  # sigma_0, sigma_1 ~ half-N(0, 5^2)
_LOG_2PI = float(np.log(2.0 * np.pi))


def pack_params(beta, alpha, mu0: float, sigma0: float, mu1: float, sigma1: float) -> np.ndarray:
    """The unconstrained vector u (layout in the module docstring) from natural parameters."""
    sigma0 = checks.real(sigma0, "sigma0", above=0)
    sigma1 = checks.real(sigma1, "sigma1", above=0)
    if not mu1 > mu0:
        raise checks.InputError(f"mu1 must exceed mu0, got mu0={mu0!r}, mu1={mu1!r}")
    return np.array(
        [
            beta[0],
            beta[1],
            alpha[0],
            alpha[1],
            mu0,
            np.log(sigma0),
            np.log(mu1 - mu0),
            np.log(sigma1),
        ],
        dtype=float,
    )


def unpack_params(params) -> dict[str, object]:
    """Natural parameters {beta (2,), alpha (2,), mu0, sigma0, mu1, sigma1} from u."""
    u = _check_params(params)
    return {
        "beta": u[0:2].copy(),
        "alpha": u[2:4].copy(),
        "mu0": float(u[4]),
        "sigma0": float(np.exp(u[5])),
        "mu1": float(u[4] + np.exp(u[6])),
        "sigma1": float(np.exp(u[7])),
    }


def true_params(preset: Preset) -> np.ndarray:
    """u of the parameters that generated ``preset`` (its t scale stands in for sigma0)."""
    return pack_params(
        preset.beta, preset.alpha, preset.mu0, preset.sigma0, preset.mu1, preset.sigma1
    )


# --- input checks ------------------------------------------------------------------------------


def _check_params(params) -> np.ndarray:
    """u (8,) in the order PARAM_NAMES, finite (a non-finite entry is named)."""
    u = checks.array(params, "params", shape=(N_PARAMS,), finite=False, what="(u)")
    if not np.all(np.isfinite(u)):
        bad = [PARAM_NAMES[j] for j in np.flatnonzero(~np.isfinite(u))]
        raise checks.InputError(f"params (u) must be finite; non-finite: {bad}")
    return u


def _check_draws(draws) -> np.ndarray:
    """A batch of parameter vectors (M, 8) in the order PARAM_NAMES, finite."""
    return checks.array(draws, "draws", shape=(None, N_PARAMS), what="(M, 8)")


def _check_data(survey: Survey, reviewed, labels) -> tuple[np.ndarray, np.ndarray]:
    """A survey's scores (N, K) and covariates, the reviewed mask (N, K) and the labels
    (integers 0/1 where reviewed; the others are ignored and returned as 0)."""
    if not isinstance(survey, Survey):
        raise TypeError(f"survey must be a Survey, got {type(survey).__name__}")
    s = checks.array(survey.s, "survey.s", ndim=2, what="(scores)")
    shape = s.shape
    checks.same_shape("survey.w", survey.w, "survey.s", s)
    checks.array(survey.x, "survey.x", shape=(shape[0],), what="(site covariate)")
    r = checks.array(reviewed, "reviewed", shape=shape, dtype=None)
    if r.dtype != bool:
        raise checks.InputError(f"reviewed must be a boolean mask, got dtype {r.dtype}")
    lab = checks.array(labels, "labels", shape=shape, dtype=None)
    if not (np.issubdtype(lab.dtype, np.integer) or lab.dtype == bool):
        raise checks.InputError(f"labels must be integers 0/1 (or bool), got dtype {lab.dtype}")
    lab = lab.astype(np.int64)
    bad = r & (lab != 0) & (lab != 1)
    if bad.any():
        i, k = np.argwhere(bad)[0]
        raise checks.InputError(
            f"labels of reviewed units must be 0 or 1; unit ({i}, {k}) has {lab[i, k]}"
        )
    # unreviewed labels are ignored
    return r, np.where(r, lab, 0)


def _log_normal(v, mean, sd: float):
    """log N(v; mean, sd^2), elementwise, for a NumPy or JAX array or a scalar v."""
    return -0.5 * ((v - mean) / sd) ** 2 - math.log(sd) - 0.5 * _LOG_2PI


def _log_normal_sum(xp, v, mean, sd):
    """sum_j log N(v_j; mean, sd^2) over an array namespace (the priors of this package)."""
    return xp.sum(_log_normal(v, mean, sd))


def mean_occupancy(beta0, beta1, x) -> np.ndarray:
    """psi_bar = (1/N) sum_i expit(beta0 + beta1 x_i), the mean occupancy probability of the
    surveyed sites; beta0 and beta1 may be arrays of draws (shape (...,)), giving shape (...,).
    Implements eq. `acorn-psi-bar` of notebooks/07_acorn_occupancy/index.md."""
    b0 = np.asarray(beta0, dtype=float)[..., None]
    b1 = np.asarray(beta1, dtype=float)[..., None]
    return expit(b0 + b1 * np.asarray(x, dtype=float)).mean(axis=-1)


# --- the likelihood ----------------------------------------------------------------------------


class _Data(NamedTuple):
    """A survey's arrays as :func:`_parts_xp` reads them (NumPy or JAX), with the masks that
    depend on the data only, made once per fit by :func:`_data_xp` rather than once per
    evaluation of the likelihood."""

    x: object  # (N,) site covariate
    w: object  # (N, K) unit covariate
    s: object  # (N, K) scores
    reviewed: object  # (N, K) bool: k in R_i
    labels: object  # (N, K) float: y_ik where reviewed, 0 elsewhere
    positive: object  # (N, K) bool: reviewed with y_ik = 1
    allowed: object  # (N,) bool: no reviewed positive at site i, the indicator of (L_i)


def _data_xp(xp, x, w, s, r, y) -> _Data:
    """:class:`_Data` from arrays of ``xp``: x (N,), w and s (N, K), the reviewed mask r (N, K)
    and the labels y (N, K) (0 wherever r is False)."""
    positive = r & (y == 1)
    return _Data(x, w, s, r, y, positive, ~xp.any(positive, axis=-1))


def _data(survey: Survey, r: np.ndarray, y: np.ndarray) -> _Data:
    """:class:`_Data` in NumPy from a survey and a mask and labels checked by ``_check_data``."""
    return _data_xp(np, survey.x, survey.w, survey.s, r, y.astype(float))


def _log1p_exp_neg_abs(v: np.ndarray) -> np.ndarray:
    """log(1 + e^{-|v|}) in [0, log 2] in NumPy, in place (one array instead of four: the
    draws' arrays of the acquisition are large). One exponential and one logarithm per value,
    vectorised: SciPy's log_expit and NumPy's logaddexp, which call the C library value by
    value, are several times slower on these arrays."""
    out = np.abs(v)
    out *= -1.0
    np.exp(out, out=out)
    return np.log1p(out, out=out)


def _log_sigmoids(xp, v):
    """(log expit(v), log expit(-v)) = (min(v, 0) - t, min(-v, 0) - t), t = log(1 + e^{-|v|}):
    the branches of SciPy's log_expit, with one t for the pair (one exponential and one
    logarithm per value, also in XLA, where they are the costly part of the NUTS gradient).

    In JAX every piece takes the branch of v >= 0, so that autodiff gives expit(-v) and
    -expit(v) at v = 0 too; NumPy computes the same values with minimum and abs (faster)."""
    if xp is np:
        t = _log1p_exp_neg_abs(v)
        return np.minimum(v, 0.0) - t, np.minimum(-v, 0.0) - t
    pos = v >= 0
    t = xp.log1p(xp.exp(xp.where(pos, -v, v)))
    return xp.where(pos, 0.0, v) - t, xp.where(pos, -v, 0.0) - t


def _logaddexp(xp, a, b):
    """log(e^a + e^b) = max(a, b) + log(1 + e^{-|a - b|}), with np.logaddexp's values at the
    extremes (a and b one infinity: that infinity; a nan: nan).

    In JAX every piece takes the branch of a >= b, so that autodiff gives 1/2 and 1/2 at a = b;
    NumPy computes the same values with maximum and abs (faster)."""
    with np.errstate(invalid="ignore", over="ignore"):  # NumPy: inf - inf
        d = a - b
    if xp is np:  # d = nan (one infinity) becomes inf: the max alone
        return np.maximum(a, b) + _log1p_exp_neg_abs(np.fmin(d, np.inf))
    ge = d >= 0
    out = xp.where(ge, a, b) + xp.log1p(xp.exp(xp.where(ge, -d, d)))
    return xp.where(xp.isinf(a) & (a == b), a, out)


def _parts_xp(xp, u, d: _Data):
    """The pieces of the site likelihood, log L_i = logaddexp(A_i, B_i), for NumPy or JAX.

    Implements eq. `acorn-site-likelihood` of notebooks/07_acorn_occupancy/index.md ((L_i)
    above), written once over an array namespace.

    ``xp`` is ``numpy`` or ``jax.numpy``, u (8,) or a batch of parameter vectors (..., 8) and
    ``d`` the survey's arrays (:class:`_Data`: float arrays of ``xp`` and the masks of the
    reviewed units). Returns A_i, B_i and the quantities the closed-form gradient needs, with
    the batch shape of u in front: (..., N) and (..., N, K).
    """

    def site(j):  # entry j of u, broadcasting against (N,)
        return u[..., j, None]  # the batch axes of u, then one axis for the sites

    def unit(j):  # entry j of u, broadcasting against (N, K)
        return u[..., j, None, None]  # the batch axes of u, then sites and units

    eta_psi = site(0) + site(1) * d.x  # logit psi_i = beta_0 + beta_1 x_i, (N,)
    eta_th = unit(2) + unit(3) * d.w  # logit theta_ik = alpha_0 + alpha_1 w_ik, (N, K)
    mu0, s0 = unit(4), xp.exp(unit(5))  # mu_0 and sigma_0 = exp(u_5)
    mu1, s1 = unit(4) + xp.exp(unit(6)), xp.exp(unit(7))  # mu_1 = mu_0 + exp(u_6) > mu_0
    e0 = (d.s - mu0) / s0  # standardised scores under y = 0, (N, K)
    e1 = (d.s - mu1) / s1  # and under y = 1
    lf0 = -0.5 * e0**2 - (unit(5) + 0.5 * _LOG_2PI)  # log f_0(s_ik), (N, K)
    lf1 = -0.5 * e1**2 - (unit(7) + 0.5 * _LOG_2PI)  # log f_1(s_ik)
    lth, l1mth = _log_sigmoids(xp, eta_th)  # log theta, log(1 - theta)
    a1 = lth + lf1  # log theta f_1(s): a unit with the species
    a0 = l1mth + lf0  # log (1 - theta) f_0(s): a unit without it, at an occupied site
    unrev = _logaddexp(xp, a1, a0)  # an unreviewed unit k in U_i: log of the mixture
    # reviewed units: their label's term; the others: the mixture
    unit_terms = xp.where(d.positive, a1, xp.where(d.reviewed, a0, unrev))
    lpsi, l1mpsi = _log_sigmoids(xp, eta_psi)  # log psi_i, log(1 - psi_i)
    A = lpsi + unit_terms.sum(axis=-1)  # A_i: log of the z_i = 1 term, (N,)
    # B_i: the z_i = 0 term, allowed when no reviewed unit of site i is positive
    B = xp.where(d.allowed, l1mpsi + lf0.sum(axis=-1), -xp.inf)
    return dict(  # A_i, B_i and what the closed-form gradient reuses
        eta_psi=eta_psi,
        lth=lth,
        e0=e0,
        e1=e1,
        a1=a1,
        unrev=unrev,
        A=A,
        B=B,
        mu1=mu1[..., 0, 0],
        s0=s0[..., 0, 0],
        s1=s1[..., 0, 0],
    )


def _parts(u: np.ndarray, survey: Survey, r: np.ndarray, y: np.ndarray):
    """The pieces of (L_i) in NumPy: A_i, B_i and the quantities the gradient needs."""
    return _parts_xp(np, u, _data(survey, r, y))


def site_loglik(params, survey: Survey, reviewed, labels) -> np.ndarray:
    """log L_i of equation (L_i) for every site, shape (N,): eq. `acorn-site-likelihood` of
    notebooks/07_acorn_occupancy/index.md.

    ``reviewed`` (N, K) bool marks the units in R_i; ``labels`` (N, K) int gives y_ik (0/1) for
    them (entries of unreviewed units are ignored).
    """
    u = _check_params(params)
    r, y = _check_data(survey, reviewed, labels)
    p = _parts(u, survey, r, y)
    return np.logaddexp(p["A"], p["B"])


def loglik(params, survey: Survey, reviewed, labels) -> float:
    """sum_i log L_i."""
    return float(site_loglik(params, survey, reviewed, labels).sum())


def site_occupancy_posterior(params, survey: Survey, reviewed, labels) -> np.ndarray:
    """P(z_i = 1 | s_i, reviewed labels, params) = A_i-term / L_i = exp(A_i - log L_i), shape
    (N,): the occupancy factor of eq. `acorn-posterior` of notebooks/07_acorn_occupancy/index.md.

    Equals 1 exactly at sites with a reviewed positive (B_i = -inf).
    """
    u = _check_params(params)
    r, y = _check_data(survey, reviewed, labels)
    p = _parts(u, survey, r, y)
    return np.exp(p["A"] - np.logaddexp(p["A"], p["B"]))


def unit_presence_probability(draws, survey: Survey, reviewed, labels) -> np.ndarray:
    """P(y_ik = 1 | data, u) for every unit and every parameter vector u in ``draws`` (M, 8):
    shape (M, N, K). Implements eq. `acorn-posterior` of notebooks/07_acorn_occupancy/index.md
    (equation (P) of :mod:`.acquisition`):

        P(y_ik = 1 | data, u) = P(z_i = 1 | data, u) pi_ik,
        pi_ik = theta f_1 / (theta f_1 + (1 - theta) f_0)

    for an unreviewed unit (given z_i = 1 the units of a site are independent), and y_ik for a
    reviewed one. Computed from the log odds of occupancy of :func:`_presence_parts` (the same
    values as the ratio exp(A_i - log L_i) pi_ik of (L_i), with fewer exponentials and
    logarithms).
    """
    u = _check_draws(draws)
    r, y = _check_data(survey, reviewed, labels)
    return _presence(u, survey.x, survey.w, survey.s, r, y)


def _expit(v: np.ndarray) -> np.ndarray:
    """expit(v) = 1 / (1 + e^{-v}), the formula of SciPy's expit, with NumPy's vectorised exp."""
    out = np.negative(v)
    with np.errstate(over="ignore"):  # e^{-v} = inf for v < -709: expit(v) = 0
        np.exp(out, out=out)
    out += 1.0
    return np.reciprocal(out, out=out)


def _softplus(v: np.ndarray) -> np.ndarray:
    """log(1 + e^v) = max(v, 0) + log(1 + e^{-|v|}), without overflow (np.logaddexp(0, v),
    vectorised)."""
    out = _log1p_exp_neg_abs(v)
    out += np.maximum(v, 0.0)
    return out


def _presence(
    u: np.ndarray, x: np.ndarray, w: np.ndarray, s: np.ndarray, r: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """(P) for draws u (M, 8) and a survey's x (N,), w, s (N, K), reviewed mask r and labels y
    (N, K), without input checks. Shape (M, N, K). See :func:`_presence_parts`."""
    pi, _, odds, positive = _presence_parts(u, x, w, s, r, y)
    return _combine(pi, odds, positive, r, y)


def _presence_parts(
    u: np.ndarray, x: np.ndarray, w: np.ndarray, s: np.ndarray, r: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of (P), without input checks: pi (M, N, K), log(1 + e^g) (M, N, K), the log
    odds of occupancy A_i - B_i (M, N) and whether a site has a reviewed positive (N,). With g_ik
    the logit of pi_ik,

        g_ik = logit theta_ik + log f_1(s_ik) - log f_0(s_ik)
             = logit theta_ik + (e0_ik^2 - e1_ik^2) / 2 + log sigma_0 - log sigma_1,

    with e_y = (s - mu_y) / sigma_y,

    the log odds of occupancy in (L_i) are, at a site with no reviewed positive,

        A_i - B_i = logit psi_i + sum_k log(1 - theta_ik) + sum_{k in U_i} log(1 + e^{g_ik})

    (a reviewed negative contributes (1 - theta) f_0 / f_0, an unreviewed unit
    [theta f_1 + (1 - theta) f_0] / f_0 = (1 - theta)(1 + e^g)), so P(z_i = 1 | data, u) =
    expit(A_i - B_i) there and 1 at a site with a reviewed positive. Reviewing unit k of site i
    and finding it empty subtracts log(1 + e^{g_ik}) from A_i - B_i, which is how the greedy
    batch of :mod:`.acquisition` updates a site after each believed label.
    """

    def unit(j):  # entry j of every draw, broadcasting against (N, K)
        return u[:, j, None, None]

    # (M, N, K) arrays of every draw, updated in place where a value is not needed again
    eta_th = unit(3) * w  # logit theta = alpha_0 + alpha_1 w
    eta_th += unit(2)
    e0 = s - unit(4)  # e_0 = (s - mu_0) / sigma_0
    e0 /= np.exp(unit(5))
    e1 = s - (unit(4) + np.exp(unit(6)))  # e_1 = (s - mu_1) / sigma_1
    e1 /= np.exp(unit(7))
    g = np.square(e0, out=e0)  # g = logit pi, in the array of e_0:
    g -= np.square(e1, out=e1)  # e_0^2 - e_1^2,
    g *= 0.5  # halved,
    g += eta_th  # plus logit theta,
    g += unit(5) - unit(7)  # plus log sigma_0 - log sigma_1
    sp = _softplus(g)
    odds = (
        (u[:, 0, None] + u[:, 1, None] * x)
        - _softplus(eta_th).sum(axis=-1)
        + np.where(r, 0.0, sp).sum(axis=-1)
    )
    return _expit(g), sp, odds, np.any(r & (y == 1), axis=-1)


def _combine(
    pi: np.ndarray, odds: np.ndarray, positive: np.ndarray, r: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """P(y_ik = 1 | data, u) from the pieces of :func:`_presence_parts`: y_ik where reviewed,
    else P(z_i = 1 | data, u) pi_ik."""
    rz = np.where(positive, 1.0, expit(odds))  # (M, N)
    return np.where(r, y, rz[..., None] * pi)


def log_prior(params) -> float:
    """log p(u): the priors on the natural scale plus the log-Jacobian of u -> natural.

        beta_j, alpha_j ~ N(0, 2^2);  mu_0, mu_1 ~ N(0, 5^2);  sigma_0, sigma_1 ~ half-N(0, 5^2),

    and, for sigma = exp(u_5), exp(u_7) and mu_1 = mu_0 + exp(u_6), the change of variables adds
    log|d(natural)/du| = u_5 + u_6 + u_7 (the map (mu_0, u_6) -> (mu_0, mu_1) has determinant
    exp(u_6)).
    """
    return float(_log_prior_xp(np, _check_params(params)))


def _log_prior_xp(xp, u):
    """The arithmetic of :func:`log_prior` over an array namespace (``numpy`` or ``jax.numpy``),
    entry by entry (no array to build or sum: a NumPy scalar formula runs fastest so); u must
    already be checked. Returns a scalar of ``xp``."""

    def lnorm(v, sd):
        return _log_normal(v, 0.0, sd)

    mu0, mu1 = u[4], u[4] + xp.exp(u[6])
    lp = lnorm(u[0], PRIOR_SD_COEF) + lnorm(u[1], PRIOR_SD_COEF)  # beta
    lp = lp + lnorm(u[2], PRIOR_SD_COEF) + lnorm(u[3], PRIOR_SD_COEF)  # alpha
    lp = lp + (lnorm(mu0, PRIOR_SD_MU) + lnorm(mu1, PRIOR_SD_MU))
    lp = lp + (
        (lnorm(xp.exp(u[5]), PRIOR_SD_SIGMA) + lnorm(xp.exp(u[7]), PRIOR_SD_SIGMA))
        + 2 * math.log(2.0)
    )  # half-normal
    lp = lp + (u[5] + u[6] + u[7])  # log-Jacobian
    return lp


def log_posterior(params, survey: Survey, reviewed, labels) -> float:
    """log p(u | data) up to a constant: loglik + log_prior (with the Jacobian terms), the log
    of the posterior of eq. `acorn-laplace` of notebooks/07_acorn_occupancy/index.md."""
    return loglik(params, survey, reviewed, labels) + log_prior(params)


def grad_log_posterior(params, survey: Survey, reviewed, labels) -> tuple[float, np.ndarray]:
    """(log_posterior, its gradient (8,)) in closed form.

    With r_i = P(z_i = 1 | data) and q_ik = P(y_ik = 1 | z_i = 1, data) (y_ik when reviewed,
    pi_ik = theta f_1 / (theta f_1 + (1 - theta) f_0) when not), the site score is

        d log L_i / d logit psi_i   = r_i - psi_i,
        d log L_i / d logit theta_ik = r_i (q_ik - theta_ik),
        d log L_i / d log f_1(s_ik)  = r_i q_ik =: W1_ik,   d / d log f_0(s_ik) = 1 - W1_ik,

    chained through d log f / d mu = (s - mu) / sigma^2 and d log f / d log sigma = e^2 - 1.
    """
    u = _check_params(params)
    r, y = _check_data(survey, reviewed, labels)
    return _value_and_grad(u, _data(survey, r, y))


def _value_and_grad(u: np.ndarray, d: _Data):
    """:func:`grad_log_posterior` without its input checks, for an optimiser that calls it
    thousands of times on data checked and prepared once (u finite (8,), ``d`` from
    :func:`_data`). The gradient of eq. `acorn-site-likelihood` plus the prior's."""
    p = _parts_xp(np, u, d)
    s0, s1, mu1 = p["s0"], p["s1"], p["mu1"]  # NumPy scalars: inf (not an error) on overflow
    e0, e1 = p["e0"], p["e1"]
    lse = np.logaddexp(p["A"], p["B"])  # log L_i, (N,)
    rz = np.exp(p["A"] - lse)  # r_i = P(z_i = 1 | data), (N,)
    psi = expit(p["eta_psi"])
    theta = np.exp(p["lth"])  # (N, K)
    pi = np.exp(p["a1"] - p["unrev"])
    q = np.where(d.reviewed, d.labels, pi)  # (N, K)
    W1 = rz[:, None] * q
    W0 = 1.0 - W1
    g = np.empty(N_PARAMS)
    d_psi = rz - psi
    g[0], g[1] = d_psi.sum(), (d_psi * d.x).sum()
    d_th = rz[:, None] * (q - theta)
    g[2] = d_th.sum()
    d_th *= d.w
    g[3] = d_th.sum()
    dmu0 = (W0 * e0).sum() / s0
    dmu1 = (W1 * e1).sum() / s1
    g[4] = dmu0 + dmu1
    g[5] = (W0 * (e0**2 - 1.0)).sum()
    g[6] = dmu1 * np.exp(u[6])
    g[7] = (W1 * (e1**2 - 1.0)).sum()
    # prior and Jacobian
    g[0:4] -= u[0:4] / PRIOR_SD_COEF**2
    g[4] -= (u[4] + mu1) / PRIOR_SD_MU**2
    g[6] += -mu1 / PRIOR_SD_MU**2 * np.exp(u[6]) + 1.0
    g[5] += -(s0**2) / PRIOR_SD_SIGMA**2 + 1.0
    g[7] += -(s1**2) / PRIOR_SD_SIGMA**2 + 1.0
    return float(lse.sum()) + float(_log_prior_xp(np, u)), g
