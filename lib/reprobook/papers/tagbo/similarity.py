"""Similarity structures over the levels of one categorical variable.

Two kinds, as the abstract sets them against each other:

- task-agnostic: Tanimoto similarity of Morgan fingerprints (RDKit), or an RBF on numeric
  descriptors (:func:`tanimoto_gram`, :func:`rbf_gram`);
- task-aware: a graph whose edges join levels that a prior puts in the same or a neighbouring
  ordinal tier (:func:`tier_graph`, eq. `tagbo-graph`), its normalised Laplacian
  (:func:`normalized_laplacian`, eq. `tagbo-laplacian`) and the unit-diagonal diffusion kernel
  on it (:func:`diffusion_gram`, eq. `tagbo-diffusion`).

The graph and kernel are our reconstruction of the paper's method (it is known from its abstract
only); the equations are on notebooks/09_tagbo/index.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import rdFingerprintGenerator
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from reprobook.core import checks

__all__ = [
    "fingerprints",
    "tanimoto_gram",
    "rbf_gram",
    "tier_graph",
    "normalized_laplacian",
    "diffusion_eigen",
    "diffusion_gram",
]


def fingerprints(smiles: Sequence[str], radius: int = 2, n_bits: int = 2048) -> list:
    """Morgan fingerprints (RDKit bit vectors) of ``smiles``; a string RDKit cannot parse (the
    "(none)" level) gets an empty fingerprint."""
    radius = checks.integer(radius, "radius", minimum=0)
    n_bits = checks.integer(n_bits, "n_bits", minimum=8)
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    RDLogger.DisableLog("rdApp.*")
    try:
        out = []
        for s in smiles:
            mol = Chem.MolFromSmiles(str(s))
            out.append(
                gen.GetFingerprint(mol) if mol is not None else DataStructs.ExplicitBitVect(n_bits)
            )
    finally:
        RDLogger.EnableLog("rdApp.*")
    return out


def tanimoto_gram(fps: Sequence) -> np.ndarray:
    """K[l, l'] = |d_l & d_l'| / |d_l | d_l'| (RDKit's bulk Tanimoto); an empty fingerprint is
    similar to itself only (K = 1 on the diagonal, 0 elsewhere). Symmetric, PSD.

    Implements eq. `tagbo-tanimoto` of notebooks/09_tagbo/index.md (through RDKit).
    """
    n = len(fps)
    K = np.zeros((n, n))
    for i, fp in enumerate(fps):
        K[i] = DataStructs.BulkTanimotoSimilarity(fp, list(fps))
        if fp.GetNumOnBits() == 0:
            K[i] = 0.0
    for i, fp in enumerate(fps):
        if fp.GetNumOnBits() == 0:
            K[:, i] = 0.0
    np.fill_diagonal(K, 1.0)
    return K


def rbf_gram(descriptors, lengthscale: float | None = None) -> np.ndarray:
    """K[l, l'] = exp(-|d_l - d_l'|^2 / (2 s^2)) on numeric descriptors (n, p); ``s`` defaults
    to the median pairwise distance."""
    D = checks.array(descriptors, "descriptors", ndim=2)
    sq = ((D[:, None, :] - D[None, :, :]) ** 2).sum(-1)  # (n, n) squared distances
    if lengthscale is None:
        off = np.sqrt(sq[np.triu_indices(len(D), 1)])
        lengthscale = float(np.median(off)) if off.size and np.median(off) > 0 else 1.0
    s = checks.real(lengthscale, "lengthscale", above=0)
    return np.exp(-sq / (2 * s**2))


def tier_graph(tiers, same: float = 1.0, adjacent: float = 0.5) -> np.ndarray:
    """W[l, l'] = ``same`` if o_l = o_l', ``adjacent`` if |o_l - o_l'| = 1, else 0; no self
    loops.

    Implements eq. `tagbo-graph` of notebooks/09_tagbo/index.md.
    """
    o = checks.array(tiers, "tiers", ndim=1)
    if o.size == 0 or not np.all(o == np.round(o)):
        raise checks.InputError(f"tiers must be a non-empty array of integers, got {o!r}")
    checks.real(same, "same", minimum=0)
    checks.real(adjacent, "adjacent", minimum=0)
    gap = np.abs(o[:, None] - o[None, :])  # |o_l - o_l'|
    W = np.where(gap == 0, same, np.where(gap == 1, adjacent, 0.0))  # eq. tagbo-graph
    np.fill_diagonal(W, 0.0)  # no self loops
    return W


def normalized_laplacian(W) -> np.ndarray:
    """L = I - D^{-1/2} W D^{-1/2}, D = diag(W 1); an isolated level (degree 0) keeps
    L[l, l] = 1 and no off-diagonal entries.

    Implements eq. `tagbo-laplacian` of notebooks/09_tagbo/index.md.
    """
    W = checks.array(W, "W", ndim=2)
    if W.shape[0] != W.shape[1] or not np.allclose(W, W.T) or np.any(W < 0):
        raise checks.InputError("W must be a square, symmetric, non-negative weight matrix")
    d = W.sum(1)  # degrees
    inv = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)  # D^{-1/2}
    return np.eye(len(W)) - inv[:, None] * W * inv[None, :]  # eq. tagbo-laplacian


def diffusion_eigen(laplacian) -> tuple[np.ndarray, np.ndarray]:
    """The eigenpairs that :func:`diffusion_gram` (and the kernel's Gram) use: ``mu`` (n,) and
    ``V`` (n, n), taken one connected component of the graph at a time, so that every
    eigenvector lives on one component (exact zeros elsewhere), and each eigenvalue shifted by
    the smallest eigenvalue of its component: mu = lam - lam_min(component) >= 0.

    Then V diag(exp(-beta mu)) V^T is exp(-beta L) with each component's block multiplied by
    exp(beta lam_min(component)), a factor the unit-diagonal rescaling of eq.
    `tagbo-diffusion` cancels. Without the shift, a component whose smallest eigenvalue is
    above 0 (an isolated level has L = 1 and exp(-beta L) = e^-beta) underflows against the
    rounding of the others: at beta = 100, a full-matrix eigendecomposition that mixes
    eigenvectors of equal eigenvalues across components gave similarities of 1 (or -1)
    between an isolated level and the rest. With it, each block's largest eigenvalue of
    exp(-beta mu) is exactly 1, the diagonal is at least the component's Perron vector
    squared (positive: L's off-diagonal entries are <= 0), and levels in different components
    have similarity exactly 0, as exp(-beta L) is block diagonal.
    """
    L = checks.array(laplacian, "laplacian", ndim=2)
    off = L - np.diag(np.diag(L))
    if (
        L.shape[0] != L.shape[1]
        or L.shape[0] == 0
        or not np.all(np.isfinite(L))
        or not np.allclose(L, L.T, rtol=1e-9, atol=1e-12)
        or np.any(off > 0)
    ):
        raise checks.InputError(
            "laplacian must be a non-empty, finite, symmetric square matrix whose off-diagonal "
            f"entries are <= 0 (a graph Laplacian); got shape {L.shape}"
        )
    L = (L + L.T) / 2
    n = len(L)
    _, comp = connected_components(csr_matrix(off != 0), directed=False)  # component labels
    mu, V = np.zeros(n), np.zeros((n, n))
    col = 0
    for c in np.unique(comp):
        idx = np.flatnonzero(comp == c)
        lam_c, V_c = np.linalg.eigh(L[np.ix_(idx, idx)])  # L_c = V_c diag(lam_c) V_c^T
        k = slice(col, col + len(idx))
        mu[k] = lam_c - lam_c[0]  # shifted: the component's smallest eigenvalue becomes 0
        V[idx, k] = V_c  # eigenvectors supported on the component only
        col += len(idx)
    return mu, V


def diffusion_gram(laplacian, beta: float) -> np.ndarray:
    """K = exp(-beta L) through L's eigendecomposition, rescaled to unit diagonal:
    K[l, l'] / sqrt(K[l, l] K[l', l']). The eigenpairs are taken per connected component and
    shifted (:func:`diffusion_eigen`), which leaves the rescaled Gram unchanged and keeps it
    exact for any beta: levels in different components (an isolated level, say) have
    similarity 0, and every diagonal entry is 1.

    Implements eq. `tagbo-diffusion` of notebooks/09_tagbo/index.md.
    """
    mu, V = diffusion_eigen(laplacian)  # L = V diag(mu + shift per component) V^T
    beta = checks.real(beta, "beta", minimum=0)
    K = (V * np.exp(-beta * mu)) @ V.T  # exp(-beta L) up to a factor per component
    s = np.sqrt(np.diag(K))  # positive: each component's Perron vector is positive
    K = K / s[:, None] / s[None, :]  # unit diagonal
    np.fill_diagonal(K, 1.0)  # K[l, l] / K[l, l] is 1; drop the last bit of rounding
    return K
