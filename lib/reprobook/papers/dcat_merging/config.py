"""Profiles of the notebooks of chapter 14 (DCAT, directional cross-modal alignment transfer).

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id; only the abstract was available, so the objective, the bound and the merged parameters are
our reconstruction).

Notebooks: ``01_two_modalities_one_llm`` (the base LLM, the vision donor and the audio
recipient, trained over three seeds and cached with :func:`reprobook.core.load_or_train`),
``02_asymmetric_merging`` (C1, C2) and ``03_dcat_closed_form`` (C3, C4, and the paper's scale,
C5). ``PROFILES`` is keyed by the notebooks' file stems; a notebook resolves its configuration
with ``core.start(dcat, "<notebook>", profile, seed, ...)``.

``reduced``: 2 CPU cores, a 2-layer d = 64 LLM, about a minute a notebook. ``full``: the same
design at d = 256 with 6 layers on one GPU, and, in notebook 3 (``modelcompose=True``),
ModelCompose's vision, audio and video LoRAs on Vicuna-7B read from ``$DCAT_MODELCOMPOSE_DIR``
and merged in weight space (:mod:`.paper_scale`; no benchmark is run). ``smoke``: the full
profile's code path with every size cut to seconds, the ModelCompose folder being the
chapter's fixture (:mod:`.fixtures`: a tiny Llama and tiny LoRAs in the same layout).
``modelcompose=False`` is the deliberate stand-in that runs the toy alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core.resources import Input, Resources

__all__ = ["DataConfig", "LLMConfig", "TrainConfig", "MergeConfig", "DcatConfig", "PROFILES"]


@dataclass(frozen=True)
class DataConfig:
    """The two modalities and the text sanity task."""

    n_vision_cal: int = 64  # donor calibration images (held out of its training)
    n_vision_test: int = 397  # donor test images; the other 1,336 train it
    n_audio_train: int = 40  # recipient training clips (4 per class): the scarce modality
    n_audio_cal: int = 64  # calibration pool of captioned clips (subsets of it are used)
    n_audio_test: int = 600  # recipient test clips
    sample_rate: int = 4000  # Hz
    duration: float = 0.25  # seconds per clip
    n_harmonics: int = 3  # f0, 2 f0, 3 f0 (those above Nyquist are left out)
    detune: float = 0.04  # +- relative detune of f0
    snr_low: float = 0.0  # dB; each clip's SNR ~ U(snr_low, snr_high)
    snr_high: float = 10.0
    n_text_test: int = 10  # text-only questions of the sanity task (each of the 10 once)
    n_text_train: int = 4000  # text-only pre-training sequences


@dataclass(frozen=True)
class LLMConfig:
    """The tiny LLM and the three trainings (base on text, donor, recipient)."""

    d: int = 64  # width
    heads: int = 4
    mlp: int = 256  # MLP hidden width
    layers: int = 2
    ctx: int = 16  # positions
    base_steps: int = 150  # text pre-training steps (one W0, shared by a notebook's seeds)
    base_batch: int = 32
    base_lr: float = 3e-3
    donor_steps: int = 150  # vision fine-tuning (projector and LLM)
    donor_batch: int = 32
    recipient_steps: int = 100  # audio fine-tuning on its 40 clips
    recipient_batch: int = 16
    lr: float = 1e-3  # fine-tuning learning rate (AdamW)


@dataclass(frozen=True)
class TrainConfig:
    """Notebook 1: train (or load) the three models of each seed."""

    data: DataConfig = DataConfig()
    llm: LLMConfig = LLMConfig()
    n_seeds: int = 5  # training seeds: seed, seed + 1, ...


@dataclass(frozen=True)
class MergeConfig:
    """Notebook 2: merging in both directions, alignment and the InfoNCE bound (C1, C2)."""

    data: DataConfig = DataConfig()
    llm: LLMConfig = LLMConfig()
    n_seeds: int = 5
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)  # task-arithmetic grid
    fixed_alphas: tuple[float, ...] = (0.5, 1.0)  # C1a and C1b are decided at each of these
    n_cal: int = 16  # calibration clips used (alpha, Gram matrices, the bound)
    tau: float = 0.1  # InfoNCE temperature
    ties_density: float = 0.2  # TIES keeps the top 20% of each task vector by magnitude
    dare_drop: float = 0.5  # DARE drop rate (kept entries rescaled by 1 / (1 - p))
    regmean_scale: float = 0.9  # RegMean's off-diagonal scale of the Gram matrices
    lambdas: tuple[float, ...] = (0.1, 1.0, 10.0)  # DCAT-A models in C2's set
    gamma_rel: float = 1e-3  # DCAT ridge: gamma = gamma_rel * mean diag(G_m + G_t)
    gamma_b: float = 1.0  # DCAT-B in C2's set: gamma / mean diag(G_m)


@dataclass(frozen=True)
class DcatConfig:
    """Notebook 3: DCAT against the baselines, the lambda sweep, calibration size (C3, C4)."""

    data: DataConfig = DataConfig()
    llm: LLMConfig = LLMConfig()
    n_seeds: int = 5
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
    n_cal: int = 16
    tau: float = 0.1
    ties_density: float = 0.2
    dare_drop: float = 0.5
    regmean_scale: float = 0.9
    lambdas: tuple[float, ...] = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)  # chosen by the bound
    gamma_rel: float = 1e-3
    gammas_b: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)  # DCAT-B: gamma / mean diag(G_m)
    cal_sizes: tuple[int, ...] = (4, 8, 16, 32, 64)  # C4
    fixed_lambda: float = 1.0  # C3b and C4: DCAT-A at this lambda ...
    fixed_alpha: float = 1.0  # ... and this alpha, so that something is always merged
    # The paper's scale (C5): ModelCompose's LoRAs on Vicuna-7B, merged with the non-zero
    # `alphas`, the `lambdas` (DCAT-A with G = I), `ties_density`, `dare_drop`, `gamma_rel`
    modelcompose: bool = False  # True: run it (full, smoke); False: the toy alone (stand-in)
    mc_donor: str = "vision"  # the ModelCompose modality merged in (the data-rich one)
    mc_recipients: tuple[str, ...] = ("audio", "video")  # the modalities it is merged into
    n_mc_text: int = 16  # text-only sentences the merged LLM's NLL is measured on (at most 16)


# Wall time of each notebook at the reduced sizes, timed by `reprobook run` (2-core CPU, kernel
# start included), with three seeds: two_modalities 37 s (19 s of it the trainings of three
# seeds), and with the models cached asymmetric_merging 20 s and dcat_closed_form 21 s. On the
# same machine shared with other jobs the three took up to 82, 95 (retraining the models) and
# 48 s. A training step of the width-64 LLM takes about 13 ms of one core. Five seeds (since
# 2026-12-05) add about two thirds to each.
_FULL_DATA = DataConfig(n_text_train=20_000)
_FULL_LLM = LLMConfig(
    d=256,
    heads=8,
    mlp=1024,
    layers=6,
    base_steps=3000,
    base_batch=128,
    base_lr=1e-3,
    donor_steps=4000,
    donor_batch=128,
    recipient_steps=300,
    recipient_batch=16,
    lr=3e-4,
)
PROFILES: dict[str, dict[str, Any]] = {
    "01_two_modalities_one_llm": {
        "reduced": TrainConfig(),
        "full": TrainConfig(data=_FULL_DATA, llm=_FULL_LLM, n_seeds=5),
    },
    "02_asymmetric_merging": {
        "reduced": MergeConfig(),
        "full": MergeConfig(data=_FULL_DATA, llm=_FULL_LLM, n_seeds=5),
    },
    "03_dcat_closed_form": {
        "reduced": DcatConfig(),
        "full": DcatConfig(data=_FULL_DATA, llm=_FULL_LLM, n_seeds=5, modelcompose=True),
    },
}

# The smoke profile: the full profile's code path (two seeds, so that every interval has one
# degree of freedom; the ModelCompose part on the chapter's fixture) with every size cut to
# seconds. It decides nothing. The data and model sizes below are shared by the notebooks, so
# that notebooks 2 and 3 load the models that notebook 1 cached.
_SMOKE_DATA = replace(
    _FULL_DATA,
    n_vision_cal=16,
    n_vision_test=20,
    n_audio_train=20,
    n_audio_cal=16,
    n_audio_test=20,
    n_text_train=64,
)
_SMOKE_LLM = replace(  # 30 steps at a larger rate: enough for the merges' accuracies to differ
    _FULL_LLM,
    d=16,
    heads=2,
    mlp=32,
    layers=1,
    base_steps=30,
    base_batch=16,
    base_lr=3e-3,
    donor_steps=30,
    donor_batch=16,
    recipient_steps=30,
    recipient_batch=8,
    lr=3e-3,
)
for _table in PROFILES.values():
    _table["smoke"] = replace(_table["full"], data=_SMOKE_DATA, llm=_SMOKE_LLM, n_seeds=2)
PROFILES["02_asymmetric_merging"]["smoke"] = replace(
    PROFILES["02_asymmetric_merging"]["smoke"], alphas=(0.0, 0.5, 1.0), n_cal=8, lambdas=(1.0,)
)
PROFILES["03_dcat_closed_form"]["smoke"] = replace(
    PROFILES["03_dcat_closed_form"]["smoke"],
    alphas=(0.0, 0.5, 1.0),
    n_cal=4,
    lambdas=(0.0, 1.0),
    gammas_b=(1.0,),
    cal_sizes=(4, 8),
    n_mc_text=3,
)

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The full
# profile's ModelCompose part (notebook 3) holds Vicuna-7B in float32 on the GPU (about 27 GB)
# and a copy of its adapted weight matrices in memory (about 26 GB); its merges and their text
# NLLs take minutes. It has not been run: the weights cannot be had here. The smoke profile runs
# it on the chapter's fixture in seconds.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=96,
        hours=4.0,
        inputs=(
            Input(
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers",
                licence="Apache-2.0",
                unless="modelcompose=False",
                notebooks=("03_dcat_closed_form",),
            ),
            Input(
                name="peft",
                kind="package",
                find="module:peft",
                get="pip install peft",
                licence="Apache-2.0",
                unless="modelcompose=False",
                notebooks=("03_dcat_closed_form",),
            ),
            Input(
                name="Vicuna-7B v1.5 and the ModelCompose weights",
                kind="weights",
                find="env-path:DCAT_MODELCOMPOSE_DIR",
                get="in one folder DIR: hf download lmsys/vicuna-7b-v1.5 --local-dir "
                "DIR/vicuna-7b-v1.5; hf download Adu2021/ModelCompose --local-dir "
                "DIR/ModelCompose (one vision, one audio and one video checkpoint); then "
                "export DCAT_MODELCOMPOSE_DIR=DIR",
                licence="Llama 2 Community Licence; ModelCompose: unknown",
                size_gb=14.0,
                unless="modelcompose=False",
                notebooks=("03_dcat_closed_form",),
            ),
        ),
    ),
}
