"""Simulated surveys for the continuous-score occupancy model (CSOM) of the ACORN chapter.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (NeurIPS 2026; only the abstract is
known). The observation model is the CSOM of Rhinehart et al. (2022, Methods Ecol. Evol.); the
covariate structure and both presets are ASSUMED (our choices):

    z_i        ~ Bernoulli(psi_i),            logit psi_i   = beta_0 + beta_1 x_i
    y_ik | z_i ~ Bernoulli(z_i theta_ik),     logit theta_ik = alpha_0 + alpha_1 w_ik
    s_ik | y_ik = 1 ~ N(mu_1, sigma_1^2)
    s_ik | y_ik = 0 ~ N(mu_0, sigma_0^2)      (or mu_0 + sigma_0 t_df, the misspecified variant)

x_i is a standardised habitat covariate (sample mean 0, sample sd 1); w_ik ~ N(0, 1) is a unit
covariate (date, time of day, effort). s_ik is the logit of a classifier's confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit

from reprobook.core import checks

__all__ = ["Preset", "Survey", "CAMERA", "BIOACOUSTIC", "PRESETS", "simulate"]

SCORE_FAMILIES = ("normal", "student_t")


@dataclass(frozen=True)
class Preset:
    """The generating parameters of one simulated survey design."""

    n_sites: int  # N, number of sites
    n_units: int  # K, survey units (images, clips) per site
    beta: tuple[float, float]  # (intercept, habitat slope) of logit psi
    alpha: tuple[float, float]  # (intercept, unit-covariate slope) of logit theta
    mu0: float  # mean logit score of absent units
    sigma0: float  # sd (or t scale) of absent-unit scores
    mu1: float  # mean logit score of present units (> mu0)
    sigma1: float  # sd of present-unit scores
    score_family: str = "normal"  # law of s | y = 0: "normal" or "student_t" (misspecification)
    df: float | None = None  # degrees of freedom of the t, only with score_family="student_t"

    def __post_init__(self) -> None:
        checks.integer(self.n_sites, "n_sites", minimum=1)
        checks.integer(self.n_units, "n_units", minimum=1)
        checks.array(self.beta, "beta", shape=(2,), what="(intercept, slope)")
        checks.array(self.alpha, "alpha", shape=(2,), what="(intercept, slope)")
        checks.real(self.sigma0, "sigma0", above=0)
        checks.real(self.sigma1, "sigma1", above=0)
        if not self.mu1 > self.mu0:
            raise checks.InputError(
                f"mu1 must exceed mu0 (label-switching constraint), got mu0={self.mu0}, "
                f"mu1={self.mu1}"
            )
        checks.choice(self.score_family, "score_family", SCORE_FAMILIES)
        if self.score_family == "student_t":
            checks.real(self.df, "df (with score_family='student_t')", above=0)
        elif self.df is not None:
            raise checks.InputError(
                f"df is only used with score_family='student_t', got df={self.df!r} with 'normal'"
            )


# Camera traps: well separated scores (AUROC ~ .99), capture rate ~ 38%.
CAMERA = Preset(
    n_sites=120,
    n_units=20,
    beta=(-0.3, 1.0),
    alpha=(-0.5, 0.4),
    mu0=-2.5,
    sigma0=1.0,
    mu1=1.5,
    sigma1=1.2,
)
# Bioacoustics: overlapping scores (AUROC ~ .85), call rate ~ 8%. beta was not set for this
# preset; the camera preset's beta is reused (ASSUMED).
BIOACOUSTIC = Preset(
    n_sites=100,
    n_units=60,
    beta=(-0.3, 1.0),
    alpha=(-2.5, 0.5),
    mu0=-2.0,
    sigma0=1.0,
    mu1=0.0,
    sigma1=1.5,
)
PRESETS: dict[str, Preset] = {
    "camera": CAMERA,
    "bioacoustic": BIOACOUSTIC,
    # heavier-tailed negatives, to test score-model misspecification (df ASSUMED)
    "bioacoustic_t": replace(BIOACOUSTIC, score_family="student_t", df=4.0),
}


@dataclass(frozen=True, eq=False)
class Survey:
    """One simulated survey: covariates, latent states and the classifier's logit scores."""

    x: np.ndarray  # (N,) standardised habitat covariate
    w: np.ndarray  # (N, K) unit covariate
    z: np.ndarray  # (N,) int, true occupancy
    y: np.ndarray  # (N, K) int, true unit presence; 0 wherever z = 0
    s: np.ndarray  # (N, K) logit scores
    psi: np.ndarray  # (N,) true occupancy probabilities
    theta: np.ndarray  # (N, K) true unit presence probabilities given z = 1
    preset: Preset | None = None  # the generating preset (None for hand-built surveys)

    @property
    def n_sites(self) -> int:
        return int(self.s.shape[0])

    @property
    def n_units(self) -> int:
        return int(self.s.shape[1])

    def site(self, i: int) -> Survey:
        """Site ``i`` alone, as a one-site Survey (arrays are views)."""
        if not 0 <= int(i) < self.n_sites:
            raise IndexError(f"site index {i} out of range for {self.n_sites} sites")
        sl = slice(int(i), int(i) + 1)
        return Survey(
            x=self.x[sl],
            w=self.w[sl],
            z=self.z[sl],
            y=self.y[sl],
            s=self.s[sl],
            psi=self.psi[sl],
            theta=self.theta[sl],
            preset=self.preset,
        )


def simulate(preset: Preset, rng: np.random.Generator) -> Survey:
    """Draw one survey from ``preset`` (model in the module docstring): eq. `acorn-model` of
    notebooks/07_acorn_occupancy/index.md.

    Deterministic given the state of ``rng`` (a ``numpy.random.Generator``); the draws are
    made in a fixed order: x, w, z, y, scores.
    """
    if not isinstance(preset, Preset):
        raise TypeError(f"preset must be a Preset, got {type(preset).__name__}")
    rng = checks.generator(rng)
    n, k = int(preset.n_sites), int(preset.n_units)
    if n < 2:
        raise ValueError("n_sites must be >= 2 to standardise the habitat covariate")
    x = rng.standard_normal(n)
    x = (x - x.mean()) / x.std()
    w = rng.standard_normal((n, k))
    psi = expit(preset.beta[0] + preset.beta[1] * x)  # (N,)
    theta = expit(preset.alpha[0] + preset.alpha[1] * w)  # (N, K)
    z = (rng.random(n) < psi).astype(np.int64)
    y = ((rng.random((n, k)) < theta) & (z[:, None] == 1)).astype(np.int64)
    s1 = preset.mu1 + preset.sigma1 * rng.standard_normal((n, k))
    if preset.score_family == "normal":
        e0 = rng.standard_normal((n, k))
    else:
        e0 = rng.standard_t(preset.df, size=(n, k))
    s0 = preset.mu0 + preset.sigma0 * e0
    s = np.where(y == 1, s1, s0)
    return Survey(x=x, w=w, z=z, y=y, s=s, psi=psi, theta=theta, preset=preset)
