"""Agreement and individual proportionality (IP) for the chapter on the angular mean.

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. The definitions here are
reconstructed from the abstract (the full text was not available); the equations are on the
chapter's page, notebooks/02_angular_mean/index.md:

* agreement (pairwise, Kendall style; eq. `am-agreement`): on a batch X = (x_1, ..., x_m)
  voter i agrees with the collective vector theta on the pair (j, k) when
  sign<theta, x_j - x_k> = sign<theta_i, x_j - x_k>; A_i(theta, X) is the fraction of the
  m(m-1)/2 pairs on which they agree;
* long-run IP: E_X[A_i(theta, X)] >= alpha_i for every voter type i (eq. `am-ip`);
* per-batch IP: A_i(theta, X) >= alpha_i for every i on every batch.

For item differences with a rotation-invariant law (e.g. i.i.d. Gaussian items N(mu, s^2 I)),
the probability that two linear rules order a random pair differently is
angle(theta, theta')/pi (the random-hyperplane identity), so E[A_i] = 1 - angle(theta,
theta_i)/pi and long-run IP is the geometric condition angle(theta, theta_i) <= pi (1 - alpha_i)
(eq. `am-long-run`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .geometry import angle, as_generator, check_direction, check_profile

__all__ = [
    "long_run_agreement",
    "per_batch_agreement",
    "long_run_ratio",
    "satisfies_long_run_ip",
    "BatchShortfall",
    "per_batch_shortfall",
    "hyperplane_mc",
]

_CHUNK_ELEMENTS = 1 << 20  # pair scores per chunk of batches (float64: 8 MB per work array)


def long_run_agreement(theta, thetas) -> np.ndarray:
    """Expected agreement of each voter with theta under rotation-invariant item differences (n,).

    E[A_i] = 1 - angle(theta, theta_i) / pi      (the random-hyperplane identity)

    Implements eq. `am-long-run` of notebooks/02_angular_mean/index.md.
    """
    U, _ = check_profile(thetas)
    t = check_direction(theta, U.shape[1])
    return 1.0 - angle(t[None, :], U) / np.pi


def _check_batches(X, d: int) -> np.ndarray:
    """X as a float array (m, d) or (B, m, d) with m >= 2 and matching d."""
    A = np.asarray(X, dtype=float)
    if A.ndim not in (2, 3):
        raise ValueError(
            "X must be one batch of shape (m, d) or a stack of batches (B, m, d); "
            f"got shape {A.shape}"
        )
    if A.shape[-1] != d:
        raise ValueError(
            f"the items of X have dimension {A.shape[-1]} but the scoring vectors have "
            f"dimension d = {d}"
        )
    if A.shape[-2] < 2:
        raise ValueError(
            f"a batch needs at least m = 2 items to contain a pair; got m = {A.shape[-2]}"
        )
    if A.ndim == 3 and A.shape[0] < 1:
        raise ValueError("X holds no batches (B = 0)")
    if not np.all(np.isfinite(A)):
        raise ValueError("X contains NaN or inf")
    return A


def per_batch_agreement(theta, thetas, X, chunk_elements: int = _CHUNK_ELEMENTS) -> np.ndarray:
    """Pairwise agreement A_i(theta, X) of each voter on each batch.

        A_i(theta, X) = (2 / (m (m-1))) * #{ j < k : sign<theta, x_j - x_k>
                                                     = sign<theta_i, x_j - x_k> }

    Implements eq. `am-agreement` of notebooks/02_angular_mean/index.md. X: (m, d) -> (n,);
    (B, m, d) -> (B, n). Ties follow the sign convention literally: a pair that both rules tie
    counts as agreement, a pair that only one rule ties as disagreement (with continuous item
    laws, such as Gaussian items, ties have probability 0). Score
    differences are exact differences of the computed scores <theta, x_j> - <theta, x_k>.
    Vectorised over pairs (upper-triangle indices) and voters, chunked over batches so that a
    chunk holds at most ``chunk_elements`` pair scores.
    """
    U, _ = check_profile(thetas)  # (n, d) the voters' unit directions
    n, d = U.shape
    t = check_direction(theta, d)  # (d,) the collective rule theta*
    A = _check_batches(X, d)
    single = A.ndim == 2  # one batch (m, d) or a stack (B, m, d)
    A3 = A[None] if single else A  # (B, m, d)
    B, m, _ = A3.shape
    jj, kk = np.triu_indices(m, k=1)  # eq. am-agreement: the pairs j < k
    P = jj.size  # m (m - 1) / 2 pairs
    W = np.concatenate([t[None, :], U], axis=0).T  # (d, n+1): the collective rule first
    per_batch = max(1, int(chunk_elements) // (P * (n + 1)))  # batches per chunk (memory)
    out = np.empty((B, n))
    for s in range(0, B, per_batch):
        # (b, n+1, m): the score <theta, x_j> of every item under every rule
        scores = np.ascontiguousarray(np.swapaxes(A3[s : s + per_batch] @ W, 1, 2))
        D = np.take(scores, jj, axis=2)  # (b, n+1, P) score differences of the pairs j < k
        D -= np.take(scores, kk, axis=2)  # <theta, x_j - x_k> for each rule and pair
        np.sign(D, out=D)  # eq. am-agreement: only the order of each pair counts
        # eq. am-agreement: the share of pairs a voter orders as theta* does
        out[s : s + per_batch] = np.count_nonzero(D[:, 1:] == D[:, :1], axis=2) / P
    return out[0] if single else out


def long_run_ratio(theta, thetas, alphas, atol: float = 1e-12) -> np.ndarray:
    """Per-voter long-run IP ratio (n,):  r_i = angle(theta, theta_i) / (pi (1 - alpha_i)).

    r_i <= 1 exactly when E[A_i] = 1 - angle/pi >= alpha_i: long-run IP (eq. `am-ip`) through
    eq. `am-long-run` of notebooks/02_angular_mean/index.md. A voter with alpha_i = 1 needs angle 0:
    its ratio is 0 when angle <= atol and inf otherwise.
    """
    U, a = check_profile(thetas, alphas)
    t = check_direction(theta, U.shape[1])
    ang = angle(t[None, :], U)
    slack = np.pi * (1.0 - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(
            slack > 0, ang / np.where(slack > 0, slack, 1.0), np.where(ang <= atol, 0.0, np.inf)
        )
    return r


def satisfies_long_run_ip(theta, thetas, alphas, tol: float = 1e-9) -> bool:
    """Whether angle(theta, theta_i) <= pi (1 - alpha_i) + tol for every voter (tol in radians).

    Equivalent to E[A_i] >= alpha_i - tol/pi under rotation-invariant item differences: long-run
    IP (eq. `am-ip`) in the form of eq. `am-long-run` of notebooks/02_angular_mean/index.md.
    """
    U, a = check_profile(thetas, alphas)
    t = check_direction(theta, U.shape[1])
    return bool(np.all(angle(t[None, :], U) <= np.pi * (1.0 - a) + tol))


@dataclass(frozen=True, eq=False)
class BatchShortfall:
    """Per-batch IP diagnostics: shortfall (B,) = max_i (alpha_i - A_i)_+; violated (B,) bool =
    shortfall > tol; agreement (B, n) = A_i on each batch. For one batch X (m, d) the leading B
    axis is absent."""

    shortfall: np.ndarray
    violated: np.ndarray
    agreement: np.ndarray


def per_batch_shortfall(theta, thetas, alphas, X, tol: float = 1e-12) -> BatchShortfall:
    """Worst per-batch IP shortfall of theta on each batch.

        shortfall(X) = max_i max(alpha_i - A_i(theta, X), 0);   violated(X) = shortfall(X) > tol

    The s(X) of eq. `am-shortfall-slope` of notebooks/02_angular_mean/index.md: per-batch IP
    (eq. `am-ip`) holds on X exactly when shortfall(X) = 0. X: (m, d) or (B, m, d). A
    shortfall of at most ``tol`` is set to 0: A_i is a count over the pairs, so a type whose
    share is reached exactly can be short by a rounding error of the normalised share, and
    the log-log fit of the slope (which leaves out sizes without a shortfall) must not take
    that for a shortfall of 1e-17.
    """
    _, a = check_profile(thetas, alphas)
    A = per_batch_agreement(theta, thetas, X)
    short = np.max(np.maximum(a - A, 0.0), axis=-1)
    short = np.where(short > tol, short, 0.0)  # rounding is not a shortfall
    return BatchShortfall(shortfall=short, violated=short > tol, agreement=A)


def hyperplane_mc(
    theta_a,
    theta_b,
    n_pairs: int,
    rng: np.random.Generator | int | None = None,
    chunk: int = 1 << 20,
) -> tuple[float, float]:
    """Monte Carlo of P[sign<theta_a, x - x'> != sign<theta_b, x - x'>] for Gaussian items.

    x, x' i.i.d. N(0, I_d), so x - x' ~ N(0, 2 I_d); only its direction matters, and the
    random-hyperplane identity behind eq. `am-long-run` of notebooks/02_angular_mean/index.md
    says the probability is angle(theta_a, theta_b) / pi.
    Returns (fraction of the n_pairs pairs ordered differently, its standard error
    sqrt(p (1 - p) / n_pairs)).
    """
    ta = check_direction(theta_a, name="theta_a")
    tb = check_direction(theta_b, ta.size, name="theta_b")
    n_pairs = checks.integer(n_pairs, "n_pairs", minimum=1)
    gen = as_generator(rng)
    W = np.stack([ta, tb], axis=1)  # (d, 2)
    differ = 0
    done = 0
    while done < n_pairs:
        k = min(chunk, n_pairs - done)
        Z = gen.standard_normal((k, ta.size))  # the pair differences, up to the factor sqrt(2)
        s = np.sign(Z @ W)
        differ += int(np.count_nonzero(s[:, 0] != s[:, 1]))
        done += k
    p = differ / n_pairs
    return p, float(np.sqrt(p * (1.0 - p) / n_pairs))
