"""Tests of chapter 15's library (StomataBench): COCO AP and its detection caps, matching,
F1 sweeps, counts, densities, agreement statistics, the generator and peak picking."""

import importlib.util
from dataclasses import replace

import numpy as np
import pytest
from scipy import ndimage

from reprobook import core
from reprobook.papers import stomatabench as stomata
from reprobook.papers.stomatabench import config, detectors, experiments, full, metrics, synth


def _coco(boxes_per_image, size=192):
    images, anns = [], []
    for i, boxes in enumerate(boxes_per_image, 1):
        images.append({"id": i, "height": size, "width": size, "pixel_size_um": 1.0})
        for b in boxes:
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i,
                    "category_id": 1,
                    "iscrowd": 0,
                    "bbox": [float(v) for v in b],
                    "area": float(b[2] * b[3]),
                }
            )
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "stoma"}]}


def _dets(boxes_per_image, scores=None):
    ids, boxes = [], []
    for i, bs in enumerate(boxes_per_image, 1):
        ids += [i] * len(bs)
        boxes += [list(b) for b in bs]
    n = len(ids)
    score = np.linspace(1.0, 0.5, n) if scores is None else np.asarray(scores, float)
    return {
        "image_id": np.array(ids),
        "bbox": np.array(boxes, float).reshape(-1, 4),
        "score": score,
    }


def _grid_boxes(n, size=20, step=40):
    side = int(np.ceil(np.sqrt(n)))
    return [[(k % side) * step + 2, (k // side) * step + 2, size, size] for k in range(n)]


def test_perfect_predictions_give_ap_one():
    boxes = [_grid_boxes(7), _grid_boxes(3)]
    ev = metrics.coco_eval(_coco(boxes), _dets(boxes))
    assert ev["AP"] == pytest.approx(1.0)
    assert ev["AP50"] == pytest.approx(1.0) and ev["AR"] == pytest.approx(1.0)


def test_max_dets_caps_recall_on_dense_images():
    boxes = [_grid_boxes(150, size=20, step=24)]
    coco, dets = _coco(boxes, size=512), _dets(boxes)
    capped = metrics.coco_eval(coco, dets, (1, 10, 100))
    full_cap = metrics.coco_eval(coco, dets, (1, 10, 300))
    assert capped["AR"] <= 100 / 150 + 1e-12
    assert full_cap["AR"] == pytest.approx(1.0)
    assert full_cap["AP"] == pytest.approx(1.0)
    assert capped["AP"] < full_cap["AP"]


def test_boxes_shifted_by_half_their_width_give_ap50_zero():
    boxes = [_grid_boxes(9)]
    shifted = [[[x + w / 2, y, w, h] for x, y, w, h in boxes[0]]]
    # IoU = (w/2 h) / (3/2 w h) = 1/3 < 0.5
    assert metrics.box_iou(shifted[0][:1], boxes[0][:1])[0, 0] == pytest.approx(1 / 3)
    assert metrics.coco_eval(_coco(boxes), _dets(shifted))["AP50"] == 0.0


def test_greedy_matching_hand_cases():
    gt = np.array([[0, 0, 10, 10], [3, 0, 10, 10]], float)
    # two detections on the first stoma: only the higher-scored one is a true positive
    tp = metrics.greedy_match(gt[:1], [[0, 0, 10, 10], [1, 0, 10, 10]], [0.5, 0.9])
    assert tp.tolist() == [False, True]
    # IoU just under 0.5 does not match: [0,0,10,10] against [0,0,10,20] has IoU 0.5 exactly
    assert metrics.greedy_match(gt[:1], [[0, 0, 10, 20]], [1.0]).tolist() == [True]
    assert metrics.greedy_match(gt[:1], [[0, 0, 10, 21]], [1.0]).tolist() == [False]
    # greedy, not optimal: A (0.9) takes stoma 2 (its best), so B (0.8) is left unmatched
    a, b = [2, 0, 10, 10], [4, 0, 10, 10]
    iou = metrics.box_iou([a, b], gt)
    assert iou[0, 1] > iou[0, 0] >= 0.5 and iou[1, 0] < 0.5
    assert metrics.greedy_match(gt, [a, b], [0.9, 0.8]).tolist() == [True, False]
    # no ground truth: nothing matches
    assert metrics.greedy_match(np.zeros((0, 4)), [a], [1.0]).tolist() == [False]


def test_count_at_threshold_is_the_number_of_scores_at_or_above_it():
    rng = np.random.default_rng(0)
    boxes = [_grid_boxes(5), _grid_boxes(2), []]
    dets = _dets([_grid_boxes(8), _grid_boxes(3), _grid_boxes(4)], rng.random(15))
    coco = _coco(boxes)
    for t in (0.0, 0.3, float(dets["score"][4]), 0.99, 2.0):
        expected = [int(np.sum(dets["score"][dets["image_id"] == i] >= t)) for i in (1, 2, 3)]
        assert metrics.counts_at(coco, dets, t).tolist() == expected


def test_one_matching_serves_every_threshold():
    rng = np.random.default_rng(1)
    gt = [[[x, y, 12, 12] for x, y in rng.uniform(0, 150, (6, 2))] for _ in range(3)]
    det = [
        [[x + rng.normal(0, 3), y + rng.normal(0, 3), 12, 12] for x, y, _, _ in g]
        + [list(v) + [12, 12] for v in rng.uniform(0, 150, (4, 2))]
        for g in gt
    ]
    coco, dets = _coco(gt), _dets(det, rng.random(30))
    ts = np.r_[0.0, np.sort(dets["score"]), 1.1]
    sw = metrics.sweep(coco, dets, ts)
    for k, t in enumerate(ts):
        keep = dets["score"] >= t
        sub = {f: v[keep] for f, v in dets.items()}
        tp = int(metrics.match_all(coco, sub).sum())  # brute force: match again
        assert sw["tp"][k] == tp
        assert sw["fp"][k] == keep.sum() - tp and sw["fn"][k] == 18 - tp
        assert sw["f1"][k] == pytest.approx(2 * tp / (2 * tp + keep.sum() - tp + 18 - tp))


def test_frozen_threshold_maximises_validation_f1():
    rng = np.random.default_rng(2)
    gt = [_grid_boxes(6)]
    # true boxes score high, junk boxes low, so the best threshold separates them
    det = [_grid_boxes(6) + [[150 + 3 * k, 150, 10, 10] for k in range(5)]]
    scores = np.r_[rng.uniform(0.6, 0.9, 6), rng.uniform(0.1, 0.4, 5)]
    t = metrics.frozen_threshold(_coco(gt), _dets(det, scores))
    assert scores[6:].max() < t <= scores[:6].min()


def test_density_units():
    coco = _coco([[[0, 0, 5, 5]] * 37])
    assert synth.area_mm2(192, 192, 1.0) == pytest.approx(0.036864)
    assert metrics.densities(coco, [37])[0] == pytest.approx(1003.689, abs=1e-3)
    coco["images"][0]["pixel_size_um"] = 0.5  # a quarter of the area, four times the density
    assert metrics.densities(coco, [37])[0] == pytest.approx(4 * 1003.689, abs=1e-2)
    with pytest.raises(ValueError, match="counts"):
        metrics.densities(coco, [1, 2])


def test_ccc():
    x = np.array([1.0, 2.0, 3.0, 5.0])
    assert metrics.ccc(x, x) == pytest.approx(1.0)
    assert metrics.ccc(x + 1.0, x) < 1.0
    assert np.corrcoef(x + 1.0, x)[0, 1] == pytest.approx(1.0)  # Pearson misses the shift
    # by hand: x = (1, 2, 3), y = (2, 2, 4): s_xy = 2/3, s_x² = 2/3, s_y² = 8/9, gap² = 4/9
    assert metrics.ccc([1, 2, 3], [2, 2, 4]) == pytest.approx((4 / 3) / (2 / 3 + 8 / 9 + 4 / 9))
    assert metrics.ccc([1, 2, 3], [2, 2, 4]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        metrics.ccc([1, 2, 3], [1, 2])


def test_bland_altman_by_hand():
    ba = metrics.bland_altman([3, 5, 7], [1, 4, 6])  # differences 2, 1, 1
    sd = np.sqrt(1 / 3)
    assert ba["bias"] == pytest.approx(4 / 3) and ba["sd"] == pytest.approx(sd)
    assert ba["low"] == pytest.approx(4 / 3 - 1.96 * sd)
    assert ba["high"] == pytest.approx(4 / 3 + 1.96 * sd)


def test_miss_fraction_and_ranking_tau():
    assert metrics.miss_fraction(3, 1) == 0.75
    assert metrics.miss_fraction(0, 0) == 0.5
    assert metrics.ranking_tau([0.9, 0.5, 0.1], [3, 2, 1]) == pytest.approx(1.0)
    assert metrics.ranking_tau([0.9, 0.5, 0.1], [1, 2, 3]) == pytest.approx(-1.0)
    assert metrics.ranking_tau([0.9, 0.5, 0.1], [2, 3, 1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        metrics.miss_fraction(-1, 2)


def test_realised_density_matches_the_target():
    coco, _ = synth.make_split("train", 200, 7)
    realised = metrics.densities(coco, synth.true_counts(coco))
    target = np.array([im["density_target"] for im in coco["images"]])
    assert abs(realised.mean() / target.mean() - 1) < 0.05


@pytest.mark.parametrize("style", [synth.TRAIN_STYLES[0], synth.CROP_STYLES[0]])
def test_every_box_holds_its_stoma(style):
    # flat pavement, no walls, optics or pore: a stoma is a connected bright region
    flat = replace(style, wall=0.0, blur=0.0, noise=0.0, pore=0.0, contrast=0.6)
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(6):
        img, anns, _ = synth.draw_image(flat, synth.WOODY, rng)
        labels, _ = ndimage.label(img > 0.85)
        boxes = np.array([a["bbox"] for a in anns]).reshape(-1, 4)
        grown = boxes + [-1, -1, 2, 2]
        alone = (metrics.box_iou(grown, grown) > 0).sum(axis=1) == 1
        for box in boxes[alone]:
            x, y, w, h = box
            lab = labels[int(y + h / 2), int(x + w / 2)]
            ys, xs = np.nonzero(labels == lab)
            found = [xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min()]
            assert metrics.box_iou([found], [box])[0, 0] >= 0.95
            checked += 1
    assert checked >= 20


def test_splits_are_deterministic_and_carry_coco_fields():
    a, ia = synth.make_split("far", 3, 11)
    b, ib = synth.make_split("far", 3, 11)
    _, ic = synth.make_split("far", 3, 12)
    assert np.array_equal(ia, ib) and not np.array_equal(ia, ic)
    assert a == b
    assert all("pixel_size_um" in im and im["shift"] for im in a["images"])
    assert all(x["iscrowd"] == 0 and x["category_id"] == 1 for x in a["annotations"])
    large, _ = synth.make_split("large", 6, 0)
    n = synth.true_counts(large)
    assert n.min() > 100 and 125 <= n.mean() <= 190


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="name"):
        synth.make_split("test", 2, 0)
    with pytest.raises(ValueError, match="n_images"):
        synth.make_split("train", 0, 0)
    with pytest.raises(ValueError, match="max_dets"):
        metrics.coco_eval(_coco([[]]), _dets([[]]), (1, 300, 10))
    with pytest.raises(ValueError, match="odd"):
        detectors.maxpool_peaks(__import__("torch").zeros(8, 8), kernel=2)
    with pytest.raises(ValueError, match="crop"):
        detectors.training_crops(_coco([[]]), np.zeros((1, 64, 64)), 2, 30, 0)


def test_maxpool_peaks_returns_the_known_peaks():
    import torch

    heat = torch.zeros(16, 16)
    heat[3, 4], heat[3, 5], heat[10, 12], heat[14, 1] = 0.9, 0.85, 0.8, 0.3
    scores, ys, xs = detectors.maxpool_peaks(heat, k=3)
    # (3, 5) is beside a higher cell and is suppressed
    assert list(zip(ys.tolist(), xs.tolist())) == [(3, 4), (10, 12), (14, 1)]
    assert scores.tolist() == pytest.approx([0.9, 0.8, 0.3])
    batch = torch.stack([heat, heat.flip(1)])[:, None]
    s, yb, xb = detectors.maxpool_peaks(batch, k=2)
    assert yb.shape == (2, 2) and xb[1].tolist() == [15 - 4, 15 - 12]


def test_centernet_targets_peak_at_the_centres():
    heat, size, off, mask = detectors.centernet_targets([[10, 20, 16, 8]], (16, 16))
    cy, cx = (20 + 4) / 4, (10 + 8) / 4
    assert heat[0, int(cy), int(cx)] == 1.0 and heat.max() == 1.0
    assert mask.sum() == 1
    assert size[:, int(cy), int(cx)] == pytest.approx(np.log([16, 8]))
    assert off[:, int(cy), int(cx)] == pytest.approx([cx - int(cx), cy - int(cy)])


def test_c_statistics_on_a_hand_table():
    import pandas as pd

    rows = []
    for d, ap, miss in (
        ("D1", (0.5, 0.3, 0.1), (0.4, 0.9)),
        ("D2", (0.6, 0.4, 0.2), (0.3, 0.8)),
        ("D3", (0.7, 0.5, 0.3), (0.5, 0.6)),
    ):
        for s, a in zip(experiments.TEST_SPLITS, ap):
            rows.append(
                {
                    "split": s,
                    "detector": d,
                    "AP": a,
                    "F1": a,
                    "count_MAE": -a,
                    "density_CCC": a,
                    "transfer_loss": 0.01,
                    "rel_bias": 0.0,
                    "miss_fraction": {"near": miss[0], "far": miss[1]}.get(s, 0.5),
                }
            )
    table = pd.DataFrame(rows)
    assert experiments.c1_statistic(table) == pytest.approx(1.0)  # every metric agrees
    assert experiments.c2_statistic(table) == pytest.approx(0.0)
    assert experiments.c3_statistic(table) == pytest.approx(0.1)  # D3's miss rise, 0.6 - 0.5
    table.loc[(table.detector == "D3") & (table.split == "near"), "rel_bias"] = 0.2
    assert experiments.c2_statistic(table) == pytest.approx(0.2)


def test_profiles_resolve():
    reduced = core.resolve_notebook(config.PROFILES, "03_coco_ap", "reduced")
    fullp = core.resolve_notebook(config.PROFILES, "03_coco_ap", "full")
    assert fullp.n_train > reduced.n_train and fullp.torchvision_models
    assert config.sizes_of(reduced) == config.Sizes()
    five = core.resolve_notebook(config.PROFILES, "04_measurement_reliability", "reduced", n_test=5)
    assert five.n_test == 5
    assert list(config.PROFILES) == [
        "01_synthetic_epidermis",
        "02_detectors",
        "03_coco_ap",
        "04_measurement_reliability",
    ]


def test_the_package_reaches_every_module_and_start_resolves_its_notebooks(tmp_path, monkeypatch):
    assert stomata.experiments.replicates and stomata.full.train_learned and stomata.hub
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        stomata.nope  # noqa: B018
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    run, cfg = core.start(stomata, "03_coco_ap", "reduced", 0, threads=1, n_large=2)
    assert cfg == config.CocoApConfig(n_large=2) and run.notebook == "03_coco_ap"


def test_d3_keeps_the_loss_of_every_step_in_its_checkpointed_buffer():
    import torch

    coco, images = synth.make_split("train", 2, 0)
    kw = dict(seed=0, steps=3, batch=2, crop=32, width=8)
    a = detectors.train_centernet(coco, images, **kw)
    b = detectors.train_centernet(coco, images, **kw)
    assert a.loss_curve.shape == (3,) and bool((a.loss_curve > 0).all())
    assert torch.equal(a.loss_curve, b.loss_curve) and "loss_curve" in a.state_dict()
    m = detectors.build_centernet(width=8, steps=4)
    detectors.keep_loss_curve(m, np.array([3.0, 2.0], np.float32))
    assert m.loss_curve.tolist() == [3.0, 2.0, 0.0, 0.0]


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="installed")
def test_full_profile_says_what_it_needs():
    fullp = core.resolve_notebook(config.PROFILES, "02_detectors", "full")
    with pytest.raises(RuntimeError, match=r"torchvision==0\.28\.0"):
        full.check_requirements(config.sizes_of(fullp))
    full.check_requirements(config.Sizes())  # the reduced profile needs nothing more


def _hand_tables(n=3, reverse=True, noise=0.0):
    """n replicate tables; D1 has the lowest AP on every split but, when ``reverse``, the lowest
    count MAE on far-OOD (a systematic reversal) and the largest transfer loss there."""
    import pandas as pd

    rng = np.random.default_rng(0)
    tables = []
    for r in range(n):
        rows = []
        for d, ap in (("D1", 0.1), ("D2", 0.5), ("D3", 0.3)):
            for s in experiments.TEST_SPLITS:
                a = ap + noise * rng.normal()
                far_mae = {"D1": 1.0, "D2": 2.0, "D3": 3.0}[d]  # D1 counts best, D2 second
                mae = far_mae if (reverse and s == "far") else 1 - a
                rows.append(
                    {
                        "seed": r,
                        "split": s,
                        "detector": d,
                        "AP": a,
                        "F1": a,
                        "count_MAE": mae + 0.01 * r,
                        "density_CCC": a,
                        "transfer_loss": 0.01 + (0.2 + 0.01 * r if d == "D2" and s == "far" else 0),
                        "rel_bias": 0.0,
                        "miss_fraction": 0.5,
                    }
                )
        tables.append(pd.DataFrame(rows))
    return tables


def test_comparisons_keep_their_identity_across_replicates():
    tables = _hand_tables()
    taus = experiments.tau_groups(tables)
    assert len(taus) == 9 and all(len(v) == 3 for v in taus.values())
    assert taus["far: AP vs count_MAE"] == pytest.approx([-1 / 3] * 3)
    assert taus["near: AP vs F1"] == pytest.approx([1.0] * 3)
    excess = experiments.excess_groups(tables)
    assert len(excess) == 18
    # D2 has the higher AP and the larger transfer loss on far-OOD: a positive excess
    assert excess["far: D1 vs D2, transfer loss"] == pytest.approx([0.2, 0.21, 0.22])
    assert excess["near: D1 vs D2, transfer loss"] == pytest.approx([0.0] * 3)


def test_simultaneous_extreme_is_bonferroni_and_never_decided_by_equal_replicates():
    tables = _hand_tables()
    iv, group, table = experiments.simultaneous_extreme(
        experiments.tau_groups(tables), "min", bounds=(-1.0, 1.0)
    )
    # every comparison's replicates agree exactly: each gets the whole range, never width 0
    assert group == "far: AP vs count_MAE" and iv.estimate == pytest.approx(-1 / 3)
    assert (iv.low, iv.high) == (-1.0, 1.0)
    assert "Bonferroni" in iv.method and "Student-t" in iv.method and iv.n == 3
    iv2, group2, _ = experiments.simultaneous_extreme(experiments.excess_groups(tables), "max")
    assert group2 == "far: D1 vs D2, transfer loss" and iv2.estimate == pytest.approx(0.21)
    # the interval of the largest mean is at least as wide as that comparison's own 95% one,
    # since each is made at 1 - 0.05/18
    own = core.t_interval([0.2, 0.21, 0.22])
    assert iv2.low < own.low and iv2.high > own.high
    from scipy import stats

    half = stats.t.ppf(1 - 0.05 / 36, 2) * np.std([0.2, 0.21, 0.22], ddof=1) / np.sqrt(3)
    assert iv2.low == pytest.approx(0.21 - half)
    with pytest.raises(ValueError, match="same number"):
        experiments.simultaneous_extreme({"a": [1, 2], "b": [1, 2, 3]}, "min")
