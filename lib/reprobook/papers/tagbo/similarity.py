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

from reprobook.core import checks

__all__ = [
    "fingerprints",
    "tanimoto_gram",
    "rbf_gram",
    "tier_graph",
    "normalized_laplacian",
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


def diffusion_gram(laplacian, beta: float) -> np.ndarray:
    """K = exp(-beta L) through L's eigendecomposition, rescaled to unit diagonal:
    K[l, l'] / sqrt(K[l, l] K[l', l']).

    Implements eq. `tagbo-diffusion` of notebooks/09_tagbo/index.md.
    """
    L = checks.array(laplacian, "laplacian", ndim=2)
    beta = checks.real(beta, "beta", minimum=0)
    lam, V = np.linalg.eigh((L + L.T) / 2)  # L = V diag(lam) V^T
    K = (V * np.exp(-beta * lam)) @ V.T  # exp(-beta L), eq. tagbo-diffusion
    s = np.sqrt(np.diag(K))  # positive: exp(-beta L) is positive definite
    return K / s[:, None] / s[None, :]  # unit diagonal
