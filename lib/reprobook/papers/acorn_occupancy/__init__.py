"""ACORN: Active Continuous-Score Occupancy Modeling (NeurIPS 2026; reconstructed from the
abstract).

Library of the chapter:

- :mod:`.simulate`: camera-trap and bioacoustic surveys (and a misspecified-score variant);
- :mod:`.likelihood`: the continuous-score occupancy model (CSOM, Rhinehart et al. 2022) site
  likelihood with reviewed and unreviewed units, its priors and closed-form gradient;
- :mod:`.fit`: MAP with a Laplace approximation; :mod:`.nuts`: NUTS (numpyro) to check it;
- :mod:`.baselines`: thresholded detections, the standard and Royle-Link occupancy models;
- :mod:`.acquisition`: ACORN's expected variance reduction and the non-targeted review policies;
- :mod:`.loop`: the review loop, the study over seeds and its summaries;
- :mod:`.config`: the notebooks' profiles.
"""

from reprobook.core import lazy_submodules

from . import acquisition, baselines, config, fit, likelihood, loop, nuts
from .acquisition import POLICIES, TARGETS, expected_variance_reduction, select_evr
from .baselines import BinaryFit, fit_binary_occupancy, threshold_detections
from .fit import Fit, FitError, default_init, fit_map, laplace_hessian, psi_bar_with_se
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
    unit_presence_probability,
    unpack_params,
)
from .loop import full_label_fit, review_loop, run_study
from .nuts import NutsResult, run_nuts
from .simulate import BIOACOUSTIC, CAMERA, PRESETS, Preset, Survey, simulate

__getattr__ = lazy_submodules(__name__)
