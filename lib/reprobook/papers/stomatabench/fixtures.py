"""The smoke profile's fixture of chapter 15's hub dataset (notebooks/15_stomatabench): twelve
rows in the schema of ``XintongHe/Stomatal_Images_Datasets``'s card (:func:`.hub.features`),
nine of hardwood species and three of Populus taxa, saved with ``DatasetDict.save_to_disk`` as
its one split, ``train``. The images are the chapter's synthetic epidermis at 128 x 96 px (the
real ones are 1024 x 768) stored as JPEG, each with its whole-stoma boxes (category 1) and, inside
each, a box of the inner guard-cell walls (category 0), as the real dataset annotates both.
Deterministic, built offline.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

HUB_FIND = "hf-dataset:XintongHe/Stomatal_Images_Datasets"
_SPECIES = (  # (common name, scientific name): hardwoods of the kind the card lists, then Populus
    ("Nuttall oak", "Quercus texana Buckley"),
    ("red maple", "Acer rubrum L."),
    ("American elm", "Ulmus americana L."),
    ("green ash", "Fraxinus pennsylvanica Marshall"),
    ("shagbark hickory", "Carya ovata (Mill.) K. Koch"),
    ("eastern cottonwood", "Populus deltoides W. Bartram ex Marshall"),
    ("black cottonwood", "Populus trichocarpa Torr. & A. Gray"),
)
_ROWS = (0, 1, 2, 3, 4, 0, 1, 2, 3, 5, 6, 5)  # species of each row: 9 hardwood, 3 Populus
WIDTH, HEIGHT = 128, 96


def _jpeg(gray: np.ndarray) -> bytes:
    from PIL import Image

    rgb = np.repeat((np.clip(gray, 0, 1) * 255).round().astype(np.uint8)[..., None], 3, axis=2)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def stomata_rows() -> list[dict]:
    """The fixture's rows, as plain dicts in the card's schema."""
    from . import synth

    coco, images = synth.make_split("train", len(_ROWS), seed=15, size=WIDTH)
    rows = []
    for k, (im, sp) in enumerate(zip(coco["images"], _ROWS)):
        cats, boxes = [], []
        for a in coco["annotations"]:
            x, y, w, h = a["bbox"]
            if a["image_id"] != im["id"] or y + h > HEIGHT:
                continue
            cx, cy = x + w / 2, y + h / 2
            cats += [1, 0]  # the whole stoma, then its inner guard-cell walls
            boxes += [
                {"x_min": x, "y_min": y, "x_max": x + w, "y_max": y + h},
                {"x_min": cx - 0.2 * w, "y_min": cy - 0.2 * h, "x_max": cx + 0.2 * w,
                 "y_max": cy + 0.2 * h},
            ]  # fmt: skip
        common, scientific = _SPECIES[sp]
        prefix = "STMPO" if scientific.startswith("Populus") else "STMHD"
        rows.append(
            {
                "image_id": f"{prefix}{k + 1:04d}",
                "species": common,
                "scientific_name": scientific,
                "image": {"bytes": _jpeg(images[k][:HEIGHT]), "path": None},
                "magnification": 100,
                "width": WIDTH,
                "height": HEIGHT,
                "resolution": 118.0,
                "annotations": {"category_id": cats, "bounding_box": boxes},
            }
        )
    return rows


def hub_stomata(dest: Path) -> None:
    """Write the fixture of the hub dataset into ``dest``."""
    import datasets

    from .hub import features

    rows = stomata_rows()
    table = datasets.Dataset.from_list(rows, features=features())
    datasets.DatasetDict({"train": table}).save_to_disk(str(dest))


FIXTURES = {HUB_FIND: hub_stomata}
