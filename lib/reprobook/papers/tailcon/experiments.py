"""The training runs of chapter 08 (TailCon), shared by its notebooks through
``core.load_or_train``: one data split, the baselines (CE, LA, post-hoc LA, LDAM-DRW, cRT,
LWS), TailCon with and without FOCUS, and their evaluation with the memory on and off.
"""

from __future__ import annotations

import copy
from dataclasses import asdict

import numpy as np
import torch

from reprobook import core
from reprobook.core import checks

from . import data, losses, memory, models

SLUG = "tailcon"
TRAINED = ("ce", "la", "ldam_drw")
POSTHOC_TAUS = (0.0, 0.5, 1.0, 1.5, 2.0)  # post-hoc LA's tau, picked on the validation split
LAMBDAS = (0.0, 0.1, 0.2, 0.3, 0.5)  # retrieval's lambda, picked on the validation split
_TRAIN_FIELDS = (
    "dataset",
    "imbalance",
    "epochs",
    "lr",
    "batch_size",
    "drw_epoch",
    "tau",
    "optimizer",
    "milestones",
    "warmup",
    "weight_decay",
)
_MEMORY_FIELDS = (
    "capacity",
    "focus_every",
    "focus_steps",
    "surrogate",
    "gamma",
    "k",
    "temperature",
)


def load_split(dataset: str, imbalance: float, profile: str, n_samples: int | None = None):
    """The long-tailed split of ``dataset``; MNIST-1D is cached beside the checkpoints.
    CIFAR-LT comes from the hub at the full profile and from the chapter's fixture at the smoke
    profile (:func:`data.cifar_lt`); when it cannot be had it raises
    :class:`data.DataUnavailable`, which names the data and how to get it; no other data set is
    put in its place."""
    dataset = checks.choice(dataset, "dataset", ("digits", "mnist1d", "cifar10", "cifar100"))
    if dataset == "digits":
        return data.digits(imbalance)
    if dataset == "mnist1d":
        cache = core.checkpoints_dir(profile, SLUG)
        return data.mnist1d(n_samples or 20_000, imbalance, cache=cache)
    try:
        return data.cifar_lt(dataset, imbalance, profile=profile)
    except data.DataUnavailable as err:  # refused, never replaced by other data
        raise data.DataUnavailable(
            f"{err}. The {profile} profile of notebooks 01 and 02 needs {dataset}-LT and does "
            "not substitute other data; run them at the reduced profile, or see notebook 03 "
            "for MNIST-1D at scale"
        ) from None


def _kind(split) -> tuple[str, int]:
    if split.name == "digits":
        return "mlp", 64
    if split.name == "mnist1d":
        return "cnn1d", split.x_train.shape[-1]
    return "resnet32", 0


_MODULES = {"ce": models.CEModule, "la": models.LAModule, "ldam_drw": models.LDAMDRWModule}


def _module_kwargs(cfg, split):
    kind, d_in = _kind(split)
    return dict(
        kind=kind,
        d_in=d_in,
        counts=split.counts,
        epochs=cfg.epochs,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        optimizer=cfg.optimizer,
        milestones=cfg.milestones,
        warmup=cfg.warmup,
        tau=cfg.tau,
        drw_epoch=cfg.drw_epoch,
    )


def _key(cfg, split, seed, fields, **extra):
    key = {f: getattr(cfg, f) for f in fields if hasattr(cfg, f)}
    return {
        **key,
        "data": split.name,
        "n_train": int(split.y_train.size),
        "counts": split.counts.tolist(),
        "seed": seed,
        **extra,
    }


def _fit(module, split, cfg, seed, loader=None, epochs=None):
    dm = data.LongTailData(split, cfg.batch_size, seed)
    module.monitor = (dm.x_val, dm.y_val)
    module.train()
    core.fit(module, getattr(dm, loader or "train_dataloader")(), epochs=epochs or cfg.epochs)
    return module


def train_method(method: str, split, cfg, seed: int, profile: str):
    """CE, LA or LDAM-DRW, trained once per (configuration, data, seed) and cached. LA is
    trained as TailCon with the memory filled but never consolidated: the memory is detached
    and never read during training, so the weights are those of plain LA training, and the
    next notebook reuses the model as TailCon without FOCUS."""
    method = checks.choice(method, "method", TRAINED)

    if method == "la":  # LA is TailCon's memory without FOCUS: the same weights
        return train_tailcon(split, cfg, seed, profile, focus=False)

    def build():
        torch.manual_seed(seed)
        return _MODULES[method](**_module_kwargs(cfg, split))

    key = _key(cfg, split, seed, _TRAIN_FIELDS)
    model, _ = core.load_or_train(
        SLUG,
        f"{split.name}-{method}",
        profile=profile,
        key=key,
        build=build,
        train=lambda m: _fit(m, split, cfg, seed),
    )
    return model


def train_tailcon(split, cfg, seed: int, profile: str, focus: bool = True, mode="feature"):
    """TailCon (LA training, memory filled online; FOCUS every ``cfg.focus_every`` epochs when
    ``focus``, never otherwise), trained once and cached with its memory."""

    def build():
        torch.manual_seed(seed)
        return models.TailConModule(
            **_module_kwargs(cfg, split),
            capacity=cfg.capacity,
            focus_every=cfg.focus_every if focus else 0,
            focus_steps=cfg.focus_steps,
            surrogate=cfg.surrogate,
            gamma=cfg.gamma,
            k=cfg.k,
            T=cfg.temperature,
            mode=mode,
            x_train=torch.from_numpy(split.x_train),
        )

    fields = _TRAIN_FIELDS + (_MEMORY_FIELDS if focus else ("capacity",))
    key = _key(cfg, split, seed, fields, focus=focus, mode=mode)
    name = f"{split.name}-tailcon-{'focus' if focus else 'plain'}-{mode}"
    model, _ = core.load_or_train(
        SLUG, name, profile=profile, key=key, build=build, train=lambda m: _fit(m, split, cfg, seed)
    )
    return model


def train_decoupled(base, method: str, split, cfg, seed: int):
    """cRT or LWS on a copy of the CE model's frozen backbone (class-balanced; cheap, not
    cached)."""
    torch.manual_seed(seed)
    module = models.DecoupledModule(copy.deepcopy(base.net), method, seed=seed)
    _fit(module, split, cfg, seed, loader="balanced_dataloader", epochs=cfg.stage2_epochs)
    return module.eval()


@torch.no_grad()
def logits_of(model, x: np.ndarray) -> torch.Tensor:
    model.eval()
    return model(torch.from_numpy(x)).cpu()


def accuracy(logits: torch.Tensor, y: np.ndarray) -> np.ndarray:
    """Per-class accuracy on a balanced set."""
    return models.per_class_accuracy(logits, torch.from_numpy(y)).numpy()


def pick(scores: dict) -> object:
    """The setting with the best validation score (the first on ties)."""
    return max(scores, key=lambda k: scores[k])


def baselines(split, cfg, seed: int, profile: str) -> dict[str, np.ndarray]:
    """Per-class test accuracy of every baseline at one seed. Post-hoc LA's tau is picked on
    the balanced validation split."""
    out, trained = {}, {m: train_method(m, split, cfg, seed, profile) for m in TRAINED}
    for m, model in trained.items():
        out[m] = accuracy(logits_of(model, split.x_test), split.y_test)
    prior = losses.log_prior(split.counts)
    ce_val, ce_test = logits_of(trained["ce"], split.x_val), logits_of(trained["ce"], split.x_test)
    val = {
        t: accuracy(losses.posthoc_adjust(ce_val, prior, t), split.y_val).mean()
        for t in POSTHOC_TAUS
    }
    out["posthoc_la"] = accuracy(losses.posthoc_adjust(ce_test, prior, pick(val)), split.y_test)
    for m in ("crt", "lws"):
        model = train_decoupled(trained["ce"], m, split, cfg, seed)
        out[m] = accuracy(logits_of(model, split.x_test), split.y_test)
    return out


@torch.no_grad()
def with_retrieval(model, x: np.ndarray, lam: float, k: int, T: float) -> torch.Tensor:
    """Log of the mixed prediction of eq. `tailcon-mix` (head plus kNN over the memory)."""
    model.eval()
    xt = torch.from_numpy(x)
    h = model.net.features(xt)
    H, y, _ = model.memory.read(model.net.features, model.x_train)
    p_mem = memory.knn_posterior(h, H, y, model.net.head.out_features, k=k, T=T)
    p = memory.mix(torch.softmax(model.net.head(h), dim=1), p_mem, lam)
    return torch.log(p.clamp_min(1e-12))


def tailcon_eval(model, split, cfg) -> dict:
    """Per-class test accuracy of a TailCon model with the memory off (head only) and on
    (lambda picked on the validation split), and with the memory on at ``lam``."""
    val = {
        lam: accuracy(
            with_retrieval(model, split.x_val, lam, cfg.k, cfg.temperature), split.y_val
        ).mean()
        for lam in LAMBDAS
    }
    lam = pick(val)
    lam_fixed = cfg.lam
    on = with_retrieval(model, split.x_test, lam, cfg.k, cfg.temperature)
    off = logits_of(model, split.x_test)
    fixed = with_retrieval(model, split.x_test, lam_fixed, cfg.k, cfg.temperature)
    return {
        "off": accuracy(off, split.y_test),
        "on": accuracy(on, split.y_test),
        "lambda": lam,
        "fixed": accuracy(fixed, split.y_test),
    }


def groups_table(per_class: dict[str, np.ndarray], counts) -> dict[str, dict[str, float]]:
    """Overall, head, middle and tail accuracy (class tertiles) of each method."""
    g = data.class_groups(counts)
    out = {}
    for name, acc in per_class.items():
        acc = np.asarray(acc)
        row = {"overall": float(acc.mean())}
        row.update(
            {part: float(acc[g == i].mean()) for i, part in enumerate(("head", "middle", "tail"))}
        )
        out[name] = row
    return out


def config_dict(cfg) -> dict:
    return asdict(cfg)
