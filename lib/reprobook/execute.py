"""Executing notebooks: what the local runner and a Slurm job on a node share.

:func:`execute_job` runs one notebook in a subprocess of its own and records its status, wall
time and peak memory in its :class:`Job`; :func:`kernel_env` is the environment every kernel
gets; :func:`update_state` enters a finished notebook in the run's state (the runner's cache).
:mod:`reprobook.runner` plans and schedules runs, :mod:`reprobook.slurm` submits them; both
import from here, and this module imports neither.

``python -m reprobook.execute INPUT OUTPUT PARAMETERS_JSON CWD`` is that subprocess: papermill
injects the parameters after the cell tagged ``parameters`` and writes OUTPUT, the partial
notebook with its error included when a cell fails. The exit status is 0 on success, 1 when a
cell raised.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core.paths import atomic_write_text, build_dir, tagged_results_dir


@dataclass
class Job:
    chapter: str
    notebook: str  # path relative to the root
    params: dict[str, Any]
    key: str
    output: str
    status: str = "pending"  # pending | ok | failed | cached
    wall_s: float | None = None
    peak_mb: float | None = None
    error: str | None = None
    finished: str | None = None
    slurm_job: str | None = None  # the Slurm job that ran it (--executor slurm)


def _peak_rss_of_tree(proc: subprocess.Popen, stop: threading.Event, out: list[float]) -> None:
    import psutil

    try:
        parent = psutil.Process(proc.pid)
    except psutil.Error:
        return
    peak = 0
    while not stop.is_set():
        try:
            procs = [parent, *parent.children(recursive=True)]
            total = 0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            peak = max(peak, total)
        except psutil.Error:
            break
        stop.wait(0.2)
    out.append(peak / 2**20)


def file_digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


KERNEL_NOT_STARTED = "Kernel died before replying to kernel_info"


def execute_job(
    job: Job,
    root: Path,
    env: dict[str, str],
    timeout: float | None,
    *,
    measure_memory: bool = True,
) -> Job:
    """Execute one notebook; a kernel that died before it started (no cell ran, as happens on
    a loaded machine) is started once more. ``measure_memory=False`` records no peak memory
    (``None``): for a kernel forked by a warm-kernel server, which is not in the process tree
    that would be measured."""
    job = _execute_once(job, root, env, timeout, measure_memory)
    if job.status == "failed" and KERNEL_NOT_STARTED in (job.error or ""):
        job.error = None
        job = _execute_once(job, root, env, timeout, measure_memory)
    return job


def _execute_once(
    job: Job, root: Path, env: dict[str, str], timeout: float | None, measure_memory: bool = True
) -> Job:
    source = root / job.notebook
    output = root / job.output
    output.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "reprobook.execute",
        str(source),
        str(output),
        json.dumps(job.params),
        str(source.parent),
    ]
    start = time.perf_counter()
    env = {
        **env,
        "REPROBOOK_OVERRIDES": json.dumps({k: v for k, v in job.params.items() if k != "profile"}),
    }
    # a session of its own, so a timeout stops the kernel too, not only the wrapper
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stop, peak = threading.Event(), []
    watcher = None
    if measure_memory:
        watcher = threading.Thread(target=_peak_rss_of_tree, args=(proc, stop, peak), daemon=True)
        watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
        stderr = f"timed out after {timeout:.0f} s\n" + (stderr or "")
    stop.set()
    if watcher is not None:
        watcher.join()
    job.wall_s = round(time.perf_counter() - start, 2)
    job.peak_mb = round(peak[0], 1) if peak else None
    job.finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if proc.returncode == 0:
        job.status = "ok"
    else:
        job.status = "failed"
        lines = [ln for ln in (stderr or "").strip().splitlines() if ln.strip()]
        job.error = lines[-1] if lines else f"exit status {proc.returncode}"
    return job


def kernel_env(root: Path, profile: str, jobs: int, tag: str = "") -> dict[str, str]:
    """The environment of every executed kernel: results folder, offline hubs, headless plots,
    and one thread per notebook when several run at once, and always at the smoke profile
    (its models are a few layers wide: threads only contend)."""
    env = dict(os.environ)
    env.update(
        {
            "REPROBOOK_ROOT": str(root),
            "REPROBOOK_RESULTS": str(tagged_results_dir(root, tag)),
            "REPROBOOK_PROFILE": profile,
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
    )
    if jobs > 1 or profile == "smoke":
        for var in (
            "REPROBOOK_THREADS",
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
        ):
            env[var] = "1"
    return env


def _state_path(root: Path, profile: str, tag: str = "") -> Path:
    return build_dir(root, tag) / "state" / f"{profile}.json"


def update_state(root: Path, profile: str, tag: str, job: Job, results: Path) -> None:
    """Record one finished notebook in the run's state, under a file lock: cluster jobs of
    several chapters finish at once and each writes its own entries."""
    import fcntl

    path = _state_path(root, profile, tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = load_state(root, profile, tag)
            if job.status == "ok":
                state[job.notebook] = {
                    "key": job.key,
                    "status": "ok",
                    "wall_s": job.wall_s,
                    "peak_mb": job.peak_mb,
                    "finished": job.finished,
                    "results_sha256": file_digest(results),
                }
            else:
                state.pop(job.notebook, None)
            atomic_write_text(path, json.dumps(state, indent=2) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load_state(root: Path, profile: str, tag: str = "") -> dict[str, Any]:
    path = _state_path(root, profile, tag)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


def import_papermill():
    """papermill, imported without pyarrow. papermill's I/O module imports ``pyarrow.fs`` for
    HDFS paths when pyarrow is installed (it is, for pandas and datasets): about 0.35 s of the
    0.8 s that importing papermill took here, paid by every notebook the runner executes. This
    process reads and writes local paths only, so it marks pyarrow as absent (papermill then
    leaves HDFS unsupported, as it does without pyarrow) unless something has imported it
    already. The kernel is another process and imports what its notebook needs."""
    if "pyarrow" not in sys.modules:
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import raises ImportError
    import papermill

    return papermill


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(
            "usage: python -m reprobook.execute INPUT OUTPUT PARAMETERS_JSON CWD", file=sys.stderr
        )
        return 2
    source, output, parameters, cwd = args
    pm = import_papermill()

    from .kernels import KERNEL_NAME, SERVER_ENV

    # a kernel forked from the run's kernel server when it has one (reprobook.kernels)
    kernel_name = KERNEL_NAME if os.environ.get(SERVER_ENV) else "python3"

    try:
        pm.execute_notebook(
            source,
            output,
            parameters=json.loads(parameters),
            cwd=cwd,
            kernel_name=kernel_name,
            progress_bar=False,
            log_output=False,
            request_save_on_cell_execute=True,
            # every output is in and every result written when the last cell ends; a graceful
            # shutdown then waits ~0.8 s for the interpreter to tear down torch and Lightning
            shutdown_kernel="immediate",
        )
    except pm.PapermillExecutionError as err:
        print(f"{err.ename}: {err.evalue} (cell {err.exec_count})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
