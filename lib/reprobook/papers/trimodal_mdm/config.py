"""Profiles of the notebooks of chapter 03: one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook) and a ``full`` one (one GPU).
``PROFILES`` is keyed by the notebook's file stem; notebooks call
``core.start(mdm, "<notebook>", profile, seed, ...)``.

The paper trains a 3B-parameter model on 6.4T tokens of web text, image-text and audio-text
with learned tokenizers; none of that can be had offline, so the full profile scales the
generated corpus of :mod:`.data` and the models instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Resources

# The base AdamW of every sweep (tuned by hand at the base batch on the digit task).
BASE_LR, BASE_BETAS, BASE_EPS, BASE_WD = 3e-3, (0.9, 0.98), 1e-8, 0.01


@dataclass(frozen=True)
class BasicsConfig:
    """C5 (complementary masks and gradient variance) and C6 (noise schedules)."""

    hidden: int = 128  # width of the MLP denoiser
    batch: int = 32  # sequences per batch
    warm_steps: int = 40  # steps that set the fixed weights of the variance check
    draw_batch: int = 8  # sequences in the fixed batch of the variance check
    n_strata: int = 16  # strata of t in the variance check (geometric near 0 and 1)
    draws: int = 4  # draws of (t, M) per sequence, stratum and group
    groups: int = 24  # independent stratified estimates (the interval is over them)
    schedule_steps: int = 600  # steps of each schedule run (C6)
    n_seeds: int = 3  # seeds per schedule (C6)


@dataclass(frozen=True)
class PretrainConfig:
    """C4: the tri-modal transformer, its losses and its conditional generation."""

    n_train: int = 600  # training sequences per modality
    n_test: int = 100  # held-out sequences per modality
    d_model: int = 32  # transformer width
    n_layers: int = 2  # transformer layers
    n_heads: int = 4  # attention heads
    batch: int = 16  # sequences per batch
    steps: int = 250  # optimiser steps per model
    n_seeds: int = 3  # seeds of the joint model
    extra_ratios: tuple = ((0.0, 1.0, 0.0),)  # text:image:audio mixes, first seed only
    n_generate: int = 40  # generated samples per modality and seed
    sample_steps: int = 8  # unmasking steps per generated sample


@dataclass(frozen=True)
class BatchConfig:
    """C1 and C2: the recipes over physical batch sizes at budgets D and 4D."""

    hidden: int = 128  # width of the MLP denoiser
    base_batch: int = 32  # the batch the base AdamW was tuned at
    base_steps: int = 40  # steps at the base batch and budget D
    batches: tuple = (8, 16, 32, 64, 128, 256)  # physical batch sizes
    budget_factor: int = 4  # the larger budget, in units of D (SDE recipe only)
    n_seeds: int = 3  # seeds per point
    quad_dim: int = 20  # dimensions of the noisy quadratic
    quad_replicates: int = 200  # parallel runs of the noisy quadratic
    quad_base_steps: int = 64  # steps of the noisy quadratic at its base batch


@dataclass(frozen=True)
class GammaConfig:
    """C3 (gamma over budgets) and C7 (a toy scaling-law fit)."""

    hidden: int = 128  # width of the MLP denoiser
    batch: int = 32  # physical batch (the base batch)
    base_steps: int = 40  # steps at the base budget
    gammas: tuple = (0.0, 0.25, 0.5, 0.75, 1.0)  # drift-horizon parameters
    budgets: tuple = (1, 2, 4)  # budgets in units of the base budget
    n_seeds: int = 3  # seeds per point
    widths: tuple = (16, 32, 64, 128)  # MLP widths of the scaling-law fit
    width_budget: int = 4  # budget of the scaling-law runs, in base budgets


# Notebooks 3 (C1) and 4 (C2) sweep the same batch sizes at the same scale.
_FULL_BATCH = BatchConfig(
    hidden=512,
    base_steps=2048,
    batches=(8, 16, 32, 64, 128, 256, 512, 1024),
    n_seeds=5,
    quad_replicates=5000,
    quad_base_steps=2048,
)

FULL_BASICS = BasicsConfig(hidden=512, warm_steps=500, groups=96, schedule_steps=3000)
FULL_PRETRAIN = PretrainConfig(
    n_train=50_000,
    n_test=2_000,
    d_model=512,
    n_layers=8,
    n_heads=8,
    batch=256,
    steps=20_000,
    extra_ratios=((0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0), (1.0, 2.0, 1.0)),
    n_generate=500,
    sample_steps=32,
)
FULL_GAMMA = GammaConfig(
    hidden=512,
    base_steps=2048,
    budgets=(1, 2, 4, 8),
    n_seeds=5,
    widths=(64, 128, 256, 512, 1024),
)
# smoke: the full profile's models and sweeps with every size cut to seconds on one CPU thread
_SMOKE_BATCH = replace(
    _FULL_BATCH,
    hidden=32,
    base_steps=8,
    batches=(8, 32, 128),
    n_seeds=2,
    quad_replicates=50,
    quad_base_steps=16,
)

PROFILES = {
    "01_mdm_basics": {
        "reduced": BasicsConfig(),
        "full": FULL_BASICS,
        "smoke": replace(
            FULL_BASICS,
            hidden=32,
            batch=8,
            warm_steps=5,
            draw_batch=4,
            n_strata=4,
            draws=2,
            groups=3,
            schedule_steps=10,
            n_seeds=2,
        ),
    },
    "02_trimodal_pretraining": {
        "reduced": PretrainConfig(),
        "full": FULL_PRETRAIN,
        "smoke": replace(
            FULL_PRETRAIN,
            n_train=60,
            n_test=20,
            d_model=16,
            n_layers=2,
            n_heads=2,
            batch=8,
            steps=5,
            n_seeds=2,
            extra_ratios=((0.0, 1.0, 0.0), (1.0, 2.0, 1.0)),
            n_generate=4,
            sample_steps=2,
        ),
    },
    "03_batch_size": {
        "reduced": BatchConfig(),
        "full": _FULL_BATCH,
        "smoke": _SMOKE_BATCH,
    },
    "04_batch_budget": {
        "reduced": BatchConfig(),
        "full": _FULL_BATCH,
        "smoke": _SMOKE_BATCH,
    },
    "05_gamma_horizon": {
        "reduced": GammaConfig(),
        "full": FULL_GAMMA,
        "smoke": replace(
            FULL_GAMMA,
            hidden=32,
            batch=8,
            base_steps=8,
            gammas=(0.0, 0.5, 1.0),
            budgets=(1, 2),
            n_seeds=2,
            widths=(16, 32, 64),
            width_budget=1,
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=4.0),
}
