"""Profiles of the notebooks of chapter 03: one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook) and a ``full`` one (the paper's
scale). Notebooks call ``core.resolve_notebook(config.PROFILES, "first", profile, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprobook.core.resources import Resources


@dataclass(frozen=True)
class FirstConfig:
    """C1 (example): the estimator's error over repeated samples."""

    n: int = 100  # draws per sample
    n_repeats: int = 200  # repeated samples
    true_mean: float = 1.0  # the mean the draws come from


PROFILES = {
    "first": {"reduced": FirstConfig(), "full": FirstConfig(n=10_000, n_repeats=10_000)},
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.25),
}
