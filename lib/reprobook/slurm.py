"""``reprobook run --executor slurm``: the book's chapters as Slurm jobs, submitted through
submitit.

One job per chapter runs that chapter's notebooks in order, as a local run does, with the
resources its ``config.py`` declares for the profile (:mod:`reprobook.core.resources`). The
cache is the local run's: a notebook whose key is unchanged is not submitted, and each notebook
that finishes inside a job is entered in the run's state at once (under a file lock), so a job
that is cancelled or pre-empted loses only the notebook it was running, and the next run
submits only what did not finish. Results, executed notebooks and the manifest land in the
shared ``_build/`` exactly where a local run writes them; the manifest gives each notebook's
Slurm job id.

Job states come from ``squeue`` and ``scontrol`` (they work without Slurm's accounting
database) and from the result file submitit writes when a job's function returns.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .core.paths import atomic_write_text, tagged_results_dir
from .core.resources import Resources, chapter_resources

CONFIG_FILE = "reprobook-slurm.yml"
OPTION_KEYS = ("partition", "account", "qos", "additional_parameters", "setup")
INTERRUPTED = (
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
)
FINISHED = ("COMPLETED", "FAILED", *INTERRUPTED, "GONE")


class SlurmError(RuntimeError):
    """Slurm cannot be reached, or a submission was refused."""


@dataclass(frozen=True)
class SlurmOptions:
    """Where and how jobs are submitted: from ``reprobook-slurm.yml`` at the book's root (or
    ``--slurm-config``), then the command line's ``--partition``, ``--account``, ``--qos``."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    additional_parameters: dict[str, Any] = field(default_factory=dict)  # any other sbatch option
    setup: tuple[str, ...] = ()  # shell lines run before the job's Python (module load ..., say)


def load_options(root: Path, config: Path | None = None, **cli: Any) -> SlurmOptions:
    path = Path(config) if config else root / CONFIG_FILE
    data: dict[str, Any] = {}
    if config and not path.is_file():
        raise SlurmError(f"no Slurm config file at {path}")
    if path.is_file():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise SlurmError(f"{path}: a mapping with keys among {', '.join(OPTION_KEYS)}")
        bad = sorted(set(data) - set(OPTION_KEYS))
        if bad:
            raise SlurmError(
                f"{path}: unknown key(s) {', '.join(bad)}; valid: {', '.join(OPTION_KEYS)}"
            )
    data.update({k: v for k, v in cli.items() if v is not None})
    extra = data.get("additional_parameters") or {}
    if not isinstance(extra, dict):
        raise SlurmError(
            "additional_parameters is a mapping of sbatch options (without the leading --)"
        )
    setup = data.get("setup") or ()
    if isinstance(setup, str):
        setup = (setup,)
    return SlurmOptions(
        partition=data.get("partition"),
        account=data.get("account"),
        qos=data.get("qos"),
        additional_parameters=dict(extra),
        setup=tuple(str(x) for x in setup),
    )


# the commands a submission runs on this machine: submitit's sbatch (and its check for srun),
# and the runner's sinfo, squeue and scontrol; following jobs needs only the last three
SUBMIT_COMMANDS = ("sbatch", "srun", "sinfo", "squeue", "scontrol")
FOLLOW_COMMANDS = ("sinfo", "squeue", "scontrol")
LOGIN_NODE = "needs a Slurm login node"
DRY_RUN_HINT = "(use --dry-run to print the scripts)"


def _one_line(text: str, limit: int = 300) -> str:
    """A message of submitit's or Slurm's on one line: the command line prints each error as
    one line, never a traceback."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    joined = " / ".join(lines) or "no message"
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def _names(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def require_slurm(
    doing: str = "submitting", hint: str = DRY_RUN_HINT, commands: tuple = SUBMIT_COMMANDS
) -> None:
    """Refuse, in one line that names what is missing, on a machine that cannot do it: one
    where Slurm's ``commands`` are not on PATH (a laptop), or where ``sinfo`` cannot reach the
    controller. Checked before anything is changed, so a refusal leaves the run as it was."""
    missing = [c for c in commands if shutil.which(c) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise SlurmError(
            f"Slurm's {_names(missing)} {verb} not on PATH on this machine; "
            f"{doing} {LOGIN_NODE} {hint}".rstrip()
        )
    try:
        subprocess.run(["sinfo", "-h"], check=True, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        detail = _one_line(getattr(err, "stderr", "") or str(err), 200)
        raise SlurmError(
            f"Slurm cannot be reached (sinfo failed: {detail}); "
            "is this a login node with SLURM_CONF set?"
        ) from None


@functools.cache
def _script_only_executor() -> type:
    """submitit's SlurmExecutor, able to write a batch script where Slurm is not installed.

    ``SlurmExecutor.__init__`` refuses a machine without ``srun`` (it asks the executor's
    ``affinity``). A dry run is what one types on a laptop before going to the cluster, so this
    subclass reports itself available, and refuses to submit. The script is still the one
    submitit writes, from the same parameters: what ``--dry-run`` prints is what ``sbatch``
    would get.
    """
    import submitit

    class ScriptOnly(submitit.SlurmExecutor):
        @classmethod
        def affinity(cls) -> int:
            return 2

        def _internal_process_submissions(self, delayed_submissions):
            raise SlurmError("a dry run writes batch scripts and submits nothing")

    return ScriptOnly


def _executor(
    folder: Path, slug: str, resources: Resources, options: SlurmOptions, dry_run: bool = False
):
    """The submitit executor of one chapter's job: its resources at the profile and the
    options of the cluster (``dry_run``: one that only writes the script)."""
    import submitit

    params: dict[str, Any] = dict(
        job_name=f"reprobook-{slug}",
        time=max(1, int(round(resources.hours * 60))),
        cpus_per_task=resources.cpus,
        mem=f"{int(round(resources.mem_gb * 1024))}M",
        nodes=1,
        ntasks_per_node=1,
        signal_delay_s=120,
    )
    if resources.gpus:
        params["gpus_per_node"] = resources.gpus
    for key in ("partition", "account", "qos"):
        if getattr(options, key):
            params[key] = getattr(options, key)
    if options.additional_parameters:
        params["additional_parameters"] = dict(options.additional_parameters)
    if options.setup:
        params["setup"] = list(options.setup)
    kind = _script_only_executor() if dry_run else submitit.SlurmExecutor
    try:
        ex = kind(folder=str(folder), python=shlex.quote(sys.executable))
    except RuntimeError as err:  # 'Could not detect "srun", are you indeed on a slurm cluster?'
        raise SlurmError(
            f"submitit found no Slurm on this machine ({_one_line(err)}); submitting "
            f"{LOGIN_NODE} {DRY_RUN_HINT}"
        ) from None
    try:
        ex.update_parameters(**params)
    except ValueError as err:  # a parameter submitit does not know, or a malformed value
        raise SlurmError(
            f"chapter {slug}: submitit refused the job's parameters: {_one_line(err)}"
        ) from None
    return ex


def batch_script(root: Path, folder: Path, slug: str, profile: str, options: SlurmOptions) -> str:
    """The sbatch script one chapter's job would be submitted with (``--dry-run`` prints it);
    written by submitit's own template, on any machine, Slurm or not. Nothing is written to
    ``folder``: it only names the logs in the script."""
    ex = _executor(folder, slug, chapter_resources(root, slug, profile), options, dry_run=True)
    return ex._make_submission_file_text(ex._submitit_command_str, "dry-run")


# ----------------------------------------------------------------------------- on the node


def chapter_job(
    root: str, profile: str, tag: str, jobs: list[dict[str, Any]], timeout: float | None
) -> list[dict]:
    """What a chapter's Slurm job runs: its notebooks in order, each entered in the run's state
    as soon as it finishes. Returns the notebooks' records (status, wall time, peak memory)."""
    from .execute import Job, execute_job, kernel_env, update_state

    rootp = Path(root)
    env = kernel_env(rootp, profile, 1, tag)
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and cpus == "1":
        env.setdefault("REPROBOOK_THREADS", "1")
    job_id = os.environ.get("SLURM_JOB_ID")
    out = []
    for spec in jobs:
        job = execute_job(Job(**spec), rootp, env, timeout)
        results = (
            tagged_results_dir(rootp, tag)
            / profile
            / job.chapter
            / f"{Path(job.notebook).stem}.json"
        )
        update_state(rootp, profile, tag, job, results)
        record = asdict(job)
        record["slurm_job"] = job_id
        out.append(record)
    return out


# ------------------------------------------------------------------------ submitting and collecting


def _registry(folder: Path) -> Path:
    return folder / "submitted.json"


def _load_registry(folder: Path) -> dict[str, Any]:
    path = _registry(folder)
    return json.loads(path.read_text()) if path.exists() else {}


def submit(
    root: Path,
    profile: str,
    tag: str,
    by_chapter: dict[str, list],
    timeout: float | None,
    options: SlurmOptions,
    folder: Path,
    echo: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Submit one job per chapter in ``by_chapter`` (chapter slug -> its pending runner jobs).
    A refusal (sbatch's, or submitit's) is a one-line :class:`SlurmError`; the jobs submitted
    before it are kept in the registry, so ``--collect`` still finds them."""
    require_slurm()
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    registry = _load_registry(folder)
    try:
        for slug, jobs in by_chapter.items():
            resources = chapter_resources(root, slug, profile)
            ex = _executor(folder, slug, resources, options)
            said = io.StringIO()  # submitit prints sbatch's complaint itself: into the message
            try:
                with contextlib.redirect_stderr(said):
                    sub = ex.submit(
                        chapter_job, str(root), profile, tag, [asdict(j) for j in jobs], timeout
                    )
            except FailedJobError as err:  # sbatch ran and said no
                why = _one_line(str(err) or said.getvalue())
                raise SlurmError(f"sbatch refused the job of chapter {slug}: {why}") from None
            except FailedSubmissionError as err:
                raise SlurmError(
                    f"chapter {slug}: sbatch's answer names no job id: {_one_line(err)}"
                ) from None
            except OSError as err:  # sbatch missing or not executable
                raise SlurmError(
                    f"chapter {slug}: Slurm's sbatch could not be run ({_one_line(err)}); "
                    f"submitting {LOGIN_NODE} {DRY_RUN_HINT}"
                ) from None
            except Exception as err:  # submitit's own refusals (a pickle too large, say)
                raise SlurmError(
                    f"chapter {slug} could not be submitted: {type(err).__name__}: {_one_line(err)}"
                ) from None
            registry[slug] = {
                "job_id": str(sub.job_id),
                "notebooks": [j.notebook for j in jobs],
                "keys": [j.key for j in jobs],
                "resources": asdict(resources),
                "stdout": str(sub.paths.stdout),
                "stderr": str(sub.paths.stderr),
                "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            echo(
                f"submitted chapter {slug} as Slurm job {sub.job_id} ({resources.describe()}; "
                f"{len(jobs)} notebook(s)); log: {sub.paths.stdout}"
            )
    finally:
        if registry:
            atomic_write_text(_registry(folder), json.dumps(registry, indent=2) + "\n")
    return registry


def job_state(job_id: str) -> str:
    """PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, ... (GONE once Slurm has forgotten it)."""
    try:
        q = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        if q.returncode == 0 and q.stdout.strip():
            return q.stdout.split()[0]
        s = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True
        )
    except OSError as err:  # squeue or scontrol missing: not a Slurm machine
        raise SlurmError(
            f"the state of Slurm job {job_id} cannot be read here ({_one_line(err)}); "
            f"following Slurm jobs {LOGIN_NODE}"
        ) from None
    for part in s.stdout.split():
        if part.startswith("JobState="):
            return part.split("=", 1)[1]
    return "GONE"


def _result(folder: Path, job_id: str) -> tuple[str, Any] | None:
    """submitit's result file of a finished job: ("success", records) or ("error", traceback)."""
    import pickle

    path = folder / f"{job_id}_0_result.pkl"
    if not path.exists():
        return None
    with open(path, "rb") as fh:
        return pickle.load(fh)


@dataclass
class Collected:
    records: list[dict[str, Any]] = field(
        default_factory=list
    )  # notebooks that ran, with their job id
    failures: list[str] = field(
        default_factory=list
    )  # one line per job that did not finish its notebooks
    pending: list[str] = field(
        default_factory=list
    )  # chapters whose jobs are still queued or running


def collect(
    folder: Path,
    wait: bool,
    poll_s: float = 2.0,
    echo: Callable[[str], Any] = print,
    progress: bool = True,
) -> Collected:
    """Gather the submitted jobs: each finished job's notebook records, and a line naming each
    job that failed, was cancelled or was pre-empted, with its log. With ``wait``, poll until
    every job has left the queue (with a progress bar)."""
    registry = _load_registry(folder)
    if registry:
        require_slurm("collecting Slurm jobs", hint="", commands=FOLLOW_COMMANDS)
    out = Collected()
    remaining = dict(registry)
    bar = None
    if wait and progress and remaining:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(remaining), unit="job", desc="slurm", file=sys.stderr)
    while True:
        for slug, entry in list(remaining.items()):
            state = job_state(entry["job_id"])
            if state not in FINISHED and state != "GONE":
                continue
            result = _result(folder, entry["job_id"])
            if result is not None and result[0] == "success":
                out.records += result[1]  # a notebook that failed inside the job is one of these
            if state in INTERRUPTED or result is None:
                # cancelled, pre-empted or out of time: the notebooks it finished count, the rest
                # run again on the next `reprobook run`
                out.failures.append(
                    f"chapter {slug}: Slurm job {entry['job_id']} ended {state} "
                    "before finishing its "
                    f"notebooks; log: {entry['stderr']}"
                )
            elif result[0] != "success":
                out.failures.append(
                    f"chapter {slug}: Slurm job {entry['job_id']} raised an error; log: "
                    f"{entry['stderr']}"
                )
            del remaining[slug]
            if bar is not None:
                bar.update(1)
        if not wait or not remaining:
            break
        time.sleep(poll_s)
    if bar is not None:
        bar.close()
    out.pending = sorted(remaining)
    if registry:  # nothing submitted: no folder is made for an empty registry
        left = {k: v for k, v in registry.items() if k in remaining}
        atomic_write_text(_registry(folder), json.dumps(left, indent=2) + "\n")
    return out
