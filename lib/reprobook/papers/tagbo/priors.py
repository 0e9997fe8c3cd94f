"""The emulated tier prior: an oracle-derived stand-in for the tiers an LLM would give.

This uses the ground truth (the marginal mean of the objective over each level) and then
corrupts it, so it says how good a prior must be for the method to help; it says nothing about
any real language model. The paper's own prior comes from an LLM; :mod:`.llm` asks an open one
for its tiers in the full profile's lookup notebooks (``llm="real"``), of which this emulation
is the deliberate stand-in (``llm="emulated"``).

- :func:`true_tiers`: tertiles of the levels' marginal means (eq. `tagbo-tiers`);
- :func:`corrupt_tiers`: each level's tier replaced, with probability p_flip, by one of the
  other tiers at random (eq. `tagbo-flip`);
- :func:`parroting_tiers`: tiers that only repeat the descriptors, the tertiles of the leading
  eigenvector of the descriptor Gram (a prior that adds nothing the descriptors lack).
"""

from __future__ import annotations

import numpy as np

from reprobook.core import checks, tie_groups

__all__ = [
    "marginal_means",
    "true_tiers",
    "corrupt_tiers",
    "parroting_tiers",
    "N_TIERS",
]

N_TIERS = 3  # low, medium, high expected suitability


def marginal_means(X, y, n_levels: int, column: int) -> np.ndarray:
    """Mean of ``y`` over the rows whose ``column`` holds each level (NaN for an absent one)."""
    X = checks.array(X, "X", ndim=2)
    y = checks.array(y, "y", ndim=1)
    col = X[:, checks.integer(column, "column", minimum=0, maximum=X.shape[1] - 1)]
    return np.array(
        [y[col == lvl].mean() if np.any(col == lvl) else np.nan for lvl in range(n_levels)]
    )


TIE_TOL = 1e-9  # scores this close (relative to the largest |score|) count as tied


def true_tiers(scores) -> np.ndarray:
    """o_l = 1 + floor(T rank(l) / L), T = 3: the tertiles of the levels' scores, ranks from 0
    (ties broken by the level's index); 1 is the lowest tier.

    Scores that differ by rounding only (within ``TIE_TOL`` times the largest |score| of the
    first score of their run, :func:`reprobook.core.tie_groups`) count as tied, so that two
    levels with the same score in exact arithmetic rank by index on every machine.

    Implements eq. `tagbo-tiers` of notebooks/09_tagbo/index.md.
    """
    s = checks.array(scores, "scores", ndim=1)
    if s.size == 0 or not np.all(np.isfinite(s)):
        raise checks.InputError("scores must be a non-empty array of finite numbers")
    order = np.argsort(-s, kind="stable")  # largest first
    width = TIE_TOL * max(np.abs(s).max(), np.finfo(float).tiny)
    group = np.empty(s.size, dtype=int)
    group[order] = -tie_groups(s[order], width)  # equal scores share a group; low = lowest
    rank = np.empty(s.size, dtype=int)
    rank[np.lexsort((np.arange(s.size), group))] = np.arange(s.size)  # rank 0 = lowest score
    return 1 + (N_TIERS * rank) // s.size  # eq. tagbo-tiers


def corrupt_tiers(tiers, p_flip: float, rng) -> np.ndarray:
    """Each tier kept with probability 1 - p_flip, else replaced by one of the other T - 1
    tiers, uniformly.

    Implements eq. `tagbo-flip` of notebooks/09_tagbo/index.md.
    """
    o = checks.array(tiers, "tiers", ndim=1).astype(int)
    if np.any((o < 1) | (o > N_TIERS)):
        raise checks.InputError(f"tiers must lie in 1..{N_TIERS}, got {o.tolist()}")
    p = checks.probability(p_flip, "p_flip")
    rng = checks.generator(rng)
    flip = rng.random(o.size) < p  # which levels the prior gets wrong
    shift = rng.integers(1, N_TIERS, size=o.size)  # 1..T-1: another tier, uniformly
    wrong = (o - 1 + shift) % N_TIERS + 1
    return np.where(flip, wrong, o)  # eq. tagbo-flip


def parroting_tiers(desc_gram) -> np.ndarray:
    """Tertiles of the leading eigenvector of the doubly centred descriptor Gram: a prior
    that only restates the descriptors.

    The eigenvector's sign is fixed by its largest entry (in magnitude; the first such level
    when several are equal to rounding), which is made positive. Its entries sum to zero (the
    centred Gram maps the ones vector to zero), so the sign of their sum would be rounding
    noise. A leading eigenvalue tied with the next to rounding has no leading eigenvector to
    speak of: that raises an error."""
    K = checks.array(desc_gram, "desc_gram", ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n < 2 or not np.allclose(K, K.T):
        raise checks.InputError(
            f"desc_gram must be a symmetric (L, L) matrix with L >= 2, got shape {K.shape}"
        )
    H = np.eye(n) - 1.0 / n  # centring
    lam, V = np.linalg.eigh(H @ K @ H)
    if lam[-1] - lam[-2] <= 1e-9 * max(abs(lam[-1]), 1e-300):
        raise checks.InputError(
            f"the centred descriptor Gram has a repeated leading eigenvalue ({lam[-1]:.6g}): "
            "its leading eigenvector, and so the parroting tiers, are not defined"
        )
    v = V[:, -1]
    big = np.abs(v) >= np.abs(v).max() * (1 - 1e-9)  # the largest entries, to rounding
    v = v * np.sign(v[np.argmax(big)])  # the first of them made positive
    return true_tiers(v)
