"""The book's prose takes its numbers and verdicts from the results, never from the keyboard.

- A notebook never records a literal: ``run.record("C1", 0.93)`` would be a hard-coded result.
- Index pages and notebook markdown cells never type a verdict next to a claim id, nor a
  measured-looking number (a decimal with two or more places, or a percentage). Notebooks say
  what they measured with ``core.md(f"...")`` in a code cell; index pages use placeholders
  that the book's build fills from the results (``[[C1]]``, ``[[C1.verdict]]``,
  ``[[C1.details.NAME]]``). Settings and the paper's own figures go in math (``$\\kappa = 0.02$``)
  or come from ``[[C1.paper]]``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from reprobook.core import chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters.find_chapters(ROOT)
NOTEBOOKS = [nb for ch in CHAPTERS for nb in ch.notebooks]
INDEXES = [ch.folder / "index.md" for ch in CHAPTERS]


def literal_records(source: str) -> list[str]:
    """The ``record(...)`` calls whose value argument is a literal constant (None excepted:
    it is how a claim that cannot be measured at this profile is recorded)."""
    bad = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return bad  # IPython magics: the notebook itself fails to run if it matters
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "record"
        ):
            continue
        if len(node.args) < 2:
            continue
        value = node.args[1]
        if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant):
            value = value.operand
        if isinstance(value, ast.Constant) and value.value is not None:
            bad.append(ast.unparse(node))
        if isinstance(value, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) for e in value.elts
        ):
            bad.append(ast.unparse(node))
    return bad


def cells(nb: Path, kind: str) -> list[str]:
    data = json.loads(nb.read_text(encoding="utf-8"))
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in data["cells"]
        if c["cell_type"] == kind
    ]


_STRIP = [
    re.compile(r"```.*?```", re.S),  # code and directive fences ({math}, admonitions' bodies stay)
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$"),  # inline math
    re.compile(r"`[^`\n]*`"),  # code spans and roles' targets
    re.compile(r"<!--.*?-->", re.S),  # comments
    re.compile(r"\[\[[^\]]*\]\]"),  # placeholders the build fills from the results
    re.compile(r"\(https?://[^)]*\)"),  # link targets
    re.compile(r"\b\d{4}\.\d{4,5}\b"),  # arXiv ids
]
_FENCE_HEAD = re.compile(r"^```\{[a-z]+\}.*$", re.M)
VERDICT_WORDS = re.compile(
    r"\b(not reproduced|reproduced|partially|partial|inconclusive|illustrated|"
    r"does not reproduce|reproduces)\b",
    re.I,
)
CLAIM_ID = re.compile(r"\bC\d+\b")
MEASURED = re.compile(r"(?<![\w.])\d+\.\d{2,}(?![\w.])|(?<![\w.])\d+(\.\d+)?\s?%")


def prose(text: str) -> str:
    # keep the bodies of admonitions and other directives (they are prose), drop real code
    text = _FENCE_HEAD.sub("", text)
    text = re.sub(r"^```\s*$", "", text, flags=re.M)
    text = re.sub(r"^:[a-z_-]+:.*$", "", text, flags=re.M)  # directive options
    for pattern in _STRIP[1:]:
        text = pattern.sub(" ", text)
    return text


def sentences(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*[-|*]\s)|\n\|", text):
        out += re.split(r"(?<=[.!?;])\s+", block)
    return [s for s in out if s.strip()]


def typed_results(text: str) -> list[str]:
    """Sentences of ``text`` that type a verdict next to a claim id, or a measured number."""
    found = []
    for s in sentences(prose(text)):
        flat = " ".join(s.split())
        if CLAIM_ID.search(flat) and VERDICT_WORDS.search(flat):
            found.append(f"verdict typed next to a claim: {flat[:160]!r}")
        m = MEASURED.search(flat)
        if m:
            found.append(f"number typed in prose ({m.group(0)}): {flat[:160]!r}")
    return found


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebooks_record_no_literal_values(nb: Path) -> None:
    bad = [call for src in cells(nb, "code") for call in literal_records(src)]
    assert not bad, f"{nb.name} records literal values: {bad}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_markdown_types_no_result(nb: Path) -> None:
    found = [f for src in cells(nb, "markdown") for f in typed_results(src)]
    assert not found, (
        f"{nb.parent.name}/{nb.name}: say these with core.md(...) from the results:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("index", INDEXES, ids=lambda p: p.parent.name)
def test_index_pages_type_no_result(index: Path) -> None:
    found = typed_results(index.read_text(encoding="utf-8"))
    assert not found, (
        f"{index.parent.name}/index.md: use [[C1]], [[C1.verdict]] placeholders:\n"
        + "\n".join(found)
    )


def test_the_scanners_catch_what_they_should() -> None:
    assert literal_records('run.record("C1", 0.93)') == ["run.record('C1', 0.93)"]
    assert literal_records('run.record("C1", -1)') and literal_records('run.record("C1", True)')
    assert literal_records('run.record("C1", None, why="needs the full profile")') == []
    assert literal_records('run.record("C1", gap, n=5)') == []
    assert typed_results("So C3 is reproduced here.")
    assert typed_results("The solve rate was 0.746 on held-out puzzles.")
    assert typed_results("It solved 78% of them.")
    assert not typed_results("C3 is decided on an interval over three seeds.")
    assert not typed_results(
        "With $\\kappa_{max} = 0.02$ and `lr=6e-3` the network learns; see [[C3]]."
    )
    assert not typed_results(
        "arXiv [2606.07443](https://arxiv.org/abs/2606.07443) says C1 [[C1.verdict]]."
    )
