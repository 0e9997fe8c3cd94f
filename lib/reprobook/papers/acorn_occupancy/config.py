"""Profiles of the notebooks of the ACORN chapter (active continuous-score occupancy modelling).

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (NeurIPS 2026; only the abstract
was available). The chapter is a simulation study of our reconstruction.

Notebooks (``PROFILES`` is keyed by their file stems): ``01_scores_or_thresholds`` (C2),
``02_which_to_review`` (C1, C3, C4), ``03_does_it_hold_up`` (C5, with the Laplace-against-NUTS
check). The seed is a notebook parameter; survey j of a study is drawn from
``default_rng([seed, j])``. Every claim is a fraction of surveys decided on an interval over
them, so the reduced profile spends its time on surveys: 20 per study, with 128 Laplace draws
per ACORN acquisition, and budgets only as far as a claim reads them (C3's two policies and all
of ``03_does_it_hold_up`` stop at 5%).

Real data cannot be had for the full profile. The paper's camera-trap and bioacoustic datasets
are not named in the abstract; candidate public collections (LILA camera traps, BirdSet) carry
species labels but no classifier scores, and the classifiers that would score them (MegaDetector
or SpeciesNet, BirdNET, Perch) cannot be downloaded on the book's machines. The full profile is
therefore a larger simulation: N = 500 sites, K = 100 units, 20 seeds, budgets up to
20%, NUTS with 4 chains. Its acquisitions are NumPy on the host CPU (not ported to the GPU); with
rounds of 500 units and 1,000 draws we estimate several hours on 16 cores. Rounds of 50
(200 rounds per run) would take days, so the rounds are larger than that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core import checks
from reprobook.core.resources import Resources

from .simulate import PRESETS, Preset

__all__ = ["ScoresConfig", "ReviewConfig", "RobustnessConfig", "PROFILES", "preset"]


def preset(name: str, n_sites: int | None = None, n_units: int | None = None) -> Preset:
    """The simulation preset ``name`` (see simulate.PRESETS), optionally resized."""
    p = PRESETS[checks.choice(name, "preset", sorted(PRESETS))]
    return replace(
        p,
        n_sites=p.n_sites if n_sites is None else n_sites,
        n_units=p.n_units if n_units is None else n_units,
    )


@dataclass(frozen=True)
class ScoresConfig:
    """C2: the CSOM against thresholded detections, with no reviews."""

    # regimes; the last is misspecified
    presets: tuple[str, ...] = ("camera", "bioacoustic", "bioacoustic_t")
    reps: int = 50  # simulated surveys per preset
    thresholds: tuple[float, ...] = (0.5, 0.8, 0.95)  # probability thresholds on expit(score)
    n_boot: int = 2000  # bootstrap resamples of the surveys for C2's interval
    n_sites: int | None = None  # None keeps the preset's N
    n_units: int | None = None  # None keeps the preset's K


@dataclass(frozen=True)
class ReviewConfig:
    """C1, C3, C4: every review policy on the bioacoustic preset (where reviews matter: with no
    reviews the CSOM is off the full-label fit by up to a few tolerances; on the camera-trap
    preset it is within a few hundredths of one)."""

    preset: str = "bioacoustic"  # simulation preset
    reps: int = 20  # simulated surveys (seeds); every policy sees the same ones
    budget_frac: float = 0.10  # largest review budget, as a fraction of the units
    batch_frac: float = 0.01  # units reviewed per round, as a fraction of the units (60 here)
    small_frac: float = 0.05  # "small budget" for C1 and C3; C4's early half (0, small_frac]
    late_frac: float = 0.10  # the end of C4's late half (small_frac, late_frac]
    # site_top: full only
    policies: tuple[str, ...] = ("random", "top_score", "uncertainty", "acorn", "acorn_beta1")
    # policies run only to small_frac (C3 reads no more)
    short: tuple[str, ...] = ("uncertainty", "acorn_beta1")
    n_draws: int = 128  # Laplace draws per ACORN acquisition
    n_sites: int | None = None
    n_units: int | None = None


@dataclass(frozen=True)
class RobustnessConfig:
    """C5: the camera-trap regime and heavy-tailed (misspecified) bioacoustic scores; Laplace
    against NUTS."""

    presets: tuple[str, ...] = ("camera", "bioacoustic_t")  # the regimes of C5
    reps: int = 20  # simulated surveys per regime
    budget_frac: float = 0.05  # largest review budget (C5 scores the budgets up to small_frac)
    batch_frac: float = 0.01  # units reviewed per round, as a fraction of the units
    small_frac: float = 0.05  # C5's "small budget"
    policies: tuple[str, ...] = ("random", "top_score", "acorn")
    n_draws: int = 128  # Laplace draws per ACORN acquisition
    # where Laplace is checked against NUTS
    nuts_presets: tuple[str, ...] = ("camera", "bioacoustic")
    nuts_review_frac: float = 0.02  # random reviews before the NUTS check
    nuts_warmup: int = 500
    nuts_samples: int = 500
    nuts_chains: int = 1
    n_sites: int | None = None
    n_units: int | None = None


# Wall time of each notebook at the reduced sizes, timed by papermill (kernel start included),
# one thread, on 2 cores with other work beside it (2026-12-06): which_to_review 43-45 s,
# does_it_hold_up 38-40 s (73 s and 66 s before the likelihood's log-sigmoids and logaddexp were
# written out over the array namespace). Every refit runs L-BFGS-B from the previous
# round's mode and from the default start (the MAP is the higher of the two modes): 20 surveys
# x 5 policies took 56-58 s against 43 s with the warm start alone, in the same hour. The
# fit with no reviews is made once per survey, not once per policy. The full profile's
# (M, N, K) draw arrays are 400 MB each at M = 1,000 and 50,000 units.
_FULL_SIZE = dict(n_sites=500, n_units=100)
FULL_SCORES = ScoresConfig(
    reps=200, thresholds=(0.3, 0.5, 0.65, 0.8, 0.9, 0.95, 0.99), **_FULL_SIZE
)
FULL_REVIEW = ReviewConfig(
    reps=20,
    budget_frac=0.20,
    n_draws=1000,
    policies=("random", "top_score", "site_top", "uncertainty", "acorn", "acorn_beta1"),
    short=(),
    **_FULL_SIZE,
)
FULL_ROBUSTNESS = RobustnessConfig(
    reps=20,
    budget_frac=0.20,
    n_draws=1000,
    policies=("random", "top_score", "site_top", "uncertainty", "acorn"),
    nuts_warmup=1000,
    nuts_samples=1000,
    nuts_chains=4,
    **_FULL_SIZE,
)
# smoke: the full profile's policies and samplers on 400 units (40 sites x 10), two surveys
# and rounds of 5 % of the units, seconds on one CPU thread
_SMOKE_SIZE = dict(n_sites=40, n_units=10)
PROFILES: dict[str, dict[str, Any]] = {
    "01_scores_or_thresholds": {
        "reduced": ScoresConfig(),
        "full": FULL_SCORES,
        "smoke": replace(FULL_SCORES, reps=3, n_boot=100, **_SMOKE_SIZE),
    },
    "02_which_to_review": {
        "reduced": ReviewConfig(),
        "full": FULL_REVIEW,
        "smoke": replace(FULL_REVIEW, reps=2, batch_frac=0.05, n_draws=32, **_SMOKE_SIZE),
    },
    "03_does_it_hold_up": {
        "reduced": RobustnessConfig(),
        "full": FULL_ROBUSTNESS,
        "smoke": replace(
            FULL_ROBUSTNESS,
            reps=2,
            batch_frac=0.05,
            n_draws=32,
            nuts_warmup=50,
            nuts_samples=50,
            nuts_chains=2,
            **_SMOKE_SIZE,
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, an estimate (the full profile has not been run): NumPy acquisitions on the host: several
# hours on 16 cores by our estimate.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.1),
    "full": Resources(gpus=0, cpus=16, mem_gb=64, hours=6.0),
}
