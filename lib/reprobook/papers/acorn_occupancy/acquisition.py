"""Which units an expert should review: ACORN's expected variance reduction and the baselines.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (NeurIPS 2026). Only the abstract is
known: ACORN "strategically selects samples for expert review that are maximally informative for
downstream ecological analysis". The acquisition below is our reconstruction (ASSUMED: the
abstract gives no formula): the expected reduction of the posterior variance of an ecological
target tau when one unit's label is revealed (eqs. `acorn-evr` and `acorn-evr-draws` of
notebooks/07_acorn_occupancy/index.md),

    EVR(i, k) = Var(tau | D) - sum_{y in {0, 1}} p(y_ik = y | D) Var(tau | D, y_ik = y).     (EVR)

It is computed from weighted posterior draws u_m (weights w_m; draws from the Laplace
approximation in the reduced profile, from NUTS if one wants). For draw m the unit's predictive
probability of presence is

    p_m = P(y_ik = 1 | D, u_m) = P(z_i = 1 | D, u_m) pi_ik,m,
    pi_ik,m = theta f_1(s) / (theta f_1(s) + (1 - theta) f_0(s)),                             (P)

and conditioning on y_ik = y re-weights the draws by p_m (y = 1) or 1 - p_m (y = 0), with no
refit. By the law of total variance the weighted version of (EVR) is exactly

    EVR = P1 P0 (m1 - m0)^2,   P1 = sum_m w_m p_m,  m1 = sum_m w_m p_m tau_m / P1,
                                P0 = 1 - P1,        m0 = sum_m w_m (1 - p_m) tau_m / P0,     (EVR-w)

the variance, over the unknown label, of the posterior mean it would lead to.

Targets: ``"beta1"`` (the habitat effect), ``"psi_bar"`` (mean occupancy over the surveyed sites)
and ``"joint"``, the sum of both reductions, each divided by its current variance (ASSUMED: the
abstract names no target; the two quantities an occupancy study reports).

Batches are greedy (ASSUMED): take the unit of largest EVR, then condition on its more probable
label as if it had been observed (the "believer" fantasy: re-weight the draws and recompute its
site's predictive probabilities), and repeat. Reviewed units and units already in the batch are
never chosen.

The baseline policies are "non-targeted": ``random``; ``top_score`` (the most confident
detections first, common practice); ``site_top`` ("classifier-guided listening", Katsis et al.
2025: at each site, units in decreasing score until a positive is confirmed there, sites taken in
order of their best unreviewed score); ``uncertainty`` (units whose predictive probability at the
MAP is closest to 1/2: optimising classifier labels, not the ecological target).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .fit import Fit
from .likelihood import (
    _check_data,
    _check_draws,
    _combine,
    _presence_parts,
    mean_occupancy,
    unit_presence_probability,
)
from .simulate import Survey

__all__ = [
    "TARGETS",
    "POLICIES",
    "USES_DRAWS",
    "ReviewState",
    "target_draws",
    "laplace_draws",
    "weighted_variance",
    "expected_variance_reduction",
    "select_evr",
    "select_random",
    "select_top_score",
    "select_site_top",
    "select_uncertainty",
    "policy",
]

TARGETS = ("beta1", "psi_bar", "joint")


@dataclass(frozen=True, eq=False)
class ReviewState:
    """What a policy may look at: the survey's scores and covariates, the reviewed mask, the
    labels revealed so far and the current fit. (``survey.y`` and ``survey.z`` are the truth and
    no policy reads them.)"""

    survey: Survey
    reviewed: np.ndarray  # (N, K) bool
    labels: np.ndarray  # (N, K) int, 0/1 where reviewed
    fit: Fit


# --- posterior draws and targets ---------------------------------------------------------------


def laplace_draws(fit: Fit, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """n_draws vectors u_m ~ N(u_hat, H^{-1}) from the Laplace approximation, shape (M, 8)
    (eq. `acorn-laplace` of notebooks/07_acorn_occupancy/index.md)."""
    n_draws = checks.integer(n_draws, "n_draws", minimum=2)
    rng = checks.generator(rng)
    return rng.multivariate_normal(fit.params, fit.cov, size=n_draws, method="cholesky")


def target_draws(u, survey: Survey, target: str) -> np.ndarray:
    """tau_m for each draw: shape (M,) for "beta1" and "psi_bar", (M, 2) for "joint"
    (columns beta1, psi_bar). psi_bar_m = (1/N) sum_i expit(beta0_m + beta1_m x_i)."""
    u = _check_draws(u)
    checks.choice(target, "target", TARGETS)
    beta1 = u[:, 1]
    psi_bar = mean_occupancy(u[:, 0], u[:, 1], survey.x)
    return {"beta1": beta1, "psi_bar": psi_bar, "joint": np.stack([beta1, psi_bar], axis=1)}[target]


def weighted_variance(tau, weights) -> np.ndarray:
    """Var_w(tau) = sum_m w_m (tau_m - mean_w)^2 / sum_m w_m, per column of tau (M,) or (M, T)."""
    tau = checks.array(tau, "tau", ndim=(1, 2), what="(M,) or (M, T)")
    w = checks.array(weights, "weights", shape=(tau.shape[0],), what="(M,)")
    if np.any(w < 0) or not w.sum() > 0:
        raise checks.InputError("weights must be non-negative with a positive sum")
    w = w / w.sum()
    mean = np.tensordot(w, tau, axes=1)
    return np.tensordot(w, (tau - mean) ** 2, axes=1)


def expected_variance_reduction(tau, p, weights) -> np.ndarray:
    """(EVR-w) for every candidate: tau (M,) or (M, T), p (M, U) the per-draw probabilities
    p_m that each candidate's label is 1, weights (M,). Returns (U,) or (U, T).

    Implements eq. `acorn-evr` of notebooks/07_acorn_occupancy/index.md, in the form of eq.
    `acorn-evr-draws`.

    Exactly Var_w(tau) - [P1 Var_{w p}(tau) + P0 Var_{w (1 - p)}(tau)] (law of total variance);
    zero for a candidate whose label is certain under every draw (p_m all 0 or all 1).
    """
    tau = checks.array(tau, "tau", ndim=(1, 2), what="(M,) or (M, T)")
    m = tau.shape[0]
    p = checks.array(p, "p", shape=(m, None), what="(M, U)")
    w = checks.array(weights, "weights", shape=(m,), what="(M,)")
    if np.any(w < 0) or not w.sum() > 0:
        raise checks.InputError("weights must be non-negative with a positive sum")
    if not (np.all(p >= 0) and np.all(p <= 1)):
        raise checks.InputError("p must hold probabilities in [0, 1]")
    return _evr(tau, p, w)


def _certain(p: np.ndarray) -> np.ndarray:
    """(U,) True for a candidate whose label is certain under every draw (p_m all 0 or all 1)."""
    return np.all(p == 0.0, axis=0) | np.all(p == 1.0, axis=0)


def _evr(
    tau: np.ndarray, p: np.ndarray, w: np.ndarray, certain: np.ndarray | None = None
) -> np.ndarray:
    """The expected variance reduction of every candidate, from weighted draws (EVR-w).

    Implements eq. `acorn-evr-draws` of notebooks/07_acorn_occupancy/index.md, without input
    checks (the greedy loop calls it once per pick). P1 and the S1 of every target come from
    one product of the (1 + T, M) weights with p (M, U), a single pass over p.
    ``certain`` (U,) marks candidates whose label is certain (:func:`_certain`): their EVR is
    exactly 0, whatever the rounding of the sums (computed here when not given)."""
    if certain is None:  # candidates whose label no draw doubts
        certain = _certain(p)
    w = w / w.sum()  # the weights w_m, normalised
    t = tau if tau.ndim == 2 else tau[:, None]  # tau_m per target, (M, T)
    # P1 = sum_m w_m p_m, then sum_m w_m p_m tau_m per target, in one product: (1 + T, U)
    sums = np.vstack([w, (w[:, None] * t).T]) @ p
    P1 = sums[0]  # P_1: the chance the label is 1, (U,)
    P0 = 1.0 - P1  # P_0 = 1 - P_1
    S1 = sums[1:].T  # P_1 m_1 = sum_m w_m p_m tau_m, (U, T)
    S0 = (w @ t)[None, :] - S1  # P_0 m_0 = sum_m w_m (1 - p_m) tau_m
    with np.errstate(invalid="ignore", divide="ignore"):  # P_y = 0: that m_y is never used
        diff = np.where(P1[:, None] > 0, S1 / P1[:, None], 0.0) - np.where(
            P0[:, None] > 0, S0 / P0[:, None], 0.0
        )  # m_1 - m_0
    evr = (P1 * P0)[:, None] * diff**2  # eq. acorn-evr-draws: P_1 P_0 (m_1 - m_0)^2
    evr = np.where(((P1 > 0) & (P0 > 0) & ~certain)[:, None], evr, 0.0)  # a sure label: 0
    return evr if tau.ndim == 2 else evr[:, 0]  # (U, T), or (U,) for one target


def _score(evr: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Joint targets: the sum of relative reductions; one target: EVR itself."""
    return (evr / var[None, :]).sum(axis=1) if evr.ndim == 2 else evr


# --- the policies ------------------------------------------------------------------------------


def _candidates(reviewed: np.ndarray) -> np.ndarray:
    return np.flatnonzero(~reviewed.ravel())


def _take(batch: int, reviewed: np.ndarray) -> int:
    """The batch size, capped by the units left to review."""
    return min(checks.integer(batch, "batch", minimum=1), int((~reviewed).sum()))


def _as_pairs(flat, shape) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in np.unravel_index(j, shape)) for j in flat]


def select_evr(
    state: ReviewState,
    batch: int,
    rng: np.random.Generator,
    *,
    target: str = "joint",
    n_draws: int = 512,
    draws=None,
) -> list[tuple[int, int]]:
    """ACORN: a greedy batch of units for review, by expected variance reduction.

    ``batch`` units by (EVR-w) for ``target``, with the believer fantasy between picks.
    ``draws`` (M, 8) replaces the Laplace draws (say NUTS draws). Implements eq.
    `acorn-evr-draws` of notebooks/07_acorn_occupancy/index.md, greedily, with the unit
    probabilities of eq. `acorn-posterior`."""
    # the survey, the reviewed mask and the labels found so far
    survey, r, y = state.survey, *_check_data(state.survey, state.reviewed, state.labels)
    b = _take(batch, r)  # the batch size, at most the units left
    # draws u_m of eq. acorn-laplace (or given ones), and tau_m for each
    u = laplace_draws(state.fit, n_draws, rng) if draws is None else _check_draws(draws)
    tau = target_draws(u, survey, target)  # beta1, psi_bar or both, per draw
    w = np.full(u.shape[0], 1.0 / u.shape[0])  # equal weights w_m to start
    var = weighted_variance(tau, w)  # Var(tau | D): scales the joint target's two parts
    if tau.ndim == 2 and np.any(var <= 0):  # a relative reduction needs a positive variance
        raise ValueError("a target has zero posterior variance under these draws")
    r, y = r.copy(), y.copy()  # the believed labels go into copies
    # eq. acorn-posterior: pi_ik and the sites' log odds of occupancy under every draw
    pi, sp, odds, positive = _presence_parts(u, survey.x, survey.w, survey.s, r, y)
    p = _combine(pi, odds, positive, r, y)  # p_m = P(y_ik = 1 | D, u_m), (M, N, K)
    shape = r.shape  # (N, K)
    certain = _certain(p.reshape(len(u), -1)).reshape(shape)  # units with a sure label
    picks: list[int] = []  # flat indices of the batch
    for _ in range(b):
        # eq. acorn-evr-draws for every unit, summed over targets relative to their variances
        score = _score(_evr(tau, p.reshape(len(u), -1), w, certain.ravel()), var)
        score[r.ravel()] = -np.inf  # reviewed units, and this batch's picks, are never chosen
        j = int(np.argmax(score))  # the unit of largest expected variance reduction
        i, k = np.unravel_index(j, shape)  # its site and unit
        pj = p[:, i, k]  # its p_m under every draw
        label = int(w @ pj >= 0.5 * w.sum())  # its more probable label, believed observed
        # re-weight the draws by p_m or 1 - p_m; the believed label has probability >= 1/2,
        # so w.sum() > 0
        w = w * (pj if label else 1.0 - pj)
        w = w / w.sum()  # normalised again
        r[i, k], y[i, k] = True, label  # the unit counts as reviewed from now on
        # site i after the believed label: a positive makes it occupied; a negative removes the
        # unit's log(1 + e^g) from its log odds (see likelihood._presence_parts)
        if label:
            positive[i] = True  # occupied under every draw
        else:
            odds[:, i] -= sp[:, i, k]  # less likely occupied
        p[:, i, :] = _combine(pi[:, i, :], odds[:, i], positive[i], r[i], y[i])  # site i anew
        certain[i] = _certain(p[:, i, :])  # and which of its units are now sure
        picks.append(j)  # the pick joins the batch
    return _as_pairs(picks, shape)  # (site, unit) pairs


def select_random(
    state: ReviewState, batch: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Uniformly random unreviewed units, without replacement."""
    cand = _candidates(state.reviewed)
    return _as_pairs(
        rng.choice(cand, size=_take(batch, state.reviewed), replace=False), state.reviewed.shape
    )


def select_top_score(
    state: ReviewState, batch: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """The unreviewed units with the highest scores (ties broken at random)."""
    cand = _candidates(state.reviewed)
    s = state.survey.s.ravel()[cand]
    order = np.lexsort((rng.random(len(cand)), -s))
    return _as_pairs(cand[order[: _take(batch, state.reviewed)]], state.reviewed.shape)


def select_site_top(
    state: ReviewState, batch: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Classifier-guided listening: one unit per site per pass, the site's best unreviewed score,
    skipping sites where a positive is confirmed; sites in decreasing order of that score. When
    every site is confirmed or exhausted, the remaining units go by score."""
    r, y = _check_data(state.survey, state.reviewed, state.labels)
    r = r.copy()
    s = state.survey.s
    b = _take(batch, r)
    picks: list[tuple[int, int]] = []
    confirmed = np.any(r & (y == 1), axis=1)
    while len(picks) < b:
        masked = np.where(r, -np.inf, s)
        best_k = masked.argmax(axis=1)
        best = masked[np.arange(len(s)), best_k]
        open_sites = np.flatnonzero(~confirmed & np.isfinite(best))
        if open_sites.size == 0:  # every site confirmed or exhausted: plain top score
            j = int(np.argmax(np.where(r, -np.inf, s).ravel()))
            i, k = np.unravel_index(j, s.shape)
            picks.append((int(i), int(k)))
            r[i, k] = True
            continue
        for i in open_sites[np.argsort(-best[open_sites], kind="stable")]:
            if len(picks) == b:
                break
            picks.append((int(i), int(best_k[i])))
            r[i, best_k[i]] = True
    return picks


def select_uncertainty(
    state: ReviewState, batch: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Uncertainty sampling: the unreviewed units whose predictive probability of presence at the
    MAP, (P) at u_hat, is closest to 1/2 (ties broken at random)."""
    r, y = _check_data(state.survey, state.reviewed, state.labels)
    p = unit_presence_probability(state.fit.params[None, :], state.survey, r, y)[0].ravel()
    cand = _candidates(r)
    order = np.lexsort((rng.random(len(cand)), np.abs(p[cand] - 0.5)))
    return _as_pairs(cand[order[: _take(batch, r)]], r.shape)


POLICIES: dict[str, Callable[..., list[tuple[int, int]]]] = {
    "random": select_random,
    "top_score": select_top_score,
    "site_top": select_site_top,
    "uncertainty": select_uncertainty,
    "acorn": select_evr,
    "acorn_beta1": lambda state, batch, rng, **kw: select_evr(
        state, batch, rng, target="beta1", **kw
    ),
}


USES_DRAWS = frozenset({"acorn", "acorn_beta1"})  # the policies that take n_draws=


def policy(name: str) -> Callable[..., list[tuple[int, int]]]:
    """The policy called ``name`` (one of POLICIES)."""
    return POLICIES[checks.choice(name, "policy", sorted(POLICIES))]
