"""Profiles of the notebooks of chapter 13 (AEO against instruction injection): one frozen
dataclass shared by the four notebooks, with a ``reduced`` instance (2 CPU cores, about a minute
a notebook), a ``full`` one (one GPU) and a ``smoke`` one (the full one's path cut to seconds on
CPU, on fixtures), keyed by the notebook's file stem. Notebooks call
``core.start(aeo, "03_detection", profile, seed, ...)``.

The reduced profile trains tiny GPTs on our generated language; the full profile runs the
paper's backbone (``backbone``) on IHEval (``benchmark``), loaded through ``core.locate``. The
seed is a notebook parameter: at the reduced profile the tiny GPTs train at ``seed``,
``seed + 1``, ``seed + 2`` (the replicates of C1-C3) and the evaluation prompts are drawn from
``seed``; at the full profile the replicates are disjoint test blocks of IHEval cut at
``seed`` (one backbone answers them all).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Input, Resources

QWEN = "Qwen/Qwen2.5-14B-Instruct"  # the paper's example backbone
IHEVAL = "zhihz0535/IHEval"  # the paper's benchmark (CC BY-NC-ND 4.0: loaded, never shipped)


@dataclass(frozen=True)
class AEOConfig:
    """The language model, the prompt sets, the detector and the correction."""

    backbone: str = "tiny"  # "tiny" (ours, trained here) or the hub id of the full path's LLM
    benchmark: str = "toy"  # "toy" (our language) or IHEval's hub id (the full path)
    d: int = 64  # width of the tiny GPT (full path: the backbone's, checked when it loads)
    layers: int = 2  # its blocks (full path: the backbone's decoder layers, checked)
    heads: int = 4  # attention heads
    lr: float = 3e-3  # AdamW peak learning rate (one-cycle; the tiny GPT only)
    train_steps: int = 1000  # training steps (the tiny GPT only)
    batch_size: int = 32  # prompts per step (the tiny GPT only)
    n_model_seeds: int = 3  # replicates: model seeds seed, seed + 1, ... (full: IHEval splits)
    n_test_family: int = 100  # test prompts per attack family and for "restated"
    n_test_aligned: int = 150  # aligned test prompts
    n_pool_t1: int = 500  # T1 prompts that train the head, probe and LDA
    n_pool_aligned: int = 250  # aligned prompts beside them
    n_val: int = 200  # validation prompts (half aligned, half T1) for alpha
    window: int = 4  # decoding steps whose states form a response (fixed: no length cue)
    layer: int = 0  # detection and steering layer; 0 means the last block
    k: int = 32  # PCA dimensions
    head_hidden: int = 64  # asymmetric head: hidden width
    head_out: int = 32  # asymmetric head: output width
    head_steps: int = 200  # full-batch Adam steps of the head
    lam: float = 1.0  # weight of the push term
    alphas: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)  # steering strengths tried on validation
    tau_quantile: float = 0.95  # gate: this quantile of compliant pool scores
    max_new_tokens: int = 6  # response tokens the backbone generates (the toy's are always 6)
    gen_batch: int = 16  # prompts per batch of the backbone's generation (full path only)


# The full path: Qwen2.5-14B-Instruct (48 decoder layers of width 5120, 40 heads) on IHEval.
# Its families hold 240 to 1,830 rows (iheval.SPLITS); three disjoint test blocks per family and
# the pool and validation prompts outside them fit in every family. 256 new tokens leave room
# for the leaks IHEval's scorers look for.
FULL = AEOConfig(
    backbone=QWEN,
    benchmark=IHEVAL,
    d=5120,
    layers=48,
    heads=40,
    n_test_family=80,
    n_test_aligned=300,
    n_pool_t1=250,
    n_pool_aligned=600,
    n_val=200,
    k=64,
    max_new_tokens=256,
    gen_batch=16,
)
# The same path on the fixtures (a random two-layer Qwen2 of width 32, up to 40 rows per IHEval
# split, two test blocks of 16 per attack family), cut to seconds on one CPU thread.
SMOKE = replace(
    FULL,
    d=32,
    layers=2,
    heads=4,
    n_model_seeds=2,
    n_test_family=16,
    n_test_aligned=6,
    n_pool_t1=6,
    n_pool_aligned=8,
    n_val=4,
    k=3,
    head_hidden=8,
    head_out=4,
    head_steps=20,
    alphas=(1.0, 4.0),
    max_new_tokens=16,
    gen_batch=32,
)

PROFILES = {
    name: {"reduced": AEOConfig(), "full": FULL, "smoke": SMOKE}
    for name in ("01_language_and_model", "02_replicates", "03_detection", "04_correction")
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The 14B
# backbone in bf16 needs about 30 GB of GPU memory; it answers about 3,800 IHEval prompts once
# (cached for the later notebooks) and regenerates the steered ones of each replicate.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "smoke": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=64,
        hours=6.0,
        inputs=(
            Input(
                name="Qwen2.5-14B-Instruct",
                kind="weights",
                find="hf-model:Qwen/Qwen2.5-14B-Instruct",
                get="hf download Qwen/Qwen2.5-14B-Instruct",
                licence="Apache-2.0",
                size_gb=30.0,
            ),
            Input(
                name="IHEval",
                kind="dataset",
                find="hf-dataset:zhihz0535/IHEval",
                get="hf download zhihz0535/IHEval --repo-type dataset",
                licence="CC BY-NC-ND 4.0",
                size_gb=0.05,
            ),
        ),
    ),
}
