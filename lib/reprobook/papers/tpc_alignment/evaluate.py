"""One summary of a trained dual encoder on the test set, shared by the chapter's notebooks.

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language
Learning", arXiv 2607.03143. The metrics are its Appendix B protocols (see ``diagnostics``):
retrieval with every caption view as a query (worst-caption R@1, caption sensitivity), the
consensus-residual leakage (v . r)^2, how close the filtered core c_hat and the raw caption t
come to the consensus c, hard-negative accuracy and zero-shot Top-1. Queries are c_hat, the
paper's inference rule; for a model trained with CLIP's loss the filter is the identity, so
c_hat = t.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from reprobook.core.stats import TInterval

from . import diagnostics as D
from .data import ShapesCaptions, caption_relevance, class_prompts
from .loss import consensus_core
from .model import DualEncoder, Embeddings, embed

__all__ = ["TestSet", "test_set", "summary", "per_image", "paired", "deciding_interval"]


class TestSet:
    """The test data with what every evaluation needs once: its relevance matrix and the class prompts."""

    def __init__(self, data: ShapesCaptions):
        self.data = data
        self.relevance = caption_relevance(data)  # (N*K, N)
        self.prompts = class_prompts()  # (C, T, L)
        self.images = data.float_images()
        self.labels = data.labels


def test_set(data: ShapesCaptions) -> TestSet:
    return TestSet(data)


@torch.no_grad()
def per_image(
    model: DualEncoder, test: TestSet, emb: Embeddings | None = None
) -> dict[str, torch.Tensor]:
    """Per-image and per-caption quantities: ranks (N, K) of the first relevant image for each
    caption query c_hat_ik, leakage (N, K) against the consensus, cos(t, c) and cos(c_hat, c) (N, K),
    and u_hat (N, K) = 1 - (t . c_hat)^2."""
    e = emb if emb is not None else embed(model, test.data)
    c = consensus_core(e.t)  # (N, d)
    return {
        "ranks": D.text_to_image_ranks(e.v, e.c_hat, test.relevance),
        "leakage": D.consensus_leakage(e.v, e.t),
        "cos_t_c": (e.t * c[:, None]).sum(-1),
        "cos_chat_c": (e.c_hat * c[:, None]).sum(-1),
        "u_hat": (1.0 - (e.t * e.c_hat).sum(-1).square()).clamp(0.0, 1.0),
    }


@torch.no_grad()
def summary(model: DualEncoder, test: TestSet) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """The test-set summary of ``model`` (floats) and its :func:`per_image` tensors.

    Keys: ``zero_shot`` (Top-1 over the 40 shape-colour classes, prompt-ensembled), the retrieval
    metrics of :func:`diagnostics.caption_retrieval` (t2i_r1/5/10, worst_caption_r1,
    caption_sensitivity, rank_volatility, i2t_r1/5/10), ``leakage`` (mean (v . r)^2),
    ``leakage_dir`` (mean (v . r)^2 / ||r||^2, the squared cosine between v and the residual's
    direction), ``cos_t_c``, ``cos_chat_c``, ``u_hat`` (means) and ``hard_negative_acc``."""
    was_training = model.training
    model.eval()
    e = embed(model, test.data)
    out = D.caption_retrieval(e.v, e.c_hat, test.relevance)
    logits = model.zero_shot_classifier(test.prompts)(test.images)
    out["zero_shot"] = float((logits.argmax(1) == test.labels).double().mean())
    per = per_image(model, test, e)
    c = consensus_core(e.t)
    r = e.t - (e.t * c[:, None]).sum(-1, keepdim=True) * c[:, None]
    r2 = r.square().sum(-1)
    out["leakage"] = float(per["leakage"].double().mean())
    out["leakage_dir"] = float((per["leakage"] / r2.clamp_min(1e-12)).double().mean())
    out["cos_t_c"] = float(per["cos_t_c"].double().mean())
    out["cos_chat_c"] = float(per["cos_chat_c"].double().mean())
    out["u_hat"] = float(per["u_hat"].double().mean())
    out["hard_negative_acc"] = D.hard_negative_accuracy(e.v, e.c_hat, e.hard_c_hat)
    model.train(was_training)
    return out, per


# ---------------------------------------------------------------------------------------------
# per-replicate values of the statistical claims
# ---------------------------------------------------------------------------------------------


def paired(a: Mapping[int, float], b: Mapping[int, float], how: str = "difference") -> list[float]:
    """One value per replicate from two arms measured on the same replicates: a_i - b_i
    (``how="difference"``, C1, C3, C5, C7) or a_i / b_i (``how="ratio"``, C2, C4), in the
    order of the sorted replicate ids. Pairing by replicate removes the spread that both arms
    share (the pretraining, the data), so the interval of the paired values is the one that
    decides whether the arms differ."""
    if how not in ("difference", "ratio"):
        raise ValueError(f"how must be 'difference' or 'ratio', got {how!r}")
    if set(a) != set(b):
        raise ValueError(
            f"the two arms must be measured on the same replicates, got {sorted(a)} and {sorted(b)}"
        )
    if not a:
        raise ValueError("no replicates given")
    out = []
    for i in sorted(a):
        x, y = float(a[i]), float(b[i])
        if how == "ratio" and y == 0.0:
            raise ValueError(f"replicate {i}: the ratio's denominator is 0")
        out.append(x - y if how == "difference" else x / y)
    return out


def deciding_interval(intervals: Mapping[str, TInterval], bar: float) -> tuple[str, TInterval]:
    """Of several intervals that must *all* clear ``bar`` from above (C5: every ablation's
    paired difference), the one whose verdict is the verdict of the whole claim.

    "Every one clears the bar" holds when the lowest low end clears it, and fails for certain
    when some interval lies wholly below the bar. So: an interval lying wholly below ``bar``
    if there is one (the one with the lowest high end), else the one with the lowest low end.
    Returns ``(name, interval)``."""
    if not intervals:
        raise ValueError("no intervals given")
    for name, iv in intervals.items():
        if not isinstance(iv, TInterval):
            raise TypeError(
                f"interval {name!r} must be a TInterval (core.t_interval), got {type(iv).__name__}"
            )
    below = {k: iv for k, iv in intervals.items() if iv.high < bar}
    if below:
        name = min(below, key=lambda k: below[k].high)
    else:
        name = min(intervals, key=lambda k: intervals[k].low)
    return name, intervals[name]
