"""Profiles of the notebooks of chapter 11: one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook), a ``full`` one (one GPU) and a
``smoke`` one (the full one cut to seconds on CPU).
The training notebooks share :class:`Train`, so a model trained by one notebook is loaded by
the next (the checkpoint key is :func:`train_key`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from reprobook.core.resources import Resources


@dataclass(frozen=True)
class Train:
    """The scenes, the backbone and the training budget shared by every variant."""

    size: int = 16  # image side in pixels
    patch: int = 4  # patch side: (size / patch)^2 tokens per view
    n_ctx: int = 2  # context views per scene
    n_tgt: int = 1  # target views per scene
    dim: int = 32  # token width D
    depth: int = 2  # layers L
    heads: int = 2  # attention heads
    mlp_hidden: int = 64  # MLP width (the KV model widens it to match parameters)
    fw_heads: int = 1  # fast-weight heads
    fw_hidden: int = 64  # fast-weight hidden width (SwiGLU)
    base_lr: float = 0.01  # fast-weight base learning rate
    muon_steps: int = 0  # Newton-Schulz steps of the update (0: plain gradient)
    batch: int = 32  # scenes per training step
    steps: int = 150  # optimiser steps per variant
    lr: float = 1e-2  # AdamW learning rate
    warmup: int = 10  # linear warm-up steps, then cosine decay
    n_train: int = 256  # training scenes per seed
    n_test: int = 128  # held-out test scenes
    n_seeds: int = 3  # seeds trained per variant


# A quality comparison (C1-C3) counts only when each model it needs beats the mean-colour floor
# by this many dB over the whole union interval of its seeds; otherwise it is inconclusive.
FLOOR_MARGIN = 0.5


def train_key(cfg) -> dict:
    """The fields of :class:`Train` in ``cfg`` (the checkpoint key of a trained model)."""
    return {f.name: getattr(cfg, f.name) for f in fields(Train)}


def train_part(cfg) -> Train:
    return Train(**train_key(cfg))


@dataclass(frozen=True)
class Scenes(Train):
    """Notebook 1: the scenes, the tokens and the KV-cache decoder."""

    n_show: int = 6  # scenes shown in the grids


@dataclass(frozen=True)
class TTTvsTTB(Train):
    """Notebook 2: TTT against TTB-A at equal budget (C2)."""

    n_boot: int = 2000  # bootstrap resamples of the paired intervals


@dataclass(frozen=True)
class Variants(Train):
    """Notebook 3: TTB-B, the GT-input ablation, the table of all variants (C1, C3)."""

    n_boot: int = 2000  # bootstrap resamples of the paired intervals
    with_b: bool = False  # also train TTB-B (three more trainings)


@dataclass(frozen=True)
class RenderCost:
    """Notebook 4: render cost against the number of context views (C4, C5), random weights."""

    size: int = 32  # image side
    patch: int = 8  # patch side
    dim: int = 32  # token width
    depth: int = 2  # layers
    heads: int = 2  # attention heads
    fw_hidden: int = 64  # fast-weight hidden width
    n_views: tuple = (2, 8, 32, 128)  # context views N
    repeats: int = 3  # timed repetitions (after warm-ups)
    warmup: int = 1  # untimed warm-up calls
    bf16: bool = False  # bfloat16 (the GPU profile)


FULL_TRAIN = dict(
    size=64, patch=8, n_ctx=8, dim=256, depth=8, heads=8, mlp_hidden=1024, fw_heads=2,
    fw_hidden=512, muon_steps=5,
    batch=16, steps=2000, lr=1e-3, warmup=100, n_train=16_384, n_test=256,
)  # fmt: skip

RENDER_COST_FULL = RenderCost(
    size=256, dim=768, depth=24, heads=12, fw_hidden=1536,
    n_views=(4, 8, 16, 32, 64), repeats=10, warmup=3, bf16=True,
)  # fmt: skip

# The smoke profile: the full profile's code path (Muon updates, TTB-B, bfloat16 timing) with
# every size cut to seconds on one CPU thread; two seeds, so the intervals over seeds exist.
SMOKE_TRAIN = dict(
    size=16, patch=8, n_ctx=2, dim=32, depth=2, heads=2, mlp_hidden=64, fw_hidden=64,
    batch=8, steps=4, warmup=1, n_train=16, n_test=16, n_seeds=2,
)  # fmt: skip

PROFILES = {
    "01_scenes_and_kv": {
        "reduced": Scenes(),
        "full": Scenes(**FULL_TRAIN),
        "smoke": replace(Scenes(**FULL_TRAIN), **SMOKE_TRAIN),
    },
    "02_ttt_vs_ttb": {
        "reduced": TTTvsTTB(),
        "full": TTTvsTTB(**FULL_TRAIN),
        "smoke": replace(TTTvsTTB(**FULL_TRAIN), **SMOKE_TRAIN, n_boot=200),
    },
    "03_variants_and_ablation": {
        "reduced": Variants(),
        "full": Variants(**FULL_TRAIN, with_b=True),
        "smoke": replace(Variants(**FULL_TRAIN, with_b=True), **SMOKE_TRAIN, n_boot=200),
    },
    "04_render_cost": {
        "reduced": RenderCost(),
        "full": RENDER_COST_FULL,
        "smoke": replace(
            RENDER_COST_FULL, size=32, dim=32, depth=2, heads=2, fw_hidden=64,
            n_views=(4, 8), repeats=2, warmup=1,
        ),
    },
}  # fmt: skip

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.08),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=2.0),
}

__all__ = ["Train", "Scenes", "TTTvsTTB", "Variants", "RenderCost", "PROFILES", "RESOURCES"]
