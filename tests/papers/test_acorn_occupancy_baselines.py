"""Tests of reprobook.papers.acorn_occupancy.baselines: thresholded standard and Royle–Link
occupancy.

Exact properties: brute-force enumeration over z_i for both models, the p10 -> 0 limit of
Royle–Link, the analytic gradient against finite differences, the factorisation of the
all-reviewed CSOM posterior into the standard model's and a score part (so their MAPs of
(beta, alpha) agree), the delta-method psi_bar se; then the behaviour of thresholded fits on
the simulated presets (seed 0), the label-switching flag, and clear errors on bad input.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import expit, log_expit, logit
from scipy.stats import norm

from reprobook.papers.acorn_occupancy import (
    BIOACOUSTIC,
    CAMERA,
    FitError,
    Preset,
    fit_map,
    grad_log_posterior,
    log_posterior,
    pack_params,
    simulate,
)
from reprobook.papers.acorn_occupancy.baselines import (
    BinaryFit,
    _binary_data,
    _binary_value_and_grad,
    _parts,
    binary_default_init,
    binary_log_posterior,
    binary_log_prior,
    binary_site_loglik,
    fit_binary_occupancy,
    grad_binary_log_posterior,
    threshold_detections,
)
from reprobook.papers.acorn_occupancy.fit import psi_bar_with_se


def small_binary(seed: int, n: int = 6, k: int = 4):
    """Random covariates, random detections (with an all-zero and an all-one site), random
    params."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    w = rng.standard_normal((n, k))
    d = (rng.random((n, k)) < 0.35).astype(np.int64)
    d[0] = 0
    d[1] = 1
    u = np.concatenate([rng.normal(0, 1, 4), [rng.normal(-2.5, 0.5)]])  # last entry: logit p10
    return d, x, w, u


def brute_site_lik(u, d, x, w, i: int, false_positive: bool) -> float:
    """sum_{z in {0,1}} p(z) prod_k p(d_k | z), p(d = 1 | z = 1) = p11_k,
    p(d = 1 | z = 0) = p10 (0 if standard)."""
    psi = expit(u[0] + u[1] * x[i])
    p11 = expit(u[2] + u[3] * w[i])
    p10 = expit(u[4]) if false_positive else 0.0
    total = 0.0
    for z in (0, 1):
        term = psi if z else 1.0 - psi
        for j in range(d.shape[1]):
            p1 = p11[j] if z else p10
            term *= p1 if d[i, j] == 1 else 1.0 - p1
        total += term
    return total


@pytest.mark.parametrize("false_positive", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_site_loglik_equals_brute_force(seed, false_positive):
    d, x, w, u = small_binary(seed)
    uu = u if false_positive else u[:4]
    got = binary_site_loglik(uu, d, x, w, false_positive=false_positive)
    want = np.log([brute_site_lik(u, d, x, w, i, false_positive) for i in range(d.shape[0])])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(got))


def test_royle_link_with_negligible_p10_is_the_standard_model():
    d, x, w, u = small_binary(3, n=10, k=5)
    u_rl = u.copy()
    u_rl[4] = -40.0
    np.testing.assert_allclose(
        binary_site_loglik(u_rl, d, x, w, false_positive=True),
        binary_site_loglik(u[:4], d, x, w),
        rtol=0,
        atol=1e-9,
    )
    # and with a real p10 they differ, at the sites with a detection
    diff = binary_site_loglik(u, d, x, w, false_positive=True) - binary_site_loglik(u[:4], d, x, w)
    assert np.all(diff[d.any(axis=1)] > 1e-6)


@pytest.mark.parametrize("false_positive", [False, True])
def test_gradient_matches_finite_differences(false_positive):
    d, x, w, u = small_binary(4, n=30, k=6)
    uu = u if false_positive else u[:4]
    _, g = grad_binary_log_posterior(uu, d, x, w, false_positive=false_positive)
    h = 1e-6

    def lp(v):
        return binary_log_posterior(v, d, x, w, false_positive=false_positive)

    gn = np.array([(lp(uu + h * e) - lp(uu - h * e)) / (2 * h) for e in np.eye(uu.size)])
    np.testing.assert_allclose(g, gn, rtol=1e-6, atol=1e-6)
    assert g.shape == ((5,) if false_positive else (4,))


@pytest.mark.parametrize("false_positive", [False, True])
def test_one_log_expit_per_unit_gives_the_bits_of_both_branches(false_positive):
    """A_i from log_expit(sign * logit p11) equals, bit for bit, the sum of log_expit(logit
    p11) where d = 1 and log_expit(-logit p11) where d = 0; the fit's evaluation on data
    prepared once equals the checked public gradient bit for bit."""
    sv = simulate(BIOACOUSTIC, np.random.default_rng([0, 0]))
    d = threshold_detections(sv, 0.8)
    d[0], d[1] = 0, 1  # a site with no detection and one with every unit detected
    uu = np.array([-0.3, 0.9, -1.2, 0.4, -3.1])[: 5 if false_positive else 4]
    data = _binary_data(d, sv.x, sv.w)
    eta_p = uu[2] + uu[3] * sv.w
    both = np.where(d == 1, log_expit(eta_p), log_expit(-eta_p)).sum(axis=1)
    want = log_expit(uu[0] + uu[1] * sv.x) + both
    got = _parts(uu, data, false_positive)["A"]
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    lp, g = _binary_value_and_grad(uu, data, false_positive)
    lp_ref, g_ref = grad_binary_log_posterior(uu, d, sv.x, sv.w, false_positive=false_positive)
    assert lp == lp_ref and np.array_equal(g.view(np.int64), g_ref.view(np.int64))


def test_all_reviewed_csom_posterior_factorises():
    # log p_CSOM(u | s, y all reviewed) = log p_STD(beta, alpha | y)
    #     + (a function of mu, sigma only):
    # log L_i is the standard occupancy term times prod_k f_{y_ik}(s_ik), and log_prior is a sum of
    # a (beta, alpha) part N(0, 2^2) and a (mu, sigma) part.
    rng = np.random.default_rng(8)
    preset = Preset(
        n_sites=12,
        n_units=5,
        beta=(0.1, 0.7),
        alpha=(-0.4, 0.5),
        mu0=-1.0,
        sigma0=0.8,
        mu1=0.5,
        sigma1=1.3,
    )
    sv = simulate(preset, rng)
    labels = sv.y.copy()
    reviewed = np.ones(sv.s.shape, bool)
    u = pack_params((0.3, -0.2), (0.1, 0.6), -0.7, 1.1, 0.9, 0.7)
    v = u.copy()
    v[:4] = rng.normal(0, 1, 4)
    _, g_csom = grad_log_posterior(u, sv, reviewed, labels)
    _, g_std = grad_binary_log_posterior(u[:4], labels, sv.x, sv.w)
    np.testing.assert_allclose(g_csom[:4], g_std, rtol=1e-12, atol=1e-12)
    rest_u = log_posterior(u, sv, reviewed, labels) - binary_log_posterior(
        u[:4], labels, sv.x, sv.w
    )
    rest_v = log_posterior(v, sv, reviewed, labels) - binary_log_posterior(
        v[:4], labels, sv.x, sv.w
    )
    assert abs(rest_u - rest_v) < 1e-10


def test_all_reviewed_csom_map_equals_standard_occupancy_map():
    sv = simulate(CAMERA, np.random.default_rng(0))
    csom = fit_map(sv, np.ones(sv.s.shape, bool), sv.y)
    std = fit_binary_occupancy(sv.y, sv.x, sv.w)
    assert isinstance(std, BinaryFit) and std.converged and not std.false_positive
    # the agreement is limited by L-BFGS-B's stopping rule in the 8-parameter CSOM fit (~2e-5 here)
    np.testing.assert_allclose(csom.params[:4], std.params, rtol=0, atol=1e-4)
    # the Laplace covariance is block diagonal, so the (beta, alpha) block agrees too
    np.testing.assert_allclose(csom.se[:4], std.se, rtol=1e-3)
    assert abs(csom.psi_bar - std.psi_bar) < 1e-5
    np.testing.assert_allclose(csom.psi_bar_se, std.psi_bar_se, rtol=1e-3)
    assert std.p10 is None and not std.label_switched
    assert std.beta1 == std.params[1] and std.beta1_se == std.se[1]
    assert set(std.named()) == {"beta0", "beta1", "alpha0", "alpha1"}


def test_log_prior_values():
    u = np.array([0.5, -1.0, 2.0, 0.3, -4.0])
    want = norm.logpdf(u[:4], 0.0, 2.0).sum()
    assert binary_log_prior(u[:4]) == pytest.approx(want, abs=1e-12)
    assert binary_log_prior(u, false_positive=True) == pytest.approx(
        want + norm.logpdf(-4.0, -3.0, 2.0), abs=1e-12
    )


def test_psi_bar_with_se_is_the_delta_method():
    rng = np.random.default_rng(9)
    x = rng.standard_normal(50)
    beta = np.array([-0.3, 0.8])
    a = rng.normal(0, 1, (2, 2))
    cov = a @ a.T * 0.01 + 0.001 * np.eye(2)
    psi_bar, se = psi_bar_with_se(beta, cov, x)
    assert psi_bar == pytest.approx(float(np.mean(expit(beta[0] + beta[1] * x))), abs=1e-15)
    h = 1e-6
    g = np.array(
        [
            (
                np.mean(expit((beta + h * e)[0] + (beta + h * e)[1] * x))
                - np.mean(expit((beta - h * e)[0] + (beta - h * e)[1] * x))
            )
            / (2 * h)
            for e in np.eye(2)
        ]
    )
    assert se == pytest.approx(math.sqrt(g @ cov @ g), rel=1e-7)
    with pytest.raises(ValueError, match=r"cov_beta must have shape \(2, 2\)"):
        psi_bar_with_se(beta, cov[:1], x)


def test_threshold_detections():
    sv = simulate(CAMERA, np.random.default_rng(0))
    d5 = threshold_detections(sv, 0.5)
    assert d5.dtype == np.int64 and d5.shape == sv.s.shape
    np.testing.assert_array_equal(d5, (sv.s > 0).astype(np.int64))  # logit(0.5) = 0
    d95 = threshold_detections(sv, 0.95)
    np.testing.assert_array_equal(d95, (sv.s > math.log(19.0)).astype(np.int64))
    d8 = threshold_detections(sv, np.float64(0.8))
    assert np.all(d95 <= d8) and np.all(d8 <= d5) and d95.sum() < d8.sum() < d5.sum()
    tie = replace(sv, s=np.array([[0.0, 1e-12, -1e-12]]), w=np.zeros((1, 3)), x=np.zeros(1))
    np.testing.assert_array_equal(threshold_detections(tie, 0.5), [[0, 1, 0]])  # strictly above
    for bad in (0.0, 1.0, -0.1, 1.5, 95, float("nan"), float("inf"), True, "0.5", None):
        with pytest.raises(ValueError, match="threshold must be a finite real number > 0 and < 1"):
            threshold_detections(sv, bad)
    with pytest.raises(TypeError, match="survey must be a Survey"):
        threshold_detections(sv.s, 0.5)


def test_thresholded_fits_on_the_presets():
    # camera, threshold 0.95: almost no false positives, both models close to the true mean psi
    # (seen: true 0.440, standard 0.437, Royle–Link 0.386; over seeds 0-29 the errors reach 0.28)
    sv = simulate(CAMERA, np.random.default_rng(0))
    d = threshold_detections(sv, 0.95)
    for fp in (False, True):
        f = fit_binary_occupancy(d, sv.x, sv.w, false_positive=fp)
        assert f.converged and not f.label_switched
        assert abs(f.psi_bar - sv.psi.mean()) < 0.15, (fp, f.psi_bar, sv.psi.mean())
    # bioacoustic, threshold 0.5: 2.3% of absent units score above 0 (P(N(-2, 1) > 0)); Royle–Link
    # finds them (seen p10 = 0.025; 0.016-0.029 over seeds 0-29), the standard model calls nearly
    # every site occupied (seen psi_bar 0.92 against a true 0.44; >= 0.81 over seeds 0-29)
    sb = simulate(BIOACOUSTIC, np.random.default_rng(0))
    db = threshold_detections(sb, 0.5)
    rl = fit_binary_occupancy(db, sb.x, sb.w, false_positive=True)
    assert rl.converged and not rl.label_switched
    assert rl.p10 > 0.005
    assert abs(rl.p10 - norm.sf(0.0, BIOACOUSTIC.mu0, BIOACOUSTIC.sigma0)) < 0.01
    assert rl.p10 == pytest.approx(float(expit(rl.params[4])))
    assert set(rl.named()) == {"beta0", "beta1", "alpha0", "alpha1", "logit_p10"}
    std = fit_binary_occupancy(db, sb.x, sb.w)
    assert std.psi_bar > 0.7 and std.psi_bar - sb.psi.mean() > 0.3


def test_label_switched_mode_is_flagged_not_raised():
    # started at p11 ~ 0.018 < p10 = 0.02, the camera 0.95 fit lands in the mirrored mode
    sv = simulate(CAMERA, np.random.default_rng(0))
    d = threshold_detections(sv, 0.95)
    f = fit_binary_occupancy(
        d, sv.x, sv.w, false_positive=True, init=[0.0, 0.0, -4.0, 0.0, logit(0.02)]
    )
    assert f.converged and f.label_switched
    assert np.mean(expit(f.params[2] + f.params[3] * sv.w)) <= f.p10
    good = fit_binary_occupancy(d, sv.x, sv.w, false_positive=True)
    assert not good.label_switched and good.log_post > f.log_post


@pytest.mark.parametrize("false_positive", [False, True])
def test_no_detections_anywhere_is_kept_proper_by_the_prior(false_positive):
    sv = simulate(CAMERA, np.random.default_rng(1))
    d = np.zeros(sv.s.shape, dtype=np.int64)
    f = fit_binary_occupancy(d, sv.x, sv.w, false_positive=false_positive)
    assert f.converged and np.all(np.isfinite(f.params)) and np.all(np.linalg.eigvalsh(f.cov) > 0)
    # the mode explains the empty survey by psi -> 0 (beta0 ~ -4.6, held by its prior); alpha is
    # then
    # informed by nothing but its N(0, 2^2) prior: mode ~ 0, Laplace se ~ 2
    assert f.psi_bar < 0.05
    np.testing.assert_allclose(f.params[2:4], 0.0, atol=1e-3)
    np.testing.assert_allclose(f.se[2:4], 2.0, rtol=1e-2)


def test_default_init_starts_with_p11_above_p10():
    sb = simulate(BIOACOUSTIC, np.random.default_rng(0))
    for t in (0.5, 0.8, 0.95):
        u0 = binary_default_init(threshold_detections(sb, t), false_positive=True)
        assert u0.shape == (5,) and u0[2] > u0[4] and u0[4] <= logit(0.02) + 1e-12
    assert binary_default_init(np.zeros((3, 4), int)).shape == (4,)


def test_fit_fails_loudly_when_not_converged():
    sb = simulate(BIOACOUSTIC, np.random.default_rng(0))
    with pytest.raises(FitError, match="did not converge"):
        fit_binary_occupancy(
            threshold_detections(sb, 0.5), sb.x, sb.w, false_positive=True, maxiter=1
        )


def test_bad_inputs_raise_clear_errors():
    d, x, w, u = small_binary(0)
    with pytest.raises(
        ValueError, match=r"d \(detections\) must have shape \(6, 4\), got shape \(6, 3\)"
    ):
        fit_binary_occupancy(d[:, :3], x, w)
    with pytest.raises(ValueError, match=r"w \(unit covariate\) must have shape \(6, any\)"):
        fit_binary_occupancy(d, x, w[:5])
    with pytest.raises(ValueError, match=r"x \(site covariate\) must be a 1-D array"):
        fit_binary_occupancy(d, x[:, None], w)
    bad = d.copy()
    bad[2, 1] = 2
    with pytest.raises(ValueError, match=r"must be 0 or 1; unit \(2, 1\) has 2"):
        fit_binary_occupancy(bad, x, w)
    with pytest.raises(TypeError, match="must be integers 0/1"):
        fit_binary_occupancy(d.astype(float), x, w)
    with pytest.raises(ValueError, match=r"x \(site covariate\) must be finite"):
        fit_binary_occupancy(d, np.where(np.arange(6) == 3, np.nan, x), w)
    with pytest.raises(ValueError, match=r"w \(unit covariate\) must be finite"):
        fit_binary_occupancy(d, x, np.where(w > 1, np.inf, w))
    with pytest.raises(TypeError, match="false_positive must be True"):
        fit_binary_occupancy(d, x, w, false_positive="yes")
    with pytest.raises(ValueError, match=r"standard model, in the order .* must have shape \(4,\)"):
        binary_site_loglik(u, d, x, w)
    with pytest.raises(ValueError, match=r"Royle–Link model, .* must have shape \(5,\)"):
        fit_binary_occupancy(d, x, w, false_positive=True, init=u[:4])
    with pytest.raises(ValueError, match=r"non-finite: \['logit_p10'\]"):
        binary_site_loglik(np.where(np.arange(5) == 4, np.nan, u), d, x, w, false_positive=True)


def test_perfectly_separating_scores_recover_the_perfect_label_estimate():
    """As mu1 - mu0 grows, the CSOM with no reviews must give the occupancy estimate of the
    standard model fitted to the true labels (the scores then reveal every label)."""
    from reprobook.papers.acorn_occupancy import Preset, fit_map, simulate

    preset = Preset(
        n_sites=80,
        n_units=10,
        beta=(-0.3, 1.0),
        alpha=(-0.5, 0.4),
        mu0=-20.0,
        sigma0=1.0,
        mu1=20.0,
        sigma1=1.0,
    )
    sv = simulate(preset, np.random.default_rng(21))
    none = np.zeros(sv.s.shape, dtype=bool)
    csom = fit_map(sv, none, np.zeros(sv.s.shape, dtype=np.int64))
    perfect = fit_binary_occupancy(sv.y, sv.x, sv.w)
    np.testing.assert_allclose(csom.params[:4], perfect.params, atol=1e-4)
    assert abs(csom.psi_bar - perfect.psi_bar) < 1e-5
