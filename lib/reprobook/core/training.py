"""Lightning helpers shared by the chapters that train models."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

PARALLEL_ENV = {
    "devices": "REPROBOOK_DEVICES",
    "strategy": "REPROBOOK_STRATEGY",
    "precision": "REPROBOOK_PRECISION",
    "num_nodes": "REPROBOOK_NODES",
}


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return (
        shell is not None
        and "ipykernel" in sys.modules
        and shell.__class__.__name__ == "ZMQInteractiveShell"
    )


def parallel_settings(
    devices: int | str | None = None,
    strategy: str | None = None,
    precision: str | None = None,
    num_nodes: int | None = None,
    environ: Mapping[str, str] | None = None,
    in_notebook: bool | None = None,
) -> dict[str, Any]:
    """Lightning's ``devices``, ``strategy``, ``precision`` and ``num_nodes`` for one run.

    Each comes from the argument (a profile's field), else from ``$REPROBOOK_DEVICES``,
    ``$REPROBOOK_STRATEGY``, ``$REPROBOOK_PRECISION`` and ``$REPROBOOK_NODES``, else from what
    Slurm sets for the job (``SLURM_GPUS_ON_NODE``, ``SLURM_NNODES``), else one device on one
    node. Several devices train data-parallel: ``ddp_notebook`` inside a notebook kernel (papermill
    runs one), ``ddp`` in a script. Precision ``auto`` is ``bf16-mixed`` on a GPU that supports it
    and 32-bit otherwise."""
    env = os.environ if environ is None else environ

    def pick(name: str, value: Any, slurm: str | None = None, default: Any = None) -> Any:
        for candidate in (
            value,
            env.get(PARALLEL_ENV[name]) or None,
            env.get(slurm) if slurm else None,
        ):
            if candidate is not None:
                return candidate
        return default

    devices = pick("devices", devices, "SLURM_GPUS_ON_NODE", 1)
    if isinstance(devices, str) and devices != "auto":
        try:
            devices = int(devices)
        except ValueError:
            raise ValueError(
                f"devices must be a positive integer or 'auto', got {devices!r}"
            ) from None
    if devices != "auto" and (
        isinstance(devices, bool) or not isinstance(devices, int) or devices < 1
    ):
        raise ValueError(f"devices must be a positive integer or 'auto', got {devices!r}")
    num_nodes = pick("num_nodes", num_nodes, "SLURM_NNODES", 1)
    try:
        num_nodes = int(num_nodes)
    except (TypeError, ValueError):
        raise ValueError(f"num_nodes must be a positive integer, got {num_nodes!r}") from None
    if num_nodes < 1:
        raise ValueError(f"num_nodes must be a positive integer, got {num_nodes}")
    strategy = pick("strategy", strategy)
    if strategy is None:
        many = devices == "auto" or devices > 1 or num_nodes > 1
        notebook = _in_notebook() if in_notebook is None else in_notebook
        strategy = ("ddp_notebook" if notebook else "ddp") if many else "auto"
    precision = pick("precision", precision, default="auto")
    if precision == "auto":
        import torch

        precision = (
            "bf16-mixed"
            if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
            else "32-true"
        )
    return {
        "devices": devices,
        "strategy": strategy,
        "precision": precision,
        "num_nodes": num_nodes,
    }


def make_trainer(
    max_steps: int = -1,
    max_epochs: int | None = None,
    devices: int | str | None = None,
    strategy: str | None = None,
    precision: str | None = None,
    num_nodes: int | None = None,
    **overrides: Any,
):
    """A quiet, deterministic ``L.Trainer``: Lightning picks the accelerator (CPU here, GPUs at
    the full profile), no logger, no checkpoints, no progress bar, no model summary. Devices,
    strategy, precision and nodes come from :func:`parallel_settings` (one device unless a
    profile, the environment or Slurm says more). ``overrides`` go to the Trainer as they are."""
    import lightning as L

    from .runtime import quiet_lightning

    quiet_lightning()
    kwargs: dict[str, Any] = dict(
        max_steps=max_steps,
        max_epochs=max_epochs,
        accelerator="auto",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        **parallel_settings(devices, strategy, precision, num_nodes),
    )
    kwargs.update(overrides)
    return L.Trainer(**kwargs)


def to_accelerator(module):
    """``module`` moved to the GPU when there is one, else unchanged. Lightning hands a model back
    on the CPU after ``fit`` (its strategy's teardown), and checkpoints load there; call this
    before sampling or evaluating with a trained model at the full profile."""
    import torch

    return module.to("cuda") if torch.cuda.is_available() else module
