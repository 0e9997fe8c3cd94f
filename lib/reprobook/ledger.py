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
from .core.claims import format_value, load_results
from .core.paths import book_root

COLUMNS = ("chapter", "claim", "statement", "metric", "paper_value", "value", "verdict", "profile", "seed", "notebook")


def collect(profile: str = "reduced", root: Path | None = None) -> list[dict[str, Any]]:
    """One row per claim of every chapter, at ``profile``."""
    root = root or book_root()
    rows = []
    for ch in find_chapters(root):
        recorded: dict[str, dict[str, Any]] = {}
        for data in load_results(profile, root, ch.slug):
            for cid, entry in data.get("claims", {}).items():
                recorded[cid] = {"value": entry["value"], "seed": data.get("seed"), "details": entry.get("details", {}),
                                 "commit": data.get("facts", {}).get("git_commit"),
                                 "hardware": data.get("facts", {}).get("hardware", {})}
        for c in ch.claims:
            rec = recorded.get(c.id, {})
            value = rec.get("value")
            rows.append({
                "chapter": ch.slug, "number": ch.number, "title": ch.title, "claim": c.id, "statement": c.claim,
                "metric": c.metric, "paper_value": c.paper_value, "source": c.source, "value": value,
                "verdict": c.verdict(value, profile), "profile": profile, "seed": rec.get("seed"),
                "notebook": c.notebook, "commit": rec.get("commit"), "hardware": rec.get("hardware"),
            })
    return rows


def _cell(value: Any) -> str:
    return "" if value is None else format_value(value)


def render(rows: list[dict[str, Any]], fmt: str = "table") -> str:
    """The ledger as a plain-text table, a Markdown table, or JSON."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    headers = ["chapter", "claim", "metric", "paper", "ours", "verdict", "profile", "seed"]
    body = [[r["chapter"], r["claim"], r["metric"], r["paper_value"], _cell(r["value"]), VERDICT_LABELS[r["verdict"]],
             r["profile"], "" if r["seed"] is None else str(r["seed"])] for r in rows]
    if fmt == "markdown":
        esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
        return "\n".join(lines)
    if fmt == "table":
        from tabulate import tabulate

        return tabulate(body, headers=headers, tablefmt="simple", maxcolwidths=[None, None, 40, 18, 12, None, None, None])
    raise ValueError(f"unknown ledger format {fmt!r}; valid formats: table, markdown, json")


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {v: 0 for v in VERDICT_LABELS}
    for r in rows:
        out[r["verdict"]] += 1
    return out
