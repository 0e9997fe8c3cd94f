"""``reprobook times``: how long the book takes, notebook by notebook, against its budgets.

It reads a run's manifest (each notebook's wall time, kernel start included, and peak memory)
and its executed notebooks (papermill's duration of every cell), and reports each notebook's
wall time, peak memory and import time: the seconds its code cells take up to and including
the set-up cell (``core.start``), that is, before its first line of work. ``make bench`` runs
the book cold (no checkpoints, every notebook executed) two notebooks at a time and then this
report. It is a benchmark, not a test: the figures depend on the machine and on what else runs
on it, which is why the report prints the load averages beside them.

Imports no paper package."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .core.paths import build_dir

# The budgets of the reduced profile on 2 cores, two notebooks at a time, cold cache.
BUDGETS = {
    "sum_s": 1500.0,  # the notebooks' wall times added up
    "notebook_s": 60.0,  # any one notebook, kernel start included
    "import_s": 3.0,  # any one notebook's imports and set-up, before its first line of work
}


@dataclass(frozen=True)
class NotebookTime:
    notebook: str  # the notebook's path under the book
    status: str  # ok | failed | ...
    wall_s: float | None  # kernel start to the last cell
    peak_mb: float | None  # peak resident memory of the kernel
    import_s: float | None  # code cells up to and including the set-up cell


def import_seconds(executed: Path) -> float | None:
    """The seconds an executed notebook's code cells took up to and including the one that
    calls ``core.start`` (papermill's per-cell durations); None when it has none recorded."""
    try:
        nb = json.loads(Path(executed).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    total, seen = 0.0, False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        duration = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if duration is None:
            return None
        total += float(duration)
        seen = True
        if "core.start(" in "".join(cell.get("source", "")):
            return total
    return total if seen else None


def read_times(root: Path, profile: str = "reduced", tag: str = "") -> tuple[dict, list]:
    """The manifest of the last run at ``profile`` (and ``tag``) and each notebook's times.
    Raises FileNotFoundError naming the manifest when there has been no such run."""
    manifest = build_dir(root, tag) / "runs" / profile / "manifest.json"
    if not manifest.exists():
        raise FileNotFoundError(
            f"no run to report: {manifest} does not exist (run `reprobook run"
            f"{' --tag ' + tag if tag else ''}` or `make bench` first)"
        )
    data = json.loads(manifest.read_text(encoding="utf-8"))
    rows = []
    for job in data.get("notebooks", []):
        output = job.get("output")
        rows.append(
            NotebookTime(
                notebook=job["notebook"].removeprefix("notebooks/"),
                status=job.get("status", "?"),
                wall_s=job.get("wall_s"),
                peak_mb=job.get("peak_mb"),
                import_s=import_seconds(Path(root) / output) if output else None,
            )
        )
    return data, rows


def report(data: dict, rows: list[NotebookTime], slowest: int = 10) -> tuple[str, list[str]]:
    """The report's text and the budgets it exceeds (each as a sentence)."""
    width = max([len(r.notebook) for r in rows] + [8])

    def num(x, fmt):
        return format(x, fmt) if x is not None else "-"

    lines = [
        f"{'notebook':<{width}}  {'status':<7}  {'wall s':>7}  {'import s':>8}  {'peak MB':>8}"
    ]
    for r in rows:
        lines.append(
            f"{r.notebook:<{width}}  {r.status:<7}  {num(r.wall_s, '7.1f')}  "
            f"{num(r.import_s, '8.1f')}  {num(r.peak_mb, '8.0f')}"
        )
    walls = [r.wall_s for r in rows if r.wall_s is not None]
    total = sum(walls)
    lines.append("")
    lines.append(f"{len(rows)} notebooks, wall times summed: {total:.0f} s")
    ranked = sorted((r for r in rows if r.wall_s is not None), key=lambda r: -r.wall_s)
    lines.append(
        "slowest: " + ", ".join(f"{r.notebook} {r.wall_s:.0f} s" for r in ranked[:slowest])
    )
    load = data.get("load_average") or {}
    if load:
        fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)  # noqa: E731
        lines.append(
            f"load average (1, 5, 15 min): {fmt(load.get('start', []))} at the start, "
            f"{fmt(load.get('end', []))} at the end; cores: "
            f"{(data.get('hardware') or {}).get('cores', '?')}"
        )
    lines.append(f"commit {data.get('git_commit', '?')}, finished {data.get('finished', '?')}")
    over: list[str] = []
    if total > BUDGETS["sum_s"]:
        over.append(f"the wall times sum to {total:.0f} s, over {BUDGETS['sum_s']:.0f} s")
    slow = [r for r in ranked if r.wall_s > BUDGETS["notebook_s"]]
    if slow:
        names = ", ".join(f"{r.notebook} ({r.wall_s:.0f} s)" for r in slow)
        over.append(f"{len(slow)} notebook(s) over {BUDGETS['notebook_s']:.0f} s: {names}")
    heavy = sorted(
        (r for r in rows if r.import_s is not None and r.import_s > BUDGETS["import_s"]),
        key=lambda r: -r.import_s,
    )
    if heavy:
        names = ", ".join(f"{r.notebook} ({r.import_s:.1f} s)" for r in heavy[:slowest])
        more = f" and {len(heavy) - slowest} more" if len(heavy) > slowest else ""
        over.append(
            f"{len(heavy)} notebook(s) import for over {BUDGETS['import_s']:.0f} s: {names}{more}"
        )
    failed = [r.notebook for r in rows if r.status != "ok"]
    if failed:
        over.append(f"{len(failed)} notebook(s) did not finish: {', '.join(failed)}")
    lines.append("")
    lines.append(
        "budgets (sum, each notebook, imports): "
        + ("all met" if not over else "over:\n  - " + "\n  - ".join(over))
    )
    return "\n".join(lines), over
