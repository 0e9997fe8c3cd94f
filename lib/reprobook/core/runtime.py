"""Seeding, threads, side-by-side processes, a quiet Lightning, and the facts of the machine a
run used."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import random
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

THREADS_ENV = "REPROBOOK_THREADS"

#: The packages whose versions every run records.
RECORDED_PACKAGES = (
    "reprobook",
    "numpy",
    "scipy",
    "pandas",
    "torch",
    "lightning",
    "torchmetrics",
    "scikit-learn",
    "matplotlib",
    "seaborn",
    "datasets",
    "papermill",
    "nbval",
    "jupyter-book",
)


def default_threads() -> int:
    """``$REPROBOOK_THREADS`` when set (the runner and the test suite set 1 when they run
    notebooks in parallel), else the number of usable cores."""
    env = os.environ.get(THREADS_ENV)
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"${THREADS_ENV}={env!r} is not a positive integer") from None
        if n < 1:
            raise ValueError(f"${THREADS_ENV}={env!r} is not a positive integer")
        return n
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def _worker_start(path: list[str]) -> None:
    """Set up a process of :func:`parallel_map`: the parent's import path, one torch thread
    (the processes share the cores), a quiet Lightning."""
    sys.path[:] = path
    os.environ[THREADS_ENV] = "1"
    import torch

    torch.set_num_threads(1)
    quiet_lightning()


def _worker_call(job: tuple[Callable[..., Any], tuple]) -> Any:
    fn, args = job
    return fn(*args)


def parallel_map(
    fn: Callable[..., Any], items: Iterable[tuple], *, workers: int | None = None
) -> list[Any]:
    """``[fn(*item) for item in items]``, in order, computed ``workers`` at a time in fresh
    (spawned) processes of one torch thread each, or in this process when ``workers`` is 1.

    For independent CPU work such as the trainings of several small models: on the reduced
    profile's two cores, two one-thread trainings side by side take about the time of one,
    where one two-thread training is barely faster than one thread. ``fn`` must be a function
    of an importable module (it is sent to the workers by name), and its arguments and result
    must pickle. ``workers`` defaults to :func:`default_threads`, which is 1 wherever the
    runner or the tests already run notebooks side by side, so nothing is oversubscribed."""
    return parallel_stages(fn, [items], workers=workers)[0]


def parallel_stages(
    fn: Callable[..., Any], stages: Iterable[Iterable[tuple]], *, workers: int | None = None
) -> list[list[Any]]:
    """``[[fn(*item) for item in stage] for stage in stages]``: each stage computed as
    :func:`parallel_map` computes its items, and finished before the next one starts (a stage
    may load what the one before wrote), all on one pool of workers started once. A spawned
    worker imports torch and Lightning afresh (seconds of CPU each), so two stages in one pool
    cost half the start-ups of two calls of :func:`parallel_map`. ``workers`` is capped by the
    largest stage; with one worker everything runs in this process, stage after stage."""
    stages = [[tuple(it) for it in stage] for stage in stages]
    if workers is None:
        workers = default_threads()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    workers = min(workers, max((len(stage) for stage in stages), default=0))
    if workers <= 1:
        return [[fn(*it) for it in stage] for stage in stages]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_worker_start, initargs=(list(sys.path),)
    ) as pool:
        return [list(pool.map(_worker_call, [(fn, it) for it in stage])) for stage in stages]


def side_by_side(fn: Callable[..., Any], items: Iterable[tuple], *, profile: str) -> list[Any]:
    """:func:`parallel_map` with the house's choice of workers: at the reduced profile one
    process per core (:func:`default_threads`, which is 1 where notebooks already run side by
    side); at any other profile one after the other in this process, since there each training
    takes the GPU. For the trainings a notebook needs that have no checkpoint yet."""
    return parallel_map(fn, items, workers=None if profile == "reduced" else 1)


def side_by_side_stages(
    fn: Callable[..., Any], stages: Iterable[Iterable[tuple]], *, profile: str
) -> list[list[Any]]:
    """:func:`parallel_stages` with the workers of :func:`side_by_side`: for trainings that
    need others trained first (fine-tunings of pretrained models), on one pool of workers."""
    return parallel_stages(fn, stages, workers=None if profile == "reduced" else 1)


def quiet_lightning() -> None:
    """Silence Lightning's start-up chatter (accelerator lines, tips, 'Seed set to') and the
    warnings that only describe this small-machine setting, so executed notebooks show only what
    the chapter prints."""
    for name in (
        "lightning",
        "lightning.pytorch",
        "lightning.fabric",
        "pytorch_lightning",
        "lightning_fabric",
    ):
        logging.getLogger(name).setLevel(logging.ERROR)
    for pattern in (
        ".*does not have many workers.*",
        ".*LeafSpec.*",
        ".*GPU available but not used.*",
        ".*litlogger.*",
        ".*Jupyter is migrating its paths.*",
        ".*The `srun` command is available on your system but is not used.*",
    ):
        warnings.filterwarnings("ignore", pattern)


def seed_everything(seed: int, threads: int | None = None) -> int:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA), seed
    Lightning (``L.seed_everything`` when Lightning is imported; otherwise the variables it
    reads, ``PL_GLOBAL_SEED`` and ``PL_SEED_WORKERS``, so that dataloader workers derive their
    seeds from it), and set torch's thread count. Importing Lightning only to seed it would cost
    chapters that never train several seconds.

    Returns the number of torch threads. New code should still draw from an explicit
    ``np.random.default_rng(seed)``; the global seeds only guard what does not.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    lightning = sys.modules.get("lightning")
    if lightning is not None:  # already imported: let Lightning seed itself (and its workers)
        lightning.seed_everything(seed, workers=True, verbose=False)
    os.environ["PL_GLOBAL_SEED"] = str(seed)  # what L.seed_everything(seed, workers=True) exports,
    os.environ["PL_SEED_WORKERS"] = "1"  # so a Lightning imported later seeds its workers from it
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        _seed_torch(torch, seed, threads)
    else:  # seeded the moment it is imported (nothing can draw from it before that)
        _TorchOnImport.arm(seed, threads)
    return threads


def _seed_torch(torch: Any, seed: int, threads: int) -> None:
    torch.manual_seed(seed)  # also seeds every CUDA device
    torch.set_num_threads(threads)


class _TorchOnImport:
    """Seeds torch and sets its threads as soon as torch is first imported.

    :func:`seed_everything` used to import torch to seed it: about 1.5 s of CPU in every kernel
    whose notebook never uses torch (the chapters of linear programs and closed forms, every
    notebook of the runner's tests). Torch's generators cannot be drawn from before it is
    imported, so seeding it right after its import gives the same draws as seeding it first.
    A finder placed at the front of ``sys.meta_path`` wraps the loader of the ``torch`` module
    only; it takes itself out once torch has been imported (or when torch is missing: then
    there is nothing to seed)."""

    seed: int = 0
    threads: int = 1
    _finder: Any = None

    @classmethod
    def arm(cls, seed: int, threads: int) -> None:
        cls.seed, cls.threads = seed, threads  # the latest call wins, as eager seeding would
        if cls._finder is None:
            import importlib.abc

            class Finder(importlib.abc.MetaPathFinder):
                def find_spec(self, name, path=None, target=None):
                    return cls._spec(name, path, target)

            cls._finder = Finder()
            sys.meta_path.insert(0, cls._finder)

    @classmethod
    def disarm(cls) -> None:
        if cls._finder is not None:
            if cls._finder in sys.meta_path:
                sys.meta_path.remove(cls._finder)
            cls._finder = None

    @classmethod
    def _spec(cls, name, path, target):
        if name != "torch":
            return None
        finders = [f for f in sys.meta_path if f is not cls._finder]
        for finder in finders:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:  # no torch on this machine: nothing will ever need seeding
            cls.disarm()
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            cls.disarm()
            return spec
        exec_module = loader.exec_module

        def exec_and_seed(module):
            cls.disarm()
            exec_module(module)
            _seed_torch(module, cls.seed, cls.threads)

        loader.exec_module = exec_and_seed  # this spec's loader only
        return spec


def git_commit(root: Path | None = None) -> str | None:
    """The checkout's commit (with ``-dirty`` when the tree has uncommitted changes), or None."""
    env = os.environ.get("REPROBOOK_GIT_COMMIT")
    if env:
        return env
    cwd = str(root) if root else None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def package_versions(names: tuple[str, ...] = RECORDED_PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (None for a package that is not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware() -> dict[str, Any]:
    """CPU model and cores, memory, and the GPUs torch sees (when torch is already imported)."""
    import psutil

    facts: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": [],
    }
    facts["gpus"] = gpus()
    return facts


def gpus() -> list[str]:
    """The names of the GPUs on this machine: from ``nvidia-smi`` when it is there (no torch
    import needed), else from torch when it is already imported."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if out.returncode == 0:
            return [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return []


def runtime_facts(root: Path | None = None) -> dict[str, Any]:
    """Everything a result needs to be traced: commit, Python, platform, versions, hardware."""
    return {
        "git_commit": git_commit(root),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "hardware": hardware(),
    }
