"""Build the HTML book from the executed notebooks of the last run, with no second execution.

The build copies the book's sources into ``_build/stage`` (notebooks replaced by their executed
copies from ``_build/executed/<profile>``), fills in the generated parts (the ledger page and
each chapter's status box) and runs Jupyter Book 1 with warnings as errors. Launch links keep
pointing at the source notebooks: the staged copies sit at the same relative paths.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .core.chapters import VERDICT_LABELS, find_chapters
from .core.paths import book_root
from . import ledger

STATUS_MARK = "<!-- reprobook:status -->"
LEDGER_MARK = "<!-- reprobook:ledger -->"
BOOK_SOURCES = ("_config.yml", "_toc.yml", "book", "notebooks")


class BuildError(RuntimeError):
    """The book cannot be built: missing executed notebooks, or Sphinx warnings."""


def _run_facts(root: Path, profile: str) -> str:
    manifest = root / "_build" / "runs" / profile / "manifest.json"
    if not manifest.exists():
        return f"No run manifest at the {profile} profile was found."
    m = json.loads(manifest.read_text())
    hw = m.get("hardware", {})
    gpus = ", ".join(hw.get("gpus") or []) or "no GPU"
    pk = m.get("packages", {})
    return (f"Last run finished {m.get('finished')} at commit `{m.get('git_commit')}` on {hw.get('cpu')} "
            f"({hw.get('cores')} cores, {hw.get('memory_gib')} GiB, {gpus}); Python {m.get('python')}, "
            f"torch {pk.get('torch')}, numpy {pk.get('numpy')}, scipy {pk.get('scipy')}.")


def status_box(rows: list[dict], profile: str) -> str:
    """The admonition that opens a chapter: each claim's verdict, our value and the paper's.

    The verdict comes first and the metric is left out: metrics can run to several lines, and a
    wide table hid the verdict column off the right edge of the page. The chapter's "What this
    chapter checks" section and the ledger page give each metric in full."""
    n_rep = sum(r["verdict"] == "reproduced" for r in rows)
    table = ledger.markdown_table(
        ["claim", "verdict", "ours", "paper"],
        [[r["claim"], VERDICT_LABELS[r["verdict"]], ledger.value_cell(r["value"]), r["paper_value"]]
         for r in rows])
    overridden = sorted({ledger.run_cell(r) for r in rows if r.get("overrides")})
    note = f" Some values were measured with overridden parameters: {'; '.join(overridden)}." if overridden else ""
    return "\n".join([
        f"```{{admonition}} Status at the {profile} profile: {n_rep} of {len(rows)} claims reproduced",
        ":class: tip", "", table, "",
        "The verdicts are computed from each claim's check in `claims.yml`; the "
        f"[claims ledger](ledger-page) gathers every chapter.{note}", "```"])


def ledger_page(root: Path, profile: str) -> str:
    """The ledger page's body: the totals, the run's facts, and one table per chapter."""
    rows = ledger.collect(profile, root)
    c = ledger.counts(rows)
    summary = ", ".join(f"{n} {VERDICT_LABELS[v]}" for v, n in c.items() if n)
    parts = [f"**{len(rows)} claims at the {profile} profile:** {summary}.", _run_facts(root, profile)]
    for ch in find_chapters(root):
        mine = [r for r in rows if r["chapter"] == ch.slug]
        index = f"/{ch.folder.relative_to(root).as_posix()}/index"
        table = ledger.markdown_table(
            ["claim", "statement", "metric", "paper", "ours", "verdict", "run", "seed"],
            [[r["claim"], r["statement"], r["metric"], r["paper_value"], ledger.value_cell(r["value"]),
              VERDICT_LABELS[r["verdict"]], ledger.run_cell(r), "" if r["seed"] is None else r["seed"]] for r in mine])
        parts.append(f"## {ch.number} {ch.slug}: {{doc}}`{ch.title} <{index}>`\n\n{table}")
    return "\n\n".join(parts)


def stage(root: Path, profile: str, source_only: bool) -> Path:
    """Copy the book into ``_build/stage`` with executed notebooks and generated pages
    (``_build/stage-check`` with the committed notebooks when ``source_only``)."""
    target = root / "_build" / ("stage-check" if source_only else "stage")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in BOOK_SOURCES:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, target / name, ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"))
        elif src.exists():
            shutil.copy2(src, target / name)
    missing = []
    executed = root / "_build" / "executed" / profile
    for nb in sorted((root / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        rel = nb.relative_to(root)
        src = nb if source_only else executed / rel
        if not src.exists():
            missing.append(str(rel))
            continue
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target / rel)
    if missing:
        raise BuildError(f"no executed copy of {', '.join(missing)} at the {profile} profile: "
                         f"run `reprobook run --profile {profile}` first")
    rows = ledger.collect(profile, root)
    for ch in find_chapters(root):
        index = target / ch.folder.relative_to(root) / "index.md"
        if index.exists():
            text = index.read_text(encoding="utf-8")
            mine = [r for r in rows if r["chapter"] == ch.slug]
            index.write_text(text.replace(STATUS_MARK, status_box(mine, profile)), encoding="utf-8")
    page = target / "book" / "ledger.md"
    if page.exists():
        page.write_text(page.read_text(encoding="utf-8").replace(LEDGER_MARK, ledger_page(root, profile)),
                        encoding="utf-8")
    return target


def build(profile: str = "reduced", source_only: bool = False, root: Path | None = None) -> Path:
    """Stage and build; returns the path of the HTML entry page. Raises BuildError on any
    Sphinx warning (the log names it). A ``source_only`` build (the test suite's check of the
    book's structure) goes to ``_build/site-check`` and never replaces the rendered book."""
    root = root or book_root()
    staged = stage(root, profile, source_only)
    out = root / "_build" / ("site-check" if source_only else "site")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(staged), "--path-output", str(out),
           "-W", "--keep-going", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise BuildError(f"jupyter-book failed (warnings are errors):\n{tail}")
    return out / "_build" / "html" / "index.html"
