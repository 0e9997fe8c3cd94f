"""The supervised baselines of TasteBench's food task, on products we generate.

*TasteBench: a multimodal benchmark for sensory prediction of plant-based foods* trains its
supervised rankers under leave-one-product-out cross-validation (LOOCV): the model that scores a
product never saw a pair that holds it. The product features (nutrition, compounds, text,
images) and the panel data are gated, so the chapter runs the same pipeline on synthetic
products with the benchmark's category sizes and a known latent score, to show what LOOCV and
the three model families recover:

- feature Bradley-Terry: P(i beats j) = sigma(w . (x_i - x_j)), a logistic regression on
  feature differences without intercept;
- ridge regression of the panel mean on the features and a category indicator;
- RankSVM: a hinge loss on the same differences (linear here; the paper's is a kernel one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.svm import LinearSVC
from threadpoolctl import threadpool_limits

from reprobook.core import checks

__all__ = [
    "Products",
    "synthetic_products",
    "within_pairs",
    "training_pairs",
    "fit_bradley_terry",
    "fit_ranksvm",
    "loocv_scores",
    "MODELS",
]


@dataclass(frozen=True)
class Products:
    """Products with features ``x`` (n, d), a category index each, the latent score the
    features determine and the noisy panel mean ``y`` a model is trained and scored on."""

    x: np.ndarray
    category: np.ndarray
    latent: np.ndarray
    y: np.ndarray


def synthetic_products(sizes, dim: int, r2: float, rng: np.random.Generator) -> Products:
    """Categories of the given sizes; x ~ N(0, I_d); latent = w . x with w ~ N(0, I_d / d);
    y = latent + noise with the noise scaled so that the latent explains a share ``r2`` of
    the variance of y."""
    sizes = [checks.integer(s, "size", minimum=2) for s in sizes]
    dim = checks.integer(dim, "dim", minimum=1)
    r2 = checks.real(r2, "r2", above=0, maximum=1)
    rng = checks.generator(rng)
    n = sum(sizes)
    x = rng.standard_normal((n, dim))
    w = rng.standard_normal(dim) / np.sqrt(dim)
    latent = x @ w
    noise_sd = np.sqrt(latent.var() * (1 - r2) / r2)
    y = latent + noise_sd * rng.standard_normal(n)
    category = np.repeat(np.arange(len(sizes)), sizes)
    return Products(x, category, latent, y)


def within_pairs(category) -> np.ndarray:
    """Every pair (i, j), i < j, of items of the same category, as an (m, 2) array."""
    category = checks.array(category, "category", ndim=1, dtype=int)
    i, j = np.triu_indices(category.size, k=1)
    same = category[i] == category[j]
    return np.stack([i[same], j[same]], axis=1)


def training_pairs(category, y, held_out: int, tol: float = 1e-10) -> np.ndarray:
    """The within-category pairs the fold of product ``held_out`` trains on: none that holds
    it, none tied in y.

    Implements eq. `tastebench-loocv` of notebooks/06_tastebench/index.md.
    """
    y = checks.array(y, "y", ndim=1)
    held_out = checks.integer(held_out, "held_out", minimum=0, maximum=y.size - 1)
    pairs = within_pairs(category)
    keep = (pairs != held_out).all(1) & (np.abs(y[pairs[:, 0]] - y[pairs[:, 1]]) >= tol)
    return pairs[keep]  # eq. loocv: the held-out product is in no training pair


def _differences(x: np.ndarray, y: np.ndarray, pairs: np.ndarray):
    d = x[pairs[:, 0]] - x[pairs[:, 1]]
    label = (y[pairs[:, 0]] > y[pairs[:, 1]]).astype(int)
    return np.vstack([d, -d]), np.concatenate([label, 1 - label])  # both orders: no offset


def fit_bradley_terry(x, y, pairs, c: float = 1.0) -> np.ndarray:
    """The weights w of P(i beats j) = sigma(w . (x_i - x_j)), fitted by L2-penalised
    logistic regression (inverse strength ``c``) without intercept on both orders of each pair.

    Implements eq. `tastebench-bt` of notebooks/06_tastebench/index.md.
    """
    x = checks.array(x, "x", ndim=2)
    y = checks.array(y, "y", ndim=1)
    d, label = _differences(x, y, np.asarray(pairs, dtype=int))
    model = LogisticRegression(C=c, fit_intercept=False, max_iter=1000)
    return model.fit(d, label).coef_[0]  # eq. bt: score = w . x


def fit_ranksvm(x, y, pairs, c: float = 1.0) -> np.ndarray:
    """The weights of a linear RankSVM: hinge loss on both orders of each pair's difference.

    Implements eq. `tastebench-bt` of notebooks/06_tastebench/index.md (the hinge variant).
    """
    x = checks.array(x, "x", ndim=2)
    y = checks.array(y, "y", ndim=1)
    d, label = _differences(x, y, np.asarray(pairs, dtype=int))
    model = LinearSVC(C=c, fit_intercept=False, max_iter=5000)
    return model.fit(d, label).coef_[0]


def _one_hot(category: np.ndarray) -> np.ndarray:
    return (category[:, None] == np.unique(category)[None, :]).astype(float)


MODELS = ("Bradley-Terry", "ridge", "RankSVM")


def loocv_scores(products: Products, model: str, c: float = 1.0, alpha: float = 1.0):
    """Out-of-fold scores: the score of product i comes from a model fitted without it (its
    pairs for the pairwise models, its row for ridge, which also sees a category indicator).

    Implements eq. `tastebench-loocv` of notebooks/06_tastebench/index.md.
    """
    checks.choice(model, "model", MODELS)
    x, y, cat = products.x, products.y, products.category
    out = np.empty(y.size)
    design = np.hstack([x, _one_hot(cat)])
    with threadpool_limits(1):  # 215 small fits: one BLAS thread each is fastest
        for i in range(y.size):
            out[i] = _fold_score(x, y, cat, design, i, model, c, alpha)
    return out


def _fold_score(x, y, cat, design, i, model, c, alpha) -> float:
    """The score of product i from the model of its fold."""
    if model == "ridge":
        rows = np.arange(y.size) != i
        fit = Ridge(alpha=alpha).fit(design[rows], y[rows])
        return float(fit.predict(design[i : i + 1])[0])
    pairs = training_pairs(cat, y, i)
    fit = fit_bradley_terry if model == "Bradley-Terry" else fit_ranksvm
    return float(x[i] @ fit(x, y, pairs, c))  # eq. loocv: a model that never saw i
