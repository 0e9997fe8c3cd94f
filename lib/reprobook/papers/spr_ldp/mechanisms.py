"""Optimal eps-LDP mechanisms for binary hypothesis testing: the SPR dynamic program and its checks.

Paper: "Sort, Partition, Randomize: Optimal Binary Hypothesis Testing under Local Differential
Privacy", arXiv 2606.07443.

Setting. P0, P1 are distributions on [k] = {0, ..., k-1} (vectors ``p0``, ``p1``). A mechanism
is a k x m row-stochastic matrix Q (row x = law of the output given the input x); it is eps-LDP
when Q[x, y] <= e^eps Q[x', y] for all x, x', y (eq. `spr-ldp-constraint`). The output laws
are M0 = Q^T p0, M1 = Q^T p1 and the utility is D_f(M1 || M0) (eq. `spr-fdiv`,
:mod:`.divergences`).

What is here, step by step:

* :func:`optimal_mechanism` - the Sort-Partition-Randomize optimum.
  *Sort* the alphabet by the likelihood ratio L(x) = p1(x) / p0(x), decreasing;
  *partition* the sorted list into l contiguous blocks B_1..B_l;
  *randomize* the block label with l-ary randomized response (eq. `spr-mechanism` of
  notebooks/18_spr_ldp/index.md). With a_j = P0(B_j), b_j = P1(B_j), c = e^eps - 1 and
  Z_l = e^eps + l - 1 the value is (eq. `spr-decomposition`)

      D_f(M1 || M0) = (1 / Z_l) sum_j g(a_j, b_j),   g(a, b) = (1 + c a) f((1 + c b) / (1 + c a)),

  which is additive over blocks for a fixed l. The exact maximum over l <= ell and over
  contiguous partitions is a max-plus dynamic program (eq. `spr-dp`):

      G[j, i] = g(block of sorted positions j+1..i)                 (0 <= j < i <= k)
      F[0] = (0, -inf, ..., -inf),  F[l][i] = max_j F[l-1][j] + G[j, i]
      OPT = max_{1 <= l <= ell} F[l][k] / Z_l,

  O(ell k^2) time, O(k^3) for the unrestricted problem (ell = k). The abstract states the SPR
  theorem and these complexities; the recurrence itself is our reconstruction from the abstract
  and the cited prior work (Kairouz, Oh & Viswanath 2014/2016; Pensia et al. 2023), and it is
  checked numerically against the linear program below and against exhaustive search.

* :func:`staircase_lp` - the exponential-size reference of Kairouz, Oh & Viswanath: the optimum
  over all eps-LDP mechanisms is attained by staircase columns s_S (s_S(x) = e^eps for x in S,
  1 otherwise), so it is the LP (eq. `spr-staircase-lp`)

      max sum_S theta_S mu(s_S)  s.t.  sum_S theta_S s_S(x) = 1 for all x,  theta >= 0,

  with mu(q) = persp_f(P1 . q, P0 . q), over the 2^k subsets S.
* :func:`staircase_lp_budget` - the same LP restricted to at most ell columns (ell outputs).
* :func:`best_over_all_partitions`, :func:`best_over_contiguous_partitions` - brute force over
  randomized response on blocks, to check that contiguity after sorting loses nothing and that
  the DP finds the best contiguous partition.
* :func:`binary_mechanism`, :func:`randomized_response` - the two classical baselines, both
  special cases of SPR.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.optimize import linprog

from reprobook.core import checks, linprog_chain

from .divergences import Divergence, f_divergence, get_divergence

__all__ = [
    "SPRResult",
    "LPResult",
    "optimal_mechanism",
    "spr_mechanism_matrix",
    "spr_value",
    "mechanism_value",
    "is_ldp",
    "likelihood_order",
    "block_gain_matrix",
    "staircase_lp",
    "staircase_lp_budget",
    "best_over_all_partitions",
    "best_over_contiguous_partitions",
    "set_partitions",
    "binary_mechanism",
    "randomized_response",
    "EPS_MAX",
    "LP_MAX_K",
    "BUDGET_LP_MAX_K",
    "ALL_PARTITIONS_MAX_K",
    "CONTIGUOUS_MAX_K",
    "LP_FALLBACKS",
    "TIE_RTOL",
]

#: Largest eps accepted: e^eps must stay a finite float64 with room for sums.
EPS_MAX = 700.0
#: Largest alphabet for the 2^k-column LP.
LP_MAX_K = 20
#: Largest alphabet for the output-budget LP, and the most column choices it may examine.
BUDGET_LP_MAX_K = 6
BUDGET_LP_MAX_CHOICES = 200_000
#: Largest alphabet for the search over all set partitions (Bell(8) = 4140).
ALL_PARTITIONS_MAX_K = 8
#: Largest alphabet for the brute force over 2^(k-1) contiguous partitions.
CONTIGUOUS_MAX_K = 20

_SUM_TOL = 1e-9
#: Values of the DP closer than this, relative to the best, are tied (the smallest l wins).
TIE_RTOL = 1e-12
#: The HiGHS methods an LP of this module is given to, in order, until one reports an optimum
#: (or, for the restricted LPs, infeasibility): each solves the same LP.
LP_FALLBACKS = ("highs", "highs-ipm", "highs-ds")


# --- results ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SPRResult:
    """A randomized-response-over-blocks mechanism and its utility.

    Attributes:
        value: D_f(M1 || M0) of the mechanism (for :func:`optimal_mechanism`, the optimum).
        blocks: one list of original labels (0..k-1) per output, in decreasing likelihood-ratio
            order of the blocks; labels inside a block are in sorted order.
        mechanism: k x n_blocks matrix Q, Q[x, j] = e^eps / Z_l if x in blocks[j] else 1 / Z_l.
        n_blocks: l, the number of outputs.
        eps: privacy level.
        divergence: the divergence's name.
        value_by_blocks: for :func:`optimal_mechanism`, entry l-1 is the best value with exactly
            l blocks (l = 1..ell; -inf if impossible); None for the baselines.
        order: the sorted order of the labels (decreasing L, stable); None where not used.
    """

    value: float
    blocks: list[list[int]]
    mechanism: np.ndarray
    n_blocks: int
    eps: float
    divergence: str
    value_by_blocks: np.ndarray | None = None
    order: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class LPResult:
    """Solution of the staircase LP (Kairouz, Oh & Viswanath).

    Attributes:
        value: the LP optimum, max sum_S theta_S mu(s_S).
        mechanism: k x m matrix whose columns are theta_S s_S for the columns with theta_S > 0
            (rows sum to 1 up to the solver's tolerance).
        subsets: the sets S of those columns, as tuples of labels.
        weights: theta_S of those columns.
        status: 0 when the solver reports an optimum (scipy's ``linprog`` status code).
        message: the solver's message.
        n_columns: number of LP variables (staircase columns considered).
        n_lps: number of LPs (or candidate vertices) examined.
        n_failed: of those, the LPs for which no method of ``LP_FALLBACKS`` reported an
            optimum or infeasibility (left out of the best value; 0 when none).
    """

    value: float
    mechanism: np.ndarray
    subsets: list[tuple[int, ...]]
    weights: np.ndarray
    status: int
    message: str
    n_columns: int
    n_lps: int = 1
    n_failed: int = 0


# --- input checks -----------------------------------------------------------------------------


def _check_pair(p0: ArrayLike, p1: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate two probability vectors on the same alphabet; return them as float arrays."""
    out = []
    for name, p in (("p0", p0), ("p1", p1)):
        arr = np.asarray(p, dtype=float)
        if arr.ndim != 1:
            raise ValueError(
                f"{name} must be a 1-D probability vector, got an array of shape {arr.shape}"
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError(
                f"{name} has non-finite entries (nan or inf); probabilities must be finite"
            )
        if np.any(arr < 0):
            raise ValueError(
                f"{name} has negative entries (min {arr.min():.3g}); probabilities must be >= 0"
            )
        total = float(arr.sum())
        if abs(total - 1.0) > _SUM_TOL:
            raise ValueError(f"{name} sums to {total!r}, not 1 (tolerance {_SUM_TOL:g})")
        out.append(arr)
    p0a, p1a = out
    if p0a.shape != p1a.shape:
        raise ValueError(
            f"p0 and p1 have different lengths ({p0a.size} and {p1a.size}); "
            "they must share one alphabet"
        )
    if p0a.size < 2:
        raise ValueError(f"the alphabet needs at least k = 2 symbols, got k = {p0a.size}")
    return p0a, p1a


def _check_eps(eps: float) -> float:
    """The privacy level: 0 < eps <= EPS_MAX, so that e^eps stays a finite float64."""
    return checks.real(eps, "eps", above=0, maximum=EPS_MAX)


def _check_budget(max_outputs: int | None, k: int) -> int:
    """ell = min(max_outputs, k); None means k (more outputs than symbols never help)."""
    if max_outputs is None:
        return k
    return min(checks.integer(max_outputs, "max_outputs", minimum=1), k)


def _check_blocks(blocks: Sequence[Sequence[int]], k: int) -> list[list[int]]:
    k = checks.integer(k, "k", minimum=1)
    out = [[int(x) for x in b] for b in blocks]
    if not out:
        raise ValueError("blocks must contain at least one block")
    if any(len(b) == 0 for b in out):
        raise ValueError("every block must be non-empty")
    labels = sorted(x for b in out for x in b)
    if labels != list(range(k)):
        raise ValueError(f"blocks must partition the labels 0..{k - 1}, each used exactly once")
    return out


# --- SPR: sort, block values, mechanism --------------------------------------------------------


def likelihood_order(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Labels sorted by L(x) = p1(x) / p0(x), decreasing, stable.

    Implements the *sort* step of eq. `spr-mechanism` of notebooks/18_spr_ldp/index.md.
    p0(x) = 0 < p1(x) gives L = +inf (first); symbols with p0(x) = p1(x) = 0 go last (they carry
    no mass, so their position changes no value).
    """
    pos = p0 > 0  # (k,) symbols with a finite likelihood ratio
    # L(x) = p1/p0; +inf where only P1 has mass, -1 (after every real ratio) where neither has
    ratio = np.where(pos, p1 / np.where(pos, p0, 1.0), np.where(p1 > 0, np.inf, -1.0))
    return np.argsort(-ratio, kind="stable")  # eq. spr-mechanism: decreasing L, ties by label


def _block_gain(a: np.ndarray, b: np.ndarray, c: float, div: Divergence) -> np.ndarray:
    """g(a, b) = (1 + c a) f((1 + c b) / (1 + c a)) = persp_f(1 + c b, 1 + c a); both args >= 1.

    Implements the block gain g of eq. `spr-decomposition` of notebooks/18_spr_ldp/index.md.
    """
    return div.persp(1.0 + c * b, 1.0 + c * a)


def block_gain_matrix(p0s: np.ndarray, p1s: np.ndarray, c: float, div: Divergence) -> np.ndarray:
    """G[j, i] = g(a, b) for the block of sorted positions j+1..i, shape (k+1, k+1).

    Every possible block's term of eq. `spr-decomposition` of notebooks/18_spr_ldp/index.md
    (0-based: the block is ``p0s[j:i]``, ``p1s[j:i]``). Entries with j >= i are -inf.

    Block masses are summed row by row from the block's start (``cumsum`` of an upper-triangular
    array) instead of as differences of prefix sums: a block of zero mass then has a = 0 exactly,
    which matters once c = e^eps - 1 is large. Only 0 <= j < i <= k is filled. The block holding
    the whole alphabet has a = b = 1 by definition, so G[0, k] = (1 + c) f(1) = 0 exactly.
    """
    k = p0s.size  # the alphabet, already in likelihood-ratio order
    G = np.full((k + 1, k + 1), -np.inf)  # G[j, i] = -inf: no block ends before it starts
    chunk = max(1, min(k, 4_000_000 // max(k, 1)))  # rows per slab, bounds the memory
    for start in range(0, k, chunk):  # one slab of block starts j at a time
        rows = np.arange(start, min(k, start + chunk))  # (r,) the block starts j of this slab
        upper = np.arange(k)[None, :] >= rows[:, None]  # (r, k): position i is in a block from j
        a = np.cumsum(np.where(upper, p0s[None, :], 0.0), axis=1)  # (r, k): a[j, i] = P0(j..i)
        b = np.cumsum(np.where(upper, p1s[None, :], 0.0), axis=1)  # (r, k): b[j, i] = P1(j..i)
        g = _block_gain(a, b, c, div)  # eq. spr-decomposition: g(a, b) of every such block
        G[rows, 1:] = np.where(upper, g, -np.inf)  # the block j..i ends at i + 1 in G's indexing
    G[0, k] = 0.0  # the whole alphabet as one block: a = b = 1, g = (1 + c) f(1) = 0
    return G


def spr_mechanism_matrix(blocks: Sequence[Sequence[int]], eps: float, k: int) -> np.ndarray:
    """l-ary randomized response over blocks, shape (k, l).

    Implements the *randomize* step of eq. `spr-mechanism` of notebooks/18_spr_ldp/index.md,
    an eps-LDP mechanism in the sense of eq. `spr-ldp-constraint`:

    Q[x, j] = e^eps / (e^eps + l - 1) if x in B_j, else 1 / (e^eps + l - 1).
    """
    blocks = _check_blocks(blocks, k)
    eps = _check_eps(eps)
    l = len(blocks)  # one output per block
    z = math.exp(eps) + l - 1  # Z_l, the normaliser of l-ary randomized response
    Q = np.full((k, l), 1.0 / z)  # (k, l): every other block's label with probability 1/Z_l
    for j, block in enumerate(blocks):
        Q[block, j] = math.exp(eps) / z  # eq. spr-mechanism: its own block's label, e^eps/Z_l
    return Q


def spr_value(
    p0: ArrayLike,
    p1: ArrayLike,
    blocks: Sequence[Sequence[int]],
    eps: float,
    divergence: str | Divergence = "kl",
) -> float:
    """Value of RR over the given blocks through the block decomposition: sum_j g(a_j, b_j) / Z_l.

    Implements eq. `spr-decomposition` of notebooks/18_spr_ldp/index.md for one partition.
    """
    p0, p1 = _check_pair(p0, p1)
    blocks = _check_blocks(blocks, p0.size)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    a = np.array([p0[b].sum() for b in blocks])
    b_ = np.array([p1[b].sum() for b in blocks])
    if len(blocks) == 1:
        return 0.0
    c = math.expm1(eps)
    return float(_block_gain(a, b_, c, div).sum() / (math.exp(eps) + len(blocks) - 1))


def _result(
    value: float,
    blocks: list[list[int]],
    eps: float,
    div: Divergence,
    k: int,
    value_by_blocks: np.ndarray | None = None,
    order: np.ndarray | None = None,
) -> SPRResult:
    return SPRResult(
        value=float(value),
        blocks=blocks,
        mechanism=spr_mechanism_matrix(blocks, eps, k),
        n_blocks=len(blocks),
        eps=eps,
        divergence=div.name,
        value_by_blocks=value_by_blocks,
        order=order,
    )


@dataclass(frozen=True, eq=False)
class DPTables:
    """The tables of the SPR dynamic program (for inspection and for drawing them).

    Attributes:
        order: the labels sorted by decreasing likelihood ratio, shape (k,).
        G: block gains, G[j, i] = g(a, b) for the block of sorted positions j..i-1, (k+1, k+1),
            -inf where j >= i.
        F: F[l, i] = best total gain of the first i sorted symbols cut into exactly l blocks,
            (ell+1, k+1), -inf where impossible.
        parent: parent[l, i] = the j attaining F[l, i] (the start of the last block), (ell+1, k+1).
        value_by_blocks: F[l, k] / (e^eps + l - 1) for l = 1..ell, (ell,).
        eps: privacy level.
    """

    order: np.ndarray
    G: np.ndarray
    F: np.ndarray
    parent: np.ndarray
    value_by_blocks: np.ndarray
    eps: float


def dp_tables(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    max_outputs: int | None = None,
) -> DPTables:
    """Fill the tables of the Sort-Partition-Randomize dynamic program (steps 1-3 below).

    Implements the recurrence eq. `spr-dp` of notebooks/18_spr_ldp/index.md:

    1. sort the labels by L = p1 / p0, decreasing (:func:`likelihood_order`);
    2. G[j, i] = g(a, b) for the block of sorted positions j+1..i (:func:`block_gain_matrix`);
    3. F[0] = (0, -inf, ...), F[l] = max_j (F[l-1][j] + G[j, :]) for l = 1..ell: one max-plus
       vector-matrix product per layer, restricted to the entries that layer can reach, with
       the argmax kept for backtracking.

    Cost O(ell k^2) time and O(k^2 + ell k) memory. The recurrence is our reconstruction from
    the abstract and the cited prior work.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    ell = _check_budget(max_outputs, k)
    c = math.expm1(eps)  # c = e^eps - 1

    order = likelihood_order(p0, p1)  # (k,) step 1, sort: decreasing likelihood ratio
    G = block_gain_matrix(p0[order], p1[order], c, div)  # (k+1, k+1) step 2: every block's g

    F = np.full((ell + 1, k + 1), -np.inf)  # F[l, i]: -inf where i symbols cannot make l blocks
    F[0, 0] = 0.0  # F_0(0) = 0: no symbols, no blocks
    parent = np.zeros((ell + 1, k + 1), dtype=np.int32)  # parent[l, i] = best j, to backtrack
    for l in range(1, ell + 1):  # step 3, one layer per number of blocks
        # eq. spr-dp: F_{l-1}(j) + G[j, i] for l-1 <= j < i and i >= l (the reachable square)
        cand = F[l - 1, l - 1 : k, None] + G[l - 1 : k, l:]  # (k-l+1, k-l+1)
        arg = np.argmax(cand, axis=0)  # (k-l+1,) the best last cut j for each end i
        F[l, l:] = cand[arg, np.arange(cand.shape[1])]  # eq. spr-dp: F_l(i) = max_j (...)
        parent[l, l:] = arg + (l - 1)  # that cut, as a sorted position
    value_by_blocks = F[1:, k] / (math.exp(eps) + np.arange(ell))  # F_l(k) / Z_l, l = 1..ell
    return DPTables(order=order, G=G, F=F, parent=parent, value_by_blocks=value_by_blocks, eps=eps)


def optimal_mechanism(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    max_outputs: int | None = None,
) -> SPRResult:
    """The optimal eps-LDP mechanism for D_f(M1 || M0) with at most ``max_outputs`` outputs.

    Implements eq. `spr-dp` of notebooks/18_spr_ldp/index.md, the best l included, and returns
    the mechanism of eq. `spr-mechanism`.

    Sort-Partition-Randomize dynamic program, O(ell k^2) time and O(k^2 + ell k) memory:
    sort, fill the block gains G and the layers F (:func:`dp_tables`, steps 1-3), then

    4. l* = argmax_l F[l][k] / Z_l with Z_l = e^eps + l - 1 (the smallest l on ties: values
       within ``TIE_RTOL`` of the best, relative, are ties, so rounding never picks l*), and
       backtrack the cuts of the best partition into l* blocks.

    ``max_outputs=None`` means ell = k (the unrestricted optimum); larger values are clipped to
    k. ``max_outputs=1`` gives the constant mechanism, value 0. The recurrence is our
    reconstruction from the abstract and the cited prior work; the tests check it against the
    staircase LP and against exhaustive search.

    Raises ValueError for inputs that are not two probability vectors of one length k >= 2,
    eps outside (0, 700], or a budget that is not a positive integer.
    """
    t = dp_tables(p0, p1, eps, divergence, max_outputs)  # eq. spr-dp: sort, gains, layers
    k = t.order.size
    best = float(np.max(t.value_by_blocks))  # eq. spr-dp: the optimum over l
    tied = t.value_by_blocks >= best - TIE_RTOL * abs(best)  # values equal up to rounding
    l_star = int(np.flatnonzero(tied)[0]) + 1  # the smallest l among them
    cuts = [k]  # backtrack from the end of the sorted alphabet
    for l in range(l_star, 0, -1):
        cuts.append(int(t.parent[l, cuts[-1]]))  # where the l-th block starts
    cuts = cuts[::-1]  # 0 = cuts[0] < ... < cuts[l*] = k
    # eq. spr-mechanism, partition: the contiguous blocks, back in the original labels
    blocks = [[int(x) for x in t.order[cuts[j] : cuts[j + 1]]] for j in range(l_star)]
    div = get_divergence(divergence)
    # eq. spr-mechanism, randomize: randomized response over those blocks (in _result)
    return _result(t.value_by_blocks[l_star - 1], blocks, t.eps, div, k, t.value_by_blocks, t.order)


# --- plain evaluation of a mechanism -------------------------------------------------------------


def mechanism_value(
    Q: ArrayLike, p0: ArrayLike, p1: ArrayLike, divergence: str | Divergence = "kl"
) -> float:
    """D_f(Q^T p1 || Q^T p0) computed directly from a k x m mechanism matrix Q.

    Implements eq. `spr-fdiv` of notebooks/18_spr_ldp/index.md for any mechanism.
    """
    p0, p1 = _check_pair(p0, p1)
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2 or Q.shape[0] != p0.size:
        raise ValueError(f"Q must be a k x m matrix with k = {p0.size} rows, got shape {Q.shape}")
    M0 = Q.T @ p0  # (m,)
    M1 = Q.T @ p1  # (m,)
    return f_divergence(M1, M0, divergence)


def is_ldp(Q: ArrayLike, eps: float, rtol: float = 1e-12, row_atol: float = 1e-9) -> bool:
    """Whether Q is an eps-LDP mechanism: Q >= 0, rows sum to 1 (within ``row_atol``) and
    max_x Q[x, y] <= e^eps (1 + rtol) min_x Q[x, y] for every output y.

    Implements the constraint eq. `spr-ldp-constraint` of notebooks/18_spr_ldp/index.md.
    """
    Q = np.asarray(Q, dtype=float)
    eps = _check_eps(eps)
    if Q.ndim != 2 or Q.size == 0 or not np.all(np.isfinite(Q)) or np.any(Q < 0):
        return False
    if np.any(np.abs(Q.sum(axis=1) - 1.0) > row_atol):
        return False
    return bool(np.all(Q.max(axis=0) <= math.exp(eps) * (1.0 + rtol) * Q.min(axis=0)))


# --- the staircase LP (Kairouz, Oh & Viswanath) -------------------------------------------------


def _staircase_columns(k: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Membership bits of every S except the full set, and the columns s_S.

    Returns ``bits`` (n, k) bool with n = 2^k - 1 (S = empty first; the full set is dropped since
    s_full = e^eps s_empty points the same way) and ``cols`` (k, n) = 1 + c * bits^T.
    """
    n = (1 << k) - 1
    ids = np.arange(n, dtype=np.int64)
    bits = ((ids[:, None] >> np.arange(k)) & 1).astype(bool)  # (n, k)
    cols = 1.0 + math.expm1(eps) * bits.T  # (k, n)
    return bits, cols


def _column_utilities(
    bits: np.ndarray, p0: np.ndarray, p1: np.ndarray, eps: float, div: Divergence
) -> np.ndarray:
    """mu(s_S) = persp_f(1 + c P1(S), 1 + c P0(S)) for every column, shape (n,)."""
    a = bits @ p0  # (n,) P0(S)
    b = bits @ p1  # (n,) P1(S)
    return _block_gain(a, b, math.expm1(eps), div)


def _check_lp_size(k: int, limit: int, what: str) -> None:
    if k > limit:
        raise ValueError(f"{what} is exponential in k and allows k <= {limit}; got k = {k}")


def staircase_lp(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    tol: float = 1e-10,
) -> LPResult:
    """The optimum over all eps-LDP mechanisms as the Kairouz-Oh-Viswanath staircase LP.

    Implements eq. `spr-staircase-lp` of notebooks/18_spr_ldp/index.md:

        max_theta  sum_S theta_S mu(s_S)
        s.t.       sum_S theta_S s_S(x) = 1  for every x in [k],   theta >= 0,

    with s_S(x) = e^eps if x in S else 1 and mu(q) = persp_f(P1 . q, P0 . q). Writing
    s_S = 1 + c 1_S and t = sum_S theta_S turns the dense equality rows into the sparse system

        t + c sum_{S containing x} theta_S = 1   (x in [k]),     t - sum_S theta_S = 0,

    which is what is passed to HiGHS (``scipy.optimize.linprog(method="highs")``), with
    feasibility and optimality tolerances ``tol``. The objective is scaled to max |mu| = 1 for
    the solve and scaled back. 2^k - 1 columns (the full set is dropped); k <= 20. When HiGHS
    reports no optimum, the LP goes to the next method of ``LP_FALLBACKS``; when none reports
    one, the result has a non-zero ``status``, value NaN and every attempt in ``message``.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    _check_lp_size(k, LP_MAX_K, "the staircase LP")
    c = math.expm1(eps)
    bits, _ = _staircase_columns(k, eps)
    n = bits.shape[0]
    mu = _column_utilities(bits, p0, p1, eps, div)  # (n,)
    scale = float(np.max(np.abs(mu)))
    if scale == 0.0:  # every column is useless: the constant mechanism is optimal
        return LPResult(0.0, np.ones((k, 1)), [()], np.ones(1), 0, "all column utilities are 0", n)

    # variables: theta_0..theta_{n-1}, then t
    rows, cols_idx = np.nonzero(bits.T)  # x in S  <->  entry (x, S)
    data = np.full(rows.size, c)
    A_top = sp.csr_matrix((data, (rows, cols_idx)), shape=(k, n))
    A_top = sp.hstack([A_top, sp.csr_matrix(np.ones((k, 1)))])
    A_last = sp.csr_matrix(np.concatenate([-np.ones(n), [1.0]])[None, :])
    A_eq = sp.vstack([A_top, A_last]).tocsc()
    b_eq = np.concatenate([np.ones(k), [0.0]])
    cost = np.concatenate([-mu / scale, [0.0]])
    options = {"primal_feasibility_tolerance": tol, "dual_feasibility_tolerance": tol}
    # the same LP, by the next method of LP_FALLBACKS when one reports no optimum
    res, tried = linprog_chain(
        cost, LP_FALLBACKS, options=options, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), solve=linprog
    )
    if res.status != 0:
        return LPResult(
            math.nan,
            np.zeros((k, 0)),
            [],
            np.zeros(0),
            int(res.status),
            "; ".join(f"{label}: status {r.status} ({r.message})" for label, r in tried),
            n,
        )
    theta = res.x[:n]
    used = np.flatnonzero(theta > 1e-12)
    value = float(mu[used] @ theta[used])
    Q = (1.0 + c * bits[used].T) * theta[used][None, :]  # (k, m)
    subsets = [tuple(int(x) for x in np.flatnonzero(bits[s])) for s in used]
    return LPResult(value, Q, subsets, theta[used], 0, str(res.message), n)


@functools.lru_cache(maxsize=64)
def _restricted_vertices(
    k: int, eps: float, ell: int
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Basic feasible solutions with at most ``ell`` staircase columns.

    For every set T of at most ell columns that are linearly independent, solve
    sum_{S in T} theta_S s_S = 1; keep T when the system is consistent and theta > 0. These are
    exactly the vertices of the restricted polytopes {theta >= 0 : A_T theta = 1} over all
    |T| <= ell, and a linear objective over a polytope is maximised at a vertex. They do not
    depend on P0, P1 or f, so one enumeration (cached) serves every instance and divergence.
    """
    _, cols = _staircase_columns(k, eps)  # (k, n)
    n = cols.shape[1]
    ones = np.ones(k)
    supports, weights = [], []
    for size in range(1, ell + 1):
        for T in itertools.combinations(range(n), size):
            A = cols[:, T]  # (k, size)
            if np.linalg.matrix_rank(A) < size:
                continue
            theta, *_ = np.linalg.lstsq(A, ones, rcond=None)
            if np.max(np.abs(A @ theta - ones)) > 1e-9 or np.min(theta) <= 1e-12:
                continue
            supports.append(np.array(T))
            weights.append(theta)
    return tuple(supports), tuple(weights)


def staircase_lp_budget(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    max_outputs: int = 2,
    method: str = "vertices",
) -> LPResult:
    """Best eps-LDP mechanism with at most ``max_outputs`` (= ell) staircase columns.

    The staircase LP (eq. `spr-staircase-lp` of notebooks/18_spr_ldp/index.md) restricted to
    every choice of ell columns out of the 2^k - 1 (the full set dropped), best of all. Two
    equivalent ways to compute it:

    * ``method="linprog"`` - literally: C(2^k - 1, ell) small LPs with k equations and ell
      unknowns, each solved by ``linprog(method="highs")`` (infeasible ones skipped; one for
      which no method of ``LP_FALLBACKS`` reports an optimum or infeasibility is counted in
      ``n_failed`` and left out). Every choice of fewer columns is contained in a choice of
      ell, so this is "at most ell".
    * ``method="vertices"`` (default, much faster) - the optimum of each small LP is at a vertex
      of its polytope, i.e. at a basic feasible solution whose support T has |T| <= ell linearly
      independent columns; enumerate those once (:func:`_restricted_vertices`) and take the
      best value sum_{S in T} theta_S mu(s_S).

    Exponential: k <= 6 and at most 200,000 column choices (k = 4, ell = 3 costs
    15 + C(15, 2) + C(15, 3) = 575 small systems); a larger request raises ValueError.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    _check_lp_size(k, BUDGET_LP_MAX_K, "the budget LP")
    if max_outputs is None:
        raise ValueError(
            "the budget LP needs max_outputs, a positive integer; "
            "staircase_lp solves the unrestricted case"
        )
    ell = _check_budget(max_outputs, k)
    n_choices = sum(math.comb((1 << k) - 1, s) for s in range(1, ell + 1))
    if n_choices > BUDGET_LP_MAX_CHOICES:
        raise ValueError(
            f"the budget LP would examine {n_choices} column choices "
            f"(k = {k}, max_outputs = {ell}); "
            f"at most {BUDGET_LP_MAX_CHOICES} are allowed: lower k or max_outputs"
        )
    checks.choice(method, "method", ("vertices", "linprog"))
    bits, cols = _staircase_columns(k, eps)
    n = bits.shape[0]
    mu = _column_utilities(bits, p0, p1, eps, div)  # (n,)

    best_val, best_T, best_theta, n_lps, n_failed = -math.inf, None, None, 0, 0
    if method == "vertices":
        supports, weights = _restricted_vertices(k, eps, ell)
        n_lps = len(supports)
        for T, theta in zip(supports, weights):
            val = float(mu[T] @ theta)
            if val > best_val:
                best_val, best_T, best_theta = val, T, theta
    else:
        ones = np.ones(k)
        for T in itertools.combinations(range(n), ell):
            T = np.array(T)
            n_lps += 1
            res, _ = linprog_chain(  # an optimum, or no mechanism with these columns (2)
                -mu[T],
                LP_FALLBACKS,
                accept=(0, 2),
                A_eq=cols[:, T],
                b_eq=ones,
                bounds=(0, None),
                solve=linprog,
            )
            if res.status == 2:
                continue
            if res.status != 0:  # no method reported either: counted, left out of the best
                n_failed += 1
                continue
            val = float(mu[T] @ res.x)
            if val > best_val:
                best_val, best_T, best_theta = val, T, res.x
    keep = best_theta > 1e-12
    best_T, best_theta = best_T[keep], best_theta[keep]
    Q = cols[:, best_T] * best_theta[None, :]  # (k, m)
    subsets = [tuple(int(x) for x in np.flatnonzero(bits[s])) for s in best_T]
    message = f"best of {n_lps} restricted problems" + (
        f" ({n_failed} failed with every method and left out)" if n_failed else ""
    )
    return LPResult(best_val, Q, subsets, best_theta, 0, message, n, n_lps, n_failed)


# --- brute force over partitions ---------------------------------------------------------------


def set_partitions(k: int) -> Iterator[list[int]]:
    """All set partitions of {0..k-1} as restricted growth strings r (r[0] = 0,
    r[i] <= 1 + max r[:i]).

    Label x goes to block r[x]; there are Bell(k) of them.
    """
    if k <= 0:
        return
    r = [0] * k
    top = [0] * k  # top[i] = max(r[:i+1])

    def rec(i: int) -> Iterator[list[int]]:
        if i == k:
            yield list(r)
            return
        for v in range(top[i - 1] + 2):
            r[i] = v
            top[i] = max(top[i - 1], v)
            yield from rec(i + 1)

    yield from rec(1)


def _best_labelled(
    labels: np.ndarray, p0: np.ndarray, p1: np.ndarray, eps: float, div: Divergence, ell: int
) -> tuple[float, np.ndarray]:
    """Best RR-over-blocks value among the rows of ``labels`` (N, k) (block ids per symbol).

    A row with l blocks is worth sum_j g(a_j, b_j) / Z_l (eq. `spr-decomposition`); empty block
    slots give g(0, 0) = 0.
    Rows with more than ell blocks are skipped. Returns the value and the best row.
    """
    N, k = labels.shape
    n_blocks = labels.max(axis=1) + 1  # (N,)
    keep = n_blocks <= ell
    labels, n_blocks = labels[keep], n_blocks[keep]
    N = labels.shape[0]
    flat = (np.arange(N)[:, None] * k + labels).ravel()  # (N*k,) slot of each symbol
    a = np.bincount(flat, weights=np.tile(p0, N), minlength=N * k).reshape(N, k)  # block masses
    b = np.bincount(flat, weights=np.tile(p1, N), minlength=N * k).reshape(N, k)
    total = _block_gain(a, b, math.expm1(eps), div).sum(axis=1)
    total[n_blocks == 1] = 0.0
    values = total / (math.exp(eps) + n_blocks - 1)  # (N,)
    i = int(np.argmax(values))
    return float(values[i]), labels[i]


def _blocks_from_labels(row: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> list[list[int]]:
    """Blocks of a label row, ordered by decreasing block likelihood ratio."""
    groups = [list(np.flatnonzero(row == j)) for j in range(int(row.max()) + 1)]
    groups = [[int(x) for x in g] for g in groups if g]
    a = np.array([p0[g].sum() for g in groups])
    b = np.array([p1[g].sum() for g in groups])
    order = likelihood_order(a, b)
    return [groups[i] for i in order]


def best_over_all_partitions(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    max_outputs: int | None = None,
) -> SPRResult:
    """Best randomized response over blocks among ALL set partitions of [k] (at most ell blocks).

    Exhaustive over Bell(k) partitions, no sorting involved; k <= 8 (Bell(8) = 4140).
    Checks that restricting to contiguous blocks of the sorted alphabet loses nothing.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    _check_lp_size(k, ALL_PARTITIONS_MAX_K, "the search over all set partitions")
    ell = _check_budget(max_outputs, k)
    labels = np.array(list(set_partitions(k)), dtype=np.int64)  # (Bell(k), k)
    value, row = _best_labelled(labels, p0, p1, eps, div, ell)
    return _result(value, _blocks_from_labels(row, p0, p1), eps, div, k)


def best_over_contiguous_partitions(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergence: str | Divergence = "kl",
    max_outputs: int | None = None,
) -> SPRResult:
    """Best randomized response over contiguous blocks of the sorted alphabet, by brute force.

    Enumerates the 2^(k-1) sets of cut points in the order of :func:`likelihood_order`; k <= 20.
    Same optimisation problem as the dynamic program, solved without it.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    _check_lp_size(k, CONTIGUOUS_MAX_K, "the search over contiguous partitions")
    ell = _check_budget(max_outputs, k)
    order = likelihood_order(p0, p1)
    masks = np.arange(1 << (k - 1), dtype=np.int64)
    cuts = (masks[:, None] >> np.arange(k - 1)) & 1  # (2^(k-1), k-1): cut after sorted position i
    labels = np.concatenate(
        [np.zeros((masks.size, 1), dtype=np.int64), np.cumsum(cuts, axis=1)], axis=1
    )
    value, row = _best_labelled(labels, p0[order], p1[order], eps, div, ell)
    blocks = [[int(order[i]) for i in np.flatnonzero(row == j)] for j in range(int(row.max()) + 1)]
    return _result(value, blocks, eps, div, k, order=order)


# --- baselines -------------------------------------------------------------------------------


def binary_mechanism(
    p0: ArrayLike, p1: ArrayLike, eps: float, divergence: str | Divergence = "kl"
) -> SPRResult:
    """Kairouz et al.'s binary mechanism: blocks {x : L(x) >= 1} and {x : L(x) < 1}, 2-ary RR
    (eq. `spr-mechanism` with one cut at L = 1).

    Symbols with p0 = p1 = 0 join the first block. If one side is empty the mechanism is the
    constant one (one block, value 0).
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    high = p1 >= p0  # L(x) >= 1, including p0 = 0 (L = inf) and p0 = p1 = 0
    blocks = [[int(x) for x in np.flatnonzero(m)] for m in (high, ~high)]
    blocks = [b for b in blocks if b]
    return _result(spr_value(p0, p1, blocks, eps, div), blocks, eps, div, k)


def randomized_response(
    p0: ArrayLike, p1: ArrayLike, eps: float, divergence: str | Divergence = "kl"
) -> SPRResult:
    """k-ary randomized response on the raw alphabet (singleton blocks, in label order).

    Implements eq. `spr-mechanism` of notebooks/18_spr_ldp/index.md with k one-symbol blocks.
    """
    p0, p1 = _check_pair(p0, p1)
    eps = _check_eps(eps)
    div = get_divergence(divergence)
    k = p0.size
    blocks = [[x] for x in range(k)]
    return _result(spr_value(p0, p1, blocks, eps, div), blocks, eps, div, k)
