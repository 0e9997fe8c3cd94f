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


def _expm_gram(L, beta):
    E = scipy.linalg.expm(-beta * L)
    s = np.sqrt(np.diag(E))
    return E / np.outer(s, s)


def test_isolated_level_stays_exact_at_large_beta_on_a_weighted_graph():
    # exp(-beta L) of a block-diagonal L is block diagonal (the diffusion kernel of Kondor and
    # Lafferty, 2002, "Diffusion kernels on graphs and other discrete input spaces"), so an
    # isolated level (L = 1, exp(-beta L) = e^-beta) has similarity exactly 0 to every other
    # level and 1 to itself for any beta. A full-matrix eigendecomposition mixed eigenvectors
    # of eigenvalue 1 across the two components: at beta = 100 the old code gave -1 for the
    # isolated level against each of the others (already off by 2e-3 at beta = 60).
    W = np.zeros((5, 5))
    for i, j, w in [(0, 2, 1.0), (0, 3, 0.4), (2, 4, 0.9), (3, 4, 0.7)]:
        W[i, j] = W[j, i] = w  # level 1 is isolated
    L = similarity.normalized_laplacian(W)
    others = [0, 2, 3, 4]
    for beta in (40.0, 100.0, 1000.0):
        K = similarity.diffusion_gram(L, beta)
        np.testing.assert_array_equal(K[1, others], 0.0)
        np.testing.assert_array_equal(K[others, 1], 0.0)
        np.testing.assert_array_equal(np.diag(K), 1.0)
        # the connected part against scipy's expm of its own block (smallest eigenvalue 0,
        # so nothing underflows there); at large beta it tends to the all-ones matrix
        block = L[np.ix_(others, others)]
        np.testing.assert_allclose(K[np.ix_(others, others)], _expm_gram(block, beta), atol=1e-10)
    # at moderate beta, the whole Gram against scipy.linalg.expm (Al-Mohy and Higham's
    # scaling and squaring) of the whole Laplacian
    for beta in (0.3, 2.0, 9.0):
        np.testing.assert_allclose(
            similarity.diffusion_gram(L, beta), _expm_gram(L, beta), atol=1e-10
        )


def test_kernel_gram_keeps_an_isolated_tier_level_apart_at_large_beta():
    # The same defect in the GP kernel: tiers (1, 3, 1, 1, 1) leave level 1 alone in its tier
    # with no neighbouring tier; at beta = 100 the old eigendecomposition gave it a graph
    # similarity of -1 to the four others.
    tiers = [np.array([1, 3, 1, 1, 1])]
    k = kernels.TaskAwareKernel((0,), [np.eye(5)], tiers, w=1.0).double()
    with torch.no_grad():
        k.initialize(raw_beta=k.raw_beta_constraint.inverse_transform(torch.tensor([100.0])))
        G = k.gram(0).numpy()
    np.testing.assert_array_equal(G[1, [0, 2, 3, 4]], 0.0)
    np.testing.assert_allclose(np.diag(G), 1.0, atol=1e-12)
    np.testing.assert_allclose(G[np.ix_([0, 2, 3, 4], [0, 2, 3, 4])], 1.0, atol=1e-12)
    L = _laplacian(tiers[0])
    np.testing.assert_allclose(
        G, similarity.diffusion_gram(L, k.beta.detach()[0].item()), atol=1e-12
    )


def test_diffusion_gram_refuses_a_matrix_that_is_not_a_laplacian():
    with pytest.raises(ValueError, match="graph Laplacian"):
        similarity.diffusion_gram(np.array([[1.0, 0.5], [0.5, 1.0]]), 1.0)
    with pytest.raises(ValueError, match="graph Laplacian"):
        similarity.diffusion_gram(np.array([[1.0, -0.5], [0.0, 1.0]]), 1.0)


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
        smoke = core.resolve_notebook(config.PROFILES, nb, "smoke")
        assert type(reduced) is type(full) is type(smoke)
    assert core.resolve_notebook(config.PROFILES, "02_suzuki", "reduced", n_iter=3).n_iter == 3


def test_profiles_are_keyed_by_the_notebooks_stems_and_the_package_reaches_every_module():
    import sys

    from conftest import ROOT

    from reprobook.papers import tagbo

    stems = sorted(p.stem for p in (ROOT / "notebooks" / "09_tagbo").glob("*.ipynb"))
    assert sorted(config.PROFILES) == stems
    # the BO harness is imported with the package: importing botorch's acquisition functions
    # draws from NumPy's global generator, which must happen before a notebook seeds its run
    assert "reprobook.papers.tagbo.bo" in sys.modules
    assert tagbo.config is config and tagbo.similarity is similarity
    assert tagbo.synthetic.run_constrained and tagbo.llm.TierElicitor  # loaded on first use
    with pytest.raises(AttributeError, match="no attribute or submodule 'nonsense'"):
        tagbo.nonsense  # noqa: B018
