"""Pretraining and the fine-tuning arms of the chapter on "Text as Partial Constraint:
Core-Residual Alignment for Robust Vision-Language Learning" (arXiv 2607.03143), cached between
notebooks.

The paper fine-tunes pretrained OpenCLIP weights. We pretrain a small dual encoder from random
initialisation with CLIP's loss (:func:`pretrain`), then fine-tune a copy of it, with the core
filter reset to the identity, for the same number of steps under each arm (:func:`finetune`):

* ``clip_ft``: CLIP's loss (one random caption per image): the baseline;
* ``tpc``: the full TPC objective (Sec. 4.5, eq. `tpc-loss` of notebooks/04_tpc_alignment/index.md);
* ``no_consensus``, ``gamma0``, ``no_agree``, ``no_nc``: the four single-factor ablations of
  Table 3 (one random view instead of the consensus core; gamma = 0; lambda_agree = 0;
  lambda_nc = 0).

An :class:`~.model.AdvConfig` with ``steps > 0`` adds PGD adversarial fine-tuning (TeCoA style).
Each trained model is a checkpoint of :func:`reprobook.core.load_or_train`, keyed by every
configuration, the seed, the training data's ``spec`` and (for the arms) the pretrained model's
key.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable
from typing import Any

from reprobook import core
from reprobook.core import checks, load_or_train
from reprobook.core.checkpoints import checkpoint_key

from .data import ShapesCaptions, ShapesCaptionsDataModule
from .loss import TPCConfig
from .model import AdvConfig, DualEncoder, ModelConfig, OptimConfig

__all__ = [
    "SLUG",
    "ARMS",
    "arm_objective",
    "fit",
    "pretrain",
    "finetune",
    "Setup",
    "setup",
    "datasets",
    "pretrained",
    "arm_model",
    "train_side_by_side",
    "generated",
]

SLUG = "tpc_alignment"
# The offset of a fine-tuning run's stream seed (views, batch order) from its seed, so that
# fine-tuning never replays the view draws and batch order of the pretraining with the same seed.
FINETUNE_STREAM = 7919
ARMS: tuple[str, ...] = ("clip_ft", "tpc", "no_consensus", "gamma0", "no_agree", "no_nc")


def arm_objective(arm: str, base: TPCConfig) -> TPCConfig:
    """The objective of a fine-tuning arm: ``base`` with objective "tpc", except clip_ft ("clip")
    and the ablations (consensus False, gamma 0, lambda_agree 0, lambda_nc 0)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; the arms are {ARMS}")
    changes: dict[str, object] = {
        "clip_ft": {"objective": "clip"},
        "tpc": {"objective": "tpc"},
        "no_consensus": {"objective": "tpc", "consensus": False},
        "gamma0": {"objective": "tpc", "gamma": 0.0},
        "no_agree": {"objective": "tpc", "lambda_agree": 0.0},
        "no_nc": {"objective": "tpc", "lambda_nc": 0.0},
    }[arm]
    return dataclasses.replace(base, **changes)


def fit(module: DualEncoder, train: ShapesCaptions, *, seed: int) -> DualEncoder:
    """Train ``module`` for ``module.optim.steps`` steps on ``train`` (batches shuffled with
    ``seed``), with :func:`reprobook.core.fit` (quiet, deterministic, gradient clipping), and
    keep its training curve in the module (:meth:`~.model.DualEncoder.keep_curve`). Torch's NaN
    fill of every new tensor under deterministic training is skipped
    (``core.unfilled_allocations``): the encoders read no uninitialised memory, so the weights
    are the same bits without it (the chapter's recorded values are identical)."""
    optim = module.optim
    data = ShapesCaptionsDataModule(train, batch_size=optim.batch_size, seed=seed)
    with core.unfilled_allocations():
        loss = core.fit(module, data, steps=optim.steps, gradient_clip_val=optim.grad_clip)
    module.keep_curve(loss)
    return module


def _pretrain_key(
    train: ShapesCaptions, model: ModelConfig, optim: OptimConfig, tau0: float, seed: int
) -> dict:
    return {
        "data": train.spec,
        "model": model,
        "objective": TPCConfig(objective="clip", tau0=tau0),
        "optim": optim,
        "seed": seed,
    }


def _finetune_key(
    base_key: str,
    train: ShapesCaptions,
    model: ModelConfig,
    arm: str,
    objective: TPCConfig,
    optim: OptimConfig,
    adv: AdvConfig | None,
    seed: int,
) -> tuple[str, dict]:
    """The checkpoint name and key of a fine-tuning arm (``objective`` is the arm's own)."""
    adversarial = adv is not None and adv.active
    key = {
        "base": base_key,
        "arm": arm,
        "data": train.spec,
        "model": model,
        "objective": objective,
        "optim": optim,
        "adv": adv if adversarial else None,
        "seed": seed,
    }
    return f"ft-{arm}" + ("-adv" if adversarial else ""), key


def pretrain(
    train: ShapesCaptions,
    *,
    model: ModelConfig,
    optim: OptimConfig,
    tau0: float,
    seed: int,
    profile: str,
) -> tuple[DualEncoder, bool]:
    """A dual encoder trained from random initialisation (``seed``) with CLIP's loss for
    ``optim.steps`` steps; loaded from its checkpoint when one exists.

    Returns ``(model, loaded)``. ``model.checkpoint_key`` is the checkpoint's digest, the
    ``base_key`` of :func:`finetune`."""
    objective = TPCConfig(objective="clip", tau0=tau0)
    key = _pretrain_key(train, model, optim, tau0, seed)
    module, loaded = load_or_train(
        SLUG,
        "pretrain",
        profile=profile,
        key=key,
        build=lambda: DualEncoder(model, objective, optim, None, seed),
        train=lambda m: fit(m, train, seed=seed),
    )
    module.checkpoint_key = checkpoint_key(SLUG, "pretrain", key)[0]
    return module, loaded


def finetune(
    base: DualEncoder,
    base_key: str,
    train: ShapesCaptions,
    *,
    arm: str,
    objective: TPCConfig,
    optim: OptimConfig,
    adv: AdvConfig | None,
    seed: int,
    profile: str,
) -> tuple[DualEncoder, bool]:
    """Fine-tune a copy of ``base`` (its core filter reset to the identity) with the objective of
    ``arm`` (:func:`arm_objective` of ``objective``) and, when ``adv.steps > 0``, PGD adversarial
    training; checkpoint ``ft-<arm>`` (``ft-<arm>-adv``) keyed by ``base_key`` and everything else.

    The run draws its views and batch order from seed ``seed + FINETUNE_STREAM``, so a
    fine-tuning run with the pretraining's seed does not replay the pretraining's draws.
    Returns ``(model, loaded)``; ``model.checkpoint_key`` is set as in :func:`pretrain`."""
    if not isinstance(base, DualEncoder):
        raise TypeError(f"base must be a DualEncoder, got {type(base).__name__}")
    if not isinstance(base_key, str) or not base_key:
        raise ValueError(
            "base_key must be a non-empty string (the pretrained model's checkpoint_key), "
            f"got {base_key!r}"
        )
    obj = arm_objective(arm, objective)
    stream = seed + FINETUNE_STREAM  # the views and batch order of this run (not pretraining's)
    adversarial = adv is not None and adv.active
    name, key = _finetune_key(base_key, train, base.model_cfg, arm, obj, optim, adv, seed)
    # the weights only: the training curve belongs to the pretraining
    state = {k: v.detach().clone() for k, v in base.state_dict().items() if k != "curve"}

    def build() -> DualEncoder:
        module = DualEncoder(base.model_cfg, obj, optim, adv if adversarial else None, stream)
        missing, unexpected = module.load_state_dict(state, strict=False)
        if unexpected or set(missing) != {"curve"}:
            raise RuntimeError(
                f"base weights do not fit the model: missing {missing}, unexpected {unexpected}"
            )
        module.core_filter.reset_identity()
        return module

    module, loaded = load_or_train(
        SLUG,
        name,
        profile=profile,
        key=key,
        build=build,
        train=lambda m: fit(m, train, seed=stream),
    )
    module.checkpoint_key = checkpoint_key(SLUG, name, key)[0]
    return module, loaded


# ---------------------------------------------------------------------------------------------
# what the notebooks call: one profile configuration -> data, the pretrained model, the arms
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setup:
    """The library objects one notebook configuration (:class:`config.Training`) stands for."""

    model: ModelConfig
    objective: TPCConfig  # the paper's objective with the profile's coefficients (arm "tpc")
    pretrain: OptimConfig
    finetune: OptimConfig
    adv: AdvConfig | None  # adversarial fine-tuning (robustness notebook), else None


def setup(cfg) -> Setup:
    """Map the flat fields of a notebook configuration onto the library's configurations.

    Pretraining uses ``pretrain_lr`` for both encoders (the core filter is not used by CLIP's
    loss); fine-tuning uses ``lr_encoders`` and ``lr_filter``. ``adv`` is built when the
    configuration has ``adv_steps`` (the robustness notebook)."""
    model = ModelConfig(
        image_encoder=cfg.image_encoder,
        image_size=cfg.image_size,
        embed_dim=cfg.embed_dim,
        text_width=cfg.embed_dim,
        text_layers=cfg.text_layers,
    )
    objective = TPCConfig(
        tau0=cfg.tau0,
        gamma=cfg.gamma,
        lambda_agree=cfg.lambda_agree,
        lambda_nc=cfg.lambda_nc,
        views=tuple(cfg.views),
    )
    pre = OptimConfig(
        steps=cfg.pretrain_steps,
        batch_size=cfg.batch_size,
        lr_encoders=cfg.pretrain_lr,
        lr_filter=cfg.pretrain_lr,
        weight_decay=cfg.weight_decay,
    )
    fine = OptimConfig(
        steps=cfg.finetune_steps,
        batch_size=cfg.batch_size,
        lr_encoders=cfg.lr_encoders,
        lr_filter=cfg.lr_filter,
        weight_decay=cfg.weight_decay,
    )
    adv = None
    if getattr(cfg, "adv_steps", 0):
        adv = AdvConfig(eps=cfg.adv_eps, alpha=cfg.adv_alpha, steps=cfg.adv_steps)
    return Setup(model, objective, pre, fine, adv)


def datasets(
    cfg, seed: int, p_wrong: float | None = None, *, profile: str | None = None
) -> tuple[ShapesCaptions, ShapesCaptions]:
    """The training set (seed ``seed``) and the test set (seed ``seed + 1``, its own stream) of
    the world ``p_wrong`` (None: the configuration's ``p_wrong``): each stated non-core detail
    is wrong with that probability (see ``data.generate``).

    With ``profile``, each set is kept beside the chapter's checkpoints (:func:`generated`), so
    the notebooks after the first load the sets instead of generating them again."""
    p_wrong = cfg.p_wrong if p_wrong is None else p_wrong

    common = dict(
        image_size=cfg.image_size, n_views=cfg.n_views, p_mention=cfg.p_mention, p_wrong=p_wrong
    )
    return (
        generated(cfg.n_train, seed, profile=profile, **common),
        generated(cfg.n_test, seed + 1, profile=profile, **common),
    )


#: The largest generated set :func:`generated` keeps on disk, in bytes of its images (the
#: reduced profile's training set has 12 MB of them; the full profile's, 12 GB, is not kept).
DATA_CACHE_BYTES = 256 * 2**20


def generated(n: int, seed: int, *, profile: str | None = None, **options: Any) -> ShapesCaptions:
    """``data.generate(n, seed, **options)``, kept in the chapter's checkpoint folder of
    ``profile`` as ``data-<digest>.dataset`` (keyed like a checkpoint: by the arguments and the
    code of the chapter and of ``reprobook.core``) and loaded from there when it exists: the
    same tensors, captions and ``spec``, without the second or two that generating takes.
    Without a profile, or for a set whose images exceed :data:`DATA_CACHE_BYTES`, it just
    generates. An unreadable file is generated again and replaced."""
    import torch

    from .data import generate

    size = options.get("image_size", 32)
    if profile is None or n * 3 * size * size > DATA_CACHE_BYTES:
        return generate(n, seed, **options)
    key = {"n": n, "seed": seed, **options}
    # a .dataset file beside the models' .pt files (which the tests count)
    path = core.checkpoint_path(SLUG, "data", profile=profile, key=key).with_suffix(".dataset")
    if path.is_file():
        try:
            return ShapesCaptions(**torch.load(path, map_location="cpu", weights_only=True))
        except Exception as exc:  # noqa: BLE001 - a damaged cache is regenerated, never trusted
            warnings.warn(
                f"data set {path} could not be loaded ({type(exc).__name__}: {exc}); "
                "generating it again",
                stacklevel=2,
            )
    data = generate(n, seed, **options)
    core.atomic_torch_save({f.name: getattr(data, f.name) for f in dataclasses.fields(data)}, path)
    return data


def pretrained(cfg, train: ShapesCaptions, *, seed: int, profile: str) -> tuple[DualEncoder, bool]:
    """The CLIP-pretrained model of this configuration (loaded when an earlier notebook trained
    it)."""
    s = setup(cfg)
    return pretrain(
        train, model=s.model, optim=s.pretrain, tau0=cfg.tau0, seed=seed, profile=profile
    )


def arm_model(
    cfg,
    base: DualEncoder,
    train: ShapesCaptions,
    arm: str,
    *,
    seed: int,
    profile: str,
    adversarial: bool = False,
) -> tuple[DualEncoder, bool]:
    """Fine-tuning arm ``arm`` from ``base`` (``adversarial``: with the configuration's PGD
    adversarial fine-tuning, which needs ``adv_steps`` > 0)."""
    s = setup(cfg)
    if adversarial and s.adv is None:
        raise ValueError(
            "adversarial=True needs a configuration with adv_steps > 0 (the robustness notebook's)"
        )
    return finetune(
        base,
        base.checkpoint_key,
        train,
        arm=arm,
        objective=s.objective,
        optim=s.finetune,
        adv=s.adv if adversarial else None,
        seed=seed,
        profile=profile,
    )


# ---------------------------------------------------------------------------------------------
# side by side: the models a notebook is about to load, trained one process per core
# ---------------------------------------------------------------------------------------------


def _pretrain_path(cfg, train: ShapesCaptions, seed: int, profile: str):
    s = setup(cfg)
    key = _pretrain_key(train, s.model, s.pretrain, cfg.tau0, seed)
    return core.checkpoint_path(SLUG, "pretrain", profile=profile, key=key), key


def _arm_path(cfg, base_key, train, arm, adversarial, seed, profile):
    s = setup(cfg)
    obj = arm_objective(arm, s.objective)
    adv = s.adv if adversarial else None
    name, key = _finetune_key(base_key, train, s.model, arm, obj, s.finetune, adv, seed)
    return core.checkpoint_path(SLUG, name, profile=profile, key=key)


def _fit_job(cfg, base_train, train, seed: int, arm: str | None, adversarial: bool, profile: str):
    """One job of :func:`train_side_by_side` (run in a worker process): the pretrained model of
    ``seed`` and, unless ``arm`` is None, the arm fine-tuned from it (each loaded if cached)."""
    base, _ = pretrained(cfg, base_train, seed=seed, profile=profile)
    if arm is not None:
        arm_model(cfg, base, train, arm, seed=seed, profile=profile, adversarial=adversarial)


def train_side_by_side(
    cfg,
    base_train: ShapesCaptions,
    train: ShapesCaptions | None = None,
    *,
    arms: Iterable[str | tuple[str, bool]] = (),
    replicates: Iterable[int] | None = None,
    seed: int,
    profile: str,
) -> int:
    """Train the models that :func:`pretrained` and :func:`arm_model` are about to load and
    that have no checkpoint yet, side by side at the reduced profile (one process per core,
    :func:`reprobook.core.side_by_side`; one after the other at the full profile or where
    ``$REPROBOOK_THREADS`` is 1). Returns how many models it trained.

    For each replicate ``i`` (default ``cfg.replicates``; seed ``seed + i``): the model
    pretrained on ``base_train`` and every arm of ``arms`` fine-tuned from it on ``train``
    (default ``base_train``). An arm is a name of :data:`ARMS` or ``(name, adversarial)``.
    Every run seeds itself, so a model trained here has the weights that the notebook would
    train one after the other (the tests check it bit for bit); the notebook then loads them.
    Missing pretrainings go first, then the arms, on the same workers
    (:func:`reprobook.core.side_by_side_stages`: a worker's start-up is paid once)."""
    train = base_train if train is None else train
    replicates = tuple(cfg.replicates if replicates is None else replicates)
    pairs = [(a, False) if isinstance(a, str) else (a[0], bool(a[1])) for a in arms]
    for arm, adversarial in pairs:  # an unknown arm is refused by arm_objective (below)
        if adversarial and setup(cfg).adv is None:
            raise ValueError(f"arm ({arm!r}, adversarial) needs a configuration with adv_steps > 0")
    bases, arm_jobs = [], []
    for i in replicates:
        checks.integer(i, "replicate", minimum=0)
        path, key = _pretrain_path(cfg, base_train, seed + i, profile)
        if not path.is_file():
            bases.append((cfg, base_train, train, seed + i, None, False, profile))
        base_key = checkpoint_key(SLUG, "pretrain", key)[0]
        for arm, adversarial in pairs:
            if not _arm_path(cfg, base_key, train, arm, adversarial, seed + i, profile).is_file():
                arm_jobs.append((cfg, base_train, train, seed + i, arm, adversarial, profile))
    # the arms load the pretrained models: a second stage on the same workers
    core.side_by_side_stages(_fit_job, [bases, arm_jobs], profile=profile)
    return len(bases) + len(arm_jobs)
