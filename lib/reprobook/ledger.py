"""The claims ledger: every claim of every chapter with what the last run measured.

The verdict of each row comes from the claim's check in its chapter's ``claims.yml`` applied
to the recorded value (and, for a statistical claim, its interval); nothing here is typed by
hand. Each row carries what a reader needs to weigh the verdict: the claim's source, its kind
of evidence, its note, its revisions, and whether the result is stale (produced under another
claims file or notebook than the current one). It reads claims files and results files, never
a paper package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .core.chapters import (
    VERDICT_LABELS,
    Claim,
    find_chapters,
    recorded_verdict,
    unit_verdicts,
)
from .core.claims import deciding_unit, format_estimate, load_records, verdict_label
from .core.paths import book_root

EVIDENCE_SHORT = {"exact": "exact", "statistical": "stat.", "illustration": "illus."}


def revision_text(claim: Claim) -> list[str]:
    """One line per revision: the earlier check or metric, what it gave, and why it changed."""
    out = []
    for r in claim.revisions:
        before = []
        if r.check is not None:
            before.append(f"check {json.dumps(r.check, separators=(', ', ': '))}")
        if r.metric is not None:
            before.append(f"metric '{r.metric}'")
        when = f" ({r.date})" if r.date else ""
        out.append(f"was {' and '.join(before)}{when}; it gave {r.gave}. Changed because {r.why}")
    return out


def collect(
    profile: str = "reduced", root: Path | None = None, results: Path | None = None
) -> list[dict[str, Any]]:
    """One row per claim of every chapter, at ``profile``, from the results folder ``results``
    (default: the book's; a tagged run's is ``runner.tag_results_dir(root, tag)``)."""
    root = root or book_root()
    rows = []
    for ch in find_chapters(root):
        records = load_records(ch, profile, root, results)
        for c in ch.claims:
            rec = records.get(c.id, {})
            value, interval = rec.get("value"), rec.get("interval")
            verdict, problems = recorded_verdict(c, value, profile, interval, rec.get("units"))
            units = rec.get("units") or {}
            try:
                by_unit = unit_verdicts(c, units, profile) if units else {}
            except ValueError:
                by_unit = {}
            if by_unit and set(by_unit) == set(c.units) and verdict in by_unit.values():
                # the value shown is the deciding unit's, chosen by the current rule
                deciding = deciding_unit(c, units, by_unit, verdict, profile)
                value, interval = units[deciding]["value"], units[deciding]["interval"]
            facts = rec.get("facts", {})
            rows.append(
                {
                    "chapter": ch.slug,
                    "number": ch.number,
                    "title": ch.title,
                    "claim": c.id,
                    "statement": c.claim,
                    "metric": c.metric,
                    "paper_value": c.paper_value,
                    "source": c.source,
                    "basis": c.basis,
                    "group": c.group,
                    "evidence": c.evidence,
                    "papers": c.is_papers,
                    "note": c.note,
                    "note_first": first_sentence(c.note),
                    "revisions": revision_text(c),
                    "value": value,
                    "interval": interval,
                    "interval_method": rec.get("interval_method"),
                    "verdict": verdict,
                    "verdict_label": verdict_label(verdict, c),
                    "units": {
                        name: {**u, "verdict": by_unit.get(name)} for name, u in units.items()
                    },
                    "replicates": c.replicates,
                    "aggregate": c.aggregate,
                    "baseline": c.baseline,
                    "profile": profile,
                    "has_partial": "partial" in c.check_for(profile),
                    "seed": rec.get("seed"),
                    "overrides": rec.get("overrides", {}),
                    "stand_ins": rec.get("stand_ins", {}),
                    "notebook": c.notebook,
                    "stale": rec.get("stale", []) + problems,
                    "details": rec.get("details", {}),
                    "commit": facts.get("git_commit"),
                    "hardware": facts.get("hardware"),
                }
            )
    return rows


def first_sentence(text: str) -> str:
    """The note's first sentence (up to the first full stop followed by a space)."""
    text = " ".join(str(text or "").split())
    for i, ch in enumerate(text):
        if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            # not the full stop of an abbreviation or a number such as "e.g." or "0.5"
            if text[max(0, i - 3) : i + 1].lower().endswith(("e.g.", "i.e.", "vs.", "cf.")):
                continue
            return text[: i + 1]
    return text


def value_cell(value: Any, interval: Any = None) -> str:
    return format_estimate(value, interval) if value is not None else ""


def row_value(row: dict[str, Any]) -> str:
    return value_cell(row.get("value"), row.get("interval"))


def verdict_cell(row: dict[str, Any]) -> str:
    """The verdict's label, marked when the check was revised or the result is stale."""
    text = row.get("verdict_label") or VERDICT_LABELS[row["verdict"]]
    if row.get("revisions"):
        text += " (revised check)"
    if row.get("stale"):
        text += " [STALE]"
    return text


def stand_in_text(stand_ins: dict[str, Any] | None) -> str:
    """``"stand-in llm=emulated"``: the deliberate stand-ins a run chose, or ``""``."""
    if not stand_ins:
        return ""
    return "stand-in " + ", ".join(f"{k}={v}" for k, v in sorted(stand_ins.items()))


def run_cell(row: dict[str, Any]) -> str:
    """The profile, with any parameter the runner overrode and any deliberate stand-in it
    chose (``reduced (n_instances=5)``, ``full (stand-in llm=emulated)``)."""
    extra = [f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items())]
    extra += [stand_in_text(row.get("stand_ins"))] if row.get("stand_ins") else []
    return f"{row['profile']} ({', '.join(extra)})" if extra else row["profile"]


def machine_text(hardware: dict[str, Any] | None) -> str:
    """``"1 GPU (NVIDIA H100), 16 cores"`` from a result's hardware facts."""
    hw = hardware or {}
    gpus = hw.get("gpus") or []
    gpu = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({', '.join(sorted(set(gpus)))})"
    return f"{gpu if gpus else 'no GPU'}, {hw.get('cores', '?')} cores"


def attach_archived(
    rows: list[dict[str, Any]], root: Path | None = None, profile: str = "full"
) -> list[dict[str, Any]]:
    """Add to each row whose chapter has an archived run at ``profile`` (see
    :mod:`reprobook.archive`) an ``archived`` entry: that run's verdict under the claim's
    current check, its value, where and when it ran, and whether it is stale (the claims
    file or the notebook changed since). Rows of ``profile`` itself are left as they are."""
    from .archive import archive_dir, read_manifest

    root = root or book_root()
    manifests = {}
    for slug in {r["chapter"] for r in rows if r["profile"] != profile}:
        manifest = read_manifest(root, profile, slug)
        if manifest is not None:
            manifests[slug] = manifest
    if not manifests:
        return rows
    archived = {
        (r["chapter"], r["claim"]): r
        for r in collect(profile, root, results=archive_dir(root))
        if r["chapter"] in manifests
    }
    for r in rows:
        a = archived.get((r["chapter"], r["claim"]))
        if a is None or r["profile"] == profile:
            continue
        m = manifests[r["chapter"]]
        started = [n.get("started") or "" for n in m.get("notebooks", [])]
        r["archived"] = {
            "profile": profile,
            "verdict": a["verdict"],
            "verdict_label": a["verdict_label"],
            "value": a["value"],
            "interval": a["interval"],
            "stale": a["stale"],
            "stand_ins": a.get("stand_ins") or {},
            "ran_on": machine_text(m.get("hardware")),
            "when": min(started)[:10] if any(started) else "",
            "commit": (m.get("commit") or "")[:7],
        }
    return rows


def archived_cell(row: dict[str, Any]) -> str:
    """The archived run's verdict and value, with where and when it ran."""
    a = row.get("archived")
    if not a:
        return ""
    value = value_cell(a["value"], a.get("interval"))
    text = a["verdict_label"] + (f": {value}" if value else "")
    if a.get("stand_ins"):
        text += f" [{stand_in_text(a['stand_ins'])}]"
    text += f" ({a['ran_on']}, {a['when']}, {a['commit']})"
    return text + (" [STALE]" if a.get("stale") else "")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A MyST/GitHub Markdown table; pipes and newlines inside cells are escaped."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def render(rows: list[dict[str, Any]], fmt: str = "table", width: int = 120) -> str:
    """The ledger as one compact line per claim (``compact``, cut to ``width`` columns), a
    wide plain-text table with every column wrapped (``table``), Markdown, or JSON."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "compact":
        return render_compact(rows, width)
    headers = [
        "chapter",
        "claim",
        "statement",
        "paper",
        "ours",
        "verdict",
        "rests on",
        "evid.",
        "run",
        "note",
    ]
    body = [
        [
            r["chapter"],
            r["claim"],
            r["statement"],
            r["paper_value"],
            row_value(r),
            verdict_cell(r),
            r["basis"],
            EVIDENCE_SHORT[r["evidence"]],
            run_cell(r),
            r["note_first"],
        ]
        for r in rows
    ]
    widths = [16, None, 30, 14, 22, 16, 14, None, 14, 40]
    archived = [r["archived"]["profile"] for r in rows if r.get("archived")]
    if archived:
        headers.append(f"{archived[0]} (archived)")
        for line, r in zip(body, rows):
            line.append(archived_cell(r))
        widths.append(30)
    if fmt == "markdown":
        return markdown_table(headers, body)
    if fmt == "table":
        from tabulate import tabulate

        text = tabulate(
            body,
            headers=headers,
            tablefmt="simple",
            maxcolwidths=widths,
        )
        return text + "\n\n" + headline(rows)
    raise ValueError(
        f"unknown ledger format {fmt!r}; valid formats: compact, table, markdown, json"
    )


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {v: 0 for v in VERDICT_LABELS}
    for r in rows:
        out[r["verdict"]] += 1
    return out


TESTED = ("reproduced", "partial", "inconclusive", "not_reproduced")
#: how the headline names each group of the paper's claims
GROUP_WORDS = {
    "papers_terms": "on the paper's terms",
    "reconstruction": "only on our reconstruction",
}


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _verdict_counts(rows: list[dict[str, Any]]) -> str:
    c = counts(rows)
    return ", ".join(f"{n} {VERDICT_LABELS[v]}" for v, n in c.items() if n) or "none"


def group_counts(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The paper's claims that a value decided, by what they rest on: group -> verdict -> n.
    Groups: ``papers_terms`` (the paper's release, or its method on its kind of data) and
    ``reconstruction`` (our reconstruction only)."""
    out: dict[str, dict[str, int]] = {}
    for g in GROUP_WORDS:
        mine = [r for r in rows if r["papers"] and r["group"] == g and r["verdict"] in TESTED]
        out[g] = {v: n for v, n in counts(mine).items() if n}
    return out


def headline(rows: list[dict[str, Any]]) -> str:
    """'Of the paper's 9 claims, 6 were tested: 4 on the paper's terms (3 reproduced, 1 not
    reproduced) and 2 only on our reconstruction (2 inconclusive); 1 is illustrated, not
    tested; 2 need the full profile.' Only evidence that could have gone against the paper
    counts as tested: a claim whose direction our simulation or our code sets is an
    illustration, and our extensions are counted apart from the paper's claims."""
    papers = [r for r in rows if r["papers"]]
    tested = []
    for g, words in GROUP_WORDS.items():
        mine = [r for r in papers if r["group"] == g and r["verdict"] in TESTED]
        if mine:
            tested.append(f"{len(mine)} {words} ({_verdict_counts(mine)})")
    n_tested = sum(r["verdict"] in TESTED and r["group"] in GROUP_WORDS for r in papers)
    text = f"Of the paper's {_plural(len(papers), 'claim')}, "
    if tested:
        text += f"{n_tested} {'was' if n_tested == 1 else 'were'} tested: " + " and ".join(tested)
    else:
        text += "none was tested"
    rest = []
    shown = [
        r
        for r in papers
        if (r["verdict"] == "illustrated" or r["group"] == "illustration")
        and r["verdict"] not in ("needs_full", "not_checkable", "not_run")
    ]
    if shown:
        rest.append(f"{len(shown)} {'is' if len(shown) == 1 else 'are'} illustrated, not tested")
    for v, one, many in (
        ("needs_full", "needs the full profile", "need the full profile"),
        ("not_checkable", "is not checkable here", "are not checkable here"),
        ("not_run", "was not run", "were not run"),
    ):
        n = sum(r["verdict"] == v for r in papers)
        if n:
            rest.append(f"{n} {one if n == 1 else many}")
    text += ("; " + "; ".join(rest) if rest else "") + "."
    extras = []
    ext = [r for r in rows if not r["papers"]]
    if ext:
        extras.append(f"{_plural(len(ext), 'extension')} of ours ({_verdict_counts(ext)})")
    n_stale = sum(bool(r.get("stale")) for r in rows)
    if n_stale:
        extras.append(_plural(n_stale, "STALE result"))
    if extras:
        text += " Also " + "; ".join(extras) + "."
    return text


# ----------------------------------------------------------------------------- comparing runs


def is_flip(a: str, b: str, has_partial: bool = True) -> bool:
    """A verdict that changed between two runs in a way that matters: any change, except a
    move to or from ``inconclusive`` from a deciding verdict (reproduced, partial, not
    reproduced). An inconclusive interval straddles a bar, so the verdicts on either side of
    that bar are its neighbours; ``has_partial`` is kept for callers and no longer matters."""
    if a == b:
        return False
    deciding = {"reproduced", "partial", "not_reproduced"}
    if "inconclusive" in (a, b):
        other = b if a == "inconclusive" else a
        return other not in deciding
    return True


def compare(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Claim by claim, the verdicts and values of two runs, with ``flip`` set where the verdict
    changed in a way that matters (:func:`is_flip`) and ``soft`` where it moved to or from
    inconclusive."""
    b_by = {(r["chapter"], r["claim"]): r for r in rows_b}
    out = []
    for a in rows_a:
        b = b_by.get((a["chapter"], a["claim"]))
        vb = b["verdict"] if b else "not_run"
        # a claim measured in one run only is not a change of verdict: it is counted apart
        one_side = (a["verdict"] == "not_run") != (vb == "not_run")
        flip = not one_side and is_flip(a["verdict"], vb, a.get("has_partial", True))
        out.append(
            {
                "chapter": a["chapter"],
                "claim": a["claim"],
                "verdict_a": a["verdict"],
                "verdict_b": vb,
                "value_a": row_value(a),
                "value_b": row_value(b) if b else "",
                "flip": flip,
                "soft": a["verdict"] != vb and not flip and not one_side,
                "one_side": one_side,
            }
        )
    return out


def render_compare(pairs: list[dict[str, Any]], name_a: str, name_b: str) -> str:
    from tabulate import tabulate

    body = [
        [
            p["chapter"],
            p["claim"],
            VERDICT_LABELS[p["verdict_a"]],
            p["value_a"],
            VERDICT_LABELS[p["verdict_b"]],
            p["value_b"],
            "FLIP"
            if p["flip"]
            else ("~" if p["soft"] else ("one side" if p.get("one_side") else "")),
        ]
        for p in pairs
    ]
    table = tabulate(
        body,
        headers=[
            "chapter",
            "claim",
            f"verdict {name_a}",
            f"ours {name_a}",
            f"verdict {name_b}",
            f"ours {name_b}",
            "",
        ],
        tablefmt="simple",
        maxcolwidths=[16, None, 16, 24, 16, 24, None],
    )
    n_flip = sum(p["flip"] for p in pairs)
    n_soft = sum(p["soft"] for p in pairs)
    n_one = sum(bool(p.get("one_side")) for p in pairs)
    neither = sum(p["verdict_a"] == p["verdict_b"] == "not_run" for p in pairs)
    same = sum(p["verdict_a"] == p["verdict_b"] != "not_run" for p in pairs)
    compared = len(pairs) - n_one - neither
    return (
        f"{table}\n\n{len(pairs)} claims; {compared} run on both sides: {same} with the same "
        f"verdict, {n_soft} moved to or from inconclusive (~), {n_flip} flipped (FLIP). "
        f"Apart: {n_one} run on one side only (one side), {neither} run on neither."
    )


# ----------------------------------------------------------------------------- at a glance

#: One colour per verdict (colour-blind-safe hues: green passes, orange/red fails, blue shows).
VERDICT_COLORS = {
    "reproduced": "#009E73",
    "partial": "#8FD1B8",
    "inconclusive": "#F0E442",
    "not_reproduced": "#D55E00",
    "illustrated": "#56B4E9",
    "needs_full": "#CC79A7",
    "not_checkable": "#999999",
    "not_run": "#FFFFFF",
}


#: how the overview figure marks what a claim rests on
BASIS_HATCH = {"reconstruction": "....", "simulation": "xxx", "own code": "xxx"}
#: the bars under the grid: the paper's claims by what they rest on, then our extensions
FIGURE_GROUPS = (
    ("papers_terms", "paper's terms"),
    ("reconstruction", "our reconstruction"),
    ("illustration", "our simulation or code,\nor an illustration"),
    ("extension", "our extensions"),
)


def overview_figure(rows: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """The ledger at a glance: one row per chapter, one cell per claim coloured by its verdict
    (dotted: it rests on our reconstruction; crossed: our simulation or code; hatched: our
    extension; * marks a revised check), and under it one bar per group of what the claims
    rest on, split by verdict, so that the claims tested on the paper's terms are counted apart
    from those tested only on our reconstruction. Saved as a PNG at ``path`` (atomically)."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import MaxNLocator

    from .core.plotting import set_theme

    set_theme()
    chapters: list[tuple[str, list[dict[str, Any]]]] = []
    for r in rows:
        if not chapters or chapters[-1][0] != f"{r['number']} {r['chapter']}":
            chapters.append((f"{r['number']} {r['chapter']}", []))
        chapters[-1][1].append(r)
    width = max([len(c) for _, c in chapters] + [1])
    grid_h = 0.9 + 0.42 * max(len(chapters), 1)
    bars_h = 0.5 + 0.36 * len(FIGURE_GROUPS)
    fig, (ax, bx) = plt.subplots(
        2,
        1,
        figsize=(2.2 + 0.62 * width, grid_h + bars_h),
        gridspec_kw={"height_ratios": [grid_h, bars_h]},
    )
    for i, (_, claims) in enumerate(chapters):
        for j, r in enumerate(claims):
            hatch = "///" if r["source"] == "extension" else BASIS_HATCH.get(r.get("basis"))
            ax.add_patch(
                Rectangle(
                    (j, i),
                    0.92,
                    0.84,
                    facecolor=VERDICT_COLORS[r["verdict"]],
                    edgecolor="#444444",
                    linewidth=0.6,
                    hatch=hatch,
                )
            )
            ax.text(
                j + 0.46,
                i + 0.42,
                r["claim"] + ("*" if r.get("revisions") else ""),
                ha="center",
                va="center",
                fontsize=8,
                color="#111111",
                bbox={"facecolor": "white", "alpha": 0.7, "pad": 0.5, "linewidth": 0}
                if hatch
                else None,
            )
    ax.set_xlim(-0.1, width)
    ax.set_ylim(len(chapters), -0.1)
    ax.set_yticks([i + 0.42 for i in range(len(chapters))], [name for name, _ in chapters])
    ax.set_xticks([])
    ax.grid(False)
    for a in (ax, bx):
        for side in ("top", "right", "left"):
            a.spines[side].set_visible(False)
    ax.spines["bottom"].set_visible(False)
    c = counts(rows)
    handles = [
        Patch(facecolor=VERDICT_COLORS[v], edgecolor="#444444", label=f"{VERDICT_LABELS[v]} ({n})")
        for v, n in c.items()
        if n
    ]
    handles += [
        Patch(facecolor="white", edgecolor="#444444", hatch="....", label="our reconstruction"),
        Patch(facecolor="white", edgecolor="#444444", hatch="xxx", label="our simulation or code"),
        Patch(facecolor="white", edgecolor="#444444", hatch="///", label="our extension"),
    ]
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
    )
    ax.set_title(
        title or f"{len(rows)} claims, by what each verdict rests on (* = revised check)",
        fontsize=10,
        loc="left",
    )
    # one bar per group: how many claims rest on it, and what came out
    for k, (group, _) in enumerate(FIGURE_GROUPS):
        mine = [r for r in rows if r.get("group") == group]
        left = 0
        for v, n in counts(mine).items():
            if n:
                bx.barh(k, n, left=left, color=VERDICT_COLORS[v], edgecolor="#444444", lw=0.6)
                if n >= 2:
                    bx.text(left + n / 2, k, str(n), ha="center", va="center", fontsize=7)
                left += n
        bx.text(left + 0.01 * max(len(rows), 1), k, f" {len(mine)}", va="center", fontsize=8)
    bx.set_yticks(range(len(FIGURE_GROUPS)), [label for _, label in FIGURE_GROUPS], fontsize=8)
    bx.set_ylim(len(FIGURE_GROUPS) - 0.4, -0.6)
    bx.set_xlabel("claims", fontsize=8)
    bx.xaxis.set_major_locator(MaxNLocator(integer=True))
    bx.grid(False)
    bx.set_title("what the verdicts rest on", fontsize=9, loc="left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def render_compact(rows: list[dict[str, Any]], width: int = 120) -> str:
    """One line per claim, at most ``width`` columns: chapter, claim, verdict, ours, paper and
    as much of the statement as fits; then the headline."""

    def cut(text: str, n: int) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= n else text[: max(n - 1, 0)] + "…"

    def line(chapter: str, claim: str, verdict: str, ours: str, paper: str, statement: str) -> str:
        fixed = (
            f"{cut(chapter, 16):<16} {cut(claim, 4):<4} {cut(verdict, 22):<22} "
            f"{cut(ours, 22):<22} {cut(paper, 14):<14} "
        )
        return (fixed + cut(statement, max(width - len(fixed), 0)))[:width].rstrip()

    lines = [line("chapter", "id", "verdict", "ours", "paper", "statement")]
    lines += [
        line(
            f"{r['number']} {r['chapter']}",
            r["claim"],
            verdict_cell(r),
            row_value(r),
            r["paper_value"],
            r["statement"],
        )
        for r in rows
    ]
    import textwrap

    lines += ["", *textwrap.wrap(headline(rows), width)]
    return "\n".join(lines)
