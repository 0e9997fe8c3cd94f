"""The claims ledger: every claim of every chapter with what the last run measured.

The verdict of each row comes from the claim's check in its chapter's ``claims.yml`` applied
to the recorded value; nothing here is typed by hand. It reads claims files and results
files, never a paper package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .core.chapters import VERDICT_LABELS, find_chapters
from .core.claims import format_value, load_records
from .core.paths import book_root


def collect(profile: str = "reduced", root: Path | None = None) -> list[dict[str, Any]]:
    """One row per claim of every chapter, at ``profile``."""
    root = root or book_root()
    rows = []
    for ch in find_chapters(root):
        records = load_records(ch, profile, root)
        for c in ch.claims:
            rec = records.get(c.id, {})
            value = rec.get("value")
            facts = rec.get("facts", {})
            rows.append({
                "chapter": ch.slug, "number": ch.number, "title": ch.title, "claim": c.id, "statement": c.claim,
                "metric": c.metric, "paper_value": c.paper_value, "source": c.source, "value": value,
                "verdict": c.verdict(value, profile), "profile": profile, "seed": rec.get("seed"),
                "overrides": rec.get("overrides", {}), "notebook": c.notebook,
                "commit": facts.get("git_commit"), "hardware": facts.get("hardware"),
            })
    return rows


def value_cell(value: Any) -> str:
    return "" if value is None else format_value(value)


def run_cell(row: dict[str, Any]) -> str:
    """The profile, with any parameter the runner overrode (``reduced (n_instances=5)``)."""
    extra = ", ".join(f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items()))
    return f"{row['profile']} ({extra})" if extra else row["profile"]


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A MyST/GitHub Markdown table; pipes and newlines inside cells are escaped."""
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def render(rows: list[dict[str, Any]], fmt: str = "table") -> str:
    """The ledger as a plain-text table, a Markdown table, or JSON."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    headers = ["chapter", "claim", "statement", "metric", "paper", "ours", "verdict", "profile", "seed"]
    body = [[r["chapter"], r["claim"], r["statement"], r["metric"], r["paper_value"], value_cell(r["value"]),
             VERDICT_LABELS[r["verdict"]], run_cell(r), "" if r["seed"] is None else str(r["seed"])] for r in rows]
    if fmt == "markdown":
        return markdown_table(headers, body)
    if fmt == "table":
        from tabulate import tabulate

        return tabulate(body, headers=headers, tablefmt="simple",
                        maxcolwidths=[None, None, 36, 28, 14, 10, 12, 14, None])
    raise ValueError(f"unknown ledger format {fmt!r}; valid formats: table, markdown, json")


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {v: 0 for v in VERDICT_LABELS}
    for r in rows:
        out[r["verdict"]] += 1
    return out
