"""What chapter 15's full profile needs beyond the reduced one (notebooks/15_stomatabench):
torchvision's Faster R-CNN and FCOS, trained from scratch (``weights=None``: no pretrained
weights can be fetched on the machines this book targets), and the public hardwood stomata
images through ``datasets``. Neither is part of the book's locked environment, so each is
checked first and stops the run with a message that says what to install or fetch.
"""

from __future__ import annotations

TORCHVISION = "torchvision==0.28.0"  # the release built against torch 2.13.0
HUB_DATASET = "XintongHe/Stomatal_Images_Datasets"


def require_torchvision():
    """torchvision, or a RuntimeError that names the release to install."""
    try:
        import torchvision
    except ImportError:
        raise RuntimeError(
            "the full profile trains torchvision's Faster R-CNN and FCOS from scratch and needs "
            f"`{TORCHVISION}` (the release that matches torch 2.13.0), which is not installed: "
            f"run `pip install {TORCHVISION}`, or use the reduced profile"
        ) from None
    return torchvision


def check_requirements(sizes) -> None:
    """Stop early, with a clear message, when a profile asks for what is not installed."""
    if sizes.torchvision_models:
        require_torchvision()


def torchvision_model(name: str, num_classes: int = 2):
    """An untrained torchvision detector: ``"fasterrcnn"`` (ResNet-18 FPN backbone) or
    ``"fcos"`` (ResNet-50 FPN), both with ``weights=None`` and an untrained backbone."""
    from reprobook.core import checks

    checks.choice(name, "name", ("fasterrcnn", "fcos"))
    tv = require_torchvision()
    det = tv.models.detection
    if name == "fasterrcnn":
        backbone = det.backbone_utils.resnet_fpn_backbone(
            backbone_name="resnet18", weights=None, trainable_layers=5
        )
        return det.FasterRCNN(backbone, num_classes=num_classes, box_detections_per_img=300)
    return det.fcos_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes, detections_per_img=300
    )


def hub_stomata(name: str = HUB_DATASET, split: str = "train"):
    """The public hardwood stomata images (whole-stoma boxes) through ``datasets``, or a
    RuntimeError that says how to get them. Their ``resolution`` field's unit is not documented
    as micrometres per pixel, so no density is computed from it until it is confirmed."""
    try:
        import datasets
    except ImportError:
        raise RuntimeError(
            "the full profile reads real stomata with the `datasets` package, which is missing"
        ) from None
    try:
        return datasets.load_dataset(name, split=split)
    except Exception as err:  # noqa: BLE001 - any failure to reach the hub means the same
        raise RuntimeError(
            f"the dataset {name!r} could not be loaded ({type(err).__name__}): it needs the "
            "Hugging Face hub or a local copy in the datasets cache (HF_DATASETS_OFFLINE=1 with "
            "the files cached). The reduced profile uses generated images only."
        ) from None
