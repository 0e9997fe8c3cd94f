"""Test instances (P0, P1) for the chapter on *Sort, Partition, Randomize* (arXiv 2606.07443).

Paper: "Sort, Partition, Randomize: Optimal Binary Hypothesis Testing under Local Differential
Privacy", arXiv 2606.07443. No data set is involved: every instance is generated here.

* :func:`dirichlet_pair` - two independent Dirichlet draws (generic position: distinct ratios).
* :func:`shifted_gaussians` - two discretised Gaussians with shifted means (monotone L).
* :func:`zipf_vs_uniform` - a uniform P0 against a Zipf P1.
* :func:`sparse_alternative` - P1 moves a share of P0's mass onto a few symbols (many ties).
* :func:`with_ties_and_zeros` - edits a pair to contain P0(x) = 0, P1(x) = 0, a symbol with
  both masses 0 and an exact tie in the likelihood ratio L = p1 / p0.
* :func:`split_symbol` - splits one symbol into two with the same ratio (a tie by construction).

Every random generator takes ``rng``: a ``numpy.random.Generator`` or an integer seed. Each
function returns ``(p0, p1)`` as float arrays that sum to 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from reprobook.core import checks
from reprobook.core.rng import as_generator

__all__ = [
    "as_generator",
    "dirichlet_pair",
    "shifted_gaussians",
    "zipf_vs_uniform",
    "sparse_alternative",
    "with_ties_and_zeros",
    "split_symbol",
    "named_instances",
]

Pair = tuple[np.ndarray, np.ndarray]


def _normalise(p: np.ndarray) -> np.ndarray:
    return p / p.sum()


def dirichlet_pair(
    k: int, concentration: float = 1.0, rng: np.random.Generator | int | None = None
) -> Pair:
    """P0, P1 ~ Dirichlet(concentration * 1_k), independent.

    Small concentrations (0.3) give spiky pairs with some near-zero masses; large ones (3)
    give pairs close to uniform. Ties in L have probability 0.
    """
    k = checks.integer(k, "k", minimum=2)
    concentration = checks.real(concentration, "concentration", above=0)
    gen = as_generator(rng)
    alpha = np.full(k, float(concentration))
    return gen.dirichlet(alpha), gen.dirichlet(alpha)


def shifted_gaussians(k: int = 20, shift: float = 1.0, width: float = 4.0) -> Pair:
    """N(0, 1) against N(shift, 1), discretised into k bins (deterministic).

    The bins split [-width, shift + width] into k equal intervals; the two outermost bins also
    take the tails, so both vectors sum to 1 exactly up to rounding. L(x) increases with the bin
    index, so the sorted order is the reversed bin order.
    """
    k = checks.integer(k, "k", minimum=2)
    edges = np.linspace(-width, shift + width, k + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    p0 = np.diff(ndtr(edges))
    p1 = np.diff(ndtr(edges - shift))
    return _normalise(p0), _normalise(p1)


def zipf_vs_uniform(k: int = 20, exponent: float = 1.0) -> Pair:
    """P0 uniform on [k], P1(x) proportional to 1 / (x + 1)^exponent (deterministic).

    exponent = 0 gives P1 = P0 (utility 0 for every mechanism).
    """
    k = checks.integer(k, "k", minimum=2)
    p0 = np.full(k, 1.0 / k)
    p1 = _normalise(1.0 / np.arange(1, k + 1, dtype=float) ** float(exponent))
    return p0, p1


def sparse_alternative(
    k: int = 20,
    n_moved: int = 2,
    mass: float = 0.3,
    rng: np.random.Generator | int | None = None,
) -> Pair:
    """P0 uniform; P1 = (1 - mass) P0 + mass * uniform on ``n_moved`` random symbols.

    The k - n_moved untouched symbols all have L = 1 - mass: a large block of exact ties.
    """
    k = checks.integer(k, "k", minimum=2)
    n_moved = checks.integer(n_moved, "n_moved", minimum=1, maximum=k - 1)
    mass = checks.real(mass, "mass", above=0, maximum=1)
    gen = as_generator(rng)
    p0 = np.full(k, 1.0 / k)
    p1 = (1.0 - mass) * p0
    chosen = gen.choice(k, size=n_moved, replace=False)
    p1[chosen] += mass / n_moved
    return p0, _normalise(p1)


def with_ties_and_zeros(
    p0: np.ndarray, p1: np.ndarray, rng: np.random.Generator | int | None = None
) -> Pair:
    """Edit a pair (k >= 4) so that it has every awkward case at once; returns k + 1 symbols.

    Four distinct random symbols x1..x4 are changed: p0(x1) = 0 (so L(x1) = inf),
    p1(x2) = 0 (L = 0), p1(x4) = p0(x4) L(x3) (an exact tie with x3), and a new last symbol with
    p0 = p1 = 0 is appended. Both vectors are renormalised, which rescales every L by the same
    factor and so keeps the zeros and the tie.
    """
    p0 = np.asarray(p0, dtype=float).copy()
    p1 = np.asarray(p1, dtype=float).copy()
    k = p0.size
    if k < 4 or p1.size != k:
        raise ValueError(
            "with_ties_and_zeros needs two vectors of one length k >= 4, "
            f"got {p0.size} and {p1.size}"
        )
    gen = as_generator(rng)
    x1, x2, x3, x4 = gen.choice(k, size=4, replace=False)
    p0[x1] = 0.0
    p1[x2] = 0.0
    if p0[x3] > 0:
        p1[x4] = p0[x4] * (p1[x3] / p0[x3])
    if p0.sum() == 0 or p1.sum() == 0:
        raise ValueError("the edited pair has no mass left; use a pair with more spread-out masses")
    p0 = np.append(p0, 0.0)
    p1 = np.append(p1, 0.0)
    return _normalise(p0), _normalise(p1)


def split_symbol(p0: np.ndarray, p1: np.ndarray, x: int, fraction: float = 0.5) -> Pair:
    """Split symbol x into two symbols holding ``fraction`` and 1 - fraction of both masses.

    The two halves have the same likelihood ratio as x; the new symbol is appended at the end.
    Merging tied symbols must not change the optimum, so this is a test of tie handling.
    """
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    fraction = checks.probability(fraction, "fraction", open_low=True, open_high=True)
    q0 = np.append(p0, (1.0 - fraction) * p0[x])
    q1 = np.append(p1, (1.0 - fraction) * p1[x])
    q0[x] = fraction * p0[x]
    q1[x] = fraction * p1[x]
    return q0, q1


def named_instances(k: int = 20, rng: np.random.Generator | int | None = 0) -> dict[str, Pair]:
    """The structured pairs of the chapter at alphabet size k, by name."""
    gen = as_generator(rng)
    return {
        "dirichlet(1)": dirichlet_pair(k, 1.0, gen),
        "gaussians(shift=1)": shifted_gaussians(k, 1.0),
        "zipf(1) vs uniform": zipf_vs_uniform(k, 1.0),
        "sparse alternative": sparse_alternative(k, 2, 0.3, gen),
    }
