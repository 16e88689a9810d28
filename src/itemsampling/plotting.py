"""One plotting style for the whole book: seaborn ``whitegrid``, the colour-blind-safe Okabe-Ito
palette (Okabe & Ito 2008; yellow last, since it is faint on white), labelled axes, and a stable
colour and line style per model / method name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

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


def set_style(context: str = "notebook") -> None:
    """Apply the book's style. Call once at the top of every chapter. In a notebook, figures are
    displayed as retina PNGs (:func:`sharp_inline_figures`)."""
    sns.set_theme(context=context, style="whitegrid", palette=OKABE_ITO[:7], font_scale=1.05)
    plt.rcParams.update({
        "figure.figsize": (7.0, 4.2),
        "figure.dpi": 100,
        "savefig.dpi": 200,
        "axes.titlesize": "medium",
        "legend.frameon": False,
        "lines.linewidth": 1.8,
        "figure.constrained_layout.use": True,
    })
    sharp_inline_figures()


def palette(n: int | None = None):
    """The colour-blind-safe palette (Okabe-Ito, 8 colours; yellow last)."""
    colors = OKABE_ITO if n is None else [OKABE_ITO[i % len(OKABE_ITO)] for i in range(n)]
    return sns.color_palette(colors)


def _index(name: str) -> int:
    if name not in _ASSIGNED:
        _ASSIGNED[name] = len(_ASSIGNED)
    return _ASSIGNED[name]


def color_for(name: str):
    """A stable colour for a model or method name across all figures of a session. The first seven
    names get the seven strong Okabe-Ito colours; later names reuse them (see :func:`style_for`)."""
    return sns.color_palette(OKABE_ITO[:7])[_index(name) % 7]


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
