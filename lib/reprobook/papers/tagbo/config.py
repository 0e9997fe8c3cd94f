"""Profiles of the notebooks of chapter 09 (TagBO): one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook) and a ``full`` one (the scale the
chapter would run at on one GPU machine), keyed by the notebook's file stem. Notebooks call
``core.start(tagbo, "02_suzuki", profile, seed, ...)``.

Notebooks: ``01_similarity`` (kernels, learned mix, held-out R^2), ``02_suzuki`` (C1a),
``03_buchwald`` (C1b), ``04_constrained`` (C1c, C4), ``05_prior_quality`` (C2, C3). The seed is
a notebook parameter: replicate r draws its initial design, its prior corruption and its
tie-breaks from (seed, r).

Reduced-profile savings, the same for every method: hyper-parameters are refitted every
``refit_every`` steps (in between, the model takes the new data with the last fit), a few
replicates, short budgets. Full: a refit every step, 20 to 30 replicates over all 15
substrates, 50 steps, every method, and in ``suzuki`` and ``buchwald`` the tiers of an open LLM
(``llm="real"``, :mod:`.llm`) instead of the emulation; ``llm="emulated"`` is the deliberate
stand-in, which needs no model. Smoke: the full configurations with every size cut to seconds
on CPU (the LLM is the chapter's tiny random fixture of the same architecture).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from reprobook.core.resources import Input, Resources

__all__ = [
    "SimilarityConfig",
    "LookupConfig",
    "ConstrainedConfig",
    "SweepConfig",
    "PROFILES",
    "RESOURCES",
]

ALL_METHODS = ("random", "overlap", "cocabo", "descriptor", "tier_mean", "graph", "tagbo")
ALL_SUBSTRATES = tuple(range(15))
LLM_MODEL = "Qwen/Qwen2.5-7B-Instruct"  # the open model the full profile asks for tiers
LLM_FIND = "hf-model:" + LLM_MODEL  # how core finds it (RESOURCES["full"] below)


@dataclass(frozen=True)
class SimilarityConfig:
    """Kernels of one Suzuki pool, the learned mix, held-out R^2 against prior noise."""

    substrate: int = 0  # the Suzuki reactant pair
    beta: float = 1.0  # diffusion time of the heat maps
    n_train: int = 48  # rows the GPs are fitted on
    n_repeats: int = 3  # random training sets per prior noise
    p_flips: tuple[float, ...] = (0.0, 0.2, 0.4, 0.7)  # prior noise levels
    maxiter: int = 50  # L-BFGS iterations of each fit
    w_grid: int = 21  # points of the marginal-likelihood curve over w


@dataclass(frozen=True)
class LookupConfig:
    """BO on one reaction table (C1a or C1b)."""

    substrates: tuple[int, ...] = (0,)  # pools; replicate r uses substrates[r % len]
    methods: tuple[str, ...] = ("random", "overlap", "descriptor", "tagbo")  # compared
    p_flip: float = 0.2  # noise of the emulated prior ("mildly noisy")
    n_init: int = 5  # shared initial design
    n_iter: int = 15  # BO evaluations after it
    n_replicates: int = 5  # replicates, the units of the intervals
    refit_every: int = 5  # hyper-parameter refit period (1: every step)
    maxiter: int = 50  # L-BFGS iterations of each fit
    llm: Literal["emulated", "real"] = "emulated"  # TagBO's tiers: the emulated prior at
    # p_flip (true tiers, corrupted; the stand-in) or "real": those LLM_MODEL gives (llm.py)


@dataclass(frozen=True)
class ConstrainedConfig:
    """BO on the synthetic constrained formulation task (C1c, C4)."""

    methods: tuple[str, ...] = ("random", "descriptor", "tagbo")  # compared
    p_flip: float = 0.2  # noise of the emulated prior
    rho: float = 0.3  # correlation of the descriptors with the latent property
    noise: float = 0.05  # observation noise
    n_init: int = 5  # shared initial design
    n_iter: int = 8  # BO evaluations after it
    n_replicates: int = 3  # replicates (each a new draw of the task)
    refit_every: int = 2  # hyper-parameter refit period
    maxiter: int = 50  # L-BFGS iterations of each fit
    n_screen: int = 16  # feasible (u, t) per combination of levels in the screen
    top_k: int = 1  # combinations refined by SLSQP
    restarts: int = 1  # SLSQP starts per combination
    mc: int = 64  # quasi-MC samples of qLogEI


@dataclass(frozen=True)
class SweepConfig:
    """How good must the prior be: regret against prior noise (C2, C3)."""

    table: str = "suzuki"  # the reaction table
    substrates: tuple[int, ...] = (0,)  # pools
    p_flips: tuple[float, ...] = (0.0, 0.7)  # prior noise levels (0.7 decides C2, C3)
    parrot: bool = True  # add the descriptor-parroting prior
    n_init: int = 5  # shared initial design
    n_iter: int = 12  # BO evaluations after it
    n_replicates: int = 4  # replicates
    refit_every: int = 6  # hyper-parameter refit period
    maxiter: int = 50  # L-BFGS iterations of each fit


# Measured on the shared 2-core machine (another job running), one thread: a TagBO step on a
# Suzuki pool about 0.1 s without a refit and 0.4-0.7 s with one; a constrained step about
# 0.5 s (the screen of 120 combinations, one SLSQP run) plus its fit.
# Both reaction tables run the same full-profile design.
_LOOKUP_FULL = LookupConfig(
    ALL_SUBSTRATES, ALL_METHODS, n_iter=50, n_replicates=30, refit_every=1, maxiter=200,
    llm="real",
)  # fmt: skip
# Smoke: the full path (every method, a refit every step, the LLM's tiers from the tiny
# fixture) on one substrate, two replicates of two steps and short fits.
_LOOKUP_SMOKE = replace(_LOOKUP_FULL, substrates=(0,), n_iter=2, n_replicates=2, maxiter=10)
_CONSTRAINED_FULL = ConstrainedConfig(
    ALL_METHODS,
    n_iter=50,
    n_replicates=20,
    refit_every=1,
    maxiter=200,
    n_screen=64,
    top_k=3,
    restarts=4,
    mc=512,
)
_SWEEP_FULL = SweepConfig(
    substrates=ALL_SUBSTRATES,
    p_flips=(0.0, 0.2, 0.4, 0.7),
    n_iter=50,
    n_replicates=20,
    refit_every=1,
    maxiter=200,
)
_SIMILARITY_FULL = SimilarityConfig(n_train=96, n_repeats=20, maxiter=200, w_grid=41)
PROFILES: dict[str, dict[str, Any]] = {
    "01_similarity": {
        "reduced": SimilarityConfig(),
        "full": _SIMILARITY_FULL,
        "smoke": replace(
            _SIMILARITY_FULL, n_train=24, n_repeats=2, p_flips=(0.0, 0.7), maxiter=10, w_grid=5
        ),
    },
    "02_suzuki": {
        "reduced": LookupConfig(),
        "full": _LOOKUP_FULL,
        "smoke": _LOOKUP_SMOKE,
    },
    "03_buchwald": {
        "reduced": LookupConfig(),
        "full": _LOOKUP_FULL,
        "smoke": _LOOKUP_SMOKE,
    },
    "04_constrained": {
        "reduced": ConstrainedConfig(),
        "full": _CONSTRAINED_FULL,
        "smoke": replace(
            _CONSTRAINED_FULL,
            n_iter=2,
            n_replicates=2,
            maxiter=10,
            n_screen=4,
            top_k=1,
            restarts=1,
            mc=16,
        ),  # fmt: skip
    },
    "05_prior_quality": {
        "reduced": SweepConfig(),
        "full": _SWEEP_FULL,
        "smoke": replace(
            _SWEEP_FULL,
            substrates=(0,),
            p_flips=(0.0, 0.7),
            n_iter=2,
            n_replicates=2,
            maxiter=10,
        ),  # fmt: skip
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The GPs
# are small: the GPU serves the LLM of the full profile; the BO loops are CPU-bound. The LLM is
# used by 02_suzuki and 03_buchwald at llm="real"; llm="emulated" does without it.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "full": Resources(
        gpus=1,
        cpus=16,
        mem_gb=32,
        hours=12.0,
        inputs=(
            Input(
                notebooks=("02_suzuki", "03_buchwald"),
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers",
                licence="Apache-2.0",
                unless="llm=emulated",
            ),
            Input(
                notebooks=("02_suzuki", "03_buchwald"),
                name="Qwen2.5-7B-Instruct",
                kind="weights",
                find="hf-model:Qwen/Qwen2.5-7B-Instruct",
                get="hf download Qwen/Qwen2.5-7B-Instruct",
                licence="Apache-2.0",
                size_gb=15.0,
                unless="llm=emulated",
            ),
        ),
    ),
}
