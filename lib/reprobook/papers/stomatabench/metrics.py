"""The measurement-reliability metrics of StomataBench (chapter 15, notebooks/15_stomatabench).

The abstract names COCO AP, F1, score-threshold sensitivity, image-level count error and
stomatal density agreement; how each is defined is our reconstruction, written out on the
chapter's index page. COCO AP is pycocotools' ``COCOeval`` (with ``maxDets = [1, 10, 300]``:
the default cap of 100 detections per image caps recall on dense images); the rest is written
here: greedy one-to-one matching at IoU 0.5, F1 at a frozen score threshold and its sweep, the
count at a threshold, density per mm², Lin's concordance correlation, Bland–Altman agreement,
the share of errors that are misses, and Kendall's tau between detector rankings.

Detections are a dict of arrays: ``image_id`` (n,), ``bbox`` (n, 4) as COCO ``[x, y, w, h]``
and ``score`` (n,).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
from scipy import stats

from reprobook.core import checks

from .synth import area_mm2

IOU_MATCH = 0.5  # the IoU at which a detection counts as a true positive for F1


def empty_detections() -> dict:
    return {"image_id": np.zeros(0, int), "bbox": np.zeros((0, 4)), "score": np.zeros(0)}


def concat_detections(parts: list[dict]) -> dict:
    if not parts:
        return empty_detections()
    return {k: np.concatenate([p[k] for p in parts]) for k in ("image_id", "bbox", "score")}


def _coco(coco: dict):
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = coco
        gt.createIndex()
    return gt


def coco_eval(coco: dict, dets: dict, max_dets=(1, 10, 300)) -> dict:
    """COCO AP of ``dets`` against the ground truth ``coco`` with pycocotools' ``COCOeval``
    (bbox, one category), its ``maxDets`` set to ``max_dets`` (three values, ascending):
    eq. `stomatabench-ap`, computed by the library.

    Returns ``AP`` (mean over IoU 0.50:0.05:0.95 and 101 recall points, the last ``maxDets``),
    ``AP50``, ``AP75``, ``AR`` (recall at the last ``maxDets``), ``AP_by_maxdets`` (AP at each
    cap) and the ``pr50`` curve (recall points, precision at IoU 0.5). A detection list with
    nothing in it scores 0."""
    max_dets = [checks.integer(m, "max_dets[i]", minimum=1) for m in max_dets]
    if len(max_dets) != 3 or sorted(max_dets) != max_dets:
        raise checks.InputError(f"max_dets must be three ascending caps, got {max_dets}")
    from pycocotools.cocoeval import COCOeval

    recall_points = np.linspace(0, 1, 101)
    n = len(dets["score"])
    if n == 0:
        zero = {"AP": 0.0, "AP50": 0.0, "AP75": 0.0, "AR": 0.0}
        return {**zero, "AP_by_maxdets": [0.0] * 3, "pr50": (recall_points, np.zeros(101))}
    gt = _coco(coco)
    results = [
        {"image_id": int(i), "category_id": 1, "bbox": [float(v) for v in b], "score": float(s)}
        for i, b, s in zip(dets["image_id"], dets["bbox"], dets["score"])
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(results)
        ev = COCOeval(gt, dt, iouType="bbox")
        ev.params.maxDets = list(max_dets)
        ev.params.areaRng, ev.params.areaRngLbl = [[0, 1e10]], ["all"]  # one range: all sizes
        ev.evaluate()
        ev.accumulate()
    prec = ev.eval["precision"][:, :, 0, 0, :]  # [IoU, recall, maxDets] (all areas)
    rec = ev.eval["recall"][:, 0, 0, :]  # [IoU, maxDets]

    def mean(a):
        a = a[a > -1]
        return float(a.mean()) if a.size else 0.0

    pr50 = np.where(prec[0, :, 2] > -1, prec[0, :, 2], 0.0)
    return {
        "AP": mean(prec[:, :, 2]),
        "AP50": mean(prec[0, :, 2]),
        "AP75": mean(prec[5, :, 2]),
        "AR": mean(rec[:, 2]),
        "AP_by_maxdets": [mean(prec[:, :, m]) for m in range(3)],
        "pr50": (recall_points, pr50),
    }


def box_iou(a, b) -> np.ndarray:
    """IoU of every box of ``a`` (n, 4) with every box of ``b`` (m, 4), both ``[x, y, w, h]``:
    ``|A ∩ B| / |A ∪ B|`` (eq. `stomatabench-match`)."""
    a = np.asarray(a, float).reshape(-1, 4)
    b = np.asarray(b, float).reshape(-1, 4)
    ax1, ay1, ax2, ay2 = a[:, 0], a[:, 1], a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax2[:, None], bx2) - np.maximum(ax1[:, None], bx1), 0, None)
    ih = np.clip(np.minimum(ay2[:, None], by2) - np.maximum(ay1[:, None], by1), 0, None)
    inter = iw * ih
    union = (a[:, 2] * a[:, 3])[:, None] + b[:, 2] * b[:, 3] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def greedy_match(gt_boxes, det_boxes, det_scores, iou: float = IOU_MATCH) -> np.ndarray:
    """Greedy one-to-one matching of one image (eq. `stomatabench-match`): detections in
    decreasing score, each taking the unmatched ground-truth box of highest IoU if that IoU is
    at least ``iou``. Returns a boolean array: which detections are true positives."""
    checks.real(iou, "iou", above=0, maximum=1)
    det_scores = np.asarray(det_scores, float).reshape(-1)
    tp = np.zeros(det_scores.size, bool)
    if det_scores.size == 0 or len(gt_boxes) == 0:
        return tp
    m = box_iou(det_boxes, gt_boxes)
    taken = np.zeros(m.shape[1], bool)
    for d in np.argsort(-det_scores, kind="stable"):
        cand = np.where(taken, -1.0, m[d])
        g = int(np.argmax(cand))
        if cand[g] >= iou:
            taken[g] = True
            tp[d] = True
    return tp


def match_all(coco: dict, dets: dict, iou: float = IOU_MATCH) -> np.ndarray:
    """:func:`greedy_match` on every image: the true-positive flag of each detection."""
    gt: dict[int, list] = {im["id"]: [] for im in coco["images"]}
    for a in coco["annotations"]:
        gt[a["image_id"]].append(a["bbox"])
    tp = np.zeros(len(dets["score"]), bool)
    for img_id, boxes in gt.items():
        sel = np.flatnonzero(dets["image_id"] == img_id)
        if sel.size:
            tp[sel] = greedy_match(
                np.asarray(boxes).reshape(-1, 4), dets["bbox"][sel], dets["score"][sel], iou
            )
    return tp


def counts_at(coco: dict, dets: dict, t: float) -> np.ndarray:
    """The predicted count of each image at threshold ``t``: the number of its detections with
    score ``>= t`` (eq. `stomatabench-count`), in the order of ``coco["images"]``."""
    ids = np.array([im["id"] for im in coco["images"]])
    keep = dets["score"] >= t
    return np.array([int(np.sum(keep & (dets["image_id"] == i))) for i in ids])


def sweep(coco: dict, dets: dict, thresholds, tp=None) -> dict:
    """F1, precision, recall, TP, FP and FN pooled over the split at each threshold of
    ``thresholds`` (eq. `stomatabench-f1`). Greedy matching takes detections in decreasing
    score, so dropping those below ``t`` leaves the others' matches as they were: one matching
    of all detections serves every threshold."""
    thresholds = np.asarray(thresholds, float).reshape(-1)
    tp = match_all(coco, dets) if tp is None else tp
    n_gt = len(coco["annotations"])
    s = dets["score"]
    tps = np.array([int(np.sum(tp & (s >= t))) for t in thresholds])
    fps = np.array([int(np.sum(~tp & (s >= t))) for t in thresholds])
    fns = n_gt - tps
    denom = 2 * tps + fps + fns
    f1 = np.where(denom > 0, 2 * tps / np.where(denom > 0, denom, 1), 0.0)
    prec = np.where(tps + fps > 0, tps / np.maximum(tps + fps, 1), 1.0)
    rec = tps / max(n_gt, 1)
    return {
        "t": thresholds,
        "f1": f1,
        "precision": prec,
        "recall": rec,
        "tp": tps,
        "fp": fps,
        "fn": fns,
    }


def candidate_thresholds(dets: dict, n: int = 200) -> np.ndarray:
    """Thresholds to sweep: ``n`` quantiles of the detection scores (and above the highest)."""
    s = np.asarray(dets["score"], float)
    if s.size == 0:
        return np.array([0.0])
    q = np.unique(np.quantile(s, np.linspace(0, 1, n)))
    return np.r_[q, s.max() + 1e-9]


def frozen_threshold(coco_val: dict, dets_val: dict, n: int = 200) -> float:
    """The operating threshold of a detector: the score threshold with the best pooled F1 on
    the training domain's validation split (eq. `stomatabench-frozen`), then kept for every test
    split."""
    t = candidate_thresholds(dets_val, n)
    f1 = sweep(coco_val, dets_val, t)["f1"]
    return float(t[int(np.argmax(f1))])


def densities(coco: dict, counts) -> np.ndarray:
    """Stomatal density per mm² of each image: ``count / (H W s² 10⁻⁶)`` with ``s`` the image's
    ``pixel_size_um`` (eq. `stomatabench-density`)."""
    counts = checks.array(counts, "counts", ndim=1, shape=(len(coco["images"]),))
    area = np.array(
        [area_mm2(im["height"], im["width"], im["pixel_size_um"]) for im in coco["images"]]
    )
    return counts / area


def ccc(x, y) -> float:
    """Lin's concordance correlation coefficient (eq. `stomatabench-ccc`):
    ``2 s_xy / (s_x² + s_y² + (x̄ - ȳ)²)`` with moments over n (not n - 1)."""
    x = checks.array(x, "x", ndim=1)
    y = checks.array(y, "y", ndim=1, shape=x.shape)
    if x.size < 2:
        raise checks.InputError(f"ccc needs at least 2 pairs, got {x.size}")
    mx, my = x.mean(), y.mean()
    sxy = np.mean((x - mx) * (y - my))  # covariance, over n
    den = x.var() + y.var() + (mx - my) ** 2  # eq. stomatabench-ccc: the denominator
    return float(2 * sxy / den) if den > 0 else 1.0


def bland_altman(pred, true) -> dict:
    """Bland–Altman agreement of ``pred`` with ``true`` (eq. `stomatabench-ba`): the mean
    difference (bias), the standard deviation of the differences (n - 1) and the 95 % limits
    of agreement ``bias ± 1.96 sd``."""
    pred = checks.array(pred, "pred", ndim=1)
    true = checks.array(true, "true", ndim=1, shape=pred.shape)
    if pred.size < 2:
        raise checks.InputError(f"bland_altman needs at least 2 pairs, got {pred.size}")
    d = pred - true
    bias, sd = float(d.mean()), float(d.std(ddof=1))
    return {"bias": bias, "sd": sd, "low": bias - 1.96 * sd, "high": bias + 1.96 * sd}


def miss_fraction(fn: int, fp: int) -> float:
    """The share of errors that are missed stomata, ``FN / (FN + FP)`` (eq. `stomatabench-miss`);
    0.5 when there are no errors."""
    fn = checks.integer(fn, "fn", minimum=0)
    fp = checks.integer(fp, "fp", minimum=0)
    return fn / (fn + fp) if fn + fp else 0.5


def ranking_tau(a, b) -> float:
    """Kendall's tau-b between the orders two metrics give the same detectors (both oriented so
    that larger is better); 1 when they rank alike, -1 when reversed."""
    a = checks.array(a, "a", ndim=1)
    b = checks.array(b, "b", ndim=1, shape=a.shape)
    if np.all(a == a[0]) or np.all(b == b[0]):
        return 1.0 if np.all(a == a[0]) and np.all(b == b[0]) else 0.0
    return float(stats.kendalltau(a, b).statistic)
