"""Lightning helpers shared by the chapters that train models."""

from __future__ import annotations

from typing import Any


def make_trainer(max_steps: int = -1, max_epochs: int | None = None, **overrides: Any):
    """A quiet, deterministic ``L.Trainer``: Lightning picks the accelerator (CPU here, one GPU at
    the full profile), no logger, no checkpoints, no progress bar, no model summary.
    ``overrides`` are passed to the Trainer as they are (a strategy for several GPUs, say)."""
    import lightning as L

    from .runtime import quiet_lightning

    quiet_lightning()
    kwargs: dict[str, Any] = dict(
        max_steps=max_steps, max_epochs=max_epochs, accelerator="auto", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, deterministic=True,
    )
    kwargs.update(overrides)
    return L.Trainer(**kwargs)


def to_accelerator(module):
    """``module`` moved to the GPU when there is one, else unchanged. Lightning hands a model back
    on the CPU after ``fit`` (its strategy's teardown), and checkpoints load there; call this
    before sampling or evaluating with a trained model at the full profile."""
    import torch

    return module.to("cuda") if torch.cuda.is_available() else module
