"""Tests of chapter 15's full path (StomataBench): the hub dataset's loader on the smoke fixture
and on files laid out like the hub repository's, the real splits, the detectors' slots and
their recorded stand-in, the stop before any work when torchvision is missing, and (where
torchvision is installed) one training step of tiny Faster R-CNN and FCOS on the fixture."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from reprobook import core
from reprobook.core import resources
from reprobook.papers import stomatabench as stomata
from reprobook.papers.stomatabench import config, experiments, fixtures, full, hub

HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


@pytest.fixture
def smoke_env(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("REPROBOOK_FIXTURES", str(tmp_path / "fixtures"))
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    return tmp_path


def _sizes(profile: str, **overrides):
    return config.sizes_of(
        core.resolve_notebook(config.PROFILES, "03_coco_ap", profile, **overrides)
    )


def test_the_detector_is_a_setting_with_the_stand_in_declared():
    assert [_sizes(p).detector for p in core.PROFILE_NAMES] == ["toy", "torchvision", "torchvision"]
    assert _sizes("reduced").torchvision_models == ()
    smoke = _sizes("smoke")
    assert smoke.torchvision_models == ("fasterrcnn", "fcos")
    assert experiments.detector_names(_sizes("reduced")) == ("D1", "D2", "D3")
    assert full.learned_labels(smoke) == ("fasterrcnn", "fcos")
    assert full.learned_labels(_sizes("smoke", detector="toy")) == ("toy-fasterrcnn", "toy-fcos")
    inputs = {i.find: i for i in config.RESOURCES["full"].inputs}
    assert inputs["module:torchvision"].unless == "detector=toy"
    assert inputs[hub.FIND].unless is None  # real stomata have no stand-in
    needed = resources.needed_inputs(config.RESOURCES["full"], {"detector": "toy"})
    assert [i.find for i in needed] == [hub.FIND]
    with pytest.raises(ValueError, match="detector"):
        full.check_requirements(_sizes("smoke", detector="maybe"))


def test_the_fixture_has_the_cards_schema(tmp_path: Path):
    import datasets

    fixtures.hub_stomata(tmp_path)
    rows = datasets.load_from_disk(str(tmp_path))["train"]
    assert rows.features == hub.features()
    assert len(rows) == 12
    assert sum(hub.is_populus(n) for n in rows["scientific_name"]) == 3
    first = rows[0]
    assert first["image"].size == (fixtures.WIDTH, fixtures.HEIGHT)
    assert (first["width"], first["height"]) == (fixtures.WIDTH, fixtures.HEIGHT)
    for ann in rows["annotations"]:
        cats, boxes = ann["category_id"], ann["bounding_box"]
        assert cats == [1, 0] * (len(cats) // 2) and cats
        for whole, inner in zip(boxes[::2], boxes[1::2]):  # inner walls inside the stoma
            assert whole["x_min"] < inner["x_min"] < inner["x_max"] < whole["x_max"]
            assert whole["y_min"] < inner["y_min"] < inner["y_max"] < whole["y_max"]
            assert whole["y_max"] <= fixtures.HEIGHT + 1e-4


def test_the_loader_reads_the_fixture_at_smoke_and_nothing_at_reduced(smoke_env: Path):
    rows = hub.hub_stomata("smoke")
    assert rows.features == hub.features() and len(rows) == 12
    assert str(smoke_env / "fixtures") in rows.cache_files[0]["filename"]
    with pytest.raises(ValueError, match="uses no real images"):
        hub.hub_stomata("reduced")


def test_real_splits_are_disjoint_deterministic_and_hold_populus_out(smoke_env: Path):
    rows = hub.hub_stomata("smoke")
    sizes = _sizes("smoke")
    idx = hub.split_indices(rows, sizes, seed=0)
    assert [len(idx[s]) for s in hub.SPLITS] == [3, 2, 2, 2]
    flat = [i for s in hub.SPLITS for i in idx[s]]
    assert len(set(flat)) == len(flat)
    names = rows["scientific_name"]
    assert all(hub.is_populus(names[i]) for i in idx["hub-populus"])
    assert not any(hub.is_populus(names[i]) for s in hub.SPLITS[:3] for i in idx[s])
    assert hub.split_indices(rows, sizes, seed=0) == idx
    assert hub.split_indices(rows, sizes, seed=1) != idx
    with pytest.raises(ValueError, match="asks for"):
        hub.split_indices(rows, _sizes("smoke", hub_train=20), seed=0)
    data, category, ids = hub.hub_splits(rows, sizes, seed=0)
    assert category == 1  # the whole stomata: the larger boxes
    coco, images = data["hub-train"]
    assert ids["hub-train"] == [rows[i]["image_id"] for i in idx["hub-train"]]
    f = sizes.hub_width / fixtures.WIDTH
    assert images[0].shape == (round(fixtures.HEIGHT * f), sizes.hub_width)
    assert 0 <= images[0].min() and images[0].max() <= 1
    ann = rows[idx["hub-train"][0]]["annotations"]
    wholes = [b for c, b in zip(ann["category_id"], ann["bounding_box"]) if c == 1]
    first = [a["bbox"] for a in coco["annotations"] if a["image_id"] == 1]
    assert len(first) == len(wholes)
    b = wholes[0]
    want = [b["x_min"] * f, b["y_min"] * f, (b["x_max"] - b["x_min"]) * f]
    assert first[0][:3] == pytest.approx(want, abs=1e-4)
    assert "pixel_size_um" not in coco["images"][0]  # no density from an unknown unit


def test_the_whole_stoma_category_is_the_one_with_the_larger_boxes(tmp_path: Path):
    import datasets

    rows = fixtures.stomata_rows()
    for r in rows:  # swap the ids: 0 now names the whole stomata
        r["annotations"]["category_id"] = [1 - c for c in r["annotations"]["category_id"]]
    table = datasets.Dataset.from_list(rows, features=hub.features())
    assert hub.whole_stoma_category(table) == 0


def _jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (90, 90, 90)).save(buf, format="JPEG")
    return buf.getvalue()


def test_rows_are_built_from_files_laid_out_like_the_hub_repository(tmp_path: Path):
    import datasets

    archive = tmp_path / "Labeled Stomatal Images.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("Hardwood/STMHD0001.jpg", _jpeg(200, 100))
        z.writestr("Hardwood/STMHD0001.txt", "1 0.5 0.5 0.1 0.2\n0 0.25 0.75 0.05 0.1\n")
        z.writestr("Populus/STMPO0002.jpg", _jpeg(200, 100))  # no label file: no stomata
    meta = datasets.Dataset.from_dict(
        {
            "image_id": ["STMHD0001", "STMPO0002"],
            "species": ["Nuttall oak", "eastern cottonwood"],
            "scientific_name": ["Quercus texana Buckley", "Populus deltoides"],
            "image_path": ["Hardwood/STMHD0001.jpg", "Populus/STMPO0002.jpg"],
            "image_magnification": [100, 40],
            "width": [200, 200],
            "height": [100, 100],
            "resolution": [118, 118],
        }
    )
    rows = hub.rows_from_files(meta, str(archive))
    assert rows.features == hub.features() and len(rows) == 2
    first = rows[0]
    assert first["magnification"] == 100 and first["image"].size == (200, 100)
    assert first["annotations"]["category_id"] == [1, 0]
    box = first["annotations"]["bounding_box"][0]
    assert [box[k] for k in ("x_min", "y_min", "x_max", "y_max")] == pytest.approx(
        [90, 40, 110, 60]
    )
    assert rows[1]["annotations"] == {"category_id": [], "bounding_box": []}
    with pytest.raises(ValueError, match="lacks resolution"):
        hub.rows_from_files(meta.remove_columns("resolution"), str(archive))
    more = datasets.concatenate_datasets([meta, meta.select([0]).map(lambda r: {"image_id": "X"})])
    with pytest.raises(ValueError, match="1 images of the metadata table are not in the archive"):
        hub.rows_from_files(more, str(archive))


def test_the_stand_in_is_recorded_and_torchvision_without_it_stops_first(smoke_env: Path):
    run, toy = core.start(stomata, "02_detectors", "smoke", detector="toy")
    assert toy == dataclasses.replace(config.PROFILES["02_detectors"]["smoke"], detector="toy")
    assert json.loads(run.path.read_text())["stand_ins"] == {"detector": "toy"}
    reduced = core.resolve_notebook(config.PROFILES, "02_detectors", "reduced")
    assert reduced.detector == "toy"
    if HAS_TORCHVISION:
        return
    for profile in ("smoke", "full"):
        with pytest.raises(core.MissingInputs) as stop:
            core.start(stomata, "03_coco_ap", profile)
        assert "module:torchvision" in str(stop.value)
        assert "-p detector=toy" in str(stop.value)
        results = run.path.parents[2] / profile / "stomatabench" / "03_coco_ap.json"
        assert not results.exists()  # stopped before any work
    with pytest.raises(RuntimeError, match=r"torchvision==0\.28\.0"):
        full.check_requirements(config.sizes_of(config.PROFILES["03_coco_ap"]["full"]))


def test_the_toy_stand_in_fills_both_slots_on_synthetic_and_real_images(smoke_env: Path):
    sizes = _sizes("smoke", detector="toy", n_train=2)
    assert experiments.detector_names(sizes) == ("D1", "D2", "D3", "toy-fasterrcnn", "toy-fcos")
    learned = experiments.learned_models(sizes, 0, "smoke")
    assert list(learned) == ["toy-fasterrcnn", "toy-fcos"]
    (a, a_loaded), (b, _) = learned.values()
    assert not a_loaded and type(a).__name__ == "TinyCenterNet"
    assert not np.allclose(a.loss_curve.numpy(), b.loss_curve.numpy())  # seeds of their own
    real = experiments.hub_replicate(sizes, 0, "smoke")
    assert real["detectors"] == ("D3", "toy-fasterrcnn", "toy-fcos")
    rel = experiments.hub_reliability(real, 20)
    assert list(rel.split.unique()) == list(hub.TEST_SPLITS)
    assert "count_CCC" in rel and "density_CCC" not in rel
    taus = experiments.ranking_taus(rel, real["detectors"], experiments.HUB_RANKED)
    assert len(taus) == 2 * 3 and all(-1 <= t["tau"] <= 1 for t in taus)
    ap = experiments.ap_table([real], splits=experiments.HUB_EVAL_SPLITS)
    assert len(ap) == 3 * 3 and ap.AP.between(0, 1).all()
    again = experiments.hub_replicate(sizes, 0, "smoke")
    assert again["loaded"]  # cached for the next notebooks


@pytest.mark.parametrize("name", ["fasterrcnn", "fcos"])
def test_a_tiny_torchvision_detector_trains_a_step_and_detects_on_the_fixture(
    name, smoke_env: Path
):
    pytest.importorskip("torchvision")
    import torch

    rows = hub.hub_stomata("smoke")
    data, _, _ = hub.hub_splits(rows, _sizes("smoke"), seed=0)
    coco, images = data["hub-train"]
    model = full.torchvision_model(name, min_size=64, max_size=96, detections=50)
    assert sum(p.numel() for p in model.parameters()) > 0
    first = [a["bbox"] for a in coco["annotations"] if a["image_id"] == 1]
    img, boxes = full.training_sample(images[0], first, np.random.default_rng(0))
    assert img.shape == (3, *images[0].shape) or img.shape == (3, *images[0].shape[::-1])
    assert boxes.shape == (len(first), 4) and (boxes[:, 2:] > boxes[:, :2]).all()
    trained = full.train_torchvision(
        name, coco, images, seed=0, steps=1, batch=2, min_size=64, max_size=96
    )
    assert not trained.training and torch.isfinite(trained.loss_curve).all()
    assert trained.loss_curve[0] > 0
    val_coco, val_images = data["hub-val"]
    dets = full.torchvision_detect(trained, val_coco, val_images, max_dets=50)
    assert set(dets) == {"image_id", "bbox", "score"}
    assert dets["bbox"].shape == (len(dets["score"]), 4)
    assert set(dets["image_id"]) <= {im["id"] for im in val_coco["images"]}
    assert (np.bincount(dets["image_id"], minlength=3) <= 50).all()
