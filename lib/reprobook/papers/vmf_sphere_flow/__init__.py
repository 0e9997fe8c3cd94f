"""Spherical flows for sampling categorical data (arXiv 2605.05629): the chapter's library core.

The paper's full text was not read. The equations the package implements (the vMF path, the
scalar ODE in the cosine and its bounded solution psi, the marginal fields as posterior-weighted
sums, the baselines, the emission likelihoods, the training loss and the sampler steps) are
stated and derived, with labels, in notebooks/16_vmf_sphere_flow/index.md, and each function
that implements one cites its label (eq. `vmf-psi`, say). The derivations are ours, checked
numerically by the tests.

- :mod:`.geometry`: the vMF law on S^{d-1} (mean cosine A_d, normalisers, the cosine's density,
  CDF and inverse CDF), a torch vMF sampler, the bounded solution psi(s, kappa) of the cosine ODE
  and its table, the quantile flow map, tangent projection and retractions, the push-forward;
- :mod:`.fields`: the marginal velocity and score as posterior-weighted tangent sums, the SDE
  drift, and the geodesic and Euclidean baselines' velocities;
- :mod:`.samplers`: ODE, predictor-corrector and SDE samplers on the product of spheres, and the
  baselines' samplers, counting network evaluations;
- :mod:`.model`: the posterior network (a small transformer LightningModule trained by
  cross-entropy on vMF-noised inputs), built and trained from a :class:`.config.Net`, and its
  use as a sampler's posterior;
- :mod:`.data`: all 288 Shidoku grids with puzzles and an exact enumeration posterior, a 9x9
  Sudoku generator with a uniqueness-checking solver, and a Markov-chain language with exact
  posteriors by forward-backward;
- :mod:`.paths`: the vMF, geodesic and Euclidean noise paths: training draws and each path's
  exact likelihood of a noisy point given a token (for oracle posteriors);
- :mod:`.evaluate`: oracle posteriors as sampler callables, one entry point for every sampler,
  and the chapter's metrics (sequence entropy, the smallest of several differences, Shidoku
  uniformity);
- :mod:`.experiments`: the Markov-language task and its trained networks, cached between notebooks;
- :mod:`.warp`: the learned noise-level warp of the training loss;
- :mod:`.config`: the notebooks' profiles.

Every submodule is reachable from the package (``vf.warp``) and loaded on first use, as are the
names below that the package offers from its submodules (``vf.psi`` is ``vf.geometry.psi``).
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

_EXPORTS = {
    **dict.fromkeys(("MarkovChain", "oracle_posterior_grids", "shidoku_grids"), "data"),
    **dict.fromkeys(("marginal_score", "marginal_velocity"), "fields"),
    **dict.fromkeys(("PsiTable", "mean_cosine", "psi", "sample_vmf"), "geometry"),
    **dict.fromkeys(
        ("PosteriorTransformer", "as_posterior", "posterior_network", "train_posterior"), "model"
    ),
    **dict.fromkeys(
        ("sample_euclidean", "sample_geodesic", "sample_ode", "sample_pc", "sample_sde"),
        "samplers",
    ),
}
__getattr__ = core.lazy_submodules(__name__, _EXPORTS)
