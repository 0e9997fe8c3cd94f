"""Tests of reprobook.papers.vmf_sphere_flow.paths (the vMF, geodesic and Euclidean noise paths,
arXiv 2605.05629) and of the ``path=`` option of ``PosteriorTransformer``.

The samplers are checked against the laws they should have (the angle law of a uniform point, the
Gaussian moments, the vMF mean cosine), the likelihoods against their closed forms (G) and (E), and
both together by a Bayes-calibration check: the posterior softmax(emission_loglik) must be
calibrated for states drawn by ``noisy_states``. Statistical checks use fixed seeds and 4-standard-
error (or KS p > 0.01) bounds; the calibration and density checks also show that a deliberately
wrong likelihood fails them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.integrate import cumulative_trapezoid

from reprobook.papers.vmf_sphere_flow import data, paths
from reprobook.papers.vmf_sphere_flow.geometry import mean_cosine
from reprobook.papers.vmf_sphere_flow.model import PosteriorTransformer

LEVELS = {"vmf": 3.0, "geodesic": 0.4, "euclidean": 0.4}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _draw(path: str, level: float, d: int, n: int, seed: int, axis: int = 0) -> np.ndarray:
    """n noisy states (n, d) for the clean embedding e_axis at one level."""
    mean = torch.zeros(n, 1, d, dtype=torch.float64)
    mean[..., axis] = 1.0
    return paths.noisy_states(mean, torch.full((n,), float(level)), path, _gen(seed))[:, 0].numpy()


def _z(v: np.ndarray) -> np.ndarray:
    """Sample mean over axis 0 in units of its standard error."""
    return v.mean(0) / (v.std(0, ddof=1) / math.sqrt(v.shape[0]))


def _softmax(ll: np.ndarray) -> np.ndarray:
    ll = ll - ll.max(-1, keepdims=True)
    p = np.exp(ll)
    return p / p.sum(-1, keepdims=True)


def _on_circle(angles, d: int) -> np.ndarray:
    """Points cos(a) e_0 + sin(a) e_1 of S^{d-1}, shape (1, N, d)."""
    a = np.asarray(angles, dtype=float)
    h = np.zeros((1, a.size, d))
    h[0, :, 0], h[0, :, 1] = np.cos(a), np.sin(a)
    return h


# ---------------------------------------------------------------------------------------------
# levels


@pytest.mark.parametrize("path", paths.PATHS)
def test_sample_levels_range_dtype_and_uniformity(path):
    kappa_max = 7.5
    lv = paths.sample_levels(4000, path, kappa_max, _gen(0))
    assert lv.shape == (4000,) and lv.dtype == torch.float64
    top = kappa_max if path == "vmf" else 1.0
    assert float(lv.min()) >= 0.0 and float(lv.max()) <= top
    assert stats.kstest(lv.numpy() / top, "uniform").pvalue > 0.01
    assert torch.equal(lv, paths.sample_levels(4000, path, kappa_max, _gen(0)))


# ---------------------------------------------------------------------------------------------
# noisy_states, geodesic


@pytest.mark.parametrize("t", [0.3, 0.7])
def test_geodesic_angle_is_the_uniform_angle_shrunk_by_one_minus_t(t):
    # d = 3: the angle a0 of a uniform point has CDF (1 - cos a0)/2, so cos(a / (1 - t)) ~ U(-1, 1)
    h = _draw("geodesic", t, 3, 4000, seed=1)
    assert np.allclose(np.linalg.norm(h, axis=-1), 1.0, atol=1e-12)
    alpha = np.arccos(np.clip(h[:, 0], -1, 1))
    assert alpha.max() <= (1 - t) * math.pi + 1e-9
    assert stats.kstest(np.cos(alpha / (1 - t)), stats.uniform(-1, 2).cdf).pvalue > 0.01
    # the wrong shrink factor is rejected: the check has power
    assert stats.kstest(np.cos(alpha / (1 - t + 0.05)), stats.uniform(-1, 2).cdf).pvalue < 1e-6


def test_geodesic_angle_law_d2_and_d5():
    # d = 2: the angle of a uniform point is U(0, pi); d = 5: (1 + cos a0)/2 ~ Beta(2, 2)
    t = 0.5
    h2 = _draw("geodesic", t, 2, 4000, seed=2)
    assert np.allclose(np.linalg.norm(h2, axis=-1), 1.0, atol=1e-12)
    a2 = np.arccos(np.clip(h2[:, 0], -1, 1)) / (1 - t)
    assert stats.kstest(a2, stats.uniform(0, math.pi).cdf).pvalue > 0.01
    # both sides of the mean are visited equally
    assert abs(_z(np.sign(h2[:, 1:2]))[0]) < 4
    h5 = _draw("geodesic", t, 5, 4000, seed=3)
    a5 = np.arccos(np.clip(h5[:, 0], -1, 1)) / (1 - t)
    assert stats.kstest((1 + np.cos(a5)) / 2, stats.beta(2, 2).cdf).pvalue > 0.01


def test_geodesic_is_rotation_invariant_about_the_mean():
    # d = 3, mean e_0: the azimuth of h about e_0 must be uniform on (-pi, pi]
    h = _draw("geodesic", 0.5, 3, 4000, seed=4)
    az = np.arctan2(h[:, 2], h[:, 1])
    assert stats.kstest(az, stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > 0.01


def test_geodesic_is_the_slerp_of_the_first_uniform_draw():
    # White-box replay: the uniform point z is the first draw (a normalised Gaussian) from the
    # generator, so h must equal the textbook slerp sin((1-t) O)/sin O z + sin(t O)/sin O w.
    B, L, d = 5, 7, 5
    rng = np.random.default_rng(0)
    w = rng.standard_normal((B, L, d))
    w /= np.linalg.norm(w, axis=-1, keepdims=True)
    t = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    h = paths.noisy_states(torch.as_tensor(w), torch.as_tensor(t), "geodesic", _gen(11)).numpy()
    z = torch.randn(B, L, d, generator=_gen(11), dtype=torch.float64).numpy()
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    om = np.arccos(np.clip((z * w).sum(-1, keepdims=True), -1, 1))
    tt = t[:, None, None]
    slerp = (np.sin((1 - tt) * om) * z + np.sin(tt * om) * w) / np.sin(om)
    assert np.allclose(h, slerp, atol=1e-10)


def test_geodesic_endpoints():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3, 6))
    w /= np.linalg.norm(w, axis=-1, keepdims=True)
    w = torch.as_tensor(w)
    h1 = paths.noisy_states(w, torch.ones(4), "geodesic", _gen(0))
    assert torch.allclose(h1, w, atol=1e-12, rtol=0)
    # t = 0: a uniform point, whatever the mean: mean cosine 0 within 4 standard errors
    h0 = _draw("geodesic", 0.0, 3, 4000, seed=5)
    assert abs(_z(h0[:, :1])[0]) < 4
    assert stats.kstest(h0[:, 0], stats.uniform(-1, 2).cdf).pvalue > 0.01  # Archimedes, d = 3


# ---------------------------------------------------------------------------------------------
# noisy_states, euclidean and vmf


@pytest.mark.parametrize("t", [0.25, 0.6])
def test_euclidean_mean_and_covariance(t):
    n, d = 20000, 3
    x = _draw("euclidean", t, d, n, seed=6, axis=1)
    w = np.eye(d)[1]
    se_mean = (1 - t) / math.sqrt(n)
    assert np.all(np.abs(x.mean(0) - t * w) < 4 * se_mean)
    var = x.var(0, ddof=1)
    assert np.all(np.abs(var - (1 - t) ** 2) < 4 * (1 - t) ** 2 * math.sqrt(2 / (n - 1)))
    cov = np.cov(x.T)
    off = cov[~np.eye(d, dtype=bool)]
    assert np.all(np.abs(off) < 4 * (1 - t) ** 2 / math.sqrt(n))
    # Gaussian: the standardised coordinates pass a normality test
    assert stats.kstest((x[:, 0] - 0.0) / (1 - t), "norm").pvalue > 0.01


def test_euclidean_replay_and_endpoint():
    # white-box replay: z is the first Gaussian draw, x = (1 - t) z + t w exactly
    w = torch.eye(4, dtype=torch.float64)[torch.tensor([[0, 1, 2], [3, 3, 0]])]
    t = torch.tensor([0.3, 1.0], dtype=torch.float64)
    x = paths.noisy_states(w, t, "euclidean", _gen(3))
    z = torch.randn(w.shape, generator=_gen(3), dtype=torch.float64)
    assert torch.allclose(x, (1 - t[:, None, None]) * z + t[:, None, None] * w, atol=1e-14)
    assert torch.equal(x[1], w[1])  # t = 1 returns the mean exactly


@pytest.mark.parametrize("kappa", [0.0, 2.0, 10.0])
def test_vmf_mean_cosine(kappa):
    n, d = 4000, 4
    h = _draw("vmf", kappa, d, n, seed=7, axis=2)
    assert np.allclose(np.linalg.norm(h, axis=-1), 1.0, atol=1e-12)
    s = h[:, 2:3]
    se = s.std(ddof=1) / math.sqrt(n)
    assert abs(s.mean() - float(mean_cosine(d, kappa))) < 4 * se


def test_noisy_states_deterministic_and_shapes():
    w = torch.eye(3, dtype=torch.float64)[torch.tensor([[0, 1], [2, 0], [1, 1]])]
    for path, lv in (
        ("vmf", [0.0, 1.0, 5.0]),
        ("geodesic", [0.0, 0.5, 1.0]),
        ("euclidean", [0.0, 0.5, 1.0]),
    ):
        a = paths.noisy_states(w, torch.tensor(lv), path, _gen(9))
        b = paths.noisy_states(w, torch.tensor(lv), path, _gen(9))
        assert a.shape == (3, 2, 3) and a.dtype == torch.float64 and torch.equal(a, b)


# ---------------------------------------------------------------------------------------------
# emission_loglik: Bayes calibration


def _calibration_z(path: str, level: float, d: int = 5, n: int = 20000, seed: int = 0, loglik=None):
    """z-scores of E[(1{x=k} - p_k(h)) f_k(h)] for f = 1, p_k, w_k.h, (w_k.h)^2 (rows) and the
    V = 3 tokens (columns), x uniform on 3 tokens with embeddings e_0, e_1, e_2 of R^d."""
    loglik = loglik or paths.emission_loglik
    g = _gen(seed)
    W = np.eye(d)[:, :3]
    x = torch.randint(0, 3, (n,), generator=g)
    mean = torch.as_tensor(W.T)[x][:, None, :]
    h = paths.noisy_states(mean, torch.full((n,), float(level)), path, g).numpy()
    p = _softmax(loglik(h, W, level, path)[:, 0, :])
    dots = h[:, 0, :] @ W
    r = np.eye(3)[x.numpy()] - p
    return np.stack([_z(r), _z(r * p), _z(r * dots), _z(r * dots**2)])


@pytest.mark.parametrize("path", paths.PATHS)
def test_emission_loglik_gives_a_calibrated_posterior(path):
    z = _calibration_z(path, LEVELS[path])
    assert np.all(np.abs(z) < 4), z


def test_calibration_check_rejects_wrong_likelihoods():
    # an over-confident Euclidean likelihood (scaled by 2): E[(y - p) p] < 0 far beyond 4 SE
    z = _calibration_z(
        "euclidean", 0.4, loglik=lambda h, W, t, p: 2.0 * paths.emission_loglik(h, W, t, p)
    )
    assert np.all(z[1] < -4), z
    # an under-confident vMF likelihood (kappa halved): E[(y - p) p] > 0 beyond 4 SE
    z = _calibration_z("vmf", 3.0, loglik=lambda h, W, k, p: paths.emission_loglik(h, W, k / 2, p))
    assert np.all(z[1] > 4), z

    # geodesic (G) without the area factor 1/sin^{d-2}(alpha): the same support, a wrong shape
    def no_area(h, W, t, p):
        d = W.shape[0]
        a = np.arccos(np.clip(h @ W, -1, 1))
        with np.errstate(divide="ignore"):
            out = (d - 2) * np.log(np.sin(np.minimum(a / (1 - t), math.pi)))
        return np.where(a <= (1 - t) * math.pi, out, -np.inf)

    z = _calibration_z("geodesic", 0.4, loglik=no_area)
    assert np.all(np.abs(z[2]) > 4), z


# ---------------------------------------------------------------------------------------------
# emission_loglik: closed forms


def _random_setup(seed=0, d=4, V=5, shape=(2, 3)):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, V))
    W /= np.linalg.norm(W, axis=0)
    h = rng.standard_normal(shape + (d,))
    h /= np.linalg.norm(h, axis=-1, keepdims=True)
    return W, h


def test_vmf_and_euclidean_closed_forms():
    W, h = _random_setup()
    assert np.array_equal(paths.emission_loglik(h, W, 2.5, "vmf"), 2.5 * (h @ W))
    x = 1.7 * h  # Euclidean states need not be unit vectors
    for t in (0.0, 0.3, 0.8):
        assert np.allclose(
            paths.emission_loglik(x, W, t, "euclidean"),
            t / (1 - t) ** 2 * (x @ W),
            rtol=1e-13,
            atol=0,
        )
    # the Euclidean loglik is the Gaussian log-density N(t w, (1 - t)^2 I) up to a per-position
    # constant
    t = 0.35
    full = -((x[..., :, None] - t * W[None, None]) ** 2).sum(-2) / (2 * (1 - t) ** 2)
    diff = paths.emission_loglik(x, W, t, "euclidean") - full
    assert np.allclose(diff, diff[..., :1], atol=1e-12)
    # t = 1 is capped, not singular
    assert np.all(np.isfinite(paths.emission_loglik(x, W, 1.0, "euclidean")))


def test_geodesic_closed_form_by_hand():
    W, h = _random_setup(seed=3, d=5, V=6, shape=(4, 5))
    d, n_dead = 5, 0
    for t in (0.0, 0.25, 0.5, 0.75):
        ll = paths.emission_loglik(h, W, t, "geodesic")
        assert ll.shape == (4, 5, 6)
        for idx in np.ndindex(4, 5):
            expect = []
            for k in range(6):
                a = math.acos(max(-1.0, min(1.0, float(h[idx] @ W[:, k]))))
                if a > (1 - t) * math.pi:
                    expect.append(-math.inf)
                else:
                    expect.append(
                        (d - 2) * (math.log(math.sin(a / (1 - t))) - math.log(math.sin(a)))
                    )
            expect = np.array(expect)
            got = ll[idx]
            fin = np.isfinite(expect)
            if not fin.any():  # no token can explain h: the documented fallback, the nearest token
                assert np.all(np.isfinite(got)) and got.argmax() == np.argmax(h[idx] @ W)
                n_dead += 1
                continue
            assert np.array_equal(np.isinf(got), np.isinf(expect))
            delta = got[fin] - expect[fin]
            assert np.allclose(delta, delta[0], atol=1e-10)
            if t == 0.0:
                assert fin.all() and np.allclose(got, got[0], atol=1e-12)  # flat: all tokens equal
    # both -inf (tokens outside the support) and the all-outside fallback were exercised
    assert np.isinf(paths.emission_loglik(h, W, 0.5, "geodesic")).any() and n_dead > 0


def test_geodesic_support_boundary_and_small_angles():
    d, t = 4, 0.5
    W = np.eye(d)[:, :2]  # e_1 is within pi/2 of every point below, so no position is "dead"
    ll = paths.emission_loglik(
        _on_circle([0.4 * math.pi, 0.5 * math.pi - 1e-6, 0.5 * math.pi + 1e-6, 0.9 * math.pi], d),
        W,
        t,
        "geodesic",
    )[0, :, 0]
    assert np.isfinite(ll[:2]).all() and np.isneginf(ll[2:]).all()
    W = W[:, :1]
    # at alpha -> 0 the value tends to -(d - 2) log(1 - t), and h = w itself gets that limit
    at_w = paths.emission_loglik(_on_circle([0.0, 1e-5], d), W, t, "geodesic")[0, :, 0]
    assert at_w[0] == pytest.approx(-(d - 2) * math.log(1 - t), rel=1e-12)
    assert at_w[1] == pytest.approx(at_w[0], rel=1e-8)
    # d = 2: the angle law is flat, so only the support matters
    W2 = np.eye(2)
    ll2 = paths.emission_loglik(
        _on_circle([0.1, 0.3 * math.pi, 0.6 * math.pi], 2), W2, t, "geodesic"
    )[0]
    assert np.array_equal(ll2[0], [0.0, 0.0])  # angles 0.1 and pi/2 - 0.1 both < pi/2
    assert np.array_equal(ll2[2], [-np.inf, 0.0])  # angle 0.6 pi to e_0 > pi/2, 0.1 pi to e_1


def test_geodesic_at_t_one_gives_the_nearest_token():
    W = np.eye(5)
    h = np.eye(5)[[[2, 4, 1]]]  # (1, 3, 5): exactly on tokens
    ll = paths.emission_loglik(h, W, 1.0, "geodesic")
    assert np.array_equal(_softmax(ll), h)
    # a position off every token (rounding) goes to its nearest token, not to NaN
    for eps in (1e-9, 1e-6, 1e-3):
        off = h + eps * np.arange(5)
        off /= np.linalg.norm(off, axis=-1, keepdims=True)
        ll = paths.emission_loglik(off, W, 1.0, "geodesic")
        assert not np.isnan(ll).any() and np.array_equal(_softmax(ll), h)
    assert np.all(
        np.isfinite(ll)
    )  # eps = 1e-3: every token is outside the support, the fallback ran


@pytest.mark.parametrize("path", paths.PATHS)
def test_per_sequence_levels_broadcast(path):
    W, h = _random_setup(seed=5, d=4, V=3, shape=(2, 3, 4))
    levels = np.array([[0.0, 0.3, 0.6], [0.9, 0.1, 0.45]]) * (8.0 if path == "vmf" else 1.0)
    got = paths.emission_loglik(h, W, levels, path)
    assert got.shape == (2, 3, 4, 3)
    for i, j in np.ndindex(2, 3):
        assert np.array_equal(got[i, j], paths.emission_loglik(h[i, j], W, levels[i, j], path))
    # one level per sequence of a (B, L, d) batch
    flat = paths.emission_loglik(h.reshape(6, 4, 4), W, levels.reshape(6), path)
    assert np.array_equal(flat.reshape(got.shape), got)


@pytest.mark.parametrize("d", [3, 6])
def test_geodesic_density_matches_the_sampler(d):
    # the law of alpha = angle(w, h) implied by exp(loglik) times the area factor sin^{d-2}(alpha)
    # (computed by quadrature) is the law of the sampled angles
    t, n = 0.5, 4000
    grid = np.linspace(0.0, (1 - t) * math.pi, 4001)
    W = np.eye(d)[:, :1]

    def cdf_of(ll_fn):
        ll = ll_fn(_on_circle(grid, d), W, t, "geodesic")[0, :, 0]
        dens = np.exp(ll - ll.max()) * np.sin(grid) ** (d - 2)
        c = cumulative_trapezoid(dens, grid, initial=0.0)
        return lambda a: np.interp(a, grid, c / c[-1])

    h = _draw("geodesic", t, d, n, seed=8)
    alpha = np.arccos(np.clip(h[:, 0], -1, 1))
    assert stats.kstest(alpha, cdf_of(paths.emission_loglik)).pvalue > 0.01
    # power: the vMF-like likelihood 2 w.h (which ignores the path) is rejected
    assert (
        stats.kstest(
            alpha, cdf_of(lambda h_, W_, t_, p_: paths.emission_loglik(h_, W_, 2.0, "vmf"))
        ).pvalue
        < 1e-3
    )


# ---------------------------------------------------------------------------------------------
# errors


def test_unknown_path_raises_naming_the_paths():
    w = torch.eye(3, dtype=torch.float64)[None]
    for call in (
        lambda: paths.check_path("slerp"),
        lambda: paths.sample_levels(3, "slerp", 1.0),
        lambda: paths.noisy_states(w, torch.ones(1), "slerp"),
        lambda: paths.emission_loglik(np.eye(3)[None], np.eye(3), 1.0, "slerp"),
    ):
        with pytest.raises(ValueError, match="vmf.*geodesic.*euclidean"):
            call()
    assert paths.check_path("geodesic") == "geodesic"


def test_bad_levels_raise():
    w = torch.eye(3, dtype=torch.float64)[None]
    for path in ("geodesic", "euclidean"):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            paths.noisy_states(w, torch.tensor([1.5]), path)
    for path in paths.PATHS:
        for bad in (-0.1, float("nan")):
            with pytest.raises(ValueError, match="finite and >= 0"):
                paths.noisy_states(w, torch.tensor([bad]), path)
    with pytest.raises(ValueError, match="unit vectors"):
        paths.noisy_states(2 * w, torch.tensor([0.5]), "geodesic")
    with pytest.raises(ValueError):
        paths.noisy_states(w, torch.tensor([-1.0]), "vmf")
    h, W = np.eye(3)[None], np.eye(3)
    for path in ("geodesic", "euclidean"):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            paths.emission_loglik(h, W, 1.5, path)
    for path in paths.PATHS:
        with pytest.raises(ValueError, match=">= 0"):
            paths.emission_loglik(h, W, -0.5, path)
        with pytest.raises(ValueError, match="finite"):
            paths.emission_loglik(h, W, np.nan, path)
    # the vMF level is a concentration: > 1 is fine
    assert np.isfinite(paths.emission_loglik(h, W, 50.0, "vmf")).all()


def test_bad_shapes_and_embeddings_raise():
    h = np.eye(3)[None]
    with pytest.raises(ValueError, match="unit-norm"):
        paths.emission_loglik(h, 2 * np.eye(3), 0.5, "geodesic")
    with pytest.raises(ValueError, match="same d"):
        paths.emission_loglik(h, np.eye(4), 0.5, "vmf")
    with pytest.raises(ValueError, match="same d"):
        paths.emission_loglik(h, np.ones(3) / math.sqrt(3), 0.5, "vmf")  # W not 2-D
    with pytest.raises(ValueError, match="same d"):
        paths.emission_loglik(np.ones(3) / math.sqrt(3), np.eye(3), 0.5, "vmf")  # h not (..., L, d)
    with pytest.raises(ValueError):
        paths.emission_loglik(
            np.ones((2, 3, 3)) / math.sqrt(3), np.eye(3), np.ones(3) * 0.5, "vmf"
        )  # 3 levels, 2 seqs
    w = torch.eye(3, dtype=torch.float64)
    for path in paths.PATHS:
        with pytest.raises(ValueError, match=r"\(B, L, d\)"):
            paths.noisy_states(w, torch.ones(3) * 0.5, path)  # mean not 3-D
        with pytest.raises(ValueError, match=r"\(B, L, d\)"):
            paths.noisy_states(
                w[None].expand(2, 3, 3), torch.ones(3) * 0.5, path
            )  # 3 levels, B = 2
        with pytest.raises(ValueError, match=r"\(B, L, d\)"):
            paths.noisy_states(w[None], torch.tensor(0.5), path)  # scalar level


# ---------------------------------------------------------------------------------------------
# PosteriorTransformer(path=...)


def _net(path: str, **kw) -> PosteriorTransformer:
    return PosteriorTransformer(
        torch.eye(4), 6, kappa_max=12.0, width=16, depth=1, heads=2, path=path, **kw
    )


@pytest.mark.parametrize("path", paths.PATHS)
def test_noisy_batch_on_each_path(path):
    net = _net(path)
    assert net.path == path and net.hparams.path == path
    tokens = torch.randint(0, 4, (256, 6), generator=_gen(0))
    h, level, weight = net.noisy_batch(tokens, _gen(1))
    assert h.shape == (256, 6, 4) and h.dtype == torch.float32 and level.shape == (256,)
    top = 12.0 if path == "vmf" else 1.0
    assert float(level.min()) >= 0.0 and float(level.max()) <= top
    assert float(level.max()) > 0.9 * top  # the whole range is used (256 uniform draws)
    norms = h.norm(dim=-1)
    if path == "euclidean":
        assert (norms - 1).abs().max() > 0.1  # Gaussian states are off the sphere
    else:
        assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)
    # the plumbing: exactly paths.sample_levels then paths.noisy_states on the token embeddings
    g = _gen(1)
    lv = paths.sample_levels(256, path, 12.0, g)
    ref = paths.noisy_states(torch.eye(4, dtype=torch.float64)[tokens], lv, path, g).float()
    assert torch.equal(level, lv) and torch.equal(h, ref)
    assert torch.equal(weight, torch.ones_like(lv))  # no warp: unit importance weights
    h2, level2, _ = net.noisy_batch(tokens, _gen(1))
    assert torch.equal(h, h2) and torch.equal(level, level2)
    loss = net.loss(tokens, generator=_gen(2))
    assert torch.isfinite(loss)
    tc = _net(path, time_conditioned=True)
    assert torch.isfinite(tc.loss(tokens, generator=_gen(2)))


def test_noisy_batch_levels_follow_the_path():
    tokens = torch.randint(0, 4, (512, 6), generator=_gen(0))
    _, kappa, _ = _net("vmf").noisy_batch(tokens, _gen(3))
    _, t, _ = _net("geodesic").noisy_batch(tokens, _gen(3))
    assert torch.allclose(kappa, 12.0 * t)  # the same uniforms, scaled to the vMF range
    assert float(kappa.max()) > 1.0  # not the unit interval


def test_unknown_path_raises_at_construction():
    with pytest.raises(ValueError, match="path must be one of"):
        _net("spherical")
    assert (
        _net("vmf").path == "vmf" == PosteriorTransformer(torch.eye(3), 4, kappa_max=1.0).path
    )  # default


# ---------------------------------------------------------------------------------------------
# the oracle posterior of Shidoku on each path


@pytest.mark.parametrize("path", paths.PATHS)
def test_oracle_marginals_on_noisy_shidoku(path):
    W = np.eye(data.SHIDOKU_VOCAB)
    grids = data.shidoku_grids()[[0, 50, 100, 287]]
    clues = data.make_puzzles(grids, rng=0)
    level = {"vmf": 4.0, "geodesic": 0.5, "euclidean": 0.5}[path]
    mean = torch.as_tensor(W.T)[torch.as_tensor(grids)]
    h = paths.noisy_states(mean, torch.full((4,), level), path, _gen(0)).numpy()
    for c in (clues, None):
        post = data.oracle_posterior_grids(paths.emission_loglik(h, W, level, path), clues=c)
        m = post.marginals
        assert m.shape == (4, 16, 5) and np.all(m >= 0)
        assert np.allclose(m.sum(-1), 1.0, atol=1e-12)
        assert np.all(m[..., data.BLANK] == 0.0)
        if c is not None:
            given = c > 0
            assert np.allclose(np.take_along_axis(m, c[..., None], -1)[..., 0][given], 1.0)
    # at the clean end the oracle reads the grid off h
    clean = {"vmf": 1e3, "geodesic": 1.0, "euclidean": 1.0}[path]
    hc = paths.noisy_states(mean, torch.full((4,), clean), path, _gen(0)).numpy()
    m = data.oracle_posterior_grids(paths.emission_loglik(hc, W, clean, path)).marginals
    assert np.allclose(m, np.eye(5)[grids], atol=1e-9)


@pytest.mark.parametrize("path", paths.PATHS)
def test_oracle_marginals_are_calibrated(path):
    # grids uniform over the 288 (the oracle's prior), states on the path: the oracle's marginals
    # satisfy E[sum_{l,k} (1{g_l = k} - m_lk) m_lk] = 0 per grid (grids are independent)
    n = 1500
    W = np.eye(data.SHIDOKU_VOCAB)
    all_grids = data.shidoku_grids()
    grids = all_grids[np.random.default_rng(1).integers(0, len(all_grids), n)]
    level = {"vmf": 2.0, "geodesic": 0.3, "euclidean": 0.3}[path]
    mean = torch.as_tensor(W.T)[torch.as_tensor(grids)]
    h = paths.noisy_states(mean, torch.full((n,), level), path, _gen(4)).numpy()
    m = data.oracle_posterior_grids(paths.emission_loglik(h, W, level, path)).marginals
    r = np.eye(5)[grids] - m
    stat = (r * m).sum(axis=(1, 2))
    assert abs(_z(stat[:, None])[0]) < 4
    # and the noisy state is informative: the true digit gets more than the prior's 1/4
    p_true = np.take_along_axis(m, grids[..., None], -1)[..., 0].mean(1)
    assert _z(p_true[:, None] - 0.25)[0] > 4
