"""Offline active-perception environments and the interface checks of the chapter on Tactile
MNIST.

Paper: "Tactile MNIST: Benchmarking Active Tactile Perception", Schneider, Duret, de Farias,
Calandra, Chen and Peters, arXiv 2506.06361. The benchmark's interface is ap_gym's: at every
step the agent sends ``{"action": movement, "prediction": logits}``, and the environment returns

    r_t = b_t - l(y*, y_hat_t),            (the reward identity, eq. `tac-reward` of
                                            notebooks/10_tactile_mnist/index.md)

with the base reward ``b_t`` (an action penalty) and the task loss ``l`` (cross-entropy for
classification, MSE for regression) reported in ``info["base_reward"]`` and
``info["prediction"]["loss"]``, a fixed step limit, and seeded resets.

This module implements:

* :class:`DigitsDataset` (spec item 1): scikit-learn's bundled 8x8 digits, upsampled to 28x28,
  as an ap_gym image-classification dataset; an offline stand-in for ap_gym's MNIST-v0, which
  downloads from the Hugging Face hub.
* :func:`make_digits_glimpse_env` (spec item 2): a single glimpse environment over those digits,
  built from ap_gym's classes the way ``ap_gym.make("CircleSquare-v0")`` builds its own (no
  registry, prefetching off).
* :func:`make_digits_glimpse_vector_env`: the same task as ``num_envs`` environments in one
  ap_gym vector environment (faster roll-outs; other episodes than the single one's).
* :func:`batched_glimpses`: an ap_gym image environment whose glimpses of all its environments
  are interpolated in one NumPy pass, with the operations scipy's ``RegularGridInterpolator``
  applies to each environment's image in turn, so the observations are bitwise the same.
* :func:`interface_report` (spec item 4): the claim-C1 checks (Gymnasium's ``check_env``, the
  spaces, the reward identity, the step at which episodes end, seeded resets, ``time_step``) on
  any single ap_gym environment.

The synthetic tactile digits (spec item 3) are in :mod:`.tactile`.

Conventions measured on ``ap_gym.make("CircleSquare-v0")`` (ap-gym 0.7.1, gymnasium 1.4.0):
``time_step`` is -1 at reset and +1 in the observation of the last step (2 t / T - 1 after t
steps); the episode ends with ``terminated=True, truncated=False`` at step T = 16 and never
earlier; the prediction loss is ap_gym's *normalised* cross-entropy, CE / log K (K classes).
Its step returns NumPy booleans (``numpy.bool``), which Gymnasium 1.4's ``check_env`` rejects in
its step-determinism check (``trunc_0 is False``); the digits environment casts the flags to
Python booleans so that it passes.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from ap_gym import (
    ActiveClassificationLogWrapper,
    ActiveClassificationVectorLogWrapper,
    ActivePerceptionWrapper,
    LogitSpace,
)
from ap_gym.envs.image import ImageClassificationDataset, ImagePerceptionConfig
from ap_gym.envs.image_classification import ImageClassificationEnv, ImageClassificationVectorEnv
from gymnasium.utils import env_checker
from scipy import ndimage
from scipy.special import log_softmax

from reprobook.core import checks

__all__ = [
    "DIGITS_SPLITS",
    "DigitsDataset",
    "PythonFlagsWrapper",
    "make_glimpse_env",
    "make_digits_glimpse_env",
    "make_digits_glimpse_vector_env",
    "make_circle_square_vector_env",
    "batched_glimpses",
    "interface_report",
    "find_step_limit",
]

DIGITS_SPLITS = ("train", "test")


@functools.lru_cache(maxsize=1)
def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits, read once per process: images (1797, 8, 8), targets."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, target = digits.images.copy(), digits.target.copy()
    images.flags.writeable = target.flags.writeable = False
    return images, target


def _upsample(images8: np.ndarray, size: int) -> np.ndarray:
    """Bilinear upsampling of (N, 8, 8) images in [0, 1] to (N, size, size), clipped to [0, 1].

    ``grid_mode=True`` treats each source value as a pixel of area 1, so the output covers the
    same square as the input (a 28x28 image from an 8x8 one: zoom 3.5).
    """
    n, h, w = images8.shape
    out = ndimage.zoom(images8, (1, size / h, size / w), order=1, grid_mode=True, mode="nearest")
    return np.clip(out, 0.0, 1.0)


class DigitsDataset(ImageClassificationDataset):
    """scikit-learn's ``load_digits`` as an ap_gym image-classification dataset (spec item 1).

    The 1,797 bundled 8x8 images (grey levels 0..16, no download) are scaled to [0, 1] and
    upsampled bilinearly to ``image_size`` x ``image_size`` (28 by default, MNIST's size), one
    channel. The split is a fixed permutation of the 1,797 indices drawn with ``seed`` (0): the
    first ``round(train_fraction * 1797)`` (1,438 at 0.8) are "train", the rest (359) "test".

    Attributes (all aligned, length ``len(self)``):
        ``indices``: the digits' indices in ``load_digits()`` (so ``load_digits().target[indices]
        == labels``); ``labels``: the true classes, int32; ``images8``: the 8x8 images in [0, 1]
        (float64); ``images``: the upsampled images, (N, S, S, 1) float32.
    """

    def __init__(
        self,
        split: str = "train",
        image_size: int = 28,
        train_fraction: float = 0.8,
        seed: int = 0,
    ):
        if split not in DIGITS_SPLITS:
            raise ValueError(f"split must be one of {DIGITS_SPLITS}, got {split!r}")
        checks.integer(image_size, "image_size (the digits are 8x8)", minimum=8)
        checks.real(train_fraction, "train_fraction", above=0, below=1)
        all_images, all_targets = _load_digits()
        n = len(all_targets)
        perm = np.random.default_rng(seed).permutation(n)
        n_train = int(round(float(train_fraction) * n))
        idx = perm[:n_train] if split == "train" else perm[n_train:]
        self.split = split
        self.image_size = int(image_size)
        self.indices = idx.astype(np.int64)
        self.labels = all_targets[idx].astype(np.int32)
        self.images8 = all_images[idx].astype(np.float64) / 16.0  # (N, 8, 8) in [0, 1]
        self.images = _upsample(self.images8, self.image_size)[..., None].astype(np.float32)

    def _get_num_classes(self) -> int:
        return 10

    def _get_num_channels(self) -> int:
        return 1

    def _get_length(self) -> int:
        return len(self.labels)

    def _get_data_point_batch(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx, dtype=np.int64)
        return self.images[idx], self.labels[idx]


class PythonFlagsWrapper(ActivePerceptionWrapper):
    """Returns ``terminated``/``truncated`` as Python ``bool`` and the reward as ``float``.

    ap_gym's single environments built from a vector environment (``ImageClassificationEnv``)
    return ``numpy.bool`` flags; Gymnasium 1.4's ``check_env`` asserts ``truncated is False``
    and so fails on them. Values are unchanged: ``bool(numpy.bool(x)) == x``.
    """

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), info


def _validate_glimpse_args(step_limit, sensor_size, max_step_length, image_size) -> tuple[int, int]:
    checks.integer(step_limit, "step_limit", minimum=1)
    try:
        size = tuple(int(s) for s in sensor_size)
    except TypeError:
        raise ValueError(
            f"sensor_size must be a pair of positive integers, got {sensor_size!r}"
        ) from None
    if len(size) != 2 or min(size) < 1 or max(size) > image_size:
        raise ValueError(
            f"sensor_size must be a pair of integers in [1, {image_size}] (the image size), "
            f"got {sensor_size!r}"
        )
    step = np.asarray(max_step_length, dtype=float)
    if step.shape not in {(), (1,), (2,)} or not np.all(np.isfinite(step)) or np.any(step <= 0):
        raise ValueError(
            "max_step_length must be a positive number (or a positive pair), "
            f"got {max_step_length!r}"
        )
    return size


def _glimpse_config(
    dataset: ImageClassificationDataset, step_limit, sensor_size, max_step_length
) -> ImagePerceptionConfig:
    """The checked ``ImagePerceptionConfig`` of the chapter's glimpse environments (prefetching
    off, so the next images are drawn in the calling thread and a seeded reset is
    deterministic)."""
    if not isinstance(dataset, ImageClassificationDataset):
        raise TypeError(
            f"dataset must be an ap_gym ImageClassificationDataset, got {type(dataset).__name__}"
        )
    dataset.load()
    image_size = int(min(dataset[0][0].shape[:2]))
    size = _validate_glimpse_args(step_limit, sensor_size, max_step_length, image_size)
    return ImagePerceptionConfig(
        dataset=dataset,
        sensor_size=size,
        max_step_length=max_step_length,
        step_limit=int(step_limit),
        prefetch=False,
    )


def make_glimpse_env(
    dataset: ImageClassificationDataset,
    step_limit: int = 16,
    sensor_size: tuple[int, int] = (5, 5),
    max_step_length: float = 0.2,
) -> PythonFlagsWrapper:
    """A single ap_gym glimpse-classification environment over any image dataset, built as
    :func:`make_digits_glimpse_env` describes (no registry, no prefetch thread, Python flags).

    ``make_glimpse_env(CircleSquareDataset(image_shape=(28, 28), show_gradient=True))`` is
    CircleSquare-v0's configuration without ``gym.make``'s checker wrappers and the prefetch
    thread (about 0.36 ms a step here against 0.84 ms for ``ap_gym.make("CircleSquare-v0")``).
    """
    config = _glimpse_config(dataset, step_limit, sensor_size, max_step_length)
    env = PythonFlagsWrapper(ActiveClassificationLogWrapper(ImageClassificationEnv(config)))
    env.step_limit = int(step_limit)  # read by interface_report and the policies
    env.dataset = dataset
    return env


def make_digits_glimpse_env(
    split: str = "train",
    step_limit: int = 16,
    sensor_size: tuple[int, int] = (5, 5),
    max_step_length: float = 0.2,
    *,
    dataset: DigitsDataset | None = None,
) -> PythonFlagsWrapper:
    """A single (non-vector) glimpse environment over the digits (spec item 2).

    Built as ``ap_gym.make("CircleSquare-v0")`` builds its environment, without the registry:
    ``ImageClassificationEnv`` (a one-environment ``ImageClassificationVectorEnv`` behind
    ``ActivePerceptionVectorToSingleWrapper``) wrapped in ``ActiveClassificationLogWrapper``;
    with ``ImagePerceptionConfig(prefetch=False)``, so the next digit is drawn in the calling
    thread and a seeded reset is deterministic. ``gym.make``'s ``PassiveEnvChecker`` and
    ``OrderEnforcing`` are left out; :class:`PythonFlagsWrapper` is added (see there).

    The environment (ap_gym's, unchanged): observation ``glimpse`` (G, G, 1) in [0, 1],
    ``glimpse_pos`` (2,) and ``time_step`` () in [-1, 1]; inner action Box(-1, 1, (2,)), projected
    onto the unit disc and scaled by ``max_step_length`` (in units of the half image); base reward
    -1e-3 ||a|| (of the unprojected action); prediction LogitSpace(10) with loss CE / log 10;
    ``terminated`` at ``step_limit``. ``dataset`` overrides ``DigitsDataset(split)``.
    """
    if dataset is None:
        dataset = DigitsDataset(split)
    return make_glimpse_env(dataset, step_limit, sensor_size, max_step_length)


def _perception_module(env: Any):
    """The ap_gym ``ImagePerceptionModule`` behind an image environment, single or vector (its
    ``ImageClassificationVectorEnv``'s ``image_perception_module``), or None."""
    from ap_gym.envs.image import ImagePerceptionModule

    module = getattr(env.unwrapped, "image_perception_module", None)
    return module if isinstance(module, ImagePerceptionModule) else None


def _linear_grid(interpolators: list) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """(values (N, H, W, C), the grid's two axes) of one reset's interpolators, one per
    environment, when each is a linear ``RegularGridInterpolator`` that raises out of bounds, on
    the same grid, of an (H, W, C) image: the case whose arithmetic :func:`_interpolate_linear`
    repeats. None otherwise (the interpolators then evaluate as they are)."""
    from scipy.interpolate import RegularGridInterpolator

    if not interpolators or not all(
        type(r) is RegularGridInterpolator and r.method == "linear" and r.bounds_error
        for r in interpolators
    ):
        return None
    first = interpolators[0]
    grid = tuple(np.asarray(g, dtype=np.float64) for g in first.grid)
    values = [np.asarray(r.values) for r in interpolators]
    if (
        len(grid) != 2
        or min(len(g) for g in grid) < 2
        or not all(np.all(np.diff(g) > 0) for g in grid)  # ascending, as ap_gym builds them
        or values[0].ndim != 3  # a 2-D float64 image takes scipy's compiled path instead
        or any(v.shape != values[0].shape or v.dtype != values[0].dtype for v in values)
        or not all(
            len(r.grid) == 2 and all(np.array_equal(a, b) for a, b in zip(r.grid, grid))
            for r in interpolators
        )
    ):
        return None
    return np.stack(values), grid


def _interpolate_linear(values: np.ndarray, grid: tuple, points: np.ndarray) -> np.ndarray:
    """Bilinear interpolation of N images at N sets of points, with the operations, in the order,
    that scipy's ``RegularGridInterpolator(method="linear")`` (SciPy 1.17) applies to one image
    (its ``find_indices`` and ``_evaluate_linear``): for each axis the cell
    i = max(j : g_j <= x), at most len(g) - 2, and y = (x - g_i) / (g_{i+1} - g_i); then
    value = 0 + sum over the four corners, in the order (i, j), (i, j+1), (i+1, j), (i+1, j+1),
    of image[corner] * ((1 * w_row) * w_col), with w = 1 - y at i and y at i + 1.

    values (N, H, W, C); grid (rows (H,), columns (W,)); points (N, P, 2) inside the grid ->
    (N, P, C) float64."""
    env = np.arange(len(values))[:, None]  # (N, 1)
    corner, frac = [], []
    for axis in (0, 1):
        g, x = grid[axis], points[..., axis]  # x: (N, P)
        i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
        corner.append(i)
        frac.append((x - g[i]) / (g[i + 1] - g[i]))
    value = np.array([0.0])
    for a, b in itertools.product((0, 1), (0, 1)):
        weight = np.array([1.0])
        weight = weight * (frac[0] if a else 1 - frac[0])
        weight = weight * (frac[1] if b else 1 - frac[1])
        value = value + values[env, corner[0] + a, corner[1] + b] * weight[..., None]
    return value


def batched_glimpses(env: Any) -> Any:
    """``env`` (an ap_gym image environment, single or vector) with its glimpses of all its
    environments computed in one NumPy pass; returns ``env``.

    ap_gym's ``ImagePerceptionModule.get_glimpse`` builds the G x G sensing points of each
    environment around its sensor position and interpolates each environment's image there with
    its own ``RegularGridInterpolator``, one call per environment and step (most of a CircleSquare
    step's time with 50 environments). The replacement computes the same sensing points with the
    same operations and interpolates all images at once (:func:`_interpolate_linear`, the
    interpolator's arithmetic element by element), so every observation is bitwise what ap_gym
    computes (a test compares them); where its assumptions do not hold (another interpolation
    method, other array shapes, points outside the image) it calls ap_gym's own method. Only
    the observation's computation changes: the environment's state, random draws, rewards and
    rendering are ap_gym's."""
    module = _perception_module(env)
    if module is None:
        raise TypeError(
            f"batched_glimpses needs an ap_gym image environment (with an ImagePerceptionModule), "
            f"got {type(env).__name__}"
        )
    if getattr(module.get_glimpse, "batched", False):
        return env
    original = module.get_glimpse
    cache: dict[str, Any] = {"of": None, "grid": None}

    def get_glimpse(pos_norm: np.ndarray) -> np.ndarray:
        interpolators = getattr(module, "_ImagePerceptionModule__interpolated_images", None)
        if interpolators is None:
            return original(pos_norm)
        if cache["of"] is not interpolators:  # a reset drew new images
            cache["of"], cache["grid"] = interpolators, _linear_grid(interpolators)
        pos_norm = np.asarray(pos_norm)
        if cache["grid"] is None or pos_norm.shape != (len(interpolators), 2):
            return original(pos_norm)
        values, grid = cache["grid"]
        config = module.config
        offsets = np.meshgrid(  # as ap_gym's get_glimpse
            (np.arange(config.sensor_size[0]) - (config.sensor_size[0] - 1) / 2)
            * config.sensor_scale,
            (np.arange(config.sensor_size[1]) - (config.sensor_size[1] - 1) / 2)
            * config.sensor_scale,
            indexing="ij",
        )
        sensing = (
            np.flip(module.denormalize_coords(pos_norm), axis=-1)[..., None, None, :]
            + np.stack(offsets, axis=-1)[None]
        )  # (N, G, G, 2)
        n = len(interpolators)
        points = np.asarray(sensing.reshape(n, -1, 2), dtype=float)  # (N, G * G, 2)
        inside = all(
            np.all(grid[axis][0] <= points[..., axis])
            and np.all(points[..., axis] <= grid[axis][-1])
            for axis in (0, 1)
        )
        if not inside:  # ap_gym's interpolators raise their own error
            return original(pos_norm)
        out = _interpolate_linear(values, grid, points)  # (N, G * G, C)
        return out.reshape(*sensing.shape[:-1], values.shape[-1]).clip(0, 1).astype(np.float32)

    get_glimpse.batched = True
    module.get_glimpse = get_glimpse
    return env


def make_digits_glimpse_vector_env(
    split: str = "train",
    num_envs: int = 50,
    step_limit: int = 16,
    sensor_size: tuple[int, int] = (5, 5),
    max_step_length: float = 0.2,
    *,
    dataset: DigitsDataset | None = None,
) -> ActiveClassificationVectorLogWrapper:
    """``num_envs`` digits-glimpse environments as one gymnasium VectorEnv, for roll-outs.

    Built as ``ap_gym.make_vec("CircleSquare-v0", num_envs=...)`` builds its environment:
    ap_gym's ``ImageClassificationVectorEnv`` behind ``ActiveClassificationVectorLogWrapper``,
    with the configuration of :func:`make_digits_glimpse_env` (prefetching off) and its glimpses
    computed by :func:`batched_glimpses`. Each environment is the single one's task; a seeded
    reset draws ``num_envs`` digits at once, so the episodes differ from the single environment's
    for the same seeds (see ``policies.rollout``). ``dataset`` overrides ``DigitsDataset(split)``.
    """
    checks.integer(num_envs, "num_envs", minimum=1)
    if dataset is None:
        dataset = DigitsDataset(split)
    config = _glimpse_config(dataset, step_limit, sensor_size, max_step_length)
    env = ActiveClassificationVectorLogWrapper(ImageClassificationVectorEnv(int(num_envs), config))
    return batched_glimpses(env)


def make_circle_square_vector_env(num_envs: int = 50) -> Any:
    """``ap_gym.make_vec("CircleSquare-v0", num_envs=...)`` (its construction warnings silenced)
    with its glimpses computed by :func:`batched_glimpses`: the environment of notebook 2's
    roll-outs, whose observations are bitwise the registered environment's."""
    import ap_gym

    checks.integer(num_envs, "num_envs", minimum=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = ap_gym.make_vec("CircleSquare-v0", num_envs=int(num_envs))
    return batched_glimpses(env)


# ----------------------------------------------------------------------------------------------
# C1: the interface report
# ----------------------------------------------------------------------------------------------


def find_step_limit(env: gym.Env) -> int | None:
    """The episode length an environment declares: a ``step_limit`` attribute (ours), its
    ``spec.max_episode_steps`` (registered ap_gym environments), ap_gym's ``TimeLimit``
    wrapper, or an image environment's ``config.step_limit``; None when none is found."""
    for name in ("step_limit",):
        try:
            value = env.get_wrapper_attr(name)
        except AttributeError:
            value = None
        if isinstance(value, (int, np.integer)):
            return int(value)
    spec = getattr(env, "spec", None)
    if spec is not None and spec.max_episode_steps is not None:
        return int(spec.max_episode_steps)
    inner = env
    while inner is not None:
        value = getattr(inner, "_max_episode_steps", None)
        if isinstance(value, (int, np.integer)):
            return int(value)
        inner = getattr(inner, "env", None)
    try:
        return int(env.get_wrapper_attr("config").step_limit)
    except AttributeError:
        return None


def _space_summary(space: gym.Space, prefix: str = "") -> dict[str, dict[str, Any]]:
    """{path: {type, shape, dtype, low, high}} of a (nested Dict of) space(s)."""
    if isinstance(space, gym.spaces.Dict):
        out: dict[str, dict[str, Any]] = {}
        for key, sub in space.spaces.items():
            out.update(_space_summary(sub, f"{prefix}{key}/"))
        return out
    entry: dict[str, Any] = {
        "type": type(space).__name__,
        "shape": tuple(space.shape) if space.shape is not None else None,
        "dtype": str(space.dtype) if space.dtype is not None else None,
    }
    if isinstance(space, gym.spaces.Box):
        entry["low"] = float(np.min(space.low))
        entry["high"] = float(np.max(space.high))
    elif isinstance(space, gym.spaces.Discrete):
        entry["n"] = int(space.n)
    return {prefix.rstrip("/") or "value": entry}


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _run_check(fn, *args) -> tuple[str | None, list[str]]:
    """Run one checker; (error text or None, de-duplicated warning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(*args)
            error = None
        except Exception as exc:  # the report records the checker's message as it is
            error = _error_text(exc)
    messages = []
    for w in caught:
        text = str(w.message).replace("\x1b[33m", "").replace("\x1b[0m", "").strip()
        if text not in messages:
            messages.append(text)
    return error, messages


_CHECK_PARTS = (
    "check_action_space",
    "check_observation_space",
    "check_reset_return_type",
    "check_reset_seed_determinism",
    "check_reset_options",
    "check_step_determinism",
    "check_returned_data_not_reused",
)


def _check_env_parts(env: gym.Env) -> dict[str, str]:
    """Gymnasium's checker, part by part: {part: "ok" or the error text}."""
    parts: dict[str, str] = {}
    for name in _CHECK_PARTS:
        fn = getattr(env_checker, name, None)
        if fn is None:
            continue
        target = (
            env.action_space
            if name == "check_action_space"
            else (env.observation_space if name == "check_observation_space" else env)
        )
        error, _ = _run_check(fn, target)
        parts[name] = "ok" if error is None else error
    from gymnasium.utils.passive_env_checker import (
        env_reset_passive_checker,
        env_step_passive_checker,
    )

    error, _ = _run_check(env_reset_passive_checker, env)
    parts["env_reset_passive_checker"] = "ok" if error is None else error
    env.action_space.seed(0)
    error, _ = _run_check(env_step_passive_checker, env, env.action_space.sample())
    parts["env_step_passive_checker"] = "ok" if error is None else error
    if (
        getattr(env, "spec", None) is not None
    ):  # check_env's render and close checks remake the env from its spec
        error, _ = _run_check(lambda: env.spec.make().close())
        parts["remake_from_spec"] = "ok" if error is None else error
    return parts


def _equal_obs(a: Any, b: Any) -> bool:
    return bool(env_checker.data_equivalence(a, b, exact=True))


def interface_report(
    env: gym.Env, n_episodes: int = 20, seed: int = 0, step_limit: int | None = None
) -> dict:
    """The claim-C1 checks on one single ap_gym environment (spec item 4).

    * ``check_env``: Gymnasium's ``check_env(env)`` passes (``passed``), else the exception
      text (``error``); the checker's warnings; when it fails, each part of it run alone
      (``parts``), to show which check fails.
    * ``spaces``: shape, dtype and bounds of every observation and action entry;
      ``classification``: whether the prediction is class logits (a LogitSpace).
    * over ``n_episodes`` random rollouts (episode e reset with ``seed + e``; the action,
      movement and prediction, drawn from ``env.action_space`` seeded with ``seed``, so the
      logits are standard normal): ``max_reward_residual`` = max |r - (b - l)| (the reward
      identity); the episode lengths, how many end before ``step_limit`` and whether the last
      step is ``terminated`` or ``truncated``; ``time_step`` of the first and last observation;
      for a classification loss, ``max_loss_vs_ce_over_logk`` = max |l - CE / log K|, which is
      0 when the loss is ap_gym's normalised cross-entropy.
    * ``reset_deterministic``: ``reset(seed=seed)`` twice gives identical first observations;
      ``different_seeds_differ``: ``reset(seed=seed + 1)`` gives a different one.

    ``step_limit`` defaults to :func:`find_step_limit`. Episodes are cut at 10 x step_limit (or
    1,000 steps) in case an environment never ends. The environment is left reset. Checks eq.
    `tac-reward` of notebooks/10_tactile_mnist/index.md on every step.
    """
    if not isinstance(env, gym.Env):
        raise TypeError(f"env must be a gymnasium.Env, got {type(env).__name__}")
    checks.integer(n_episodes, "n_episodes", minimum=1)
    if step_limit is None:
        step_limit = find_step_limit(env)
    cap = 10 * step_limit if step_limit else 1000

    report: dict[str, Any] = {"env": str(env), "step_limit": step_limit}

    error, messages = _run_check(env_checker.check_env, env)
    report["check_env"] = {"passed": error is None, "error": error, "warnings": messages}
    if error is not None:
        report["check_env"]["parts"] = _check_env_parts(env)

    report["spaces"] = {
        "observation": _space_summary(env.observation_space),
        "action": _space_summary(env.action_space),
    }

    prediction_space = (
        env.action_space["prediction"] if isinstance(env.action_space, gym.spaces.Dict) else None
    )
    is_classification = isinstance(prediction_space, LogitSpace)
    n_classes = int(prediction_space.shape[-1]) if is_classification else None

    env.action_space.seed(seed)
    residual = 0.0
    loss_vs_ce = 0.0
    lengths, first_ts, last_ts, end_kind = [], [], [], []
    for e in range(int(n_episodes)):
        obs, _ = env.reset(seed=seed + e)
        if isinstance(obs, dict) and "time_step" in obs:
            first_ts.append(float(obs["time_step"]))
        t, done = 0, False
        while not done and t < cap:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            t += 1
            base, loss = float(info["base_reward"]), float(info["prediction"]["loss"])
            residual = max(residual, abs(float(reward) - (base - loss)))
            if is_classification:
                target = int(info["prediction"]["target"])
                ce = -log_softmax(np.asarray(action["prediction"], dtype=np.float64))[target]
                loss_vs_ce = max(loss_vs_ce, abs(loss - ce / math.log(n_classes)))
            done = bool(terminated) or bool(truncated)
        lengths.append(t)
        end_kind.append(
            "terminated" if done and bool(terminated) else ("truncated" if done else "cut")
        )
        if isinstance(obs, dict) and "time_step" in obs:
            last_ts.append(float(obs["time_step"]))
    lengths_arr = np.asarray(lengths)
    report["classification"] = is_classification
    report["rollouts"] = {
        "n_episodes": int(n_episodes),
        "max_reward_residual": float(residual),
        "length_min": int(lengths_arr.min()),
        "length_max": int(lengths_arr.max()),
        "ended_before_limit": int(np.sum(lengths_arr < step_limit)) if step_limit else None,
        "all_end_at_limit": bool(np.all(lengths_arr == step_limit)) if step_limit else None,
        "terminated_at_end": end_kind.count("terminated"),
        "truncated_at_end": end_kind.count("truncated"),
        "cut": end_kind.count("cut"),
        "time_step_first": sorted(set(first_ts)),
        "time_step_last": sorted(set(last_ts)),
    }
    if is_classification:
        report["rollouts"]["max_loss_vs_ce_over_logk"] = float(loss_vs_ce)

    obs_a, _ = env.reset(seed=seed)
    obs_b, _ = env.reset(seed=seed)
    obs_c, _ = env.reset(seed=seed + 1)
    report["reset_deterministic"] = _equal_obs(obs_a, obs_b)
    report["different_seeds_differ"] = not _equal_obs(obs_a, obs_c)
    env.reset(seed=seed)
    return report
