"""Profiles of the notebooks of the chapter on Text as Partial Constraint (arXiv 2607.03143).

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language
Learning", arXiv 2607.03143 (full text read; hyperparameters of its Appendix B.4).

Every notebook may train the models it needs (a checkpoint written by an earlier notebook is
loaded when its key matches, see :func:`reprobook.core.load_or_train`), so every notebook's
configuration carries the same data and training fields, :class:`Training`, and adds its own.
The training fields must agree between notebooks for the checkpoints to be shared; change them
through the profile, not in one notebook, unless a separate model is what you want.

A *replicate* ``i`` is one pretraining (seed ``seed + i``) and the fine-tuning of every arm from
it (the same seed), on the notebook seed's data. The statistical claims take one value per
replicate and a Student-t interval over them, so their intervals cover the spread of pretraining
as well as of fine-tuning.

The *world* is the generated data's share of wrong details, ``p_wrong``: every non-core detail a
caption states is wrong with that probability (the core never is). The chapter's trained claims
are decided at ``p_wrong = 0.25``, the setting of the paper's premise that captions omit and err;
``p_wrong = 0`` (every stated detail true) is the contrast, and ``worlds`` sweeps the rate.

Notebooks (their keys in :data:`PROFILES` are their file stems): ``01_diagnostic`` (C6 and the
preliminary study), ``02_core_residual`` (C1, C2, C3), ``03_calibration`` (C4),
``04_robustness`` (C7, C8), ``05_ablations`` (C5) and ``06_worlds`` (the sweep of ``p_wrong``, no
claim). A notebook resolves its configuration with
``core.start(tpc, "<notebook>", profile, seed, **overrides)``; the configurations check their
replicate fields themselves (distinct non-negative ids, subsets that lie in ``replicates``), so
an override that breaks them fails there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from reprobook.core import checks
from reprobook.core.resources import Resources

__all__ = [
    "Training",
    "DiagnosticConfig",
    "CoreResidualConfig",
    "CalibrationConfig",
    "RobustnessConfig",
    "AblationConfig",
    "WorldsConfig",
    "PROFILES",
]


def _check_replicates(replicates: tuple[int, ...]) -> None:
    """Replicate ids: distinct integers >= 0."""
    for i in replicates:
        checks.integer(i, "replicates", minimum=0)
    if len(replicates) != len(set(replicates)):
        raise checks.InputError(
            f"replicates must be distinct non-negative integers, got {replicates!r}"
        )


def _check_subset(name: str, subset: tuple[int, ...], replicates: tuple[int, ...]) -> None:
    """A non-empty subset of the replicates (the ones that also train the costlier arms)."""
    if not subset or not set(subset) <= set(replicates):
        raise checks.InputError(
            f"{name} must be a non-empty subset of replicates {replicates!r}, got {subset!r}"
        )


@dataclass(frozen=True)
class Training:
    """Data, encoders and optimisation shared by every notebook (reduced: about 54k parameters)."""

    n_train: int = 4000  # generated training images, each with n_views captions
    n_test: int = 1000  # generated test images (their own seed stream)
    image_size: int = 32  # pixels per side
    n_views: int = 5  # caption views per image (K); view 0 states the core only
    p_mention: float = 0.5  # probability that a view states each non-core attribute
    p_wrong: float = 0.25  # share of stated non-core details that are wrong (the claims' world)
    image_encoder: str = "cnn"  # "cnn" (reduced) or "vit" (full)
    embed_dim: int = 64  # joint embedding dimension d
    text_layers: int = 0  # Transformer layers of the text encoder (0: masked mean of words + MLP)
    pretrain_steps: int = 300  # CLIP pretraining steps from random initialisation
    pretrain_lr: float = 3e-3  # AdamW rate of pretraining (best of 1e-3, 3e-3, 1e-2 at 300 steps)
    finetune_steps: int = 100  # steps of each fine-tuning arm, all from the same pretrained weights
    batch_size: int = 128  # images per step (each with its K caption views)
    lr_encoders: float = 5e-4  # fine-tuning rate of both encoders (paper: 5e-5 on pretrained ViTs)
    lr_filter: float = 5e-3  # learning rate of the core filter (the paper's 10x ratio)
    weight_decay: float = 0.1  # AdamW weight decay (paper: 0.1)
    tau0: float = 0.07  # base temperature (paper: 0.07)
    gamma: float = 1.0  # uncertainty scaling of the temperature (paper: 1.0)
    lambda_agree: float = 1.0  # weight of the core-agreement term (paper: 1.0)
    lambda_nc: float = 0.1  # weight of the non-commitment term (paper: 0.1)
    views: tuple[int, ...] = (3, 4, 5)  # K' drawn per step (paper: 3, 4 or 5)
    replicates: tuple[int, ...] = (0, 1, 2)  # pretraining + CLIP-FT + TPC, seed = notebook seed + i

    def __post_init__(self) -> None:
        _check_replicates(self.replicates)
        checks.probability(self.p_wrong, "p_wrong")


@dataclass(frozen=True)
class DiagnosticConfig(Training):
    """C6 and the preliminary study on the pretrained (CLIP-objective) model."""

    theorem_instances: int = 200  # random (v, c, U, rho) instances of Theorem 5.1
    theorem_dim: int = 64  # ambient dimension of those instances (the embedding dimension)
    theorem_samples: int = 4000  # sampled members of each ambiguity set
    dense_grid: int = 200_001  # random members of a 2-D residual set (dense enough for a 1e-6 gap)
    lemma_sets: int = 5000  # random view sets for Lemma A.1 (K = 2..8, some nearly coincident)
    n_bins: int = 10  # quantile bins of the dispersion and leakage plots


@dataclass(frozen=True)
class CoreResidualConfig(Training):
    """C1, C2, C3: CLIP-FT, TPC and TPC without the agreement term (C1's baseline)."""


@dataclass(frozen=True)
class AblationConfig(Training):
    """C5: TPC against its four single-factor ablations, on every replicate."""

    n_bootstrap: int = 2000  # paired bootstrap resamples of the test images (shown, not decided)


@dataclass(frozen=True)
class WorldsConfig(Training):
    """The sweep of the wrong-detail rate: CLIP-FT and TPC in each world, every replicate."""

    worlds: tuple[float, ...] = (0.0, 0.25)  # p_wrong of each world (reduced: a subset)
    n_top: int = 100  # hardest non-matching images in each candidate set (paper: 100)
    n_random: int = 300  # random non-matching images in each candidate set (paper: 300)
    n_bins: int = 15  # equal-width bins of the ECE (paper: 15)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.worlds or len(set(self.worlds)) != len(self.worlds):
            raise checks.InputError(f"worlds must be distinct rates, got {self.worlds!r}")
        for p in self.worlds:
            checks.probability(p, "worlds")
        if self.p_wrong not in self.worlds:
            raise checks.InputError(
                f"worlds must hold the claims' world p_wrong = {self.p_wrong}, got {self.worlds!r}"
            )


@dataclass(frozen=True)
class CalibrationConfig(Training):
    """C4: retrieval and zero-shot calibration, risk-coverage, the AUROC of u_hat."""

    n_top: int = 100  # hardest non-matching images in each candidate set (paper: 100)
    n_random: int = 300  # random non-matching images in each candidate set (paper: 300)
    n_bins: int = 15  # equal-width bins of the ECE (paper: 15)


@dataclass(frozen=True)
class RobustnessConfig(Training):
    """C7: zero-shot accuracy under PGD and APGD, with and without adversarial fine-tuning."""

    n_attack: int = 500  # test images attacked
    eps: tuple[float, ...] = (2 / 255, 4 / 255)  # l_inf radii (Table 1: 2/255; App. B.3: 4/255)
    attack_steps: int = 10  # iterations of PGD and APGD-CE
    adv_eps: float = 4 / 255  # radius of adversarial fine-tuning
    adv_steps: int = 2  # PGD steps inside each adversarial fine-tuning step
    adv_alpha: float = 2 / 255  # PGD step size inside adversarial fine-tuning
    robust_replicates: tuple[int, ...] = (0,)  # replicates adversarially fine-tuned and attacked

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_subset("robust_replicates", self.robust_replicates, self.replicates)


# The full profile: the paper's scale as we read its Appendix B.4, on one GPU (a ViT with patch 4
# on 64x64 images, trained from scratch on a million generated image-caption sets, then every arm
# fine-tuned, three seeds).
# Not run on this machine; sized by our estimate, about 1-2 GPU hours in all.
_FULL_TRAINING = dict(
    n_train=1_000_000,
    n_test=5000,
    image_size=64,
    image_encoder="vit",
    embed_dim=256,
    text_layers=4,
    pretrain_steps=20_000,
    pretrain_lr=5e-4,
    finetune_steps=2000,
    batch_size=1024,
    lr_encoders=5e-5,
    lr_filter=5e-4,
    replicates=(0, 1, 2),
)

# Cost of each notebook at the reduced sizes (one torch thread, the chapter's notebooks in order so
# that each loads the checkpoints of the earlier ones). A training step of the reduced dual encoder
# takes 20-50 ms on one core, depending on the day's machine: a pretraining run (300 steps) takes
# 6-16 s, a fine-tuning run (100 steps) 2-5 s and an adversarial one about three times that.
# diagnostic: three pretrainings and about 10 s of theory checks; core_residual: nine fine-tuning
# runs (CLIP-FT, TPC and TPC without the agreement term on three replicates); calibration: only
# scoring; robustness: two adversarial runs and 16 attacks on 500 images (about 10 s); ablations:
# nine fine-tuning runs (three ablations on three replicates); worlds: six fine-tuning runs (the
# all-true world, from the claims' world's pretrained models). Fine-tuning ran 200 steps until
# the machine's slower days put four notebooks over a minute; what 200 steps gave is kept in the
# claims' revisions. Runs without a checkpoint train two at a time, one one-thread process per
# core (train.train_side_by_side; starting the two processes costs about 10 s), which took the
# notebooks from 50-70 s to 40-56 s. The full sweep of four worlds does not fit a reduced
# notebook, so the reduced profile sweeps two.
# The smoke profile: the full profile's models (a ViT, a text Transformer) and arms on a few
# dozen generated images and a few steps, seconds on one CPU thread.
_SMOKE_TRAINING = dict(
    n_train=48,
    n_test=32,
    image_size=16,
    embed_dim=16,
    text_layers=1,
    pretrain_steps=3,
    finetune_steps=2,
    batch_size=8,
    replicates=(0, 1),
)
FULL_DIAGNOSTIC = DiagnosticConfig(
    **_FULL_TRAINING, theorem_instances=2000, theorem_dim=256, lemma_sets=50_000
)
FULL_CORE_RESIDUAL = CoreResidualConfig(**_FULL_TRAINING)
FULL_CALIBRATION = CalibrationConfig(**_FULL_TRAINING)
FULL_ROBUSTNESS = RobustnessConfig(
    **_FULL_TRAINING, n_attack=5000, attack_steps=100, robust_replicates=(0, 1, 2)
)
FULL_ABLATIONS = AblationConfig(**_FULL_TRAINING)
FULL_WORLDS = WorldsConfig(**_FULL_TRAINING, worlds=(0.0, 0.1, 0.25, 0.4))

PROFILES: dict[str, dict[str, Any]] = {
    "01_diagnostic": {
        "reduced": DiagnosticConfig(),
        "full": FULL_DIAGNOSTIC,
        "smoke": replace(
            FULL_DIAGNOSTIC,
            **_SMOKE_TRAINING,
            theorem_instances=8,
            theorem_dim=16,
            theorem_samples=100,
            dense_grid=2001,
            lemma_sets=50,
            n_bins=4,
        ),
    },
    "02_core_residual": {
        "reduced": CoreResidualConfig(),
        "full": FULL_CORE_RESIDUAL,
        "smoke": replace(FULL_CORE_RESIDUAL, **_SMOKE_TRAINING),
    },
    "03_calibration": {
        "reduced": CalibrationConfig(),
        "full": FULL_CALIBRATION,
        "smoke": replace(FULL_CALIBRATION, **_SMOKE_TRAINING, n_top=4, n_random=8, n_bins=4),
    },
    "04_robustness": {
        "reduced": RobustnessConfig(),
        "full": FULL_ROBUSTNESS,
        "smoke": replace(
            FULL_ROBUSTNESS,
            **_SMOKE_TRAINING,
            n_attack=16,
            attack_steps=2,
            adv_steps=1,
            robust_replicates=(0, 1),
        ),
    },
    "05_ablations": {
        "reduced": AblationConfig(),
        "full": FULL_ABLATIONS,
        "smoke": replace(FULL_ABLATIONS, **_SMOKE_TRAINING, n_bootstrap=50),
    },
    "06_worlds": {
        # reduced: the claims' world (loaded) and the all-true one; full: the whole sweep
        "reduced": WorldsConfig(),
        "full": FULL_WORLDS,
        "smoke": replace(
            FULL_WORLDS, **_SMOKE_TRAINING, worlds=(0.0, 0.25), n_top=4, n_random=8, n_bins=4
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, an estimate (the full profile has not been run): a ViT on 64x64 images, the attacks, the
# ablations and the sweep of four worlds: about 2 GPU hours by our estimate (hours=2.0).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.15),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=2.0),
}
