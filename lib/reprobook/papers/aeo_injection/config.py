"""Profiles of the notebooks of chapter 13 (AEO against instruction injection): one frozen
dataclass shared by the four notebooks, with a ``reduced`` instance (2 CPU cores, about a minute
a notebook) and a ``full`` one (one GPU). Notebooks call
``core.resolve_notebook(config.PROFILES, "detection", profile, ...)``.

The seed is a notebook parameter: the tiny GPTs train at ``seed``, ``seed + 1``, ``seed + 2``
(the model seeds of C1-C3) and the evaluation prompts are drawn from ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprobook.core.resources import Input, Resources

QWEN = "Qwen/Qwen2.5-14B-Instruct"  # the paper's example backbone
IHEVAL = "zhihz0535/IHEval"  # the paper's benchmark (CC BY-NC-ND 4.0: loaded, never shipped)


@dataclass(frozen=True)
class AEOConfig:
    """The language model, the prompt sets, the detector and the correction."""

    backbone: str = "tiny"  # "tiny" (ours) or a hub id, tried at full (falls back to tiny)
    benchmark: str = "toy"  # "toy" (our language) or IHEval's hub id at full
    d: int = 64  # width of the tiny GPT
    layers: int = 2  # its blocks
    heads: int = 4  # attention heads
    lr: float = 3e-3  # AdamW peak learning rate (one-cycle)
    train_steps: int = 1000  # training steps
    batch_size: int = 32  # prompts per step
    n_model_seeds: int = 3  # model seeds: seed, seed + 1, ...
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


PROFILES = {
    name: {
        "reduced": AEOConfig(),
        "full": AEOConfig(
            backbone=QWEN,
            benchmark=IHEVAL,
            d=256,
            layers=6,
            heads=8,
            lr=1e-3,
            train_steps=10_000,
            batch_size=64,
            n_test_family=400,
            n_test_aligned=600,
            n_pool_t1=2000,
            n_pool_aligned=1000,
            n_val=600,
            k=64,
        ),
    }
    for name in ("language_model", "replicates", "detection", "correction")
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The full
# profile's toy (6 layers, d = 256) trains in minutes on one GPU; the 14B backbone in bf16 needs
# about 30 GB of GPU memory and its weights and IHEval from the hub.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=64,
        hours=2.0,
        inputs=(
            Input(
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers==5.23.0 accelerate",
                licence="Apache-2.0",
            ),
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
