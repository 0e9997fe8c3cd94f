"""Chapter 13's detectors fitted outside torch's training loop (PCA, Ledoit-Wolf Gaussians and
the KL that inverts their covariance, the logistic probe, LDA) give the same scores when the
hidden states move at rounding level."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.aeo_injection import detect


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("rank", [64, 10], ids=["full-rank", "rank-10"])
def test_one_class_scores_are_stable_under_jitter(rank):
    # States of rank 10 in 64 dimensions, projected on 32 PCA components, leave 22 directions
    # of rounding noise: without Ledoit-Wolf's shrinkage their covariance would be singular
    # and its inverse (in the KL and the Mahalanobis distance) would amplify 1e-12 into
    # anything. The shrunk covariance keeps a condition number of about 400 here, and the
    # scores move by about 1e-11 relative; the test asks for 1e-9.
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(rank, 64))
    states = rng.normal(size=(1000, rank)) @ basis + 1e-6 * rng.normal(size=(1000, 64))
    clouds = rng.normal(size=(20, 4, rank)) @ basis
    g = detect.fit_compliant(states, 32)
    kl, maha = detect.token_cloud_kl(clouds, g), detect.mahalanobis(g.project(states[:50]), g)
    for seed in range(5):
        moved = detect.fit_compliant(core.jitter(states, seed), 32)
        assert _rel(detect.token_cloud_kl(core.jitter(clouds, seed + 9), moved), kl) < 1e-9
        assert _rel(detect.mahalanobis(moved.project(states[:50]), moved), maha) < 1e-9


def test_gaussian_kl_is_stable_under_jitter():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    cov_r, cov_c = a @ a.T + 0.1 * np.eye(8), b @ b.T + 0.1 * np.eye(8)
    mu_r, mu_c = rng.normal(size=8), rng.normal(size=8)
    ref = detect.gaussian_kl(mu_r, cov_r, mu_c, cov_c)
    for seed in range(5):
        j = [core.jitter(x, seed + i) for i, x in enumerate((mu_r, cov_r, mu_c))]
        cov = core.jitter(cov_c, seed + 7)
        moved = detect.gaussian_kl(j[0], (j[1] + j[1].T) / 2, j[2], (cov + cov.T) / 2)
        assert moved == pytest.approx(ref, rel=1e-9)


def test_probe_and_lda_are_stable_under_jitter():
    # The probe is fitted by L-BFGS, which stops on a tolerance (1e-4): had its stopping
    # iteration depended on the last bits of the features, its scores would move by about
    # that much, far outside the 1e-8 asked here.
    rng = np.random.default_rng(2)
    z = np.vstack([rng.normal(size=(300, 16)), rng.normal(size=(80, 16)) * 1.5 + 0.4])
    y = np.r_[np.zeros(300), np.ones(80)].astype(bool)
    probe = detect.logistic_probe(z, y).decision_function(z)
    lda = detect.lda(z, y).decision_function(z)
    for seed in range(5):
        zj = core.jitter(z, seed)
        assert _rel(detect.logistic_probe(zj, y).decision_function(z), probe) < 1e-8
        assert _rel(detect.lda(zj, y).decision_function(z), lda) < 1e-8
