"""f-divergences used as testing utilities in *Sort, Partition, Randomize* (arXiv 2606.07443).

Paper: "Sort, Partition, Randomize: Optimal Binary Hypothesis Testing under Local Differential
Privacy", arXiv 2606.07443.

The utility of a mechanism is an f-divergence between the two output laws (eq. `spr-fdiv` of
notebooks/18_spr_ldp/index.md),

    D_f(M1 || M0) = sum_y M0(y) f(M1(y) / M0(y)),          f convex, f(1) = 0,

which is a sum over outputs of the *perspective* of f,

    persp_f(p, q) = q f(p / q)       (p = M1(y), q = M0(y)).

The perspective is convex and positively homogeneous; this is what makes staircase mechanisms
optimal (Kairouz, Oh & Viswanath 2014/2016) and what the SPR block decomposition rests on.

Zero masses follow the usual conventions:

    persp_f(0, 0) = 0,
    persp_f(p, 0) = p * f'(inf)     with f'(inf) = lim_{t -> inf} f(t) / t  (may be +inf),
    persp_f(0, q) = q * f(0)        (f(0) may be +inf).

Each divergence below implements its perspective in closed form so that these limits come out
right without division warnings (``scipy.special.rel_entr`` for the KL terms).

The conjugate generator f*(t) = t f(1/t) swaps the arguments: D_{f*}(M1 || M0) = D_f(M0 || M1).
It is how the reverse direction (e.g. the Stein exponent KL(M0 || M1)) is fed to the same code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import rel_entr, xlogy

from reprobook.core import checks

__all__ = [
    "Divergence",
    "DIVERGENCES",
    "TV",
    "KL",
    "REVERSE_KL",
    "CHI2",
    "HELLINGER",
    "hockey_stick",
    "get_divergence",
    "all_divergences",
    "conjugate",
    "f_divergence",
]

_Array = np.ndarray


@dataclass(frozen=True)
class Divergence:
    """One f-divergence: its generator ``f`` and the zero-safe perspective ``q f(p/q)``.

    Attributes:
        name: registry name, e.g. ``"kl"`` or ``"hockey_stick(gamma=2)"``.
        generator: vectorised f(t) on t >= 0 (may return +inf at t = 0).
        persp: vectorised perspective (p, q) -> q f(p/q) on p, q >= 0 with the zero conventions.
        f_prime_inf: f'(inf) = lim f(t)/t, the value of persp(1, 0).
        description: one line for tables and plots.
        params: extra parameters (e.g. ``(("gamma", 2.0),)``); two divergences are equal when their
            names and params are equal.
        conjugate_of: for a divergence made by :func:`conjugate`, the one it was made from.
    """

    name: str
    generator: Callable[[_Array], _Array] = field(compare=False, repr=False)
    persp: Callable[[_Array, _Array], _Array] = field(compare=False, repr=False)
    f_prime_inf: float = field(compare=False)
    description: str = field(default="", compare=False)
    params: tuple[tuple[str, float], ...] = ()
    conjugate_of: Divergence | None = field(default=None, compare=False, repr=False)

    def f(self, t: ArrayLike) -> _Array:
        """The generator f(t), elementwise, for t >= 0."""
        t = np.asarray(t, dtype=float)
        return self.generator(t)

    def perspective(self, p: ArrayLike, q: ArrayLike) -> _Array:
        """q f(p/q) elementwise for p, q >= 0 (broadcast), with the zero conventions above: one
        output's term of eq. `spr-fdiv` of notebooks/18_spr_ldp/index.md."""
        p, q = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(q, dtype=float))
        return self.persp(p, q)

    def __str__(self) -> str:
        return self.name


# --- closed forms of f and of q f(p/q) --------------------------------------------------------


def _tv_f(t: _Array) -> _Array:
    return 0.5 * np.abs(t - 1.0)


def _tv_persp(p: _Array, q: _Array) -> _Array:
    # q |p/q - 1| / 2 = |p - q| / 2
    return 0.5 * np.abs(p - q)


def _kl_f(t: _Array) -> _Array:
    return xlogy(t, t)


def _kl_persp(p: _Array, q: _Array) -> _Array:
    # q (p/q) log(p/q) = p log(p/q); rel_entr gives 0 at p = 0 and +inf at q = 0 < p
    return rel_entr(p, q)


def _rkl_f(t: _Array) -> _Array:
    # -log t, +inf at t = 0; written through rel_entr to avoid a divide-by-zero warning
    return rel_entr(np.ones_like(t), t)


def _rkl_persp(p: _Array, q: _Array) -> _Array:
    # q (-log(p/q)) = q log(q/p); 0 at q = 0, +inf at p = 0 < q
    return rel_entr(q, p)


def _chi2_f(t: _Array) -> _Array:
    return (t - 1.0) ** 2


def _chi2_persp(p: _Array, q: _Array) -> _Array:
    # q (p/q - 1)^2 = (p - q)^2 / q; f'(inf) = +inf so (p > 0, q = 0) -> inf, (0, 0) -> 0
    num = (p - q) ** 2
    pos = q > 0
    safe_q = np.where(pos, q, 1.0)
    return np.where(pos, num / safe_q, np.where(p > 0, np.inf, 0.0))


def _hel_f(t: _Array) -> _Array:
    return (np.sqrt(t) - 1.0) ** 2


def _hel_persp(p: _Array, q: _Array) -> _Array:
    # q (sqrt(p/q) - 1)^2 = (sqrt p - sqrt q)^2, finite everywhere
    return (np.sqrt(p) - np.sqrt(q)) ** 2


TV = Divergence("tv", _tv_f, _tv_persp, 0.5, "total variation, f(t) = |t - 1| / 2")
KL = Divergence("kl", _kl_f, _kl_persp, math.inf, "KL(M1 || M0), f(t) = t log t")
REVERSE_KL = Divergence("reverse_kl", _rkl_f, _rkl_persp, 0.0, "KL(M0 || M1), f(t) = -log t")
CHI2 = Divergence("chi2", _chi2_f, _chi2_persp, math.inf, "chi-squared, f(t) = (t - 1)^2")
HELLINGER = Divergence(
    "hellinger", _hel_f, _hel_persp, 1.0, "squared Hellinger, f(t) = (sqrt t - 1)^2"
)

#: The parameter-free divergences by name.
DIVERGENCES: dict[str, Divergence] = {d.name: d for d in (TV, KL, REVERSE_KL, CHI2, HELLINGER)}


def hockey_stick(gamma: float) -> Divergence:
    """Hockey-stick divergence E_gamma: f(t) = max(t - gamma, 0), gamma >= 1.

    Its perspective is max(p - gamma q, 0). Under eps-LDP every output likelihood ratio is at
    most e^eps, so the optimum is exactly 0 when e^eps <= gamma. gamma = 1 gives total variation.
    """
    gamma = checks.real(gamma, "gamma", minimum=1)

    def f(t: _Array) -> _Array:
        return np.maximum(t - gamma, 0.0)

    def persp(p: _Array, q: _Array) -> _Array:
        return np.maximum(p - gamma * q, 0.0)

    return Divergence(
        f"hockey_stick(gamma={gamma:g})",
        f,
        persp,
        1.0,
        f"hockey-stick E_gamma, f(t) = max(t - {gamma:g}, 0)",
        (("gamma", gamma),),
    )


def all_divergences(gammas: tuple[float, ...] = (2.0,)) -> list[Divergence]:
    """The registry as a list: the five fixed divergences, then ``hockey_stick(g)`` per g."""
    return [*DIVERGENCES.values(), *(hockey_stick(g) for g in gammas)]


_HS_PATTERN = re.compile(r"^hockey_stick\(\s*(?:gamma\s*=\s*)?([^)]+)\)$")


def get_divergence(name_or_obj: str | Divergence) -> Divergence:
    """Look a divergence up by name, or pass a :class:`Divergence` through.

    Valid names: ``tv``, ``kl``, ``reverse_kl``, ``chi2``, ``hellinger`` and
    ``hockey_stick(gamma=G)`` with G >= 1 (also ``hockey_stick(G)``).
    """
    if isinstance(name_or_obj, Divergence):
        return name_or_obj
    if not isinstance(name_or_obj, str):
        raise ValueError(
            f"divergence must be a name or a Divergence, got {type(name_or_obj).__name__}"
        )
    key = name_or_obj.strip().lower()
    if key in DIVERGENCES:
        return DIVERGENCES[key]
    match = _HS_PATTERN.match(key)
    if match:
        try:
            gamma = float(match.group(1))
        except ValueError:
            raise ValueError(f"cannot read gamma in divergence name {name_or_obj!r}") from None
        return hockey_stick(gamma)
    valid = ", ".join([*DIVERGENCES, "hockey_stick(gamma=G) with G >= 1"])
    raise ValueError(f"unknown divergence {name_or_obj!r}; valid names: {valid}")


def conjugate(div: str | Divergence) -> Divergence:
    """The conjugate generator f*(t) = t f(1/t), so that D_{f*}(M1 || M0) = D_f(M0 || M1).

    persp_{f*}(p, q) = persp_f(q, p), f*(t) = persp_f(1, t) and f*'(inf) = f(0). KL and reverse KL
    are each other's conjugates and TV and Hellinger are their own (the registry objects are
    returned); any other divergence gets a new object named ``conjugate(<name>)``, and
    conjugating that returns the original.
    """
    div = get_divergence(div)
    if div.conjugate_of is not None:
        return div.conjugate_of
    if div.name in _SELF_CONJUGATE:
        return div
    if div.name in _CONJUGATE_PAIRS:
        return DIVERGENCES[_CONJUGATE_PAIRS[div.name]]
    base = div

    def f_star(t: _Array) -> _Array:
        return base.persp(*np.broadcast_arrays(np.ones_like(t), t))

    def persp_star(p: _Array, q: _Array) -> _Array:
        return base.persp(q, p)

    return Divergence(
        f"conjugate({base.name})",
        f_star,
        persp_star,
        float(base.persp(np.zeros(1), np.ones(1))[0]),  # f*'(inf) = f(0) = persp_f(0, 1)
        f"reverse direction of {base.name}: D(M0 || M1)",
        base.params,
        base,
    )


_SELF_CONJUGATE = frozenset({"tv", "hellinger"})
_CONJUGATE_PAIRS = {"kl": "reverse_kl", "reverse_kl": "kl"}


def f_divergence(p1: ArrayLike, p0: ArrayLike, div: str | Divergence) -> float:
    """D_f(P1 || P0) = sum_y P0(y) f(P1(y) / P0(y)) with the zero conventions.

    Implements eq. `spr-fdiv` of notebooks/18_spr_ldp/index.md.

    ``p1`` and ``p0`` are non-negative vectors of the same length (normally probability
    vectors). The result may be +inf (e.g. KL when P0(y) = 0 < P1(y)).
    """
    div = get_divergence(div)
    p1 = np.asarray(p1, dtype=float)
    p0 = np.asarray(p0, dtype=float)
    checks.same_shape("p1", p1, "p0", p0)
    if np.any(p1 < 0) or np.any(p0 < 0):
        raise ValueError("p1 and p0 must be non-negative")
    return float(np.sum(div.perspective(p1, p0)))
