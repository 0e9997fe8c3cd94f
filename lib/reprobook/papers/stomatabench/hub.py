"""The public hardwood stomata of chapter 15's full profile (notebooks/15_stomatabench):
``XintongHe/Stomatal_Images_Datasets`` on the Hugging Face hub, about 11,000 light micrographs
of 17 hardwood species and seven Populus taxa (CC-BY-4.0), each annotated with boxes of two
kinds: whole stomata (guard cells and pore) and inner guard-cell walls.

Rows follow the dataset card's schema (:func:`features`): ``image_id``, ``species``,
``scientific_name``, ``image``, ``magnification``, ``width``, ``height``, ``resolution`` and
``annotations`` (``category_id`` and ``bounding_box`` with ``x_min``, ``y_min``, ``x_max``,
``y_max`` in pixels, one entry per box). The hub repository builds these rows with a loading
script, which ``datasets`` 5 no longer runs; so the full profile loads the repository's data
files, the way ``datasets`` 5 can: the metadata table (``data/Labeled Stomatal Images.csv``,
one row per image) through ``datasets``' CSV builder, and each image with its YOLO label file
(``<image_id>.txt``: ``class x_centre y_centre width height`` relative to the image) from the
archive ``data/Labeled Stomatal Images.zip`` (:func:`rows_from_files`). The smoke profile loads
a fixture saved in the card's schema (:mod:`.fixtures`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reprobook.core import checks

SLUG = "stomatabench"
HUB_ID = "XintongHe/Stomatal_Images_Datasets"
FIND = f"hf-dataset:{HUB_ID}"
META_FILE = "data/Labeled Stomatal Images.csv"
ARCHIVE_FILE = "data/Labeled Stomatal Images.zip"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
META_COLUMNS = ("image_id", "species", "scientific_name", "width", "height", "resolution")
SPLITS = ("hub-train", "hub-val", "hub-hardwood", "hub-populus")
EVAL_SPLITS = ("hub-val", "hub-hardwood", "hub-populus")
TEST_SPLITS = ("hub-hardwood", "hub-populus")


def features():
    """The dataset card's schema, as ``datasets.Features``."""
    import datasets as ds

    box = {k: ds.Value("float32") for k in ("x_min", "y_min", "x_max", "y_max")}
    return ds.Features(
        {
            "image_id": ds.Value("string"),
            "species": ds.Value("string"),
            "scientific_name": ds.Value("string"),
            "image": ds.Image(),
            "magnification": ds.Value("int64"),
            "width": ds.Value("int64"),
            "height": ds.Value("int64"),
            "resolution": ds.Value("float64"),
            "annotations": {
                "category_id": ds.List(ds.Value("int64")),
                "bounding_box": ds.List(box),
            },
        }
    )


def hub_stomata(profile: str):
    """The hub dataset's rows in the card's schema (:func:`features`), images decoded lazily:
    at the full profile built from the repository's data files (:func:`rows_from_files`; from
    the caches when offline), at smoke the chapter's fixture, both through
    ``core.load_hf_dataset``. The reduced profile uses no real images: a ValueError."""
    from reprobook import core

    if not core.runs_full_path(profile):
        raise ValueError(f"the {profile} profile uses no real images; hub_stomata is for full")
    try:
        meta = core.load_hf_dataset(
            SLUG, FIND, profile, split="train", data_files={"train": META_FILE}
        )
        if profile == "smoke":  # the fixture is already in the card's schema
            return meta
        from huggingface_hub import hf_hub_download

        repo = core.locate(SLUG, FIND, profile)
        archive = hf_hub_download(repo, ARCHIVE_FILE, repo_type="dataset")
    except (OSError, ConnectionError, ValueError) as err:
        raise core.MissingInputs(
            f"the hub dataset {HUB_ID} could not be loaded ({type(err).__name__}: {err}); get "
            f"it with `hf download {HUB_ID} --repo-type dataset` (about 9.5 GB)"
        ) from err
    return rows_from_files(meta, archive)


def _yolo_boxes(text: str, width: int, height: int) -> tuple[list[int], list[dict]]:
    """A YOLO label file's lines (``class xc yc w h``, relative) as category ids and pixel
    boxes ``{x_min, y_min, x_max, y_max}``."""
    cats, boxes = [], []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 5:
            raise ValueError(f"a YOLO label line has 5 fields, got {line!r}")
        c, xc, yc, w, h = int(float(parts[0])), *map(float, parts[1:])
        cats.append(c)
        boxes.append(
            {
                "x_min": (xc - w / 2) * width,
                "y_min": (yc - h / 2) * height,
                "x_max": (xc + w / 2) * width,
                "y_max": (yc + h / 2) * height,
            }
        )
    return cats, boxes


def rows_from_files(meta, archive):
    """The card's rows built from the repository's files: ``meta``, the metadata table (a
    ``datasets.Dataset`` with at least :data:`META_COLUMNS` and ``magnification`` or
    ``image_magnification``), and ``archive``, the path of the zip of images and YOLO label
    files, both named by ``image_id`` (the file name without its extension, as the card says).
    An image without a label file has no stomata. Raises a ValueError naming what the files
    lack (never a guess). The rows are written once into the datasets cache."""
    import zipfile

    import datasets

    cols = set(meta.column_names)
    mag = next((c for c in ("magnification", "image_magnification") if c in cols), None)
    lacking = [c for c in META_COLUMNS if c not in cols] + ([] if mag else ["magnification"])
    if lacking:
        raise ValueError(
            f"the metadata table lacks {', '.join(lacking)}; its columns: {sorted(cols)}"
        )
    with zipfile.ZipFile(archive) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
    images, labels = {}, {}
    for n in names:
        stem, ext = Path(n).stem, Path(n).suffix.lower()
        table = images if ext in IMAGE_EXTENSIONS else labels if ext == ".txt" else None
        if table is not None:
            if stem in table:
                raise ValueError(f"two files in the archive are named {stem}{ext}")
            table[stem] = n
    missing = [i for i in meta["image_id"] if str(i) not in images]
    if missing:
        raise ValueError(
            f"{len(missing)} images of the metadata table are not in the archive "
            f"(the first: {missing[0]!r})"
        )

    def rows(meta, archive, mag):
        with zipfile.ZipFile(archive) as z:
            for r in meta:
                key = str(r["image_id"])
                text = z.read(labels[key]).decode() if key in labels else ""
                cats, boxes = _yolo_boxes(text, int(r["width"]), int(r["height"]))
                yield {
                    **{c: r[c] for c in META_COLUMNS},
                    "magnification": r[mag],
                    "image": {"bytes": z.read(images[key]), "path": None},
                    "annotations": {"category_id": cats, "bounding_box": boxes},
                }

    return datasets.Dataset.from_generator(
        rows, features=features(), gen_kwargs={"meta": meta, "archive": archive, "mag": mag}
    )


def whole_stoma_category(rows, n_rows: int = 200) -> int:
    """The category of the whole-stoma boxes: of the two kinds (whole stomata and inner
    guard-cell walls, which lie inside them), the one whose boxes have the larger median area
    over the first ``n_rows`` rows. Decided from the data, since the card does not say which id
    is which."""
    areas: dict[int, list[float]] = {}
    part = rows.select_columns(["annotations"]).select(range(min(n_rows, len(rows))))
    for ann in part["annotations"]:
        for c, b in zip(ann["category_id"], ann["bounding_box"]):
            area = (b["x_max"] - b["x_min"]) * (b["y_max"] - b["y_min"])
            areas.setdefault(int(c), []).append(area)
    if not areas:
        raise ValueError(f"no boxes in the first {n_rows} rows of the hub dataset")
    return max(sorted(areas), key=lambda c: float(np.median(areas[c])))


def is_populus(scientific_name: str) -> bool:
    return str(scientific_name).strip().lower().startswith("populus")


def split_indices(rows, sizes, seed: int) -> dict[str, list[int]]:
    """Row indices of the four real splits, drawn at ``seed``: training, validation (which
    freezes the threshold) and a hardwood test split from the hardwood species, and a Populus
    test split from the Populus taxa, which no training image shows (a shift of taxon)."""
    checks.integer(seed, "seed", minimum=0)
    names = rows["scientific_name"]
    populus = [i for i, n in enumerate(names) if is_populus(n)]
    hardwood = [i for i, n in enumerate(names) if not is_populus(n)]
    a, b, c = sizes.hub_train, sizes.hub_val, sizes.hub_test
    if len(hardwood) < a + b + c or len(populus) < c:
        raise ValueError(
            f"the hub dataset has {len(hardwood)} hardwood and {len(populus)} Populus images; "
            f"the profile asks for {a + b + c} and {c}"
        )
    rng = np.random.default_rng([seed, 15])
    h = [hardwood[i] for i in rng.permutation(len(hardwood))]
    p = [populus[i] for i in rng.permutation(len(populus))]
    return {
        "hub-train": h[:a],
        "hub-val": h[a : a + b],
        "hub-hardwood": h[a + b : a + b + c],
        "hub-populus": p[:c],
    }


def to_coco(rows, category: int, width: int, name: str = "hub"):
    """Rows of the hub dataset as one of the chapter's splits: a COCO dictionary of their
    whole-stoma boxes (``category``), scaled to images resized to ``width`` px (aspect kept),
    clipped to the image and dropped under a pixel; and the grey images in [0, 1]. Images carry
    their species and the dataset's ``resolution`` but no ``pixel_size_um``: the card does not
    give its unit, so no density is computed from it."""
    from PIL import Image

    checks.integer(width, "width", minimum=16)
    images, coco_images, anns = [], [], []
    for k, r in enumerate(rows):
        img = r["image"].convert("L")
        f = width / img.width
        height = max(1, round(img.height * f))
        images.append(np.asarray(img.resize((width, height), Image.BILINEAR), np.float32) / 255)
        coco_images.append(
            {
                "id": k + 1,
                "file_name": r["image_id"],
                "height": height,
                "width": width,
                "species": r["species"],
                "scientific_name": r["scientific_name"],
                "resolution": r["resolution"],
            }
        )
        ann = r["annotations"]
        for c, b in zip(ann["category_id"], ann["bounding_box"]):
            x1, x2 = np.clip([b["x_min"] * f, b["x_max"] * f], 0, width)
            y1, y2 = np.clip([b["y_min"] * f, b["y_max"] * f], 0, height)
            if int(c) != category or x2 - x1 < 1 or y2 - y1 < 1:
                continue
            w, h = float(x2 - x1), float(y2 - y1)
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": k + 1,
                    "category_id": 1,
                    "iscrowd": 0,
                    "bbox": [float(x1), float(y1), w, h],
                    "area": w * h,
                }
            )
    coco = {
        "info": {"description": f"{HUB_ID}, split {name}"},
        "images": coco_images,
        "annotations": anns,
        "categories": [{"id": 1, "name": "stoma", "supercategory": "stoma"}],
    }
    return coco, images


def hub_splits(rows, sizes, seed: int):
    """The four real splits at ``seed`` (:func:`split_indices`) as ``{name: (coco, images)}``,
    with the whole-stoma category and the image ids of each split."""
    category = whole_stoma_category(rows)
    idx = split_indices(rows, sizes, seed)
    data = {s: to_coco(rows.select(i), category, sizes.hub_width, s) for s, i in idx.items()}
    ids = {s: [c["file_name"] for c in data[s][0]["images"]] for s in idx}
    return data, category, ids
