"""The paper's scale: ModelCompose's modality LoRAs on Vicuna-7B (documented, not run here).

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). Its models and benchmarks are not known; the closest public setting is ModelCompose
(Chen et al., ACL 2024): vision, audio and video LoRAs on ``lmsys/vicuna-7b-v1.5``, published
under the hub id ``Adu2021/ModelCompose``, evaluated on Clotho and AudioCaps captioning, AVQA
and MSRVTT-QA. Loading them needs ``transformers`` and ``peft`` (not in the book's locked
environment), the weights (about 14 GB for the base model) and the benchmarks, none of which
this book's machines can reach. :func:`require` says which of them are missing and stops.

LoRA checkpoints are merged in full form: each adapter's update Delta W = (alpha / r) B A is
added to the base weight first (:func:`lora_delta`), so that task vectors, Gram-matrix closed
forms and TIES act on the same matrices as for fully fine-tuned models.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from reprobook.core import checks

__all__ = ["BASE_MODEL", "ADAPTERS", "BENCHMARKS", "missing", "require", "lora_delta"]

BASE_MODEL = "lmsys/vicuna-7b-v1.5"
ADAPTERS = "Adu2021/ModelCompose"  # vision (CLIP ViT-L/14-336), audio (BEATs), video LoRAs
BENCHMARKS = ("Clotho", "AudioCaps", "AVQA", "MSRVTT-QA")
WEIGHTS_ENV = "DCAT_MODELCOMPOSE_DIR"  # a local folder holding the base model and the adapters


def missing(environ=None) -> list[str]:
    """What the paper-scale run lacks on this machine: packages, weights, benchmarks."""
    env = os.environ if environ is None else environ
    out = [
        f"the Python package {name!r} (not in the book's environment)"
        for name in ("transformers", "peft")
        if importlib.util.find_spec(name) is None
    ]
    folder = env.get(WEIGHTS_ENV)
    if not folder or not os.path.isdir(folder):
        out.append(
            f"the weights of {BASE_MODEL} and the LoRAs of {ADAPTERS} in a local folder named by "
            f"${WEIGHTS_ENV} (the hub cannot be reached from here)"
        )
    out.append("the benchmarks " + ", ".join(BENCHMARKS) + " and ModelCompose's evaluation scripts")
    return out


def require(environ=None) -> None:
    """Stop with a message that names everything the ModelCompose run needs and lacks."""
    lacking = missing(environ)
    raise RuntimeError(
        "The paper-scale part of chapter 14 (merging ModelCompose's vision LoRA into its audio "
        "and video LoRAs on Vicuna-7B) cannot run here. Missing:\n- "
        + "\n- ".join(lacking)
        + "\nRun the reduced or full toy design instead (-p modelcompose=False)."
    )


def lora_delta(A, B, alpha: float, rank: int | None = None) -> torch.Tensor:
    """Delta W = (alpha / r) B A (d_out, d_in) of a LoRA adapter with A (r, d_in), B (d_out, r):
    the full-form update that merges operate on."""
    A, B = torch.as_tensor(A), torch.as_tensor(B)
    if A.ndim != 2 or B.ndim != 2 or B.shape[1] != A.shape[0]:
        raise checks.InputError(
            f"A must be (r, d_in) and B (d_out, r), got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    r = A.shape[0] if rank is None else checks.integer(rank, "rank", minimum=1)
    return (checks.real(alpha, "alpha") / r) * (B @ A)
