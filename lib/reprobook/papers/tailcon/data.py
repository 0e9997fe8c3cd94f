"""Long-tailed data for chapter 08 (TailCon, NeurIPS 2026): the exponential profile, the
offline data sets (scikit-learn's digits, MNIST-1D generated locally), CIFAR-LT through
``datasets`` for the full profile, class tertiles, and the one Lightning data module.

The profile follows the protocol of LDAM-DRW (Cao et al., 2019), which the paper's CIFAR-LT
benchmarks use.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from reprobook import core
from reprobook.core import checks

SLUG = "tailcon"
PARTS = ("train", "test")  # the hub's splits of CIFAR-10 and CIFAR-100


class DataUnavailable(RuntimeError):
    """Data this profile needs cannot be had on this machine; the message says what to do."""


def longtail_counts(n_max: int, n_classes: int, imbalance: float) -> np.ndarray:
    """Per-class training counts of the exponential long tail,
    ``n_c = floor(n_max * IF^(-c / (C - 1)))`` for ``c = 0 .. C-1``.

    Implements eq. `tailcon-profile` of notebooks/08_tailcon/index.md.
    """
    n_max = checks.integer(n_max, "n_max", minimum=1)
    n_classes = checks.integer(n_classes, "n_classes", minimum=2)
    imbalance = checks.real(imbalance, "imbalance", minimum=1.0)
    c = np.arange(n_classes)
    counts = np.floor(n_max * imbalance ** (-c / (n_classes - 1)) + 1e-9)  # eq. tailcon-profile
    return np.maximum(counts.astype(int), 1)


def longtail_subset(y, counts, rng) -> np.ndarray:
    """Indices of a long-tailed subset of labels ``y``: ``counts[c]`` items of class ``c``,
    drawn without replacement by ``rng``; sorted."""
    y = checks.array(y, "y", ndim=1, dtype=int)
    counts = checks.array(counts, "counts", ndim=1, dtype=int)
    rng = checks.generator(rng)
    keep = []
    for c, n in enumerate(counts):
        pool = np.flatnonzero(y == c)
        if n > pool.size:
            raise checks.InputError(
                f"counts[{c}] = {n} but class {c} has only {pool.size} items; lower n_max"
            )
        keep.append(rng.choice(pool, size=int(n), replace=False))
    return np.sort(np.concatenate(keep))


def class_groups(counts) -> np.ndarray:
    """Tertile group of each class by training count: 0 head, 1 middle, 2 tail (the classes
    sorted by count, most first, cut into three near-equal parts; ties by class index)."""
    counts = checks.array(counts, "counts", ndim=1)
    order = np.argsort(-counts, kind="stable")
    groups = np.empty(counts.size, dtype=int)
    for g, part in enumerate(np.array_split(order, 3)):
        groups[part] = g
    return groups


def balanced_split(y, per_class: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Split indices of ``y`` into a balanced part (``per_class`` of each class) and the rest."""
    y = checks.array(y, "y", ndim=1, dtype=int)
    per_class = checks.integer(per_class, "per_class", minimum=1)
    rng = checks.generator(rng)
    picked = []
    for c in np.unique(y):
        pool = np.flatnonzero(y == c)
        picked.append(rng.choice(pool, size=min(per_class, pool.size), replace=False))
    first = np.sort(np.concatenate(picked))
    return first, np.setdiff1d(np.arange(y.size), first)


# how the pages name each data set once it is made long-tailed
LONG_TAILED_NAMES = {
    "digits": "long-tailed digits",
    "mnist1d": "long-tailed MNIST-1D",
    "cifar10": "CIFAR-10-LT",
    "cifar100": "CIFAR-100-LT",
}


def long_tailed_name(dataset: str) -> str:
    """The page's name of ``dataset`` made long-tailed ("CIFAR-10-LT"); an error names the
    data sets there are."""
    if dataset not in LONG_TAILED_NAMES:
        raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(LONG_TAILED_NAMES)}")
    return LONG_TAILED_NAMES[dataset]


@dataclass
class Split:
    """A long-tailed training set, a balanced validation set and a balanced test set."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    counts: np.ndarray  # training count per class
    name: str

    @property
    def n_classes(self) -> int:
        return int(self.counts.size)


def _longtail(name, x_pool, y_pool, x_rest, y_rest, n_max, imbalance, val_per_class, rng):
    n_classes = int(y_pool.max()) + 1
    counts = longtail_counts(n_max, n_classes, imbalance)
    keep = longtail_subset(y_pool, counts, rng)
    val, test = balanced_split(y_rest, val_per_class, rng)
    test = test[_balanced_cap(y_rest[test])]
    return Split(
        x_pool[keep].astype(np.float32),
        y_pool[keep].astype(np.int64),
        x_rest[val].astype(np.float32),
        y_rest[val].astype(np.int64),
        x_rest[test].astype(np.float32),
        y_rest[test].astype(np.int64),
        counts,
        name,
    )


def _balanced_cap(y) -> np.ndarray:
    """Positions that keep the same number of items of every class (the smallest class's)."""
    n = min(np.sum(y == c) for c in np.unique(y))
    return np.sort(np.concatenate([np.flatnonzero(y == c)[:n] for c in np.unique(y)]))


def digits(imbalance: float = 10.0, val_per_class: int = 24, data_seed: int = 0) -> Split:
    """scikit-learn's bundled digits (1,797 images of 8x8, scaled to [0, 1]): a stratified 60/40
    split; the 60 % is made long-tailed (n_max = the smallest class's count there), the 40 %
    gives a balanced validation set and a balanced test set."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    xa, xb, ya, yb = train_test_split(x, y, test_size=0.4, stratify=y, random_state=data_seed)
    n_max = int(np.bincount(ya).min())
    rng = np.random.default_rng(data_seed)
    return _longtail("digits", xa, ya, xb, yb, n_max, imbalance, val_per_class, rng)


def mnist1d(
    n_samples: int = 20_000,
    imbalance: float = 50.0,
    val_per_class: int = 100,
    data_seed: int = 42,
    cache=None,
) -> Split:
    """MNIST-1D generated on this machine from the package's templates
    (``mnist1d.data.make_dataset``; never ``get_dataset``, which downloads). Its 80 % training
    part is made long-tailed; its 20 % gives a balanced validation and test set.

    ``make_dataset`` reseeds the global ``random`` and NumPy generators; their states are put
    back after it, so building the data leaves a seeded run where it was. ``cache`` (a folder)
    keeps the generated arrays for the next call."""
    n_samples = checks.integer(n_samples, "n_samples", minimum=1000)
    raw = _mnist1d_raw(n_samples, data_seed, cache)
    n_max = int(np.bincount(raw["y"]).min())
    rng = np.random.default_rng(data_seed)
    x, xt = raw["x"][:, None, :], raw["x_test"][:, None, :]
    return _longtail(
        "mnist1d", x, raw["y"], xt, raw["y_test"], n_max, imbalance, val_per_class, rng
    )


def _mnist1d_raw(n_samples: int, data_seed: int, cache) -> dict:
    from pathlib import Path

    path = None if cache is None else Path(cache) / f"mnist1d-{n_samples}-{data_seed}.npz"
    if path is not None and path.is_file():
        return dict(np.load(path))
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args(as_dict=False)
    args.num_samples, args.seed = n_samples, data_seed
    states = random.getstate(), np.random.get_state()
    try:  # make_dataset seeds the global generators; leave them as they were
        made = make_dataset(args)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
    raw = {k: np.asarray(made[k]) for k in ("x", "y", "x_test", "y_test")}
    raw["x"], raw["x_test"] = raw["x"].astype(np.float32), raw["x_test"].astype(np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.tmp.npz")
        np.savez(tmp, **raw)
        tmp.replace(path)
    return raw


def cifar_lt(
    name: str = "cifar10", imbalance: float = 100.0, data_seed: int = 0, profile: str = "full"
) -> Split:
    """CIFAR-10-LT or CIFAR-100-LT on the LDAM protocol (training set made long-tailed with
    n_max = 5,000 or 500, the 10,000 test images kept balanced; 1,000 of them, balanced, held
    out for validation), from the hub through ``datasets`` (``uoft-cs/cifar10``,
    ``uoft-cs/cifar100``) by :func:`reprobook.core.load_hf_dataset`: the hub's data at the
    full profile, the chapter's few-image fixture in the same schema at the smoke profile.
    Raises :class:`DataUnavailable` when they cannot be had.

    The validation set takes ``1000 / C`` test images of each class, or half of the smallest
    test class when that is fewer (never at CIFAR's size, where every class has 1,000 or 100
    test images; it keeps a test set in the smoke profile's few images)."""
    name = checks.choice(name, "name", ("cifar10", "cifar100"))
    find = f"hf-dataset:uoft-cs/{name}"
    try:
        ds = {part: core.load_hf_dataset(SLUG, find, profile, split=part) for part in PARTS}
    except Exception as err:  # noqa: BLE001 - no network, no cache: say what to do
        raise DataUnavailable(
            f"{name} is not available on this machine ({type(err).__name__}: {err}); CIFAR-LT "
            f"needs the hub dataset uoft-cs/{name} in the `datasets` cache (run load_dataset "
            "once on a machine with network access and copy HF_HOME here)"
        ) from None
    label = "label" if name == "cifar10" else "fine_label"
    arrays = {}
    for part in PARTS:
        imgs = np.stack([np.asarray(im, dtype=np.uint8) for im in ds[part]["img"]])
        arrays[part] = (imgs.transpose(0, 3, 1, 2) / 255.0, np.asarray(ds[part][label]))
    (xa, ya), (xb, yb) = arrays["train"], arrays["test"]
    n_max = int(np.bincount(ya).min())
    rng = np.random.default_rng(data_seed)
    n_classes = int(ya.max()) + 1
    per_class = min(1000 // n_classes, int(np.bincount(yb, minlength=n_classes).min()) // 2)
    return _longtail(f"{name}-lt", xa, ya, xb, yb, n_max, imbalance, per_class, rng)


class LongTailData(L.LightningDataModule):
    """The chapter's one data module: the long-tailed training set in its natural order
    (batches of ``(x, y, index)``, so the index memory can re-encode items), a class-balanced
    loader for the decoupled stages and FOCUS, and the balanced validation and test sets."""

    def __init__(self, split: Split, batch_size: int = 64, seed: int = 0):
        super().__init__()
        self.split = split
        self.batch_size = checks.integer(batch_size, "batch_size", minimum=1)
        self.seed = checks.integer(seed, "seed", minimum=0)
        s = split
        self.x_train, self.y_train = torch.from_numpy(s.x_train), torch.from_numpy(s.y_train)
        self.x_val, self.y_val = torch.from_numpy(s.x_val), torch.from_numpy(s.y_val)
        self.x_test, self.y_test = torch.from_numpy(s.x_test), torch.from_numpy(s.y_test)

    def _dataset(self):
        return TensorDataset(self.x_train, self.y_train, torch.arange(len(self.y_train)))

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(self._dataset(), batch_size=self.batch_size, shuffle=True, generator=g)

    def balanced_dataloader(self):
        """Class-balanced sampling with replacement, one epoch's worth of items."""
        w = 1.0 / torch.from_numpy(self.split.counts).double()[self.y_train]
        g = torch.Generator().manual_seed(self.seed + 1)
        sampler = WeightedRandomSampler(w, len(w), replacement=True, generator=g)
        return DataLoader(self._dataset(), batch_size=self.batch_size, sampler=sampler)

    def val_dataloader(self):
        return DataLoader(TensorDataset(self.x_val, self.y_val), batch_size=1024)

    def test_dataloader(self):
        return DataLoader(TensorDataset(self.x_test, self.y_test), batch_size=1024)
