"""The angular mean: a linear ranking rule for proportional sequential decisions.

Library of the chapter on "The End Justifies the Mean: A Linear Ranking Rule for Proportional
Sequential Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. Only the
abstract was available: the agreement measure, the IP thresholds and the angular mean (the
weighted Frechet/Karcher mean on the sphere) are reconstructed from it.

Modules: sphere geometry and input checks (:mod:`.geometry`), the arithmetic and angular means
(:mod:`.rules`), agreement and IP checks (:mod:`.agreement`), profile and batch generators
(:mod:`.generators`), the statistics of the Monte Carlo claims (:mod:`.intervals`), the
notebooks' studies (:mod:`.experiments`) and the notebooks' profiles (:mod:`.config`). The
equations they implement are on the chapter's page, notebooks/02_angular_mean/index.md.
"""

from reprobook import core

from . import agreement, config, experiments, generators, geometry, intervals, rules
from .agreement import (
    BatchShortfall,
    hyperplane_mc,
    long_run_agreement,
    long_run_ratio,
    per_batch_agreement,
    per_batch_shortfall,
    satisfies_long_run_ip,
)
from .generators import (
    TABLES,
    gaussian_batches,
    random_profile,
    table_batches,
    table_items,
    two_voter_opposite,
    type_profile,
    vmf_voters,
)
from .geometry import (
    angle,
    check_profile,
    exp_map,
    karcher_field,
    karcher_objective,
    log_map,
    riemannian_gradient,
    riemannian_hessian,
    unwhiten,
    whiten,
)
from .intervals import bootstrap_shortfall_slope, shortfall_slope, worst_ratio_gap
from .rules import (
    AngularMeanInfo,
    angular_mean,
    angular_mean_info,
    arithmetic_mean,
    fibonacci_sphere,
    grid_angular_mean,
)

# a submodule not imported above loads on first use (am.<module>)
__getattr__ = core.lazy_submodules(__name__)
