"""Profiles of the notebooks of the chapter on testable learning of Massart halfspaces
(arXiv 2602.22300).

Paper: "Testable Learning of General Halfspaces under Massart Noise", arXiv 2602.22300 (only
the abstract was available; the tester and learner are our reconstruction).

Notebooks (``PROFILES`` is keyed by their file stems): ``01_sandwiching`` (C1),
``02_moment_tester`` (C2, C3), ``03_tester_learner`` (C4, C5). The seed is a notebook
parameter; Monte Carlo streams derive from it.

The full profile runs the same NumPy and SciPy code at larger sizes (higher degrees, dimensions
and sample sizes, more seeds). Degree-4 to 6 moments in d = 20 to 50 would suit a GPU; this
chapter computes features in float64 NumPy, in row chunks, and has not been ported to torch, so
the full profile is sized for a many-core CPU (it runs on the GPU machine's CPUs). No data set
applies: every distribution is generated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core.resources import Resources

__all__ = ["SandwichingConfig", "MomentTesterConfig", "TesterLearnerConfig", "PROFILES"]


@dataclass(frozen=True)
class SandwichingConfig:
    """C1: sandwiching polynomials for sign(z - t) by linear programming."""

    # thresholds t (bias gamma = Phi(-|t|))
    thresholds: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
    degrees: tuple[int, ...] = (2, 4, 6, 8, 10, 12, 14, 16)  # polynomial degrees k
    # LP constraint points on [-R, R], R = max(8, |t| + 6), before refinement
    grid_points: int = 1001
    # exchange rounds: violations on a 40x finer check grid are added and the LP re-solved
    refine: int = 8
    # a sandwich is valid when its off-grid violation on [-R, R] is at most this
    valid_tol: float = 1e-5
    ratio_targets: tuple[float, ...] = (30.0, 10.0)  # G / gamma levels for the degree-needed plot
    # thresholds of the closed-form sweep (t up to 8)
    cf_thresholds: tuple[float, ...] = tuple(0.5 * i for i in range(17))
    cf_max_degree: int = 4000  # largest degree of the closed-form sweep
    cf_ratio: float = 2.0  # constant-factor multiplicative error G <= cf_ratio * gamma (C1)
    cf_slope_from: float = 2.0  # C1's slope is fitted over thresholds t >= this
    eps_ratios: tuple[float, ...] = (1.0, 0.5, 0.25)  # G <= eps * gamma: the degree it needs
    example_t: float = 1.0  # threshold of the drawn example
    example_degrees: tuple[int, ...] = (4, 12)  # degrees of the drawn example


@dataclass(frozen=True)
class MomentTesterConfig:
    """C2, C3: the Hermite moment-matching tester, its analytic threshold and its power."""

    d: int = 5  # dimension
    degree: int = 4  # largest total degree of the tested moments (125 features at d = 5)
    n: int = 20_000  # samples per test (the largest of sample_sizes); the tester of C2 and C3
    # the threshold is this quantile of chi-squared (at n) or of Monte Carlo null draws (smaller n)
    quantile: float = 0.99
    check_reps: int = 400  # fresh Gaussian samples for the acceptance rate (C2)
    score_reps: int = 80  # samples per alternative and of the grid at n (C3)
    alt_reps: int = 20  # samples per alternative at the smaller sample sizes (the power curves)
    # n of the power curves (the largest is n)
    sample_sizes: tuple[int, ...] = (1000, 3000, 10_000, 20_000)
    # Monte Carlo null draws calibrating the threshold at each smaller sample size
    null_reps_small: int = 100


@dataclass(frozen=True)
class TesterLearnerConfig:
    """C4, C5: the tester-learner on Massart data, and how its cost grows."""

    d: int = 5  # dimension
    n: int = 2000  # training samples
    n_test: int = 50_000  # test samples (error against the noisy labels; opt = E[eta])
    thresholds: tuple[float, ...] = (0.0, 1.0, 2.0, 3.0)  # halfspace thresholds t
    # Massart noise models
    noises: tuple[str, ...] = ("boundary_band", "minority_side", "random_flips")
    eta_max: float = 0.4  # largest flip probability
    eta_low: float = 0.05  # flip probability away from the boundary band
    flip_eta: float = 0.1  # flip probability of the random-flips control (the easy case)
    band: float = 0.5  # half-width of the boundary band
    degrees: tuple[int, ...] = (1, 3)  # degrees of the L1 regression learners
    # target excess error; the constant hypothesis is used when the minority is rarer
    eps: float = 0.03
    # L1 regression: "dual" (HiGHS on the LP dual, about 7x faster) or "sklearn"
    solver: str = "dual"
    test_degree: int = 4  # degree of the tester's moments
    null_reps: int = 100  # Gaussian samples to calibrate the tester at n
    seeds: int = 5  # repetitions (data seeds) of the learner comparison; C4's interval is over them
    # repetitions per non-Gaussian marginal in the soundness runs (shown, not scored)
    soundness_reps: int = 2
    cost_dims: tuple[int, ...] = (2, 5, 10, 20)  # dimensions of the cost illustration
    cost_degrees: tuple[int, ...] = (2, 3, 4)  # degrees of the cost illustration
    cost_n: int = 5000  # samples in the cost illustration
    cost_max_features: int = 12_000  # skip (d, k) pairs with more features than this


# CPU time of each notebook's cells at the reduced sizes, one thread, kernel start excluded,
# measured on the 2-core CPU (the wall time grows with the other work it runs): sandwiching 33 s
# (56 sandwiches and their exchange rounds, solved by HiGHS's interior-point method, take most of
# it; the drawn examples are entries of the table, solved once; the closed-form sweep to degree
# 4000 well under 1 s), moment_tester 10 s (400 Gaussian samples and 6 x 80 scored samples at
# n = 20,000, the power curves at three smaller n), tester_learner 16 s (5 seeds x 12 learner
# problems with the dual L1 solver, the tester-learner reusing the degree-3 fit, the soundness
# runs, the cost grid).
FULL_SANDWICHING = SandwichingConfig(
    thresholds=tuple(0.25 * i for i in range(17)),
    degrees=tuple(range(2, 41, 2)),
    grid_points=5001,
    refine=20,
    ratio_targets=(30.0, 10.0, 3.0, 1.0),
    cf_thresholds=tuple(0.25 * i for i in range(41)),
    cf_max_degree=10_000,
)
FULL_MOMENT_TESTER = MomentTesterConfig(
    d=20,
    degree=4,
    n=1_000_000,
    check_reps=1000,
    score_reps=200,
    alt_reps=200,
    sample_sizes=(10_000, 100_000, 1_000_000),
    null_reps_small=1000,
)
# The learner's L1 regression is one linear program with n rows and C(d + k, k) columns (HiGHS);
# d = 10, degree 3 (286 features) at n = 20,000 is the largest size it solves in minutes.
FULL_TESTER_LEARNER = TesterLearnerConfig(
    d=10,
    n=20_000,
    n_test=1_000_000,
    thresholds=(0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5),
    degrees=(1, 2, 3),
    null_reps=1000,
    seeds=20,
    soundness_reps=20,
    cost_dims=(2, 5, 10, 20, 50),
    cost_degrees=(2, 3, 4, 5, 6),
    cost_n=100_000,
    cost_max_features=2_000_000,
)

# smoke: the full profile's code with every size cut to seconds on one CPU thread
PROFILES: dict[str, dict[str, Any]] = {
    "01_sandwiching": {
        "reduced": SandwichingConfig(),
        "full": FULL_SANDWICHING,
        "smoke": replace(
            FULL_SANDWICHING,
            thresholds=(0.0, 2.0),
            degrees=(2, 4, 8),
            grid_points=1001,
            refine=8,
            cf_thresholds=tuple(0.5 * i for i in range(11)),
            cf_max_degree=2000,
            example_degrees=(4, 8),
        ),
    },
    "02_moment_tester": {
        "reduced": MomentTesterConfig(),
        "full": FULL_MOMENT_TESTER,
        "smoke": replace(
            FULL_MOMENT_TESTER,
            d=3,
            n=2000,
            check_reps=20,
            score_reps=8,
            alt_reps=4,
            sample_sizes=(500, 2000),
            null_reps_small=20,
        ),
    },
    "03_tester_learner": {
        "reduced": TesterLearnerConfig(),
        "full": FULL_TESTER_LEARNER,
        "smoke": replace(
            FULL_TESTER_LEARNER,
            d=3,
            n=300,
            n_test=2000,
            thresholds=(0.0, 1.0, 2.0),
            null_reps=20,
            seeds=2,
            soundness_reps=1,
            cost_dims=(2, 5),
            cost_degrees=(2, 3),
            cost_n=500,
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, an estimate (the full profile has not been run): NumPy and SciPy LPs sized for a many-core
# CPU (estimated).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.1),
    "full": Resources(gpus=0, cpus=16, mem_gb=32, hours=2.0),
}
