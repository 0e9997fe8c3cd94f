"""The batch runner: execute chapters with papermill, in parallel, with a cache.

For each notebook it computes a key from the notebook file, its chapter's claims file and
library package, the core library, the lock file, the profile and the parameters. A notebook
whose key matches its last successful run at that profile is skipped; anything else runs.
Executed notebooks, claim results and a manifest (commit, versions, hardware, per-notebook
status, wall time and peak memory) go under ``_build/``. A failing notebook does not stop the
others; its partial output and error are kept and the run fails at the end. Chapters run in
parallel, the longest expected first (:func:`longest_first`); the notebooks of one chapter run
in order, so a notebook may use what an earlier one of its chapter wrote. Before anything runs,
and before any folder is made, each ``-p`` override is converted to the type its notebooks'
parameters cells declare (``seed: int``) and the numeric options are checked against their
ranges: a wrong value is one line, not a run of failures.

A run with another seed (``-p seed=1``) or an explicit ``--tag`` keeps everything it writes
(results, executed notebooks, state, manifest) under ``_build/tagged/<tag>/`` instead of
``_build/``, so two runs can be compared claim by claim (``reprobook ledger --compare``) and the
default seed's results are never overwritten.

The runner reads notebooks and claims files; it imports no paper package.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import contextlib
import datetime as _dt
import hashlib
import json
import os
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .core import checks, paths
from .core.chapters import Chapter, find_chapters, get_chapter
from .core.paths import atomic_write_text, book_root, build_dir, tagged_results_dir
from .core.profiles import PROFILE_NAMES
from .core.runtime import runtime_facts

# shared with the Slurm executor (reprobook.execute); named here too for the runner's callers
from .execute import (  # noqa: F401
    KERNEL_NOT_STARTED,
    Job,
    execute_job,
    file_digest,
    kernel_env,
    load_state,
    update_state,
)

tag_results_dir = tagged_results_dir
_execute = execute_job

LOCK_FILE = "requirements.lock"


def default_tag(overrides: dict[str, Any]) -> str:
    """The tag a run gets when none is given: ``seedN`` for a seed other than 0, else none."""
    seed = overrides.get("seed")
    return "" if seed in (None, 0) else f"seed{seed}"


def check_tag(tag: str) -> str:
    """``tag`` when it is a valid run tag, else :class:`RunError` saying what a tag may hold."""
    try:
        return paths.check_tag(tag)
    except ValueError as err:
        raise RunError(str(err)) from None


class RunError(ValueError):
    """A request the runner refuses before executing anything."""


# ----------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Parameter:
    """One line of a notebook's parameters cell, e.g. ``seed: int = 0  # the seed``. Its
    annotation is the type an override of it must have: a run checks every ``-p`` against it
    before anything executes, instead of letting three notebooks fail on ``seed = "abc"``."""

    name: str
    annotation: str  # source text, e.g. "int | None"; "" for a line without one
    default: str  # source text of the default
    notebook: Path

    def declaration(self) -> str:
        return f"{self.name}: {self.annotation}" if self.annotation else self.name


def parameters_cell(path: Path) -> dict[str, Parameter]:
    """The names assigned in the cell tagged ``parameters``, with annotations and defaults."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get(
            "tags", []
        ):
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            params: dict[str, Parameter] = {}
            for node in ast.parse(source).body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    default = ast.unparse(node.value) if node.value else ""
                    name = node.target.id
                    params[name] = Parameter(name, ast.unparse(node.annotation), default, path)
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            default = ast.unparse(node.value)
                            params[target.id] = Parameter(target.id, "", default, path)
            return params
    raise RunError(f"{path}: no code cell is tagged 'parameters'")


def notebook_parameters(path: Path) -> dict[str, str]:
    """The names (and source text of the defaults) assigned in the cell tagged ``parameters``."""
    return {name: p.default for name, p in parameters_cell(path).items()}


def split_override(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as typed on the command line: the name, checked, and the value's text,
    not yet converted. The run converts it to the type the notebooks declare for NAME
    (:func:`check_overrides`), so that ``-p tag=1`` stays the text ``"1"`` for a ``str``."""
    if "=" not in text:
        raise RunError(f"override {text!r} is not NAME=VALUE")
    name, raw = text.split("=", 1)
    name = name.strip()
    if not name.isidentifier():
        raise RunError(f"override name {name!r} is not a Python identifier")
    return name, raw


def parse_override(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE read as YAML (numbers, true/false, null, lists); ``None``,
    ``True`` and ``False`` are read as Python spells them. A run uses this guess only for a
    parameter whose type it cannot read from the parameters cell."""
    name, raw = split_override(text)
    return name, _guess(name, raw)


def _guess(name: str, raw: str) -> Any:
    special = {"None": None, "True": True, "False": False}
    if raw in special:
        return special[raw]
    for number in (int, float):  # YAML 1.1 reads 1e-3 as a string
        try:
            return number(raw)
        except ValueError:
            pass
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, (dict, set)):
        raise RunError(f"override {name}: mappings are not supported, got {raw!r}")
    return value


# the types a parameters cell declares, and how a message names a value of each
SCALARS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}
NONE_TEXT = ("None", "none", "null", "~")  # what `-p n=...` may type for None where allowed


class _Misfit(ValueError):
    """A value that is not of a declared type."""


def _alternatives(annotation: str) -> tuple[list[ast.expr], bool] | None:
    """The types an annotation allows, and whether it allows None (``int | None``,
    ``Optional[int]``, ``Union[int, str]``); None for an annotation that does not parse."""
    try:
        tree = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    found: list[ast.expr] = []

    def walk(node: ast.expr) -> None:
        head = ast.unparse(node.value) if isinstance(node, ast.Subscript) else ""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            walk(node.left)
            walk(node.right)
        elif head in ("Optional", "typing.Optional"):
            walk(node.slice)
            found.append(ast.Constant(None))
        elif head in ("Union", "typing.Union"):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for part in parts:
                walk(part)
        else:
            found.append(node)

    walk(tree)
    types = [t for t in found if ast.unparse(t) != "None"]
    return types, len(types) < len(found)


def _as_scalar(kind: str, value: Any) -> Any:
    """``value`` as an ``int``, ``float``, ``bool`` or ``str``. Text is read strictly (an integer
    literal, a number, true or false); a Python value must be of the type already (an ``int``
    is taken for a ``float``, a ``bool`` for neither)."""
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        if kind == "int":
            try:
                return int(text, 10)  # "1.5", "1e3" and "abc" are not integer literals
            except ValueError:
                raise _Misfit(kind) from None
        if kind == "float":
            try:
                return float(text)
            except ValueError:
                raise _Misfit(kind) from None
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _Misfit(kind)
    fits = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
    }[kind]
    if not fits:
        raise _Misfit(kind)
    return float(value) if kind == "float" else value


def _as_type(node: ast.expr, value: Any, name: str) -> Any:
    """``value`` as one type of an annotation. ``list[T]`` takes ``[a, b]`` and converts each
    item; a type the runner does not know (a notebook's own class, say) takes the value as it
    comes, text read as YAML."""
    kind = ast.unparse(node)
    if kind in SCALARS:
        return _as_scalar(kind, value)
    head = ast.unparse(node.value) if isinstance(node, ast.Subscript) else kind
    if head in ("list", "List", "typing.List"):
        items = _guess(name, value) if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise _Misfit(kind)
        if not isinstance(node, ast.Subscript):
            return list(items)
        try:
            return [_as_type(node.slice, item, name) for item in items]
        except _Misfit:
            raise _Misfit(kind) from None
    return _guess(name, value) if isinstance(value, str) else value


def _allowed(kind: str) -> str:
    if kind in SCALARS:
        return SCALARS[kind]
    if kind.startswith(("list", "List")):
        return f"a {kind} written like [1, 2]"
    return kind


def convert_override(name: str, value: Any, param: Parameter, where: str | None = None) -> Any:
    """``value`` as the type ``param`` declares, or :class:`RunError` saying what was wrong and
    what is allowed (``where`` names the notebook in it). A string is text typed on the command
    line and is converted (``"3"`` -> 3 for an ``int``); any other value must have the declared
    type already. A parameter declared ``X | None`` also takes None (typed None, none, null or
    ~). A parameter without an annotation takes the value as before: text read as YAML."""
    parsed = _alternatives(param.annotation) if param.annotation else None
    if parsed is None:
        return _guess(name, value) if isinstance(value, str) else value
    types, optional = parsed
    if optional and (value is None or (isinstance(value, str) and value.strip() in NONE_TEXT)):
        return None
    for node in types:
        try:
            return _as_type(node, value, name)
        except _Misfit:
            continue
    allowed = [_allowed(ast.unparse(t)) for t in types] + (["None"] if optional else [])
    typed = value if isinstance(value, str) else repr(value)
    raise RunError(
        f"-p {name}={typed}: {name} is declared '{param.declaration()}' in "
        f"{where or param.notebook}; {value!r} is not {' or '.join(allowed)}"
    )


def _declared(root: Path, chapters: list[Chapter]) -> list[tuple[Chapter, Path, dict]]:
    """Each notebook of the chapters with its parameters cell (which must set ``profile``)."""
    out = []
    for ch in chapters:
        for nb in ch.notebooks:
            params = parameters_cell(nb)
            if "profile" not in params:
                raise RunError(f"{nb.relative_to(root)}: its parameters cell has no 'profile'")
            out.append((ch, nb, params))
    return out


def check_overrides(
    root: Path, chapters: list[Chapter], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The overrides converted to the types the chapters' parameters cells declare, or a
    :class:`RunError` before anything runs or any folder is made: ``-p profile=...`` (the
    profile is ``--profile``), a name no chosen notebook has, or a value of the wrong type
    (checked against every notebook that declares the name)."""
    return _check_overrides(root, _declared(root, chapters), overrides)


def _check_overrides(
    root: Path, declared: list[tuple], overrides: dict[str, Any]
) -> dict[str, Any]:
    if "profile" in overrides:
        raise RunError(
            "the profile is chosen with --profile reduced|full|smoke, not with -p profile=..."
        )
    accepted = {name for _, _, params in declared for name in params}
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise RunError(
            f"no notebook of the chosen chapters has a parameter named {', '.join(unknown)}; "
            f"their parameters: {', '.join(sorted(accepted))}"
        )
    out = {}
    for name, value in overrides.items():
        converted = []
        for _, nb, params in declared:
            if name in params:
                where = str(nb.relative_to(root))
                converted.append(convert_override(name, value, params[name], where))
        out[name] = converted[0]
    return out


# ----------------------------------------------------------------------------- hashing


def _hash_files(paths: list[Path], h: hashlib._Hash, root: Path) -> None:
    for p in sorted(paths):
        h.update(str(p.relative_to(root)).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")


def _tree_files(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return [
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    ]


def notebook_key(
    root: Path,
    chapter: Chapter,
    notebook: Path,
    profile: str,
    params: dict[str, Any],
    previous: str = "",
) -> str:
    """The cache key: what, if changed, makes a notebook's last output stale. ``previous`` is
    the key of the chapter's preceding notebook: a notebook may show what earlier ones of its
    chapter recorded, so a change upstream re-runs everything after it."""
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"profile": profile, "params": params, "previous": previous},
            sort_keys=True,
            default=str,
        ).encode()
    )
    files = [notebook, chapter.folder / "claims.yml"]
    files += _tree_files(root / "lib" / "reprobook" / "core")
    files += _tree_files(root / "lib" / "reprobook" / "papers" / chapter.slug)
    lock = root / LOCK_FILE
    if lock.exists():
        files.append(lock)
    _hash_files(files, h, root)
    return h.hexdigest()


def select_chapters(root: Path, keys: list[str] | None) -> list[Chapter]:
    if not keys:
        return find_chapters(root)
    out = []
    for key in keys:
        try:
            out.append(get_chapter(key, root))
        except KeyError as err:
            raise RunError(err.args[0]) from None
    return out


@dataclass
class RunSummary:
    profile: str
    jobs: list[Job] = field(default_factory=list)
    manifest: Path | None = None
    tag: str = ""
    failures: list[str] = field(default_factory=list)  # jobs that did not finish (--executor slurm)
    waiting: list[str] = field(default_factory=list)  # chapters still queued or running on Slurm
    # the machine's 1-, 5- and 15-minute load averages when the run started (read timings with it)
    load_at_start: tuple[float, ...] = field(default_factory=lambda: tuple(os.getloadavg()))

    @property
    def failed(self) -> list[Job]:
        return [j for j in self.jobs if j.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.failures

    @property
    def executed(self) -> list[Job]:
        return [j for j in self.jobs if j.status in ("ok", "failed")]


def check_options(jobs: int = 2, timeout: float | None = 3600) -> None:
    """The numeric options of a run, in range (``--jobs`` >= 1, ``--timeout`` > 0 seconds or
    None for no limit), checked before anything runs: a timeout of -5 would stop every
    notebook at once and report them all failed."""
    try:
        checks.integer(jobs, "--jobs (chapters at once)", minimum=1)
        if timeout is not None:
            checks.real(timeout, "--timeout (seconds per notebook)", above=0)
    except checks.InputError as err:
        raise RunError(str(err)) from None


def plan(
    root: Path,
    chapters: list[Chapter],
    profile: str,
    overrides: dict[str, Any],
    force: bool,
    tag: str = "",
) -> list[Job]:
    """The jobs of a run, each with its injected parameters and key, marked ``cached`` when
    its last successful output is still valid. Refuses an override no notebook accepts, or
    one whose value is not of the type the notebooks declare (:func:`check_overrides`)."""
    if profile not in PROFILE_NAMES:
        raise RunError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILE_NAMES)}")
    per_notebook = _declared(root, chapters)
    overrides = _check_overrides(root, per_notebook, overrides)
    state = load_state(root, profile, tag)
    jobs = []
    previous: dict[str, str] = {}  # chapter slug -> key of its last notebook so far
    for ch, nb, names in per_notebook:
        params = {"profile": profile, **{k: v for k, v in overrides.items() if k in names}}
        rel = str(nb.relative_to(root))
        key = notebook_key(root, ch, nb, profile, params, previous.get(ch.slug, ""))
        previous[ch.slug] = key
        output = str((build_dir(root, tag) / "executed" / profile / rel).relative_to(root))
        job = Job(chapter=ch.slug, notebook=rel, params=params, key=key, output=output)
        last = state.get(rel) or {}
        records = any(c.notebook == nb.stem for c in ch.claims)
        results = tag_results_dir(root, tag) / profile / ch.slug / f"{nb.stem}.json"
        # fresh: same key, last run succeeded, its output is there, and its results file is the
        # one that run wrote (not one a hand-run in Jupyter left since)
        fresh = (
            last.get("key") == key
            and last.get("status") == "ok"
            and (root / output).exists()
            and (file_digest(results) == last.get("results_sha256") if records else True)
        )
        if fresh and not force:
            job.status = "cached"
            job.wall_s, job.peak_mb, job.finished = (
                last.get("wall_s"),
                last.get("peak_mb"),
                last.get("finished"),
            )
        jobs.append(job)
    return jobs


def preflight(
    root: Path,
    chapters: list[Chapter],
    notebooks: dict[str, set[str]],
    profile: str,
    params: dict[str, Any],
) -> str:
    """The inputs (data, weights, packages) that the chosen chapters' RESOURCES declare for
    ``profile``, that the notebooks to run (``{slug: file stems}``) use, and that this machine
    lacks, as one message listing every one with how to get it; ``""`` when nothing is
    missing. Inputs a parameter waives (``-p modelcompose=False``) are not needed. At the smoke
    profile the chapters' fixtures are built here first (and a fixture that cannot be built is
    listed with why)."""
    import subprocess

    from .core.resources import (
        chapter_resources,
        missing_inputs,
        missing_message,
        needed_inputs,
    )

    missing, broken = {}, []
    for ch in chapters:
        if ch.slug in notebooks:
            res = chapter_resources(root, ch.slug, profile)
            if profile == "smoke":
                # built in a process of its own: the runner imports no paper package
                finds = [i.find for i in needed_inputs(res, params, notebooks[ch.slug])]
                if [f for f in finds if not f.startswith("module:")]:
                    cmd = [sys.executable, "-m", "reprobook.core.fixtures", str(root), ch.slug]
                    done = subprocess.run(cmd + finds, capture_output=True, text=True)
                    if done.returncode != 0:
                        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
                        why = lines[-1] if lines else f"exit status {done.returncode}"
                        broken.append(f"  chapter {ch.number} {ch.slug}: {why}")
                        continue
            missing[f"chapter {ch.number} {ch.slug}"] = missing_inputs(
                res, params, notebooks[ch.slug], profile, root, ch.slug
            )
    message = missing_message(profile, missing)
    if broken:
        head = "the smoke profile's fixtures could not be built; nothing was run:"
        message = "\n".join([message, head, *broken] if message else [head, *broken])
    return message


def run(
    chapter_keys: list[str] | None = None,
    profile: str = "reduced",
    overrides: dict[str, Any] | None = None,
    jobs: int = 2,
    force: bool = False,
    root: Path | None = None,
    timeout: float | None = 3600,
    progress: bool = True,
    echo=print,
    tag: str | None = None,
    executor: str = "local",
    slurm_options: Any = None,
    wait: bool = True,
    dry_run: bool = False,
    warm_kernels: bool = False,
) -> RunSummary:
    """Execute the chosen chapters' notebooks (all chapters by default); see the module doc.
    ``tag`` (default: ``seedN`` for a seed other than 0) keeps the run's outputs apart.
    ``executor="slurm"`` submits one Slurm job per chapter instead (:mod:`reprobook.slurm`);
    ``wait=False`` returns once they are submitted. ``dry_run`` executes and submits nothing:
    it prints each Slurm job's batch script (no Slurm needed), or, run locally, the notebooks
    that would execute. Every option and override is checked before anything runs.
    ``warm_kernels`` forks the local kernels from a :class:`~reprobook.kernels.KernelServer`
    (where one can start; ordinary kernels otherwise) and then records no peak memory, since a
    forked kernel is outside the process tree that is measured."""
    if executor not in ("local", "slurm"):
        raise RunError(f"unknown executor {executor!r}; valid: local, slurm")
    if warm_kernels and executor != "local":
        raise RunError(
            "--warm-kernels forks kernels on this machine: it runs with the local executor only"
        )
    check_options(jobs=jobs, timeout=timeout)
    root = root or book_root()
    chapters = select_chapters(root, chapter_keys)
    # converted before the tag is named from them: `-p seed=abc` never makes a `seedabc` folder
    overrides = check_overrides(root, chapters, overrides or {})
    tag = check_tag(default_tag(overrides) if tag is None else tag)
    todo = plan(root, chapters, profile, overrides, force, tag)
    summary = RunSummary(profile=profile, jobs=todo, tag=tag)
    pending = [j for j in todo if j.status == "pending"]
    to_run: dict[str, set[str]] = {}
    for job in pending:
        to_run.setdefault(job.chapter, set()).add(Path(job.notebook).stem)
    lacking = preflight(root, chapters, to_run, profile, overrides)
    if lacking and not dry_run:
        raise RunError(lacking)
    if lacking:
        echo(lacking)
    cached = len(todo) - len(pending)
    where = f" (tag {tag}: {build_dir(root, tag).relative_to(root)})" if tag else ""
    echo(
        f"{len(todo)} notebook(s) at profile {profile}{where}: {len(pending)} to execute, "
        f"{cached} unchanged since their last run"
    )
    if executor == "slurm":
        return _run_slurm(
            root, summary, pending, timeout, slurm_options, wait, dry_run, progress, echo
        )
    if dry_run:
        for job in pending:
            given = {k: v for k, v in job.params.items() if k != "profile"}
            shown = " ".join(f"-p {k}={v!r}" for k, v in given.items())
            echo(f"would execute {job.notebook}" + (f" with {shown}" if shown else ""))
        return summary
    n_chapters = len({j.chapter for j in pending})
    env = kernel_env(root, profile, min(jobs, max(n_chapters, 1)), tag)
    results_of = lambda job: (
        tag_results_dir(root, tag) / profile / job.chapter / f"{Path(job.notebook).stem}.json"
    )  # noqa: E731
    for (
        job
    ) in pending:  # a notebook that runs again starts from no results: nothing stale survives it
        results_of(job).unlink(missing_ok=True)
    bar = None
    if progress and pending:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), unit="nb", desc=f"run {profile}", file=sys.stderr)
    lock = threading.Lock()

    def finished(job: Job) -> None:
        with lock:
            update_state(root, profile, tag, job, results_of(job))
            if bar is not None:
                bar.set_postfix_str(f"{Path(job.notebook).name} {job.status}")
                bar.update(1)

    def run_chapter(chapter_jobs: list[Job]) -> None:
        # A chapter's notebooks run one after another, in order: a later notebook may read what
        # an earlier one wrote (a checkpoint, the chapter's claims so far). Chapters run in
        # parallel.
        for job in chapter_jobs:
            # a forked kernel is not in the process tree whose memory would be measured
            job = _execute(job, root, env, timeout, measure_memory=not warm)
            finished(job)

    by_chapter = longest_first(pending, load_state(root, profile, tag))
    warm = False
    with contextlib.ExitStack() as stack:
        if warm_kernels and pending:
            from .kernels import KernelServer

            server = stack.enter_context(KernelServer(env))
            if server.failure:
                echo(f"ordinary kernels: {server.failure}")
            env = {**env, **server.env()}
            warm = server.address is not None
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            for fut in [pool.submit(run_chapter, chapter_jobs) for chapter_jobs in by_chapter]:
                fut.result()
    if bar is not None:
        bar.close()
    summary.manifest = write_manifest(root, summary)
    return summary


def longest_first(pending: list[Job], state: dict[str, Any]) -> list[list[Job]]:
    """The pending jobs grouped by chapter (in their order within it), the chapters ordered by
    how long they are expected to take, longest first, so that the parallel workers finish
    together instead of one waiting on a long chapter started last. A notebook is expected to
    take its last successful run's wall time in ``state``, or, never run, the mean of those
    known (1 s when none is: the chapters are then ordered by their number of notebooks). Ties
    keep the book's order."""
    by_chapter: dict[str, list[Job]] = {}
    for job in pending:
        by_chapter.setdefault(job.chapter, []).append(job)
    walls = {
        j.notebook: float(state[j.notebook]["wall_s"])
        for j in pending
        if isinstance(state.get(j.notebook), dict)
        and isinstance(state[j.notebook].get("wall_s"), (int, float))
    }
    unknown = sum(walls.values()) / len(walls) if walls else 1.0

    def expected(chapter_jobs: list[Job]) -> float:
        return sum(walls.get(j.notebook, unknown) for j in chapter_jobs)

    return sorted(by_chapter.values(), key=expected, reverse=True)


def _run_slurm(
    root: Path,
    summary: RunSummary,
    pending: list[Job],
    timeout: float | None,
    options: Any,
    wait: bool,
    dry_run: bool,
    progress: bool,
    echo,
) -> RunSummary:
    from . import slurm

    profile, tag = summary.profile, summary.tag
    folder = build_dir(root, tag) / "slurm" / profile
    options = options or slurm.load_options(root)
    by_chapter: dict[str, list[Job]] = {}
    for job in pending:
        by_chapter.setdefault(job.chapter, []).append(job)
    if dry_run:  # needs no Slurm: a laptop prints what the cluster would be sent
        for slug, jobs in by_chapter.items():
            needs = slurm.chapter_resources(root, slug, profile).describe()
            echo(f"# chapter {slug}: {len(jobs)} notebook(s); needs {needs}")
            echo(slurm.batch_script(root, folder, slug, profile, options))
        if not by_chapter:
            echo("nothing to submit: every notebook is unchanged since its last run (--force)")
        return summary
    if by_chapter:  # before their results are removed below: without Slurm, nothing is lost
        slurm.require_slurm()
    queued = {
        slug: e
        for slug, e in slurm._load_registry(folder).items()
        if slug in by_chapter and slurm.job_state(e["job_id"]) not in (*slurm.FINISHED, "GONE")
    }
    for slug, entry in queued.items():
        echo(
            f"chapter {slug}: Slurm job {entry['job_id']} is still queued or running; "
            "not submitted again"
        )
        del by_chapter[slug]
    # a notebook that runs again starts from no results: nothing stale survives it (only in the
    # chapters submitted now: a queued or running job still owns its chapter's results)
    for job in pending:
        if job.chapter in by_chapter:
            stem = Path(job.notebook).stem
            (tag_results_dir(root, tag) / profile / job.chapter / f"{stem}.json").unlink(
                missing_ok=True
            )
    if by_chapter:
        slurm.submit(root, profile, tag, by_chapter, timeout, options, folder, echo)
    if not wait:
        summary.waiting = sorted(set(by_chapter) | set(queued))
        echo("not waiting: `reprobook run --collect` gathers the jobs when they have finished")
        return summary
    return collect_slurm(
        root, profile, tag, wait=True, progress=progress, echo=echo, summary=summary
    )


def collect_slurm(
    root: Path | None = None,
    profile: str = "reduced",
    tag: str = "",
    wait: bool = False,
    progress: bool = False,
    echo=print,
    summary: RunSummary | None = None,
) -> RunSummary:
    """Gather the Slurm jobs of a run: the notebooks they ran (with their job ids) go into the
    manifest; each job that failed, was cancelled or pre-empted is reported with its log."""
    from . import slurm

    root = root or book_root()
    folder = build_dir(root, tag) / "slurm" / profile
    got = slurm.collect(folder, wait=wait, echo=echo, progress=progress)
    if summary is None and not (got.records or got.failures or got.pending):
        # `--collect` with nothing submitted: the last run's manifest stays as it is
        echo(f"no Slurm jobs to collect at profile {profile}" + (f", tag {tag}" if tag else ""))
        return RunSummary(profile=profile, tag=tag)
    if summary is None:
        summary = RunSummary(profile=profile, tag=tag)
    by_nb = {j.notebook: j for j in summary.jobs}
    for record in got.records:
        job = Job(**record)
        if job.notebook in by_nb:
            by_nb[job.notebook].__dict__.update(asdict(job))
        else:
            summary.jobs.append(job)
    summary.failures += got.failures
    summary.waiting = got.pending
    if got.pending:
        echo(f"still queued or running: {', '.join(got.pending)}")
    summary.manifest = write_manifest(root, summary)
    return summary


def write_manifest(root: Path, summary: RunSummary) -> Path:
    """``_build/runs/<profile>/manifest.json`` (the latest run) plus a timestamped copy."""
    stamp = _dt.datetime.now(_dt.timezone.utc)
    manifest = {
        "profile": summary.profile,
        "tag": summary.tag,
        "finished": stamp.isoformat(timespec="seconds"),
        "load_average": {"start": list(summary.load_at_start), "end": list(os.getloadavg())},
        **runtime_facts(root),
        "notebooks": [asdict(j) for j in summary.jobs],
    }
    folder = build_dir(root, summary.tag) / "runs" / summary.profile
    text = json.dumps(manifest, indent=2) + "\n"
    atomic_write_text(folder / f"{stamp.strftime('%Y%m%dT%H%M%SZ')}.json", text)
    latest = folder / "manifest.json"
    atomic_write_text(latest, text)
    return latest


def format_summary(summary: RunSummary, slowest: int = 5) -> str:
    lines = []
    width = max([len(j.notebook) for j in summary.jobs] + [8])
    lines.append(f"{'notebook':<{width}}  {'status':<7}  {'wall s':>7}  {'peak MB':>8}")
    for j in summary.jobs:
        wall = f"{j.wall_s:.1f}" if j.wall_s is not None else "-"
        peak = f"{j.peak_mb:.0f}" if j.peak_mb is not None else "-"
        lines.append(f"{j.notebook:<{width}}  {j.status:<7}  {wall:>7}  {peak:>8}")
    timed = sorted((j for j in summary.jobs if j.wall_s is not None), key=lambda j: -j.wall_s)[
        :slowest
    ]
    if timed:
        lines.append(
            "slowest: " + ", ".join(f"{Path(j.notebook).name} {j.wall_s:.1f} s" for j in timed)
        )
    for j in summary.failed:
        lines.append(f"FAILED {j.notebook}: {j.error}  (partial output: {j.output})")
    lines += [f"FAILED {line}" for line in summary.failures]
    if summary.waiting:
        lines.append(f"waiting on Slurm: {', '.join(summary.waiting)}")
    if summary.manifest:
        lines.append(f"manifest: {summary.manifest}")
    return "\n".join(lines)
