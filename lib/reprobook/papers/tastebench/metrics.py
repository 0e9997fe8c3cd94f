"""Ranking metrics of TasteBench's food task and their bootstrap intervals.

*TasteBench: a multimodal benchmark for sensory prediction of plant-based foods* (no arXiv id)
scores a model by the one number it gives each product, against the panel's mean similarity
rating, on the pairs of products of the same category. This module computes the six columns of
the paper's main table from such scores: pairwise accuracy (ties count one half), Spearman's rho
and Kendall's tau per category averaged with category-size weights, and recall at k with tied
predictions shared out fractionally; the analytic row of a random ranker; and BCa bootstrap
intervals that resample products within categories, with the acceleration from a
leave-one-product-out jackknife.

Everything works on *groups*: a list of ``(truth, score)`` pairs of 1-D arrays, one per
category. Each metric is a weighted mean of per-category values, so one code path serves the
point estimate, the bootstrap (rows of resampled categories) and the jackknife.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reprobook.core import bca_from_replicates, checks

__all__ = [
    "TIE_TOL",
    "METRICS",
    "Groups",
    "groups_from_frame",
    "snap_ties",
    "pair_scores",
    "pairwise_accuracy",
    "weighted_spearman",
    "weighted_kendall",
    "recall_at_k",
    "ranking_metrics",
    "random_ranker",
    "category_stats",
    "BootstrapResult",
    "bootstrap_metrics",
]

TIE_TOL = 1e-10  # two scores closer than this are tied (the release's convention)
METRICS = (
    "pairwise_accuracy",
    "spearman",
    "kendall_tau",
    "recall_at_1",
    "recall_at_2",
    "recall_at_3",
)

Groups = list  # list[tuple[np.ndarray, np.ndarray]]: (truth, score) per category


def snap_ties(x, tol: float = TIE_TOL) -> np.ndarray:
    """``x`` with each value closer than ``tol`` to its sorted predecessor set equal to it:
    what a rank statistic sees when differences below ``tol`` are float noise."""
    x = np.asarray(x, dtype=float).copy()
    order = np.argsort(x, kind="stable")
    xs = x[order]
    for i in range(1, xs.size):
        if xs[i] - xs[i - 1] < tol:
            xs[i] = xs[i - 1]
    x[order] = xs
    return x


def groups_from_frame(
    frame: pd.DataFrame,
    truth: str = "true_score",
    score: str = "predicted_score",
    by: str = "category",
) -> Groups:
    """The ``(truth, score)`` arrays of each category of an out-of-fold table, categories in
    sorted order, values as they are. Products without a score are dropped (with their
    pairs)."""
    for col in (truth, score, by):
        if col not in frame.columns:
            raise checks.InputError(
                f"frame must have a column {col!r}; it has {', '.join(map(str, frame.columns))}"
            )
    out = []
    for _, g in frame.dropna(subset=[truth, score]).groupby(by, sort=True):
        t = checks.array(g[truth].to_numpy(), "truth", ndim=1)
        s = checks.array(g[score].to_numpy(), "score", ndim=1)
        out.append((t, s))
    if not out:
        raise checks.InputError("frame has no product with both a truth and a score")
    return out


def _sign(d: np.ndarray, tol: float) -> np.ndarray:
    """sign(d) as int8, with 0 where |d| < tol."""
    if tol > 0:
        out = (d >= tol).astype(np.int8)
        out -= d <= -tol
    else:
        out = (d > 0).astype(np.int8)
        out -= d < 0
    return out


def pair_scores(truth, score, tol: float = TIE_TOL) -> np.ndarray:
    """The credit of every pair i < j along the last axis: 1 if the score orders the pair as the
    truth does, 0 if it reverses it, 1/2 if either is tied (closer than ``tol``).

    Implements eq. `tastebench-pairwise` of notebooks/06_tastebench/index.md. Arrays (..., n);
    returns (..., n (n - 1) / 2).
    """
    t, s = np.asarray(truth, dtype=float), np.asarray(score, dtype=float)
    i, j = np.triu_indices(t.shape[-1], k=1)
    dt = _sign(t[..., i] - t[..., j], tol)  # sign of the truth's difference (0: tie)
    ds = _sign(s[..., i] - s[..., j], tol)  # sign of the score's difference
    return np.where((dt == 0) | (ds == 0), 0.5, (dt == ds).astype(float))  # eq. pairwise


def _corr_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(-1, keepdims=True)
    b = b - b.mean(-1, keepdims=True)
    den = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, (a * b).sum(-1) / np.where(den > 1e-12, den, 1.0), np.nan)


def _recall_rows(t: np.ndarray, s: np.ndarray, k: int, tol: float) -> np.ndarray:
    """Fractional recall at k of the truly best item(s), one value per row of (..., n)."""
    return category_stats(t, s, tol, ks=(k,))[f"recall_at_{k}"][0]


def category_stats(
    t, s, tol: float = TIE_TOL, ks=(1, 2, 3), rank_tol: float = 0.0
) -> dict[str, tuple]:
    """Per-category values and weights of every metric, for categories given as rows of
    (..., n) arrays (one row per resample): ``{metric: (values, weights)}``. A metric is the
    weighted mean of its values over categories; a value that is undefined (a constant row for
    a correlation) gets weight 0. Pairwise accuracy and R@k count differences below ``tol`` as
    ties; the rank correlations use the raw values (ties below ``rank_tol``, exact by default).

    Implements eq. `tastebench-spearman` of notebooks/06_tastebench/index.md (the weights).
    """
    t, s = np.asarray(t, dtype=float), np.asarray(s, dtype=float)
    n = t.shape[-1]
    ones = np.ones(t.shape[:-1])
    dt_all = t[..., None, :] - t[..., :, None]  # [j, m] = t_m - t_j
    ds_all = s[..., None, :] - s[..., :, None]
    st, ss = _sign(dt_all, tol), _sign(ds_all, tol)  # signs, ties below tol
    i, j = np.triu_indices(n, k=1)
    dt, ds = st[..., i, j], ss[..., i, j]  # each pair once
    credit = np.where((dt == 0) | (ds == 0), 0.5, (dt == ds).astype(float))  # eq. pairwise
    out = {"pairwise_accuracy": (credit.mean(-1), ones * n * (n - 1) / 2)}
    st_tol, ss_tol = st, ss
    if rank_tol != tol:
        st, ss = _sign(dt_all, rank_tol), _sign(ds_all, rank_tol)
        dt, ds = st[..., i, j], ss[..., i, j]
    dt, ds = dt.astype(float), ds.astype(float)
    # average ranks from the sign matrices: (n + 1) / 2 + (#below - #above) / 2
    rho = _corr_rows(-st.sum(-1, dtype=float), -ss.sum(-1, dtype=float))  # Spearman
    n0 = i.size
    den = np.sqrt((n0 - (dt == 0).sum(-1)) * (n0 - (ds == 0).sum(-1)).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(den > 0, (dt * ds).sum(-1) / np.where(den > 0, den, 1.0), np.nan)
    out["spearman"] = (np.nan_to_num(rho), np.where(np.isnan(rho), 0.0, n * ones))
    out["kendall_tau"] = (np.nan_to_num(tau), np.where(np.isnan(tau), 0.0, n * ones))
    if ks:
        best = (st_tol > 0).sum(-1) == 0  # nothing clearly above it in the truth
        above = (ss_tol > 0).sum(-1)  # items scored clearly above item j
        tied = (ss_tol == 0).sum(-1)  # items tied with j, j included
        for k in ks:
            rec = np.clip((k - above) / tied, 0.0, 1.0)  # eq. recall: j lands in the top k
            value = (rec * best).sum(-1) / best.sum(-1)
            out[f"recall_at_{k}"] = (value, ones)  # unweighted over categories
    return out


def _combine(parts: list[dict[str, tuple]]) -> dict[str, np.ndarray]:
    out = {}
    for m in parts[0]:
        num = sum(p[m][0] * p[m][1] for p in parts)
        den = sum(p[m][1] for p in parts)
        out[m] = num / den
    return out


def _check_groups(groups) -> list[tuple[np.ndarray, np.ndarray]]:
    if not isinstance(groups, (list, tuple)) or not groups:
        raise checks.InputError("groups must be a non-empty list of (truth, score) pairs")
    out = []
    for c, pair in enumerate(groups):
        t = checks.array(pair[0], f"truth of group {c}", ndim=1)
        s = checks.array(pair[1], f"score of group {c}", ndim=1)
        checks.same_shape(f"truth of group {c}", t, f"score of group {c}", s)
        if t.size < 2:
            raise checks.InputError(f"group {c} must hold at least 2 items, got {t.size}")
        out.append((t, s))
    return out


def pairwise_accuracy(groups, tol: float = TIE_TOL) -> float:
    """Pairwise accuracy pooled over every within-group pair (ties count 1/2).

    Implements eq. `tastebench-pairwise` of notebooks/06_tastebench/index.md.
    """
    groups = _check_groups(groups)
    credit = sum(pair_scores(t, s, tol).sum() for t, s in groups)
    return float(credit / sum(t.size * (t.size - 1) / 2 for t, _ in groups))


def weighted_spearman(groups, tol: float = TIE_TOL) -> float:
    """Spearman's rho in each group, averaged with weights equal to the group sizes.

    Implements eq. `tastebench-spearman` of notebooks/06_tastebench/index.md.
    """
    parts = [category_stats(t, s, tol, ks=()) for t, s in _check_groups(groups)]
    return float(_combine(parts)["spearman"])


def weighted_kendall(groups, tol: float = TIE_TOL) -> float:
    """Kendall's tau-b in each group, averaged with weights equal to the group sizes.

    Implements eq. `tastebench-spearman` of notebooks/06_tastebench/index.md.
    """
    parts = [category_stats(t, s, tol, ks=()) for t, s in _check_groups(groups)]
    return float(_combine(parts)["kendall_tau"])


def recall_at_k(groups, k: int, tol: float = TIE_TOL) -> float:
    """Recall at k averaged over groups: the chance that the truly best item is among the k
    best-scored ones when tied scores are put in a random order.

    Implements eq. `tastebench-recall` of notebooks/06_tastebench/index.md.
    """
    k = checks.integer(k, "k", minimum=1)
    groups = _check_groups(groups)
    return float(np.mean([_recall_rows(t, s, k, tol) for t, s in groups]))


def ranking_metrics(groups, tol: float = TIE_TOL, ks=(1, 2, 3)) -> dict[str, float]:
    """The six columns of the main table (pairwise accuracy, rho, tau, R@1, R@2, R@3)."""
    parts = [category_stats(t, s, tol, ks) for t, s in _check_groups(groups)]
    return {m: float(v) for m, v in _combine(parts).items()}


def random_ranker(sizes, ks=(1, 2, 3)) -> dict[str, float]:
    """The analytic scores of a ranker that orders each category at random: pairwise accuracy
    1/2, rho and tau 0, and R@k = mean over categories of min(k, n_c) / n_c.

    Implements eq. `tastebench-random` of notebooks/06_tastebench/index.md.
    """
    n = checks.array(sizes, "sizes", ndim=1)
    if n.size == 0 or np.any(n < 2) or np.any(n != np.round(n)):
        raise checks.InputError("sizes must be whole numbers >= 2, one per category")
    out = {"pairwise_accuracy": 0.5, "spearman": 0.0, "kendall_tau": 0.0}
    for k in ks:
        out[f"recall_at_{k}"] = float(np.mean(np.minimum(k, n) / n))  # eq. random
    return out


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimates, bootstrap replicates and jackknife values of every metric of several
    models scored on the same resamples (so differences between models are paired)."""

    point: dict[str, dict[str, float]]  # model -> metric -> estimate
    boot: dict[str, dict[str, np.ndarray]]  # model -> metric -> (n_resamples,)
    jack: dict[str, dict[str, np.ndarray]]  # model -> metric -> (n_products,)

    def interval(self, model: str, metric: str, level: float = 0.95) -> tuple[float, float]:
        """The BCa interval of one model's metric (:func:`reprobook.core.bca_from_replicates`)."""
        return bca_from_replicates(
            self.point[model][metric], self.boot[model][metric], self.jack[model][metric], level
        )

    def difference(self, a: str, b: str, metric: str, level: float = 0.95) -> tuple:
        """(estimate, low, high): the paired BCa interval of metric(a) - metric(b)."""
        est = self.point[a][metric] - self.point[b][metric]
        boot = self.boot[a][metric] - self.boot[b][metric]
        jack = self.jack[a][metric] - self.jack[b][metric]
        return (est, *bca_from_replicates(est, boot, jack, level))


def bootstrap_metrics(
    truth_groups: list,
    scores: dict[str, list],
    n_resamples: int,
    rng: np.random.Generator,
    tol: float = TIE_TOL,
    ks=(1, 2, 3),
) -> BootstrapResult:
    """Resample products with replacement within each category (sizes kept), ``n_resamples``
    times, and score every model on the same resamples; jackknife by leaving out one product at
    a time. ``truth_groups`` holds the truth per category and ``scores[model]`` the scores per
    category, aligned with it. A resample that draws one product twice gets a pair tied in the
    truth, which counts 1/2.

    Implements eq. `tastebench-bca` of notebooks/06_tastebench/index.md (the resampling).
    """
    n_resamples = checks.integer(n_resamples, "n_resamples", minimum=2)
    rng = checks.generator(rng)
    truths = [checks.array(t, "truth", ndim=1) for t in truth_groups]
    for name, groups in scores.items():
        if len(groups) != len(truths) or any(
            np.shape(s) != t.shape for s, t in zip(groups, truths)
        ):
            raise checks.InputError(f"scores[{name!r}] must align with truth_groups")
    draws = [rng.integers(0, t.size, size=(n_resamples, t.size)) for t in truths]
    point, boot, jack = {}, {}, {}
    for name, groups in scores.items():
        full = [category_stats(t, np.asarray(s, float), tol, ks) for t, s in zip(truths, groups)]
        point[name] = {m: float(v) for m, v in _combine(full).items()}
        resampled = [
            category_stats(t[idx], np.asarray(s, float)[idx], tol, ks)
            for t, s, idx in zip(truths, groups, draws)
        ]
        boot[name] = _combine(resampled)
        jack_rows = []
        for c, (t, s) in enumerate(zip(truths, groups)):
            keep = ~np.eye(t.size, dtype=bool)
            loo_idx = np.nonzero(keep)[1].reshape(t.size, t.size - 1)  # row i: all but i
            loo = category_stats(t[loo_idx], np.asarray(s, float)[loo_idx], tol, ks)
            parts = [loo] + [
                {m: (np.repeat(v, t.size), np.repeat(w, t.size)) for m, (v, w) in f.items()}
                for f in full[:c] + full[c + 1 :]
            ]
            jack_rows.append(_combine(parts))
        jack[name] = {m: np.concatenate([r[m] for r in jack_rows]) for m in point[name]}
    return BootstrapResult(point, boot, jack)
