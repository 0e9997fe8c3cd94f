"""The learned noise-level warp (eq. `vmf-warp`) and the baselines' scores and correctors
(eq. `vmf-baseline-scores`) of the spherical-flows chapter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reprobook.papers.vmf_sphere_flow import evaluate, fields, samplers
from reprobook.papers.vmf_sphere_flow.model import PosteriorTransformer
from reprobook.papers.vmf_sphere_flow.paths import emission_loglik
from reprobook.papers.vmf_sphere_flow.warp import NoiseWarp


def _fitted(curve, bins=10, mix=0.1):
    w = NoiseWarp(bins, mix=mix)
    u = (np.arange(bins) + 0.5) / bins
    w.update(torch.tensor(u), torch.tensor(curve(u)))
    return w


def test_warp_is_uniform_until_every_bin_is_seen():
    w = NoiseWarp(4)
    w.update(torch.tensor([0.1, 0.9]), torch.tensor([2.0, 0.1]))
    u, f = w.knots()
    assert np.allclose(u, f)
    assert np.allclose(w.density([0.05, 0.5, 0.99]), 1.0)


def test_warp_cdf_follows_the_fall_of_the_curve():
    w = _fitted(lambda u: 1.0 - u)  # a straight fall: the warp is uniform between the centres
    uk, fk = w.knots()
    inner = slice(1, -1)
    g = (fk[inner] - 0.1 * uk[inner]) / 0.9
    assert np.allclose(g, (uk[inner] - uk[1]) / (uk[-2] - uk[1]))
    # a fall concentrated at low levels puts most of the draws there
    w = _fitted(lambda u: np.exp(-20 * u))
    u, _ = w.draw(20_000, torch.Generator().manual_seed(0))
    assert (u < 0.25).float().mean() > 0.7


def test_warp_importance_weights_keep_the_uniform_expectation():
    w = _fitted(lambda u: np.exp(-8 * u))
    u, weight = w.draw(200_000, torch.Generator().manual_seed(1))
    f = lambda x: torch.cos(3 * x) + x**2  # noqa: E731
    exact = np.sin(3.0) / 3 + 1 / 3
    assert abs((weight * f(u)).mean().item() - exact) < 0.01
    assert weight.max().item() <= 1 / 0.1 + 1e-9  # the density never falls below mix


def test_warp_running_mean_and_bad_input():
    w = NoiseWarp(2, decay=0.5)
    w.update(torch.tensor([0.2]), torch.tensor([1.0]))
    w.update(torch.tensor([0.2]), torch.tensor([3.0]))
    assert w.ce[0].item() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        w.update(torch.tensor([0.2, 0.3]), torch.tensor([1.0]))
    with pytest.raises(ValueError):
        NoiseWarp(1)


def test_network_with_warp_weights_its_loss_and_learns_the_curve():
    torch.manual_seed(0)
    m = PosteriorTransformer(torch.eye(4), 3, kappa_max=20.0, warp=True).train()
    tokens = torch.randint(0, 4, (256, 3))
    for _ in range(3):
        m.loss(tokens)
    assert (m.warp.seen > 0).all()
    _, level, weight = m.noisy_batch(tokens)
    assert level.max() <= 20.0 and (weight > 0).all()
    plain = PosteriorTransformer(torch.eye(4), 3, kappa_max=20.0)
    assert plain.warp is None and torch.equal(plain.noisy_batch(tokens)[2], torch.ones(256))


def _point(angle, d=5, k=2, seed=0):
    v = np.random.default_rng(seed).normal(size=d)
    v[k] = 0
    v /= np.linalg.norm(v)
    return np.cos(angle) * np.eye(d)[k] + np.sin(angle) * v


@pytest.mark.parametrize("angle", [1e-4, 0.3, 1.0, 1.7])
def test_geodesic_score_is_the_gradient_of_its_likelihood(angle):
    d, t, k = 5, 0.4, 2
    W = torch.eye(d, dtype=torch.float64)
    x0 = _point(angle, d, k)
    post = torch.zeros(1, 1, d, dtype=torch.float64)
    post[..., k] = 1
    got = fields.geodesic_score(torch.tensor(x0)[None, None], post, W, t)[0, 0].numpy()

    def f(x):
        x = x / np.linalg.norm(x)
        return emission_loglik(torch.tensor(x)[None, None], W, t, "geodesic")[0, 0, k]

    e = 1e-6
    g = np.array(
        [(f(x0 + e * np.eye(d)[j]) - f(x0 - e * np.eye(d)[j])) / (2 * e) for j in range(d)]
    )
    g -= (g @ x0) * x0
    assert np.abs(got - g).max() < 1e-6 * max(1.0, np.abs(g).max())


def test_euclidean_score_is_the_gradient_of_the_mixture():
    d, t = 4, 0.6
    W = torch.eye(d, dtype=torch.float64)
    x = torch.randn(1, 1, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)

    # the mixture sum_k p_k N(t w_k, (1-t)^2 I) with prior p; its posterior gives the score
    def logmix(y):
        return torch.logsumexp(torch.log(p) - ((y - t * W.T) ** 2).sum(-1) / (2 * (1 - t) ** 2), 0)

    y = x[0, 0].clone().requires_grad_(True)
    logmix(y).backward()
    logw = torch.log(p) - ((x[0, 0] - t * W.T) ** 2).sum(-1) / (2 * (1 - t) ** 2)
    post = torch.softmax(logw, 0)[None, None]
    assert torch.allclose(fields.euclidean_score(x, post, W, t)[0, 0], y.grad, atol=1e-10)


@pytest.mark.parametrize("sampler", ["geodesic", "euclidean"])
def test_baseline_correctors_count_and_need_a_reference(sampler):
    W = torch.eye(4, dtype=torch.float64)

    def post(h, level):
        return torch.full((*h.shape[:2], 4), 0.25, dtype=h.dtype)

    out = evaluate.generate(sampler, post, W, 3, 5, 8, kappa_max=20.0, correctors=3, seed=0)
    assert out.nfe == samplers.count_nfe(8, 3) == 33
    again = evaluate.generate(sampler, post, W, 3, 5, 8, kappa_max=20.0, correctors=3, seed=0)
    assert torch.equal(out.state, again.state)
    plain = evaluate.generate(sampler, post, W, 3, 5, 8, seed=0)
    assert plain.nfe == 9
    fn = samplers.sample_geodesic if sampler == "geodesic" else samplers.sample_euclidean
    with pytest.raises(ValueError, match="kappa_ref"):
        fn(post, W, 3, 5, 8, correctors=1)
