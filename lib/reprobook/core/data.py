"""Offline data helpers: the reduced profile never touches the network."""

from __future__ import annotations

import os
from typing import Any

OFFLINE_VARIABLES = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def ensure_offline() -> None:
    """Make hub look-ups fail at once instead of waiting on the network (set before
    ``import datasets``)."""
    for key, value in OFFLINE_VARIABLES.items():
        os.environ.setdefault(key, value)


def to_dataset(columns: dict[str, Any]):
    """A ``datasets.Dataset`` from generated columns (NumPy arrays or lists), offline."""
    ensure_offline()
    import datasets

    return datasets.Dataset.from_dict({k: list(v) if hasattr(v, "tolist") else v for k, v in columns.items()})
