"""Chapter 17 under rounding: what the chapter reads off SVDs must not depend on the last bits.

Singular vectors are defined up to sign (and, for tied singular values, up to a rotation
within their subspace), so nothing the notebooks measure may depend on those choices: energy
shares are squares, the null-space channel is read through its subspace, probes are
sign-invariant. Inputs are moved with ``core.jitter(x, seed, rel=1e-12)``; each test says what
it would catch.
"""

import numpy as np
import torch

from reprobook import core
from reprobook.papers.spectral_reverse_prompt import diagnostics, srp

SEEDS = range(6)


def _layer(seed=0, n=300, d_in=24, d_out=10):
    g = np.random.default_rng(seed)
    W = g.normal(size=(d_out, d_in)) / np.sqrt(d_in)
    x = g.normal(size=(n, d_in)) @ np.diag(np.linspace(2.0, 0.3, d_in))  # anisotropic inputs
    return W, x


def test_energy_shares_and_ranks_are_stable_under_jitter():
    # e_j = sigma_j^2 ||X_c v_j||^2 does not see the sign of v_j. Catches a share, top share
    # or rank computed from signed singular vectors, or from an order that a tie could swap.
    W, x = _layer()
    ref = diagnostics.energy_shares(W, x)
    top, erank, srank = (
        diagnostics.top_share(ref),
        diagnostics.effective_rank(ref),
        diagnostics.stable_rank(W),
    )
    for s in SEEDS:
        Wj, xj = core.jitter(W, [s, 0]), core.jitter(x, [s, 1])
        e = diagnostics.energy_shares(Wj, xj)
        np.testing.assert_allclose(e, ref, rtol=1e-8, atol=1e-14)
        assert abs(diagnostics.top_share(e) - top) <= 1e-10
        assert abs(diagnostics.effective_rank(e) - erank) <= 1e-9
        assert abs(diagnostics.stable_rank(Wj) - srank) <= 1e-9


def test_energy_shares_do_not_depend_on_the_basis_of_tied_singular_values():
    # W with a repeated singular value: any orthonormal basis of that subspace is a valid SVD.
    # The shares of the tied directions may split either way, but their sum, and top_share when
    # the cut does not fall inside the tie, may not. Catches a diagnostic read off one vector
    # of a degenerate subspace.
    rng = np.random.default_rng(4)
    U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(12, 6)))
    W = U @ np.diag([5.0, 3.0, 3.0, 3.0, 1.0, 0.5]) @ V.T
    x = rng.normal(size=(200, 12))
    ref = diagnostics.energy_shares(W, x)
    for s in SEEDS:
        e = diagnostics.energy_shares(core.jitter(W, s), x)
        assert abs(e[1:4].sum() - ref[1:4].sum()) <= 1e-9
        np.testing.assert_allclose(e[[0, 4, 5]], ref[[0, 4, 5]], rtol=1e-8)
        assert abs(diagnostics.top_share(e, 4 / 6) - diagnostics.top_share(ref, 4 / 6)) <= 1e-9


def test_null_space_basis_spans_the_same_subspace_under_jitter():
    # N is the top-m principal subspace of the features off span(V); its basis vectors carry
    # signs of the SVD. Catches a basis whose subspace (N N^T) follows the last bits, which a
    # tie between the m-th and (m+1)-th residual singular values would cause.
    W, x = _layer(seed=1)
    _, _, vt = np.linalg.svd(W, full_matrices=False)
    v = torch.as_tensor(vt.T)
    N = srp.null_space_basis(torch.as_tensor(x), v, 4).numpy()
    P = N @ N.T
    for s in SEEDS:
        Nj = srp.null_space_basis(torch.as_tensor(core.jitter(x, s)), v, 4).numpy()
        np.testing.assert_allclose(Nj @ Nj.T, P, atol=1e-8)
        assert np.abs(vt @ Nj).max() <= 1e-12


def test_srp_layer_buffers_are_stable_under_jitter():
    # The prompt's frozen spectrum and right singular vectors: catches a buffer whose order or
    # sign flips under a rounding-level move of the frozen weight (LAPACK's signs are a
    # continuous function of a matrix with distinct singular values). The weight is float32,
    # so it moves by one float32 ulp (rel=1e-7; 1e-12 would vanish in the cast).
    W, x = _layer(seed=2, d_in=40, d_out=16)
    W = W.astype(np.float32)
    ref = srp.SRPPrompt(torch.as_tensor(W), x, rank=8, null_dim=6)
    for s in SEEDS:
        Wj = torch.as_tensor(core.jitter(W, s, rel=1e-7), dtype=torch.float32)
        got = srp.SRPPrompt(Wj, core.jitter(x, s + 10), rank=8, null_dim=6)
        torch.testing.assert_close(got.sigma, ref.sigma, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.V, ref.V, rtol=0, atol=1e-4)
        torch.testing.assert_close(got.N @ got.N.T, ref.N @ ref.N.T, rtol=0, atol=1e-4)


def test_direction_probe_is_the_same_under_jitter():
    # The logistic-regression probe (lbfgs, iterative): catches a probe whose test accuracy
    # moves with a rounding-level change of its features, and one that depends on the signs
    # of the directions it projects on (a flipped singular vector gives the same accuracy).
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, 240)
    f = rng.normal(size=(240, 10)) + 0.8 * np.eye(3)[y] @ rng.normal(size=(3, 10))
    train, test = np.arange(120), np.arange(120, 240)
    dirs = np.linalg.qr(rng.normal(size=(10, 4)))[0]
    ref = diagnostics.direction_probe(f, y, train, test, dirs)
    assert diagnostics.direction_probe(f, y, train, test, dirs * np.array([1, -1, 1, -1])) == ref
    for s in SEEDS:
        assert diagnostics.direction_probe(core.jitter(f, s), y, train, test, dirs) == ref
