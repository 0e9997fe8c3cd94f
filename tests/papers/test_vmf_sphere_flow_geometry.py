"""Tests of reprobook.papers.vmf_sphere_flow.geometry (arXiv 2605.05629; the equations are
eqs. vmf-density, vmf-cosine-law, vmf-psi-ode, vmf-psi and vmf-flow-map of
notebooks/16_vmf_sphere_flow/index.md).

What is checked: psi(s, 0) = 1/(d - 1) and the d = 3 closed form against the quadrature; psi is
non-negative and bounded up to the poles and solves its ODE; the flow map's speed tends to
psi (1 - s^2) as the kappa step shrinks; the push-forward of the uniform law by the cosine ODE
is the vMF cosine law; the torch vMF sampler's mean cosine is A_d(kappa) and its draws match
SciPy's; a retraction keeps unit norm; plus the Bessel ratio, the normalisers, the cosine law
and clear errors on bad input. Checks are against closed forms (d = 3, kappa = 0, Beta laws),
independent references (scipy.special.iv, scipy.stats.vonmises_fisher, mpmath quadrature,
scipy.integrate.quad) and the defining ODE itself; statistical tests use fixed seeds.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.special import gammaln, iv

from reprobook.papers.vmf_sphere_flow import geometry as geo

# concentration ranges: kappa_max grows with d (d = 64 needs kappa ~ 3000 for A ~ 0.99)
KAPPA_RANGE = {3: 200.0, 16: 300.0, 64: 3000.0}


def _log_area(d: int) -> float:
    """log of the surface area 2 pi^{d/2} / Gamma(d/2) of S^{d-1}."""
    return math.log(2.0) + (d / 2.0) * math.log(math.pi) - gammaln(d / 2.0)


def _unit(rng: np.random.Generator, d: int) -> torch.Tensor:
    v = torch.as_tensor(rng.standard_normal(d))
    return v / v.norm()


# ---------------------------------------------------------------------------------------------
# A_d and the normalisers (eqs. vmf-density, vmf-cosine-law)


@pytest.mark.parametrize("d", [2, 3, 5, 16, 64])
def test_mean_cosine_equals_direct_bessel_ratio_at_small_kappa(d):
    kappa = np.geomspace(1e-6, 20.0, 25)
    direct = iv(d / 2.0, kappa) / iv(d / 2.0 - 1.0, kappa)
    np.testing.assert_allclose(geo.mean_cosine(d, kappa), direct, rtol=1e-11, atol=0)


def test_mean_cosine_limits_closed_form_and_shape():
    for d in (2, 3, 16, 64, 2000):
        assert geo.mean_cosine(d, 0.0) == 0.0
    k = np.array([0.5, 5.0, 50.0, 500.0])
    np.testing.assert_allclose(geo.mean_cosine(3, k), 1.0 / np.tanh(k) - 1.0 / k, rtol=1e-13)
    # A_d(kappa) ~ kappa/d as kappa -> 0 (the series path, where ive underflows) ...
    for d in (3, 64, 2000):
        np.testing.assert_allclose(geo.mean_cosine(d, 1e-200), 1e-200 / d, rtol=1e-12)
    # ... and 1 - A_d ~ (d - 1)/(2 kappa) as kappa -> infinity (ive up to ~1e9, then the expansion)
    for d in (3, 16, 64):
        big = np.array([1e6, 1e8, 1e10, 1e12])
        ratio = (1.0 - np.asarray(geo.mean_cosine(d, big))) * 2.0 * big / (d - 1)
        np.testing.assert_allclose(ratio, 1.0, atol=1e-4)
    grid = np.linspace(0.0, 400.0, 401)
    a = np.asarray(geo.mean_cosine(16, grid))
    assert np.all(np.diff(a) > 0) and np.all((a >= 0) & (a < 1))
    assert np.shape(geo.mean_cosine(16, np.ones((2, 3)))) == (2, 3)
    assert isinstance(geo.mean_cosine(16, 1.0), float)


@pytest.mark.parametrize("d", [2, 3, 5, 16, 64])
def test_log_normaliser_uniform_limit_and_derivative(d):
    # kappa = 0: the uniform law, density 1 / area(S^{d-1})
    assert geo.log_normaliser(d, 0.0) == pytest.approx(-_log_area(d), abs=1e-13)
    # d/dkappa log C_d(kappa) = -A_d(kappa): the two functions agree with each other
    for k in (0.3, 4.0, 60.0, 900.0):
        h = 1e-4 * max(1.0, k)
        fd = (geo.log_normaliser(d, k + h) - geo.log_normaliser(d, k - h)) / (2 * h)
        assert fd == pytest.approx(-geo.mean_cosine(d, k), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("d", [3, 5, 16, 64])
def test_log_normaliser_matches_scipy_vonmises_fisher(d):
    mu = np.zeros(d)
    mu[0] = 1.0
    for k in (0.1, 3.0, 72.0, 500.0):
        log_pdf_at_mean = stats.vonmises_fisher(mu, k).logpdf(mu)  # log C_d(k) + k
        assert geo.log_normaliser(d, k) + k == pytest.approx(log_pdf_at_mean, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize("d, kappa", [(2, 1.5), (3, 0.0), (5, 10.0), (16, 72.0), (64, 300.0)])
def test_cosine_density_integrates_to_one_with_mean_A(d, kappa):
    a = geo.mean_cosine(d, kappa)
    mode = geo.cosine_mode(d, kappa)
    opts = dict(points=[a, mode], limit=400, epsabs=1e-13, epsrel=1e-11)
    if d == 2:  # integrable 1/sqrt(1 - s^2) poles: use the angle
        mass = integrate.quad(
            lambda t: geo.cosine_density(math.cos(t), d, kappa) * math.sin(t), 0, math.pi
        )[0]
        mean = integrate.quad(
            lambda t: math.cos(t) * geo.cosine_density(math.cos(t), d, kappa) * math.sin(t),
            0,
            math.pi,
        )[0]
    else:
        mass = integrate.quad(lambda s: geo.cosine_density(s, d, kappa), -1, 1, **opts)[0]
        mean = integrate.quad(lambda s: s * geo.cosine_density(s, d, kappa), -1, 1, **opts)[0]
    assert mass == pytest.approx(1.0, abs=1e-9)
    assert mean == pytest.approx(a, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# the cosine law's CDF and quantiles (eqs. vmf-cosine-law, vmf-flow-map)


@pytest.mark.parametrize("d", [2, 3, 16, 64])
def test_cosine_cdf_at_kappa_zero_is_a_beta_law(d):
    s = np.linspace(-1.0, 1.0, 81)
    ref = stats.beta.cdf((1 + s) / 2, (d - 1) / 2, (d - 1) / 2)
    np.testing.assert_allclose(geo.cosine_cdf(s, d, 0.0), ref, rtol=1e-11, atol=1e-15)


def test_cosine_cdf_d3_closed_form_in_both_tails():
    # d = 3: q ∝ e^{kappa s}, so F(s) = (e^{kappa s} - e^{-kappa}) / (e^{kappa} - e^{-kappa})
    k = 300.0
    s = np.array([-0.999, -0.5, 0.0, 0.9, 0.99])
    log_f = k * (s - 1) + np.log1p(-np.exp(-k * (1 + s))) - np.log1p(-np.exp(-2 * k))
    np.testing.assert_allclose(
        geo.cosine_cdf(s, 3, k, log=True), log_f, rtol=1e-12
    )  # down to log F ~ -600
    s_hi = 1.0 - np.array([1e-9, 1e-6, 1e-3])
    log_sf = np.log(-np.expm1(-k * (1 - s_hi))) - np.log1p(-np.exp(-2 * k))
    np.testing.assert_allclose(geo.cosine_sf(s_hi, 3, k, log=True), log_sf, rtol=1e-10)


def test_cosine_cdf_matches_quadrature_and_icdf_inverts_it():
    d, k = 16, 72.0
    for s in (0.6, 0.8, 0.9, 0.95, 0.99):
        ref = integrate.quad(
            lambda r: geo.cosine_density(r, d, k),
            -1,
            s,
            points=[0.8, 0.9],
            epsabs=1e-15,
            epsrel=1e-12,
            limit=400,
        )[0]
        assert geo.cosine_cdf(s, d, k) == pytest.approx(ref, rel=1e-10, abs=1e-15)
        assert geo.cosine_cdf(s, d, k) + geo.cosine_sf(s, d, k) == pytest.approx(1.0, abs=1e-14)
    u = np.array([1e-12, 1e-4, 0.2, 0.5, 0.8, 1 - 1e-4, 1 - 1e-12])
    for dd, kk in ((3, 0.0), (16, 72.0), (64, 3000.0)):
        s = geo.cosine_icdf(u, dd, kk)
        assert np.all(np.diff(s) > 0)
        np.testing.assert_allclose(
            geo.cosine_cdf(s, dd, kk), u, rtol=1e-9, atol=1e-15
        )  # s = -1 + 2e-12 is rounded
    # deep in the lower tail, via log u
    s = geo.cosine_icdf(-500.0, 3, 300.0, log=True)
    assert geo.cosine_cdf(s, 3, 300.0, log=True) == pytest.approx(-500.0, rel=1e-12)
    assert geo.cosine_icdf(0.0, 16, 5.0) == -1.0 and geo.cosine_icdf(1.0, 16, 5.0) == 1.0


def test_cosine_cdf_grid_is_a_monotone_table():
    s, f = geo.cosine_cdf_grid(16, 72.0, 301)
    assert s[0] == -1.0 and s[-1] == 1.0 and f[0] == 0.0 and f[-1] == pytest.approx(1.0, abs=1e-15)
    assert np.all(np.diff(s) > 0) and np.all(np.diff(f) >= 0)


# ---------------------------------------------------------------------------------------------
# psi, the bounded solution of the scalar ODE (eq. vmf-psi): its value at kappa = 0, the d = 3
# closed form, non-negative and bounded up to the poles


@pytest.mark.parametrize("d", [2, 3, 4, 16, 64])
def test_psi_at_kappa_zero_is_one_over_d_minus_one(d):
    s = np.r_[np.linspace(-1.0, 1.0, 41), -0.999, 0.999, -(1 - 1e-9), 1 - 1e-9]
    np.testing.assert_allclose(geo.psi(s, 0.0, d), 1.0 / (d - 1), rtol=1e-10)


def test_psi_d3_closed_form_equals_quadrature():
    s = np.r_[np.linspace(-0.999, 0.999, 81), -1.0, 1.0]
    for k in (1e-5, 0.01, 0.5, 3.0, 20.0, 72.0, 300.0):
        np.testing.assert_allclose(
            geo.psi(s, k, 3), geo.psi_d3(s, k), rtol=1e-8, err_msg=f"kappa={k}"
        )
    assert geo.psi_d3(0.3, 0.0) == 0.5


def _psi_mpmath(s: float, k: float, d: int) -> float:
    """psi from its definition by mpmath quadrature at 30 digits: the integral over [-1, s] for
    s < A_d, and (the same value, since int_{-1}^{1} (r - A_d) q = 0) minus the one over [s, 1]."""
    mpmath.mp.dps = 30
    s_, k_ = mpmath.mpf(s), mpmath.mpf(k)
    nu = mpmath.mpf(d) / 2 - 1
    a = mpmath.besseli(nu + 1, k_) / mpmath.besseli(nu, k_)
    f = lambda r: (r - a) * mpmath.exp(k_ * (r - s_)) * (1 - r * r) ** (mpmath.mpf(d - 3) / 2)  # noqa: E731
    lo, hi = (mpmath.mpf(-1), s_) if s_ < a else (s_, mpmath.mpf(1))
    # 32 even pieces, plus a subdivision graded geometrically towards the endpoint s
    toward = -1 if s_ < a else 1
    graded = [s_ + toward * mpmath.mpf(2) ** -j for j in range(1, 24)]
    pts = sorted(
        {lo, hi}
        | {lo + (hi - lo) * j / 32 for j in range(1, 32)}
        | {p for p in graded if lo < p < hi}
    )
    num = mpmath.quad(f, pts) * (-1 if s_ < a else 1)
    return float(num / (1 - s_ * s_) ** (mpmath.mpf(d - 1) / 2))


@pytest.mark.parametrize(
    "s, kappa, d",
    [
        (-0.99, 5.0, 3),
        (0.95, 10.0, 4),
        (-0.5, 72.0, 16),
        (0.5, 72.0, 16),
        (0.9, 72.0, 16),
        (0.999, 72.0, 16),
        (0.2, 300.0, 64),
        (0.9, 300.0, 64),
        (0.98, 3000.0, 64),
        (0.995, 3000.0, 64),
    ],
)
def test_psi_matches_an_mpmath_reference(s, kappa, d):
    assert geo.psi(s, kappa, d) == pytest.approx(_psi_mpmath(s, kappa, d), rel=1e-9)


@pytest.mark.parametrize("d", [3, 16, 64])
def test_psi_solves_the_continuity_ode(d):
    # d/ds [e^{kappa s} (1 - s^2)^{(d-1)/2} psi] = -(s - A_d) e^{kappa s} (1 - s^2)^{(d-3)/2},
    # scaled by e^{-kappa s0}
    # (five-point stencil; the tolerance is relative to the size of the terms of the product rule)
    h = 2e-5
    for k in (0.0, 0.2 * KAPPA_RANGE[d], KAPPA_RANGE[d]):
        a = geo.mean_cosine(d, k)
        for s0 in (-0.9, -0.3, 0.0, a - 0.01, a, min(a + 0.01, 0.99), 0.5, 0.99):

            def flux(x, k=k, s0=s0):
                return math.exp(k * (x - s0)) * (1 - x * x) ** ((d - 1) / 2) * geo.psi(x, k, d)

            lhs = (-flux(s0 + 2 * h) + 8 * flux(s0 + h) - 8 * flux(s0 - h) + flux(s0 - 2 * h)) / (
                12 * h
            )
            rhs = -(s0 - a) * (1 - s0 * s0) ** ((d - 3) / 2)
            scale = abs(flux(s0)) * (k + (d - 1) * abs(s0) / (1 - s0 * s0) + 1) + abs(rhs)
            assert abs(lhs - rhs) <= 1e-6 * scale, (k, s0, lhs, rhs)


@pytest.mark.parametrize("d", [3, 16, 64])
def test_psi_nonnegative_bounded_and_continuous_at_the_poles(d):
    kappa = np.linspace(0.0, KAPPA_RANGE[d], 31)
    s = np.r_[np.linspace(-1.0, 1.0, 401), -0.999, 0.999, -(1 - 1e-6), 1 - 1e-6]
    values = np.asarray(geo.psi(s[None, :], kappa[:, None], d))
    assert np.all(np.isfinite(values)) and np.all(values >= 0)
    assert values.max() <= 2.0 / (d - 1) * (1 + 1e-12)
    # observed on these grids: psi decreases in s, so it lies between its pole limits
    lo, hi = geo.psi_limits(d, kappa)
    assert np.all(values <= np.asarray(lo)[:, None] * (1 + 1e-12))
    assert np.all(values >= np.asarray(hi)[:, None] * (1 - 1e-12))
    # and it tends to the limits (1 -+ A_d)/(d - 1) at s = +-1
    for k in kappa:
        l_minus, l_plus = geo.psi_limits(d, k)
        eps = 1e-9
        assert geo.psi(-1 + eps, k, d) == pytest.approx(l_minus, rel=1e-5)
        assert geo.psi(1 - eps, k, d) == pytest.approx(l_plus, rel=1e-5)


# ---------------------------------------------------------------------------------------------
# the table


def test_psi_table_nodes_interpolation_broadcast_and_clamp():
    table = geo.PsiTable(16, 72.0, n_kappa=25, n_s=41)
    assert table.values.shape == (25, 41) and table.values.dtype == torch.float64
    kk, ss = np.meshgrid(table.kappas, table.s, indexing="ij")
    at_nodes = table(torch.as_tensor(ss), torch.as_tensor(kk)).numpy()
    np.testing.assert_allclose(at_nodes, geo.psi(ss, kk, 16), rtol=1e-8)
    # between the nodes: bilinear error of a smooth field
    rng = np.random.default_rng(0)
    s = rng.uniform(-0.99, 0.99, 400)
    k = rng.uniform(0.0, 72.0, 400)
    np.testing.assert_allclose(
        table(torch.as_tensor(s), torch.as_tensor(k)).numpy(), geo.psi(s, k, 16), rtol=2e-2
    )
    # broadcasting, dtype, scalars
    out = table(torch.zeros(3, 1, dtype=torch.float32), torch.tensor([0.0, 10.0, 72.0]))
    assert out.shape == (3, 3) and out.dtype == torch.float32
    assert table(0.0, 0.0).item() == pytest.approx(1.0 / 15, rel=1e-12)
    # the clamp: beyond +-S_CLAMP the edge value; the speed psi (1 - s^2) vanishes at the poles
    edge = table(torch.tensor([geo.S_CLAMP, -geo.S_CLAMP]), 30.0)
    beyond = table(torch.tensor([1.0, -1.0]), 30.0)
    torch.testing.assert_close(beyond, edge)
    assert torch.all(table.cosine_speed(torch.tensor([1.0, -1.0]), 30.0) == 0)


# ---------------------------------------------------------------------------------------------
# the flow map (eq. vmf-flow-map): its speed tends to psi (1 - s^2) as the step shrinks


@pytest.mark.parametrize("d", [3, 16, 64])
def test_flow_map_velocity_equals_psi_times_one_minus_s2(d):
    u = np.array([0.001, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999])
    for k in (1.0, 0.3 * KAPPA_RANGE[d], KAPPA_RANGE[d]):
        s = np.asarray(geo.cosine_icdf(u, d, k))
        dk = 1e-3 * k
        up, down = geo.flow_map_cosine(s, k, k + dk, d), geo.flow_map_cosine(s, k, k - dk, d)
        v = (np.asarray(up) - np.asarray(down)) / (
            2 * dk
        )  # central difference along the trajectory
        np.testing.assert_allclose(
            v, np.asarray(geo.psi(s, k, d)) * (1 - s**2), rtol=1e-5, err_msg=f"kappa={k}"
        )
    # from kappa = 0 (one-sided difference)
    s = np.linspace(-0.95, 0.95, 9)
    dk = 1e-4
    v = (np.asarray(geo.flow_map_cosine(s, 0.0, dk, d)) - s) / dk
    np.testing.assert_allclose(v, (1 - s**2) / (d - 1), rtol=1e-3, atol=1e-6)


def test_flow_map_transports_quantiles_and_composes():
    d = 16
    s0 = np.linspace(-0.9, 0.9, 13)
    s1 = np.asarray(geo.flow_map_cosine(s0, 2.0, 40.0, d))
    np.testing.assert_allclose(
        geo.cosine_cdf(s1, d, 40.0), geo.cosine_cdf(s0, d, 2.0), rtol=1e-10, atol=1e-14
    )
    assert np.all(np.diff(s1) > 0)
    s2 = np.asarray(geo.flow_map_cosine(s1, 40.0, 90.0, d))
    np.testing.assert_allclose(s2, geo.flow_map_cosine(s0, 2.0, 90.0, d), atol=1e-12)
    np.testing.assert_allclose(geo.flow_map_cosine(s0, 7.0, 7.0, d), s0, atol=1e-13)
    t = geo.flow_map_cosine(torch.tensor(s0, dtype=torch.float32), 2.0, 40.0, d)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# the push-forward (claim C1): uniform cosines carried by the ODE follow the vMF cosine law


@pytest.mark.parametrize("d, kappa_max", [(3, 20.0), (16, 72.0)])
def test_push_forward_of_uniform_cosines_is_the_vmf_cosine_law(d, kappa_max):
    gen = torch.Generator().manual_seed(2605)
    s = geo.push_forward_cosines(d, kappa_max, 4000, steps=128, generator=gen).numpy()
    cdf = lambda x: np.asarray(geo.cosine_cdf(np.clip(x, -1, 1), d, kappa_max))  # noqa: E731
    assert stats.kstest(s, cdf).pvalue > 0.05
    direct = geo.sample_vmf_cosine(d, kappa_max, (4000,), torch.Generator().manual_seed(5)).numpy()
    assert stats.ks_2samp(s, direct).pvalue > 0.05
    a = geo.mean_cosine(d, kappa_max)
    se = s.std() / math.sqrt(s.size)
    assert abs(s.mean() - a) < min(1e-2, 4 * se)


@pytest.mark.parametrize("d, kappa_max", [(3, 20.0), (16, 72.0), (64, 300.0)])
def test_push_forward_of_uniform_quantiles_lands_on_vmf_quantiles(d, kappa_max):
    # deterministic: the exact kappa = 0 quantiles, moved by RK4 on the table, against the exact
    # kappa_max quantiles; any error in psi, the table or the integrator shows here
    u = (np.arange(500) + 0.5) / 500
    s0 = torch.as_tensor(geo.cosine_icdf(u, d, 0.0))
    table = geo.PsiTable(d, kappa_max)
    moved = geo.transport_cosines(s0, 0.0, kappa_max, table, steps=128).numpy()
    assert np.max(np.abs(moved - geo.cosine_icdf(u, d, kappa_max))) < 1e-4


# ---------------------------------------------------------------------------------------------
# the sampler: mean cosine A_d(kappa), and a KS test against scipy.stats.vonmises_fisher


@pytest.mark.parametrize(
    "d, kappa", [(2, 3.0), (3, 0.0), (3, 5.0), (16, 72.0), (64, 300.0), (64, 3000.0)]
)
def test_sampler_mean_cosine_and_ks_against_scipy(d, kappa):
    n = 20000
    rng = np.random.default_rng(d + int(kappa))
    mu = _unit(rng, d)
    x = geo.sample_vmf(
        mu, torch.full((n,), kappa), torch.Generator().manual_seed(d * 1000 + int(kappa))
    )
    assert x.shape == (n, d)
    assert torch.max((x.norm(dim=-1) - 1).abs()) < 1e-12
    c = (x @ mu).numpy()
    a = geo.mean_cosine(d, kappa)
    assert abs(c.mean() - a) < 4 * c.std() / math.sqrt(n)
    # the whole vector: E[h] = A_d mu (the tangent part averages out)
    assert torch.linalg.norm(x.mean(0) - a * mu).item() < 5 / math.sqrt(n)
    assert (
        stats.kstest(c, lambda s: np.asarray(geo.cosine_cdf(np.clip(s, -1, 1), d, kappa))).pvalue
        > 0.01
    )
    if kappa > 0:
        ref = stats.vonmises_fisher(mu.numpy(), kappa).rvs(n, random_state=d) @ mu.numpy()
    else:
        ref = stats.uniform_direction(d).rvs(n, random_state=d) @ mu.numpy()
    assert stats.ks_2samp(c, ref).pvalue > 0.05


def test_sampler_shapes_dtypes_seeds_and_extremes():
    rng = np.random.default_rng(1)
    means = torch.stack([_unit(rng, 8) for _ in range(5)])  # (5, 8)
    kappa = torch.tensor([[0.0], [1.0], [50.0]])  # (3, 1)
    x = geo.sample_vmf(means, kappa, torch.Generator().manual_seed(0))
    assert x.shape == (3, 5, 8) and x.dtype == torch.float64
    y = geo.sample_vmf(means, kappa, torch.Generator().manual_seed(0))
    assert torch.equal(x, y)
    x32 = geo.sample_vmf(means.float(), 3.0, torch.Generator().manual_seed(0))
    assert x32.dtype == torch.float32 and torch.max((x32.norm(dim=-1) - 1).abs()) < 1e-6
    assert geo.sample_vmf(means.float(), 3.0, dtype=torch.float64).dtype == torch.float64
    # very large kappa: cosines just below 1, 1 - s ~ Gamma((d-1)/2, kappa)
    big = geo.sample_vmf(means[0], torch.full((4000,), 1e6), torch.Generator().manual_seed(1))
    one_minus = 1 - (big @ means[0])
    assert torch.all(one_minus >= 0)
    assert one_minus.mean().item() == pytest.approx(7 / 2 / 1e6, rel=0.05)
    c = geo.sample_vmf_cosine(16, 0.0, (5000,), torch.Generator().manual_seed(2)).numpy()
    assert stats.kstest((1 + c) / 2, stats.beta(7.5, 7.5).cdf).pvalue > 0.05


# ---------------------------------------------------------------------------------------------
# sphere operations: a retraction step keeps unit norm


def test_tangent_retract_and_exp_map():
    gen = torch.Generator().manual_seed(3)
    h = geo.retract(torch.randn(64, 16, generator=gen, dtype=torch.float64))
    v = torch.randn(64, 16, generator=gen, dtype=torch.float64)
    pv = geo.tangent(h, v)
    assert torch.max((h * pv).sum(-1).abs()) < 1e-12
    torch.testing.assert_close(geo.tangent(h, pv), pv)
    # a retraction step keeps unit norm, for large and small steps, in torch and numpy
    for dt in (1e-4, 0.1, 10.0):
        assert torch.max((geo.retract(h + dt * pv).norm(dim=-1) - 1).abs()) < 1e-12
    hn = geo.retract(np.asarray(h) + 0.3 * np.asarray(pv))
    assert np.max(np.abs(np.linalg.norm(hn, axis=-1) - 1)) < 1e-12
    assert (
        np.max(np.abs(np.sum(np.asarray(h) * geo.tangent(np.asarray(h), np.asarray(v)), -1)))
        < 1e-12
    )
    # the exp map: unit norm, geodesic distance |v|, exp_h(0) = h, agrees with Retr to O(|v|^3)
    w = 0.7 * pv / pv.norm(dim=-1, keepdim=True)
    e = geo.exp_map(h, w)
    assert torch.max((e.norm(dim=-1) - 1).abs()) < 1e-12
    torch.testing.assert_close(
        torch.arccos((h * e).sum(-1).clamp(-1, 1)), torch.full((64,), 0.7, dtype=torch.float64)
    )
    torch.testing.assert_close(geo.exp_map(h, torch.zeros_like(h)), h)
    gaps = [
        torch.max((geo.retract(h + eps * w) - geo.exp_map(h, eps * w)).norm(dim=-1)).item()
        for eps in (1e-1, 1e-2)
    ]
    assert 500 < gaps[0] / gaps[1] < 2000
    np.testing.assert_allclose(geo.exp_map(np.asarray(h), np.asarray(w)), e.numpy(), atol=1e-14)


# ---------------------------------------------------------------------------------------------
# bad inputs


def test_bad_inputs_raise_clear_errors():
    for d in (1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="integer >= 2"):
            geo.mean_cosine(d, 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        geo.mean_cosine(3, [1.0, -0.1])
    with pytest.raises(ValueError, match="finite"):
        geo.log_normaliser(3, float("nan"))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        geo.psi(1.2, 1.0, 3)
    assert geo.psi(1 + 1e-9, 1.0, 3) == geo.psi(1.0, 1.0, 3)  # rounding excess is clipped
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        geo.cosine_density(-1.01, 3, 1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        geo.cosine_icdf(1.5, 3, 1.0)
    with pytest.raises(ValueError, match="kappa_new"):
        geo.flow_map_cosine(0.1, 1.0, -2.0, 3)
    with pytest.raises(ValueError, match="kappa_max"):
        geo.PsiTable(3, 0.0)
    with pytest.raises(ValueError, match="n_kappa"):
        geo.PsiTable(3, 10.0, n_kappa=1)
    table = geo.PsiTable(3, 10.0, n_kappa=5, n_s=9)
    with pytest.raises(ValueError, match="kappa_max=10"):
        table(torch.tensor([0.0]), 11.0)
    with pytest.raises(ValueError, match="cosine"):
        table(torch.tensor([1.1]), 1.0)
    with pytest.raises(ValueError, match="unit vectors"):
        geo.sample_vmf(torch.tensor([1.0, 1.0, 0.0]), 1.0)
    with pytest.raises(ValueError, match="d >= 2"):
        geo.sample_vmf(torch.ones(4, 1), 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        geo.sample_vmf(torch.tensor([1.0, 0.0, 0.0]), -1.0)
    with pytest.raises(ValueError, match="broadcast"):
        geo.sample_vmf(torch.eye(3), torch.ones(2))
    with pytest.raises(ValueError, match="n must be"):
        geo.push_forward_cosines(3, 5.0, 0)
    with pytest.raises(ValueError, match="steps"):
        geo.transport_cosines(torch.zeros(3), 0.0, 5.0, table, 0)
    with pytest.raises(ValueError, match="table"):
        geo.push_forward_cosines(3, 20.0, 10, table=table)
