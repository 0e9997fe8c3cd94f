"""The chapter's Monte Carlo studies, as functions that return rows for the notebooks.

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. The equations are on the
chapter's page, notebooks/02_angular_mean/index.md. Each function draws from ``rng`` in a fixed
order (documented), so a notebook that calls it with its seeded generator is reproducible:

* :func:`hyperplane_identity` - the random-hyperplane identity behind eq. `am-long-run`;
* :func:`two_type_example` - two types on a circle, swept over their separation;
* :func:`random_profiles` - both rules on random profiles, against long-run IP (eq. `am-ip`);
* :func:`grid_cross_check`, :func:`batch_identity_check` - the minimiser against a brute-force
  grid, and E[A_i] from Gaussian batches against eq. `am-long-run`;
* :func:`shortfall_by_batch_size` - per-batch shortfalls for several batch sizes (C4);
* :func:`type_sweep`, :func:`cloud_sweep`, :func:`table_sweep` - the disagreement sweep on
  exact types, on voter clouds and on table items (C5, C6).

Every row is a plain dict; a notebook turns a list of them into a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .agreement import (
    hyperplane_mc,
    long_run_agreement,
    long_run_ratio,
    per_batch_agreement,
    per_batch_shortfall,
)
from .generators import (
    gaussian_batches,
    random_profile,
    table_batches,
    table_items,
    type_profile,
    vmf_voters,
)
from .geometry import angle, as_generator, unwhiten, whiten
from .intervals import worst_ratio_gap
from .rules import angular_mean, angular_mean_info, arithmetic_mean, grid_angular_mean

__all__ = [
    "hyperplane_identity",
    "two_type_example",
    "random_profiles",
    "grid_cross_check",
    "batch_identity_check",
    "shortfall_by_batch_size",
    "type_sweep",
    "cloud_sweep",
    "table_sweep",
]

Rows = list[dict[str, Any]]


def hyperplane_identity(
    angles: Sequence[float], dim: int, n_pairs: int, rng: np.random.Generator | int | None
) -> Rows:
    """For each angle phi = frac * pi, the Monte Carlo share of Gaussian pairs that two rules
    phi apart order differently (:func:`.agreement.hyperplane_mc`, one call per angle in turn),
    against phi / pi. Rows: angle_over_pi, monte_carlo, std_error, z = (estimate - phi/pi) / se.
    """
    gen = as_generator(rng)
    rows = []
    for frac in angles:
        phi = frac * np.pi
        a = np.zeros(dim)
        a[0] = 1.0
        b = np.zeros(dim)
        b[0], b[1] = np.cos(phi), np.sin(phi)
        p, se = hyperplane_mc(a, b, n_pairs, gen)
        rows.append(dict(angle_over_pi=frac, monte_carlo=p, std_error=se, z=(p - frac) / se))
    return rows


def two_type_example(separations: Sequence[float], alphas: Sequence[float]) -> Rows:
    """Two types in the plane, ``separation * pi`` apart with shares ``alphas``: the minority's
    (second type's) long-run agreement under both rules, per separation. Deterministic.
    Rows: separation, rule, minority."""
    a = np.asarray(alphas, dtype=float)
    rows = []
    for frac in separations:
        U = np.array([[1.0, 0.0], [np.cos(frac * np.pi), np.sin(frac * np.pi)]])
        for name, rule in (("arithmetic mean", arithmetic_mean), ("angular mean", angular_mean)):
            minority = long_run_agreement(rule(U, a), U)[1]
            rows.append(dict(separation=frac, rule=name, minority=minority))
    return rows


def random_profiles(
    n_profiles: int,
    n_voters: Sequence[int],
    dims: Sequence[int],
    concentrations: Sequence[float],
    n_random_starts: int,
    max_iter: int,
    rng: np.random.Generator | int | None,
) -> Rows:
    """Both rules on random profiles, scored against long-run IP (eq. `am-ip` in the form of
    eq. `am-long-run` of notebooks/02_angular_mean/index.md).

    Profile j has n = n_voters[j % len], d = dims[(j // len(n_voters)) % len] and concentration
    concentrations[j % len]; it is drawn by :func:`.generators.random_profile` and its angular
    mean found by :func:`.rules.angular_mean_info`, both from ``rng``, in that order. A profile
    whose arithmetic mean is the zero vector has no arithmetic-mean row. Rows: profile, n, d,
    concentration, rule, worst_excess = max_i angle - pi (1 - alpha_i) (<= 0: IP holds),
    worst_ratio = max_i of :func:`.agreement.long_run_ratio`, residual and local_minima (the
    angular mean's diagnostics; nan for the arithmetic mean).
    """
    gen = as_generator(rng)
    rows = []
    for j in range(n_profiles):
        n = n_voters[j % len(n_voters)]
        d = dims[(j // len(n_voters)) % len(dims)]
        conc = concentrations[j % len(concentrations)]
        thetas, alphas = random_profile(n, d, conc, gen)
        info = angular_mean_info(
            thetas, alphas, n_random_starts=n_random_starts, max_iter=max_iter, rng=gen
        )
        try:
            arith = arithmetic_mean(thetas, alphas)
        except ValueError:  # the shares cancel the vectors exactly: no direction
            arith = None
        for rule, v in (("angular mean", info.direction), ("arithmetic mean", arith)):
            if v is None:
                continue
            excess = angle(v[None, :], thetas) - np.pi * (1 - alphas)
            ang = rule == "angular mean"
            rows.append(
                dict(
                    profile=j,
                    n=n,
                    d=d,
                    concentration=conc,
                    rule=rule,
                    worst_excess=float(excess.max()),
                    worst_ratio=float(long_run_ratio(v, thetas, alphas).max()),
                    residual=info.residual if ang else np.nan,
                    local_minima=len(info.local_minima) if ang else np.nan,
                )
            )
    return rows


def grid_cross_check(
    n_profiles: int,
    grid_circle: int,
    grid_sphere: int,
    n_random_starts: int,
    max_iter: int,
    rng: np.random.Generator | int | None,
) -> Rows:
    """The angular mean's objective against a brute-force grid minimum, on random profiles in
    d = 2 and d = 3 alternately (2 to 5 voters, Dirichlet(1) shares), eq. `am-angular-mean`.

    Each profile is drawn and its angular mean found from ``rng``, in that order. Rows: d,
    descent_minus_grid (<= 0 up to the grid's resolution when the minimiser is global).
    """
    gen = as_generator(rng)
    rows = []
    for j in range(n_profiles):
        d = 2 + j % 2
        thetas, alphas = random_profile(2 + j % 4, d, 1.0, gen)
        info = angular_mean_info(
            thetas, alphas, n_random_starts=n_random_starts, max_iter=max_iter, rng=gen
        )
        n_grid = grid_circle if d == 2 else grid_sphere
        _, f_grid = grid_angular_mean(thetas, alphas, n_grid=n_grid)
        rows.append(dict(d=d, descent_minus_grid=info.objective - f_grid))
    return rows


def batch_identity_check(
    n_profiles: int,
    dim: int,
    n_batches: int,
    batch_size: int,
    rng: np.random.Generator | int | None,
) -> list[float]:
    """E[A_i] measured on Gaussian batches against 1 - angle/pi (eq. `am-long-run`).

    For each of ``n_profiles`` random profiles of three types in ``dim`` dimensions: draw the
    profile, then ``n_batches`` batches of ``batch_size`` items, both from ``rng``; return the
    largest |mean batch agreement - (1 - angle/pi)| over the types, in standard errors.
    """
    gen = as_generator(rng)
    out = []
    for _ in range(n_profiles):
        thetas, alphas = random_profile(3, dim, 1.0, gen)
        v = angular_mean(thetas, alphas)
        X = gaussian_batches(n_batches, batch_size, dim, gen)
        A = per_batch_agreement(v, thetas, X)  # (batches, types)
        se = A.std(axis=0, ddof=1) / np.sqrt(len(A))
        out.append(float(np.max(np.abs(A.mean(axis=0) - long_run_agreement(v, thetas)) / se)))
    return out


def shortfall_by_batch_size(
    rules: Mapping[str, np.ndarray],
    thetas: np.ndarray,
    alphas: np.ndarray,
    batch_sizes: Sequence[int],
    n_batches: int,
    rng: np.random.Generator | int | None,
) -> tuple[Rows, dict[str, list[np.ndarray]]]:
    """Per-batch shortfalls s(X) (eq. `am-shortfall-slope`) of each rule on Gaussian batches.

    For each batch size m in turn, ``n_batches`` batches are drawn from ``rng`` and shared by
    the rules. Returns (rows: m, rule, shortfall (mean), violation (share of batches with some
    type below its share), minority_agreement (the second type's mean agreement); and, per rule,
    the per-batch shortfalls (n_batches,) of each size, for the bootstrap of the slope).
    """
    gen = as_generator(rng)
    d = np.asarray(thetas).shape[1]
    rows, per_batch = [], {name: [] for name in rules}
    for m in batch_sizes:
        X = gaussian_batches(n_batches, m, d, gen)
        for name, v in rules.items():
            res = per_batch_shortfall(v, thetas, alphas, X)
            per_batch[name].append(res.shortfall)
            rows.append(
                dict(
                    m=m,
                    rule=name,
                    shortfall=float(res.shortfall.mean()),
                    violation=float(res.violated.mean()),
                    minority_agreement=float(res.agreement[:, 1].mean()),
                )
            )
    return rows, per_batch


def _two_rules(thetas: np.ndarray, alphas: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "angular mean": angular_mean(thetas, alphas),
        "arithmetic mean": arithmetic_mean(thetas, alphas),
    }


def type_sweep(
    share_vectors: Sequence[Sequence[float]],
    separations: Sequence[float],
    n_reps: int,
    d: int,
    rng: np.random.Generator | int | None,
) -> Rows:
    """Exact types on a great circle of a random plane (:func:`.generators.type_profile`, one
    draw from ``rng`` per share vector, separation and repetition): every type's long-run
    agreement (eq. `am-long-run`) under both rules. Rows: shares, separation, rep, rule, type,
    agreement, share, ratio = agreement / share."""
    gen = as_generator(rng)
    rows = []
    for shares in share_vectors:
        for frac in separations:
            for rep in range(n_reps):
                thetas, alphas = type_profile(d, frac * np.pi, list(shares), gen)
                for rule, v in _two_rules(thetas, alphas).items():
                    agree = long_run_agreement(v, thetas)
                    for t, (a, s) in enumerate(zip(agree, alphas)):
                        rows.append(
                            dict(
                                shares=str(tuple(shares)),
                                separation=frac,
                                rep=rep,
                                rule=rule,
                                type=f"type {t} ({s:g})",
                                agreement=a,
                                share=s,
                                ratio=a / s,
                            )
                        )
    return rows


def cloud_sweep(
    share_vectors: Sequence[Sequence[float]],
    separations: Sequence[float],
    reps: int,
    d: int,
    kappa: float,
    voters_per_type: int,
    rng: np.random.Generator | int | None,
) -> tuple[Rows, Rows]:
    """Voter clouds: von Mises-Fisher voters around exact types, both rules computed on the
    individuals (each voter weighs its type's share over the type's count).

    Per share vector, separation and repetition: a type profile, then the voters, both from
    ``rng``. Returns (rows: shares, separation, rep, rule, type, ratio = the type's mean
    agreement over its share; gaps: shares, separation, rep, gap = eq. `am-worst-ratio`, the
    angular minus the arithmetic mean's worst-off ratio).
    """
    gen = as_generator(rng)
    rows, gaps = [], []
    for shares in share_vectors:
        for frac in separations:
            for rep in range(reps):
                centres, alphas = type_profile(d, frac * np.pi, list(shares), gen)
                thetas, w, labels = vmf_voters(
                    centres, kappa, voters_per_type, gen, type_alphas=alphas
                )
                rules = _two_rules(thetas, w)
                key = dict(shares=str(tuple(shares)), separation=frac, rep=rep)
                for rule, v in rules.items():
                    agree = long_run_agreement(v, thetas)
                    for t, s in enumerate(alphas):
                        ratio = agree[labels == t].mean() / s
                        rows.append(dict(key, rule=rule, type=f"type {t} ({s:g})", ratio=ratio))
                gap = worst_ratio_gap(
                    thetas, alphas, labels, rules["angular mean"], rules["arithmetic mean"]
                )
                gaps.append(dict(key, gap=gap))
    return rows, gaps


def table_sweep(
    tables: Sequence[str],
    shares: Sequence[float],
    separations: Sequence[float],
    reps: int,
    n_batches: int,
    batch_size: int,
    whiten_rules: bool,
    rng: np.random.Generator | int | None,
) -> Rows:
    """Semi-synthetic items: agreement measured on batches of table rows (eq. `am-agreement`),
    where eq. `am-long-run` need not hold.

    Per table: its batches, then per separation and repetition a type profile, all from
    ``rng``. With ``whiten_rules`` the angular mean is also computed in whitened coordinates
    (theta -> Sigma^{1/2} theta, Sigma the table's covariance) and mapped back. Rows: table,
    separation, rep, rule, type, ratio = the type's mean agreement over the batches / its share.
    """
    gen = as_generator(rng)
    rows = []
    for table in tables:
        items = table_items(table)
        d = items.shape[1]
        cov = np.cov(items, rowvar=False)
        X = table_batches(table, n_batches, batch_size, gen)
        for frac in separations:
            for rep in range(reps):
                thetas, alphas = type_profile(d, frac * np.pi, list(shares), gen)
                rules = _two_rules(thetas, alphas)
                if whiten_rules:  # the same rule where the items' differences are isotropic
                    W = whiten(thetas, cov)
                    rules["angular mean, whitened"] = unwhiten(angular_mean(W, alphas), cov)
                for rule, v in rules.items():
                    A = per_batch_agreement(v, thetas, X).mean(axis=0)  # per type
                    for t, (a_t, s_t) in enumerate(zip(A, alphas)):
                        rows.append(
                            dict(
                                table=f"{table} (d={d})",
                                separation=frac,
                                rep=rep,
                                rule=rule,
                                type=f"type {t} ({s_t:g})",
                                ratio=float(a_t / s_t),
                            )
                        )
    return rows
