"""Chapter 15 under rounding: the classical detectors' fits, their detections and the
reliability metrics must not depend on the last bits of their inputs.

Images are float32, so a relative move of 1e-12 vanishes when they are standardised; they are
moved by ``core.jitter(x, seed, rel=1e-7)`` instead, about one float32 ulp (what two float32
kernels differ by). Detections are float64 and move by ``rel=1e-12``. Each test says what it
would catch.
"""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.stomatabench import detectors, experiments, metrics, synth

SEEDS = range(5)


@pytest.fixture(scope="module")
def splits():
    return {
        name: synth.make_split(name, n, 3, size=192)
        for name, n in (("train", 10), ("val", 4), ("near", 4), ("crop", 4), ("far", 4))
    }


def _ulp(images, seed):
    return np.stack(
        [core.jitter(np.asarray(im, float), [seed, i], rel=1e-7) for i, im in enumerate(images)]
    )


def test_classical_fits_and_detections_are_stable_under_jitter(splits):
    # D1's box factor is a median of ratios and its blobs come from thresholded local maxima
    # of the LoG; D2's template is a mean of rotated crops and its peaks local maxima of the
    # correlation. Catches a fit or a peak search that follows a one-ulp change of the pixels
    # (a blob or peak at a plateau or at the threshold, a median between two equal ratios).
    coco, images = splits["train"]
    vc, vi = splits["val"]
    d1, d2 = detectors.fit_log(coco, images), detectors.fit_template(coco, images)
    ref = {"D1": d1.detect(vc, vi), "D2": d2.detect(vc, vi)}
    ap = {k: metrics.coco_eval(vc, v)["AP"] for k, v in ref.items()}
    for s in SEEDS:
        e1, e2 = (
            detectors.fit_log(coco, _ulp(images, s)),
            detectors.fit_template(coco, _ulp(images, s)),
        )
        assert e1.k == pytest.approx(d1.k, rel=1e-9)
        assert (e1.min_sigma, e1.max_sigma) == (d1.min_sigma, d1.max_sigma)
        for a, b in zip(e2.templates, d2.templates, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
        np.testing.assert_allclose(e2.boxes_wh, d2.boxes_wh, rtol=1e-12)
        got = {"D1": e1.detect(vc, _ulp(vi, s + 10)), "D2": e2.detect(vc, _ulp(vi, s + 10))}
        for k in ref:
            np.testing.assert_array_equal(got[k]["image_id"], ref[k]["image_id"])
            np.testing.assert_allclose(got[k]["bbox"], ref[k]["bbox"], rtol=1e-9)
            np.testing.assert_allclose(got[k]["score"], ref[k]["score"], atol=1e-4)
            assert metrics.coco_eval(vc, got[k])["AP"] == pytest.approx(ap[k], abs=1e-9)


def _rep(splits):
    """A replicate of D1, D2 and a third detector (D1's boxes with D2-like scores): what
    :func:`experiments.reliability` reads, without training D3."""
    train = splits["train"]
    d1, d2 = detectors.fit_log(*train), detectors.fit_template(*train)
    dets = {}
    for s in experiments.EVAL_SPLITS:
        a, b = d1.detect(*splits[s]), d2.detect(*splits[s])
        c = {**a, "score": np.sqrt(np.abs(a["score"])) + 1e-3 * a["bbox"][:, 2]}
        dets[s] = {"D1": a, "D2": b, "D3": c}
    return {"seed": 3, "data": splits, "dets": dets}


def _moved(rep, seed):
    dets = {
        s: {
            d: {
                "image_id": v["image_id"],
                "bbox": core.jitter(v["bbox"], [seed, 0]),
                "score": core.jitter(v["score"], [seed, 1]),
            }
            for d, v in dd.items()
        }
        for s, dd in rep["dets"].items()
    }
    return {**rep, "dets": dets}


def test_reliability_metrics_are_stable_under_jitter_of_the_detections(splits):
    # Greedy matching at IoU 0.5, the F1 sweep and its argmax (the frozen threshold), counts,
    # densities, CCC, Bland-Altman and the C1-C3 statistics. Catches a match, a threshold
    # choice or a ranking that a rounding-level move of a box or a score flips.
    rep = _rep(splits)
    for d in experiments.DETECTORS:  # no exact ties here: the tie case is the next test's
        for s in experiments.EVAL_SPLITS:
            sc = rep["dets"][s][d]["score"]
            assert np.unique(sc).size == sc.size
    ref = experiments.reliability(rep, n_thresholds=50)
    exact = ["F1", "best_F1", "count_MAE", "count_bias", "density_CCC", "TP", "FP", "FN"]
    for s in SEEDS:
        got = experiments.reliability(_moved(rep, s), n_thresholds=50)
        np.testing.assert_allclose(
            got[exact].to_numpy(float), ref[exact].to_numpy(float), rtol=1e-12
        )
        np.testing.assert_allclose(got["threshold"], ref["threshold"], rtol=1e-9)
        np.testing.assert_allclose(got["AP"], ref["AP"], atol=1e-9)
        for stat in (experiments.c1_statistic, experiments.c2_statistic, experiments.c3_statistic):
            assert stat(got) == pytest.approx(stat(ref), abs=1e-9)


def test_exact_score_ties_move_coco_ap_but_not_the_counts():
    # pycocotools orders tied scores as they come (a stable sort), so the order of two
    # detections with exactly equal scores, one a hit and one a miss, changes AP; F1, the
    # counts and the frozen threshold do not depend on that order. This documents the
    # convention the chapter keeps (COCO's own); a change of it shows here.
    coco = {
        "images": [{"id": 1, "height": 100, "width": 100, "pixel_size_um": 1.0}],
        "annotations": [
            {
                "id": i + 1,
                "image_id": 1,
                "category_id": 1,
                "bbox": [10.0 + 30 * i, 10.0, 10.0, 10.0],
                "area": 100.0,
                "iscrowd": 0,
            }
            for i in range(2)
        ],  # fmt: skip
        "categories": [{"id": 1, "name": "stoma"}],
    }
    hit, miss = [10.0, 10.0, 10.0, 10.0], [70.0, 70.0, 10.0, 10.0]
    other = [40.0, 10.0, 10.0, 10.0]

    def dets(boxes, scores):
        return {
            "image_id": np.ones(len(boxes), int),
            "bbox": np.array(boxes),
            "score": np.array(scores),
        }

    a = dets([hit, miss, other], [0.9, 0.9, 0.5])
    b = dets([miss, hit, other], [0.9, 0.9, 0.5])
    assert metrics.coco_eval(coco, a)["AP50"] != metrics.coco_eval(coco, b)["AP50"]
    t = metrics.candidate_thresholds(a, 10)
    for key in ("f1", "tp", "fp"):
        np.testing.assert_array_equal(
            metrics.sweep(coco, a, t)[key], metrics.sweep(coco, b, t)[key]
        )
    assert metrics.frozen_threshold(coco, a, 10) == metrics.frozen_threshold(coco, b, 10)
