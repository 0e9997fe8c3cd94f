"""Build the HTML book from the executed notebooks of the last run, with no second execution.

The build copies the book's sources into ``_build/stage`` (notebooks replaced by their executed
copies from ``_build/executed/<profile>``), fills in the generated parts (the ledger page and
each chapter's status box) and runs Jupyter Book 1 with warnings as errors. Launch links keep
pointing at the source notebooks: the staged copies sit at the same relative paths.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import ledger
from .core.chapters import (
    BASES,
    BASIS_MEANINGS,
    VERDICT_LABELS,
    VERDICT_MEANINGS,
    VERDICTS,
    find_chapters,
)
from .core.claims import format_value
from .core.paths import book_root

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
    return (
        f"Last run finished {m.get('finished')} at commit `{m.get('git_commit')}` "
        f"on {hw.get('cpu')} "
        f"({hw.get('cores')} cores, {hw.get('memory_gib')} GiB, {gpus}); Python {m.get('python')}, "
        f"torch {pk.get('torch')}, numpy {pk.get('numpy')}, scipy {pk.get('scipy')}."
    )


STALE_HTML = '<span style="color:#c62828;font-weight:bold">STALE</span>'


def _verdict_html(row: dict[str, Any]) -> str:
    text = row.get("verdict_label") or VERDICT_LABELS[row["verdict"]]
    if row.get("revisions"):
        text += " (revised)"
    if row.get("stale"):
        text += " " + STALE_HTML
    return text


def _kind(row: dict[str, Any]) -> str:
    return f"{row.get('source', '')}, {row.get('evidence', '')}"


def _rests_on(row: dict[str, Any]) -> str:
    return {"own code": "our own code"}.get(row.get("basis", ""), row.get("basis", ""))


def _units_text(row: dict[str, Any]) -> str:
    """'each unit: cora 0.03 [0.01, 0.05] (reproduced); ...' for a claim decided per unit."""
    units = row.get("units") or {}
    if not units:
        return ""
    return (
        "each unit: "
        + "; ".join(
            f"{name} {ledger.value_cell(u.get('value'), u.get('interval'))}"
            + (f" ({VERDICT_LABELS[u['verdict']]})" if u.get("verdict") else "")
            for name, u in units.items()
        )
        + "."
    )


def stale_text(reasons: list[str]) -> str:
    """'claims.yml changed since the run; recorded without an interval'."""
    return "; ".join(
        f"{x} changed since the run" if x.endswith((".yml", ".ipynb")) else x for x in reasons
    )


def caveats(rows: list[dict[str, Any]]) -> str:
    """Each claim's source and evidence, its note, its revisions and interval method: the
    caveats a reader weighs a verdict with, one bullet per claim that has something to say."""
    items = []
    for r in rows:
        bits = [f"Rests on {BASIS_MEANINGS[r['basis']]}."] if r.get("basis") else []
        if r.get("interval_method"):
            bits.append(f"interval: {r['interval_method']}.")
        if _units_text(r):
            bits.append(_units_text(r))
        if r.get("note"):
            bits.append(r["note"])
        for text in r.get("revisions") or []:
            bits.append(f"*Revised check:* {text}")
        if r.get("stale"):
            bits.append(f"*Stale:* {stale_text(r['stale'])}.")
        items.append(f"- **{r['claim']}** ({_kind(r)}). " + " ".join(bits))
    return "\n".join(items)


def _add_archived_column(headers: list[str], body: list[list[Any]], rows: list[dict]) -> None:
    """A column with the archived full-profile run's verdict, value, machine and date, when
    any row has one (:func:`reprobook.ledger.attach_archived`)."""
    profiles = [r["archived"]["profile"] for r in rows if r.get("archived")]
    if profiles:
        headers.append(f"{profiles[0]} profile (archived run)")
        for line, r in zip(body, rows):
            line.append(ledger.archived_cell(r))


def status_box(rows: list[dict], profile: str) -> str:
    """The admonition that opens a chapter: each claim's verdict, our value (with its interval
    for a statistical claim) and the paper's, its source and kind of evidence, then the notes
    and revisions in a fold-out.

    The verdict comes first and the metric is left out: metrics can run to several lines, and a
    wide table hid the verdict column off the right edge of the page. The chapter's "What this
    chapter checks" section and the ledger page give each metric in full. The headline counts
    the paper's claims apart from our extensions and illustrations."""
    headers = ["claim", "verdict", "ours", "paper", "rests on", "note"]
    body = [
        [
            r["claim"],
            _verdict_html(r),
            ledger.value_cell(r["value"], r.get("interval")),
            r["paper_value"],
            _rests_on(r),
            r.get("note_first", ""),
        ]
        for r in rows
    ]
    _add_archived_column(headers, body, rows)
    table = ledger.markdown_table(headers, body)
    overridden = sorted({ledger.run_cell(r) for r in rows if r.get("overrides")})
    note = (
        f" Some values were measured with overridden parameters: {'; '.join(overridden)}."
        if overridden
        else ""
    )
    stand_ins = sorted(
        {
            f"{r['claim']}: {ledger.stand_in_text(r['stand_ins'])}"
            for r in rows
            if r.get("stand_ins")
        }
    )
    if stand_ins:
        note += " Measured with deliberate stand-ins for the paper's inputs: "
        note += "; ".join(stand_ins) + "."
    head = ledger.headline(rows).rstrip(".")
    return "\n".join(
        [
            f"````{{admonition}} Status at the {profile} profile. {head}",
            ":class: tip",
            "",
            table,
            "",
            "The verdicts are computed from each claim's check in `claims.yml`: "
            "a statistical claim by its "
            "interval (inconclusive when the interval straddles the bar), "
            "an illustration never decides. "
            '"Rests on" says what the evidence is: the paper\'s release or its method on its '
            "kind of data (the paper's terms), our reconstruction of what the paper only "
            "sketches, or our own simulation or code (an illustration, never counted as "
            "tested). "
            f'"(revised)" marks a check changed after a first result; the '
            f"[claims ledger](ledger-page) gathers every chapter.{note}",
            "",
            "```{admonition} What each verdict rests on, notes, revisions and intervals",
            ":class: dropdown",
            "",
            caveats(rows),
            "```",
            "````",
        ]
    )


PLACEHOLDER = re.compile(r"\[\[(?P<claim>[A-Za-z][\w-]*)(?:\.(?P<field>[\w.]+))?\]\]")


def fill_placeholders(text: str, rows: list[dict[str, Any]], where: str) -> str:
    """Replace ``[[C1]]`` (our value, with its interval), ``[[C1.verdict]]``,
    ``[[C1.paper]]``, ``[[C1.interval]]`` and ``[[C1.details.NAME]]`` (a recorded detail) with
    what the results say, so that prose never types a measured number or a verdict. A claim
    not yet run reads "(not run)"; an unknown claim or detail is an error naming what exists."""
    by_id = {r["claim"]: r for r in rows}

    def one(m: re.Match) -> str:
        cid, field = m["claim"], m["field"] or "value"
        if cid not in by_id:
            raise BuildError(
                f"{where}: {m[0]} names no claim of this chapter; its claims: {', '.join(by_id)}"
            )
        r = by_id[cid]
        if field == "verdict":
            return r.get("verdict_label") or VERDICT_LABELS[r["verdict"]]
        if field == "paper":
            return r["paper_value"]
        if r["value"] is None and not (field.startswith("details.") and r.get("details")):
            return "(not run)"
        if field == "value":
            return ledger.value_cell(r["value"], r.get("interval"))
        if field == "interval":
            iv = r.get("interval")
            if iv is None:
                raise BuildError(f"{where}: {m[0]}: claim {cid} was recorded without an interval")
            return f"[{iv[0]:.3g}, {iv[1]:.3g}]"
        if field.startswith("details."):
            value: Any = r.get("details") or {}
            for key in field.split(".")[1:]:
                if not isinstance(value, dict) or key not in value:
                    known = ", ".join(sorted(r.get("details") or {})) or "none"
                    raise BuildError(
                        f"{where}: {m[0]}: claim {cid} recorded no detail {field[8:]!r}; "
                        f"its details: {known}"
                    )
                value = value[key]
            return format_value(value) if not isinstance(value, (list, dict)) else json.dumps(value)
        raise BuildError(
            f"{where}: {m[0]}: unknown field {field!r}; valid: value, verdict, paper, interval, "
            "details.NAME"
        )

    return PLACEHOLDER.sub(one, text)


OVERVIEW_MARK = "<!-- reprobook:overview -->"
CHAPTERS_MARK = "<!-- reprobook:chapters -->"
VERDICTS_MARK = "<!-- reprobook:verdicts -->"


def verdicts_table() -> str:
    """Every verdict the core can give, with its label and meaning (``core.VERDICT_MEANINGS``),
    so the introduction never lists a verdict the code does not have, or misses one."""
    rows = ["| verdict | meaning |", "|---|---|"]
    rows += [f"| {VERDICT_LABELS[v]} | {VERDICT_MEANINGS[v]} |" for v in VERDICTS]
    return "\n".join(rows)


BASES_MARK = "<!-- reprobook:bases -->"


def bases_table() -> str:
    """What a verdict can rest on (``core.BASIS_MEANINGS``), and where the headline counts it,
    so the introduction never lists a basis the code does not have, or misses one."""
    where = {
        "release": "tested on the paper's terms",
        "method": "tested on the paper's terms",
        "reconstruction": "tested only on our reconstruction",
        "simulation": "illustrated, not tested",
        "own code": "illustrated, not tested",
    }
    rows = ["| rests on | meaning | counted as |", "|---|---|---|"]
    rows += [f"| {b} | {BASIS_MEANINGS[b]} | {where[b]} |" for b in BASES]
    return "\n".join(rows)


def hide_injected_parameters(src: Path, dest: Path) -> None:
    """Copy a notebook, tagging the cell papermill injected (the run's parameter values)
    ``remove-cell``: the rendered page shows the notebook's own parameters cell, with its
    defaults and comments; the values the run used are in the results and the ledger."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def chapters_table(root: Path, rows: list[dict[str, Any]]) -> str:
    """The introduction's list of the chapters the book holds now: number, title (linked),
    number of claims and the headline of each."""
    body = []
    for ch in find_chapters(root):
        mine = [r for r in rows if r["chapter"] == ch.slug]
        body.append(
            [
                ch.number,
                f"{{doc}}`{ch.title} </{ch.folder.relative_to(root).as_posix()}/index>`",
                len(ch.claims),
                ledger.headline(mine) if mine else "",
            ]
        )
    return ledger.markdown_table(["#", "chapter", "claims", "at this profile"], body)


OVERVIEW_FILE = "ledger_overview.png"


def overview_block(rows: list[dict[str, Any]], profile: str, name: str) -> str:
    """The figure that opens the introduction and the ledger page (drawn by :func:`stage`)."""
    return "\n".join(
        [
            f"```{{figure}} {OVERVIEW_FILE}",
            f":name: {name}",
            ":width: 100%",
            "",
            f"Every claim of the book at the {profile} profile, one row per chapter, "
            "coloured by verdict. "
            f"{ledger.headline(rows)}",
            "```",
        ]
    )


def claim_details(rows: list[dict[str, Any]]) -> str:
    """Each claim's statement, metric, source and evidence, note and revisions, for a fold-out."""
    items = []
    for r in rows:
        bits = [
            f"- **{r['claim']}** {r['statement']}",
            f"  *Measured:* {r['metric']}.",
            f"  *Rests on:* {BASIS_MEANINGS[r['basis']]}." if r.get("basis") else "",
            f"  *Source, evidence:* {_kind(r)}"
            + (f"; interval: {r['interval_method']}" if r.get("interval_method") else "")
            + ".",
        ]
        bits = [b for b in bits if b]
        if _units_text(r):
            bits.append(f"  *Per unit:* {_units_text(r)}")
        if r.get("note"):
            bits.append(f"  *Note:* {r['note']}")
        bits += [f"  *Revised check:* {text}" for text in r.get("revisions") or []]
        if r.get("stale"):
            bits.append(f"  *Stale:* {stale_text(r['stale'])}.")
        items.append("\n".join(bits))
    return "\n".join(items)


def ledger_page(root: Path, profile: str, rows: list[dict[str, Any]] | None = None) -> str:
    """The ledger page's body: the overview figure, the run's facts, and per chapter a compact
    table (claim, verdict, ours, paper; each claim linked to the notebook that records it) with
    the statements, metrics, notes and revisions in a fold-out below it."""
    if rows is None:
        rows = ledger.collect(profile, root)
        if profile != "full":
            rows = ledger.attach_archived(rows, root)
    parts = [
        overview_block(rows, profile, "ledger-overview"),
        f"**{len(rows)} claims at the {profile} profile.** {ledger.headline(rows)}",
        _run_facts(root, profile),
    ]
    for ch in find_chapters(root):
        mine = [r for r in rows if r["chapter"] == ch.slug]
        folder = f"/{ch.folder.relative_to(root).as_posix()}"
        headers = ["claim", "verdict", "ours", "paper", "rests on", "note", "run"]
        body = [
            [
                f"{{doc}}`{r['claim']} <{folder}/{r['notebook']}>`",
                _verdict_html(r),
                ledger.value_cell(r["value"], r.get("interval")),
                r["paper_value"],
                _rests_on(r),
                r.get("note_first", ""),
                ledger.run_cell(r) + ("" if r["seed"] is None else f", seed {r['seed']}"),
            ]
            for r in mine
        ]
        _add_archived_column(headers, body, mine)
        table = ledger.markdown_table(headers, body)
        notes = "\n".join(
            [
                "```{admonition} Statements, metrics, what each rests on, notes and revisions",
                ":class: dropdown",
                "",
                claim_details(mine),
                "```",
            ]
        )
        parts.append(
            f"## {ch.number} {ch.slug}: {{doc}}`{ch.title} <{folder}/index>`\n\n"
            f"{ledger.headline(mine)}\n\n"
            f"{table}\n\n{notes}"
        )
    return "\n\n".join(parts)


def stage(root: Path, profile: str, source_only: bool, allow_stale: bool = False) -> Path:
    """Copy the book into ``_build/stage`` with executed notebooks and generated pages
    (``_build/stage-check`` with the committed notebooks when ``source_only``). Results
    produced under another claims file or notebook than the current one are refused, unless
    ``allow_stale``, when they are shown marked STALE."""
    target = root / "_build" / ("stage-check" if source_only else "stage")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in BOOK_SOURCES:
        src = root / name
        if src.is_dir():
            shutil.copytree(
                src,
                target / name,
                ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"),
            )
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
        hide_injected_parameters(src, target / rel)
    if missing:
        raise BuildError(
            f"no executed copy of {', '.join(missing)} at the {profile} profile: "
            f"run `reprobook run --profile {profile}` first"
        )
    rows = ledger.collect(profile, root)
    if profile != "full":
        rows = ledger.attach_archived(rows, root)
    stale = [f"{r['chapter']} {r['claim']}" for r in rows if r.get("stale")]
    if stale and not allow_stale:
        raise BuildError(
            f"results of {', '.join(stale)} were produced under an earlier claims.yml or notebook "
            "(or record a statistical claim without its interval): "
            f"run `reprobook run --profile {profile}` again "
            "(or build with --allow-stale to show them "
            "marked STALE)"
        )
    for ch in find_chapters(root):
        index = target / ch.folder.relative_to(root) / "index.md"
        if index.exists():
            text = index.read_text(encoding="utf-8")
            mine = [r for r in rows if r["chapter"] == ch.slug]
            text = fill_placeholders(
                text.replace(STATUS_MARK, status_box(mine, profile)),
                mine,
                str(ch.folder.relative_to(root) / "index.md"),
            )
            index.write_text(text, encoding="utf-8")
    ledger.overview_figure(rows, target / "book" / OVERVIEW_FILE)
    page = target / "book" / "ledger.md"
    if page.exists():
        page.write_text(
            page.read_text(encoding="utf-8").replace(LEDGER_MARK, ledger_page(root, profile, rows)),
            encoding="utf-8",
        )
    intro = target / "book" / "intro.md"
    if intro.exists():
        text = intro.read_text(encoding="utf-8").replace(
            OVERVIEW_MARK, overview_block(rows, profile, "intro-overview")
        )
        text = text.replace(CHAPTERS_MARK, chapters_table(root, rows))
        intro.write_text(
            text.replace(VERDICTS_MARK, verdicts_table()).replace(BASES_MARK, bases_table()),
            encoding="utf-8",
        )
    return target


def build(
    profile: str = "reduced",
    source_only: bool = False,
    root: Path | None = None,
    allow_stale: bool = False,
) -> Path:
    """Stage and build; returns the path of the HTML entry page. Raises BuildError on any
    Sphinx warning (the log names it). A ``source_only`` build (the test suite's check of the
    book's structure) goes to ``_build/site-check`` and never replaces the rendered book."""
    root = root or book_root()
    staged = stage(root, profile, source_only, allow_stale)
    out = root / "_build" / ("site-check" if source_only else "site")
    if (
        out.exists()
    ):  # a clean build: Sphinx's incremental one keeps pages an extension has since changed
        shutil.rmtree(out)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [
        str(jb) if jb.exists() else "jupyter-book",
        "build",
        str(staged),
        "--path-output",
        str(out),
        "-W",
        "--keep-going",
        "--quiet",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise BuildError(f"jupyter-book failed (warnings are errors):\n{tail}")
    return out / "_build" / "html" / "index.html"
