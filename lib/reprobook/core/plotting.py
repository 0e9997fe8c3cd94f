"""The one plotting theme of the book: every figure calls :func:`set_theme` first.

The theme is seaborn's white grid at its "notebook" sizes in its colour-blind palette, written
out here as the matplotlib settings it changes, so that a notebook pays for matplotlib alone
(importing seaborn, which imports scipy.stats and pandas, costs about 1.5 s). A test applies
seaborn's own ``set_theme`` and checks that every setting and colour code is the same.
"""

from __future__ import annotations

#: Colour-blind-safe palette, in the order chapters assign it to methods (seaborn's
#: "colorblind", ten colours).
PALETTE = "colorblind"
COLORBLIND = (
    "#0173B2",
    "#DE8F05",
    "#029E73",
    "#D55E00",
    "#CC78BC",
    "#CA9161",
    "#FBAFE4",
    "#949494",
    "#ECE133",
    "#56B4E9",
)
#: The single-letter colour codes seaborn maps onto the palette ("b" is its blue, ...).
_CODES = {"b": 0, "g": 2, "r": 3, "m": 4, "y": 8, "c": 9}

#: What seaborn's white-grid style and notebook context change in matplotlib's defaults.
_SEABORN_RC = {
    "axes.axisbelow": True,
    "axes.edgecolor": ".8",
    "axes.grid": True,
    "axes.labelcolor": ".15",
    "axes.labelsize": 12.0,
    "axes.linewidth": 1.25,
    "axes.titlesize": 12.0,
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans"]
    + ["sans-serif"],
    "font.size": 12.0,
    "grid.color": ".8",
    "grid.linewidth": 1.0,
    "legend.fontsize": 11.0,
    "legend.title_fontsize": 12.0,
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
    "text.color": ".15",
    "xtick.bottom": False,
    "xtick.color": ".15",
    "xtick.labelsize": 11.0,
    "xtick.major.size": 6.0,
    "xtick.major.width": 1.25,
    "xtick.minor.size": 4.0,
    "xtick.minor.width": 1.0,
    "ytick.color": ".15",
    "ytick.labelsize": 11.0,
    "ytick.left": False,
    "ytick.major.size": 6.0,
    "ytick.major.width": 1.25,
    "ytick.minor.size": 4.0,
    "ytick.minor.width": 1.0,
}

#: The book's own settings on top of seaborn's.
_BOOK_RC = {
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


def set_theme() -> None:
    """Seaborn's white grid in the colour-blind palette, readable sizes, tight saved figures."""
    import matplotlib as mpl
    from cycler import cycler

    colors = [mpl.colors.to_rgb(c) for c in COLORBLIND]
    mpl.rcParams.update(_SEABORN_RC)
    mpl.rcParams["axes.prop_cycle"] = cycler("color", colors)
    codes = {code: colors[i] for code, i in _CODES.items()} | {"k": (0.1, 0.1, 0.1)}
    for code, rgb in codes.items():  # as seaborn's set_color_codes: color="b" is the palette's
        mpl.colors.colorConverter.colors[code] = rgb
        mpl.colors.colorConverter.cache[code] = rgb
    mpl.rcParams.update(_BOOK_RC)


def method_colors(names: list[str]) -> dict[str, tuple]:
    """A fixed colour per method name, so one method keeps its colour across a chapter's figures
    (the palette in order, repeated after its ten colours)."""
    from matplotlib.colors import to_rgb

    return {name: to_rgb(COLORBLIND[i % len(COLORBLIND)]) for i, name in enumerate(names)}
