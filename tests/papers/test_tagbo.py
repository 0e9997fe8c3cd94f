"""Exact properties of chapter 09's similarity structures, priors and kernels."""

import numpy as np
import pytest
import scipy.linalg
import torch

from reprobook import core
from reprobook.papers.tagbo import config, kernels, priors, similarity


def _laplacian(tiers):
    return similarity.normalized_laplacian(similarity.tier_graph(tiers))


def test_tier_graph_weights():
    W = similarity.tier_graph([1, 1, 2, 3])
    expected = np.array([[0, 1, 0.5, 0], [1, 0, 0.5, 0], [0.5, 0.5, 0, 0.5], [0, 0, 0.5, 0]])
    np.testing.assert_array_equal(W, expected)


@pytest.mark.parametrize("tiers", [[1, 2, 3, 1, 2, 3, 3], [1, 1, 3, 3, 3], [2, 2, 1, 3]])
@pytest.mark.parametrize("beta", [0.1, 1.0, 7.0])
def test_diffusion_gram_is_symmetric_psd_unit_diagonal_and_matches_expm(tiers, beta):
    L = _laplacian(tiers)
    K = similarity.diffusion_gram(L, beta)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() >= -1e-9
    np.testing.assert_allclose(np.diag(K), 1.0, atol=1e-12)
    E = scipy.linalg.expm(-beta * L)
    s = np.sqrt(np.diag(E))
    np.testing.assert_allclose(K, E / np.outer(s, s), atol=1e-10)


def test_diffusion_limits():
    L = _laplacian([1, 1, 2, 3, 3, 2])  # connected
    np.testing.assert_allclose(similarity.diffusion_gram(L, 0.0), np.eye(6), atol=1e-12)
    np.testing.assert_allclose(similarity.diffusion_gram(L, 1e-9), np.eye(6), atol=1e-8)
    np.testing.assert_allclose(similarity.diffusion_gram(L, 200.0), np.ones((6, 6)), atol=1e-8)


def test_complete_graph_gives_a_scaled_overlap_kernel():
    n, beta = 5, 0.8
    K = similarity.diffusion_gram(_laplacian([2] * n), beta)
    values = np.unique(np.round(K, 12))
    assert len(values) == 2
    # closed form: L = n/(n-1) I - J/(n-1), so exp(-beta L) = e^{-beta n/(n-1)} (I - J/n) + J/n
    a = np.exp(-beta * n / (n - 1))
    off, diag = (1 - a) / n, a + (1 - a) / n
    np.testing.assert_allclose(K[0, 1], off / diag, atol=1e-12)


def test_isolated_level_is_similar_to_itself_only():
    K = similarity.diffusion_gram(_laplacian([1, 3, 3]), 1.0)
    np.testing.assert_allclose(K[0], [1, 0, 0], atol=1e-12)


def test_tanimoto_of_identical_fingerprints_is_one_and_gram_psd():
    smiles = ["CCO", "CCO", "c1ccccc1", "CC(=O)O", "(none)"]
    K = similarity.tanimoto_gram(similarity.fingerprints(smiles))
    assert K[0, 1] == 1.0
    np.testing.assert_array_equal(np.diag(K), 1.0)
    np.testing.assert_array_equal(K[4, :4], 0.0)
    assert np.linalg.eigvalsh(K).min() >= -1e-9


def _kernel(w="learn", cont=()):
    grams = []
    for n in (5, 4):
        grams.append(
            similarity.tanimoto_gram(similarity.fingerprints(["C" * (i + 1) for i in range(n)]))
        )
    tiers = [np.array([1, 2, 3, 1, 2]), np.array([3, 3, 1, 2])]
    return kernels.TaskAwareKernel((0, 1), grams, tiers, cont, w=w).double()


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_mixture_stays_psd(w, lam):
    k = _kernel(cont=(2,))
    with torch.no_grad():
        k.initialize(
            raw_w=k.raw_w_constraint.inverse_transform(torch.full((2,), w).clamp(1e-9, 1 - 1e-9))
        )
        k.initialize(
            raw_lam=k.raw_lam_constraint.inverse_transform(
                torch.tensor([lam]).clamp(1e-9, 1 - 1e-9)
            )
        )
        rng = np.random.default_rng(1)
        X = torch.as_tensor(np.c_[rng.integers(0, 5, 30), rng.integers(0, 4, 30), rng.random(30)])
        K = k(X).to_dense()
    assert torch.linalg.eigvalsh(K).min() >= -1e-9


def test_kernel_looks_up_the_mixed_gram():
    k = _kernel(w=0.25)
    X = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 0.0]], dtype=torch.float64)
    with torch.no_grad():
        K = k(X).to_dense().numpy()
        G0, G1 = k.gram(0).numpy(), k.gram(1).numpy()
    i, j = X.long().numpy().T
    np.testing.assert_allclose(K, G0[np.ix_(i, i)] * G1[np.ix_(j, j)], atol=1e-12)
    g = similarity.diffusion_gram(_laplacian([1, 2, 3, 1, 2]), float(k.beta[0]))
    np.testing.assert_allclose(G0, 0.25 * g + 0.75 * k.desc_0.numpy(), atol=1e-10)
    np.testing.assert_allclose(np.diag(K), 1.0, atol=1e-12)
    with torch.no_grad():
        np.testing.assert_allclose(k(X, diag=True).numpy(), np.diag(K), atol=1e-12)


def test_true_tiers_are_tertiles():
    np.testing.assert_array_equal(
        priors.true_tiers([5.0, 1.0, 3.0, 2.0, 6.0, 4.0]), [3, 1, 2, 1, 3, 2]
    )
    assert sorted(np.bincount(priors.true_tiers(np.arange(12.0)))[1:]) == [4, 4, 4]


def test_corruption_zero_is_identity_and_deterministic():
    t = priors.true_tiers(np.random.default_rng(0).normal(size=30))
    np.testing.assert_array_equal(priors.corrupt_tiers(t, 0.0, np.random.default_rng(5)), t)
    a = priors.corrupt_tiers(t, 0.4, np.random.default_rng(5))
    b = priors.corrupt_tiers(t, 0.4, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    full = priors.corrupt_tiers(t, 1.0, np.random.default_rng(6))
    assert np.all(full != t) and set(full) <= {1, 2, 3}


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="p_flip"):
        priors.corrupt_tiers([1, 2], 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="tiers must lie in"):
        priors.corrupt_tiers([0, 2], 0.1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="symmetric"):
        similarity.normalized_laplacian(np.array([[0, 1.0], [0, 0]]))
    with pytest.raises(ValueError, match="beta"):
        similarity.diffusion_gram(np.eye(2), -1.0)


def test_profiles_resolve():
    for nb in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, nb, "reduced")
        full = core.resolve_notebook(config.PROFILES, nb, "full")
        assert type(reduced) is type(full)
    assert core.resolve_notebook(config.PROFILES, "suzuki", "reduced", n_iter=3).n_iter == 3
