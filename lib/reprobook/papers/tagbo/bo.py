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

On a lookup pool the acquisition is maximised exhaustively over the rows not yet evaluated, in
an order shuffled by the run's seed so that ties are broken at random. Fits and argmaxes run on
one BLAS thread (``threadpool_limits(1)``).

Rounding. Whether a fit succeeds, and which row wins a tie, must not depend on the BLAS kernels
of the reader's CPU. :func:`fit` retries a failed marginal-likelihood fit with a larger Cholesky
jitter and, when every try fails, keeps the hyper-parameters it started from and says so
(``model.fit_failure``; the benchmark loops count these). :func:`best_first` treats acquisition
values that differ by rounding only (``TIE_TOL``, relative) as tied, so that a tie between rows
the model cannot tell apart (levels it has not seen yet, say) goes to the shuffled order, not
to the last bits of a sum.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP, SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from gpytorch.kernels import ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.settings import cholesky_jitter
from linear_operator.utils.errors import NotPSDError
from threadpoolctl import threadpool_limits

from reprobook.core import Failures, checks, tie_groups

from .kernels import TaskAwareKernel, TierMean

__all__ = [
    "METHODS",
    "Space",
    "build_model",
    "fit",
    "best_first",
    "with_jitter",
    "replay",
    "carry_over",
    "initial_design",
    "propose_discrete",
    "run_lookup",
    "normalized_best",
]

METHODS = ("random", "overlap", "cocabo", "descriptor", "tier_mean", "graph", "tagbo")
PRIOR_METHODS = ("tier_mean", "graph", "tagbo")  # the methods that read the tier prior
TIE_TOL = 1e-9  # acquisition values this close (relative to max(1, |best|)) count as tied
JITTERS = (None, 1e-6, 1e-4)  # Cholesky jitter of each try (None: gpytorch's own, 1e-8)
NUMERICAL_ERRORS = (ModelFittingError, NotPSDError, torch.linalg.LinAlgError)


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


def with_jitter(attempt):
    """``attempt()`` under each Cholesky jitter of ``JITTERS`` in turn, until one does not
    raise a numerical error (a matrix not positive definite, a failed fit); the last error is
    raised when every try fails."""
    for i, jit in enumerate(JITTERS):
        ctx = cholesky_jitter(double_value=jit) if jit else contextlib.nullcontext()
        try:
            with ctx:
                return attempt()
        except NUMERICAL_ERRORS:
            if i == len(JITTERS) - 1:
                raise


def replay(rng, propose, *args, **kwargs):
    """A callable for :func:`with_jitter` that calls ``propose(*args, rng, **kwargs)`` with
    ``rng`` reset, on every call, to its state now: a retry under a larger jitter draws the
    same random numbers as the first try, so the rest of the run's stream does not depend on
    whether a retry happened."""
    state = rng.bit_generator.state

    def attempt():
        rng.bit_generator.state = state
        return propose(*args, rng, **kwargs)

    return attempt


def fit(model, maxiter: int = 50):
    """Marginal-likelihood fit (L-BFGS-B through botorch, at most ``maxiter`` iterations).

    botorch retries a failed fit itself (resampling the hyper-parameters that have priors); a
    fit that still fails, or ends on a non-finite hyper-parameter, is tried again from the same
    start with a larger Cholesky jitter (:func:`with_jitter`). When every try fails the model
    keeps the hyper-parameters it started from (the previous fit's, or the defaults) and
    ``model.fit_failure`` holds the reason; it is None after a successful fit."""
    start = copy.deepcopy(model.state_dict())
    mll = ExactMarginalLogLikelihood(model.likelihood, model)

    def attempt():
        model.load_state_dict(start)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": int(maxiter)}})
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise ModelFittingError("the fit ended on a non-finite hyper-parameter")

    try:
        with_jitter(attempt)
        model.fit_failure = None
    except NUMERICAL_ERRORS as err:
        model.load_state_dict(start)
        model.fit_failure = f"{type(err).__name__}: {err}"
    return model.eval()


def best_first(values, tol: float = TIE_TOL) -> np.ndarray:
    """Indices of ``values`` from the largest down, where values within ``tol * max(1,
    |largest|)`` of the first value of their run count as tied and keep their index order
    (:func:`reprobook.core.tie_groups`; NaN counts as -inf). The first index is the argmax
    with rounding-level ties broken by position, the first k the top k."""
    v = checks.array(values, "values", finite=False).reshape(-1)
    if v.size == 0:
        raise checks.InputError("values must hold at least one number, got none")
    tol = checks.real(tol, "tol", minimum=0)
    v = np.where(np.isnan(v), -np.inf, v)
    order = np.argsort(-v, kind="stable")  # largest first, ties in index order
    s = v[order]
    top = s[0] if np.isfinite(s[0]) else 0.0
    return order[np.lexsort((order, tie_groups(s, tol * max(1.0, abs(top)))))]


def initial_design(n_pool: int, n_init: int, seed: int, replicate: int) -> np.ndarray:
    """The ``n_init`` distinct rows every method starts from in (seed, replicate)."""
    rng = np.random.default_rng([seed, replicate, 0])
    return rng.choice(n_pool, size=n_init, replace=False)


def propose_discrete(model, best_f: float, choices: torch.Tensor, rng) -> int:
    """Index (into ``choices``) of the row that maximises qLogEI, ties broken at random: the
    rows are taken in an order shuffled by ``rng`` and the first of the rows tied at the top
    (to rounding, :func:`best_first`) wins."""
    rng = checks.generator(rng)
    order = torch.as_tensor(rng.permutation(len(choices)))
    acq = qLogExpectedImprovement(model, best_f=best_f)
    with torch.no_grad():  # every row, in batches of 2048 (as botorch's discrete optimiser)
        vals = torch.cat([acq(c.unsqueeze(-2)) for c in choices[order].split(2048)])
    return int(order[best_first(vals.numpy())[0]])


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
    failures: Failures | None = None,
) -> np.ndarray:
    """One BO run on a lookup pool: the yields in the order evaluated, (n_init + n_iter,).

    Hyper-parameters are fitted at the first step and every ``refit_every`` steps after,
    each fit starting from the previous one; in between the model takes the new data with
    the last fitted hyper-parameters (the same schedule for every method). A fit that fails
    after every retry (:func:`fit`) leaves the model with its previous hyper-parameters, and a
    proposal whose posterior cannot be factorised even with the largest jitter falls back to
    a random unevaluated row; each is added to ``failures`` when one is given."""
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
            unit = f"replicate {replicate}, {method}, step {step}"
            if getattr(model, "fit_failure", None) and failures is not None:
                failures.add(unit + " (fit)", model.fit_failure)
            try:  # a retry replays the step's draws (replay), so it changes only the jitter
                i = with_jitter(replay(rng, propose_discrete, model, float(Y.max()), Xp[rest]))
            except NUMERICAL_ERRORS as err:
                i = int(rng.integers(len(rest)))
                if failures is not None:
                    failures.add(unit + " (proposal)", f"{type(err).__name__}: {err}")
            picked.append(int(rest[i]))
    return y[np.array(picked)]


def normalized_best(trace, optimum: float) -> np.ndarray:
    """Best-so-far divided by the optimum, after each evaluation."""
    t = checks.array(trace, "trace", ndim=1)
    return np.maximum.accumulate(t) / checks.real(optimum, "optimum", above=0)
