"""Tests of reprobook.papers.acorn_occupancy: the CSOM site likelihood, simulator and MAP fit.

Exact properties: brute-force enumeration over (z_i, y_i), the all-reviewed closed form, the
certainty of a reviewed positive, the perfect-label limit, the analytic gradient against finite
differences, seed reproducibility, recovery by the Laplace fit, and clear errors on bad input.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import expit, log_expit
from scipy.stats import norm

from reprobook.papers.acorn_occupancy import (
    BIOACOUSTIC,
    CAMERA,
    FitError,
    Preset,
    Survey,
    fit_map,
    grad_log_posterior,
    log_posterior,
    log_prior,
    pack_params,
    simulate,
    site_loglik,
    site_occupancy_posterior,
    true_params,
    unpack_params,
)
from reprobook.papers.acorn_occupancy.likelihood import (
    _expit,
    _log_sigmoids,
    _logaddexp,
    _softplus,
)


def small_case(seed: int, n: int = 5, k: int = 4):
    """A small random survey, random parameters, and a review mask with positives and negatives."""
    rng = np.random.default_rng(seed)
    preset = Preset(
        n_sites=n,
        n_units=k,
        beta=tuple(rng.normal(0, 1, 2)),
        alpha=tuple(rng.normal(0, 1, 2)),
        mu0=-1.0,
        sigma0=0.8,
        mu1=0.5,
        sigma1=1.3,
    )  # overlapping scores
    sv = simulate(preset, rng)
    u = pack_params(rng.normal(0, 1, 2), rng.normal(0, 1, 2), -0.7, 1.1, 0.9, 0.7)
    reviewed = rng.random((n, k)) < 0.4
    labels = rng.integers(0, 2, (n, k))  # arbitrary labels, also at unreviewed units (ignored)
    return sv, u, reviewed, labels


def brute_site_lik(u, sv: Survey, reviewed, labels, i: int) -> float:
    """p(s_i, y_{R_i}) = sum_z sum_{y in {0,1}^K consistent with R_i} p(z) prod_k p(y_k | z)
    f_{y_k}(s_k)."""
    nat = unpack_params(u)
    psi = expit(nat["beta"][0] + nat["beta"][1] * sv.x[i])
    th = expit(nat["alpha"][0] + nat["alpha"][1] * sv.w[i])
    f = {
        0: norm.pdf(sv.s[i], nat["mu0"], nat["sigma0"]),
        1: norm.pdf(sv.s[i], nat["mu1"], nat["sigma1"]),
    }
    k = sv.s.shape[1]
    total = 0.0
    for z in (0, 1):
        pz = psi if z else 1 - psi
        for ys in itertools.product((0, 1), repeat=k):
            if any(reviewed[i, j] and ys[j] != labels[i, j] for j in range(k)):
                continue
            term = pz
            for j, yj in enumerate(ys):
                py1 = z * th[j]
                term *= (py1 if yj else 1 - py1) * f[yj][j]
            total += term
    return total


@pytest.mark.parametrize("seed,k", [(0, 3), (1, 3), (2, 4), (3, 4), (4, 4)])
def test_site_loglik_equals_brute_force(seed, k):
    sv, u, reviewed, labels = small_case(seed, n=6, k=k)
    # make sure the case mixes reviewed positives, reviewed negatives and unreviewed units
    reviewed[0, :] = [True, True] + [False] * (k - 2)
    labels[0, :2] = [1, 0]
    reviewed[1, :] = False
    reviewed[2, :] = [True] + [False] * (k - 1)
    labels[2, 0] = 0
    got = site_loglik(u, sv, reviewed, labels)
    want = np.log([brute_site_lik(u, sv, reviewed, labels, i) for i in range(sv.n_sites)])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


def test_all_reviewed_is_standard_occupancy_times_densities():
    sv, u, _, _ = small_case(7, n=8, k=4)
    nat = unpack_params(u)
    labels = sv.y.copy()
    labels[0] = 0  # one site with every label negative, one with a positive
    labels[1, 2] = 1
    reviewed = np.ones_like(labels, dtype=bool)
    psi = expit(nat["beta"][0] + nat["beta"][1] * sv.x)
    th = expit(nat["alpha"][0] + nat["alpha"][1] * sv.w)
    # standard single-season occupancy with units as visits
    occ = np.where(
        labels.any(axis=1),
        psi * np.prod(th**labels * (1 - th) ** (1 - labels), axis=1),
        psi * np.prod(1 - th, axis=1) + 1 - psi,
    )
    dens = np.prod(
        np.where(
            labels == 1,
            norm.pdf(sv.s, nat["mu1"], nat["sigma1"]),
            norm.pdf(sv.s, nat["mu0"], nat["sigma0"]),
        ),
        axis=1,
    )
    np.testing.assert_allclose(site_loglik(u, sv, reviewed, labels), np.log(occ * dens), rtol=1e-12)


def test_reviewed_positive_makes_occupancy_certain():
    sv, u, reviewed, labels = small_case(11, n=6, k=4)
    reviewed[:] = False
    reviewed[2, 1] = True
    labels[2, 1] = 1
    reviewed[3, 0] = True
    labels[3, 0] = 0
    post = site_occupancy_posterior(u, sv, reviewed, labels)
    assert post[2] == 1.0
    assert 0.0 < post[3] < 1.0  # a reviewed negative leaves doubt


def test_perfectly_separating_scores_give_perfect_label_posterior():
    rng = np.random.default_rng(5)
    n, k = 40, 5
    preset = Preset(
        n_sites=n,
        n_units=k,
        beta=(0.2, 0.8),
        alpha=(-0.5, 0.4),
        mu0=-30.0,
        sigma0=0.05,
        mu1=30.0,
        sigma1=0.05,
    )
    sv = simulate(preset, rng)
    u = true_params(preset)
    none = np.zeros((n, k), dtype=bool)
    csom = site_occupancy_posterior(u, sv, none, np.zeros((n, k), dtype=int))
    psi = expit(0.2 + 0.8 * sv.x)
    th = expit(-0.5 + 0.4 * sv.w)
    pz0 = psi * np.prod(1 - th, axis=1)
    perfect = np.where(sv.y.any(axis=1), 1.0, pz0 / (pz0 + 1 - psi))
    np.testing.assert_allclose(csom, perfect, rtol=1e-10, atol=1e-12)
    assert sv.y.any(axis=1).sum() > 5 and (~sv.y.any(axis=1)).sum() > 5


def test_gradient_matches_finite_differences():
    sv, u, reviewed, labels = small_case(13, n=30, k=6)
    _, g = grad_log_posterior(u, sv, reviewed, labels)
    h = 1e-6
    gn = np.array(
        [
            (
                log_posterior(u + h * e, sv, reviewed, labels)
                - log_posterior(u - h * e, sv, reviewed, labels)
            )
            / (2 * h)
            for e in np.eye(8)
        ]
    )
    np.testing.assert_allclose(g, gn, rtol=1e-6, atol=1e-6)


def test_log_prior_includes_jacobian():
    # integrate exp(log_prior) over u_6 = log(mu1 - mu0) numerically against the closed form
    u = pack_params((0.1, -0.2), (0.3, 0.0), -1.0, 1.0, 0.5, 2.0)
    grid = np.linspace(-12, 4, 20001)
    vals = []
    for t in grid:
        v = u.copy()
        v[6] = t
        vals.append(math.exp(log_prior(v)))
    # marginal over mu1 > mu0 of N(mu1; 0, 25) = P(mu1 > -1)
    v = u.copy()
    other = math.exp(log_prior(v)) / (norm.pdf(u[4] + math.exp(u[6]), 0, 5) * math.exp(u[6]))
    np.testing.assert_allclose(np.trapezoid(vals, grid) / other, norm.sf(-1.0, 0, 5), rtol=1e-5)


def test_vectorised_log_sigmoids_logaddexp_softplus_expit_match_scipy_and_numpy():
    """The likelihood's own elementwise functions (one vectorised exp and log1p per value)
    against SciPy's log_expit and expit and NumPy's logaddexp: to rounding over a wide range,
    and the same at the extremes (signed zeros, infinities, nan, a and b one infinity)."""
    ends = [-np.inf, -1e300, -800.0, -0.0, 0.0, 1e-300, 800.0, 1e300, np.inf, np.nan]
    v = np.concatenate([np.linspace(-60, 60, 2401), ends])
    lo, hi = _log_sigmoids(np, v)
    np.testing.assert_allclose(lo, log_expit(v), rtol=1e-14, atol=0)
    np.testing.assert_allclose(hi, log_expit(-v), rtol=1e-14, atol=0)
    np.testing.assert_allclose(_expit(v), expit(v), rtol=1e-14, atol=0)
    with np.errstate(invalid="ignore"):  # np.logaddexp(0, nan)
        np.testing.assert_allclose(_softplus(v), np.logaddexp(0.0, v), rtol=1e-14, atol=0)
    a, b = (g.ravel() for g in np.meshgrid(v, v))
    with np.errstate(invalid="ignore", over="ignore"):  # np.logaddexp at nan, inf - inf
        want = np.logaddexp(a, b)
    got = _logaddexp(np, a, b)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # infinities and nan
    # to rounding of the larger finite term (the two cancel where log(e^a + e^b) is near 0)
    finite_abs = [np.where(np.isinf(x), 0.0, np.abs(x)) for x in (a, b)]
    scale = np.maximum.reduce([np.abs(want), *finite_abs])
    assert np.all(np.abs(got[finite] - want[finite]) <= 1e-14 * scale[finite])


def test_simulator_reproducible_and_no_false_presence():
    a = simulate(CAMERA, np.random.default_rng(42))
    b = simulate(CAMERA, np.random.default_rng(42))
    c = simulate(CAMERA, np.random.default_rng(43))
    for f in ("x", "w", "z", "y", "s", "psi", "theta"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.s, c.s)
    assert a.s.shape == (120, 20) and a.x.shape == (120,)
    assert np.all(a.y[a.z == 0] == 0)
    assert a.y[a.z == 1].mean() > 0.2  # the species is detected at occupied sites
    np.testing.assert_allclose([a.x.mean(), a.x.std()], [0.0, 1.0], atol=1e-12)
    t = simulate(replace(BIOACOUSTIC, score_family="student_t", df=3.0), np.random.default_rng(0))
    assert np.all(t.y[t.z == 0] == 0)


def test_fit_recovers_camera_parameters():
    sv = simulate(CAMERA, np.random.default_rng(2026))
    reviewed = np.random.default_rng(1).random(sv.s.shape) < 0.05
    fit = fit_map(sv, reviewed, sv.y)
    assert fit.converged
    u = true_params(CAMERA)
    z = (fit.params - u) / fit.se
    assert np.all(np.abs(z) < 3.5), dict(
        zip(("b0", "b1", "a0", "a1", "mu0", "ls0", "ldmu", "ls1"), z.round(2))
    )
    assert abs(fit.psi_bar - sv.psi.mean()) < 3.5 * fit.psi_bar_se
    assert fit.beta1 == fit.params[1] and fit.beta1_se == fit.se[1]
    assert np.all(np.linalg.eigvalsh(fit.cov) > 0)


def test_fit_fails_loudly_when_not_converged():
    sv = simulate(CAMERA, np.random.default_rng(0))
    with pytest.raises(FitError, match="did not converge"):
        fit_map(sv, np.zeros(sv.s.shape, bool), sv.y, maxiter=2)


def test_bad_inputs_raise_clear_errors():
    sv, u, reviewed, labels = small_case(0)
    with pytest.raises(ValueError, match=r"params \(u\) must have shape \(8,\)"):
        site_loglik(u[:7], sv, reviewed, labels)
    with pytest.raises(ValueError, match="non-finite.*mu0"):
        site_loglik(np.where(np.arange(8) == 4, np.nan, u), sv, reviewed, labels)
    with pytest.raises(ValueError, match=r"reviewed must have shape \(\d+, \d+\)"):
        site_loglik(u, sv, reviewed[:, :2], labels)
    with pytest.raises(TypeError, match="reviewed must be a boolean mask"):
        site_loglik(u, sv, reviewed.astype(int), labels)
    bad = labels.copy()
    i, k = np.argwhere(reviewed)[0]
    bad[i, k] = 2
    with pytest.raises(ValueError, match="labels of reviewed units must be 0 or 1"):
        site_loglik(u, sv, reviewed, bad)
    with pytest.raises(TypeError, match="labels must be integers"):
        site_loglik(u, sv, reviewed, labels.astype(float))
    with pytest.raises(TypeError, match="survey must be a Survey"):
        site_loglik(u, {"s": sv.s}, reviewed, labels)
    with pytest.raises(ValueError, match="mu1 must exceed mu0"):
        replace(CAMERA, mu1=-3.0)
    with pytest.raises(ValueError, match="score_family must be one of"):
        replace(CAMERA, score_family="beta")
    with pytest.raises(ValueError, match=r"df \(with score_family='student_t'\) must be"):
        replace(CAMERA, score_family="student_t")
    with pytest.raises(ValueError, match="sigma0 must be a finite real number > 0"):
        replace(CAMERA, sigma0=0.0)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        simulate(CAMERA, 0)
