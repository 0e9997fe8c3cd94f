"""Lightning helpers shared by the chapters that train models: the Trainer every chapter uses,
its parallel settings, and resumption of a long training after a pre-emption."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

# Resumable training (see `resumable`): where the current training keeps its last checkpoint,
# and how many Trainers it has made so far (each gets its own folder, in the order made).
_RESUME: dict[str, Any] = {"dir": None, "count": 0}
RESUME_STEPS_ENV = "REPROBOOK_RESUME_EVERY_STEPS"  # a step interval instead of the time one
RESUME_MINUTES_ENV = "REPROBOOK_RESUME_MINUTES"  # default 10

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


@contextlib.contextmanager
def resumable(folder: str | os.PathLike) -> Iterator[Path]:
    """Make the trainings inside this block survive a pre-emption.

    Each Trainer that :func:`make_trainer` builds inside the block saves ``last.ckpt`` (model,
    optimiser, loop state) into ``folder/fit-<i>`` every ``$REPROBOOK_RESUME_MINUTES`` minutes
    (default 10; ``$REPROBOOK_RESUME_EVERY_STEPS`` sets a step interval instead), and its ``fit``
    starts from that file when it exists: a Slurm job killed half-way and submitted again
    carries on where it stopped instead of starting over. When the block ends without an
    error the folder is removed; after an error (or a kill) it stays for the next attempt.
    :func:`reprobook.core.load_or_train` opens this block around every training it runs, in a
    folder named after the checkpoint's key, so a changed key never resumes a stale run.
    """
    folder = Path(folder)
    previous = dict(_RESUME)
    _RESUME.update(dir=folder, count=0)
    try:
        yield folder
    except BaseException:
        _RESUME.update(previous)
        raise
    _RESUME.update(previous)
    shutil.rmtree(folder, ignore_errors=True)


def _resume_callback(folder: Path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    steps = os.environ.get(RESUME_STEPS_ENV)
    if steps:
        every = {"every_n_train_steps": int(steps)}
    else:
        minutes = float(os.environ.get(RESUME_MINUTES_ENV) or 10)
        every = {"train_time_interval": timedelta(minutes=minutes)}
    return ModelCheckpoint(dirpath=folder, save_last=True, save_top_k=0, **every)


@functools.cache
def _trainer_class():
    import lightning as L

    class ResumingTrainer(L.Trainer):
        """A Trainer whose ``fit`` starts from the ``last.ckpt`` of its resume folder, if any."""

        resume_folder: Path | None = None

        def fit(self, model, *args, ckpt_path=None, **kwargs):
            last = self.resume_folder / "last.ckpt" if self.resume_folder else None
            if ckpt_path is None and last is not None and last.exists():
                ckpt_path = str(last)
            return super().fit(model, *args, ckpt_path=ckpt_path, **kwargs)

    return ResumingTrainer


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
    profile, the environment or Slurm says more). ``overrides`` go to the Trainer as they are.
    Inside :func:`resumable` (every training that ``load_or_train`` runs) it checkpoints now
    and then and resumes from its last checkpoint, beside any ``callbacks`` given."""
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
    folder = None
    if _RESUME["dir"] is not None:
        folder = Path(_RESUME["dir"]) / f"fit-{_RESUME['count']}"
        _RESUME["count"] += 1
        callbacks = [*kwargs.get("callbacks", ()), _resume_callback(folder)]
        kwargs.update(enable_checkpointing=True, callbacks=callbacks)
    trainer = _trainer_class()(**kwargs)
    trainer.resume_folder = folder
    return trainer


@functools.cache
def _loss_curve_class():
    import lightning as L

    class LossCurve(L.Callback):
        """Keeps the training loss of every optimiser step (``training_step``'s loss, or the
        ``"loss"`` of the mapping it returns); ``values()`` gives them as a float array."""

        def __init__(self) -> None:
            self._losses: list = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
            if loss is not None:
                self._losses.append(loss.detach())

        def values(self):
            import numpy as np
            import torch

            if not self._losses:
                return np.zeros(0, dtype=np.float32)
            return torch.stack([v.float().cpu() for v in self._losses]).numpy()

        # kept in Lightning's checkpoints, so a training resumed after a pre-emption
        # (`resumable`) returns the whole curve, not only the steps after the resume
        def state_dict(self) -> dict:
            import torch

            return {"losses": torch.from_numpy(self.values().copy())}

        def load_state_dict(self, state: dict) -> None:
            self._losses = list(state["losses"].unbind(0))

    return LossCurve


def fit(
    module,
    data,
    *,
    steps: int = -1,
    epochs: int | None = None,
    batch: int | None = None,
    seed: int | None = None,
    shuffle: bool = True,
    drop_last: bool = False,
    collate=None,
    val=None,
    **trainer: Any,
):
    """Train the LightningModule ``module`` with :func:`make_trainer` and return its training
    loss at every optimiser step (a float array; empty for a module that optimises by hand and
    returns no loss).

    ``data`` is a DataLoader or a LightningDataModule, used as it is; or, with ``batch``, a
    Dataset that is batched here: ``shuffle`` in an order drawn from a generator seeded with
    ``seed`` (no generator when ``seed`` is None: the order then comes from torch's global
    one), ``drop_last`` and ``collate`` as DataLoader takes them. ``val`` is a validation
    loader. ``steps`` and ``epochs`` are the Trainer's ``max_steps`` and ``max_epochs``; other
    keywords go to :func:`make_trainer`."""
    import lightning as L

    loader = data
    if batch is not None:
        import torch
        from torch.utils.data import DataLoader

        generator = None if seed is None else torch.Generator().manual_seed(int(seed))
        options: dict[str, Any] = dict(batch_size=int(batch), shuffle=shuffle)
        if drop_last:
            options["drop_last"] = True
        if generator is not None:
            options["generator"] = generator
        if collate is not None:
            options["collate_fn"] = collate
        loader = DataLoader(data, **options)
    curve = _loss_curve_class()()
    callbacks = [*trainer.pop("callbacks", ()), curve]
    fitter = make_trainer(max_steps=steps, max_epochs=epochs, callbacks=callbacks, **trainer)
    if isinstance(loader, L.LightningDataModule):
        fitter.fit(module, datamodule=loader)
    elif val is not None:
        fitter.fit(module, loader, val)
    else:
        fitter.fit(module, loader)
    return curve.values()


def to_accelerator(module):
    """``module`` moved to the GPU when there is one, else unchanged. Lightning hands a model back
    on the CPU after ``fit`` (its strategy's teardown), and checkpoints load there; call this
    before sampling or evaluating with a trained model at the full profile."""
    import torch

    return module.to("cuda") if torch.cuda.is_available() else module


@contextlib.contextmanager
def unfilled_allocations() -> Iterator[None]:
    """Inside this block, torch does not fill each new tensor's memory with NaN.

    Lightning's ``deterministic=True`` (:func:`reprobook.core.make_trainer`) turns on
    ``torch.use_deterministic_algorithms``, which by default also fills every fresh allocation
    (``torch.utils.deterministic.fill_uninitialized_memory``) so that a kernel reading
    uninitialised memory shows up. Code that reads no uninitialised memory computes the same
    numbers without it (chapter 16's tests check its weights and samples bit for bit); on the CPU
    the fill cost chapter 16 about 1-2 ms of a 25-30 ms training step and about 6% of a sampler
    run. The previous setting comes back when the block ends, also on an error."""
    import torch.utils.deterministic

    before = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = before
