"""How noisy is the ground truth of TasteBench: agreement statistics and a panel simulator.

*TasteBench: a multimodal benchmark for sensory prediction of plant-based foods* characterises
its consumer panels before it scores any model. Panelists who tasted the same products form a
block; in each block it measures ordinal Krippendorff's alpha and Kendall's W, the agreement of
two random halves of the panel (split-half), each panelist's agreement with the rest of the
panel (leave-one-out), and how fast the mean of k random panelists approaches the full panel
(the group-size curve, and k*, the size at which it matches a model).

The raw ratings are gated, so this module also holds the simulator the chapter runs these
procedures on: panels with the 49 real block shapes, whose noise is calibrated by bisection to
the paper's mean alpha. The simulator's rating model is our assumption, not the paper's.

A block is a (raters, products) array of integer ratings 1..7 (NaN for a missing rating in
:func:`ordinal_alpha`; the other functions take complete blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .metrics import TIE_TOL, pair_scores

__all__ = [
    "ordinal_alpha",
    "kendall_w",
    "split_half",
    "loo_accuracy",
    "group_size_curve",
    "k_star",
    "Latent",
    "draw_latent",
    "ratings",
    "calibrate_noise",
    "simulate_replicate",
]


def _block(x, name: str = "ratings", finite: bool = True) -> np.ndarray:
    x = checks.array(x, name, ndim=2, finite=finite, what="(raters, products)")
    if x.shape[0] < 2 or x.shape[1] < 2:
        raise checks.InputError(f"{name} needs at least 2 raters and 2 products, got {x.shape}")
    return x


def ordinal_alpha(ratings) -> float:
    """Krippendorff's alpha with the ordinal metric, raters as coders and products as units.

    Implements eq. `tastebench-alpha` of notebooks/06_tastebench/index.md: the coincidence
    matrix o_ck of pairable values, the ordinal distance between ranks c and k, and
    alpha = 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck. NaN marks a missing rating.
    """
    x = _block(ratings, finite=False)
    values = np.unique(x[np.isfinite(x)])  # the ordered categories that occur
    if values.size < 2:
        return 1.0 if values.size == 1 else float("nan")  # perfect agreement on one value
    counts = np.stack([(x == v).sum(0) for v in values], axis=1)  # (units, categories)
    m = counts.sum(1)
    counts, m = counts[m >= 2], m[m >= 2]  # units with at least two pairable values
    outer = counts[:, :, None] * counts[:, None, :]  # n_uc n_uk
    diag = np.einsum("uc,ck->uck", counts, np.eye(values.size))
    o = ((outer - diag) / (m - 1)[:, None, None]).sum(0)  # eq. alpha: coincidences o_ck
    n_c = o.sum(1)
    n = n_c.sum()
    cum = np.cumsum(n_c)
    c, k = np.meshgrid(np.arange(values.size), np.arange(values.size), indexing="ij")
    lo, hi = np.minimum(c, k), np.maximum(c, k)
    between = cum[hi] - np.where(lo > 0, cum[lo - 1], 0.0)  # sum of n_g for lo <= g <= hi
    d = (between - (n_c[c] + n_c[k]) / 2) ** 2  # eq. alpha: ordinal distance d_ck
    expected = (np.outer(n_c, n_c) * d).sum()
    if expected == 0:
        return 1.0
    return float(1 - (n - 1) * (o * d).sum() / expected)  # eq. alpha


def kendall_w(ratings) -> float:
    """Kendall's coefficient of concordance W of the raters' rankings of the products, with the
    correction for tied ratings.

    Implements eq. `tastebench-kendall-w` of notebooks/06_tastebench/index.md.
    """
    from scipy import stats

    x = _block(ratings)
    m, n = x.shape
    ranks = stats.rankdata(x, axis=1)  # average ranks within each rater
    r = ranks.sum(0)  # rank sum of each product
    s = float(((r - r.mean()) ** 2).sum())
    ties = 0.0
    for row in x:
        _, t = np.unique(row, return_counts=True)
        ties += float((t**3 - t).sum())
    den = m**2 * (n**3 - n) - m * ties  # eq. kendall-w
    return float(12 * s / den) if den > 0 else float("nan")


def _agreement_counts(a: np.ndarray, b: np.ndarray, tol: float) -> tuple[np.ndarray, int]:
    """Credit summed over the within-block pairs of score sets a and b (..., products)."""
    credit = pair_scores(a, b, tol)  # b plays the truth's role; the credit is symmetric
    return credit.sum(-1), credit.shape[-1]


def split_half(blocks, n_splits: int, rng: np.random.Generator, tol: float = TIE_TOL):
    """Pooled pairwise agreement between the product means of two random halves of each block,
    one value per split (the paper reports the median over splits).

    Implements eq. `tastebench-split-half` of notebooks/06_tastebench/index.md.
    """
    n_splits = checks.integer(n_splits, "n_splits", minimum=1)
    rng = checks.generator(rng)
    credit, total = np.zeros(n_splits), 0
    for x in blocks:
        x = _block(x)
        r = x.shape[0]
        perm = np.argsort(rng.random((n_splits, r)), axis=1)  # a random order of the raters
        half = np.zeros((n_splits, r))
        np.put_along_axis(half, perm[:, : r // 2], 1.0, axis=1)  # first half: floor(r / 2)
        mean_a = half @ x / half.sum(1, keepdims=True)  # (splits, products)
        mean_b = (1 - half) @ x / (1 - half).sum(1, keepdims=True)
        c, npairs = _agreement_counts(mean_a, mean_b, tol)
        credit += c
        total += npairs
    return credit / total  # eq. split-half, one value per split


def loo_accuracy(x, tol: float = TIE_TOL) -> np.ndarray:
    """Each rater's pairwise accuracy against the mean of the other raters of the block (ties in
    either count 1/2), one value per rater.

    Implements eq. `tastebench-loo` of notebooks/06_tastebench/index.md.
    """
    x = _block(x)
    r = x.shape[0]
    others = (x.sum(0, keepdims=True) - x) / (r - 1)  # leave-one-out panel means (raters, p)
    return pair_scores(others, x, tol).mean(-1)  # eq. loo


def group_size_curve(
    blocks, ks, n_draws: int, rng: np.random.Generator, tol: float = TIE_TOL
) -> np.ndarray:
    """The median over draws of the pooled pairwise accuracy of the mean of k panelists drawn
    with replacement in every block, scored against the full panel's means; one value per k.

    Implements eq. `tastebench-group-curve` of notebooks/06_tastebench/index.md.
    """
    ks = [checks.integer(k, "k", minimum=1) for k in ks]
    n_draws = checks.integer(n_draws, "n_draws", minimum=1)
    rng = checks.generator(rng)
    blocks = [_block(x) for x in blocks]
    out = []
    for k in ks:
        credit, total = np.zeros(n_draws), 0
        for x in blocks:
            idx = rng.integers(0, x.shape[0], size=(n_draws, k))
            group = x[idx].mean(1)  # (draws, products): the mean of k panelists
            c, npairs = _agreement_counts(group, x.mean(0), tol)
            credit += c
            total += npairs
        out.append(float(np.median(credit / total)))  # eq. group-curve
    return np.array(out)


def k_star(ks, curve, target: float) -> float:
    """The panel size at which a rising curve first reaches ``target``, by linear interpolation
    between the two sizes around the crossing; ``ks[0]`` when the curve starts above it and
    ``inf`` when it never reaches it.

    Implements eq. `tastebench-kstar` of notebooks/06_tastebench/index.md.
    """
    ks = checks.array(ks, "ks", ndim=1)
    curve = checks.array(curve, "curve", ndim=1)
    checks.same_shape("ks", ks, "curve", curve)
    target = checks.real(target, "target")
    if ks.size < 1 or np.any(np.diff(ks) <= 0):
        raise checks.InputError("ks must be a non-empty, strictly increasing array")
    above = np.nonzero(curve >= target)[0]
    if above.size == 0:
        return float("inf")
    j = int(above[0])
    if j == 0:
        return float(ks[0])
    k0, k1, c0, c1 = ks[j - 1], ks[j], curve[j - 1], curve[j]
    return float(k0 + (k1 - k0) * (target - c0) / (c1 - c0))  # eq. kstar


@dataclass(frozen=True)
class Latent:
    """The standard-normal draws behind simulated panels, one entry per block: product effects
    (products,), rater biases (raters,) and noise (raters, products). Scaling them by the
    spreads gives the ratings, so calibration reuses the same draws (common random numbers)."""

    product: tuple[np.ndarray, ...]
    rater: tuple[np.ndarray, ...]
    noise: tuple[np.ndarray, ...]


def draw_latent(shapes, rng: np.random.Generator) -> Latent:
    """Standard-normal draws for blocks of the given (raters, products) shapes."""
    rng = checks.generator(rng)
    shapes = [
        (checks.integer(r, "raters", minimum=2), checks.integer(p, "products", minimum=2))
        for r, p in shapes
    ]
    return Latent(
        tuple(rng.standard_normal(p) for _, p in shapes),
        tuple(rng.standard_normal(r) for r, _ in shapes),
        tuple(rng.standard_normal((r, p)) for r, p in shapes),
    )


def ratings(latent: Latent, sigma_product: float, sigma_rater: float, sigma_noise: float):
    """Simulated blocks: rating = clip(round(4 + s_p z_p + s_r z_r + s_e z_e), 1, 7).

    Implements eq. `tastebench-panel` of notebooks/06_tastebench/index.md (our assumption).
    """
    sp = checks.real(sigma_product, "sigma_product", minimum=0)
    sr = checks.real(sigma_rater, "sigma_rater", minimum=0)
    se = checks.real(sigma_noise, "sigma_noise", minimum=0)
    return [
        np.clip(np.round(4 + sp * zp[None, :] + sr * zr[:, None] + se * ze), 1, 7)  # eq. panel
        for zp, zr, ze in zip(latent.product, latent.rater, latent.noise)
    ]


def calibrate_noise(
    latent: Latent,
    target_alpha: float,
    sigma_product: float,
    sigma_rater: float,
    low: float = 0.05,
    high: float = 6.0,
    n_steps: int = 12,
) -> tuple[float, float]:
    """The noise spread at which the mean ordinal alpha of the simulated blocks equals
    ``target_alpha``, by bisection on [low, high] (alpha falls as the noise grows); returns
    (sigma_noise, mean alpha reached).

    Implements eq. `tastebench-panel` of notebooks/06_tastebench/index.md (the calibration).
    """
    checks.real(target_alpha, "target_alpha", above=-1, below=1)
    n_steps = checks.integer(n_steps, "n_steps", minimum=1)

    def mean_alpha(se: float) -> float:
        blocks = ratings(latent, sigma_product, sigma_rater, se)
        return float(np.mean([ordinal_alpha(b) for b in blocks]))

    if mean_alpha(low) < target_alpha or mean_alpha(high) > target_alpha:
        raise checks.InputError(
            f"target_alpha {target_alpha} is not between the alphas at sigma_noise {low} and "
            f"{high}; widen [low, high]"
        )
    for _ in range(n_steps):
        mid = (low + high) / 2
        low, high = (mid, high) if mean_alpha(mid) > target_alpha else (low, mid)
    se = (low + high) / 2
    return se, mean_alpha(se)


def simulate_replicate(
    shapes,
    target_alpha: float,
    sigma_product: float,
    sigma_rater: float,
    n_splits: int,
    group_ks,
    n_group_draws: int,
    rng: np.random.Generator,
    noise_low: float = 0.05,
    noise_high: float = 6.0,
    n_bisection: int = 8,
) -> dict:
    """One replicate of the simulated study: panels of the given block shapes, their noise
    bisected to ``target_alpha``, then the paper's procedures on them: the median split-half
    agreement, the median leave-one-out panelist accuracy, Kendall's W and the group-size
    curve. Returns a dict of those, with each block's alpha."""
    rng = checks.generator(rng)
    latent = draw_latent(shapes, rng)
    sigma_noise, alpha = calibrate_noise(
        latent, target_alpha, sigma_product, sigma_rater, noise_low, noise_high, n_bisection
    )
    blocks = ratings(latent, sigma_product, sigma_rater, sigma_noise)
    return {
        "sigma_noise": sigma_noise,
        "mean_alpha": alpha,
        "block_alpha": np.array([ordinal_alpha(b) for b in blocks]),
        "kendall_w": np.array([kendall_w(b) for b in blocks]),
        "split_half": float(np.median(split_half(blocks, n_splits, rng))),
        "loo": np.concatenate([loo_accuracy(b) for b in blocks]),
        "curve": group_size_curve(blocks, group_ks, n_group_draws, rng),
        "blocks": blocks,
    }
