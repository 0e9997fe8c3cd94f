"""Spectral-bias diagnostics of chapter 17 (our measurement; the paper's is not known).

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). For a layer y = W x with W = U diag(sigma) V^T and centred inputs X:
energy shares (eq. `spectral-reverse-prompt-energy`), the top share and effective rank of
those shares, the stable rank of W, and logistic probes on projections of the features.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from reprobook.core import checks

__all__ = [
    "energy_shares",
    "top_share",
    "effective_rank",
    "stable_rank",
    "direction_probe",
]


def energy_shares(weight, x) -> np.ndarray:
    """e_j = sigma_j^2 ||X_c v_j||^2 / sum_i sigma_i^2 ||X_c v_i||^2 (X_c: x centred), the
    share of the output variance along each singular direction, largest sigma first.

    Implements eq. `spectral-reverse-prompt-energy` of
    notebooks/17_spectral_reverse_prompt/index.md.
    """
    w = checks.array(torch.as_tensor(weight).detach().double(), "weight", ndim=2)
    x = checks.array(torch.as_tensor(x).detach().double(), "x", ndim=2, shape=(None, w.shape[1]))
    _, s, vt = np.linalg.svd(w, full_matrices=False)  # sigma_1 >= ... >= sigma_k
    xc = x - x.mean(axis=0)  # centred inputs
    e = s**2 * ((xc @ vt.T) ** 2).sum(axis=0)  # eq. energy: variance along u_j
    total = e.sum()
    if total <= 0:
        raise checks.InputError("the layer output has no variance (W X_c is zero)")
    return e / total


def top_share(shares, fraction: float = 0.1) -> float:
    """The energy held by the ceil(fraction k) largest-sigma directions (shares in sigma
    order, as :func:`energy_shares` returns them)."""
    e = checks.array(shares, "shares", ndim=1)
    fraction = checks.real(fraction, "fraction", above=0, maximum=1)
    return float(e[: math.ceil(fraction * e.size)].sum())


def effective_rank(shares) -> float:
    """exp(entropy of the shares): k for equal shares, 1 for all energy in one direction."""
    e = checks.array(shares, "shares", ndim=1)
    e = e[e > 0] / e.sum()
    return float(np.exp(-(e * np.log(e)).sum()))


def stable_rank(weight) -> float:
    """||W||_F^2 / sigma_max^2."""
    w = checks.array(torch.as_tensor(weight).detach().double(), "weight", ndim=2)
    s = np.linalg.svd(w, compute_uv=False)
    return float((s**2).sum() / s[0] ** 2)


def direction_probe(features, y, train, test, directions=None) -> float:
    """Test accuracy of a logistic-regression probe trained on ``features @ directions``
    (all features when ``directions`` is None) of the ``train`` rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    f = np.asarray(features, dtype=float)
    if directions is not None:
        f = f @ np.asarray(directions, dtype=float)
    y = np.asarray(y)
    scaler = StandardScaler().fit(f[train])
    clf = LogisticRegression(max_iter=500).fit(scaler.transform(f[train]), y[train])
    return float((clf.predict(scaler.transform(f[test])) == y[test]).mean())
