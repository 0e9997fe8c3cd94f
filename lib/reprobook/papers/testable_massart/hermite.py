"""Orthonormal multivariate Hermite features and Gauss-Hermite product rules.

Paper: "Testable Learning of General Halfspaces under Massart Noise" (Diakonikolas, Iakovidis,
Kane, Liu), arXiv 2602.22300. Only the abstract was read; this module is the standard basis of
the testable-learning template that the chapter reconstructs (moment matching and sandwiching
polynomials are both written in it), not code from the paper.

The probabilists' Hermite polynomials He_j are orthogonal under N(0, 1) with
E[He_i He_j] = i! [i = j], so h_j = He_j / sqrt(j!) is orthonormal. For a multi-index a in N^d
(eq. `massart-hermite` of notebooks/05_testable_massart/index.md),

    H_a(x) = prod_{j=1..d} h_{a_j}(x_j),          E_{N(0, I_d)}[H_a H_b] = [a = b],

and in particular E[H_0] = 1 and E[H_a] = 0 for every a != 0. The features of degree <= k are
the H_a with |a| = a_1 + ... + a_d <= k; there are C(d + k, k) of them.

The Gauss-Hermite rule with n nodes integrates every polynomial of degree <= 2n - 1 exactly
against N(0, 1); its d-fold tensor product integrates every monomial whose degree in each
coordinate is <= 2n - 1 exactly against N(0, I_d).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from numpy.polynomial import hermite_e
from numpy.typing import ArrayLike

from reprobook.core import checks

__all__ = [
    "multi_indices",
    "n_features",
    "hermite_1d",
    "features",
    "feature_means",
    "gauss_hermite_product",
]

# rows of X processed at once by `features` and `feature_means` are chosen so that one block of
# features holds about this many float64 numbers (512 KiB: the gathers then stay in cache, which
# measured 3x faster than 32 MiB blocks at n = 20,000, d = 5, degree 4), but at least _MIN_ROWS rows
_BLOCK_ENTRIES = 65_536
_MIN_ROWS = 16
# the largest tensor-product rule `gauss_hermite_product` builds
_MAX_ATOMS = 20_000_000


def n_features(d: int, degree: int, include_constant: bool = True) -> int:
    """Number of multi-indices a in N^d with |a| <= degree: C(d + degree, degree), minus 1
    without a = 0."""
    d = checks.integer(d, "d", minimum=1)
    degree = checks.integer(degree, "degree", minimum=0)
    return math.comb(d + degree, degree) - (0 if include_constant else 1)


def multi_indices(d: int, degree: int, *, include_constant: bool = True) -> np.ndarray:
    """All a in N^d with |a| <= degree, as an int array of shape (m, d),
    m = C(d + degree, degree) [- 1].

    Order: by total degree |a|, then, within a degree, in decreasing lexicographic order of the
    exponent vector (x_1 before x_2, x_1^2 before x_1 x_2 before x_2^2: the order of
    ``sklearn.preprocessing.PolynomialFeatures``). Without the constant, a = 0 is left out.
    """
    d = checks.integer(d, "d", minimum=1)
    degree = checks.integer(degree, "degree", minimum=0)
    return _cached_indices(d, degree, bool(include_constant)).copy()


@functools.lru_cache(maxsize=64)
def _cached_indices(d: int, degree: int, include_constant: bool) -> np.ndarray:
    m = n_features(d, degree, include_constant)
    out = np.zeros((m, d), dtype=np.int64)
    row = 0 if include_constant else -1
    for k in range(degree + 1):
        # each sorted k-tuple of coordinates is one monomial of degree k (a multiset of variables)
        for combo in itertools.combinations_with_replacement(range(d), k):
            if row >= 0:
                for j in combo:
                    out[row, j] += 1
            row += 1
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _cached_plan(d: int, degree: int, include_constant: bool) -> tuple[np.ndarray, np.ndarray]:
    A = _cached_indices(d, degree, include_constant)
    cols = _sparse_form(A, degree)
    cols.flags.writeable = False
    return A, cols


def hermite_1d(x: ArrayLike, degree: int) -> np.ndarray:
    """Orthonormal Hermite values h_j(x) = He_j(x) / sqrt(j!), j = 0..degree, shape
    x.shape + (degree + 1,).

    Implements the recurrence of eq. `massart-hermite` of notebooks/05_testable_massart/index.md:
    the three-term recurrence of the normalised polynomials (stable in float64, no factorials):
    h_0 = 1, h_1 = x, h_{j+1} = (x h_j - sqrt(j) h_{j-1}) / sqrt(j + 1).
    """
    degree = checks.integer(degree, "degree", minimum=0)
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape + (degree + 1,), dtype=np.float64)
    out[..., 0] = 1.0
    if degree >= 1:
        out[..., 1] = x
    for j in range(1, degree):
        out[..., j + 1] = (x * out[..., j] - math.sqrt(j) * out[..., j - 1]) / math.sqrt(j + 1)
    return out


def _check_X(X: ArrayLike) -> np.ndarray:
    """X as a finite float64 array of shape (n, d) with n >= 1 and d >= 1."""
    X = checks.array(X, "X", ndim=2, what="(n, d)")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise checks.InputError(f"X (n, d) must have n, d >= 1, got shape {X.shape}")
    return X


def _check_indices(indices: ArrayLike, d: int) -> np.ndarray:
    """Validate user multi-indices: non-negative ints of shape (m, d)."""
    A = np.asarray(indices)
    if A.ndim != 2 or A.shape[1] != d:
        raise ValueError(
            f"indices must have shape (m, d) with d = {d} (the columns of X), got shape {A.shape}"
        )
    if A.size and (not np.issubdtype(A.dtype, np.integer) or A.min() < 0):
        raise ValueError("indices must be non-negative integers (exponents of each coordinate)")
    return A.astype(np.int64)


def _sparse_form(A: np.ndarray, degree: int) -> np.ndarray:
    """Column positions into the flattened (d, degree + 1) table of 1-d values, one row per factor.

    Each multi-index has at most ``s = max_a #{j : a_j > 0}`` non-zero exponents, so H_a is a
    product of s table entries (factors with a_j = 0 are h_0 = 1 and are skipped; padding points
    at h_0 of coordinate 0). Returns ``cols`` of shape (s, m).
    """
    nonzero = A > 0
    s = int(max(1, nonzero.sum(axis=1).max(initial=0)))
    order = np.argsort(~nonzero, axis=1, kind="stable")[:, :s]  # non-zero coordinates first, (m, s)
    power = np.take_along_axis(A, order, axis=1)  # (m, s)
    cols = np.where(power > 0, order * (degree + 1) + power, 0)
    return np.ascontiguousarray(cols.T)


def _plan(X: ArrayLike, degree: int, include_constant: bool, indices):
    X = _check_X(X)
    d = X.shape[1]
    if indices is None:
        degree = checks.integer(degree, "degree", minimum=0)
        A, cols = _cached_plan(d, degree, bool(include_constant))
    else:
        A = _check_indices(indices, d)
        degree = int(A.max(initial=0))
        cols = _sparse_form(A, degree)
    return X, A, degree, cols


def _hermite_rows(x: np.ndarray, degree: int) -> np.ndarray:
    """h_j(x) for a float64 array x of shape (d, nb), as shape (d, degree + 1, nb): the values of
    :func:`hermite_1d`, bit for bit (the same recurrence, the same operations in the same order),
    laid out so that each (coordinate, j) is one contiguous row."""
    d, nb = x.shape
    out = np.empty((d, degree + 1, nb), dtype=np.float64)
    out[:, 0, :] = 1.0
    if degree >= 1:
        out[:, 1, :] = x
    for j in range(1, degree):
        out[:, j + 1, :] = (x * out[:, j, :] - math.sqrt(j) * out[:, j - 1, :]) / math.sqrt(j + 1)
    return out


def _block_features(
    Xb: np.ndarray, degree: int, cols: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """H_a for one block of rows: gather-and-multiply over the (at most |a|) non-trivial factors.

    The factors are gathered as rows of the transposed table (contiguous copies, about 2.5 times
    faster than gathering columns) and multiplied in the same order; the (nb, m) result, written
    into ``out`` when given, is C-ordered as before, so the products are the same bits."""
    nb, d = Xb.shape
    table = _hermite_rows(Xb.T, degree).reshape(d * (degree + 1), nb)  # (d * (degree + 1), nb)
    G = table.take(cols[0], axis=0)  # (m, nb)
    for c in cols[1:]:
        G *= table.take(c, axis=0)
    if out is None:
        return np.ascontiguousarray(G.T)  # (nb, m), C-ordered
    out[...] = G.T
    return out


def _block_rows(m: int, d: int, degree: int) -> int:
    return max(_MIN_ROWS, _BLOCK_ENTRIES // max(m, d * (degree + 1), 1))


def features(
    X: ArrayLike,
    degree: int,
    *,
    include_constant: bool = True,
    indices: ArrayLike | None = None,
) -> np.ndarray:
    """Orthonormal Hermite features H_a(x_i) = prod_j h_{a_j}(x_ij), shape (n, m).

    Implements the products of eq. `massart-hermite` of notebooks/05_testable_massart/index.md.

    The columns follow ``multi_indices(d, degree, include_constant=include_constant)`` unless an
    explicit (m, d) array of multi-indices ``indices`` is given (then ``degree`` is ignored and
    the largest |a| is used). Rows are processed in blocks of about 65,536 entries, so only the
    (n, m) output itself scales with n * m.
    """
    X, A, degree, cols = _plan(X, degree, include_constant, indices)
    n, d = X.shape
    m = A.shape[0]
    out = np.empty((n, m), dtype=np.float64)
    if m == 0:
        return out
    step = _block_rows(m, d, degree)
    for start in range(0, n, step):
        _block_features(X[start : start + step], degree, cols, out=out[start : start + step])
    return out


def feature_means(
    X: ArrayLike,
    degree: int,
    *,
    include_constant: bool = True,
    indices: ArrayLike | None = None,
    weights: ArrayLike | None = None,
) -> np.ndarray:
    """Empirical (or weighted) means of the Hermite features, shape (m,), without storing the
    (n, m) matrix: the inner means of eq. `massart-moment-stat` of
    notebooks/05_testable_massart/index.md.

    mean_a = sum_i w_i H_a(x_i) with w_i = 1 / n by default, or the given non-negative weights
    (normalised to sum to 1). Rows are processed in blocks, so memory is O(block * m + m).
    """
    X, A, degree, cols = _plan(X, degree, include_constant, indices)
    n, d = X.shape
    m = A.shape[0]
    if weights is None:
        w = np.full(n, 1.0 / n)
    else:
        w = checks.array(weights, "weights", shape=(n,))
        if np.any(w < 0) or w.sum() <= 0:
            raise checks.InputError("weights must be non-negative with a positive sum")
        w = w / w.sum()
    out = np.zeros(m, dtype=np.float64)
    if m == 0:
        return out
    step = _block_rows(m, d, degree)
    for start in range(0, n, step):
        out += w[start : start + step] @ _block_features(X[start : start + step], degree, cols)
    return out


def gauss_hermite_product(d: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor product of the n_nodes-point probabilists' Gauss-Hermite rule in d dimensions.

    Returns atoms of shape (n_nodes**d, d) and weights of shape (n_nodes**d,) summing to 1
    (``hermegauss`` weights divided by sqrt(2 pi)); the first coordinate varies slowest.
    sum_i w_i g(x_i) = E_{N(0, I_d)}[g] for every polynomial g whose degree in each coordinate is
    <= 2 n_nodes - 1; hence every Hermite feature with all a_j <= 2 n_nodes - 1 (in particular
    every |a| <= 2 n_nodes - 1) has weighted mean exactly [a = 0], up to rounding.
    """
    d = checks.integer(d, "d", minimum=1)
    n_nodes = checks.integer(n_nodes, "n_nodes", minimum=1)
    if n_nodes**d > _MAX_ATOMS:
        raise ValueError(
            f"gauss_hermite_product(d={d}, n_nodes={n_nodes}) would have {n_nodes}**{d} atoms; "
            f"at most {_MAX_ATOMS:,} are allowed"
        )
    nodes, w1 = hermite_e.hermegauss(n_nodes)
    w1 = w1 / w1.sum()  # the raw weights sum to sqrt(2 pi)
    grids = np.meshgrid(*([nodes] * d), indexing="ij")
    atoms = np.stack([g.ravel() for g in grids], axis=1)  # (n_nodes**d, d)
    wgrids = np.meshgrid(*([w1] * d), indexing="ij")
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    return atoms, weights
