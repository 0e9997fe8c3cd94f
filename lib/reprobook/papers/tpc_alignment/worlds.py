"""The sweep of the wrong-detail rate for the chapter on "Text as Partial Constraint: Core-Residual
Alignment for Robust Vision-Language Learning" (arXiv 2607.03143).

The paper's premise is that a caption is a partial and sometimes unreliable constraint: real
captions leave things out and get things wrong. Our generated world controls the second half
with ``p_wrong``, the probability that a stated non-core detail is wrong. The world is that of
the fine-tuning data and the test set: as the paper fine-tunes one pretrained CLIP on each
caption set, every world starts from the CLIP model pretrained in the claims' world. For each
world and replicate, :func:`world_scores` loads (or pretrains) that model, fine-tunes (or loads)
CLIP-FT and TPC on the world's data, and measures what C2, C3 and C4 measure in the chapter's
main world:
:func:`contrast` turns those measurements into the claims' per-replicate values. The metrics are
the paper's protocols (eq. `tpc-leak` and eq. `tpc-ece` of notebooks/04_tpc_alignment/index.md);
the sweep itself is ours.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from reprobook.core import checks

from . import diagnostics as D
from .evaluate import calibration_ways, summary, test_set
from .train import arm_model, datasets, pretrained, train_side_by_side

__all__ = ["WORLD_ARMS", "contrast", "train_worlds", "world_data", "world_scores"]

# the arms fine-tuned in every world (C2, C3 and C4 compare them)
WORLD_ARMS: tuple[str, ...] = ("clip_ft", "tpc")


def contrast(
    pretrained: Mapping[str, float],
    clip_ft: Mapping[str, float],
    tpc: Mapping[str, float],
) -> dict[str, float]:
    """The per-replicate values of C2, C3 and C4 from three models' measurements.

    Each mapping holds ``leakage`` (mean (v . r)^2), ``worst_caption_r1`` and ``ece`` (the
    pretrained model's ``ece`` is not used). Returns ``leakage_ratio`` = TPC's leakage over the
    smaller of the pretrained model's and CLIP-FT's (C2), ``worst_caption_gain`` = TPC minus
    CLIP-FT worst-caption R@1 (C3) and ``ece_ratio`` = TPC's ECE at tau(y) over CLIP-FT's at
    tau0 (C4)."""
    for name, m in (("pretrained", pretrained), ("clip_ft", clip_ft), ("tpc", tpc)):
        for key in ("leakage", "worst_caption_r1") + (("ece",) if name != "pretrained" else ()):
            if key not in m:
                raise checks.InputError(f"{name} must hold {key!r}, got keys {sorted(m)}")
    floor = min(float(pretrained["leakage"]), float(clip_ft["leakage"]))
    if floor <= 0 or float(clip_ft["ece"]) <= 0:
        raise checks.InputError("the baselines' leakage and ECE must be positive")
    return {
        "leakage_ratio": float(tpc["leakage"]) / floor,
        "worst_caption_gain": float(tpc["worst_caption_r1"]) - float(clip_ft["worst_caption_r1"]),
        "ece_ratio": float(tpc["ece"]) / float(clip_ft["ece"]),
    }


@functools.lru_cache(maxsize=2)
def world_data(cfg, p_wrong: float, seed: int, profile: str | None = None):
    """The training set, the test set and its evaluation tensors of the world ``p_wrong``
    (generated once per world and kept: every replicate of a world uses the same data; two
    worlds are kept, the claims' world, which every call also needs, and the one swept). With
    ``profile`` the sets are kept on disk too (:func:`~.train.datasets`)."""
    checks.probability(p_wrong, "p_wrong")
    train, test = datasets(cfg, seed, p_wrong=float(p_wrong), profile=profile)
    return train, test, test_set(test)


def train_worlds(cfg, worlds, *, seed: int, profile: str) -> int:
    """Train what :func:`world_scores` will load for every world of ``worlds`` and every
    replicate, where no checkpoint exists yet: the claims' world's pretrained models and the
    :data:`WORLD_ARMS` fine-tuned from them on each world's data, side by side at the reduced
    profile (:func:`~.train.train_side_by_side`). Returns how many models it trained."""
    base_train = world_data(cfg, cfg.p_wrong, seed, profile)[0]
    trained = 0
    for p in worlds:
        checks.probability(p, "worlds")
        train = world_data(cfg, p, seed, profile)[0]
        trained += train_side_by_side(
            cfg, base_train, train, arms=WORLD_ARMS, seed=seed, profile=profile
        )
    return trained


def world_scores(cfg, p_wrong: float, *, seed: int, replicate: int, profile: str) -> dict:
    """C2, C3 and C4's values, and what they are made of, in the world ``p_wrong`` for one
    replicate (pretraining and fine-tuning seed ``seed + replicate``, the notebook seed's data).

    CLIP-FT and TPC are fine-tuned on the world's training set from the model pretrained on the
    claims' world (``cfg.p_wrong``), the same pretrained weights in every world, and every model
    is scored on the world's test set. Models come from :func:`reprobook.core.load_or_train`, so
    the main world's (and every world's pretrained model) are loaded from the notebooks that
    trained them. Candidate sets use ``cfg.n_top`` and ``cfg.n_random`` and
    the generator seed ``seed + 3 + replicate``, as in the calibration notebook. Also returned:
    the AUROC of TPC's u_hat against its top-1 error and, where details can be wrong, against
    whether the query states a wrong detail (NaN in the all-true world)."""
    checks.probability(p_wrong, "p_wrong")
    checks.integer(replicate, "replicate", minimum=0)
    # the claims' world: the pretraining data
    base_train = world_data(cfg, cfg.p_wrong, seed, profile)[0]
    train, test, test_eval = world_data(cfg, p_wrong, seed, profile)
    run_seed = seed + replicate
    base, _ = pretrained(cfg, base_train, seed=run_seed, profile=profile)
    measured = {"pretrained": summary(base, test_eval)[0]}
    scoring = dict(tau0=cfg.tau0, n_top=cfg.n_top, n_random=cfg.n_random, seed=seed + 3 + replicate)
    u_hat = error = None
    for arm in WORLD_ARMS:
        model, _ = arm_model(cfg, base, train, arm, seed=run_seed, profile=profile)
        measured[arm] = summary(model, test_eval)[0]
        ways, u = calibration_ways(
            model, test, test_eval.relevance, tpc_arm=arm == "tpc", **scoring
        )
        cal = ways["TPC at tau(y)" if arm == "tpc" else "CLIP-FT at tau0"]
        measured[arm]["ece"] = cal["ece"]
        if arm == "tpc":
            u_hat, error = u, ~cal["correct"]
    out = {"p_wrong": float(p_wrong), "replicate": int(replicate)}
    out.update(contrast(measured["pretrained"], measured["clip_ft"], measured["tpc"]))
    out["auroc_u_hat_vs_error"] = D.auroc(u_hat, error)
    if test.wrong is not None:
        states = test.stated.any(-1).reshape(-1)
        wrong = test.wrong.any(-1).reshape(-1)
        out["auroc_u_hat_vs_wrong"] = D.auroc(u_hat[states], wrong[states])
    else:
        out["auroc_u_hat_vs_wrong"] = float("nan")
    for arm, m in measured.items():
        for key in ("leakage", "worst_caption_r1", "ece"):
            if key in m:
                out[f"{key}_{arm}"] = float(m[key])
    return out
