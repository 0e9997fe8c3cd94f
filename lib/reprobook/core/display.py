"""Prose made from results: a notebook states what it measured by formatting the recorded
values into Markdown at run time, never by typing a number or a verdict into a markdown cell.
"""

from __future__ import annotations


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
