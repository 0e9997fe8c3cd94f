"""Tactile MNIST: benchmarking active tactile perception (arXiv 2506.06361).

Library of the chapter. The benchmark's interface is ap_gym's: every step takes a movement and a
prediction, and the reward is the base reward minus the prediction loss.

- :mod:`.envs`: a digits-glimpse environment on scikit-learn's digits, built from ap_gym's image
  classification classes, and the interface checks of claim C1;
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

# ap_gym imports datasets, whose tqdm.auto warns in a notebook without ipywidgets
with _warnings.catch_warnings():
    _warnings.filterwarnings("ignore", message="IProgress not found")
    from . import config, envs, evaluate, model, policies, tactile
from .envs import DigitsDataset, interface_report, make_digits_glimpse_env, make_glimpse_env
from .evaluate import accuracy_by_step, growth_check, interval_fields, ordering_check
from .model import GlimpsePredictor, TrajectoryDataModule, predict_logits, train_predictor
from .policies import POLICIES, Trajectories, make_policy, rollout
from .tactile import TactileDigitEnv, height_map, height_map_volume, triangulated_volume

__getattr__ = _core.lazy_submodules(__name__)
