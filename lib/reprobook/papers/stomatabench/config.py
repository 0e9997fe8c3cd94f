"""Profiles of the notebooks of chapter 15 (StomataBench): one frozen dataclass per notebook,
with a ``reduced`` instance (2 CPU cores, under a minute a notebook), a ``full`` one (the GPU
profile: 2,000 synthetic images of 384 x 384 px, torchvision's Faster R-CNN and FCOS trained from
scratch beside D1-D3, and the public hardwood stomata through ``datasets``) and a ``smoke`` one
(the full one with every size cut to seconds on a CPU, fed by a fixture of the hub dataset).

``Sizes.detector`` chooses what fills the slots of ``torchvision_models``: ``"torchvision"``
(full and smoke) trains torchvision's detectors themselves; ``"toy"`` (reduced, where there are
no slots) trains D3's tiny CenterNet in each slot instead, a deliberate stand-in that the run
records (``-p detector=toy``: torchvision has no CPU build for this book's torch).

``PROFILES`` is keyed by the notebooks' file stems: ``01_synthetic_epidermis`` (the
generator), ``02_detectors`` (D1-D3 over the replicates), ``03_coco_ap`` (C4, C5),
``04_measurement_reliability`` (C1, C2, C3); a notebook resolves its configuration with
``core.start(stomata, "<notebook>", profile, seed, ...)``. The seed is a notebook parameter:
replicate r uses data generated at ``seed + r`` and trains D3 at ``seed + r``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core.resources import Input, Resources

__all__ = [
    "Sizes",
    "EpidermisConfig",
    "DetectorsConfig",
    "CocoApConfig",
    "ReliabilityConfig",
    "PROFILES",
    "RESOURCES",
]


@dataclass(frozen=True)
class Sizes:
    """What one replicate generates and trains: split sizes, D3's training, detection caps.
    The notebooks after the first inherit these fields; they are the key of the cached
    replicates, so a notebook run with other sizes computes its own."""

    n_train: int = 48  # training images (8 woody styles)
    n_val: int = 12  # validation images, same styles (the frozen threshold is chosen here)
    n_test: int = 12  # images per test split: near-domain, crop, far-OOD
    size: int = 192  # image side, px (1 um/px for most styles: 0.037 mm²)
    d3_steps: int = 200  # D3's AdamW steps
    d3_batch: int = 8  # crops per step
    d3_crop: int = 48  # crop side, px
    d3_width: int = 24  # channels of D3's convolutions
    max_dets: int = 80  # detections kept per 192 px image (the large field keeps 300)
    n_replicates: int = 3  # replicates (seeds) behind the intervals of C1-C3
    torchvision_models: tuple[str, ...] = ()  # full: ("fasterrcnn", "fcos"), from scratch
    # "torchvision": the detectors of torchvision_models; "toy": D3's tiny CenterNet stands in
    # for each (a recorded stand-in); the reduced profile has no slots to fill
    detector: str = "toy"
    tv_steps: int = 0  # AdamW steps of each detector in torchvision_models
    tv_batch: int = 0  # whole images per step
    hub_dataset: str | None = None  # full: real stomata through `datasets`
    hub_train: int = 0  # hardwood images the learned detectors train on
    hub_val: int = 0  # hardwood images that freeze the operating threshold
    hub_test: int = 0  # images of each real test split: hardwood (seen species), Populus
    hub_width: int = 0  # real images are resized to this width, px (aspect kept)


FULL_SIZES = dict(
    n_train=2000,
    n_val=200,
    n_test=100,
    size=384,
    d3_steps=4000,
    d3_batch=32,
    d3_crop=128,
    d3_width=64,
    max_dets=300,
    n_replicates=5,
    torchvision_models=("fasterrcnn", "fcos"),
    detector="torchvision",
    tv_steps=6000,
    tv_batch=8,
    hub_dataset="XintongHe/Stomatal_Images_Datasets",
    hub_train=2000,
    hub_val=200,
    hub_test=300,
    hub_width=512,
)
# the full path in seconds: a few 96 px images, two replicates, a step or two of training
SMOKE_SIZES = dict(
    n_train=6,
    n_val=2,
    n_test=2,
    size=96,
    d3_steps=2,
    d3_batch=2,
    d3_crop=32,
    d3_width=8,
    max_dets=40,
    n_replicates=2,
    tv_steps=1,
    tv_batch=1,
    hub_train=3,
    hub_val=2,
    hub_test=2,
    hub_width=96,
)


@dataclass(frozen=True)
class EpidermisConfig:
    """The generator's tour: example images, densities, and the generator's own checks."""

    n_per_split: int = 24  # images per split for the density histograms
    n_density_check: int = 200  # images behind the realised-density check


@dataclass(frozen=True)
class DetectorsConfig(Sizes):
    """D1-D3 fitted and trained on each replicate; their detections cached for later notebooks."""


@dataclass(frozen=True)
class CocoApConfig(Sizes):
    """AP per split (C5 recorded as not checkable) and maxDets 100 against 300 (C4)."""

    n_large: int = 3  # 512 x 512 large-field images (130-180 stomata each)


@dataclass(frozen=True)
class ReliabilityConfig(Sizes):
    """Threshold sweeps, counts, densities, misses and rankings (C1, C2, C3)."""

    n_thresholds: int = 200  # thresholds of each sweep (quantiles of the scores)


# Measured on the shared 2-core machine, one torch thread (other jobs running): a replicate's
# data 1-3 s; D1 and D2 fitted in 1-2 s; D3's 200 steps 6-12 s; detection of the 48 validation
# and test images by the three detectors 5-10 s; COCOeval of one split 0.2-0.6 s.
_EPIDERMIS_FULL = EpidermisConfig(n_per_split=100, n_density_check=1000)
_DETECTORS_FULL = DetectorsConfig(**FULL_SIZES)
_COCO_AP_FULL = CocoApConfig(**FULL_SIZES, n_large=30)
_RELIABILITY_FULL = ReliabilityConfig(**FULL_SIZES, n_thresholds=500)

PROFILES: dict[str, dict[str, Any]] = {
    "01_synthetic_epidermis": {
        "reduced": EpidermisConfig(),
        "full": _EPIDERMIS_FULL,
        "smoke": replace(_EPIDERMIS_FULL, n_per_split=4, n_density_check=8),
    },
    "02_detectors": {
        "reduced": DetectorsConfig(),
        "full": _DETECTORS_FULL,
        "smoke": replace(_DETECTORS_FULL, **SMOKE_SIZES),
    },
    "03_coco_ap": {
        "reduced": CocoApConfig(),
        "full": _COCO_AP_FULL,
        "smoke": replace(_COCO_AP_FULL, **SMOKE_SIZES, n_large=1),
    },
    "04_measurement_reliability": {
        "reduced": ReliabilityConfig(),
        "full": _RELIABILITY_FULL,
        "smoke": replace(_RELIABILITY_FULL, **SMOKE_SIZES, n_thresholds=20),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). full, an
# estimate (not run here: no GPU): Faster R-CNN and FCOS from scratch for 6,000 steps of 8 images
# each, on the 2,000 synthetic images of 384 px of each of five replicates and on 2,000 real
# images at 512 px, D3 at width 64; reading the hub dataset's archive (9.3 GB, about 11,000
# images) once into the datasets cache. smoke: seconds a notebook on 2 CPU cores.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.1),
    "smoke": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=32,
        hours=8.0,
        inputs=(
            Input(
                notebooks=("02_detectors", "03_coco_ap", "04_measurement_reliability"),
                unless="detector=toy",
                name="torchvision",
                kind="package",
                find="module:torchvision",
                get="pip install torchvision==0.28.0",
                licence="BSD-3-Clause",
            ),
            Input(
                notebooks=("02_detectors", "03_coco_ap", "04_measurement_reliability"),
                name="hardwood stomata images",
                kind="dataset",
                find="hf-dataset:XintongHe/Stomatal_Images_Datasets",
                get="hf download XintongHe/Stomatal_Images_Datasets --repo-type dataset",
                licence="CC-BY-4.0",
                size_gb=9.5,
            ),
        ),
    ),
}


def sizes_of(cfg: Sizes) -> Sizes:
    """The :class:`Sizes` part of a notebook's configuration (the replicates' cache key)."""
    import dataclasses

    return Sizes(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(Sizes)})
