"""Tactile MNIST: benchmarking active tactile perception (arXiv 2506.06361).

Library of the chapter. The benchmark's interface is ap_gym's: every step takes a movement and a
prediction, and the reward is the base reward minus the prediction loss.

- :mod:`.envs`: a digits-glimpse environment on scikit-learn's digits, built from ap_gym's image
  classification classes, and the interface checks of claim C1;
- :mod:`.tactile`: synthetic tactile digits (height maps, a NumPy depth sensor) behind the
  suite's tactile interface;
- :mod:`.policies`: scripted exploration (random, raster, gradient-following) and rollouts;
- :mod:`.model`: the recurrent predictor (a LightningModule) trained on the rollouts;
- :mod:`.evaluate`: accuracy against step, intervals over seeds, the C2 and C3 checks;
- :mod:`.config`: the notebooks' profiles.
"""

import warnings as _warnings

with (
    _warnings.catch_warnings()
):  # ap_gym imports datasets, whose tqdm.auto warns in a notebook without ipywidgets
    _warnings.filterwarnings("ignore", message="IProgress not found")
    from . import config, envs, evaluate, model, policies, tactile
from .envs import DigitsDataset, interface_report, make_digits_glimpse_env, make_glimpse_env
from .evaluate import accuracy_by_step, growth_check, ordering_check, t_interval
from .model import GlimpsePredictor, TrajectoryDataModule, predict_logits, train_predictor
from .policies import POLICIES, Trajectories, make_policy, rollout
from .tactile import TactileDigitEnv, height_map, height_map_volume, triangulated_volume
