"""The one plotting theme of the book: every figure calls :func:`set_theme` first."""

from __future__ import annotations

#: Colour-blind-safe palette, in the order chapters assign it to methods.
PALETTE = "colorblind"


def set_theme(context: str = "notebook") -> None:
    """Seaborn's white grid in the colour-blind palette, readable sizes, tight saved figures."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette=PALETTE)
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "savefig.bbox": "tight",
            "axes.titleweight": "bold",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "image.cmap": "viridis",
        }
    )


def method_colors(names: list[str]) -> dict[str, tuple]:
    """A fixed colour per method name, so one method keeps its colour across a chapter's figures."""
    import seaborn as sns

    colors = sns.color_palette(PALETTE, n_colors=max(len(names), 1))
    return dict(zip(names, colors))
