"""What chapter 15's full profile trains beyond D1-D3 (notebooks/15_stomatabench): the
detectors of ``Sizes.torchvision_models``, torchvision's Faster R-CNN and FCOS trained from
scratch (``weights=None``: no pretrained weights can be fetched on the machines this book
targets), or, with ``Sizes.detector == "toy"``, D3's tiny CenterNet in each of their slots, a
deliberate stand-in that the run records. torchvision is not part of the book's locked
environment: the runner and ``core.start`` stop a full or smoke run that asks for it where it is
missing, and :func:`require_torchvision` says the same to code called on its own.

Every detector here is "learned": built by :func:`build_learned`, trained by
:func:`train_learned` and run by :func:`detect_learned`, whatever fills the slot. Detections
are the chapter's COCO-style dicts (``image_id``, ``bbox`` as ``[x, y, w, h]``, ``score``).
"""

from __future__ import annotations

import numpy as np

from reprobook.core import checks

from . import detectors
from .metrics import concat_detections

TORCHVISION = "torchvision==0.28.0"  # the release built against torch 2.13.0
DETECTOR_CHOICES = ("torchvision", "toy")
TORCHVISION_MODELS = ("fasterrcnn", "fcos")
HUB_DATASET = "XintongHe/Stomatal_Images_Datasets"
TOY_SEED_STRIDE = 1000  # the stand-in of slot k trains at seed + 1000 (k + 1), never D3's seed


def require_torchvision():
    """torchvision, or a RuntimeError that names the release to install."""
    try:
        import torchvision
    except ImportError:
        raise RuntimeError(
            "the full profile trains torchvision's Faster R-CNN and FCOS from scratch and needs "
            f"`{TORCHVISION}` (the release that matches torch 2.13.0), which is not installed: "
            f"run `pip install {TORCHVISION}`, or choose the recorded stand-in "
            "with -p detector=toy"
        ) from None
    return torchvision


def check_requirements(sizes) -> None:
    """Stop early, with a clear message, when a profile asks for what is not installed."""
    checks.choice(sizes.detector, "detector", DETECTOR_CHOICES)
    for name in sizes.torchvision_models:
        checks.choice(name, "torchvision_models[i]", TORCHVISION_MODELS)
    if sizes.torchvision_models and sizes.detector == "torchvision":
        require_torchvision()


def learned_label(name: str, detector: str) -> str:
    """The name a slot's detector goes by in tables: the torchvision model's own name, or
    ``toy-<name>`` for D3's architecture standing in for it."""
    checks.choice(name, "name", TORCHVISION_MODELS)
    checks.choice(detector, "detector", DETECTOR_CHOICES)
    return name if detector == "torchvision" else f"toy-{name}"


def learned_labels(sizes) -> tuple[str, ...]:
    """The labels of the detectors that fill ``sizes.torchvision_models`` (``()`` at reduced)."""
    return tuple(learned_label(n, sizes.detector) for n in sizes.torchvision_models)


# ------------------------------------------------------------------- torchvision's detectors
def torchvision_model(
    name: str,
    num_classes: int = 2,
    *,
    min_size: int = 800,
    max_size: int = 1333,
    detections: int = 300,
):
    """An untrained torchvision detector: ``"fasterrcnn"`` (ResNet-18 FPN backbone, anchors of
    8-128 px for small stomata) or ``"fcos"`` (ResNet-50 FPN), both with ``weights=None``, an
    untrained backbone with batch norm that trains (not frozen), a score floor of 0.01 (AP wants
    the low-scored detections too), at most ``detections`` per image, and the resize of
    torchvision's transform set by ``min_size`` and ``max_size`` (the image's own size keeps it
    unscaled)."""
    checks.choice(name, "name", TORCHVISION_MODELS)
    tv = require_torchvision()
    import torch

    det = tv.models.detection
    if name == "fasterrcnn":
        backbone = det.backbone_utils.resnet_fpn_backbone(
            backbone_name="resnet18",
            weights=None,
            trainable_layers=5,
            norm_layer=torch.nn.BatchNorm2d,
        )
        anchors = det.anchor_utils.AnchorGenerator(
            sizes=((8,), (16,), (32,), (64,), (128,)), aspect_ratios=((0.5, 1.0, 2.0),) * 5
        )
        return det.FasterRCNN(
            backbone,
            num_classes=num_classes,
            rpn_anchor_generator=anchors,
            min_size=min_size,
            max_size=max_size,
            box_score_thresh=0.01,
            box_detections_per_img=detections,
        )
    return det.fcos_resnet50_fpn(
        weights=None,
        weights_backbone=None,
        num_classes=num_classes,
        min_size=min_size,
        max_size=max_size,
        score_thresh=0.01,
        detections_per_img=detections,
    )


def _torchvision_module():
    import lightning as L
    import torch

    class TorchvisionDetector(L.LightningModule):
        """A torchvision detector in a LightningModule: the sum of its own losses (RPN and box
        heads for Faster R-CNN; focal, GIoU and centre-ness for FCOS), AdamW with a one-cycle
        schedule; the loss of every step kept in a buffer for the notebooks' figures (filled by
        :func:`train_torchvision`)."""

        def __init__(self, name: str, steps: int, min_size: int, max_size: int, lr: float):
            super().__init__()
            self.save_hyperparameters()
            self.net = torchvision_model(name, min_size=min_size, max_size=max_size)
            self.register_buffer("loss_curve", torch.zeros(steps))

        def forward(self, images, targets=None):
            return self.net(images, targets)

        def training_step(self, batch, batch_idx):
            images, targets = batch
            return sum(self.net(list(images), list(targets)).values())

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-4)
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=self.hparams.lr, total_steps=self.hparams.steps, pct_start=0.1
            )
            return [opt], [{"scheduler": sched, "interval": "step"}]

    return TorchvisionDetector


def build_torchvision(name: str, steps: int, min_size: int, max_size: int, lr: float = 5e-4):
    """A fresh, untrained torchvision detector in its LightningModule (with the loss buffer of
    ``steps`` entries that a trained one carries)."""
    checks.integer(steps, "steps", minimum=1)
    return _torchvision_module()(name, steps, min_size, max_size, lr)


def _boxes_by_image(coco: dict) -> list[np.ndarray]:
    out = {im["id"]: [] for im in coco["images"]}
    for a in coco["annotations"]:
        out[a["image_id"]].append(a["bbox"])
    return [np.asarray(out[im["id"]], float).reshape(-1, 4) for im in coco["images"]]


def training_sample(image, boxes, rng):
    """One training sample for a torchvision detector: the grey image repeated to three
    channels (3, H, W) in [0, 1] and its boxes as ``[x1, y1, x2, y2]``, flipped and transposed
    at random like D3's crops; boxes under a pixel wide or high after clipping are dropped."""
    x = np.asarray(image, np.float32)
    b = np.asarray(boxes, float).reshape(-1, 4).copy()
    h, w = x.shape
    if rng.random() < 0.5:  # flip left-right
        x = x[:, ::-1]
        b[:, 0] = w - b[:, 0] - b[:, 2]
    if rng.random() < 0.5:  # flip up-down
        x = x[::-1]
        b[:, 1] = h - b[:, 1] - b[:, 3]
    if rng.random() < 0.5:  # transpose
        x = x.T
        b = b[:, [1, 0, 3, 2]]
        h, w = w, h
    x1 = np.clip(b[:, 0], 0, w)
    y1 = np.clip(b[:, 1], 0, h)
    x2 = np.clip(b[:, 0] + b[:, 2], 0, w)
    y2 = np.clip(b[:, 1] + b[:, 3], 0, h)
    keep = (x2 - x1 >= 1) & (y2 - y1 >= 1)
    xyxy = np.stack([x1, y1, x2, y2], axis=1)[keep].astype(np.float32)
    img = np.clip(x, 0, 1)[None].repeat(3, axis=0).copy()
    return img, xyxy


def _training_set(coco: dict, images, n: int, seed: int):
    import torch

    boxes = _boxes_by_image(coco)

    class Samples(torch.utils.data.Dataset):
        """``n`` samples, sample k drawn from its own seeded stream (the same in any loader)."""

        def __len__(self):
            return n

        def __getitem__(self, k):
            rng = np.random.default_rng([seed, k])
            i = int(rng.integers(len(boxes)))
            img, xyxy = training_sample(images[i], boxes[i], rng)
            target = {
                "boxes": torch.from_numpy(xyxy).reshape(-1, 4),
                "labels": torch.ones(len(xyxy), dtype=torch.int64),
            }
            return torch.from_numpy(img), target

    return Samples()


def train_torchvision(
    name: str,
    coco: dict,
    images,
    *,
    seed: int,
    steps: int,
    batch: int,
    min_size: int,
    max_size: int,
    lr: float = 5e-4,
):
    """Train torchvision detector ``name`` from scratch on whole images of a split for
    ``steps`` AdamW steps of ``batch`` images (flips and transposes at random), deterministically
    in ``seed`` on a CPU; on a GPU Lightning only warns where torchvision's kernels have no
    deterministic version. Gradients are clipped at norm 10. Returns the module in eval mode."""
    import torch

    from reprobook import core

    checks.integer(steps, "steps", minimum=1)
    checks.integer(batch, "batch", minimum=1)
    torch.manual_seed(seed)
    model = build_torchvision(name, steps, min_size, max_size, lr)
    data = _training_set(coco, images, steps * batch, seed)
    curve = core.fit(
        model,
        data,
        steps=steps,
        epochs=1,
        batch=batch,
        shuffle=False,
        collate=lambda b: tuple(zip(*b)),
        deterministic="warn",
        gradient_clip_val=10.0,
    )
    detectors.keep_loss_curve(model, curve)
    return model.eval()


def torchvision_detect(model, coco: dict, images, max_dets: int = 300, batch: int = 8) -> dict:
    """A trained torchvision detector's detections on the images of a split (on the GPU when
    there is one), at most ``max_dets`` per image, boxes turned to ``[x, y, w, h]``."""
    import torch

    from reprobook.core import to_accelerator

    net = to_accelerator(model).eval()
    device = next(net.parameters()).device
    ids = [im["id"] for im in coco["images"]]
    parts = []
    with torch.no_grad():
        for s in range(0, len(images), batch):
            chunk = [
                torch.from_numpy(np.clip(np.asarray(im, np.float32), 0, 1)[None].repeat(3, 0))
                for im in images[s : s + batch]
            ]
            for j, out in enumerate(net([c.to(device) for c in chunk])):
                b = out["boxes"][:max_dets].cpu().numpy().astype(float)
                xywh = np.c_[b[:, :2], b[:, 2:] - b[:, :2]]
                scores = out["scores"][:max_dets].cpu().numpy().astype(float)
                parts.append(
                    {
                        "image_id": np.full(len(scores), ids[s + j], int),
                        "bbox": xywh.reshape(-1, 4),
                        "score": scores,
                    }
                )
    return concat_detections(parts)


# ---------------------------------------------------------------- a slot, whatever fills it
def build_learned(name: str, sizes, min_size: int, max_size: int):
    """A fresh detector for slot ``name`` (a :data:`TORCHVISION_MODELS` entry): torchvision's,
    or D3's architecture at D3's width when ``sizes.detector == "toy"``."""
    if sizes.detector == "toy":
        return detectors.build_centernet(width=sizes.d3_width, steps=sizes.d3_steps)
    return build_torchvision(name, sizes.tv_steps, min_size, max_size)


def train_learned(name: str, sizes, coco: dict, images, seed: int, min_size: int, max_size: int):
    """Slot ``name``'s detector trained on a split (``coco``, ``images``) at ``seed``: torchvision's
    for ``sizes.tv_steps`` steps of ``sizes.tv_batch`` images, or, for the toy stand-in, D3's
    training at D3's sizes and at the seed ``seed + 1000 (k + 1)`` of slot k (so that it is never
    D3 itself)."""
    if sizes.detector == "toy":
        k = TORCHVISION_MODELS.index(name)
        return detectors.train_centernet(
            coco,
            images,
            seed=seed + TOY_SEED_STRIDE * (k + 1),
            steps=sizes.d3_steps,
            batch=sizes.d3_batch,
            crop=sizes.d3_crop,
            width=sizes.d3_width,
        )
    return train_torchvision(
        name,
        coco,
        images,
        seed=seed,
        steps=sizes.tv_steps,
        batch=sizes.tv_batch,
        min_size=min_size,
        max_size=max_size,
    )


def detect_learned(sizes, model, coco: dict, images, max_dets: int) -> dict:
    """A slot's detections on a split: torchvision's inference, or D3's peak picking (one image
    shape at a time) for the toy stand-in."""
    if sizes.detector == "toy":
        return centernet_detect_any(model, coco, images, max_dets)
    return torchvision_detect(model, coco, images, max_dets)


def centernet_detect_any(model, coco: dict, images, max_dets: int) -> dict:
    """:func:`detectors.centernet_detect` on images that need not share one shape (real
    micrographs differ in aspect): runs of equal shape are detected together."""
    parts, start = [], 0
    while start < len(images):
        stop = start + 1
        while stop < len(images) and np.shape(images[stop]) == np.shape(images[start]):
            stop += 1
        sub = {**coco, "images": coco["images"][start:stop]}
        batch = np.stack([np.asarray(im, np.float32) for im in images[start:stop]])
        parts.append(detectors.centernet_detect(model, sub, batch, max_dets))
        start = stop
    return concat_detections(parts)
