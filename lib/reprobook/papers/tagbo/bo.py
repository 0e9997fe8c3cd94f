"""Models, acquisition and the benchmark harness of chapter 09.

Every GP method is a botorch ``SingleTaskGP`` (or ``MixedSingleTaskGP``, the overlap baseline)
with a standardised outcome, botorch's default likelihood and a scaled covariance; all are fitted
by marginal likelihood with the same optimiser and iteration cap, and all maximise log expected
improvement (``qLogExpectedImprovement``, q = 1) with the same settings. Only the covariance (or,
for "tier_mean", the mean) differs between methods:

========== ==================================================================
random     no model: a uniformly random unevaluated point
overlap    ``MixedSingleTaskGP``: botorch's categorical (overlap) kernel
cocabo     overlap per variable, averaged, CoCaBO's mixture with the Matern
descriptor eq. `tagbo-mix` with w = 0: descriptors only (EDBO-like)
tier_mean  descriptor kernel plus the tiers as prior mean (eq. `tagbo-tiermean`)
graph      eq. `tagbo-mix` with w = 1: the tier graph only
tagbo      eq. `tagbo-mix` with w, beta (and lambda) learned
========== ==================================================================

On a lookup pool the acquisition is maximised exhaustively (``optimize_acqf_discrete``) over
the rows not yet evaluated, in an order shuffled by the run's seed so that ties are broken at
random. Fits and argmaxes run on one BLAS thread (``threadpool_limits(1)``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP, SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from botorch.optim import optimize_acqf_discrete
from gpytorch.kernels import ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood
from threadpoolctl import threadpool_limits

from reprobook.core import checks

from .kernels import TaskAwareKernel, TierMean

__all__ = [
    "METHODS",
    "Space",
    "build_model",
    "fit",
    "carry_over",
    "initial_design",
    "propose_discrete",
    "run_lookup",
    "normalized_best",
]

METHODS = ("random", "overlap", "cocabo", "descriptor", "tier_mean", "graph", "tagbo")
PRIOR_METHODS = ("tier_mean", "graph", "tagbo")  # the methods that read the tier prior


@dataclass(frozen=True)
class Space:
    """A design space: categorical columns ``cat_dims`` with their descriptor Grams, and
    continuous columns ``cont_dims`` in [0, 1]."""

    cat_dims: tuple[int, ...]
    desc_grams: tuple[np.ndarray, ...] = field(repr=False)
    cont_dims: tuple[int, ...] = ()

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(g.shape[0] for g in self.desc_grams)

    @property
    def dim(self) -> int:
        return len(self.cat_dims) + len(self.cont_dims)


def build_model(method: str, X: torch.Tensor, Y: torch.Tensor, space: Space, tiers=None):
    """The GP of ``method`` on data (X: (n, d) float64, level indices in the categorical
    columns; Y: (n, 1)); ``tiers`` (one array per categorical variable) for the prior methods."""
    checks.choice(method, "method", METHODS[1:])
    if method in PRIOR_METHODS and tiers is None:
        raise checks.InputError(f"method {method!r} reads a tier prior: pass tiers")
    kw = dict(outcome_transform=Standardize(m=1))
    if method == "overlap":
        return MixedSingleTaskGP(X, Y, cat_dims=list(space.cat_dims), **kw)
    cat, cont = space.cat_dims, space.cont_dims
    if method == "cocabo":
        eye = [np.eye(n) for n in space.sizes]
        k = TaskAwareKernel(cat, eye, None, cont, w=0.0, combine="mean")
    elif method in ("descriptor", "tier_mean"):
        k = TaskAwareKernel(cat, space.desc_grams, None, cont, w=0.0)
    else:
        w = 1.0 if method == "graph" else "learn"
        k = TaskAwareKernel(cat, space.desc_grams, tiers, cont, w=w)
    mean = TierMean(cat, tiers) if method == "tier_mean" else None
    return SingleTaskGP(X, Y, covar_module=ScaleKernel(k), mean_module=mean, **kw)


def carry_over(old, new):
    """Start ``new`` from ``old``'s hyper-parameters (covariance, likelihood, mean); the data,
    and so the outcome standardisation, stay ``new``'s own."""
    for name in ("covar_module", "likelihood", "mean_module"):
        getattr(new, name).load_state_dict(getattr(old, name).state_dict())
    return new


def fit(model, maxiter: int = 50):
    """Marginal-likelihood fit (L-BFGS-B through botorch, at most ``maxiter`` iterations)."""
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": int(maxiter)}})
    return model.eval()


def initial_design(n_pool: int, n_init: int, seed: int, replicate: int) -> np.ndarray:
    """The ``n_init`` distinct rows every method starts from in (seed, replicate)."""
    rng = np.random.default_rng([seed, replicate, 0])
    return rng.choice(n_pool, size=n_init, replace=False)


def propose_discrete(model, best_f: float, choices: torch.Tensor, rng) -> int:
    """Index (into ``choices``) of the row that maximises qLogEI, ties broken at random."""
    rng = checks.generator(rng)
    order = torch.as_tensor(rng.permutation(len(choices)))
    acq = qLogExpectedImprovement(model, best_f=best_f)
    cand, _ = optimize_acqf_discrete(acq, q=1, choices=choices[order])
    hit = torch.nonzero((choices[order] == cand).all(-1)).flatten()[0]
    return int(order[hit])


def run_lookup(
    X_pool,
    y_pool,
    space: Space,
    method: str,
    tiers: Sequence[np.ndarray] | None = None,
    n_init: int = 5,
    n_iter: int = 20,
    seed: int = 0,
    replicate: int = 0,
    maxiter: int = 50,
    refit_every: int = 1,
) -> np.ndarray:
    """One BO run on a lookup pool: the yields in the order evaluated, (n_init + n_iter,).

    Hyper-parameters are fitted at the first step and every ``refit_every`` steps after,
    each fit starting from the previous one; in between the model takes the new data with
    the last fitted hyper-parameters (the same schedule for every method)."""
    refit_every = checks.integer(refit_every, "refit_every", minimum=1)
    checks.choice(method, "method", METHODS)
    Xp = torch.as_tensor(np.asarray(X_pool, dtype=float))
    y = checks.array(y_pool, "y_pool", ndim=1)
    n_iter = checks.integer(n_iter, "n_iter", minimum=0, maximum=len(y) - n_init)
    picked = list(initial_design(len(y), n_init, seed, replicate))
    rng = np.random.default_rng([seed, replicate, 1 + METHODS.index(method)])
    model = None
    with threadpool_limits(1):
        for step in range(n_iter):
            rest = np.setdiff1d(np.arange(len(y)), picked)
            if method == "random":
                picked.append(int(rng.choice(rest)))
                continue
            Y = torch.as_tensor(y[picked], dtype=torch.float64).unsqueeze(-1)
            new = build_model(method, Xp[picked], Y, space, tiers)
            if model is not None:
                new = carry_over(model, new)
            model = fit(new, maxiter) if step % refit_every == 0 else new.eval()
            picked.append(int(rest[propose_discrete(model, float(Y.max()), Xp[rest], rng)]))
    return y[np.array(picked)]


def normalized_best(trace, optimum: float) -> np.ndarray:
    """Best-so-far divided by the optimum, after each evaluation."""
    t = checks.array(trace, "trace", ndim=1)
    return np.maximum.accumulate(t) / checks.real(optimum, "optimum", above=0)
