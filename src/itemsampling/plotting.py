"""One plotting style for the whole book: seaborn ``whitegrid`` with the colour-blind-safe
``colorblind`` palette, labelled axes, and stable colours per model / method name."""

from __future__ import annotations



import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

__all__ = ["set_style", "palette", "color_for", "subplots", "label_axes"]

PALETTE_NAME = "colorblind"
_ASSIGNED: dict[str, tuple] = {}


def set_style(context: str = "notebook") -> None:
    """Apply the book's style. Call once at the top of every chapter."""
    sns.set_theme(context=context, style="whitegrid", palette=PALETTE_NAME)
    plt.rcParams.update({
        "figure.figsize": (7.0, 4.2),
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "axes.titlesize": "medium",
        "legend.frameon": False,
        "figure.constrained_layout.use": True,
    })


def palette(n: int | None = None):
    """The colour-blind-safe palette (10 colours)."""
    return sns.color_palette(PALETTE_NAME, n)


def color_for(name: str):
    """A stable colour for a model or method name across all figures of a session."""
    if name not in _ASSIGNED:
        colors = palette(10)
        _ASSIGNED[name] = colors[len(_ASSIGNED) % len(colors)]
    return _ASSIGNED[name]


def subplots(nrows: int = 1, ncols: int = 1, width: float = 4.2, height: float = 3.4, **kw):
    """``plt.subplots`` sized per panel."""
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kw)


def label_axes(ax, xlabel: str, ylabel: str, title: str | None = None) -> None:
    """Every axis labelled: set both labels (and an optional title)."""
    if not xlabel or not ylabel:
        raise ValueError("both xlabel and ylabel are required")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
