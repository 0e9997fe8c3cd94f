"""Profiles of the notebooks of chapter 19 (Solaris, arXiv 2602.22208): one frozen dataclass per
notebook, ``reduced`` (2 CPU cores, about a minute a notebook), ``full`` (one GPU; planned,
not run here) and ``smoke`` (the full one cut to seconds on CPU). ``PROFILES`` is keyed by the
notebooks' file stems; a notebook resolves its configuration with
``core.start(solaris, "<notebook>", profile, seed, ...)``.

Data: DuetGrid (world.py) only. The paper's Duet recordings, VPT data and released JAX
weights live on a model hub this book's machines cannot reach, and its 1.8 B-parameter model
trains on TPUs; the full profile scales our grid world and model instead (64 x 64 frames would
need a larger window renderer, so it keeps 16 x 16 frames and widens the model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Resources


@dataclass(frozen=True)
class Stage:
    """One flow-matching stage: its data and its optimisation."""

    players: int  # P of the training clips
    frames: int  # T of the training clips
    noise: str  # "standard" (one level per clip, frame 0 clean) or "diffusion_forcing"
    window: int  # causal window in frames; -1: bidirectional
    steps: int  # optimiser steps
    lr: float  # AdamW, betas (0.9, 0.95), no weight decay, constant
    batch: int
    episodes: int  # training episodes generated
    mix: tuple = (0.4, 0.15, 0.15, 0.15, 0.15)  # shares of world.EPISODE_TYPES


@dataclass(frozen=True)
class SelfForcingStage:
    """Checkpointed Self Forcing: a rollout of ``horizon`` frames (the teacher's L_t) by a
    student with window ``window`` (L_s), the 4-step schedule, DMD against the teacher."""

    horizon: int
    window: int
    iterations: int  # critic updates; the generator updates every ``generator_every``
    generator_every: int
    lr_generator: float
    lr_critic: float
    batch: int
    episodes: int


@dataclass(frozen=True)
class Arch:
    """The DiT (paper: 30 blocks of width 1536 on VAE latents)."""

    width: int = 32  # token width
    depth: int = 2  # transformer blocks
    heads: int = 2  # attention heads
    patch: int = 4  # pixels per patch side: 16 tokens per 16 x 16 frame


@dataclass(frozen=True)
class DataConfig:
    """Notebook 1: the judges on ground truth and on broken videos (C5)."""

    episodes: int = 40  # episodes per evaluation set (the paper's default is 32)
    frames: int = 4  # frames per episode
    players: int = 2


_LR_NOTE = "AdamW lr above the paper's 1e-4 (stages 1-3): a deviation for tiny, short runs"


@dataclass(frozen=True)
class VariantsConfig:
    """Notebook 2: multiplayer attention against Concat and independent (C1), staged against
    scratch (C2), each over ``seeds`` training seeds."""

    arch: Arch = Arch()
    seeds: int = 3  # training seeds (offsets of the notebook's seed)
    # stage 2 from scratch, the setting every variant is trained in (lr: see _LR_NOTE)
    multiplayer: Stage = Stage(2, 4, "standard", -1, 30, 3e-3, 8, 160)
    single: Stage = Stage(1, 4, "standard", -1, 15, 3e-3, 8, 160)  # stage 1 of the staged run
    staged: Stage = Stage(2, 4, "standard", -1, 15, 3e-3, 8, 160)  # stage 2 after stage 1
    eval_episodes: int = 16  # per judged set
    sample_steps: int = 4  # denoising levels of the bidirectional sampler
    val_clips: int = 64  # validation clips for C2's flow-matching loss


@dataclass(frozen=True)
class SelfForcingConfig:
    """Notebook 3: exactness and memory of the replay (C3), drift of DF against SF (C4)."""

    variants: VariantsConfig = VariantsConfig()
    causal: Stage = Stage(2, 8, "diffusion_forcing", 4, 15, 3e-3, 8, 120)  # stage 3
    # stage 4; lrs above the paper's 3e-6 / 3e-7 and a generator step every 2nd iteration
    # instead of every 5th: deviations for a tiny model trained for seconds
    sf: SelfForcingStage = SelfForcingStage(8, 4, 6, 2, 1e-4, 1e-4, 4, 24)
    exact_frames: int = 8  # C3(a): clip length of the exactness check
    exact_window: int = 4  # C3(a): window of the exactness check
    memory_horizons: tuple[int, ...] = (4, 8, 16)  # C3(b): teacher horizons L_t
    memory_windows: tuple[int, ...] = (2, 4, 8)  # student windows L_s at the longest L_t
    rollout_frames: int = 16  # C4: rollouts of 4 x the window
    rollout_episodes: int = 8  # C4: explore episodes per seed
    df_steps: int = 8  # C4: denoising levels of the diffusion-forcing model's sampler
    ssim_kernel: int = 5  # torchmetrics SSIM window on 16 x 16 frames


@dataclass(frozen=True)
class PlayersConfig:
    """Notebook 4: the same weights at P = 1 .. 16 (C6)."""

    variants: VariantsConfig = VariantsConfig()
    players: tuple[int, ...] = (1, 2, 4, 8, 16)
    frames: int = 4  # clip length timed
    repeats: int = 3  # timing repeats (C6's units)
    calls: int = 5  # forward passes per timing


_FULL_ARCH = Arch(width=384, depth=8, heads=6)
_FULL_VARIANTS = VariantsConfig(
    arch=_FULL_ARCH,
    multiplayer=Stage(2, 8, "standard", -1, 6000, 1e-4, 32, 20000),
    single=Stage(1, 8, "standard", -1, 3000, 1e-4, 32, 20000),
    staged=Stage(2, 8, "standard", -1, 3000, 1e-4, 32, 20000),
    eval_episodes=64,
    sample_steps=16,
    val_clips=512,
)

_FULL_SELF_FORCING = SelfForcingConfig(
    variants=_FULL_VARIANTS,
    causal=Stage(2, 32, "diffusion_forcing", 8, 2000, 1e-4, 16, 8000),
    sf=SelfForcingStage(32, 8, 1500, 5, 3e-6, 3e-7, 4, 4000),
    memory_horizons=(8, 16, 32, 64),
    rollout_frames=128,
    rollout_episodes=64,
    df_steps=16,
)
_FULL_PLAYERS = PlayersConfig(variants=_FULL_VARIANTS, repeats=5, calls=20)

# The smoke profile: the full profile's code path (its window of 8 frames, the 32-frame
# diffusion-forcing clips, Self Forcing with a generator step every 5th iteration) with every
# size cut to seconds on one CPU thread; two training seeds, so the intervals over seeds exist.
_SMOKE_VARIANTS = replace(
    _FULL_VARIANTS,
    arch=replace(_FULL_ARCH, width=32, depth=1, heads=2),
    seeds=2,
    multiplayer=replace(_FULL_VARIANTS.multiplayer, steps=3, batch=4, episodes=8),
    single=replace(_FULL_VARIANTS.single, steps=2, batch=4, episodes=8),
    staged=replace(_FULL_VARIANTS.staged, steps=2, batch=4, episodes=8),
    eval_episodes=4,
    sample_steps=4,
    val_clips=8,
)

PROFILES = {
    "01_data_and_judges": {
        "reduced": DataConfig(),
        "full": DataConfig(episodes=200),
        "smoke": replace(DataConfig(episodes=200), episodes=8),
    },
    "02_variants": {"reduced": VariantsConfig(), "full": _FULL_VARIANTS, "smoke": _SMOKE_VARIANTS},
    "03_self_forcing": {
        "reduced": SelfForcingConfig(),
        "full": _FULL_SELF_FORCING,
        "smoke": replace(
            _FULL_SELF_FORCING,
            variants=_SMOKE_VARIANTS,
            causal=replace(_FULL_SELF_FORCING.causal, steps=2, batch=2, episodes=4),
            sf=replace(_FULL_SELF_FORCING.sf, iterations=6, batch=2, episodes=4),
            memory_horizons=(8, 16),
            rollout_frames=24,
            rollout_episodes=2,
            df_steps=4,
        ),
    },
    "04_more_players": {
        "reduced": PlayersConfig(),
        "full": _FULL_PLAYERS,
        "smoke": replace(_FULL_PLAYERS, variants=_SMOKE_VARIANTS, repeats=2, calls=2),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=4.0),
}
