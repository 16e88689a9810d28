"""One plotting style for the whole book: seaborn ``whitegrid``, the colour-blind-safe Okabe-Ito
palette (Okabe & Ito 2008; yellow last, since it is faint on white), labelled axes, and a stable
colour and line style per model / method name.

The style is seaborn 0.13's ``set_theme(context, style="whitegrid", palette=OKABE_ITO[:7],
font_scale=1.05)`` written out as matplotlib settings (:data:`WHITEGRID`, :func:`_context`), so a
chapter does not import seaborn (half a second of every kernel's start, with ipywidgets and
urllib behind it); ``tests/test_plotting.py`` checks them against seaborn's own theme, setting by
setting. The one setting left out is seaborn's default colour map, ``rocket``, which only seaborn
registers and no figure of the book uses."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb

__all__ = ["set_style", "sharp_inline_figures", "INLINE_FORMAT", "palette", "color_for", "style_for", "subplots", "label_axes", "OKABE_ITO"]

#: Okabe-Ito colours, ordered so that the first ones are the most distinct on a white background.
OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
_LINESTYLES = ["-", "--", "-.", ":"]
_ASSIGNED: dict[str, int] = {}


#: Inline figure format of the book: PNG at twice the pixel density ("retina"), shown at the
#: figure's size, so figures are sharp on high-resolution screens and in print preview while the
#: pages stay light (an SVG of a figure with thousands of points weighs megabytes).
INLINE_FORMAT = "retina"


def sharp_inline_figures(fmt: str = INLINE_FORMAT) -> bool:
    """Make IPython display matplotlib figures as ``fmt`` ("retina", "svg" or "png"). Returns
    ``False`` outside IPython (scripts, tests), where there is no inline display to configure."""
    if fmt not in ("retina", "svg", "png"):
        raise ValueError(f"fmt must be 'retina', 'svg' or 'png', got {fmt!r}")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the book's environment
        return False
    if get_ipython() is None:
        return False
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats(fmt)
    return True


#: seaborn 0.13's ``axes_style("whitegrid")`` (without its ``image.cmap``, ``rocket``: see the module docstring).
WHITEGRID = {
    "figure.facecolor": "white", "axes.labelcolor": ".15", "xtick.direction": "out", "ytick.direction": "out",
    "xtick.color": ".15", "ytick.color": ".15", "axes.axisbelow": True, "grid.linestyle": "-", "text.color": ".15",
    "font.family": ["sans-serif"],
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "lines.solid_capstyle": "round", "patch.edgecolor": "w", "patch.force_edgecolor": True, "xtick.top": False,
    "ytick.right": False, "axes.grid": True, "axes.facecolor": "white", "axes.edgecolor": ".8", "grid.color": ".8",
    "axes.spines.left": True, "axes.spines.bottom": True, "axes.spines.right": True, "axes.spines.top": True,
    "xtick.bottom": False, "ytick.left": False,
}
#: seaborn 0.13's ``plotting_context``: the "notebook" sizes, and each context's scale of them.
_NOTEBOOK = {
    "font.size": 12, "axes.labelsize": 12, "axes.titlesize": 12, "xtick.labelsize": 11, "ytick.labelsize": 11,
    "legend.fontsize": 11, "legend.title_fontsize": 12,
    "axes.linewidth": 1.25, "grid.linewidth": 1, "lines.linewidth": 1.5, "lines.markersize": 6,
    "patch.linewidth": 1, "xtick.major.width": 1.25, "ytick.major.width": 1.25, "xtick.minor.width": 1,
    "ytick.minor.width": 1, "xtick.major.size": 6, "ytick.major.size": 6, "xtick.minor.size": 4,
    "ytick.minor.size": 4,
}
_CONTEXT_SCALE = {"paper": 0.8, "notebook": 1.0, "talk": 1.5, "poster": 2.0}
_FONT_KEYS = ("font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize",
              "legend.fontsize", "legend.title_fontsize")


def _context(context: str, font_scale: float) -> dict:
    """seaborn's ``plotting_context(context, font_scale)``: every size scaled by the context, the fonts by
    ``font_scale`` too."""
    if context not in _CONTEXT_SCALE:
        raise ValueError(f"context must be one of {list(_CONTEXT_SCALE)}, got {context!r}")
    scale = _CONTEXT_SCALE[context]
    return {k: v * scale * (font_scale if k in _FONT_KEYS else 1) for k, v in _NOTEBOOK.items()}


#: The book's own settings, on top of the theme.
BOOK_RC = {
    "figure.figsize": (7.0, 4.2),
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "axes.titlesize": "medium",
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "figure.constrained_layout.use": True,
}


def set_style(context: str = "notebook") -> None:
    """Apply the book's style. Call once at the top of every chapter. In a notebook, figures are
    displayed as retina PNGs (:func:`sharp_inline_figures`)."""
    plt.rcParams.update(_context(context, 1.05))  # seaborn's set_theme: the context, the style, the palette
    plt.rcParams.update(WHITEGRID)
    plt.rcParams["axes.prop_cycle"] = plt.cycler("color", palette(7))
    plt.rcParams.update(BOOK_RC)
    sharp_inline_figures()


def palette(n: int | None = None):
    """The colour-blind-safe palette (Okabe-Ito, 8 colours; yellow last)."""
    colors = OKABE_ITO if n is None else [OKABE_ITO[i % len(OKABE_ITO)] for i in range(n)]
    return [to_rgb(c) for c in colors]


def _index(name: str) -> int:
    if name not in _ASSIGNED:
        _ASSIGNED[name] = len(_ASSIGNED)
    return _ASSIGNED[name]


def color_for(name: str):
    """A stable colour for a model or method name across all figures of a session. The first seven
    names get the seven strong Okabe-Ito colours; later names reuse them (see :func:`style_for`)."""
    return to_rgb(OKABE_ITO[_index(name) % 7])


def style_for(name: str) -> dict:
    """Stable ``color`` and ``linestyle`` keyword arguments for a name: beyond seven names the
    colours repeat with another line style, so every curve stays distinguishable."""
    i = _index(name)
    return {"color": color_for(name), "linestyle": _LINESTYLES[(i // 7) % len(_LINESTYLES)]}


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
