"""Synthetic data for the chapter on testable learning of halfspaces under Massart noise.

Paper: "Testable Learning of General Halfspaces under Massart Noise", Diakonikolas, Iakovidis,
Kane and Liu, arXiv 2602.22300. The paper is theoretical and has no data; only its abstract was
read. Everything here is our reconstruction of the setting the abstract describes:

* marginals (:func:`sample_marginal`): the standard Gaussian N(0, I_d), for which the tester must
  accept (completeness), and standardised non-Gaussian laws (uniform cube, Laplace, Student t,
  a bimodal mixture, a Gaussian with a slab removed, and the 3-node Gauss-Hermite product grid)
  on which a moment tester is to be tried. Each has mean 0 and covariance I_d.
* the target, a general (biased) halfspace f(x) = sign(w . x - t), ||w|| = 1, sign(0) := +1
  (:func:`halfspace`, :class:`Halfspace`); its bias is gamma = Phi(-|t|) under N(0, I_d).
* Massart noise (:func:`massart_labels`): y = f(x) flipped independently with probability
  eta(x) <= eta_max < 1/2. The noise models depend on x only through the margin z = w . x - t:
  :func:`boundary_band` (the hard case near the boundary), :func:`random_flips` (constant eta, the
  easy control) and :func:`minority_side` (all the noise on the smaller side: the case that makes
  the constant hypothesis look best). Because eta < 1/2 everywhere, f is Bayes optimal and
  opt = err(f) = E[eta(x)] (eq. `massart-noise` of notebooks/05_testable_massart/index.md).
* :func:`massart_problem` puts these together into a :class:`Problem`.

Every random function takes ``rng`` (a ``numpy.random.Generator`` or an integer seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, stats

from reprobook.core import checks
from reprobook.core.rng import as_generator

from .sandwich import bias  # gamma = Phi(-|t|): one definition for the chapter

__all__ = [
    "MARGINALS",
    "sample_marginal",
    "Halfspace",
    "halfspace",
    "random_direction",
    "bias",
    "MassartNoise",
    "BoundaryBand",
    "RandomFlips",
    "MinoritySide",
    "boundary_band",
    "random_flips",
    "minority_side",
    "noise_models",
    "massart_labels",
    "population_opt",
    "positive_rate",
    "Problem",
    "massart_problem",
]

MARGINALS: tuple[str, ...] = (
    "gaussian",
    "uniform",
    "laplace",
    "student_t",
    "mixture",
    "slab_removed",
    "gauss_hermite",
)

# the keyword parameters each marginal accepts, with their defaults
_MARGINAL_PARAMS: dict[str, dict[str, Any]] = {
    "gaussian": {},
    "uniform": {},
    "laplace": {},
    "student_t": {"df": 8.0},
    "mixture": {"mu": 1.0, "s": 0.6},
    "slab_removed": {"a": 0.3},
    "gauss_hermite": {"n_nodes": 3},
}


# --- checks -----------------------------------------------------------------------------------


def _check_eta(value: Any, name: str) -> float:
    """A Massart flip probability: in [0, 1/2), so that the target stays Bayes optimal."""
    return checks.real(value, name, minimum=0, below=0.5)


# --- marginals --------------------------------------------------------------------------------


def _slab_removed_coordinate(n: int, a: float, rng: np.random.Generator) -> np.ndarray:
    """x ~ N(0, 1) conditioned on |x| >= a, divided by its standard deviation.

    Drawn by rejection (about 1 / P[|z| >= a] draws per sample).
    E[x^2 | |x| >= a] = 1 + a phi(a) / Phi(-a) (integrate x^2 phi(x) by parts on [a, inf)), so
    the rescaled coordinate has variance 1;
    the mean is 0 by symmetry.
    """
    out = np.empty(0)
    keep_rate = 2.0 * stats.norm.sf(a)
    while out.size < n:
        need = n - out.size
        z = rng.standard_normal(int(need / keep_rate * 1.1) + 16)
        out = np.concatenate([out, z[np.abs(z) >= a][:need]])
    var = 1.0 + a * stats.norm.pdf(a) / stats.norm.sf(a)
    return out / math.sqrt(var)


def sample_marginal(
    name: str, n: int, d: int, rng: np.random.Generator | int, **params: Any
) -> np.ndarray:
    """n i.i.d. draws (n, d) from the named marginal; every coordinate has mean 0 and variance 1.

    The coordinates are independent; only "slab_removed" treats the first one differently.

    * "gaussian": x ~ N(0, I_d).
    * "uniform": x_j ~ U[-sqrt 3, sqrt 3] (the cube; variance 3 / 3 = 1).
    * "laplace": x_j ~ Laplace(0, 1 / sqrt 2) (variance 2 b^2 = 1).
    * "student_t": x_j = T sqrt((df - 2) / df), T ~ t_df (variance df / (df - 2) before scaling);
      ``df`` > 2, default 8.
    * "mixture": x_j = (s_j mu + s z) / sqrt(mu^2 + s^2), s_j = +-1 with probability 1/2,
      z ~ N(0, 1); a two-component Gaussian mixture, visibly bimodal at the defaults ``mu`` = 1,
      ``s`` = 0.6.
    * "slab_removed": x_1 ~ N(0, 1) conditioned on |x_1| >= a (by rejection; ``a`` = 0.3), then
      divided by sqrt(1 + a phi(a) / Phi(-a)); x_2..x_d ~ N(0, 1).
    * "gauss_hermite": x_j drawn from the ``n_nodes``-point probabilists' Gauss-Hermite rule
      (atoms with their weights; default 3 nodes: 0 with weight 2/3 and +-sqrt 3 with 1/6 each).
      Independent coordinates give exactly the d-fold product rule of
      ``hermite.gauss_hermite_product(d, n_nodes)`` without listing its n_nodes^d atoms: it matches
      every N(0, I_d) moment of degree <= 2 n_nodes - 1 in each coordinate.
    """
    if name not in MARGINALS:
        raise ValueError(f"unknown marginal {name!r}; allowed: {', '.join(MARGINALS)}")
    n = checks.integer(n, "n", minimum=1)
    d = checks.integer(d, "d", minimum=1)
    allowed = _MARGINAL_PARAMS[name]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        hint = ", ".join(allowed) if allowed else "none"
        raise ValueError(f"marginal {name!r} takes no parameter(s) {unknown}; allowed: {hint}")
    p = {**allowed, **params}
    gen = as_generator(rng)

    if name == "gaussian":
        return gen.standard_normal((n, d))
    if name == "uniform":
        return gen.uniform(-math.sqrt(3.0), math.sqrt(3.0), size=(n, d))
    if name == "laplace":
        return gen.laplace(0.0, 1.0 / math.sqrt(2.0), size=(n, d))
    if name == "student_t":
        df = checks.real(p["df"], "df", above=2)  # a finite variance
        return gen.standard_t(df, size=(n, d)) * math.sqrt((df - 2.0) / df)
    if name == "mixture":
        mu = checks.real(p["mu"], "mu", minimum=0)
        s = checks.real(p["s"], "s", above=0)
        centres = mu * gen.choice(np.array([-1.0, 1.0]), size=(n, d))
        return (centres + s * gen.standard_normal((n, d))) / math.sqrt(mu * mu + s * s)
    if name == "slab_removed":
        a = checks.real(p["a"], "a", minimum=0, maximum=3)  # the slab |x_1| < a is removed
        X = gen.standard_normal((n, d))
        X[:, 0] = _slab_removed_coordinate(n, a, gen)
        return X
    # gauss_hermite
    n_nodes = checks.integer(p["n_nodes"], "n_nodes", minimum=1)
    from . import hermite  # written alongside this module; imported here to keep data usable alone

    atoms, weights = hermite.gauss_hermite_product(1, n_nodes)
    nodes = np.asarray(atoms, dtype=float)[:, 0]
    weights = np.asarray(weights, dtype=float)
    idx = gen.choice(nodes.size, size=(n, d), p=weights / weights.sum())
    return nodes[idx]


# --- halfspaces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Halfspace:
    """f(x) = sign(w . x - t) with sign(0) := +1; ``w`` is a unit vector (d,).

    It has ``predict`` like the learners, so ``learners.error(target, X, y)`` is the error of
    the Bayes-optimal classifier.
    """

    w: np.ndarray
    t: float

    @property
    def d(self) -> int:
        return int(self.w.size)

    @property
    def gamma(self) -> float:
        """Phi(-|t|): the mass of the smaller side under N(0, I_d)."""
        return bias(self.t)

    def margin(self, X: ArrayLike) -> np.ndarray:
        """z = X w - t, shape (n,)."""
        return checks.array(X, "X", shape=(None, self.d), what="(n, d)") @ self.w - self.t

    def predict(self, X: ArrayLike) -> np.ndarray:
        """sign(X w - t) in {-1, +1} (int, shape (n,)); a point on the boundary gets +1."""
        return np.where(self.margin(X) >= 0, 1, -1)

    __call__ = predict


def halfspace(w: ArrayLike, t: float) -> Halfspace:
    """The halfspace sign(w . x - t); ``w`` (d,) is normalised to unit length."""
    w = checks.array(w, "w", ndim=1, what="(d,)")
    norm = float(np.linalg.norm(w))
    if w.size == 0 or not math.isfinite(norm) or norm == 0:
        raise checks.InputError(f"w (d,) must be non-empty and non-zero, got {w!r}")
    w = w / norm
    w.setflags(write=False)
    return Halfspace(w, checks.real(t, "t"))


def random_direction(d: int, rng: np.random.Generator | int) -> np.ndarray:
    """A uniformly random unit vector in R^d: g / ||g||, g ~ N(0, I_d)."""
    d = checks.integer(d, "d", minimum=1)
    g = as_generator(rng).standard_normal(d)
    return g / np.linalg.norm(g)


# --- Massart noise ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MassartNoise:
    """A Massart noise model: the flip probability eta as a function of the margin z = w . x - t.

    Subclasses implement ``eta(z, t)`` (the threshold t tells them which side is the smaller one)
    and keep ``eta_max`` < 1/2, the bound the Massart model promises. ``breakpoints(t)`` lists the
    margins where eta jumps (for numerical integration).
    """

    eta_max: float

    name = "massart"

    def eta(self, z: np.ndarray, t: float) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def breakpoints(self, t: float) -> tuple[float, ...]:
        return ()

    def __call__(self, z: np.ndarray, t: float) -> np.ndarray:
        return self.eta(np.asarray(z, dtype=float), float(t))


@dataclass(frozen=True)
class BoundaryBand(MassartNoise):
    """eta(z) = eta_max if |z| < width, else eta_low (z = w . x - t)."""

    width: float = 0.5
    eta_low: float = 0.05
    name = "boundary_band"

    def eta(self, z: np.ndarray, t: float) -> np.ndarray:
        return np.where(np.abs(z) < self.width, self.eta_max, self.eta_low)

    def breakpoints(self, t: float) -> tuple[float, ...]:
        return (-self.width, self.width)


@dataclass(frozen=True)
class RandomFlips(MassartNoise):
    """eta(z) = eta_max everywhere (random classification noise: the easy control)."""

    name = "random_flips"

    def eta(self, z: np.ndarray, t: float) -> np.ndarray:
        return np.full(np.shape(z), self.eta_max)


@dataclass(frozen=True)
class MinoritySide(MassartNoise):
    """eta = eta_max on the smaller side of the halfspace, 0 on the larger side.

    The smaller side under N(0, I_d) is {z >= 0} (label +1, mass Phi(-t)) when t >= 0 and {z < 0}
    (label -1, mass Phi(t)) when t < 0; at t = 0 both have mass 1/2 and we take the +1 side.
    Then opt = E[eta] = gamma eta_max with gamma = Phi(-|t|), and the noisy labels' minority rate
    is gamma (1 - eta_max): the constant hypothesis's excess error shrinks to gamma (1 - 2 eta_max).
    """

    name = "minority_side"

    def eta(self, z: np.ndarray, t: float) -> np.ndarray:
        on_small_side = (z >= 0) if t >= 0 else (z < 0)
        return np.where(on_small_side, self.eta_max, 0.0)

    def breakpoints(self, t: float) -> tuple[float, ...]:
        return (0.0,)


def boundary_band(eta_max: float = 0.4, width: float = 0.5, eta_low: float = 0.05) -> BoundaryBand:
    """eta(x) = eta_max when |w . x - t| < width, else eta_low (both < 1/2).

    The defaults are the chapter's standard case: 0.4 within 0.5 of the boundary, 0.05 elsewhere.
    """
    eta_max = _check_eta(eta_max, "eta_max")
    eta_low = _check_eta(eta_low, "eta_low")
    width = checks.real(width, "width", minimum=0)
    return BoundaryBand(eta_max=eta_max, width=width, eta_low=eta_low)


def random_flips(eta: float) -> RandomFlips:
    """eta(x) = eta for every x, 0 <= eta < 1/2."""
    return RandomFlips(eta_max=_check_eta(eta, "eta"))


def minority_side(eta_max: float = 0.4) -> MinoritySide:
    """eta(x) = eta_max on the smaller side of sign(w . x - t), 0 on the larger side."""
    return MinoritySide(eta_max=_check_eta(eta_max, "eta_max"))


def noise_models(cfg) -> dict[str, MassartNoise]:
    """The noise models that ``cfg.noises`` names (``cfg`` a
    :class:`~.config.TesterLearnerConfig`), in the order boundary band, minority side, random
    flips: ``cfg.eta_max`` within ``cfg.band`` of the boundary and ``cfg.eta_low`` elsewhere;
    ``cfg.eta_max`` on the minority side; ``cfg.flip_eta`` everywhere."""
    models = {
        "boundary_band": boundary_band(cfg.eta_max, cfg.band, cfg.eta_low),
        "minority_side": minority_side(cfg.eta_max),
        "random_flips": random_flips(cfg.flip_eta),
    }
    return {k: v for k, v in models.items() if k in cfg.noises}


def massart_labels(
    X: ArrayLike,
    w: ArrayLike,
    t: float,
    eta_fn: Callable[[np.ndarray, float], np.ndarray],
    rng: np.random.Generator | int,
) -> tuple[np.ndarray, np.ndarray]:
    """Massart labels: y_i = -f(x_i) with probability eta_i = eta_fn(w . x_i - t, t), else f(x_i).

    Implements eq. `massart-noise` of notebooks/05_testable_massart/index.md.

    f(x) = sign(w . x - t) (sign(0) = +1, ``w`` normalised). ``eta_fn`` is a noise model from this
    module or any function of (margins (n,), t) returning probabilities in [0, 1/2); values
    outside that range raise. Returns (y (n,) int in {-1, +1}, eta (n,) float).
    """
    h = halfspace(w, t)
    z = h.margin(X)
    if not callable(eta_fn):
        raise ValueError(
            f"eta_fn must be a noise model or a function (z, t) -> eta, got {eta_fn!r}"
        )
    eta = np.asarray(eta_fn(z, h.t), dtype=float)
    if eta.shape != z.shape:
        eta = np.broadcast_to(eta, z.shape).astype(float)
    if eta.size and not (np.all(np.isfinite(eta)) and eta.min() >= 0.0 and eta.max() < 0.5):
        raise ValueError(
            f"eta_fn returned flip probabilities in [{eta.min():.3g}, {eta.max():.3g}];"
            " Massart noise needs every eta(x) in [0, 1/2)"
        )
    gen = as_generator(rng)
    f = np.where(z >= 0, 1, -1)
    flip = gen.random(z.shape) < eta
    return np.where(flip, -f, f), eta


def _gaussian_projection_mean(g: Callable[[float], float], cuts: list[float]) -> float:
    """E[g(z)] for z ~ N(0, 1) by scipy.integrate.quad, split at the points where g jumps."""
    edges = [-np.inf, *sorted(set(cuts)), np.inf]
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi > lo:
            val, _ = integrate.quad(
                lambda z: g(z) * stats.norm.pdf(z), lo, hi, epsabs=1e-13, epsrel=1e-11, limit=200
            )
            total += val
    return float(total)


def _eta_scalar(noise: Callable[[np.ndarray, float], np.ndarray], margin: float, t: float) -> float:
    return float(np.asarray(noise(np.asarray([margin]), t), dtype=float).reshape(-1)[0])


def _cuts(noise: Any, t: float) -> list[float]:
    """Projections w . x where the labels or eta jump: t and t + each breakpoint of the noise."""
    extra = noise.breakpoints(t) if hasattr(noise, "breakpoints") else ()
    return [t, *(t + float(b) for b in extra)]


def population_opt(t: float, noise: Callable[[np.ndarray, float], np.ndarray]) -> float:
    """opt = E_{x ~ N(0, I_d)}[eta(w . x - t)] = E_{z ~ N(0, 1)}[eta(z - t)] (independent of d
    and w). Implements the opt of eq. `massart-noise` of notebooks/05_testable_massart/index.md.

    Closed forms: random_flips(eta): eta; minority_side(eta_max): gamma eta_max with
    gamma = Phi(-|t|). Otherwise (boundary_band, any function of the margin) by quadrature over
    the projection z = w . x ~ N(0, 1), split where eta jumps.
    """
    t = checks.real(t, "t")
    if isinstance(noise, RandomFlips):
        return noise.eta_max
    if isinstance(noise, MinoritySide):
        return bias(t) * noise.eta_max
    if not callable(noise):
        raise ValueError(f"noise must be a noise model or a function (z, t) -> eta, got {noise!r}")
    return _gaussian_projection_mean(lambda z: _eta_scalar(noise, z - t, t), _cuts(noise, t))


def positive_rate(t: float, noise: Callable[[np.ndarray, float], np.ndarray]) -> float:
    """P[y = +1] for x ~ N(0, I_d) and Massart labels of sign(w . x - t):

        P[y = +1] = E_z[1{z >= t} (1 - eta(z - t)) + 1{z < t} eta(z - t)],   z ~ N(0, 1).

    Closed forms with q = P[f = +1] = Phi(-t): random_flips(eta): q (1 - eta) + (1 - q) eta;
    minority_side(eta_max): q (1 - eta_max) when t >= 0 (the noise sits on the +1 side) and
    q + (1 - q) eta_max when t < 0 (it sits on the -1 side). Otherwise by quadrature.
    """
    t = checks.real(t, "t")
    q = float(stats.norm.sf(t))
    if isinstance(noise, RandomFlips):
        return q * (1.0 - noise.eta_max) + (1.0 - q) * noise.eta_max
    if isinstance(noise, MinoritySide):
        return q * (1.0 - noise.eta_max) if t >= 0 else q + (1.0 - q) * noise.eta_max
    if not callable(noise):
        raise ValueError(f"noise must be a noise model or a function (z, t) -> eta, got {noise!r}")

    def g(z: float) -> float:
        eta = _eta_scalar(noise, z - t, t)
        return 1.0 - eta if z >= t else eta

    return _gaussian_projection_mean(g, _cuts(noise, t))


@dataclass(frozen=True)
class Problem:
    """A Massart sample: X (n, d), noisy labels y (n,), flip probabilities eta (n,), the target
    (w, t), opt = mean(eta) (the Bayes error on this sample, in expectation over the labels),
    and for convenience the clean labels f (n,), the noise model and the marginal's name."""

    X: np.ndarray
    y: np.ndarray
    eta: np.ndarray
    w: np.ndarray
    t: float
    opt: float
    f: np.ndarray = field(repr=False)
    noise: Any = None
    marginal: str = "gaussian"

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def gamma(self) -> float:
        """Phi(-|t|), the Gaussian bias of the target."""
        return bias(self.t)

    @property
    def target(self) -> Halfspace:
        return halfspace(self.w, self.t)


def massart_problem(
    n: int,
    d: int,
    t: float,
    noise: Callable[[np.ndarray, float], np.ndarray],
    rng: np.random.Generator | int,
    marginal: str = "gaussian",
    *,
    w: ArrayLike | None = None,
    marginal_params: dict[str, Any] | None = None,
) -> Problem:
    """X ~ marginal (n, d); y = Massart labels of sign(w . x - t) under ``noise``; opt = mean(eta).

    ``w`` defaults to a random unit vector drawn from ``rng`` first; pass the training problem's
    ``w`` to draw a test set for the same target.
    """
    n = checks.integer(n, "n", minimum=1)
    d = checks.integer(d, "d", minimum=1)
    gen = as_generator(rng)
    if w is None:
        w = random_direction(d, gen)
    h = halfspace(w, t)
    checks.array(h.w, "w", shape=(d,), what="(d,)")
    X = sample_marginal(marginal, n, d, gen, **(marginal_params or {}))
    y, eta = massart_labels(X, h.w, h.t, noise, gen)
    f = h.predict(X)
    return Problem(
        X=X, y=y, eta=eta, w=h.w, t=h.t, opt=float(eta.mean()), f=f, noise=noise, marginal=marginal
    )
