"""Profiles of the notebooks of the Tactile MNIST chapter (arXiv 2506.06361).

Notebooks, keyed by their file stems: ``01_interface`` (C1), ``02_where_you_look`` (C2, C3) and
``03_touching_digits`` (the digits-glimpse and synthetic tactile environments; C4 and C5, which
cannot be checked here). The seed is a notebook parameter; the episodes of seed s are reset with
seeds derived from it. A notebook resolves its configuration with
``core.start(tactile, "<notebook>", profile, seed, **overrides)``.

Real data cannot be had for the full profile: the suite's MNIST 3D meshes and real touches live
on a model hub that the book's machines cannot reach, and the registered tactile environments
download them when they are built. The full profile therefore runs the same offline
environments at a larger scale: more episodes, longer training, five seeds, and the tactile
sensor at the suite's 64 x 64 resolution. A learned exploration policy (the reinforcement
learning agents of APPLE) is not implemented; see the chapter's introduction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from reprobook.core.resources import Resources

__all__ = ["InterfaceConfig", "StrategyConfig", "TouchConfig", "PROFILES"]


@dataclass(frozen=True)
class InterfaceConfig:
    """C1: the interface checks on four offline environments."""

    n_episodes: int = 20  # random roll-outs per environment
    sensor_resolution: int = 32  # tactile image side, pixels (the suite: 64)


@dataclass(frozen=True)
class StrategyConfig:
    """C2, C3: scripted policies on CircleSquare-v0, one predictor per policy and seed."""

    policies: tuple[str, ...] = ("random", "raster", "gradient")
    seeds: int = 3  # seeds of the roll-outs and the predictor
    train_episodes: int = 600  # roll-outs the predictor is trained on, per policy and seed
    test_episodes: int = 200  # fresh roll-outs it is evaluated on
    epochs: int = 25  # the raster policy's predictor sits at chance for the first ~10
    num_envs: int = 50  # vectorised CircleSquare environments (faster roll-outs)
    level: float = 0.95  # level of the per-policy t-intervals drawn in the bar chart


@dataclass(frozen=True)
class TouchConfig:
    """The digits-glimpse and the synthetic tactile environments (illustrations; C4, C5)."""

    policies: tuple[str, ...] = ("random", "raster", "gradient")
    digits_train_episodes: int = 600
    digits_test_episodes: int = 300
    num_envs: int = 50  # vectorised digits-glimpse environments (faster roll-outs)
    tactile_train_episodes: int = 400
    tactile_test_episodes: int = 200
    sensor_resolution: int = 16  # tactile image side in pixels (the suite: 64)
    epochs: int = 20
    strip_steps: int = 8  # tactile images shown along one trajectory


INTERFACE_FULL = InterfaceConfig(n_episodes=200, sensor_resolution=64)
STRATEGY_FULL = StrategyConfig(seeds=5, train_episodes=20_000, test_episodes=2_000, epochs=50)
TOUCH_FULL = TouchConfig(
    digits_train_episodes=20_000,
    digits_test_episodes=2_000,
    tactile_train_episodes=20_000,
    tactile_test_episodes=2_000,
    sensor_resolution=64,
    epochs=50,
)

# Wall time of each notebook at the reduced sizes, timed by `reprobook run` (2-core CPU, kernel
# start included): interface 9-13 s, where_you_look 55-62 s before the glimpses of all 50
# vectorised CircleSquare environments were interpolated at once (9 roll-out sets and
# predictors), about a quarter less since (its CPU time fell from 68 to 55 s on a loaded
# machine), touching_digits 47 s with a single digits-glimpse environment (digits 31 s; tactile
# 14 s) and about 25 s with 50 vectorised ones (the digits study's CPU time fell from 44 to 13 s
# on the same loaded machine).
# The smoke profile: the full profile's code path with its sizes cut to seconds on one CPU
# thread (two seeds, so the intervals over seeds can still be formed).
PROFILES: dict[str, dict[str, Any]] = {
    "01_interface": {
        "reduced": InterfaceConfig(),
        "full": INTERFACE_FULL,
        "smoke": dataclasses.replace(INTERFACE_FULL, n_episodes=2),
    },
    "02_where_you_look": {
        "reduced": StrategyConfig(),
        "full": STRATEGY_FULL,
        "smoke": dataclasses.replace(
            STRATEGY_FULL, seeds=2, train_episodes=40, test_episodes=20, epochs=2, num_envs=10
        ),
    },
    "03_touching_digits": {
        "reduced": TouchConfig(),
        "full": TOUCH_FULL,
        "smoke": dataclasses.replace(
            TOUCH_FULL,
            digits_train_episodes=20,
            digits_test_episodes=10,
            tactile_train_episodes=20,
            tactile_test_episodes=10,
            epochs=2,
            num_envs=10,
        ),
    },
}


# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, an estimate (the full profile has not been run): GRU predictors on 20,000 episodes for 5
# seeds (estimated).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.1),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=3.0),
}
