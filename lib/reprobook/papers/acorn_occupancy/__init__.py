"""ACORN: Active Continuous-Score Occupancy Modeling (NeurIPS 2026; reconstructed from the abstract).

Library of the chapter: the simulator of camera-trap and bioacoustic surveys (:mod:`.simulate`),
the continuous-score occupancy model (CSOM, Rhinehart et al. 2022) site likelihood with reviewed
and unreviewed units, its priors and closed-form gradient (:mod:`.likelihood`), and the MAP fit
with a Laplace approximation (:mod:`.fit`).
"""

from .simulate import BIOACOUSTIC, CAMERA, PRESETS, Preset, Survey, simulate
from .likelihood import (
    N_PARAMS,
    PARAM_NAMES,
    grad_log_posterior,
    log_posterior,
    log_prior,
    loglik,
    pack_params,
    site_loglik,
    site_occupancy_posterior,
    true_params,
    unpack_params,
)
from .fit import Fit, FitError, default_init, fit_map, laplace_hessian
