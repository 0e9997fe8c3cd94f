"""Profiles of the notebooks of chapter 08 (TailCon): one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook) and a ``full`` one (one GPU, the
paper's CIFAR-LT scale), keyed by the notebook's file stem. Notebooks call
``core.start(tc, "01_baselines", profile, seed, ...)``.

Notebooks 1 and 2 share their training fields, so notebook 2 loads notebook 1's models.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Input, Resources


@dataclass(frozen=True)
class BaselinesConfig:
    """Notebook 1: the long-tail baselines (and the memory LA carries for notebook 2)."""

    dataset: str = "digits"  # "digits", "mnist1d" or "cifar10" / "cifar100" (full)
    imbalance: float = 10.0  # imbalance factor IF = n_max / n_min
    epochs: int = 40  # training epochs of every method
    lr: float = 1e-3  # Adam learning rate (SGD at the full profile)
    batch_size: int = 64  # batch size
    n_seeds: int = 3  # training seeds
    drw_epoch: int = 30  # LDAM-DRW: epoch the re-weighting starts
    stage2_epochs: int = 10  # cRT / LWS: class-balanced epochs on the frozen backbone
    tau: float = 1.0  # LA loss temperature
    optimizer: str = "adam"  # "adam" here, "sgd" on CIFAR (LDAM protocol)
    milestones: tuple[int, ...] = ()  # SGD: epochs of the x0.1 decays
    warmup: int = 0  # SGD: linear warm-up epochs
    weight_decay: float = 0.0  # weight decay
    # TailCon's knobs (LA is trained with the memory filled and never read):
    capacity: int = 16  # memory items per class
    focus_every: int = 10  # epochs between FOCUS consolidations (and after the last)
    focus_steps: int = 50  # surrogate steps per consolidation
    surrogate: str = "lws"  # "lws" (2C parameters) or "rank"
    gamma: float = 1.0  # weight of KL(p_mem || softmax z') in FOCUS
    k: int = 5  # neighbours of the kNN memory posterior
    temperature: float = 0.1  # T of the kNN votes
    lam: float = 0.3  # retrieval weight of the transfer ratio


@dataclass(frozen=True)
class MemoryConfig(BaselinesConfig):
    """Notebook 2: TailCon's memory, retrieval and FOCUS (C1, C2, C4, C5)."""


@dataclass(frozen=True)
class Mnist1dConfig(MemoryConfig):
    """Notebook 3: CE, LA and TailCon on MNIST-1D (shown, not scored)."""

    dataset: str = "mnist1d"  # generated locally
    imbalance: float = 50.0  # imbalance factor
    epochs: int = 15  # training epochs
    n_seeds: int = 1  # training seeds
    n_samples: int = 20_000  # samples generated (80 % training pool)


@dataclass(frozen=True)
class ErosionConfig:
    """Notebook 4: the erosion toy (C3)."""

    rhos: tuple[float, ...] = (0.5, 0.1, 0.02, 0.005)  # tail rates, falling
    kappas: tuple[float, ...] = (0.0, 0.5, 0.9)  # conflict cosines, rising
    n_seeds: int = 4  # seeds of the grid
    n_steps: int = 2000  # online SGD steps per cell
    n_test: int = 600  # balanced test items per cell
    dim: int = 16  # input dimension
    radius: float = 2.0  # distance of the class means from the origin
    lr: float = 0.05  # SGD step size
    capacity: int = 16  # memory items per class
    focus_every: int = 400  # steps between FOCUS consolidations
    focus_steps: int = 30  # surrogate steps per consolidation


_CIFAR = dict(
    dataset="cifar10",
    imbalance=100.0,
    epochs=200,
    lr=0.1,
    batch_size=128,
    drw_epoch=160,
    optimizer="sgd",
    milestones=(160, 180),
    warmup=5,
    weight_decay=2e-4,
)

FULL_BASELINES = BaselinesConfig(**_CIFAR)
FULL_MEMORY = MemoryConfig(**_CIFAR, capacity=64)
FULL_MNIST1D = Mnist1dConfig(n_samples=200_000, epochs=60, n_seeds=3, capacity=64)
FULL_EROSION = ErosionConfig(n_seeds=20, n_steps=10_000, n_test=3000)

# smoke: the full profile's code path (CIFAR-10-LT from the chapter's fixture of a few dozen
# images, ResNet-32, SGD with warm-up, milestones and DRW) cut to two epochs on one CPU thread.
# Notebooks 1 and 2 share these training fields, so notebook 2 loads notebook 1's models.
_SMOKE_CIFAR = dict(
    epochs=2,
    batch_size=8,
    n_seeds=2,
    drw_epoch=1,
    stage2_epochs=1,
    milestones=(1,),
    warmup=1,
    capacity=4,
    focus_every=1,
    focus_steps=2,
)

PROFILES = {
    "01_baselines": {
        "reduced": BaselinesConfig(),
        "full": FULL_BASELINES,
        "smoke": replace(FULL_BASELINES, **_SMOKE_CIFAR),
    },
    "02_memory_consolidation": {
        "reduced": MemoryConfig(),
        "full": FULL_MEMORY,
        "smoke": replace(FULL_MEMORY, **_SMOKE_CIFAR),
    },
    "03_mnist1d": {
        "reduced": Mnist1dConfig(),
        "full": FULL_MNIST1D,
        # 8,000 signals: the balanced validation set takes 100 test signals of each class
        "smoke": replace(
            FULL_MNIST1D,
            n_samples=8000,
            epochs=2,
            n_seeds=2,
            capacity=8,
            focus_every=1,
            focus_steps=5,
        ),
    },
    "04_tail_erosion": {
        "reduced": ErosionConfig(),
        "full": FULL_EROSION,
        "smoke": replace(
            FULL_EROSION, n_seeds=2, n_steps=400, n_test=100, focus_every=100, focus_steps=5
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=32,
        hours=4.0,
        inputs=(
            Input(
                name="CIFAR-10",
                kind="dataset",
                find="hf-dataset:uoft-cs/cifar10",
                get="hf download uoft-cs/cifar10 --repo-type dataset "
                "(or one load_dataset with network)",
                licence="unknown (the dataset card names none)",
                size_gb=0.13,
                notebooks=("01_baselines", "02_memory_consolidation"),
            ),
        ),
    ),
}
