"""The smoke profile's fixture of chapter 08's one full-profile input, CIFAR-10 from the hub.

``uoft-cs/cifar10`` has two splits, ``train`` (50,000 images) and ``test`` (10,000), and two
columns: ``img``, a 32x32 RGB ``datasets.Image``, and ``label``, a ``ClassLabel`` over the ten
CIFAR-10 classes in the order below. The fixture has the same splits, columns and types with
:data:`TRAIN_PER_CLASS` and :data:`TEST_PER_CLASS` images of each class, drawn offline from a
fixed seed: every image is its class's colour plus noise, so the classes can be told apart and
the smoke run's training has something to fit. It is enough for the CIFAR-LT construction of
:func:`.data.cifar_lt` (n_max is the smallest training class, here 5; the balanced validation
and test sets take one and two images of each class).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CIFAR10_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
TRAIN_PER_CLASS = 5  # training images of each class (CIFAR-10: 5,000)
TEST_PER_CLASS = 3  # test images of each class (CIFAR-10: 1,000)
SIZE = 32  # pixels per side


def _images(per_class: int, rng: np.random.Generator) -> tuple[list, list[int]]:
    """``per_class`` images of each class, class by class, as PIL images, and their labels."""
    from PIL import Image

    n = len(CIFAR10_NAMES)
    colours = np.linspace(30, 225, n * 3).reshape(3, n).T  # (n, 3): one colour a class
    images, labels = [], []
    for c in range(n):
        for _ in range(per_class):
            noise = rng.normal(0.0, 40.0, (SIZE, SIZE, 3))
            pixels = np.clip(colours[c] + noise, 0, 255).astype(np.uint8)
            images.append(Image.fromarray(pixels))
            labels.append(c)
    return images, labels


def cifar10(dest: Path) -> None:
    """Write the CIFAR-10 fixture (a ``DatasetDict`` with ``train`` and ``test``) into ``dest``
    with ``save_to_disk``; :func:`reprobook.core.load_hf_dataset` reads it at the smoke
    profile."""
    import datasets

    features = datasets.Features(
        {"img": datasets.Image(), "label": datasets.ClassLabel(names=list(CIFAR10_NAMES))}
    )
    rng = np.random.default_rng(2009)  # the year CIFAR-10 was published
    parts = {}
    for split, per_class in (("train", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        images, labels = _images(per_class, rng)
        parts[split] = datasets.Dataset.from_dict(
            {"img": images, "label": labels}, features=features
        )
    datasets.DatasetDict(parts).save_to_disk(str(dest))


FIXTURES = {"hf-dataset:uoft-cs/cifar10": cifar10}
