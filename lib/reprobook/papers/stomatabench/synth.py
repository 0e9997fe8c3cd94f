"""A synthetic epidermis: micrographs of leaf surfaces with annotated stomata, for the
StomataBench protocol of chapter 15 (notebooks/15_stomatabench).

The paper's 21-species training set and its four test sets are not public, so the reduced
profile generates its own (our reconstruction): pavement cells as a Voronoi tessellation,
stomata drawn as two guard cells around a dark pore ("kidney" type, woody dicots) or as long
dumbbell-like pairs in rows ("grass" type, crops), at a target density per mm², under 13
"species" styles and an acquisition shift. Every split is written as a COCO dictionary whose
boxes enclose the whole stoma (guard cells and pore) and whose images carry their pixel size
``pixel_size_um``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage
from skimage.segmentation import find_boundaries

from reprobook.core import checks


@dataclass(frozen=True)
class Style:
    """One "species" and its imaging: the look of its stomata and of its pavement cells."""

    name: str
    kind: str  # "kidney" (woody dicot) or "grass" (monocot crop)
    length: tuple[float, float]  # stoma length range, px
    aspect: float  # stoma width / length
    pore: float  # darkness of the pore (0: none, 1: black)
    contrast: float  # brightness of the guard cells above the background
    cells: tuple[int, int]  # pavement cells per 192 x 192 px (range)
    spread: float  # orientation spread, radians (grass: around the rows' axis)
    pixel_size_um: float = 1.0  # micrometres per pixel
    wall: float = 0.25  # darkness of the pavement cell walls
    blur: float = 0.7  # Gaussian blur of the optics, px
    noise: float = 0.04  # additive Gaussian noise (image range about 0-1)
    invert: bool = False  # inverted polarity (an impression against fluorescence)


# 8 training styles, 3 unseen woody styles (near-domain), 2 grass styles (crop): 13 in all.
TRAIN_STYLES = (
    Style("acer", "kidney", (18, 24), 0.62, 0.8, 0.35, (40, 70), np.pi),
    Style("betula", "kidney", (16, 21), 0.70, 0.6, 0.30, (50, 90), np.pi),
    Style("fagus", "kidney", (20, 26), 0.58, 0.9, 0.40, (30, 60), np.pi),
    Style("fraxinus", "kidney", (17, 23), 0.66, 0.7, 0.28, (60, 100), np.pi, wall=0.35),
    Style("populus", "kidney", (19, 25), 0.64, 0.5, 0.32, (40, 80), np.pi, blur=1.0),
    Style("quercus", "kidney", (15, 20), 0.72, 0.8, 0.38, (70, 120), np.pi, noise=0.06),
    Style("salix", "kidney", (21, 27), 0.60, 0.7, 0.33, (30, 55), np.pi, pixel_size_um=0.8),
    Style("tilia", "kidney", (18, 23), 0.68, 0.6, 0.30, (45, 85), np.pi, wall=0.18),
)
NEAR_STYLES = (
    Style("carpinus", "kidney", (14, 18), 0.74, 0.7, 0.26, (60, 110), np.pi, blur=0.9),
    Style("juglans", "kidney", (24, 30), 0.56, 0.9, 0.36, (30, 50), np.pi, noise=0.05),
    Style("prunus", "kidney", (17, 22), 0.66, 0.4, 0.22, (50, 90), np.pi, wall=0.40),
)
CROP_STYLES = (
    Style("zea", "grass", (20, 26), 0.55, 0.7, 0.32, (35, 60), 0.12),
    Style("triticum", "grass", (18, 23), 0.52, 0.6, 0.28, (40, 70), 0.10, pixel_size_um=0.8),
)
STYLES = TRAIN_STYLES + NEAR_STYLES + CROP_STYLES


@dataclass(frozen=True)
class Regime:
    """A density regime: stomata per mm² drawn uniformly in ``density``, and an optional
    cap on stoma length (dense leaves have small stomata, so that they do not overlap)."""

    density: tuple[float, float]  # per mm²
    max_length: float | None = None  # px; None keeps the style's sizes


WOODY = Regime((150.0, 700.0))
GRASS = Regime((150.0, 400.0))
DENSE = Regime((900.0, 1500.0), max_length=16.0)
LARGE = Regime((500.0, 700.0))


def area_mm2(height: int, width: int, pixel_size_um: float) -> float:
    """The imaged area in mm²: ``H W s² 10⁻⁶`` (eq. `stomatabench-density`)."""
    return height * width * pixel_size_um**2 * 1e-6


def _stoma_mask(kind: str, length: float, aspect: float, theta: float, dy, dx):
    """The outer outline (guard cells and pore) of one stoma, and its pore, on offsets
    ``dy, dx`` (px) from its centre; the long axis points along ``theta``."""
    c, s = np.cos(theta), np.sin(theta)
    u = dx * c + dy * s  # along the long axis
    v = -dx * s + dy * c  # across it
    a, b = length / 2, length * aspect / 2
    if kind == "kidney":
        outer = (u / a) ** 2 + (v / b) ** 2 <= 1.0
        pore = ((u / (0.62 * a)) ** 2 + (v / (0.16 * b + 0.5)) ** 2) <= 1.0
    else:  # grass: a long rectangle-like body with bulbous ends (a dumbbell)
        body = (np.abs(u / a) ** 6 + np.abs(v / (0.7 * b)) ** 6) <= 1.0
        ends = ((np.abs(u) - 0.78 * a) / (0.22 * a)) ** 2 + (v / b) ** 2 <= 1.0
        outer = body | ends
        pore = (np.abs(u) <= 0.55 * a) & (np.abs(v) <= 0.6)
    return outer, pore & outer


def _place(rng, n: int, height: int, width: int, min_dist: float, margin: float, rows):
    """Up to ``n`` centres at least ``min_dist`` apart (dart throwing), ``margin`` px from the
    edge; ``rows`` (spacing, phase) or None puts them on horizontal rows (grass leaves)."""
    pts: list[tuple[float, float]] = []
    tries = 0
    while len(pts) < n and tries < 60 * n + 100:
        tries += 1
        y = rng.uniform(margin, height - margin)
        x = rng.uniform(margin, width - margin)
        if rows is not None:
            spacing, phase = rows
            y = phase + spacing * np.round((y - phase) / spacing) + rng.normal(0, 0.8)
            if not margin <= y <= height - margin:
                continue
        if pts and np.min(np.hypot(*(np.asarray(pts) - (y, x)).T)) < min_dist:
            continue
        pts.append((y, x))
    return pts


def draw_image(
    style: Style,
    regime: Regime,
    rng,
    size: int = 192,
    shift: dict | None = None,
):
    """One micrograph of ``style`` at a density drawn from ``regime``.

    Returns ``(image, annotations, density)``: a float32 image (size, size) roughly in [0, 1],
    a list of dicts with the whole-stoma box ``bbox = [x, y, w, h]`` (the tight box of the
    rendered outline), ``area`` (its pixels), ``orientation`` (radians) and ``length`` (px), and
    the target density per mm². ``shift`` applies an acquisition shift:
    ``{"invert": bool, "contrast": factor, "blur": px}``.
    """
    checks.integer(size, "size", minimum=48)
    rng = checks.generator(rng, "rng")
    if shift:
        style = replace(
            style,
            invert=bool(shift.get("invert", style.invert)),
            contrast=style.contrast * float(shift.get("contrast", 1.0)),
            blur=float(shift.get("blur", style.blur)),
        )
    h = w = size
    # pavement cells: nearest-seed (Voronoi) labels, walls from their boundaries
    scale = (size / 192) ** 2
    n_cells = int(rng.integers(style.cells[0], style.cells[1] + 1) * scale)
    seeds = rng.integers(0, size, (max(n_cells, 2), 2))
    yy, xx = np.mgrid[0:h, 0:w]
    free = np.ones((h, w), bool)
    free[seeds[:, 0], seeds[:, 1]] = False
    _, (iy, ix) = ndimage.distance_transform_edt(free, return_indices=True)
    labels = iy * w + ix  # each pixel takes the label of its nearest seed pixel
    shade = 0.45 + 0.05 * rng.standard_normal((h, w))
    img = shade[iy, ix]
    walls = find_boundaries(labels, mode="inner")
    img = img - style.wall * walls
    # stomata at the target density
    density = float(rng.uniform(*regime.density))
    n = int(rng.poisson(density * area_mm2(h, w, style.pixel_size_um)))
    lo, hi = style.length
    if regime.max_length is not None:
        lo, hi = min(lo, regime.max_length - 3), min(hi, regime.max_length)
    rows = None
    if style.kind == "grass":
        rows = (rng.uniform(1.6, 2.2) * hi * style.aspect + 4, rng.uniform(0, 10))
    min_dist = 0.75 * hi if style.kind == "kidney" else 0.6 * hi
    centres = _place(rng, n, h, w, min_dist, hi / 2 + 1, rows)
    anns = []
    for cy, cx in centres:
        length = rng.uniform(lo, hi)
        if style.kind == "kidney":
            theta = rng.uniform(0, style.spread)
        else:  # grass stomata lie along the rows
            theta = rng.normal(0, style.spread)
        r = int(np.ceil(length / 2)) + 2
        y0, x0 = int(cy) - r, int(cx) - r
        py, px = np.mgrid[y0 : y0 + 2 * r + 1, x0 : x0 + 2 * r + 1]
        outer, pore = _stoma_mask(
            style.kind, length, style.aspect, theta, py + 0.5 - cy, px + 0.5 - cx
        )
        inside = (py >= 0) & (py < h) & (px >= 0) & (px < w)
        outer &= inside
        pore &= inside
        if not outer.any():
            continue
        img[py[outer], px[outer]] = 0.45 + style.contrast
        img[py[pore], px[pore]] = (0.45 + style.contrast) * (1 - style.pore)
        ys, xs = py[outer], px[outer]
        bx, by = int(xs.min()), int(ys.min())
        bw, bh = int(xs.max()) + 1 - bx, int(ys.max()) + 1 - by
        anns.append(
            {
                "bbox": [float(bx), float(by), float(bw), float(bh)],
                "area": float(outer.sum()),
                "orientation": float(theta % np.pi),
                "length": float(length),
            }
        )
    # illumination gradient, optics, noise, polarity
    g = rng.normal(0, 0.08, 2)
    img = img + g[0] * (yy / h - 0.5) + g[1] * (xx / w - 0.5)
    if style.blur > 0:
        img = ndimage.gaussian_filter(img, style.blur)
    img = img + style.noise * rng.standard_normal(img.shape)
    if style.invert:
        img = 1.0 - img
    return img.astype(np.float32), anns, density


@dataclass(frozen=True)
class SplitSpec:
    """What one split draws: its styles, density regime, image size and acquisition shift."""

    name: str
    styles: tuple[Style, ...]
    regime: Regime
    size: int = 192
    shifted: bool = False  # draw an acquisition shift per image (far-OOD)


SPLITS = {
    "train": SplitSpec("train", TRAIN_STYLES, WOODY),
    "val": SplitSpec("val", TRAIN_STYLES, WOODY),
    "near": SplitSpec("near", NEAR_STYLES, WOODY),
    "crop": SplitSpec("crop", CROP_STYLES, GRASS),
    "far": SplitSpec("far", NEAR_STYLES + CROP_STYLES, DENSE, shifted=True),
    # the large field keeps the training styles imaged at 1 um/px: 130-180 stomata per image
    "large": SplitSpec(
        "large", tuple(s for s in TRAIN_STYLES if s.pixel_size_um == 1.0), LARGE, size=512
    ),
}


def far_shift(rng) -> dict:
    """A far-OOD acquisition shift (our reconstruction): inverted polarity half of the time,
    contrast cut to 35-65 %, blur of 1.2-2.2 px."""
    return {
        "invert": bool(rng.random() < 0.5),
        "contrast": float(rng.uniform(0.35, 0.65)),
        "blur": float(rng.uniform(1.2, 2.2)),
    }


def make_split(name: str, n_images: int, seed: int, size: int | None = None):
    """A COCO dictionary of ``n_images`` synthetic micrographs of split ``name`` (one of
    :data:`SPLITS`), and the images as an array (n, size, size). Deterministic in ``seed``
    and ``name``. Images carry ``pixel_size_um``, ``style``, ``density_target`` and the
    acquisition ``shift``; annotations carry the whole-stoma box, its area, ``iscrowd = 0``
    and the stoma's orientation and length."""
    checks.choice(name, "name", tuple(SPLITS))
    checks.integer(n_images, "n_images", minimum=1)
    checks.integer(seed, "seed", minimum=0)
    spec = SPLITS[name]
    size = spec.size if size is None else checks.integer(size, "size", minimum=48)
    tag = sum(ord(ch) * 31**i for i, ch in enumerate(name)) % 100_000
    rng = np.random.default_rng([seed, tag])
    images, coco_images, coco_anns = [], [], []
    for i in range(n_images):
        style = spec.styles[int(rng.integers(len(spec.styles)))]
        shift = far_shift(rng) if spec.shifted else None
        img, anns, density = draw_image(style, spec.regime, rng, size=size, shift=shift)
        images.append(img)
        coco_images.append(
            {
                "id": i + 1,
                "file_name": f"{name}_{i:04d}.png",
                "height": size,
                "width": size,
                "pixel_size_um": style.pixel_size_um,
                "style": style.name,
                "kind": style.kind,
                "density_target": density,
                "shift": shift or {},
            }
        )
        for a in anns:
            coco_anns.append(
                {"id": len(coco_anns) + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0, **a}
            )
    coco = {
        "info": {"description": f"synthetic epidermis, split {name}, seed {seed}"},
        "images": coco_images,
        "annotations": coco_anns,
        "categories": [{"id": 1, "name": "stoma", "supercategory": "stoma"}],
    }
    return coco, np.stack(images)


def true_counts(coco: dict) -> np.ndarray:
    """The number of annotated stomata in each image, in the order of ``coco["images"]``."""
    ids = {im["id"]: k for k, im in enumerate(coco["images"])}
    out = np.zeros(len(ids), dtype=int)
    for a in coco["annotations"]:
        out[ids[a["image_id"]]] += 1
    return out
