"""Tactile MNIST: benchmarking active tactile perception (arXiv 2506.06361).

Library of the chapter. The benchmark's interface is ap_gym's: every step takes a movement and a
prediction, and the reward is the base reward minus the prediction loss.

- :mod:`.envs`: a digits-glimpse environment on scikit-learn's digits (single and vector), built
  from ap_gym's image classification classes, glimpses of all environments at once, and the
  interface checks of claim C1;
- :mod:`.tactile`: synthetic tactile digits (height maps, a NumPy depth sensor) behind the
  suite's tactile interface;
- :mod:`.policies`: scripted exploration (random, raster, gradient-following) and rollouts;
- :mod:`.model`: the recurrent predictor (a LightningModule) trained on the rollouts;
- :mod:`.evaluate`: accuracy against step and the per-seed values of the C2 and C3 checks (their
  intervals are the core's ``t_interval`` and ``worst_group_interval``);
- :mod:`.config`: the notebooks' profiles.

Notebooks import the package alone (``from reprobook.papers import tactile_mnist as tactile``)
and reach the modules from it (``tactile.evaluate.final_minus_average``).

The equations the library implements are labelled on the chapter's page,
notebooks/10_tactile_mnist/index.md, and each function cites the one it computes.
"""

import warnings as _warnings

from reprobook import core as _core

from . import config  # the rest loads on first use (the package's __getattr__)

# ap_gym (imported by envs and tactile when first used) imports datasets, whose tqdm.auto warns
# in a notebook without ipywidgets
_warnings.filterwarnings("ignore", message="IProgress not found")

_EXPORTS = {
    **dict.fromkeys(
        (
            "DigitsDataset",
            "batched_glimpses",
            "interface_report",
            "make_circle_square_vector_env",
            "make_digits_glimpse_env",
            "make_digits_glimpse_vector_env",
            "make_glimpse_env",
        ),
        "envs",
    ),
    **dict.fromkeys(
        ("accuracy_by_step", "growth_check", "interval_fields", "ordering_check"), "evaluate"
    ),
    **dict.fromkeys(
        ("GlimpsePredictor", "TrajectoryDataModule", "predict_logits", "train_predictor"), "model"
    ),
    **dict.fromkeys(("POLICIES", "Trajectories", "make_policy", "rollout"), "policies"),
    **dict.fromkeys(
        ("TactileDigitEnv", "height_map", "height_map_volume", "triangulated_volume"), "tactile"
    ),
}
__getattr__ = _core.lazy_submodules(__name__, _EXPORTS)
