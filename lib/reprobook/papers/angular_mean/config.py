"""Profiles of the notebooks of the chapter on the angular mean (arXiv 2605.12717).

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions", arXiv 2605.12717 (definitions reconstructed from the abstract).

One frozen dataclass per notebook (the seed is a notebook parameter, not a field; Monte Carlo
streams use ``seed + 1``), with a ``reduced`` instance (2 CPU cores, well under a minute of
compute), a ``full`` instance (larger grids) and a ``smoke`` one, keyed by the notebook's file
stem. Notebooks call::

    run, cfg = core.start(am, "01_long_run_ip", profile, seed, n_profiles=n_profiles)

Notebooks: ``01_long_run_ip`` (claims C1, C2), ``02_per_batch_ip`` (C3, C4),
``03_disagreement_sweep`` (C5, C6). Angles in the configurations (separations, Monte Carlo
angles) are in units of pi.

The full profile runs the same NumPy code at larger sizes, on CPU cores: that is enough at the
sizes below (the largest single call, per-batch agreement at m = 1000 over 10,000 batches, is
about 1.5e10 pair comparisons per rule, about a minute). The paper's real preference data sets
are not available, so no profile uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core.resources import Resources

__all__ = ["LongRunIPConfig", "PerBatchIPConfig", "DisagreementSweepConfig", "PROFILES"]


@dataclass(frozen=True)
class LongRunIPConfig:
    """C1 (the angular mean satisfies long-run IP) and C2 (the arithmetic mean is majoritarian)."""

    n_profiles: int = 500  # random profiles; n, d and the concentration cycle through the grids
    n_voters: tuple[int, ...] = (2, 3, 4, 5, 6)  # numbers of voter types (cycled)
    dims: tuple[int, ...] = (2, 3, 5, 10)  # item dimensions d (cycled)
    concentrations: tuple[float, ...] = (0.3, 1.0)  # Dirichlet concentrations of the shares
    ip_tol: float = 1e-3  # radians: angle(theta*, u_i) above pi (1 - alpha_i) by more: violation
    n_random_starts: int = 8  # random starts of the descent (besides the mean and each u_i)
    max_iter: int = 300  # descent steps per start
    tol: float = 1e-12  # stationarity residual |sum_i alpha_i Log(u_i)| at which a start stops
    n_grid_profiles: int = 60  # profiles in d = 2 and d = 3 also minimised by brute force on a grid
    grid_circle: int = 20_001  # grid points on the circle (d = 2)
    grid_sphere: int = 40_000  # Fibonacci-lattice points on S^2 (d = 3)
    mc_dim: int = 5  # dimension of the random-hyperplane identity check
    mc_angles: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)  # angles between the vectors / pi
    mc_pairs: int = 200_000  # Gaussian item pairs per angle
    mc_profiles: int = 20  # profiles whose E[A_i] is also estimated from Gaussian batches
    mc_batches: int = 500  # Gaussian batches per such profile
    mc_batch_size: int = 20  # items per batch
    example_alphas: tuple[float, ...] = (0.6, 0.4)  # shares of the two-group example
    example_separation: float = 0.9  # angle between the two groups (units of pi)
    example_separations: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)  # swept (units of pi)


@dataclass(frozen=True)
class PerBatchIPConfig:
    """C3 (exact per-batch IP is impossible) and C4 (the per-batch gap shrinks with m)."""

    d: int = 5  # item dimension
    separation: float = 0.9  # angle between the two voter types (units of pi)
    alphas: tuple[float, ...] = (0.6, 0.4)  # shares of the two types
    batch_sizes: tuple[int, ...] = (2, 5, 10, 20, 50, 100, 200)  # items per batch m
    n_batches: int = 2000  # Gaussian batches per batch size
    n_bootstrap: int = 2000  # bootstrap resamples of the batches behind C4's interval of the slope
    m2_alpha: float = 0.5  # share of the first of the two opposite voters in the m = 2 example
    m2_n_thetas: int = 10_000  # random collective vectors tried in the m = 2 example
    n_random_starts: int = 8  # random starts of the Riemannian descent
    max_iter: int = 300  # descent steps per start
    tol: float = 1e-12  # stationarity residual at which a start stops


@dataclass(frozen=True)
class DisagreementSweepConfig:
    """C5: the rules agree for homogeneous voters; the angular mean wins under high disagreement."""

    d: int = 5  # item dimension of the synthetic sweep
    separations: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # units of pi
    share_vectors: tuple[tuple[float, ...], ...] = ((0.7, 0.3), (0.5, 0.3, 0.2))  # type shares
    n_reps: int = 30  # random planes (and voter clouds) per separation and share vector
    kappa: float = 50.0  # von Mises-Fisher concentration of individual voters around their type
    voters_per_type: int = 20  # voters drawn per type (per-voter share: type share / count)
    # separations of the voter clouds (units of pi); C5 is scored at the largest, C6 the smallest
    cloud_separations: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    cloud_reps: int = 30  # voter clouds (random plane and draws) per separation and share vector
    tables: tuple[str, ...] = ("wine", "diabetes", "breast_cancer")  # scikit-learn tables
    table_separations: tuple[float, ...] = (0.1, 0.5, 0.9)  # separations on the tables / pi
    table_reps: int = 5  # random planes per table and separation
    table_batch_size: int = 20  # rows per batch of table items
    table_n_batches: int = 200  # batches of table items per profile
    whiten_tables: bool = True  # also compute the rules in whitened coordinates
    n_random_starts: int = 8  # random starts of the Riemannian descent
    max_iter: int = 300  # descent steps per start
    tol: float = 1e-12  # stationarity residual at which a start stops


# Compute time of each notebook's workload (library calls only, no plotting), measured on a
# 2-core CPU (numpy 2.4, scipy 1.17) at the reduced sizes, seed 0:
#   long_run_ip:        2.1 s  (500 angular means (exact circle in d = 2, descent with 1 + n + 8
#                              starts otherwise) + both arithmetic means + ratios: 1.4 s; 60 grid
#                              cross-checks: 0.4 s; identity Monte Carlo 5 x 200k pairs: 0.08 s;
#                              E[A_i] of 20 profiles from 500 Gaussian batches of 20: 0.16 s)
#   per_batch_ip:       2.4 s  (m = 2 example, per_batch_agreement for 2,000 random theta: 0.2 s,
#                              ~0.5 s for all 10,000; C4 shortfall of both rules over 7 sizes x
#                              2,000 batches: 2.0 s, of which m = 200 is 1.5 s; the bootstrap of
#                              the slope, 2,000 resamples: 0.2 s CPU)
#   disagreement_sweep: 7.0 s  (2 share vectors x 9 separations x 30 reps: type profile, vMF cloud
#                              of 20 voters a type and both rules on both: 5.8 s, 0.8 s of it the
#                              first import of scipy.stats; 3 tables x 3 separations x 5 reps x
#                              4 rules (raw and whitened) on 200 batches of 20 rows: 1.2 s); the
#                              voter clouds of C5 and C6 (2 share vectors x 5 separations x 30
#                              clouds): 2.5 s CPU, measured on a shared machine
# Whole notebooks, CPU time with the kernel's start, on a shared machine: 8 s, 10 s and 13 s.
# Full profile, estimated from samples on the same CPU: long_run_ip ~4 min (0.02 s a profile;
# d = 100, n = 50: 0.3 s, dominated by the Hessian eigendecompositions), per_batch_ip ~3 min
# (m = 1000: ~65 s a rule), disagreement_sweep ~7 min (0.026 s a profile of 200-400 voters).
FULL_LONG_RUN_IP = LongRunIPConfig(
    n_profiles=10_000,
    n_voters=(2, 3, 4, 5, 6, 8, 10, 20, 50),
    dims=(2, 3, 5, 10, 20, 50, 100),
    concentrations=(0.1, 0.3, 1.0, 3.0),
    n_random_starts=16,
    n_grid_profiles=500,
    mc_pairs=2_000_000,
    mc_profiles=200,
    mc_batches=2000,
)
FULL_PER_BATCH_IP = PerBatchIPConfig(
    batch_sizes=(2, 5, 10, 20, 50, 100, 200, 500, 1000),
    n_batches=10_000,
    m2_n_thetas=100_000,
)
FULL_DISAGREEMENT_SWEEP = DisagreementSweepConfig(
    separations=tuple(round(0.05 * k, 2) for k in range(1, 20)),
    share_vectors=((0.7, 0.3), (0.6, 0.4), (0.5, 0.3, 0.2), (0.4, 0.3, 0.2, 0.1)),
    n_reps=200,
    voters_per_type=100,
    cloud_reps=200,
    table_separations=(0.1, 0.3, 0.5, 0.7, 0.9),
    table_reps=50,
    table_n_batches=2000,
)

# smoke: the full profile's grids with every count cut to seconds on one CPU thread
PROFILES: dict[str, dict[str, Any]] = {
    "01_long_run_ip": {
        "reduced": LongRunIPConfig(),
        "full": FULL_LONG_RUN_IP,
        "smoke": replace(
            FULL_LONG_RUN_IP,
            n_profiles=40,
            n_random_starts=2,
            max_iter=100,
            n_grid_profiles=4,
            grid_circle=2001,
            grid_sphere=4000,
            mc_pairs=20_000,
            mc_profiles=4,
            mc_batches=50,
        ),
    },
    "02_per_batch_ip": {
        "reduced": PerBatchIPConfig(),
        "full": FULL_PER_BATCH_IP,
        "smoke": replace(
            FULL_PER_BATCH_IP,
            batch_sizes=(2, 5, 10, 20, 50),
            n_batches=100,
            n_bootstrap=100,
            m2_n_thetas=1000,
            n_random_starts=2,
            max_iter=100,
        ),
    },
    "03_disagreement_sweep": {
        "reduced": DisagreementSweepConfig(),
        "full": FULL_DISAGREEMENT_SWEEP,
        "smoke": replace(
            FULL_DISAGREEMENT_SWEEP,
            separations=(0.1, 0.5, 0.9),
            share_vectors=((0.7, 0.3), (0.5, 0.3, 0.2)),
            n_reps=3,
            voters_per_type=5,
            cloud_separations=(0.1, 0.5, 0.9),
            cloud_reps=3,
            table_separations=(0.1, 0.9),
            table_reps=2,
            table_n_batches=20,
            n_random_starts=2,
            max_iter=100,
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, measured on 2026-12-05 on 2 cores (Intel Xeon, no GPU): 317 s + 195 s + 105 s, 10.3 min
# in all, peak 1.1 GB (archive/manifests/full/angular_mean.json); 4 cores and 0.5 h leave room.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.1),
    "full": Resources(gpus=0, cpus=4, mem_gb=8, hours=0.5),
}
