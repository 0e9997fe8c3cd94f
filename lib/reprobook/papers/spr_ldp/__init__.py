"""Sort, Partition, Randomize: optimal binary hypothesis testing under local differential privacy.

Library of the chapter on arXiv 2606.07443: the f-divergence utilities (:mod:`.divergences`),
the SPR dynamic program with its exact checks and baselines (:mod:`.mechanisms`), instance
generators (:mod:`.instances`), private Neyman-Pearson testing (:mod:`.testing`, our
extension), the notebooks' comparisons (:mod:`.experiments`) and the notebooks' profiles
(:mod:`.config`).
"""

from reprobook import core

from . import config, experiments, instances, testing
from .divergences import (
    CHI2,
    DIVERGENCES,
    HELLINGER,
    KL,
    REVERSE_KL,
    TV,
    Divergence,
    all_divergences,
    conjugate,
    f_divergence,
    get_divergence,
    hockey_stick,
)
from .mechanisms import (
    DPTables,
    LPResult,
    SPRResult,
    best_over_all_partitions,
    best_over_contiguous_partitions,
    binary_mechanism,
    block_gain_matrix,
    dp_tables,
    is_ldp,
    likelihood_order,
    mechanism_value,
    optimal_mechanism,
    randomized_response,
    set_partitions,
    spr_mechanism_matrix,
    spr_value,
    staircase_lp,
    staircase_lp_budget,
)

# a submodule not imported above loads on first use (spr.<module>)
__getattr__ = core.lazy_submodules(__name__)
