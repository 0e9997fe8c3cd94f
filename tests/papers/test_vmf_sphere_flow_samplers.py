"""Tests of reprobook.papers.vmf_sphere_flow.fields and .samplers (arXiv 2605.05629).

The fields and samplers are our reconstruction (eqs. vmf-marginal, vmf-baselines and vmf-step of
notebooks/16_vmf_sphere_flow/index.md; the paper's full text was not read). What is checked,
with exact oracles written here independently of the library:

- the marginal velocity, score, SDE drift and geodesic field are tangent, and the posterior-matmul
  form equals an explicit loop over tokens;
- the marginal score is the finite-difference Riemannian gradient of the log mixture density,
  for a two-token toy and for a coupled two-position mixture;
- the geodesic field is the log map over the remaining time, the Euclidean one reaches E[w | x];
- NFE counts are exact; every state a sampler hands to the posterior has unit norm;
- with exact oracle posteriors for a four-sequence data set (V = 3, L = 3, one-hot W, d = 3) the
  vMF ODE/SDE/PC samplers reproduce the data distribution with many steps and not with one or
  two, and the geodesic and Euclidean samplers land on data sequences;
- bad inputs raise errors that say what is allowed.

psi is computed here by Gauss-Legendre quadrature of its defining integral (eq. vmf-psi),
exact for odd d up to the quadrature rule; geometry.py's table is not used.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import ive

from reprobook.papers.vmf_sphere_flow import geometry, samplers
from reprobook.papers.vmf_sphere_flow.fields import (
    euclidean_velocity,
    geodesic_velocity,
    marginal_score,
    marginal_velocity,
    sde_drift,
)
from reprobook.papers.vmf_sphere_flow.samplers import (
    count_nfe,
    sample_euclidean,
    sample_geodesic,
    sample_ode,
    sample_pc,
    sample_sde,
)

DT = torch.float64

# --- independent helpers --------------------------------------------------------------------------

_GL_X, _GL_W = (torch.from_numpy(a) for a in np.polynomial.legendre.leggauss(64))


def mean_cosine(d: int, kappa: float) -> float:
    """A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa), 0 at kappa = 0."""
    return 0.0 if kappa == 0 else float(ive(d / 2, kappa) / ive(d / 2 - 1, kappa))


def psi_quadrature(s: torch.Tensor, kappa: float, d: int) -> torch.Tensor:
    """psi(s, kappa) by 64-point Gauss-Legendre on the side of s away from the mean cosine A:

        psi = int_s^1 (r - A) e^{kappa (r - s)} (1 - r^2)^{(d-3)/2} dr / (1 - s^2)^{(d-1)/2}
            = - int_{-1}^s (same integrand) / (same denominator)

    (equal because the integrand integrates to 0 over [-1, 1]); the side is chosen to avoid
    cancellation. Exact up to the rule for odd d, where the integrand is smooth."""
    assert d % 2 == 1 and d >= 3
    A = mean_cosine(d, kappa)
    s64 = s.to(DT).clamp(-1 + 1e-9, 1 - 1e-9)[..., None]
    upper = s64 > A
    lo = torch.where(upper, s64, torch.full_like(s64, -1.0))
    hi = torch.where(upper, torch.ones_like(s64), s64)
    r = lo + (hi - lo) * (_GL_X + 1) / 2
    f = (r - A) * torch.exp(kappa * (r - s64)) * (1 - r * r) ** ((d - 3) / 2)
    integral = ((hi - lo) / 2 * (f * _GL_W)).sum(-1)
    return torch.where(upper[..., 0], integral, -integral) / (1 - s64[..., 0] ** 2) ** ((d - 1) / 2)


def make_psi(d: int):
    """psi(s, kappa) = psi_quadrature(s, kappa, d), as a callable for the library."""
    return lambda s, kappa: psi_quadrature(s, kappa, d).to(s.dtype)


def psi3(s: torch.Tensor, kappa: float) -> torch.Tensor:
    """psi for d = 3 in closed form (eq. vmf-psi; A = coth kappa - 1/kappa):

        psi = [(A - s)/kappa + 1/kappa^2 - e^{-kappa (1+s)} ((1+A)/kappa + 1/kappa^2)] / (1 - s^2).

    Fast, for the sampling tests. The numerator vanishes like (1 - s) at s = 1, so s is clamped to
    1 - 1e-7, where float64 still leaves about 1e-8 relative error; below kappa = 0.01 the 1/kappa^2
    terms cancel badly and the quadrature is used instead."""
    if kappa < 1e-2:
        return psi_quadrature(s, kappa, 3).to(s.dtype)
    A = 1 / math.tanh(kappa) - 1 / kappa
    x = s.to(DT).clamp(-1 + 1e-7, 1 - 1e-7)
    num = (
        (A - x) / kappa
        + 1 / kappa**2
        - torch.exp(-kappa * (1 + x)) * ((1 + A) / kappa + 1 / kappa**2)
    )
    return (num / (1 - x * x)).to(s.dtype)


def psi_const(d: int):
    """psi(s, 0) = 1/(d-1), used where only shapes and tangency matter."""
    return lambda s, kappa: torch.full_like(s, 1.0 / (d - 1))


def unit_columns(rng: np.random.Generator, d: int, V: int) -> torch.Tensor:
    W = rng.standard_normal((d, V))
    return torch.from_numpy(W / np.linalg.norm(W, axis=0))


def unit_rows(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    h = rng.standard_normal(shape)
    return torch.from_numpy(h / np.linalg.norm(h, axis=-1, keepdims=True))


def random_post(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.softmax(torch.from_numpy(2 * rng.standard_normal(shape)), -1)


# A finite data set: 4 sequences of length 3 over V = 3, with unequal prior weights.
SEQS = torch.tensor([[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 0, 1]])
PRIOR = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=DT)
V, L, D = 3, 3, 3
W_ONEHOT = torch.eye(D, dtype=DT)
ONEHOT = torch.nn.functional.one_hot(SEQS, V).to(DT)  # (N, L, V)


def enumeration_posterior(loglik_fn, W: torch.Tensor, seqs=SEQS, prior=PRIOR):
    """p(x^l = k | h) from p(seq | h) ∝ prior(seq) prod_l exp(loglik_fn(h^l, w_{seq_l}))."""
    onehot = torch.nn.functional.one_hot(seqs, W.shape[1]).to(DT)

    def posterior(h: torch.Tensor, level: float) -> torch.Tensor:
        ll = loglik_fn(h.to(DT), W, level)  # (B, L, V): per-position, per-token log-likelihood
        logit = torch.log(prior) + torch.einsum("blv,nlv->bn", ll, onehot)
        q = torch.softmax(logit, -1)  # (B, N)
        return torch.einsum("bn,nlv->blv", q, onehot).to(h.dtype)

    return posterior


def vmf_loglik(h, W, kappa):
    return kappa * (h @ W)  # vMF normalisers do not depend on the mean, so they cancel


def slerp_loglik(h, W, t):
    """log density of h_t = slerp(h_0, w, t), h_0 uniform on S^{d-1}, at angle a from w:
    (d-2) log[ sin(a / (1-t)) / sin a ] for a < (1-t) pi, -inf beyond (up to a constant)."""
    t = min(t, 1 - 1e-3)
    a = torch.arccos((h @ W).clamp(-1, 1)).clamp_min(1e-9)
    inside = a < (1 - t) * math.pi
    ratio = torch.sin(a / (1 - t)).clamp_min(1e-300) / torch.sin(a).clamp_min(1e-300)
    d = W.shape[0]
    return torch.where(inside, (d - 2) * torch.log(ratio), torch.full_like(a, -1e4))


def gauss_loglik(x, W, t):
    """log N(x; t w, (1-t)^2 I) up to a constant, for x_t = (1-t) x_0 + t w."""
    t = min(t, 1 - 1e-3)
    dist2 = (x * x).sum(-1, keepdim=True) - 2 * t * (x @ W) + t * t * (W * W).sum(0)
    return -dist2 / (2 * (1 - t) ** 2)


def total_variation(tokens: torch.Tensor) -> tuple[float, float]:
    """(TV to PRIOR over the 4 sequences plus an 'off the data' cell, fraction off the data)."""
    match = (tokens[:, None, :] == SEQS[None]).all(-1)  # (B, N)
    emp = match.to(DT).mean(0)
    off = 1 - float(match.any(-1).to(DT).mean())
    return 0.5 * (float((emp - PRIOR).abs().sum()) + off), off


VMF_ORACLE = enumeration_posterior(vmf_loglik, W_ONEHOT)
PSI3 = psi3
KAPPA_MAX = 30.0


# --- the test's psi -------------------------------------------------------------------------------


def test_quadrature_psi_matches_closed_forms():
    s = torch.linspace(-0.999, 0.999, 41, dtype=DT)
    for d in (3, 5, 7):
        assert torch.allclose(
            psi_quadrature(s, 0.0, d), torch.full_like(s, 1 / (d - 1)), atol=1e-12
        )
    # d = 3, elementary (eq. vmf-psi); psi(-1) = (1 + A)/2 and psi(1) = (1 - A)/2 by l'Hopital
    for k in (0.5, 4.0, 30.0):
        A = 1 / math.tanh(k) - 1 / k
        ref = ((A - s) / k + 1 / k**2 - torch.exp(-k * (1 + s)) * ((1 + A) / k + 1 / k**2)) / (
            1 - s**2
        )
        quad = psi_quadrature(s, k, 3)
        assert torch.allclose(quad, ref, rtol=1e-9, atol=1e-12)
        assert (quad > 0).all()
        edge = torch.tensor(
            [-1.0, -1 + 1e-9, 1 - 1e-9, 1.0], dtype=DT
        )  # bounded limits at s = -1 and 1
        # psi3 clamps s to 1 - 1e-7 (relative error 1.5e-6 seen at s = -1, kappa = 30)
        assert torch.allclose(psi3(edge, k), psi_quadrature(edge, k, 3), rtol=5e-6)
        limits = torch.tensor([(1 + A) / 2, (1 - A) / 2], dtype=DT)
        assert torch.allclose(psi_quadrature(edge, k, 3)[[0, 3]], limits, rtol=1e-7)


# --- fields ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fields_are_tangent(seed):
    rng = np.random.default_rng(seed)
    B, Ls, d, Vs = 4, 5, 7, 9
    W, h, post = unit_columns(rng, d, Vs), unit_rows(rng, B, Ls, d), random_post(rng, B, Ls, Vs)
    psi = make_psi(d)
    kappa = 40.0
    for u in (
        marginal_velocity(h, post, W, kappa, 2.5, psi),
        marginal_score(h, post, W, kappa),
        sde_drift(h, post, W, kappa, 2.5, psi, 0.7),
        geodesic_velocity(h, post, W, 0.3),
    ):
        assert u.shape == h.shape
        assert u.norm(dim=-1).max() > 1e-3  # not trivially zero
        assert (h * u).sum(-1).abs().max() < 1e-6
    # float32 as used with a network: still tangent to 1e-6 relative to the field's size
    h32, p32, W32 = h.float(), post.float(), W.float()
    u32 = marginal_score(h32, p32, W32, kappa)
    assert ((h32 * u32).sum(-1).abs() / u32.norm(dim=-1)).max() < 1e-6


def test_matmul_form_equals_explicit_sum():
    rng = np.random.default_rng(3)
    B, Ls, d, Vs = 3, 4, 5, 6
    W, h, post = unit_columns(rng, d, Vs), unit_rows(rng, B, Ls, d), random_post(rng, B, Ls, Vs)
    x = torch.from_numpy(rng.standard_normal((B, Ls, d)))
    psi, kappa, kdot, t = make_psi(d), 12.0, 3.0, 0.4
    vel, sc, geo = torch.zeros_like(h), torch.zeros_like(h), torch.zeros_like(h)
    for k in range(Vs):
        w = W[:, k]
        s = h @ w  # (B, L)
        proj = w - s[..., None] * h  # P_h w_k
        vel += (post[..., k] * kdot * psi(s, kappa))[..., None] * proj
        sc += (post[..., k] * kappa)[..., None] * proj
        a = torch.arccos(s)
        geo += (post[..., k] * a / torch.sin(a))[..., None] * proj / (1 - t)
    eu = (torch.einsum("blv,dv->bld", post, W) - x) / (1 - t)
    assert torch.allclose(marginal_velocity(h, post, W, kappa, kdot, psi), vel, atol=1e-12)
    assert torch.allclose(marginal_score(h, post, W, kappa), sc, atol=1e-12)
    assert torch.allclose(sde_drift(h, post, W, kappa, kdot, psi, 0.5), vel + 0.5 * sc, atol=1e-12)
    assert torch.allclose(geodesic_velocity(h, post, W, t), geo, atol=1e-10)
    assert torch.allclose(euclidean_velocity(x, post, W, t), eu, atol=1e-12)


def test_velocity_at_kappa_zero_uses_uniform_psi():
    """At kappa = 0, psi = 1/(d-1): the velocity is kappa_dot/(d-1) P_h E[w]."""
    rng = np.random.default_rng(4)
    W, h, post = unit_columns(rng, 5, 4), unit_rows(rng, 2, 3, 5), random_post(rng, 2, 3, 4)
    u = marginal_velocity(h, post, W, 0.0, 8.0, make_psi(5))
    assert torch.allclose(u, 8.0 / 4 * marginal_score(h, post, W, 1.0), atol=1e-12)


def _sphere_fd_gradient(f, h: torch.Tensor, step: float = 1e-5) -> torch.Tensor:
    """Riemannian gradient of f at unit h (d,) by central differences along an orthonormal
    tangent basis, moving on the sphere through the exponential map."""
    d = h.shape[0]
    q, _ = torch.linalg.qr(torch.cat([h[:, None], torch.eye(d, dtype=DT)], 1))
    basis = q[:, 1:d].T  # (d-1, d) orthonormal, perpendicular to h
    grad = torch.zeros(d, dtype=DT)
    for e in basis:
        plus = math.cos(step) * h + math.sin(step) * e
        minus = math.cos(step) * h - math.sin(step) * e
        grad += (f(plus) - f(minus)) / (2 * step) * e
    return grad


@pytest.mark.parametrize("kappa", [0.7, 5.0, 25.0])
def test_score_is_gradient_of_log_mixture_two_tokens(kappa):
    rng = np.random.default_rng(5)
    d = 4
    W = unit_columns(rng, d, 2)
    pi = torch.tensor([0.35, 0.65], dtype=DT)

    def log_mix(h):  # log sum_k pi_k vMF(h; w_k, kappa), shared normaliser dropped
        return float(torch.logsumexp(torch.log(pi) + kappa * (h @ W), 0))

    for _ in range(4):
        h = unit_rows(rng, d)
        post = torch.softmax(torch.log(pi) + kappa * (h @ W), 0)  # exact p(k | h)
        score = marginal_score(h[None, None], post[None, None], W, kappa)[0, 0]
        fd = _sphere_fd_gradient(log_mix, h)
        assert torch.allclose(score, fd, rtol=1e-6, atol=1e-6 * kappa), (score, fd)


def test_score_is_gradient_of_log_mixture_coupled_positions():
    """A mixture over whole sequences couples the positions; the per-position marginal score is
    still the gradient of log p(h) with respect to that position."""
    rng = np.random.default_rng(6)
    d, kappa = 3, 6.0
    W = unit_columns(rng, d, V)
    post_fn = enumeration_posterior(vmf_loglik, W)
    h = unit_rows(rng, 1, L, d)

    def log_p(hh):
        return float(
            torch.logsumexp(
                torch.log(PRIOR) + kappa * torch.einsum("ld,dv,nlv->n", hh, W, ONEHOT), 0
            )
        )

    score = marginal_score(h, post_fn(h, kappa), W, kappa)[0]
    for pos in range(L):

        def f(v, pos=pos):
            hh = h[0].clone()
            hh[pos] = v
            return log_p(hh)

        assert torch.allclose(score[pos], _sphere_fd_gradient(f, h[0, pos]), rtol=1e-6, atol=1e-6)


def test_geodesic_velocity_is_log_map_over_remaining_time():
    rng = np.random.default_rng(7)
    d, Vs = 6, 5
    W = unit_columns(rng, d, Vs)
    h = unit_rows(rng, 2, 3, d)
    k = torch.from_numpy(rng.integers(0, Vs, (2, 3)))
    post = torch.nn.functional.one_hot(k, Vs).to(DT)
    for t in (0.0, 0.6):
        u = geodesic_velocity(h, post, W, t)
        landed = samplers._retract(h, (1 - t) * u, "exp")  # exp_h(log_h(w_k)) = w_k
        assert torch.allclose(landed, W.T[k], atol=1e-9)


def test_euclidean_velocity_reaches_the_posterior_mean_and_is_capped():
    rng = np.random.default_rng(8)
    W = unit_columns(rng, 4, 3)
    x = torch.from_numpy(rng.standard_normal((2, 3, 4)))
    post = random_post(rng, 2, 3, 3)
    mean = post @ W.T
    u = euclidean_velocity(x, post, W, 0.25)
    assert torch.allclose(x + 0.75 * u, mean, atol=1e-12)
    assert torch.allclose(euclidean_velocity(x, post, W, 1.0), (mean - x) / 1e-3, rtol=1e-9)


# --- samplers: bookkeeping ------------------------------------------------------------------------


def _recording(posterior, log):
    def wrapped(h, level):
        log.append((h.clone(), level))
        return posterior(h, level)

    return wrapped


def test_count_nfe_formula():
    assert count_nfe(8) == 9
    # 8 predictor steps with 3 correctors each are 32 NFE without the read-out, 33 with it
    assert count_nfe(8, 3) == 8 + 24 + 1
    assert count_nfe(32, 1, 4) == 32 + 8 + 1
    assert count_nfe(10, 2, 3) == 10 + 6 + 1


@pytest.mark.parametrize(
    "steps,correctors,every", [(1, 0, 1), (5, 0, 1), (4, 2, 1), (7, 3, 2), (6, 1, 4)]
)
def test_nfe_is_exact_and_levels_are_right(steps, correctors, every):
    log: list = []
    g = torch.Generator().manual_seed(0)
    out = sample_pc(
        _recording(VMF_ORACLE, log),
        W_ONEHOT,
        L,
        5,
        KAPPA_MAX,
        steps,
        PSI3,
        correctors=correctors,
        corrector_every=every,
        generator=g,
    )
    assert out.nfe == len(log) == count_nfe(steps, correctors, every)
    expected = []
    for i in range(steps):
        expected.append(KAPPA_MAX * i / steps)
        if (i + 1) % every == 0:
            expected += [KAPPA_MAX * (i + 1) / steps] * correctors
    expected.append(KAPPA_MAX)
    assert [lvl for _, lvl in log] == pytest.approx(expected)
    assert out.tokens.shape == (5, L) and out.tokens.dtype == torch.int64
    assert out.state.shape == (5, L, D)


def test_nfe_of_ode_sde_and_baselines():
    for fn, kw in ((sample_ode, {}), (sample_sde, {"sigma2": 0.5})):
        log: list = []
        out = fn(_recording(VMF_ORACLE, log), W_ONEHOT, L, 3, KAPPA_MAX, 6, PSI3, **kw)
        assert out.nfe == len(log) == 7
    for fn in (sample_geodesic, sample_euclidean):
        log = []
        out = fn(
            _recording(lambda h, t: torch.full(h.shape[:-1] + (V,), 1 / V, dtype=h.dtype), log),
            W_ONEHOT,
            L,
            3,
            6,
        )
        assert out.nfe == len(log) == 7
        assert [t for _, t in log] == pytest.approx([i / 6 for i in range(6)] + [1.0])


@pytest.mark.parametrize("retraction", ["normalise", "exp"])
def test_every_state_has_unit_norm(retraction):
    g = torch.Generator().manual_seed(1)
    runs = [
        lambda p: sample_ode(
            p, W_ONEHOT, L, 64, KAPPA_MAX, 5, PSI3, retraction=retraction, generator=g
        ),
        lambda p: sample_pc(
            p,
            W_ONEHOT,
            L,
            64,
            KAPPA_MAX,
            3,
            PSI3,
            correctors=2,
            eps0=0.5,
            retraction=retraction,
            generator=g,
        ),
        lambda p: sample_sde(
            p, W_ONEHOT, L, 64, KAPPA_MAX, 4, PSI3, sigma2=2.0, retraction=retraction, generator=g
        ),
        lambda p: sample_geodesic(p, W_ONEHOT, L, 64, 4, retraction=retraction, generator=g),
    ]
    for run in runs:
        log: list = []
        out = run(_recording(VMF_ORACLE, log))
        for h, _ in log:  # the start, every predictor and corrector step, and the final state
            assert (h.norm(dim=-1) - 1).abs().max() < 1e-12
        assert (out.state.norm(dim=-1) - 1).abs().max() < 1e-12


def test_noise_scales_of_corrector_and_sde():
    """With embeddings w and -w and a uniform posterior, E[w | h] = 0: the score is zero and, with
    a constant psi, so is the velocity. Every move is then pure noise v = sqrt(2 eps) P_h xi, and
    under the normalising retraction |v|^2 = 1/(h . h')^2 - 1 has mean 2 eps (d - 1)."""
    d = 3
    w = torch.tensor([1.0, 0.0, 0.0], dtype=DT)
    W = torch.stack([w, -w], 1)

    def flat(h, level):
        return torch.full(h.shape[:-1] + (2,), 0.5, dtype=h.dtype)

    def mean_sq_step(h0, h1):
        return float((1 / (h0 * h1).sum(-1) ** 2 - 1).mean())

    log: list = []
    S, eps0, B = 4, 0.02, 20000
    sample_pc(
        _recording(flat, log),
        W,
        3,
        B,
        KAPPA_MAX,
        S,
        psi_const(d),
        correctors=1,
        eps0=eps0,
        generator=torch.Generator().manual_seed(3),
    )
    states = [h for h, _ in log]  # P0, C0, P1, C1, ..., P3, C3, read-out
    for i in range(S):
        assert torch.allclose(states[2 * i], states[2 * i + 1], atol=1e-12)  # predictor: no move
        eps = eps0 * (1 - i / S) ** 2
        assert mean_sq_step(states[2 * i + 1], states[2 * i + 2]) == pytest.approx(
            2 * eps * (d - 1), rel=0.03
        )
    log = []
    sigma2 = 0.5
    sample_sde(
        _recording(flat, log),
        W,
        3,
        B,
        KAPPA_MAX,
        S,
        psi_const(d),
        sigma2=sigma2,
        generator=torch.Generator().manual_seed(4),
    )
    for i in range(S):  # Euler-Maruyama noise sqrt(2 sigma^2 dt) P_h xi
        assert mean_sq_step(log[i][0], log[i + 1][0]) == pytest.approx(
            2 * sigma2 / S * (d - 1), rel=0.03
        )


def test_retractions_keep_unit_norm_for_large_steps():
    rng = np.random.default_rng(9)
    h = unit_rows(rng, 50, 6)
    v = torch.from_numpy(10 * rng.standard_normal((50, 6)))
    for kind in ("normalise", "exp"):
        y = samplers._retract(h, v, kind)
        assert (y.norm(dim=-1) - 1).abs().max() < 1e-12
    # the exp map moves a distance |P_h v| along the great circle (here below pi)
    vt = geometry.tangent(h, 0.3 * v / v.norm(dim=-1, keepdim=True))
    y = samplers._retract(h, vt, "exp")
    assert torch.allclose(torch.arccos((h * y).sum(-1).clamp(-1, 1)), vt.norm(dim=-1), atol=1e-7)


def test_same_generator_seed_same_samples():
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(11)
        runs.append(
            sample_pc(VMF_ORACLE, W_ONEHOT, L, 32, KAPPA_MAX, 4, PSI3, correctors=1, generator=g)
        )
    assert torch.equal(runs[0].tokens, runs[1].tokens) and torch.equal(runs[0].state, runs[1].state)


def test_forbidden_tokens_are_never_read_out():
    g = torch.Generator().manual_seed(2)
    out = sample_ode(VMF_ORACLE, W_ONEHOT, L, 400, KAPPA_MAX, 8, PSI3, generator=g, forbid=0)
    assert (out.tokens != 0).all()
    g = torch.Generator().manual_seed(2)
    free = sample_ode(VMF_ORACLE, W_ONEHOT, L, 400, KAPPA_MAX, 8, PSI3, generator=g)
    assert (free.tokens == 0).any()  # the ban did something
    for fn in (sample_geodesic, sample_euclidean):
        out = fn(
            lambda h, t: torch.full(h.shape[:-1] + (V,), 1 / V, dtype=h.dtype),
            W_ONEHOT,
            L,
            20,
            2,
            forbid=[0, 2],
        )
        assert (out.tokens == 1).all()


# --- samplers with exact oracles: the data distribution -------------------------------------------

N_SAMPLES = 4000


def _tv(run, seed=0):
    g = torch.Generator().manual_seed(seed)
    return total_variation(run(g).tokens)


def _mean_true_cosine(state: torch.Tensor, W: torch.Tensor) -> float:
    """Mean over samples and positions of max_k w_k . h^l: at kappa_max = 30 the nearest token is
    the generating one with near certainty, so this estimates E[w_x . h] = A_d(kappa_max)."""
    return float((state @ W).max(-1).values.mean())


def test_ode_reproduces_data_with_many_steps_not_with_one_or_two():
    outs = {}
    for S in (1, 2, 64):
        g = torch.Generator().manual_seed(0)
        outs[S] = sample_ode(VMF_ORACLE, W_ONEHOT, L, N_SAMPLES, KAPPA_MAX, S, PSI3, generator=g)
    tv = {S: total_variation(out.tokens) for S, out in outs.items()}
    tv_64, off_64 = tv[64]
    # the continuous state is the vMF mixture at kappa_max: mean cosine 0.96741 seen against
    # A_3(30) = 0.96667 (Monte Carlo sd 0.0003); 0.96636 with 256 steps
    assert abs(_mean_true_cosine(outs[64].state, W_ONEHOT) - mean_cosine(3, KAPPA_MAX)) < 2e-3
    assert off_64 == 0.0  # every sample is a data sequence
    # Monte Carlo noise alone gives a TV of about 0.01 at 4000 samples (0.016 seen, seed 0); the
    # Euler bias shrinks like 1/S (0.021, 0.007, 0.003 at 32, 100, 400 steps with 20000 samples)
    assert tv_64 < 0.03
    assert min(tv[1][0], tv[2][0]) > 0.15  # 0.22 and 0.21 seen: one or two steps miss the coupling


def test_wrong_psi_is_detected():
    """Negative control: psi = 1/(d-1) at every kappa (right only at kappa = 0) overshoots, and
    every sample collapses onto its token (mean cosine 1.0 seen), although the read-out tokens
    still look right (TV 0.014): the token test alone could not see a wrong psi."""
    g = torch.Generator().manual_seed(0)
    out = sample_ode(VMF_ORACLE, W_ONEHOT, L, N_SAMPLES, KAPPA_MAX, 64, psi_const(3), generator=g)
    assert _mean_true_cosine(out.state, W_ONEHOT) - mean_cosine(3, KAPPA_MAX) > 0.02


def test_ode_with_non_orthogonal_embeddings_in_d5():
    """d = 5 > V = 3, random unit embeddings (pairwise cosines 0.31, 0.34, -0.29), psi by
    quadrature."""
    W5 = unit_columns(np.random.default_rng(12), 5, V)
    oracle = enumeration_posterior(vmf_loglik, W5)
    outs = {}
    for S in (2, 64):
        g = torch.Generator().manual_seed(0)
        outs[S] = sample_ode(oracle, W5, L, 2000, KAPPA_MAX, S, make_psi(5), generator=g)
    tv_64, off_64 = total_variation(outs[64].tokens)
    assert off_64 == 0.0 and tv_64 < 0.04  # 0.0185 seen (Monte Carlo alone: about 0.015)
    assert total_variation(outs[2].tokens)[0] > 0.15  # 0.285 seen
    # 0.9375 seen against A_5(30) = 0.9345: an Euler bias (0.9357 with 256 steps); psi = 1/(d-1)
    # instead would give 1.0000
    assert abs(_mean_true_cosine(outs[64].state, W5) - mean_cosine(5, KAPPA_MAX)) < 6e-3


def test_exp_retraction_and_sde_also_reproduce_data():
    tv_exp, off_exp = _tv(
        lambda g: sample_ode(
            VMF_ORACLE, W_ONEHOT, L, N_SAMPLES, KAPPA_MAX, 64, PSI3, retraction="exp", generator=g
        )
    )
    tv_sde, off_sde = _tv(
        lambda g: sample_sde(
            VMF_ORACLE, W_ONEHOT, L, N_SAMPLES, KAPPA_MAX, 64, PSI3, sigma2=1.0, generator=g
        )
    )
    assert off_exp == 0.0 and tv_exp < 0.03
    assert off_sde < 0.005 and tv_sde < 0.03


def test_correctors_help_a_short_predictor():
    """Same 8 predictor steps, with and without 10 Langevin correctors after each (0.13 against
    0.05 seen). Not at matched NFE: with this oracle a 64-step ODE (0.016) beats both."""
    tv_ode, _ = _tv(
        lambda g: sample_ode(VMF_ORACLE, W_ONEHOT, L, N_SAMPLES, KAPPA_MAX, 8, PSI3, generator=g)
    )
    tv_pc, _ = _tv(
        lambda g: sample_pc(
            VMF_ORACLE,
            W_ONEHOT,
            L,
            N_SAMPLES,
            KAPPA_MAX,
            8,
            PSI3,
            correctors=10,
            eps0=0.05,
            generator=g,
        )
    )
    assert tv_pc < tv_ode - 0.04


def test_baselines_land_on_data_with_their_oracles():
    geo = enumeration_posterior(slerp_loglik, W_ONEHOT)
    euc = enumeration_posterior(gauss_loglik, W_ONEHOT)
    tv_geo, off_geo = _tv(lambda g: sample_geodesic(geo, W_ONEHOT, L, N_SAMPLES, 32, generator=g))
    tv_euc, off_euc = _tv(lambda g: sample_euclidean(euc, W_ONEHOT, L, N_SAMPLES, 32, generator=g))
    assert off_geo < 0.01 and off_euc < 0.01
    assert tv_geo < 0.03 and tv_euc < 0.03  # 0.010 and 0.014 seen
    # one step jumps every sample to the posterior mean at t = 0, i.e. the prior's marginals:
    # all land on the most likely sequence, TV = 1 - 0.4
    for fn, post in ((sample_geodesic, geo), (sample_euclidean, euc)):
        tv1, _ = _tv(lambda g, fn=fn, post=post: fn(post, W_ONEHOT, L, 500, 1, generator=g))
        assert tv1 > 0.5


# --- bad inputs -----------------------------------------------------------------------------------


def test_field_inputs_are_checked():
    rng = np.random.default_rng(10)
    W, h, post = unit_columns(rng, 4, 3), unit_rows(rng, 2, 5, 4), random_post(rng, 2, 5, 3)
    psi = psi_const(4)
    with pytest.raises(ValueError, match="unit"):
        marginal_score(h, post, 2 * W, 1.0)
    with pytest.raises(ValueError, match="d = 4"):
        marginal_score(h[..., :3], post, W, 1.0)
    with pytest.raises(ValueError, match="post must have shape"):
        marginal_score(h, post[..., :2], W, 1.0)
    with pytest.raises(ValueError, match="kappa must be a finite real number >= 0"):
        marginal_velocity(h, post, W, -1.0, 1.0, psi)
    with pytest.raises(ValueError, match="finite"):
        marginal_velocity(h, post, W, 1.0, float("nan"), psi)
    with pytest.raises(ValueError, match="broadcastable"):
        marginal_velocity(h, post, W, 1.0, 1.0, lambda s, k: torch.ones(7))
    with pytest.raises(TypeError, match="callable"):
        marginal_velocity(h, post, W, 1.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="sigma2"):
        sde_drift(h, post, W, 1.0, 1.0, psi, -0.1)
    with pytest.raises(ValueError, match=r"t must lie in \[0, 1\]"):
        geodesic_velocity(h, post, W, 1.5)
    with pytest.raises(ValueError, match=r"t must lie in \[0, 1\]"):
        euclidean_velocity(h, post, W, -0.1)
    with pytest.raises(ValueError, match="W must be a"):
        marginal_score(h, post, W[0], 1.0)


def test_sampler_inputs_are_checked():
    base = dict(
        posterior=VMF_ORACLE, W=W_ONEHOT, L=L, batch=4, kappa_max=KAPPA_MAX, steps=3, psi=PSI3
    )
    for bad, match in [
        ({"steps": 0}, "steps"),
        ({"steps": 2.5}, "steps"),
        ({"batch": 0}, "batch"),
        ({"L": -1}, "L must"),
        ({"kappa_max": 0.0}, "kappa_max"),
        ({"retraction": "project"}, "retraction"),
        ({"forbid": 3}, "forbid"),
        ({"forbid": [0, 1, 2]}, "no token"),
        ({"correctors": -1}, "correctors"),
        ({"corrector_every": 0}, "corrector_every"),
        ({"eps0": -0.1}, "eps0"),
    ]:
        with pytest.raises(ValueError, match=match):
            sample_pc(**{**base, **bad})
    with pytest.raises(ValueError, match="sigma2"):
        sample_sde(**base, sigma2=-1.0)
    with pytest.raises(TypeError, match="generator"):
        sample_ode(**base, generator=0)
    with pytest.raises(TypeError, match="psi"):
        sample_ode(**{**base, "psi": None})
    with pytest.raises(ValueError, match="retraction"):
        sample_geodesic(VMF_ORACLE, W_ONEHOT, L, 4, 3, retraction="none")


def test_bad_posterior_outputs_are_refused():
    base = dict(W=W_ONEHOT, L=L, batch=4, kappa_max=KAPPA_MAX, steps=2, psi=PSI3)
    with pytest.raises(ValueError, match=r"shape \(B, L, V\)"):
        sample_ode(lambda h, k: torch.full((4, L, 2), 0.5, dtype=DT), **base)
    with pytest.raises(ValueError, match="softmax"):
        sample_ode(
            lambda h, k: torch.ones(4, L, V, dtype=DT), **base
        )  # logits-like, not normalised
    with pytest.raises(TypeError, match="callable"):
        sample_ode(None, **base)
    with pytest.raises(ValueError, match=r"shape \(B, L, V\)"):
        sample_euclidean(lambda x, t: torch.softmax(x[..., :2], -1), W_ONEHOT, L, 4, 2)
