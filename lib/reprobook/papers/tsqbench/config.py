"""Profiles of the notebooks of chapter 12 (TSQBench and TSQAgent): one frozen dataclass per
notebook, with a ``reduced`` instance (2 CPU cores, about a minute a notebook) and a ``full``
one (the paper's scale on one GPU), keyed by the notebook's file stem. Notebooks call
``core.start(tsq, "01_tsqbench_lite", profile, seed, ...)``.

Notebooks: ``01_tsqbench_lite`` (C1), ``02_perceiver_grpo`` (C2), ``03_agent_tools`` (C3),
``04_rating_selection`` (C4). Every claim
is decided over the three seeds ``seed, seed + 1, seed + 2``; the seed is a notebook parameter.
The ``smoke`` instances run the full profile's path (the LLM roles on a tiny random Qwen3 built
by ``fixtures.py``) with every size cut to seconds; they decide nothing.

The LLM roles of notebooks 1 and 2 are a deliberate choice, the field ``llm``: "emulated" runs
the stand-ins (a logistic no-tool judge, an MLP Perceiver), "real" runs Qwen3-4B (the judge, and
the Perceiver trained by GRPO with a LoRA). The reduced profile is "emulated", full and smoke
are "real"; ``-p llm=emulated`` at full runs the stand-ins on purpose, and the run records it.

Where the released code and its design notes disagree, the option is a field and its default is
named: ``reward`` ("precision", the released training code; "f1", the design document),
``n_dims`` ("code": 1-5 dimensions; "design": 0-5), ``p_heavy`` (0.5, the design; the released
generator uses 0.8), ``group`` (8, the reproduction notes; the design: 4), ``changepoint``
("binseg"; the released tool: "pelt") and ``detrend`` ("centered"; the released tools:
"trailing").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core.resources import Input, Resources

__all__ = [
    "BenchConfig",
    "PerceiverConfig",
    "AgentConfig",
    "SelectionConfig",
    "PROFILES",
    "RESOURCES",
    "FULL_MODEL",
]

FULL_MODEL = "Qwen/Qwen3-4B"  # the paper's base model (full profile only)


@dataclass(frozen=True)
class BenchConfig:
    """C1: TSQBench-lite's per-dimension comparisons, the judge against the Inspector."""

    n_seeds: int = 3  # seeds seed .. seed + n_seeds - 1 (C1's units)
    n_judge_train: int = 1500  # training pairs of the no-tool judge per seed
    n_test: int = 200  # test pairs per seed (three seeds: 600)
    cal_grid: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 1.0)  # strengths swept
    cal_pairs: int = 20  # single-defect pairs per (method, strength); paper: 30
    cal_target: float = 0.85  # the 85% rule: judge accuracy that makes a defect heavy
    p_heavy: float = 0.5  # share of heavy defects (design; released code: 0.8)
    n_dims: str = "code"  # dimensions per pair: "code" (1-5) or "design" (0-5)
    changepoint: str = "binseg"  # ruptures search: "binseg" or "pelt" (released)
    detrend: str = "centered"  # moving averages: "centered" or "trailing" (released)
    llm: str = "emulated"  # no-tool judge of C1: "emulated" (logistic) or "real" (Qwen3-4B)


@dataclass(frozen=True)
class PerceiverConfig:
    """C2: the Perceiver's dimension selection, trained by GRPO."""

    n_seeds: int = 3  # seeds (C2's units)
    n_train: int = 2000  # Perceiver training pairs (TSQBench-lite's training split)
    n_test: int = 600  # test pairs
    hidden: int = 64  # MLP width (2 hidden layers)
    updates: int = 300  # GRPO updates
    prompts: int = 16  # training pairs per update
    group: int = 8  # answers sampled per pair, both GRPO runs (reproduction notes: 8; design: 4)
    beta: float = 0.04  # KL penalty to the initial policy, both GRPO runs
    lr: float = 3e-3  # Adam step (the LoRA run: 5e-5)
    supervised_epochs: int = 300  # full-batch BCE epochs of the supervised reference
    reward: str = "precision"  # the reward that decides C2: "precision" or "f1"
    n_dims: str = "code"  # dimensions per pair: "code" (1-5) or "design" (0-5)
    llm: str = "emulated"  # policy deciding C2: "emulated" (the MLP) or "real" (Qwen3-4B)
    llm_pairs: int = 2000  # "real": training pairs of the LoRA run, once each (split's first)
    llm_batch: int = 8  # "real": sampled answers per device step (a multiple of group)
    llm_accumulation: int = 4  # "real": device steps per optimiser step
    llm_lr: float = 5e-5  # "real": AdamW step of the LoRA weights
    answer_tokens: int = 256  # "real": most new tokens of an answer (sampled and greedy)


@dataclass(frozen=True)
class AgentConfig:
    """C3: the whole agent with and without tools."""

    n_seeds: int = 3  # seeds (C3's units)
    n_judge_train: int = 1000  # judge training pairs per seed
    n_policy_train: int = 1000  # Perceiver training pairs per seed
    n_test: int = 200  # test pairs per seed
    cal_grid: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 1.0)  # strengths swept
    cal_pairs: int = 20  # single-defect pairs per (method, strength)
    epsilon: float = 0.02  # margin under which the Adjudicator rechecks a dimension
    hidden: int = 64  # Perceiver width
    updates: int = 200  # Perceiver GRPO updates
    reward: str = "precision"  # Perceiver reward
    changepoint: str = "binseg"  # ruptures search
    detrend: str = "centered"  # moving averages


@dataclass(frozen=True)
class SelectionConfig:
    """C4: the Bradley-Terry rater and top-50% data selection on CBF and CO2."""

    n_seeds: int = 3  # seeds (C4's units)
    defect_share: float = 0.4  # share of each training pool that receives defects
    n_pairs: int = 300  # agent-annotated pairs per pool (paper: 500)
    keep_confidence: float = 0.5  # the filter |2p - 1| >= this
    rater_hidden: int = 64  # rater MLP width
    rater_epochs: int = 100  # full-batch Adam epochs of the rater
    cbf_pool: int = 300  # CBF training series
    cbf_test: int = 300  # CBF test series (clean)
    cbf_length: int = 128  # CBF series length
    cnn_channels: int = 16  # channels of the 1-D CNN
    cnn_epochs: int = 15  # CNN epochs
    co2_block: int = 128  # CO2 block length (96 input + 32 ahead)
    co2_stride: int = 32  # CO2 block stride
    seq_len: int = 96  # forecaster input
    pred_len: int = 32  # forecaster horizon
    ridge_alpha: float = 1.0  # ridge penalty of the linear forecaster
    keep: float = 0.5  # share selected
    changepoint: str = "binseg"  # ruptures search
    detrend: str = "centered"  # moving averages


# Measured while writing the chapter (2 shared cores, other jobs running): a pair generates in
# about 1 ms, its no-tool features take under 1 ms, the tools take 6 to 25 ms per series
# (ruptures' Binseg about 1 ms against PELT's 9 ms), one GRPO update about 10 ms.
# The light/heavy calibration of notebooks 1 and 3 at full: strengths 0.1, 0.2, ..., 1.0.
_FULL_CAL_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

_FULL = {
    "01_tsqbench_lite": BenchConfig(
        n_judge_train=2000,
        n_test=600,
        cal_pairs=30,
        cal_grid=_FULL_CAL_GRID,
        changepoint="pelt",
        llm="real",
    ),
    "02_perceiver_grpo": PerceiverConfig(
        n_train=4000,
        n_test=1000,
        updates=2000,
        hidden=256,
        llm="real",
        llm_pairs=4000,
    ),
    "03_agent_tools": AgentConfig(
        n_judge_train=2000,
        n_policy_train=4000,
        n_test=600,
        cal_grid=_FULL_CAL_GRID,
        cal_pairs=30,
        updates=2000,
        changepoint="pelt",
    ),
    "04_rating_selection": SelectionConfig(
        n_seeds=5,
        n_pairs=1500,
        rater_epochs=200,
        cbf_pool=2000,
        cbf_test=3000,
        cnn_channels=64,
        cnn_epochs=100,
        co2_stride=4,
        changepoint="pelt",
    ),
}

# smoke: the full path with every size cut to seconds on one CPU thread (two seeds where a
# notebook allows it; the LLM roles on the tiny random Qwen3 of fixtures.py, one GRPO step).
_SMOKE = {
    "01_tsqbench_lite": replace(
        _FULL["01_tsqbench_lite"],
        n_seeds=2,
        n_judge_train=80,
        n_test=6,
        cal_grid=(0.5,),
        cal_pairs=1,
    ),
    "02_perceiver_grpo": replace(
        _FULL["02_perceiver_grpo"],
        n_seeds=2,
        n_train=24,
        n_test=4,
        hidden=8,
        updates=3,
        prompts=4,
        group=2,
        supervised_epochs=3,
        llm_pairs=1,
        llm_batch=2,
        llm_accumulation=1,
        answer_tokens=8,
    ),
    "03_agent_tools": replace(
        _FULL["03_agent_tools"],
        n_seeds=2,
        n_judge_train=80,
        n_policy_train=24,
        n_test=8,
        cal_grid=(0.5,),
        cal_pairs=2,
        hidden=8,
        updates=3,
    ),
    "04_rating_selection": replace(
        _FULL["04_rating_selection"],
        n_seeds=2,
        n_pairs=24,
        rater_hidden=8,
        rater_epochs=3,
        cbf_pool=24,
        cbf_test=24,
        cnn_channels=4,
        cnn_epochs=1,
        co2_stride=128,
    ),
}

PROFILES: dict[str, dict[str, Any]] = {
    name: {"reduced": reduced, "full": _FULL[name], "smoke": _SMOKE[name]}
    for name, reduced in (
        ("01_tsqbench_lite", BenchConfig()),
        ("02_perceiver_grpo", PerceiverConfig()),
        ("03_agent_tools", AgentConfig()),
        ("04_rating_selection", SelectionConfig()),
    )
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). full, an
# estimate: Qwen3-4B in bfloat16 (about 8 GB) answering 600 x 3 judge prompts and GRPO with a
# LoRA over 4,000 prompts x 8 answers fit one 80 GB GPU in a few hours; the tools and stand-ins
# add about half an hour of CPU. The packages are in the book's lock, not in the package's own
# dependencies (a Colab install lacks trl and peft). `-p llm=emulated` waives every input: the
# stand-ins then decide C1 and C2, and the run records that choice.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.1),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=48,
        hours=6.0,
        inputs=(
            Input(
                notebooks=("01_tsqbench_lite", "02_perceiver_grpo"),
                unless="llm=emulated",
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers==5.25.0",
                licence="Apache-2.0",
            ),
            Input(
                notebooks=("01_tsqbench_lite", "02_perceiver_grpo"),
                unless="llm=emulated",
                name="trl",
                kind="package",
                find="module:trl",
                get="pip install trl==1.16.0",
                licence="Apache-2.0",
            ),
            Input(
                notebooks=("01_tsqbench_lite", "02_perceiver_grpo"),
                unless="llm=emulated",
                name="peft",
                kind="package",
                find="module:peft",
                get="pip install peft==0.21.2",
                licence="Apache-2.0",
            ),
            Input(
                notebooks=("01_tsqbench_lite", "02_perceiver_grpo"),
                unless="llm=emulated",
                name="Qwen3-4B",
                kind="weights",
                find="hf-model:Qwen/Qwen3-4B",
                get="hf download Qwen/Qwen3-4B",
                licence="Apache-2.0",
                size_gb=8.0,
            ),
        ),
    ),
}
