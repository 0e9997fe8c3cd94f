"""Chapter 08 (TailCon): CIFAR-10 for the full profile, through ``core.load_hf_dataset``, and the
smoke profile's fixture of it.

The fixture must have the schema of the hub's ``uoft-cs/cifar10`` (its dataset card and
loader: splits ``train`` and ``test``; columns ``img``, a ``datasets.Image`` of 32x32 RGB, and
``label``, a ``ClassLabel`` over airplane ... truck), and the CIFAR-LT construction of
``data.cifar_lt`` (the LDAM-DRW protocol: n_max the smallest training class, the exponential
profile of eq. `tailcon-profile`, balanced validation and test sets from the test split) must
work on its few images as on the real ones.
"""

import sys
import types

import datasets
import numpy as np
import pytest

from reprobook import core
from reprobook.core import fixtures as core_fixtures
from reprobook.papers.tailcon import config, data, experiments, fixtures

FIND = "hf-dataset:uoft-cs/cifar10"


@pytest.fixture
def fixture_home(tmp_path, monkeypatch):
    """Smoke fixtures built under a throwaway folder."""
    monkeypatch.setenv(core_fixtures.FIXTURES_ENV, str(tmp_path / "fixtures"))
    return tmp_path


def _pixels(ds) -> np.ndarray:
    return np.stack([np.asarray(im, dtype=np.uint8) for im in ds["img"]])


def test_the_fixture_has_the_hub_schema_and_is_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for dest in (first, second):
        dest.mkdir()
        fixtures.cifar10(dest)
    ds = datasets.load_from_disk(str(first))
    assert isinstance(ds, datasets.DatasetDict) and set(ds) == {"train", "test"}
    for split, per_class in (("train", 5), ("test", 3)):
        part = ds[split]
        assert part.column_names == ["img", "label"]
        assert isinstance(part.features["img"], datasets.Image)
        assert isinstance(part.features["label"], datasets.ClassLabel)
        assert part.features["label"].names == [
            "airplane", "automobile", "bird", "cat", "deer",
            "dog", "frog", "horse", "ship", "truck",
        ]  # fmt: skip
        assert part[0]["img"].mode == "RGB" and part[0]["img"].size == (32, 32)
        assert np.bincount(part["label"][:], minlength=10).tolist() == [per_class] * 10
    again = datasets.load_from_disk(str(second))
    for split in ("train", "test"):
        assert np.array_equal(_pixels(ds[split]), _pixels(again[split]))
    assert fixtures.FIXTURES == {FIND: fixtures.cifar10}


def test_the_smoke_profile_loads_cifar_lt_from_the_fixture(fixture_home):
    split = experiments.load_split("cifar10", 100.0, "smoke")
    where = core_fixtures.fixture_path(core.book_root(), "tailcon", FIND)
    assert str(where).startswith(str(fixture_home / "fixtures")) and where.is_dir()
    assert split.name == "cifar10-lt" and split.n_classes == 10
    # n_max = 5 (the smallest training class); floor(5 * 100^(-c/9)) = 5, 2, 1, ...
    assert split.counts.tolist() == [5, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    assert split.counts.tolist() == data.longtail_counts(5, 10, 100.0).tolist()
    assert np.bincount(split.y_train).tolist() == split.counts.tolist()
    # three test images a class: one for validation, two for the test (balanced)
    assert np.bincount(split.y_val).tolist() == [1] * 10
    assert np.bincount(split.y_test).tolist() == [2] * 10
    assert split.x_train.shape == (15, 3, 32, 32) and split.x_train.dtype == np.float32
    assert 0.0 <= split.x_test.min() and split.x_test.max() <= 1.0
    # the kept images are the fixture's pixels scaled to [0, 1], channels first
    train = datasets.load_from_disk(str(where))["train"]
    pool = (_pixels(train).transpose(0, 3, 1, 2) / 255.0).astype(np.float32)
    rows = [np.flatnonzero(np.all(pool == x, axis=(1, 2, 3))) for x in split.x_train]
    assert all(r.size == 1 for r in rows)
    assert np.array_equal(np.asarray(train["label"][:])[[r[0] for r in rows]], split.y_train)


def test_the_full_profile_asks_the_hub_for_each_split(fixture_home, monkeypatch):
    saved = datasets.load_from_disk(str(core.locate("tailcon", FIND, "smoke")))
    calls = []

    def hub(name, **kwargs):
        calls.append((name, kwargs))
        return saved[kwargs["split"]]

    smoke = experiments.load_split("cifar10", 100.0, "smoke")
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=hub))
    full = experiments.load_split("cifar10", 100.0, "full")
    assert calls == [
        ("uoft-cs/cifar10", {"split": "train"}),
        ("uoft-cs/cifar10", {"split": "test"}),
    ]
    for field in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test", "counts"):
        assert np.array_equal(getattr(full, field), getattr(smoke, field))


def test_the_validation_set_keeps_the_ldam_size_when_the_test_split_allows(monkeypatch):
    """1000 / C validation images of each class when every class has at least twice that
    (CIFAR: 1,000 test images a class, so 100); half the smallest class otherwise."""

    def hub(name, split):
        per_class = {"train": 4, "test": 300}[split]
        labels = np.repeat(np.arange(10), per_class)
        images = [np.full((2, 2, 3), c, dtype=np.uint8) for c in labels]
        return {"img": images, "label": labels.tolist()}

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=hub))
    split = data.cifar_lt("cifar10", 10.0, profile="full")
    assert np.bincount(split.y_val).tolist() == [100] * 10
    assert np.bincount(split.y_test).tolist() == [200] * 10
    assert split.counts.tolist() == data.longtail_counts(4, 10, 10.0).tolist()


def test_the_reduced_profile_uses_no_cifar():
    with pytest.raises(data.DataUnavailable, match="reduced profile uses no inputs"):
        experiments.load_split("cifar10", 100.0, "reduced")


def test_smoke_notebooks_one_and_two_share_their_models():
    one = config.PROFILES["01_baselines"]["smoke"]
    two = config.PROFILES["02_memory_consolidation"]["smoke"]
    for field in experiments._TRAIN_FIELDS:
        assert getattr(one, field) == getattr(two, field), field
    assert one.dataset == two.dataset == config.PROFILES["01_baselines"]["full"].dataset


def test_pages_name_the_long_tailed_data_they_ran_on() -> None:
    from reprobook.papers.tailcon import config, data

    assert data.long_tailed_name("digits") == "long-tailed digits"
    full = config.PROFILES["01_baselines"]["full"].dataset
    assert data.long_tailed_name(full) == "CIFAR-10-LT"
    with pytest.raises(ValueError, match="unknown dataset 'svhn'; valid: digits, mnist1d"):
        data.long_tailed_name("svhn")
