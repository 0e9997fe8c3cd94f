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

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from reprobook.core import checks
from reprobook.core.stats import Interval

from . import diagnostics as D
from .data import ShapesCaptions, caption_relevance, class_prompts
from .loss import consensus_core
from .model import DualEncoder, Embeddings, embed

__all__ = [
    "TestSet",
    "test_set",
    "summary",
    "per_image",
    "paired",
    "deciding_interval",
    "binned_means",
    "WAYS",
    "calibration_ways",
    "calibration_metrics",
]


class TestSet:
    """The test data with what every evaluation needs once: its relevance matrix and the class
    prompts.

    A caption's own image is always relevant to it (``include_own``): where views may state a
    wrong detail, the image a caption was written for stays its target, and an image that has
    every value the caption states counts too. With every stated detail true the two coincide."""

    def __init__(self, data: ShapesCaptions):
        self.data = data
        self.relevance = caption_relevance(data, include_own=True)  # (N*K, N)
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
    caption query c_hat_ik, leakage (N, K) against the consensus (eq. `tpc-leak`), cos(t, c) and
    cos(c_hat, c) (N, K), and u_hat (N, K) = 1 - (t . c_hat)^2 (eq. `tpc-query`); the equations
    of notebooks/04_tpc_alignment/index.md."""
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
    per = per_image(model, test, e)
    # the ranks of per_image are those caption_retrieval would compute (the same c_hat queries)
    out = D.caption_retrieval(e.v, e.c_hat, test.relevance, ranks=per["ranks"])
    logits = model.zero_shot_classifier(test.prompts)(test.images)
    out["zero_shot"] = float((logits.argmax(1) == test.labels).double().mean())
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


def deciding_interval(intervals: Mapping[str, Interval], bar: float) -> tuple[str, Interval]:
    """Of several Student-t intervals (``core.t_interval``) that must *all* clear ``bar`` from
    above (C5: every ablation's paired difference), the one whose verdict is the verdict of the
    whole claim.

    "Every one clears the bar" holds when the lowest low end clears it, and fails for certain
    when some interval lies wholly below the bar. So: an interval lying wholly below ``bar``
    if there is one (the one with the lowest high end), else the one with the lowest low end.
    Returns ``(name, interval)``."""
    if not intervals:
        raise ValueError("no intervals given")
    for name, iv in intervals.items():
        if not isinstance(iv, Interval) or math.isnan(iv.se):
            raise TypeError(
                f"interval {name!r} must be a Student-t interval (core.t_interval), got {iv!r}"
            )
    below = {k: iv for k, iv in intervals.items() if iv.high < bar}
    if below:
        name = min(below, key=lambda k: below[k].high)
    else:
        name = min(intervals, key=lambda k: intervals[k].low)
    return name, intervals[name]


# ---------------------------------------------------------------------------------------------
# small summaries the notebooks draw and print
# ---------------------------------------------------------------------------------------------


def binned_means(x, y, n_bins: int) -> pd.DataFrame:
    """Means of x and y over quantile bins of x: the points of a binned trend plot.

    The bin edges are the (1/n_bins)-quantiles of x (repeated edges merged, so ties may leave
    fewer bins); value x_m falls in bin b when edge_b <= x_m < edge_{b+1}, the largest values in
    the last bin. Returns one row per non-empty bin with columns ``x``, ``y`` (the means) and
    ``n`` (the count), indexed by the bin number."""
    checks.integer(n_bins, "n_bins", minimum=1)
    x = checks.array(x, "x", ndim=1)
    y = checks.array(y, "y", ndim=1)
    checks.same_shape("x", x, "y", y)
    if x.size == 0:
        raise checks.InputError("x must hold at least one value, got none")
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)))
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, max(len(edges) - 2, 0))
    frame = pd.DataFrame({"x": x, "y": y, "bin": which})
    return frame.groupby("bin").agg(x=("x", "mean"), y=("y", "mean"), n=("y", "size"))


# ---------------------------------------------------------------------------------------------
# retrieval calibration of one model (notebook 3)
# ---------------------------------------------------------------------------------------------

#: The ways of turning a model's scores into probabilities: CLIP-FT at tau0, TPC at its
#: per-query temperature tau(y), and TPC at the fixed tau0 (to separate the representation from
#: the temperature).
WAYS = ("CLIP-FT at tau0", "TPC at tau(y)", "TPC at tau0")


@torch.no_grad()
def calibration_ways(
    model: DualEncoder,
    data: ShapesCaptions,
    relevance: torch.Tensor,
    *,
    tpc_arm: bool,
    tau0: float,
    n_top: int,
    n_random: int,
    seed: int,
) -> tuple[dict[str, dict], torch.Tensor]:
    """Every caption query of ``data`` scored against its candidate set, in the ways of
    :data:`WAYS` that apply to the model: ``{way: diagnostics.retrieval_calibration(...)}`` and
    the queries' uncertainty u_hat (N*K,).

    The candidate sets (:func:`diagnostics.candidate_sets`, ``n_top`` hardest and ``n_random``
    random wrong images, drawn with a generator seeded with ``seed``) are built once from the
    model's own scores and shared by its ways. A TPC model (``tpc_arm``) is scored at its
    per-query temperature tau(y) and at ``tau0``, a CLIP model at ``tau0``: eq. `tpc-ece` of
    notebooks/04_tpc_alignment/index.md under the inference rule of eq. `tpc-query`."""
    e = embed(model, data)
    u_hat = model.uncertainty(e.t).reshape(-1)
    tau_y = model.query_temperature(e.t).reshape(-1)
    generator = torch.Generator().manual_seed(seed)
    cand = D.candidate_sets(
        e.v, e.c_hat, relevance, n_top=n_top, n_random=n_random, generator=generator
    )
    ways = {WAYS[1]: tau_y, WAYS[2]: tau0} if tpc_arm else {WAYS[0]: tau0}
    return {
        way: D.retrieval_calibration(e.v, e.c_hat, tau, cand) for way, tau in ways.items()
    }, u_hat


def calibration_metrics(cal: Mapping, u_hat: torch.Tensor | None = None) -> dict[str, float]:
    """The numbers of one way of :func:`calibration_ways`: accuracy, ECE, NLL and Brier score,
    the AUROC of u_hat and of 1 - confidence for predicting a top-1 error, and the area under
    their risk-coverage curves (the u_hat entries are NaN when ``u_hat`` is None)."""
    error = ~cal["correct"]
    doubt = 1 - cal["confidence"]
    nan = float("nan")
    return dict(
        accuracy=cal["accuracy"],
        ece=cal["ece"],
        nll=cal["nll"],
        brier=cal["brier"],
        auroc_u_hat=D.auroc(u_hat, error) if u_hat is not None else nan,
        auroc_confidence=D.auroc(doubt, error),
        aurc_confidence=D.aurc(*D.risk_coverage(doubt, error)),
        aurc_u_hat=D.aurc(*D.risk_coverage(u_hat, error)) if u_hat is not None else nan,
    )
