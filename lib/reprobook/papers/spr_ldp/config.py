"""Profiles of the notebooks of the chapter on *Sort, Partition, Randomize* (arXiv 2606.07443).

One frozen dataclass per notebook (the seed is a notebook parameter, not a field: the
instances use ``seed`` and the Monte Carlo of C6 ``seed + 1``), with a ``reduced`` instance
(2 CPU cores, under a minute of compute), a ``full`` instance (larger grids, still on the
CPU) and a ``smoke`` one, keyed by the notebook's file stem. Notebooks call::

    run, cfg = core.start(spr, "01_lp_check", profile, seed, n_instances=n_instances)

Notebooks: ``01_lp_check`` (claim C1), ``02_structure`` (C2, C3, C4), ``03_privacy_range``
(C5, C6).
The reduced times in the comments were measured on a 2-core CPU with the library's own
functions at exactly these sizes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from reprobook.core.resources import Resources

__all__ = ["LPCheckConfig", "StructureConfig", "PrivacyRangeConfig", "PROFILES"]

DIVERGENCE_NAMES: tuple[str, ...] = (
    "tv",
    "kl",
    "reverse_kl",
    "chi2",
    "hellinger",
    "hockey_stick(gamma=2)",
)


@dataclass(frozen=True)
class LPCheckConfig:
    """C1: the SPR dynamic program against the Kairouz-Oh-Viswanath staircase LP."""

    ks: tuple[int, ...] = (2, 3, 4, 5, 6, 7)  # alphabet sizes of the main batch (cycled)
    n_instances: int = 300  # random (P0, P1) pairs in the main batch
    concentrations: tuple[float, ...] = (0.3, 1.0, 3.0)  # Dirichlet concentrations (cycled)
    eps_grid: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)  # privacy levels (cycled)
    divergences: tuple[str, ...] = DIVERGENCE_NAMES  # every instance is solved for each of these
    large_k: int = 12  # alphabet size of the second, larger batch
    n_large: int = 20  # instances in the larger batch
    heatmap_k: int = 8  # alphabet size of the instance drawn as LP vs SPR heat maps
    gap_floor: float = 1e-12  # floor of the denominator of the relative gap


@dataclass(frozen=True)
class StructureConfig:
    """C2 (contiguity), C3 (output budget) and C4 (running time)."""

    c2_ks: tuple[int, ...] = (2, 3, 4, 5, 6, 7)  # alphabet sizes of the search over all partitions
    c2_per_k: int = 20  # instances per alphabet size in C2
    c2_eps_grid: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)  # privacy levels (cycled) in C2
    c2_divergences: tuple[str, ...] = DIVERGENCE_NAMES  # divergences in C2
    c3_ks: tuple[int, ...] = (2, 3, 4)  # sizes for the budget LP (C(15, 3) systems at k = 4)
    c3_budgets: tuple[int, ...] = (2, 3)  # output budgets ell
    c3_n_instances: int = 12  # instances in C3
    c3_eps_grid: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)  # privacy levels (cycled) in C3
    c3_divergences: tuple[str, ...] = ("tv", "kl", "chi2", "hellinger")  # divergences in C3
    c3_n_linprog: int = 2  # instances also solved literally, one linprog per choice of ell columns
    c4_eps: float = 2.0  # privacy level of the timing runs
    c4_divergence: str = "kl"  # divergence of the timing runs
    c4_dp_ks: tuple[int, ...] = (50, 125, 250, 500, 1000)  # DP sizes timed (k = 1000: ~0.8 s)
    c4_fit_min_k: int = 125  # slopes fit k >= this (below, NumPy's per-call cost dominates)
    c4_dp_budgets: tuple[int | None, ...] = (2, 8, None)  # output budgets timed (None: ell = k)
    c4_lp_ks: tuple[int, ...] = (8, 10, 12, 14)  # alphabet sizes timed for the staircase LP
    c4_repeats: int = 3  # timing repetitions (the minimum is kept)
    dp_table_k: int = 8  # alphabet size of the DP tables drawn in the chapter


@dataclass(frozen=True)
class PrivacyRangeConfig:
    """C5 (the optimum over the whole privacy range) and C6 (n-sample testing, our extension)."""

    k: int = 20  # alphabet size of every instance
    instances: tuple[str, ...] = (  # structured pairs of instances.named_instances
        "dirichlet(1)",
        "gaussians(shift=1)",
        "zipf(1) vs uniform",
        "sparse alternative",
    )
    n_eps: int = 60  # number of privacy levels, log-spaced
    eps_min: float = 0.01  # smallest privacy level
    eps_max: float = 20.0  # largest privacy level
    divergences: tuple[str, ...] = DIVERGENCE_NAMES  # utilities plotted against eps
    c6_instance: str = "dirichlet(1)"  # instance of the testing experiment
    c6_eps: tuple[float, ...] = (2.0, 4.0, 6.0)  # privacy levels of C6 (>= 4 distinct mechanisms)
    c6_ns: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000, 10000)  # sample sizes n
    c6_reps: int = 2000  # Monte-Carlo draws per hypothesis and n in one repetition
    c6_repeats: int = 10  # independent Monte-Carlo repetitions (the units of C6's intervals)
    c6_min_relative_gap: float = 0.02  # pairs whose Stein exponents differ less are not scored
    c6_alpha: float = 0.05  # type-I error of the Neyman-Pearson test
    c6_min_misses: int = 10  # beta_n is reported only with at least this many misses


# Compute time of each notebook's workload (library calls only, no plotting), measured on a
# 2-core CPU (numpy 2.4, scipy 1.17) at the reduced sizes:
#   lp_check:      7.3 s  (300 instances x 6 divergences, DP + LP: 4.4 s; 20 at k = 12: 2.9 s;
#                          largest gap 2e-11)
#   structure:     4.5 s  (C2 0.3 s, C3 0.4 s incl. 2 literal linprog cases, C4 DP 3.2 s with
#                          3 repeats (k = 1000, ell = k: 0.7 s a run), C4 LP 0.5 s (k = 14: 0.11 s))
#   privacy_range: 4 s    (C5 0.7 s for 4 instances x 6 divergences x 60 eps x 3 mechanisms,
#                          C6 about 3 s CPU for 3 eps x up to 5 mechanisms x 10 repetitions x 7 n
#                          x 2000 draws, measured on a shared machine)
# Whole notebooks, CPU time with the kernel's start, on a shared machine: 16 s, 21 s and 13 s.
_FULL_LP_CHECK = LPCheckConfig(
    ks=(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
    n_instances=3000,
    large_k=16,
    n_large=50,
)
_FULL_STRUCTURE = StructureConfig(
    c2_ks=(2, 3, 4, 5, 6, 7, 8),
    c2_per_k=50,
    c3_ks=(2, 3, 4, 5),
    c3_n_instances=60,
    c3_divergences=DIVERGENCE_NAMES,
    c3_n_linprog=4,
    c4_dp_ks=(50, 125, 250, 500, 1000, 2000, 5000),
    c4_dp_budgets=(2, 4, 8, 16, None),
    c4_lp_ks=(8, 10, 12, 14, 16, 18),
    c4_repeats=1,  # one run of the k = 5000, ell = k DP takes minutes (k = 2000: 12 s)
)
_FULL_PRIVACY_RANGE = PrivacyRangeConfig(
    n_eps=200,
    c6_ns=(10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000),
    c6_reps=20_000,
)

# The smoke profile: the full configurations with every size cut to seconds on one CPU thread
# (the full profile runs the same code as the reduced one, at larger sizes).
PROFILES: dict[str, dict[str, Any]] = {
    "01_lp_check": {
        "reduced": LPCheckConfig(),
        "full": _FULL_LP_CHECK,
        "smoke": dataclasses.replace(
            _FULL_LP_CHECK, ks=(2, 3, 4, 5, 6, 7, 8), n_instances=14, large_k=10, n_large=2
        ),
    },
    "02_structure": {
        "reduced": StructureConfig(),
        "full": _FULL_STRUCTURE,
        "smoke": dataclasses.replace(
            _FULL_STRUCTURE,
            c2_per_k=1,
            c3_ks=(2, 3),
            c3_n_instances=4,
            c3_n_linprog=1,
            c4_dp_ks=(50, 125, 250),
            c4_lp_ks=(8, 10, 12),
        ),
    },
    "03_privacy_range": {
        "reduced": PrivacyRangeConfig(),
        "full": _FULL_PRIVACY_RANGE,
        "smoke": dataclasses.replace(
            _FULL_PRIVACY_RANGE,
            n_eps=20,
            c6_ns=(10, 30, 100, 300, 1000),
            c6_reps=500,
            c6_repeats=3,
        ),
    },
}


# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, measured on 2026-12-05 on 2 shared cores (Intel Xeon, no GPU): 497 s + 844 s + 60 s,
# 23.4 min in all, peak 1.3 GB (archive/manifests/full/spr_ldp.json); 4 cores and 1 h leave room.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.1),
    "full": Resources(gpus=0, cpus=4, mem_gb=16, hours=1.0),
}
