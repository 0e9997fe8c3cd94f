"""Preference profiles and item batches for the chapter on the angular mean (arXiv 2605.12717).

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. The paper's three real
preference data sets are not identified in the abstract and none is available offline, so every
profile here is generated (a reconstruction of the setting, not the paper's data):

* :func:`random_profile` - n uniform directions on S^{d-1}, shares ~ Dirichlet(concentration);
* :func:`type_profile` - k voter types on one great circle, the extreme two at a given angle;
* :func:`vmf_voters` - individual voters drawn from von Mises-Fisher clouds around type centres;
* :func:`two_voter_opposite` - the two opposite voters of the m = 2 impossibility example;
* :func:`gaussian_batches` - batches of Gaussian items (rotation invariant when cov = I);
* :func:`table_items` / :func:`table_batches` - standardised rows of tables that scikit-learn
  ships (wine, diabetes, breast_cancer), for non-Gaussian, correlated items.

Every random generator takes ``rng``: a ``numpy.random.Generator`` or an integer seed.
Angles are in radians.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from reprobook.core import checks

from .geometry import _sqrtm_psd, as_generator, check_profile, unit

__all__ = [
    "random_profile",
    "type_profile",
    "vmf_voters",
    "two_voter_opposite",
    "gaussian_batches",
    "table_items",
    "table_batches",
    "TABLES",
]

TABLES: tuple[str, ...] = ("wine", "diabetes", "breast_cancer")


def random_profile(
    n: int, d: int, concentration: float = 1.0, rng: np.random.Generator | int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A random profile: thetas (n, d) i.i.d. uniform on S^{d-1}, alphas (n,) ~
    Dirichlet(concentration * 1_n).

    Small concentrations (0.3) give a few dominant types and some tiny shares; 1 is uniform on
    the simplex. For n = 1 the single share is 1.
    """
    n = checks.integer(n, "n", minimum=1)
    d = checks.integer(d, "d", minimum=2)
    concentration = checks.real(concentration, "concentration", above=0)
    gen = as_generator(rng)
    thetas = unit(gen.standard_normal((n, d)))
    alphas = gen.dirichlet(np.full(n, float(concentration))) if n > 1 else np.ones(1)
    return thetas, alphas / alphas.sum()


def _random_plane(d: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two orthonormal vectors spanning a uniformly random plane of R^d (QR of a Gaussian
    matrix)."""
    Q, R = np.linalg.qr(gen.standard_normal((d, 2)))
    Q = Q * np.sign(np.diag(R))[None, :]
    return Q[:, 0], Q[:, 1]


def type_profile(
    d: int, separation: float, alphas, rng: np.random.Generator | int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """k = len(alphas) voter types on one great circle of a random plane; returns
    (thetas (k, d), alphas (k,)).

    Type j sits at angle j * separation / (k - 1) along the circle (e1 cos + e2 sin in the random
    plane span(e1, e2)), so types 0 and k-1 are exactly ``separation`` radians apart and the
    others are evenly spaced between them; every pairwise angle is at most ``separation``.
    For k = 2 this is two types at angle ``separation``. separation in [0, pi]; k = 1 gives one
    type (separation unused).
    """
    d = checks.integer(d, "d", minimum=2)
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size < 1:
        raise ValueError(
            f"alphas must be a nonempty 1-D sequence of type shares; got shape {a.shape}"
        )
    if not 0.0 <= separation <= np.pi:
        raise ValueError(f"separation must be an angle in [0, pi] radians; got {separation!r}")
    gen = as_generator(rng)
    e1, e2 = _random_plane(d, gen)
    k = a.size
    phi = np.linspace(0.0, float(separation), k) if k > 1 else np.zeros(1)
    thetas = np.cos(phi)[:, None] * e1[None, :] + np.sin(phi)[:, None] * e2[None, :]
    _, a = check_profile(thetas, a)
    return thetas, a


def vmf_voters(
    centres,
    kappa: float,
    n_per_type,
    rng: np.random.Generator | int | None = None,
    type_alphas=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Individual voters drawn from von Mises-Fisher clouds around type centres.

    Voter l of type t has theta ~ vMF(mu = centres[t] / |centres[t]|, kappa)
    (scipy.stats.vonmises_fisher; density proportional to exp(kappa <mu, x>) on S^{d-1}).
    ``n_per_type`` is one count for every type or one count per type. Returns (thetas (N, d),
    alphas (N,), labels (N,) type indices). Shares: equal, 1/N per voter, when ``type_alphas``
    is None (type t then weighs n_t / N); otherwise type_alphas[t] / n_t per voter of type t.
    """
    from scipy.stats import vonmises_fisher

    C, _ = check_profile(centres)
    k, d = C.shape
    kappa = checks.real(kappa, "kappa", above=0)  # kappa -> 0 is the uniform law
    counts = np.atleast_1d(np.asarray(n_per_type))
    if counts.size == 1:
        counts = np.repeat(counts, k)
    if (
        counts.ndim != 1
        or counts.size != k
        or not np.issubdtype(counts.dtype, np.integer)
        or np.any(counts < 1)
    ):
        raise ValueError(
            f"n_per_type must be a positive integer or {k} positive integers (one per type); "
            f"got {n_per_type!r}"
        )
    counts = counts.astype(int)
    gen = as_generator(rng)
    thetas = np.concatenate(
        [
            vonmises_fisher(C[t], float(kappa)).rvs(int(counts[t]), random_state=gen).reshape(-1, d)
            for t in range(k)
        ]
    )
    labels = np.repeat(np.arange(k), counts)
    if type_alphas is None:
        alphas = np.full(labels.size, 1.0 / labels.size)
    else:
        ta = np.asarray(type_alphas, dtype=float)
        _, ta = check_profile(C, ta)
        alphas = ta[labels] / counts[labels]
    return thetas, alphas, labels


def two_voter_opposite(d: int, alpha: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The m = 2 counterexample profile: thetas = (e_1, -e_1) (2, d), alphas = (alpha,
    1 - alpha).

    On a batch of two items the voters order the single pair oppositely, so whatever theta does,
    one of them has agreement 0.
    """
    d = checks.integer(d, "d", minimum=2)
    alpha = checks.probability(alpha, "alpha", open_low=True, open_high=True)
    thetas = np.zeros((2, d))
    thetas[0, 0], thetas[1, 0] = 1.0, -1.0
    return thetas, np.array([alpha, 1.0 - alpha])


def gaussian_batches(
    n_batches: int, m: int, d: int, rng: np.random.Generator | int | None = None, cov=None
) -> np.ndarray:
    """Batches of i.i.d. Gaussian items, shape (n_batches, m, d): x ~ N(0, cov) (cov = I_d by
    default).

    Drawn as z Sigma^{1/2} with z standard normal, so a seed gives the same z for any cov.
    """
    B = checks.integer(n_batches, "n_batches", minimum=1)
    m = checks.integer(m, "m", minimum=2)
    d = checks.integer(d, "d", minimum=2)
    gen = as_generator(rng)
    Z = gen.standard_normal((B, m, d))
    if cov is None:
        return Z
    half, _ = _sqrtm_psd(cov)
    if half.shape[0] != d:
        raise ValueError(f"cov is {half.shape[0]} x {half.shape[0]} but d = {d}")
    return Z @ half


@cache
def _load_table(name: str) -> np.ndarray:
    from sklearn import datasets

    loader = {
        "wine": datasets.load_wine,
        "diabetes": datasets.load_diabetes,
        "breast_cancer": datasets.load_breast_cancer,
    }[name]
    X = np.asarray(loader().data, dtype=float)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    X.setflags(write=False)
    return X


def table_items(name: str) -> np.ndarray:
    """Standardised rows (N, d) of a table bundled with scikit-learn (offline).

    name: "wine" (178 x 13), "diabetes" (442 x 10) or "breast_cancer" (569 x 30). Each column is
    z-scored (mean 0, population standard deviation 1). The items are neither Gaussian nor
    isotropic (columns are correlated), so the random-hyperplane identity holds only
    approximately.
    """
    checks.choice(name, "name", TABLES)
    return _load_table(name).copy()


def table_batches(
    name: str, n_batches: int, m: int, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Batches (n_batches, m, d) of m distinct rows each, drawn uniformly without replacement
    from :func:`table_items` (independently across batches). Requires m <= number of rows."""
    X = table_items(name)
    B = checks.integer(n_batches, "n_batches", minimum=1)
    m = checks.integer(m, "m", minimum=2)
    if m > X.shape[0]:
        raise ValueError(f"m = {m} exceeds the {X.shape[0]} rows of table {name!r}")
    gen = as_generator(rng)
    idx = np.argsort(gen.random((B, X.shape[0])), axis=1)[:, :m]  # (B, m) distinct rows per batch
    return X[idx]
