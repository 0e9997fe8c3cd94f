"""Prose made from results: a notebook states what it measured by formatting the recorded
values into Markdown at run time, never by typing a number or a verdict into a markdown cell.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any


def md(text: str) -> None:
    """Show ``text`` as Markdown in a notebook (Jupyter, Colab and the rendered book alike);
    outside a notebook it is printed. Use it for every sentence that carries a measured number
    or a verdict: ``core.md(f"The gap is {gap:.3f}, so C1 is {run.verdict_label('C1')}.")``."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def _without_docstring(lines: list[str], start: int, obj: Any) -> tuple[list[str], str]:
    """Drop the docstring of the function or class whose source is ``lines`` (first line number
    ``start``) and return the remaining lines and the docstring's first sentence."""
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0]
    body = getattr(node, "body", [])
    if not (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return lines, ""
    doc = body[0]
    summary = " ".join(inspect.cleandoc(doc.value.value).split("\n\n")[0].split())
    return lines[: doc.lineno - 1] + lines[doc.end_lineno :], summary


def show_source(obj: Any, *, docstring: bool = False, title: str | None = None) -> None:
    """Show the source of a library function or class on the page, highlighted, with where it
    lives: ``core.show_source(spr.dp_optimal)`` where a chapter introduces its method.

    The docstring is left out unless ``docstring=True`` (the page around it says the same in
    full); its first sentence becomes the caption. The output is Markdown with a ``python`` code
    fence, which Jupyter, Colab and the rendered book all highlight. It returns nothing, so a
    call that ends a cell shows the code once; :func:`source_markdown` gives the text.
    """
    md(source_markdown(obj, docstring=docstring, title=title))


def source_markdown(obj: Any, *, docstring: bool = False, title: str | None = None) -> str:
    """The Markdown that :func:`show_source` displays."""
    target = inspect.unwrap(obj)
    if not (inspect.isfunction(target) or inspect.isclass(target) or inspect.ismethod(target)):
        raise TypeError(f"show_source needs a function, method or class, got {type(obj).__name__}")
    lines, first = inspect.getsourcelines(target)
    summary = ""
    if not docstring:
        lines, summary = _without_docstring(lines, first, target)
    code = textwrap.dedent("".join(lines)).rstrip("\n")
    path = Path(inspect.getsourcefile(target) or "?")
    parts = path.parts
    shown = "/".join(parts[parts.index("reprobook") :]) if "reprobook" in parts else path.name
    name = f"{target.__module__}.{target.__qualname__}"
    head = title or f"`{name}`"
    caption = f"{head} ({shown}, line {first}){': ' + summary if summary else ''}"
    return f"{caption}\n\n```python\n{code}\n```"
