"""The three detector lineages of chapter 15's reduced profile (notebooks/15_stomatabench).

The paper benchmarks sixteen detectors of five lineages; none can be trained or downloaded
offline on two CPU cores, so the reduced profile stands three small lineages in for them (our
reconstruction): D1, a classical Laplacian-of-Gaussian blob detector (scikit-image's
``blob_log``); D2, normalised cross-correlation with a mean stoma template (scikit-image's
``match_template``); D3, a tiny learned one-stage detector in the style of CenterNet (a
LightningModule), decoded by 3 x 3 max-pool peak picking. Each returns COCO-style detections
(``image_id``, ``bbox`` as ``[x, y, w, h]``, ``score``) with up to ``max_dets`` per image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from skimage.feature import blob_log, match_template, peak_local_max

from reprobook.core import checks

from .metrics import box_iou, concat_detections


def standardise(img) -> np.ndarray:
    """The image with its median removed and divided by its standard deviation."""
    img = np.asarray(img, np.float32)
    return (img - np.median(img)) / (img.std() + 1e-6)


def _reduce(z, f: int):
    """``z`` smoothed and subsampled by the integer factor ``f`` (unchanged for 1)."""
    if f == 1:
        return z
    return ndimage.zoom(ndimage.gaussian_filter(z, 0.5 * f), 1 / f, order=1)


def _dets(image_id: int, boxes, scores) -> dict:
    boxes = np.asarray(boxes, float).reshape(-1, 4)
    return {
        "image_id": np.full(len(boxes), image_id, int),
        "bbox": boxes,
        "score": np.asarray(scores, float).reshape(-1),
    }


def _gt_by_image(coco: dict) -> dict[int, np.ndarray]:
    out: dict[int, list] = {im["id"]: [] for im in coco["images"]}
    for a in coco["annotations"]:
        out[a["image_id"]].append(a["bbox"])
    return {k: np.asarray(v, float).reshape(-1, 4) for k, v in out.items()}


# ----------------------------------------------------------------------------- D1: LoG blobs
@dataclass(frozen=True)
class LoGDetector:
    """D1: bright blobs of the scale-normalised Laplacian of Gaussian; the score is the blob's
    response ``-σ² ∇²G_σ * I`` and the box a square of side ``k σ`` (``k`` fitted)."""

    min_sigma: float
    max_sigma: float
    k: float = 2.5
    num_sigma: int = 4
    threshold: float = 0.05
    downsample: int = 2  # search at 1 / downsample of the resolution

    def detect_one(self, img, image_id: int, max_dets: int = 300) -> dict:
        f = self.downsample
        z = _reduce(standardise(img), f)
        blobs = blob_log(
            z,
            min_sigma=self.min_sigma / f,
            max_sigma=self.max_sigma / f,
            num_sigma=self.num_sigma,
            threshold=self.threshold,
            overlap=0.5,
            exclude_border=False,
        )
        if len(blobs) == 0:
            return _dets(image_id, [], [])
        score = np.empty(len(blobs))
        for s in np.unique(blobs[:, 2]):
            resp = -(s**2) * ndimage.gaussian_laplace(z, s)
            sel = blobs[:, 2] == s
            score[sel] = resp[blobs[sel, 0].astype(int), blobs[sel, 1].astype(int)]
        side = self.k * blobs[:, 2] * f
        cy, cx = (blobs[:, 0] + 0.5) * f, (blobs[:, 1] + 0.5) * f
        boxes = np.c_[cx - side / 2, cy - side / 2, side, side]
        order = np.argsort(-score)[:max_dets]
        return _dets(image_id, boxes[order], score[order])

    def detect(self, coco: dict, images, max_dets: int = 300) -> dict:
        return concat_detections(
            [self.detect_one(img, im["id"], max_dets) for img, im in zip(images, coco["images"])]
        )


def fit_log(coco: dict, images, n_fit: int = 30) -> LoGDetector:
    """D1 fitted on training images: the σ range from the stomata's box sizes (a blob of radius
    r peaks at σ = r / √2), then the box factor k as the median of √(w h) / σ over the blobs
    that a ground-truth stoma's centre falls in."""
    sizes = np.array([np.sqrt(a["bbox"][2] * a["bbox"][3]) for a in coco["annotations"]])
    lo, hi = np.quantile(sizes, [0.05, 0.95]) / 2 / np.sqrt(2)
    det = LoGDetector(min_sigma=float(0.8 * lo), max_sigma=float(1.2 * hi))
    gt = _gt_by_image(coco)
    ratios = []
    for img, im in list(zip(images, coco["images"]))[:n_fit]:
        d = det.detect_one(img, im["id"])
        g = gt[im["id"]]
        if len(g) == 0 or len(d["score"]) == 0:
            continue
        iou = box_iou(d["bbox"], g)
        best = iou.argmax(axis=1)
        ok = iou.max(axis=1) > 0.2
        sig = d["bbox"][ok, 2] / det.k  # the blob's sigma at full resolution
        ratios += list(np.sqrt(g[best[ok], 2] * g[best[ok], 3]) / sig)
    k = float(np.median(ratios)) if ratios else det.k
    return LoGDetector(min_sigma=det.min_sigma, max_sigma=det.max_sigma, k=k)


# ------------------------------------------------------------------ D2: template matching
@dataclass(frozen=True)
class TemplateDetector:
    """D2: the best normalised cross-correlation over a bank of rotated and scaled copies of
    the mean training stoma; the score is that correlation and the box the template's."""

    templates: tuple  # arrays (p, p), odd sides
    boxes_wh: tuple  # (w, h) of each template's stoma, px
    min_distance: int = 5
    threshold: float = 0.1
    downsample: int = 2  # match at 1 / downsample of the resolution

    def detect_one(self, img, image_id: int, max_dets: int = 300) -> dict:
        f = self.downsample
        z = _reduce(standardise(img), f)
        best = np.full(z.shape, -np.inf, np.float32)
        which = np.zeros(z.shape, int)
        for i, t in enumerate(self.templates):
            r = match_template(z, t, pad_input=True, mode="reflect")
            better = r > best
            best[better], which[better] = r[better], i
        peaks = peak_local_max(
            best,
            min_distance=max(1, self.min_distance // f),
            threshold_abs=self.threshold,
            num_peaks=max_dets,
            exclude_border=False,
        )
        if len(peaks) == 0:
            return _dets(image_id, [], [])
        wh = np.asarray(self.boxes_wh, float)[which[peaks[:, 0], peaks[:, 1]]]
        cy, cx = (peaks[:, 0] + 0.5) * f, (peaks[:, 1] + 0.5) * f
        boxes = np.c_[cx - wh[:, 0] / 2, cy - wh[:, 1] / 2, wh]
        return _dets(image_id, boxes, best[peaks[:, 0], peaks[:, 1]])

    def detect(self, coco: dict, images, max_dets: int = 300) -> dict:
        return concat_detections(
            [self.detect_one(img, im["id"], max_dets) for img, im in zip(images, coco["images"])]
        )


def fit_template(
    coco: dict,
    images,
    n_angles: int = 6,
    scales=(0.85, 1.15),
    n_fit: int = 200,
    downsample: int = 2,
) -> TemplateDetector:
    """D2 fitted on training images: crops around up to ``n_fit`` stomata, each turned to lie
    along the x axis (the generator's orientation), averaged into one template; the bank holds
    it at ``n_angles`` orientations and the given ``scales``. The box of each copy is that of the
    stoma ellipse whose semi-axes are the median half-length and half-width."""
    checks.integer(n_angles, "n_angles", minimum=1)
    lengths = np.array([a["length"] for a in coco["annotations"]])
    L = float(np.median(lengths))
    # half-width from boxes of stomata lying near the axes
    widths = [
        min(a["bbox"][2], a["bbox"][3])
        for a in coco["annotations"]
        if min(abs(np.sin(a["orientation"])), abs(np.cos(a["orientation"]))) < 0.2
    ]
    W = float(np.median(widths)) if widths else 0.6 * L
    p = int(2 * np.ceil(0.7 * L) + 1)
    h = p // 2
    ims = {im["id"]: k for k, im in enumerate(coco["images"])}
    crops = []
    for a in coco["annotations"][:n_fit]:
        z = standardise(images[ims[a["image_id"]]])
        x, y, w, hh = a["bbox"]
        cy, cx = int(round(y + hh / 2)), int(round(x + w / 2))
        if cy - h < 0 or cx - h < 0 or cy + h + 1 > z.shape[0] or cx + h + 1 > z.shape[1]:
            continue
        crop = z[cy - h : cy + h + 1, cx - h : cx + h + 1]
        crops.append(ndimage.rotate(crop, np.degrees(a["orientation"]), reshape=False, order=1))
    base = np.mean(crops, axis=0)
    temps, wh = [], []
    f = downsample
    for s in scales:
        for k in range(n_angles):
            phi = np.pi * k / n_angles
            t = ndimage.rotate(base, -np.degrees(phi), reshape=False, order=1)
            t = ndimage.zoom(t, s / f, order=1)
            if t.shape[0] % 2 == 0:
                t = t[:-1, :-1]
            temps.append(t.astype(np.float32))
            a2, b2 = (s * L / 2) ** 2, (s * W / 2) ** 2
            c2, s2 = np.cos(phi) ** 2, np.sin(phi) ** 2
            wh.append((2 * np.sqrt(a2 * c2 + b2 * s2), 2 * np.sqrt(a2 * s2 + b2 * c2)))
    return TemplateDetector(tuple(temps), tuple(wh), min_distance=int(0.6 * W), downsample=f)


# ---------------------------------------------------------------------- D3: tiny CenterNet
def maxpool_peaks(heat, k: int = 300, kernel: int = 3):
    """Peaks of a heatmap (H, W) or (B, 1, H, W) torch tensor by max-pool suppression
    (eq. `stomatabench-peaks`): a cell is kept when it equals the maximum of its
    ``kernel x kernel`` neighbourhood; then the ``k`` highest. Returns ``(scores, ys, xs)``
    (each (k,) for one map, (B, k) for a batch)."""
    import torch
    import torch.nn.functional as F

    checks.integer(kernel, "kernel", minimum=1)
    if kernel % 2 == 0:
        raise checks.InputError(f"kernel must be odd, got {kernel}")
    single = heat.dim() == 2
    h = heat[None, None] if single else heat
    pooled = F.max_pool2d(h, kernel, stride=1, padding=kernel // 2)
    keep = h * (pooled == h)  # eq. stomatabench-peaks: only local maxima survive
    b, _, hh, ww = keep.shape
    flat = keep.view(b, -1)
    k = min(checks.integer(k, "k", minimum=1), flat.shape[1])
    scores, idx = torch.topk(flat, k)  # the k highest survivors
    ys, xs = idx // ww, idx % ww
    if single:
        return scores[0], ys[0], xs[0]
    return scores, ys, xs


def gaussian_radius(w: float, h: float) -> float:
    """The heatmap's Gaussian spread for an object of size ``w x h`` (input px) at stride 4:
    a sixth of the smaller side in output cells, at least 0.7."""
    return max(0.7, min(w, h) / 4 / 3)


def centernet_targets(boxes, out_hw: tuple[int, int], stride: int = 4):
    """CenterNet's training targets for one crop: a heatmap (1, h, w) with a Gaussian peak of
    value 1 at each centre cell (eq. `stomatabench-centernet`), and at those cells the log size
    (2, h, w), the sub-cell offset (2, h, w) and a mask (1, h, w)."""
    h, w = out_hw
    heat = np.zeros((1, h, w), np.float32)
    size = np.zeros((2, h, w), np.float32)
    off = np.zeros((2, h, w), np.float32)
    mask = np.zeros((1, h, w), np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    for x, y, bw, bh in np.asarray(boxes, float).reshape(-1, 4):
        cx, cy = (x + bw / 2) / stride, (y + bh / 2) / stride
        ix, iy = int(cx), int(cy)
        if not (0 <= ix < w and 0 <= iy < h):
            continue
        sig = gaussian_radius(bw, bh)
        g = np.exp(-((xx - ix) ** 2 + (yy - iy) ** 2) / (2 * sig**2))
        heat[0] = np.maximum(heat[0], g)
        size[:, iy, ix] = np.log([bw, bh])
        off[:, iy, ix] = (cx - ix, cy - iy)
        mask[0, iy, ix] = 1.0
    return heat, size, off, mask


def _centernet_module():
    import lightning as L
    import torch
    import torch.nn as nn

    def block(cin, cout, stride):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
        )

    class TinyCenterNet(L.LightningModule):
        """D3: four convolution blocks to stride 4, then a heatmap head (1 channel, logits),
        a log-size head (2) and an offset head (2). Trained with the penalty-reduced focal loss
        on the heatmap and L1 on size and offset at the centres
        (eq. `stomatabench-centernet`). The buffer ``loss_curve`` keeps the training loss of
        every step (filled by :func:`train_centernet`), so that a cached D3 carries it."""

        def __init__(self, width: int = 32, lr: float = 3e-3, steps: int = 400):
            super().__init__()
            self.save_hyperparameters()
            self.body = nn.Sequential(
                block(1, width // 2, 2),
                block(width // 2, width, 2),
                block(width, width, 1),
                block(width, width, 1),
            )
            self.head = nn.Conv2d(width, 5, 1)
            with torch.no_grad():
                self.head.bias[0].fill_(-2.19)  # a prior of 0.1 on every cell
            self.register_buffer("loss_curve", torch.zeros(steps))

        def forward(self, x):  # x: (B, 1, H, W), standardised
            out = self.head(self.body(x))  # (B, 5, H/4, W/4)
            return out[:, :1], out[:, 1:3], out[:, 3:5]

        def training_step(self, batch, batch_idx):
            x, heat, size, off, mask = batch
            logit, s, o = self(x)
            p = torch.sigmoid(logit).clamp(1e-4, 1 - 1e-4)
            pos = heat.eq(1).float()
            n_pos = pos.sum().clamp(min=1)
            focal = (
                -(  # eq. stomatabench-centernet: penalty-reduced focal loss
                    pos * (1 - p) ** 2 * torch.log(p)
                    + (1 - pos) * (1 - heat) ** 4 * p**2 * torch.log(1 - p)
                ).sum()
                / n_pos
            )
            reg = (mask * ((s - size).abs() + (o - off).abs())).sum() / n_pos
            return focal + reg

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-4)
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=self.hparams.lr, total_steps=self.hparams.steps, pct_start=0.15
            )
            return [opt], [{"scheduler": sched, "interval": "step"}]

    return TinyCenterNet


def build_centernet(width: int = 32, lr: float = 3e-3, steps: int = 400):
    """A fresh D3 (untrained)."""
    return _centernet_module()(width=width, lr=lr, steps=steps)


def training_crops(coco: dict, images, n: int, crop: int, seed: int, stride: int = 4):
    """``n`` random ``crop x crop`` training crops with CenterNet targets, flipped and turned
    by multiples of 90 degrees at random (the boxes with them). Deterministic in ``seed``."""
    checks.integer(crop, "crop", minimum=16)
    if crop % stride:
        raise checks.InputError(f"crop must be a multiple of the stride {stride}, got {crop}")
    rng = np.random.default_rng(seed)
    gt = _gt_by_image(coco)
    ids = [im["id"] for im in coco["images"]]
    z_all = [standardise(im) for im in images]
    out = [[] for _ in range(5)]
    for _ in range(n):
        k = int(rng.integers(len(ids)))
        z = z_all[k]
        y0 = int(rng.integers(0, z.shape[0] - crop + 1))
        x0 = int(rng.integers(0, z.shape[1] - crop + 1))
        x = z[y0 : y0 + crop, x0 : x0 + crop]
        b = gt[ids[k]].copy()
        b[:, 0] -= x0
        b[:, 1] -= y0
        if rng.random() < 0.5:  # flip left-right
            x = x[:, ::-1]
            b[:, 0] = crop - b[:, 0] - b[:, 2]
        if rng.random() < 0.5:  # flip up-down
            x = x[::-1]
            b[:, 1] = crop - b[:, 1] - b[:, 3]
        if rng.random() < 0.5:  # transpose (with the flips: all eight turns and mirrors)
            x = x.T
            b = b[:, [1, 0, 3, 2]]
        t = centernet_targets(b, (crop // stride, crop // stride), stride)
        for lst, v in zip(out, (x[None].copy(), *t)):
            lst.append(v)
    return [np.stack(v).astype(np.float32) for v in out]


def train_centernet(
    coco: dict,
    images,
    *,
    seed: int,
    steps: int = 400,
    batch: int = 8,
    crop: int = 64,
    width: int = 32,
    lr: float = 3e-3,
):
    """Train D3 on random crops of the training split for ``steps`` AdamW steps (one-cycle
    schedule), deterministically in ``seed``, its loss at every step in ``loss_curve``. Returns
    the model in eval mode."""
    import torch
    from torch.utils.data import TensorDataset

    from reprobook import core

    checks.integer(steps, "steps", minimum=1)
    checks.integer(batch, "batch", minimum=1)
    torch.manual_seed(seed)
    model = build_centernet(width=width, lr=lr, steps=steps)
    arrays = training_crops(coco, images, steps * batch, crop, seed)
    crops = TensorDataset(*map(torch.from_numpy, arrays))
    curve = core.fit(model, crops, steps=steps, epochs=1, batch=batch, shuffle=False)
    keep_loss_curve(model, curve)
    return model.eval()


def keep_loss_curve(model, curve) -> None:
    """Write the per-step training loss ``curve`` (what ``core.fit`` returns) into the model's
    ``loss_curve`` buffer, which goes into its checkpoint; entries past the curve stay 0."""
    import torch

    n = min(len(curve), model.loss_curve.numel())
    with torch.no_grad():
        model.loss_curve[:n] = torch.as_tensor(curve[:n], device=model.loss_curve.device)


def centernet_detect(model, coco: dict, images, max_dets: int = 300, stride: int = 4) -> dict:
    """D3's detections: heatmap peaks by :func:`maxpool_peaks`, the box from the size and
    offset heads at each peak. Images of one size run in batches of 16."""
    import torch

    parts = []
    device = next(model.parameters()).device
    ids = [im["id"] for im in coco["images"]]
    with torch.no_grad():
        for s in range(0, len(images), 16):
            x = np.stack([standardise(im) for im in images[s : s + 16]])[:, None]
            logit, size, off = model(torch.from_numpy(x).to(device))
            heat = torch.sigmoid(logit)
            scores, ys, xs = maxpool_peaks(heat, k=max_dets)
            for j in range(x.shape[0]):
                y, xx = ys[j], xs[j]
                wh = torch.exp(size[j, :, y, xx]).T.cpu().numpy()  # (k, 2)
                o = off[j, :, y, xx].T.cpu().numpy()
                cx = (xx.cpu().numpy() + o[:, 0]) * stride
                cy = (y.cpu().numpy() + o[:, 1]) * stride
                boxes = np.c_[cx - wh[:, 0] / 2, cy - wh[:, 1] / 2, wh]
                parts.append(_dets(ids[s + j], boxes, scores[j].cpu().numpy()))
    return concat_detections(parts)
